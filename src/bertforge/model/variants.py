"""The encoder's variants of where a token is: its position scheme and the bias its attention adds. Each is one
object that everything else asks: the config (its name, its help and what it requires of the shape), the encoder
(what table to add, whether queries and keys turn, what bias attention adds) and the export (whether a
`transformers` class computes it, or the directory must carry modeling_bertforge.py). A new one is an object here
and a line that registers it (docs/architecture.md walks through one).

Torch is imported only where a variant computes something: the configs are read by verbs that never load it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def sinusoidal_table(num_positions: int, dim: int, rms: float) -> torch.Tensor:
    """Fixed positions of "Attention Is All You Need": sin on even, cos on odd dims, scaled so that the entries'
    root mean square is `rms` (the paper's unscaled table has 1/√2)."""
    import torch

    position = torch.arange(num_positions, dtype=torch.float32).unsqueeze(1)  # (P, 1)
    inv_freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))  # (dim/2,)
    table = torch.zeros(num_positions, dim)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq[: dim // 2])
    return table * (rms * math.sqrt(2))  # (P, dim): each sin/cos pair has sin² + cos² = 1


def alibi_bias(num_heads: int, seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """ALiBi's distance penalty, symmetric for an encoder: -m_h·|i - j|, with slopes m_h = 1/2, 1/4, 1/8, ...

    Added to the attention scores, it makes each head prefer near keys from the
    first step (head h mostly within about 2^(h+1) tokens) instead of having to
    learn from the position table which positions are neighbours.
    """
    import torch

    slopes = 2.0 ** -torch.arange(1, num_heads + 1, dtype=torch.float32, device=device)  # (nh,)
    position = torch.arange(seq_len, dtype=torch.float32, device=device)
    distance = (position[:, None] - position[None, :]).abs()  # (T, T)
    return -slopes[:, None, None] * distance  # (nh, T, T)


@dataclass(frozen=True)
class PositionScheme:
    """How a token's position reaches the encoder. The embeddings keep a position table's slot in every scheme
    (the directories carry it); a scheme that adds nothing leaves it frozen at zero."""

    name: str
    help: str  # for --position-embedding, after the name
    added: bool = True  # its table is added to the token embeddings
    fixed: Callable[[int, int, float], torch.Tensor] | None = None  # (positions, width, rms) -> the frozen table
    rotary: bool = False  # attention turns queries and keys by their position's angle (the head size must be even)
    native: bool = True  # transformers' BERT computes it; else the saved directory carries its own code


@dataclass(frozen=True)
class AttentionBias:
    """What attention adds to its scores before the softmax, the same for every layer."""

    name: str
    help: str  # for --attention-bias, after the name
    bias: Callable[..., torch.Tensor] | None = None  # (num_heads, seq_len, device) -> (nh, T, T)
    native: bool = True  # transformers' BERT computes it (only "none" does)
    pair_caution: str | None = None  # said when a run with a pair objective (NSP, SOP) starts with it


POSITION_SCHEMES: dict[str, PositionScheme] = {}
ATTENTION_BIASES: dict[str, AttentionBias] = {}


def register_position_scheme(scheme: PositionScheme) -> PositionScheme:
    """Make `scheme` a choice of --position-embedding (ModelConfig's field) everywhere at once."""
    if scheme.name in POSITION_SCHEMES:
        raise ValueError(f"a position scheme named {scheme.name!r} exists")
    POSITION_SCHEMES[scheme.name] = scheme
    return scheme


def register_attention_bias(bias: AttentionBias) -> AttentionBias:
    """Make `bias` a choice of --attention-bias (ModelConfig's field) everywhere at once."""
    if bias.name in ATTENTION_BIASES:
        raise ValueError(f"an attention bias named {bias.name!r} exists")
    ATTENTION_BIASES[bias.name] = bias
    return bias


def choices_help(table: dict) -> str:
    """The help of a variant field: each choice by name, then what it does."""
    return "; ".join(f"{variant.name}: {variant.help}" for variant in table.values())


register_position_scheme(PositionScheme("learned", "a trained table (BERT)"))
register_position_scheme(
    PositionScheme(
        "sinusoidal",
        "a fixed table, as in the Transformer paper, at the token embeddings' initial size",
        # At the token embeddings' scale: unscaled (entries of RMS 0.71 against 0.02) it drowned the tokens in the
        # sum that LayerNorm sees, and a budget run stayed at the unigram level for 800 steps. The paper balanced
        # the two by multiplying the token embeddings by √H instead.
        fixed=sinusoidal_table,
    )
)
register_position_scheme(
    PositionScheme(
        "rotary",
        "RoPE (Su et al. 2021, as in ModernBERT): queries and keys turned by their position's angle, so attention "
        "sees relative positions; no table, and the directory carries its own code for transformers",
        added=False,
        rotary=True,
        native=False,
    )
)
register_attention_bias(AttentionBias("none", "attention scores as they are (BERT)"))
register_attention_bias(
    AttentionBias(
        "alibi",
        "a fixed penalty -m·|i-j| on attention scores that makes every head start out looking near (ALiBi, Press "
        "et al. 2022, made symmetric for an encoder; slopes 1/2, 1/4, ... per head, so a model of few heads sees "
        "little past a dozen tokens and its [CLS] cannot read a sentence pair: an NSP head stays at chance). The "
        "positions stay too, since the penalty cannot tell left from right. No transformers class has it: the model "
        "directory carries its own, loaded with trust_remote_code=True",
        bias=alibi_bias,
        native=False,
        pair_caution="ALiBi keeps each head near (slopes 1/2 to 1/2^num_heads), so [CLS] may not read the second "
        "text: the pair head stayed at chance with it on tiny (--position-embedding rotary --attention-bias none "
        "let it learn)",
    )
)
