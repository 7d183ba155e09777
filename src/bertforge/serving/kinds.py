"""What an exported graph answers: one object per kind of head, holding everything the export, the graph checks and
the served graph need to know of that kind, so that none of them switches on it.

    kind_of(record)     the kind an architecture's record answers (its `answers`: families/architectures.py)

Each kind says how the graph computes its outputs from the model (`outputs`), which of them the config fixes the
width of (`widths`), what no answer of it may hold (`unbounded`), how the export's check texts are batched for it
(`check_batches`), how the int8 gate reads one of its answers against PyTorch's (`agreement`), and what the served
graph's call returns in place of the PyTorch head's (`head_answer`). A head of your own answers one of these kinds,
or registers its own: `KINDS.register(MyKind())`.
"""

from __future__ import annotations

import numpy as np
import torch

from ..data.batching import TextBatcher, length_buckets
from ..errors import UserError
from ..families.architectures import BATCH, CHOICE, ENCODER, MASKED_LM, SEQUENCE, SPANS, TOKENS, Architecture
from ..model.heads import SINGLE_LABEL, sentence_vectors
from ..modelfiles.heads import label_names
from ..registry import Registry

Batch = dict[str, torch.Tensor]


class AnswerKind:
    """A kind of answer, as a graph gives it: the base holds what most kinds share (one logits output, one row per
    input, single texts batched by length)."""

    name = ""
    input_rank = 2  # (B, T); a multiple-choice model's inputs are (B, C, T)
    reads_pairs = False  # whether the export's check reads (text, pair) rows
    per_token = False  # whether each real token has an answer (its rows compared on real tokens alone)
    labelled = False  # whether the logits are as wide as the labels config.json names
    has_head = True  # whether a head answers (its weights kept, and refused where the directory lacks them)
    whole_model = False  # what a pre-training class serves: `embed` reads either such graph's hidden states
    predicts_tokens = False  # whether it predicts vocabulary ids (a padded table's spare rows are worth a word)

    def model_arguments(self, directory, raw: dict) -> dict:
        """What the class is built with beyond its config (a classifier's labels), from config.json (`raw`)."""
        return {}

    def check_exportable(self, files, origin) -> None:
        """One line where the directory cannot give this kind's answer (a masked LM without its trained head)."""

    def outputs(self, model, input_ids, attention_mask, token_type_ids, pooling, normalize):
        """The graph's outputs: the model's own forward, as `transformers`' ONNX exports name them."""
        logits, _ = model(input_ids, token_type_ids, attention_mask)
        return logits

    def axes(self, record: Architecture, pooling) -> dict[str, tuple[str, ...]]:
        """Each output's dynamic axes."""
        return dict(record.outputs)

    def output_rank(self, axes: tuple[str, ...]) -> int:
        """An output's rank: its dynamic axes and the width that follows them."""
        return len(axes) + 1

    def widths(self, config, num_labels: int | None) -> dict[str, int]:
        """The outputs whose last dimension the model fixes: hidden states their width, logits their labels."""
        fixed = {"last_hidden_state": config.hidden_size}
        return fixed | ({"logits": num_labels} if self.labelled and num_labels else {})

    def unbounded(self, out: np.ndarray) -> np.ndarray:
        """Where an answer holds what no answer of this kind does: NaN or an infinity."""
        return ~np.isfinite(out)

    def check_batches(self, batcher: TextBatcher, texts: list[str], pairs: list[str] | None) -> list[Batch]:
        """The check texts as padded batches of 8, short and long texts together, and the longest alone (another
        batch size and length)."""
        self.refuse_pairs(pairs)
        encoded = batcher.encode(texts, pairs)
        order = [i for bucket in length_buckets(encoded, 8) for i in bucket]  # shortest first
        mixed = [order[i::2] for i in range(2)] if len(order) > 1 else [order]  # short and long texts together
        batches = [batcher.batch(encoded, rows[s : s + 8]) for rows in mixed for s in range(0, len(rows), 8)]
        return batches + [batcher.batch(encoded, order[-1:])]

    def refuse_pairs(self, pairs: list[str] | None) -> None:
        if pairs is not None and not self.reads_pairs:
            raise UserError(f"--pair-column: a {self.name} model reads single texts; pairs are for a classifier")

    def agreement(self, ref: torch.Tensor, out: torch.Tensor, mask: torch.Tensor) -> tuple[int, int]:
        """(answers the same, answers compared) of the int8 graph's `out` against PyTorch's `ref`: a row's argmax,
        its label or a token's tag or prediction, on real tokens."""
        real = mask if self.per_token else torch.ones(ref.shape[:-1], dtype=torch.bool)
        return int((ref.argmax(-1) == out.argmax(-1))[real].sum()), int(real.sum())

    def head_answer(self, outputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """What the served graph's call returns as the PyTorch head's logits."""
        return outputs["logits"]


class MaskedLMKind(AnswerKind):
    """A masked LM's logits over the vocabulary at every token; a padded vocabulary's extra ids answer -inf."""

    name, per_token, whole_model, predicts_tokens = MASKED_LM, True, True, True

    def check_exportable(self, files, origin) -> None:
        if "mlm" not in files.heads:
            raise UserError(f"{origin.describes} has no trained masked-LM head to export")

    def outputs(self, model, input_ids, attention_mask, token_type_ids, pooling, normalize):
        hidden = model.bert(input_ids, token_type_ids, attention_mask).sequence_output  # (B, T, H)
        B, T, _ = hidden.shape
        return model.mlm_head(hidden.flatten(0, 1), bias_inside=True).view(B, T, -1)  # (B, T, V)

    def unbounded(self, out: np.ndarray) -> np.ndarray:
        return np.isnan(out) | np.isposinf(out)


class SequenceKind(AnswerKind):
    """A classifier's (or regression model's) logits, one row per text or pair."""

    name, reads_pairs, labelled = SEQUENCE, True, True

    def model_arguments(self, directory, raw: dict) -> dict:
        labels = label_names(directory, raw, "classifier")
        return {"num_labels": len(labels), "problem_type": raw.get("problem_type") or SINGLE_LABEL}


class TokensKind(AnswerKind):
    """A tagger's logits, one row per token."""

    name, per_token, labelled = TOKENS, True, True

    def model_arguments(self, directory, raw: dict) -> dict:
        return {"num_labels": len(label_names(directory, raw, "tagger"))}


class SpansKind(AnswerKind):
    """A reader's start and end logits, one a token: each a (B, T) output of its own."""

    name, per_token = SPANS, True

    def outputs(self, model, input_ids, attention_mask, token_type_ids, pooling, normalize):
        logits, _ = model(input_ids, token_type_ids, attention_mask)  # (B, T, 2)
        return logits.unbind(-1)  # (B, T) start, (B, T) end

    def output_rank(self, axes: tuple[str, ...]) -> int:
        return len(axes)

    def agreement(self, ref: torch.Tensor, out: torch.Tensor, mask: torch.Tensor) -> tuple[int, int]:
        """Where the span starts (or ends): the argmax over the real tokens, one answer a text."""
        hidden = ~mask
        same = ref.masked_fill(hidden, -1e9).argmax(-1) == out.masked_fill(hidden, -1e9).argmax(-1)
        return int(same.sum()), len(ref)

    def head_answer(self, outputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.stack([outputs["start_logits"], outputs["end_logits"]], dim=-1)  # (B, T, 2)


class ChoiceKind(AnswerKind):
    """A multiple-choice model's score for each of a question's choices: inputs (B, C, T), logits (B, C)."""

    name, input_rank = CHOICE, 3

    def output_rank(self, axes: tuple[str, ...]) -> int:
        return len(axes)

    def check_batches(self, batcher: TextBatcher, texts: list[str], pairs: list[str] | None) -> list[Batch]:
        """Each check text read as a question with two choices (another text, and itself), four questions a batch."""
        self.refuse_pairs(pairs)
        encoded = batcher.encode(texts * 2, list(reversed(texts)) + texts)  # (question, choice) pairs, 2 a question
        batches = []
        for start in range(0, len(texts), 4):
            rows = [i for q in range(start, min(start + 4, len(texts))) for i in (q, q + len(texts))]
            batch = batcher.batch(encoded, rows)
            batches.append({k: v.view(-1, 2, v.shape[-1]) for k, v in batch.items()})  # (B, 2, T)
        return batches


class EncoderKind(AnswerKind):
    """An encoder's hidden states at every token, and a sentence-embedding model's pooled (and normalised) vectors
    beside them, as its modules make them."""

    name, has_head, whole_model = ENCODER, False, True

    def outputs(self, model, input_ids, attention_mask, token_type_ids, pooling, normalize):
        hidden = model.bert(input_ids, token_type_ids, attention_mask).sequence_output  # (B, T, H)
        if not pooling:
            return hidden
        return hidden, sentence_vectors(hidden, attention_mask, pooling, normalize)  # (B, T, H), (B, D)

    def axes(self, record: Architecture, pooling) -> dict[str, tuple[str, ...]]:
        return {**record.outputs, **({"sentence_embedding": (BATCH,)} if pooling else {})}

    def head_answer(self, outputs: dict[str, torch.Tensor]) -> torch.Tensor:
        raise UserError("an exported encoder answers its hidden states (embed, search), not a head's logits")


KINDS: Registry[AnswerKind] = Registry("answer kind", AnswerKind)
for kind in (MaskedLMKind(), SequenceKind(), TokensKind(), SpansKind(), ChoiceKind(), EncoderKind()):
    KINDS.register(kind)


def kind_of(record: Architecture) -> AnswerKind:
    """The kind of answer `record`'s exported graph gives."""
    return KINDS.get(record.answers)
