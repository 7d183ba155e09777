"""BERT's dynamic masking: which tokens of each instance the model predicts, and what it sees there.

    MaskingConfig       the rate (15% in BERT) and the 80% [MASK] / 10% random / 10% unchanged split
    MaskingCollator     pads instances into a batch and masks each, seeded by (seed, epoch, instance index)
    thin_masks          a mask-rate schedule: masks chosen at the peak rate, then thinned to the current one
    packed_documents    a batch's document ids, where a packed window holds more than one document

Every random choice derives from (seed, epoch, instance index), never from the batch or the process: a batch
split across processes is masked exactly as the whole batch would be, and a resumed run sees the same masks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from tokenizers import Tokenizer

from ..errors import UserError
from ..labels import IGNORE_INDEX
from ..tokenizer import all_special_ids, special_ids, word_starts
from .instances import Instance, Stream, mix_seed


@dataclass(frozen=True)
class MaskingConfig:
    mask_prob: float = 0.15
    mask_token_prob: float = 0.8
    random_token_prob: float = 0.1
    max_predictions: int = 20
    whole_word_mask: bool = False
    thinning_draws: bool = False  # also a uniform draw per position, by which a mask-rate schedule drops masks
    sampling_draws: bool = False  # also one by which ELECTRA's generator samples the token it puts there

    @classmethod
    def for_evaluation(cls, seq_len: int, whole_word_mask: bool = False) -> MaskingConfig:
        """BERT's standard 15% and 80/10/10, with a cap that never binds: held-out scores compare across runs."""
        return cls(max_predictions=math.ceil(0.15 * seq_len), whole_word_mask=whole_word_mask)


class MaskingCollator:
    """Pads a list of instances into a batch and applies dynamic MLM masking.

    Per sequence: n = the non-special tokens; round(n · mask_prob) of them
    (at least 1, at most max_predictions) are chosen; of those, 80% become
    [MASK], 10% a random non-special token, 10% stay. Labels are the original
    ids at chosen positions and -100 elsewhere.
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        config: MaskingConfig = MaskingConfig(),
        seed: int = 0,
        pad_multiple: int = 8,
        document_ids: bool = False,
    ):
        self.config = config
        self.document_ids = document_ids  # batches of packed windows carry each token's document
        self.seed = seed
        self.pad_multiple = pad_multiple
        self.ids = special_ids(tokenizer)
        self.vocab_size = tokenizer.get_vocab_size()
        self.special = np.zeros(self.vocab_size, dtype=bool)
        self.special[all_special_ids(tokenizer)] = True  # a released tokenizer's [unused...] and <|endoftext|> too
        self.replacements = np.flatnonzero(~self.special)  # random tokens are never special
        # Whole-word masking: True for a piece that continues the word before it, as the tokenizer marks words
        self.continuation = None
        if config.whole_word_mask:
            starts = word_starts(tokenizer)
            if starts is None:
                raise UserError(
                    "--whole-word-mask needs to know where words start, and this tokenizer marks neither ## "
                    "continuations nor Ġ or ▁ word starts: train without it"
                )
            self.continuation = ~np.array(starts)

    def mask(self, input_ids: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """One sequence (T,) -> (masked ids (T,), labels (T,))."""
        cfg = self.config
        rng = np.random.default_rng(seed)
        candidates = np.flatnonzero(~self.special[input_ids])  # positions of real, non-special tokens
        labels = np.full(len(input_ids), IGNORE_INDEX, dtype=np.int64)
        masked = input_ids.copy()
        if len(candidates) == 0:
            return masked, labels
        budget = min(cfg.max_predictions, max(1, int(round(len(candidates) * cfg.mask_prob))))
        if self.continuation is None:
            chosen = rng.permutation(candidates)[:budget]
        else:
            chosen = self._choose_whole_words(input_ids, candidates, budget, rng)
        labels[chosen] = input_ids[chosen]
        roll = rng.random(len(chosen))
        to_mask = chosen[roll < cfg.mask_token_prob]
        to_random = chosen[(roll >= cfg.mask_token_prob) & (roll < cfg.mask_token_prob + cfg.random_token_prob)]
        masked[to_mask] = self.ids.mask
        masked[to_random] = self.replacements[rng.integers(0, len(self.replacements), len(to_random))]
        return masked, labels

    def _word_starts(self, input_ids: np.ndarray) -> np.ndarray:
        """(T,) bool: where a word begins. A piece after a special token begins one, whatever it looks like (a
        byte-level text's first word has no "Ġ"), and a window may begin inside a word."""
        starts = ~self.continuation[input_ids]  # (T,)
        starts[1:] |= self.special[input_ids[:-1]]
        starts[0] = True
        return starts

    def _choose_whole_words(self, input_ids: np.ndarray, candidates: np.ndarray, budget: int, rng) -> np.ndarray:
        """All pieces of a word go together; a word that would overshoot the budget is skipped (as in BERT)."""
        starts = self._word_starts(input_ids)[candidates]
        starts[0] = True
        words = np.split(candidates, np.flatnonzero(starts)[1:])
        chosen: list[np.ndarray] = []
        count = 0
        for w in rng.permutation(len(words)):
            if count >= budget:
                break
            if count + len(words[w]) > budget:
                continue
            chosen.append(words[w])
            count += len(words[w])
        return np.sort(np.concatenate(chosen)) if chosen else candidates[:0]

    def _thinning_draws(self, input_ids: np.ndarray, seed: int) -> np.ndarray:
        """(T,) uniform draws for thin_masks; with whole-word masking, one per word, so words are thinned whole."""
        draws = np.random.default_rng(seed).random(len(input_ids))
        if self.continuation is None:
            return draws
        starts = self._word_starts(input_ids)  # (T,) the first piece of every word ([CLS] included)
        return draws[np.flatnonzero(starts)][np.cumsum(starts) - 1]

    def __call__(self, instances: list[Instance]) -> dict[str, torch.Tensor]:
        longest = max(len(x.input_ids) for x in instances)
        width = -(-longest // self.pad_multiple) * self.pad_multiple
        B = len(instances)
        input_ids = np.full((B, width), self.ids.pad, dtype=np.int64)
        token_type_ids = np.zeros((B, width), dtype=np.int64)
        attention_mask = np.zeros((B, width), dtype=np.int64)
        mlm_labels = np.full((B, width), IGNORE_INDEX, dtype=np.int64)
        draws = np.ones((B, width), dtype=np.float32) if self.config.thinning_draws else None
        sampling = np.full((B, width), 0.5, dtype=np.float32) if self.config.sampling_draws else None
        for row, x in enumerate(instances):
            n = len(x.input_ids)
            masked, labels = self.mask(x.input_ids, mix_seed(self.seed, x.epoch, x.index, Stream.MASKS))
            input_ids[row, :n] = masked
            token_type_ids[row, :n] = x.token_type_ids
            attention_mask[row, :n] = 1
            mlm_labels[row, :n] = labels
            if draws is not None:
                seed = mix_seed(self.seed, x.epoch, x.index, Stream.MASK_THINNING)
                draws[row, :n] = self._thinning_draws(x.input_ids, seed)
            if sampling is not None:
                seed = mix_seed(self.seed, x.epoch, x.index, Stream.GENERATOR_SAMPLING)
                sampling[row, :n] = np.random.default_rng(seed).random(n)
        batch = {
            "input_ids": torch.from_numpy(input_ids),
            "token_type_ids": torch.from_numpy(token_type_ids),
            "attention_mask": torch.from_numpy(attention_mask),
            "mlm_labels": torch.from_numpy(mlm_labels),
            "nsp_labels": torch.tensor([x.nsp_label for x in instances], dtype=torch.long),
        }
        if draws is not None:
            batch["thinning_draws"] = torch.from_numpy(draws)
        if sampling is not None:
            batch["sampling_draws"] = torch.from_numpy(sampling)
        if self.document_ids and instances[0].document_ids is not None:
            documents = np.full((B, width), -1, dtype=np.int64)  # padding: a document of its own
            for row, x in enumerate(instances):
                documents[row, : len(x.document_ids)] = x.document_ids
            batch["document_ids"] = torch.from_numpy(documents)
        return batch


def packed_documents(batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
    """The batch's document ids (B, T), where some window holds more than one document; None where none does,
    so that the model needs no mask (decided on the CPU copy, before the batch moves to the device)."""
    documents = batch.get("document_ids")
    if documents is None or not bool((documents[:, 1:] != documents[:, :-1]).any()):
        return None
    return documents


def thin_masks(batch: dict[str, torch.Tensor], keep: float) -> dict[str, torch.Tensor]:
    """Un-choose each MLM position whose draw is >= `keep`: its original token goes back, its label goes.

    How a mask-rate schedule lowers the rate while training: the collator chose
    tokens at the peak rate, and keeping each with probability rate / peak gives
    the current rate in expectation. The kept positions are a uniform sample of
    the chosen ones, so their 80/10/10 split is unchanged.
    """
    draws = batch["thinning_draws"]  # (B, T), uniform in [0, 1)
    labels = batch["mlm_labels"]  # (B, T), the original id at chosen positions
    dropped = (labels != IGNORE_INDEX) & (draws >= keep)  # (B, T)
    rest = {k: v for k, v in batch.items() if k != "thinning_draws"}
    return {
        **rest,
        "input_ids": torch.where(dropped, labels, batch["input_ids"]),
        "mlm_labels": torch.where(dropped, IGNORE_INDEX, labels),
    }
