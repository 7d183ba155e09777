"""Pre-training instances from prepared token ids: sentence pairs for a pair objective, or packed windows.

    PretrainingDataset  [CLS] A [SEP] B [SEP] instances for a pair objective:
                          nsp  B is the true continuation, or (half the time) text from another document
                          sop  A and B are consecutive text, in order or (half the time) swapped (ALBERT)
    PackedDataset       [CLS] x1 ... xW [SEP]: full-length windows of the token stream, documents joined
                        by [SEP], for MLM alone (RoBERTa's FULL-SENTENCES): no padding, no pair task;
                        with each token's document, so that attention can keep them apart (ModernBERT)
    fixed_batches       held-out batches in a fixed order, for evaluations that compare

Every random choice derives from (seed, epoch, instance index), never from the batch or the process: a resumed
run, or one on another number of processes, sees exactly the same instances. Masking is masking.py's.
"""

from __future__ import annotations

import enum
import random
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..labels import IS_NEXT, NOT_NEXT, SWAPPED
from ..objectives import PAIR_OBJECTIVES
from ..tokenizer import load_tokenizer, special_ids
from .directory import open_split, read_meta

# ================================================================ instances


@dataclass
class Instance:
    """One input sequence, before masking."""

    input_ids: np.ndarray  # (T,) int64
    token_type_ids: np.ndarray  # (T,) int64: 0 for [CLS] A [SEP], 1 for B [SEP]
    nsp_label: int  # the pair head's label. NSP: 0 = IsNext, 1 = NotNext; SOP: 0 = in order, 1 = swapped; packed: 0
    index: int  # position in this epoch's plan: with the epoch, the seed of its masking
    epoch: int
    a_doc: int
    b_doc: int
    document_ids: np.ndarray | None = None  # (T,) packed windows: each token's document, its [SEP] included


class PretrainingDataset(torch.utils.data.Dataset):
    """BERT's sentence-pair instances, built on the fly by the original algorithm.

    For each epoch a plan is made from (seed, epoch): walk each document,
    accumulate sentences up to a target length (max_seq_len - 3, or with
    `short_seq_prob` a shorter random one), end A at a random sentence boundary,
    and take B as the true continuation or, for NSP half the time, as text from
    another document (putting the unused sentences back). Building an instance
    from the plan then trims the longer of A and B until the pair fits; for SOP
    it swaps A and B half the time.
    """

    def __init__(
        self,
        data_dir: str | Path,
        split: str = "train",
        max_seq_len: int = 128,
        short_seq_prob: float = 0.1,
        pair_objective: str = "nsp",
        seed: int = 0,
        cls_id: int = 2,
        sep_id: int = 3,
    ):
        if not PAIR_OBJECTIVES.get(pair_objective).head:
            raise ValueError(f"sentence pairs are for a pair objective with a head, not {pair_objective!r}")
        self.meta = read_meta(data_dir)
        self.store = open_split(data_dir, split)
        self.split = split
        self.max_seq_len = max_seq_len
        self.short_seq_prob = short_seq_prob
        self.pair_objective = pair_objective
        self.task = PAIR_OBJECTIVES.get(pair_objective)
        self.seed = seed
        self.cls_id, self.sep_id = cls_id, sep_id
        self.pairs = bool(self.meta.get("pairs"))
        self.epoch = 0
        self._plan: tuple[int, np.ndarray] | None = None
        if self.store.num_documents == 1 and self.task.draws_other_documents and not self.pairs and split == "train":
            warnings.warn("the corpus has one document: NotNext examples come from distant parts of it", stacklevel=2)

    def __len__(self) -> int:
        return len(self.plan)

    def set_epoch(self, epoch: int) -> None:
        """Make plain integer indexing refer to `epoch`."""
        self.epoch = epoch

    def num_instances(self, epoch: int) -> int:
        return len(self.plan_for(epoch))

    @property
    def plan(self) -> np.ndarray:
        return self.plan_for(self.epoch)

    def plan_for(self, epoch: int) -> np.ndarray:
        """(n, 5) int64 rows: A's sentences [a_first, a_end), B's sentences [b_first, b_end), NSP label.

        The latest epoch's plan is cached; a loader moving through epochs builds each once.
        """
        if self._plan is None or self._plan[0] != epoch:
            plan = _build_plan(
                self.store.sentence_offsets,
                self.store.document_offsets,
                self.max_seq_len - 3,
                self.short_seq_prob,
                self.task.random_next_prob,
                self.pairs,
                self.seed,
                epoch,
            )
            self._plan = (epoch, plan)
        return self._plan[1]

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_plan"] = None  # rebuilt in each worker: cheaper than pickling it
        return state

    def __getitem__(self, key: int | tuple[int, int]) -> Instance:
        """`dataset[i]` in the current epoch, or `dataset[(epoch, i)]`."""
        epoch, index = key if isinstance(key, tuple) else (self.epoch, key)
        a_first, a_end, b_first, b_end, label = (int(v) for v in self.plan_for(epoch)[index])
        tokens_a = self.store.sentence_range_tokens(a_first, a_end)
        tokens_b = self.store.sentence_range_tokens(b_first, b_end)
        rng = random.Random(mix_seed(self.seed, epoch, index, Stream.PAIR_TRIM))
        tokens_a, tokens_b = _truncate_pair(tokens_a, tokens_b, self.max_seq_len - 3, rng)
        if self.task.swap_prob and rng.random() < self.task.swap_prob:
            tokens_a, tokens_b, label = tokens_b, tokens_a, SWAPPED
        input_ids = np.concatenate([[self.cls_id], tokens_a, [self.sep_id], tokens_b, [self.sep_id]]).astype(np.int64)
        token_type_ids = np.zeros(len(input_ids), dtype=np.int64)
        token_type_ids[len(tokens_a) + 2 :] = 1
        doc_of = self._document_of
        return Instance(input_ids, token_type_ids, label, index, epoch, doc_of(a_first), doc_of(b_first))

    def _document_of(self, sentence: int) -> int:
        return int(np.searchsorted(self.store.document_offsets, sentence, side="right") - 1)


class PackedDataset(torch.utils.data.Dataset):
    """Full-length windows over the whole split, for MLM without a pair objective.

    The split is read as one stream, each document followed by [SEP]; instance i
    of an epoch is [CLS] + the stream's window [o + i·W, o + (i+1)·W) + [SEP],
    with W = max_seq_len - 2 and an offset o drawn per epoch, so windows start at
    new places each epoch. Every instance is exactly max_seq_len long. Each token's
    document comes with it (0 for the first document of the window, 1 for the next, ...):
    [CLS] and a document's closing [SEP] belong to it, the window's last [SEP] to the last.
    """

    def __init__(
        self,
        data_dir: str | Path,
        split: str = "train",
        max_seq_len: int = 128,
        seed: int = 0,
        cls_id: int = 2,
        sep_id: int = 3,
    ):
        self.store = open_split(data_dir, split)
        self.split = split
        self.max_seq_len = max_seq_len
        self.window = max_seq_len - 2
        self.seed = seed
        self.cls_id, self.sep_id = cls_id, sep_id
        self.epoch = 0
        token_starts = self.store.sentence_offsets[self.store.document_offsets]  # (D + 1,) first token of each document
        documents = np.arange(len(token_starts) - 1)
        self.stream_starts = token_starts[:-1] + documents  # (D,) where each document starts in the stream
        self.stream_ends = token_starts[1:] + documents  # (D,) its [SEP]'s position in the stream
        self.stream_length = int(token_starts[-1]) + len(documents)

    def __len__(self) -> int:
        return self.num_instances(self.epoch)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _offset(self, epoch: int) -> int:
        if not epoch:
            return 0
        return int(np.random.default_rng(mix_seed(self.seed, epoch, Stream.WINDOW_OFFSET)).integers(self.window))

    def num_instances(self, epoch: int) -> int:
        return max(0, (self.stream_length - self._offset(epoch)) // self.window)

    def __getitem__(self, key: int | tuple[int, int]) -> Instance:
        epoch, index = key if isinstance(key, tuple) else (self.epoch, key)
        start = self._offset(epoch) + index * self.window
        end = start + self.window
        first_doc = int(
            np.searchsorted(self.stream_ends, start, side="left")
        )  # the document (or its [SEP]) holding `start`
        pieces, owners, doc = [], [], first_doc
        while start < end:
            token_from = max(start, int(self.stream_starts[doc]))
            token_to = min(end, int(self.stream_ends[doc]))
            if token_to > token_from:  # stream position p of document d is token p - d
                pieces.append(np.asarray(self.store.tokens[token_from - doc : token_to - doc], dtype=np.int64))
            if token_to < end:
                pieces.append(np.array([self.sep_id], dtype=np.int64))  # the document ends inside the window
            owners.append(np.full(min(end, token_to + 1) - start, doc - first_doc, dtype=np.int64))
            start = token_to + 1
            doc += 1
        input_ids = np.concatenate([[self.cls_id], *pieces, [self.sep_id]]).astype(np.int64)
        document_ids = np.concatenate([[0], *owners, [doc - 1 - first_doc]])  # (T,): [CLS] with the first
        zeros = np.zeros(len(input_ids), dtype=np.int64)
        return Instance(input_ids, zeros, 0, index, epoch, first_doc, doc - 1, document_ids)


def pretraining_dataset(
    data_dir: str | Path, split: str, seq_len: int, pair_objective: str, seed: int, short_seq_prob: float = 0.0
):
    """The dataset a pair objective trains on: sentence pairs for nsp/sop, packed windows for none."""
    ids = special_ids(load_tokenizer(data_dir))
    if not PAIR_OBJECTIVES.get(pair_objective).head:
        return PackedDataset(data_dir, split, seq_len, seed, ids.cls, ids.sep)
    return PretrainingDataset(data_dir, split, seq_len, short_seq_prob, pair_objective, seed, ids.cls, ids.sep)


def fixed_batches(dataset, collator: Callable[[list[Instance]], dict], batch_size: int, max_batches: int) -> list[dict]:
    """Up to `max_batches` batches from epoch 0, in a fixed shuffled order (not just the first documents)."""
    n = dataset.num_instances(0)
    rng = np.random.default_rng(mix_seed(dataset.seed, 0, Stream.EVAL_SAMPLE))
    order = rng.permutation(n)[: batch_size * max_batches]
    return [
        collator([dataset[(0, int(i))] for i in order[s : s + batch_size]]) for s in range(0, len(order), batch_size)
    ]


@enum.unique
class Stream(enum.IntEnum):
    """The random streams of a run, one number each, mixed into every seed drawn from the run's (`mix_seed`): two
    draws that shared a number would be correlated without anyone seeing it. The numbers are what every golden
    loss and resumed run was made with; a new stream takes the next one, and none is ever renumbered."""

    EPOCH_PLAN = 0  # an epoch's instances: documents cut into chunks, target lengths, NSP partners (instances.py)
    PAIR_TRIM = 1  # where an instance's over-long pair loses tokens (instances.py)
    MASKS = 2  # which tokens are masked, and as what (masking.py)
    LOADER_ORDER = 3  # the order an epoch's instances are batched in (training/loader.py)
    EVAL_SAMPLE = 4  # which held-out instances the evaluation batches hold (fixed_batches)
    MASK_THINNING = 5  # the draws by which a mask-rate schedule drops masks (masking.py)
    WINDOW_OFFSET = 6  # where a packed run's windows start in an epoch (instances.py)
    GENERATOR_SAMPLING = 7  # the draws by which ELECTRA's generator samples its replacements (masking.py)


def mix_seed(*values: int) -> int:
    """A well-spread 63-bit seed from several integers (order matters); the last is the `Stream`."""
    return int(np.random.SeedSequence([v & 0xFFFFFFFF for v in values]).generate_state(2, np.uint64)[0] >> 1)


def _truncate_pair(a: np.ndarray, b: np.ndarray, limit: int, rng: random.Random) -> tuple[np.ndarray, np.ndarray]:
    """Trim the longer of A and B, at a random end, until both fit in `limit` tokens (BERT's rule)."""
    a_start, a_end, b_start, b_end = 0, len(a), 0, len(b)
    while (a_end - a_start) + (b_end - b_start) > limit:
        if (a_end - a_start) > (b_end - b_start):
            if rng.random() < 0.5:
                a_start += 1
            else:
                a_end -= 1
        elif rng.random() < 0.5:
            b_start += 1
        else:
            b_end -= 1
    return a[a_start:a_end], b[b_start:b_end]


def _build_plan(
    sentence_offsets: np.ndarray,
    document_offsets: np.ndarray,
    max_tokens: int,
    short_seq_prob: float,
    random_next_prob: float,
    pairs: bool,
    seed: int,
    epoch: int,
) -> np.ndarray:
    """BERT's create_instances_from_document, run over sentence lengths only.

    One deviation: the short target length is drawn per chunk rather than per
    document, because a document here may be a whole book.
    """
    rng = random.Random(mix_seed(seed, epoch, Stream.EPOCH_PLAN))
    lengths = np.diff(sentence_offsets).tolist()
    doc_starts = document_offsets.tolist()
    num_docs = len(doc_starts) - 1
    rows: list[tuple[int, int, int, int, int]] = []
    if pairs:
        for d in range(num_docs):
            first = doc_starts[d]
            if doc_starts[d + 1] - first < 2:
                continue  # a pair whose A or B tokenised to nothing
            if num_docs > 1 and rng.random() < random_next_prob:
                other = _other_document(rng, num_docs, d)
                if doc_starts[other + 1] - doc_starts[other] < 2:
                    continue
                rows.append((first, first + 1, doc_starts[other] + 1, doc_starts[other] + 2, NOT_NEXT))
            else:
                rows.append((first, first + 1, first + 1, first + 2, IS_NEXT))
        return np.array(rows, dtype=np.int64).reshape(-1, 5)
    for d in range(num_docs):
        doc_first, doc_last = doc_starts[d], doc_starts[d + 1]
        target = _target_length(rng, max_tokens, short_seq_prob)
        chunk_first, chunk_len, i = doc_first, 0, doc_first
        while i < doc_last:
            chunk_len += lengths[i]
            if i == doc_last - 1 or chunk_len >= target:
                chunk_end = i + 1  # the chunk is sentences chunk_first .. i
                n = chunk_end - chunk_first
                a_end = chunk_first + (rng.randint(1, n - 1) if n >= 2 else 1)  # A ends at a random sentence boundary
                row = None
                if rng.random() < random_next_prob:
                    row = _random_next(rng, d, doc_starts, lengths, chunk_first, a_end, chunk_end, target)
                    if row is not None:
                        i = a_end - 1  # the sentences of the chunk not used go back for the next instance
                if row is None:
                    # IsNext: B is the rest of the chunk, or the next sentence when A took the whole chunk.
                    b_end = chunk_end if a_end < chunk_end else min(chunk_end + 1, doc_last)
                    if b_end > a_end:
                        row = (chunk_first, a_end, a_end, b_end, IS_NEXT)
                        i = b_end - 1
                if row is not None:
                    rows.append(row)
                target = _target_length(rng, max_tokens, short_seq_prob)
                chunk_first, chunk_len = i + 1, 0
            i += 1
    return np.array(rows, dtype=np.int64).reshape(-1, 5)


def _target_length(rng: random.Random, max_tokens: int, short_seq_prob: float) -> int:
    """Usually the full length; sometimes shorter, so the model also sees short inputs (as at fine-tuning)."""
    return rng.randint(2, max_tokens) if rng.random() < short_seq_prob else max_tokens


def _other_document(rng: random.Random, num_docs: int, d: int) -> int:
    other = rng.randrange(num_docs - 1)
    return other + (other >= d)


def _random_next(
    rng: random.Random,
    d: int,
    doc_starts: list[int],
    lengths: list[int],
    a_first: int,
    a_end: int,
    chunk_end: int,
    target: int,
):
    """NotNext: B from another document; in a one-document corpus, from a distant part of this one."""
    num_docs = len(doc_starts) - 1
    b_target = max(1, target - sum(lengths[a_first:a_end]))
    if num_docs > 1:
        other = _other_document(rng, num_docs, d)
        first, last = doc_starts[other], doc_starts[other + 1]
        start = rng.randrange(first, last)
    else:
        first, last = doc_starts[0], doc_starts[1]
        # Never the true continuation: start at least two chunk-lengths away from A on either side.
        margin = 2 * (chunk_end - a_first)
        tries = (rng.randrange(first, last) for _ in range(8))
        start = next((s for s in tries if s < a_first - margin or s > chunk_end + margin), None)
        if start is None:
            return None
    end, b_tokens = start, 0
    while end < last and b_tokens < b_target:
        b_tokens += lengths[end]
        end += 1
    return (a_first, a_end, start, end, NOT_NEXT)
