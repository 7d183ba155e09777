"""Computing on real tokens only: the sequences of a padded batch, packed side by side into fewer rows.

A fine-tuning or inference batch is padded to its longest sequence, and every matmul, LayerNorm and feed-forward
runs on the padding too. Packed instead, first-fit into rows as wide as the batch, the same tokens need fewer rows:

    padded (B=4, T=6)          packed (R=2, T=6), document ids
    a a a a a a                a a a a a a       0 0 0 0 0 0
    b b . . . .      ──►       c c c b b d       2 2 2 1 1 3
    c c c . . .
    d . . . . .

The encoder runs on the packed rows with the document mask it already has for packed pre-training (attention
stays inside each sequence, positions restart at each), which is the same arithmetic as the padded batch's on
every real token; the result is scattered back to (B, T, H). ModernBERT's unpadding removes the padding the same
way; on the CPU, where there is no variable-length attention kernel, rows of sequences with a block-diagonal
mask are the variable-length layout that SDPA takes.

`UNPADDING` chooses when: "auto" packs a batch when it saves at least `AUTO_MIN_SAVING` of the rows, as
benchmarks/bench_finetune.py measured to pay (a full batch has nothing to save); "always" and "never" force it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from ..config import UNPADDING_MODES as MODES

# Packing costs a gather, a scatter and a (R, 1, T, T) mask; below a quarter of the rows saved it measured no
# faster (benchmarks/README.md, "What holds on every machine").
AUTO_MIN_SAVING = 0.25
_mode = "auto"


def set_unpadding(mode: str) -> None:
    """The process-wide choice, as torch.backends' kernel switches are: `--unpad` sets it for one command."""
    global _mode
    if mode not in MODES:
        raise ValueError(f"unpadding is one of {', '.join(MODES)}, not {mode!r}")
    _mode = mode


def unpadding() -> str:
    return _mode


@contextmanager
def unpadding_mode(mode: str) -> Iterator[None]:
    """`set_unpadding(mode)` for the block, the mode before it restored after."""
    before = _mode
    set_unpadding(mode)
    try:
        yield
    finally:
        set_unpadding(before)


@dataclass(frozen=True)
class Packing:
    """Where the real tokens of a padded (B, T) batch sit in (R, T) packed rows."""

    batch: int  # B
    width: int  # T
    rows: int  # R
    source: torch.Tensor  # (N,) each real token's index in the padded batch, flattened (B * T)
    target: torch.Tensor  # (N,) its index in the packed rows, flattened (R * T)
    document_ids: torch.Tensor  # (R, T) which sequence each slot holds; -1 for an empty slot

    def pack(self, padded: torch.Tensor, fill: int | float = 0) -> torch.Tensor:
        """(B, T, ...) -> (R, T, ...): each real token moved to its slot, empty slots `fill`."""
        flat = padded.reshape(self.batch * self.width, *padded.shape[2:])
        packed = flat.new_full((self.rows * self.width, *padded.shape[2:]), fill)
        packed = packed.index_copy(0, self.target, flat.index_select(0, self.source))
        return packed.view(self.rows, self.width, *padded.shape[2:])

    def run(
        self, encode, input_ids: torch.Tensor, token_type_ids: torch.Tensor, output_hidden_states: bool, pad_id: int
    ):
        """`encode` (BertModel.encode) on the packed rows, each sequence its own document: its last hidden states
        (B, T, H) and, where asked for, every layer's, back in their padded places."""
        x, hidden_states, _ = encode(
            self.pack(input_ids, fill=pad_id),  # (R, T)
            self.pack(token_type_ids),
            None,  # the document ids keep every sequence (and the empty slots) to itself
            self.document_ids,
            output_hidden_states,
            False,
        )
        return self.unpack(x), [self.unpack(h) for h in hidden_states] if hidden_states is not None else None

    def unpack(self, packed: torch.Tensor) -> torch.Tensor:
        """(R, T, ...) -> (B, T, ...): each real token back in its place, padding positions zero."""
        flat = packed.reshape(self.rows * self.width, *packed.shape[2:])
        padded = flat.new_zeros((self.batch * self.width, *packed.shape[2:]))
        padded = padded.index_copy(0, self.source, flat.index_select(0, self.target))
        return padded.view(self.batch, self.width, *packed.shape[2:])


def plan_packing(
    attention_mask: torch.Tensor | None, document_ids: torch.Tensor | None = None, output_attentions: bool = False
) -> Packing | None:
    """The packing of a padded batch (attention_mask (B, T), 1 on real tokens), or None where it keeps its padded
    layout: a batch with no mask, one packed already (`document_ids`), one whose attention probabilities are
    asked for (they are per padded row), under "never", a batch without padding, or under "auto" one whose
    packing saves too little."""
    if _mode == "never" or attention_mask is None or document_ids is not None or output_attentions:
        return None
    B, T = attention_mask.shape
    lengths = attention_mask.sum(dim=1).tolist()  # the one read back from the device
    if min(lengths) == T:  # no padding to remove
        return None
    # First fit, longest first: each sequence goes to the first row with room for it.
    free: list[int] = []
    starts = [0] * B  # each sequence's first slot, flattened (R * T)
    for b in sorted(range(B), key=lambda b: -lengths[b]):
        row = next((r for r, room in enumerate(free) if room >= lengths[b]), len(free))
        if row == len(free):
            free.append(T)
        starts[b] = row * T + T - free[row]
        free[row] -= lengths[b]
    rows = len(free)
    if _mode == "auto" and rows > (1 - AUTO_MIN_SAVING) * B:
        return None
    real = attention_mask.bool()  # (B, T)
    source = real.flatten().nonzero().squeeze(1)  # (N,)
    offset = (real.long().cumsum(dim=1) - 1).flatten()[source]  # (N,) each token's place in its sequence
    sequence = source // T  # (N,)
    target = torch.tensor(starts, device=attention_mask.device)[sequence] + offset  # (N,)
    document_ids = torch.full((rows * T,), -1, dtype=torch.long, device=attention_mask.device)
    document_ids[target] = sequence
    return Packing(B, T, rows, source, target, document_ids.view(rows, T))


def document_positions(document_ids: torch.Tensor) -> torch.Tensor:
    """(B, T) document ids of a packed window -> (B, T) positions, from 0 at each document's first token."""
    index = torch.arange(document_ids.shape[1], device=document_ids.device).expand_as(document_ids)  # (B, T)
    starts = torch.ones_like(document_ids, dtype=torch.bool)
    starts[:, 1:] = document_ids[:, 1:] != document_ids[:, :-1]  # (B, T): where a document begins
    return index - torch.where(starts, index, 0).cummax(dim=1).values  # (B, T)


def document_mask(document_ids: torch.Tensor) -> torch.Tensor:
    """(B, T) document ids -> (B, 1, T, T) bool: True where query and key are of one document."""
    return (document_ids[:, :, None] == document_ids[:, None, :])[:, None]
