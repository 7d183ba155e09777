"""Texts (or text pairs) tokenised once, then cut into padded batches of similar length.

Inference (`Bert.embed`, `Classifier.classify`) and fine-tuning share this: the
encoding is [CLS] a [SEP] (b [SEP]) with segment ids, truncated longest-first as
BERT's fine-tuning code does, and batches are grouped by length so they carry
little padding.
"""

from __future__ import annotations

import numpy as np
import tokenizers
import torch
from tokenizers import Encoding, Tokenizer

from ..errors import UserError
from ..tokenizer import copy_tokenizer, special_ids

Encoded = list[tuple[list[int], list[int]]]  # (token ids, segment ids) per text

# Releases whose truncation stops tokenizing at the window's end, so `Encoding.overflowing` comes back short or empty:
# on 0.23.2 a 30-sentence context gave 2 windows where 0.23.3 gives 8 (tests/test_tasks.py, on an NVIDIA H100 machine).
CUT_SHORT_OVERFLOW = ("0.23.1", "0.23.2")


def windowing_tokenizer(tokenizer: Tokenizer, seq_len: int, stride: int, strategy: str = "longest_first") -> Tokenizer:
    """A copy that cuts a long text into windows of `seq_len` tokens, special tokens in each, every window after
    the first repeating the last `stride` tokens of the one before. `strategy="only_second"` windows the second
    text of a pair and keeps the first whole (a question over a long context).

    The overlap is kept under half a window, so that short windows (a model with a
    small position table) still advance.
    """
    if tokenizers.__version__ in CUT_SHORT_OVERFLOW:
        raise UserError(
            f"tokenizers {tokenizers.__version__} drops the windows of a long text after the first "
            "(huggingface/tokenizers#2091), which loses what they hold: reading long texts in windows needs another "
            "version, e.g. pip install 'tokenizers>=0.23.3'"
        )
    copy = copy_tokenizer(tokenizer)
    copy.enable_truncation(seq_len, stride=min(stride, seq_len // 2), strategy=strategy)
    copy.no_padding()
    return copy


def windows(tokenizer: Tokenizer, *texts: str) -> list[Encoding]:
    """The encodings of every window of a text (or a pair) that `tokenizer` (a windowing_tokenizer) cuts. The first
    text of a pair windowed "only_second" (a question) is kept whole in every window: one that leaves no room for
    the second is a user error."""
    try:
        first = tokenizer.encode(*texts)
    except Exception as e:  # the Rust side's bare Exception
        if "Truncation error" not in str(e):
            raise
        limit = tokenizer.truncation["max_length"]
        raise UserError(
            f"{texts[0][:80]!r} leaves no room for its context in a window of {limit} tokens (it is kept whole in "
            "each): shorten it or raise --seq-len"
        ) from None
    return [first, *first.overflowing]


class TextBatcher:
    """Tokenises texts once and builds padded batches from them."""

    def __init__(self, tokenizer: Tokenizer, max_seq_len: int):
        self.tokenizer = copy_tokenizer(tokenizer)  # truncation is set on it
        self.max_seq_len = max_seq_len
        self.tokenizer.enable_truncation(max_seq_len)
        self.pad = special_ids(tokenizer).pad
        self.cut = 0  # how many texts (or pairs) the last `encode` cut to max_seq_len tokens

    def encode(self, texts: list[str], pairs: list[str] | None = None) -> Encoded:
        if pairs is None:
            encodings = self.tokenizer.encode_batch(texts)
        else:
            encodings = self.tokenizer.encode_batch(list(zip(texts, pairs)))
        self.cut = sum(1 for e in encodings if e.overflowing)
        return [(e.ids, e.type_ids) for e in encodings]

    def encode_windows(self, texts: list[str]) -> tuple[Encoded, np.ndarray]:
        """Every text whole, in windows of the batcher's length, each after the first repeating the last quarter of
        the one before: the windows of all texts, in order, and (windows,) the index of the text each belongs to."""
        windowing = windowing_tokenizer(self.tokenizer, self.max_seq_len, stride=self.max_seq_len // 4)
        encoded, owners = [], []
        for i, text in enumerate(texts):
            for window in windows(windowing, text):
                encoded.append((window.ids, window.type_ids))
                owners.append(i)
        return encoded, np.array(owners, dtype=np.int64)

    def batch(self, encoded: Encoded, indices: list[int]) -> dict[str, torch.Tensor]:
        """input_ids, token_type_ids and attention_mask, each (len(indices), longest), padded on the right."""
        width = max(len(encoded[i][0]) for i in indices)
        input_ids = np.full((len(indices), width), self.pad, dtype=np.int64)
        token_type_ids = np.zeros((len(indices), width), dtype=np.int64)
        for row, i in enumerate(indices):
            ids, types = encoded[i]
            input_ids[row, : len(ids)] = ids
            token_type_ids[row, : len(types)] = types
        input_ids = torch.from_numpy(input_ids)
        return {
            "input_ids": input_ids,
            "token_type_ids": torch.from_numpy(token_type_ids),
            "attention_mask": (input_ids != self.pad).long(),
        }


def mean_over_windows(per_window: np.ndarray, owners: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, D) each text's mean of its windows' rows of (windows, D) `per_window`, and (n,) how many it has."""
    counts = np.bincount(owners, minlength=n)  # (n,): every text has at least one window
    sums = np.zeros((n, per_window.shape[1]), dtype=np.float64)
    np.add.at(sums, owners, per_window)
    return (sums / counts[:, None]).astype(np.float32), counts


def length_buckets(encoded: Encoded, batch_size: int) -> list[list[int]]:
    """Indices sorted by length, cut into batches: little padding at evaluation and inference."""
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i][0]))
    return [order[s : s + batch_size] for s in range(0, len(order), batch_size)]


def shuffled_buckets(encoded: Encoded, batch_size: int, rng: np.random.Generator, pool: int = 50) -> list[list[int]]:
    """Training batches of similar lengths, in random order.

    Shuffle, sort within pools of `pool` batches by length, cut, then shuffle the
    batches: randomness for SGD, little padding for speed.
    """
    order = rng.permutation(len(encoded)).tolist()
    batches = []
    for start in range(0, len(order), batch_size * pool):
        chunk = sorted(order[start : start + batch_size * pool], key=lambda i: len(encoded[i][0]))
        batches += [chunk[s : s + batch_size] for s in range(0, len(chunk), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]
