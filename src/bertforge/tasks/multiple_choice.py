"""Multiple choice (SWAG, the fourth kind of task in the BERT paper): a context and C candidate continuations.

    bertforge finetune MODEL --task multiple-choice --train train.csv --dev val.csv --text-column sent1 \\
        --pair-column sent2 --choice-columns ending0,ending1,ending2,ending3 --label-column label --out swag

Each (context, choice) pair is encoded [CLS] context [SEP] choice [SEP]; the model
scores every pair from its pooled [CLS] vector, and a softmax over a question's C
scores picks the answer (BertForMultipleChoice, as in `transformers`). Files are
TSV, CSV or JSONL: a context column; the choices in a column each (SWAG's
ending0 ... ending3) or in one column holding a list (JSONL); the label, the right
choice's index (0, 1, ...) or letter (A, B, ...); and optionally a column put
before every choice (SWAG's sent2, the start of the continuation).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer

from ..data.batching import Encoded, TextBatcher, length_buckets, shuffled_buckets
from ..engine.runtime import MixedPrecision, resolve_device
from ..errors import UserError
from ..formats.rows import read_rows
from ..model.heads import BertForMultipleChoice
from ..modelfiles.directory import read_model_files
from ..serving.served import load_served
from ..tokenizer import max_input_length
from .registry import MULTIPLE_CHOICE, ColumnNames, MissingColumns


@dataclass
class ChoiceColumns:
    """Where a table keeps a question's context, its choices, the right one and the lead-in shared by the choices."""

    context: str
    choices: list[str]  # a column per choice, or one column whose value is the list of choices
    label: str
    lead: str | None = None  # put before every choice: SWAG's sent2


@dataclass
class ChoiceExample:
    context: str
    choices: list[str]
    label: int


def read_choice_examples(path: str | Path, columns: ChoiceColumns) -> list[ChoiceExample]:
    """Every row a question with the same number of choices (at least two)."""
    names = [columns.context, *columns.choices, columns.label] + ([columns.lead] if columns.lead else [])
    examples = []
    for number, row in read_rows(path, names):
        values = [row[c] for c in columns.choices]
        choices = [str(c) for c in (values[0] if len(values) == 1 and isinstance(values[0], list) else values)]
        if columns.lead:
            choices = [f"{row[columns.lead]} {choice}".strip() for choice in choices]
        label = _choice_index(str(row[columns.label]).strip(), len(choices), f"{path}:{number}")
        examples.append(ChoiceExample(str(row[columns.context]), choices, label))
    if not examples:
        raise UserError(f"{path}: no examples (empty file)")
    counts = sorted({len(e.choices) for e in examples})
    if len(counts) > 1 or counts[0] < 2:
        raise UserError(f"{path}: every question needs the same number of choices, at least two; found {counts}")
    return examples


def _choice_index(label: str, choices: int, where: str) -> int:
    """0, 1, ... or A, B, ... -> the choice's index."""
    if label.isdigit():
        index = int(label)
    elif len(label) == 1 and label.isalpha():
        index = ord(label.upper()) - ord("A")
    else:
        raise UserError(f"{where}: label {label!r} is neither a choice's index (0, 1, ...) nor its letter (A, B, ...)")
    if not 0 <= index < choices:
        raise UserError(f"{where}: label {label!r} points past the {choices} choices")
    return index


class ChoiceBatcher:
    """Questions as (B, C, T) batches: TextBatcher's pairs, C rows per question, padded to the batch's longest."""

    def __init__(self, tokenizer: Tokenizer, seq_len: int):
        self.pairs = TextBatcher(tokenizer, seq_len)

    def encode(self, examples: list[ChoiceExample]) -> tuple[Encoded, int]:
        """Every (context, choice) pair, question by question, and the number of choices per question."""
        contexts = [e.context for e in examples for _ in e.choices]
        return self.pairs.encode(contexts, [c for e in examples for c in e.choices]), len(examples[0].choices)

    def longest(self, encoded: Encoded, choices: int) -> Encoded:
        """Each question's longest pair: what bucketing by length should see."""
        return [
            max(encoded[q * choices : (q + 1) * choices], key=lambda e: len(e[0]))
            for q in range(len(encoded) // choices)
        ]

    def batch(self, encoded: Encoded, choices: int, questions: list[int]) -> dict[str, torch.Tensor]:
        rows = [q * choices + c for q in questions for c in range(choices)]
        return {k: v.view(len(questions), choices, -1) for k, v in self.pairs.batch(encoded, rows).items()}


@torch.no_grad()
def predict(model, batcher: ChoiceBatcher, encoded: Encoded, choices: int, precision: MixedPrecision) -> np.ndarray:
    """(questions, choices) probabilities, in input order."""
    model.eval()
    out = np.zeros((len(encoded) // choices, choices), dtype=np.float32)
    for questions in length_buckets(batcher.longest(encoded, choices), 32):
        batch = {k: v.to(precision.device) for k, v in batcher.batch(encoded, choices, questions).items()}
        with precision.autocast():
            logits, _ = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        out[questions] = logits.float().softmax(-1).cpu().numpy()
    return out


class MultipleChoiceTask:
    """Questions with C choices each, for `finetune`."""

    model_class = BertForMultipleChoice
    main_metric = "accuracy"
    needs = ("text", "choices", "label")  # the columns a user must name (ColumnNames' fields)

    @classmethod
    def from_files(cls, record, tokenizer, train, dev, seq_len, cfg, columns) -> MultipleChoiceTask:
        if not isinstance(columns, ChoiceColumns):
            raise MissingColumns(record.name, cls.needs)
        return cls(tokenizer, train, dev, seq_len, columns)

    @classmethod
    def columns_from(cls, names: ColumnNames) -> ChoiceColumns:
        if not (names.text and names.choices and names.label):
            raise MissingColumns(MULTIPLE_CHOICE.name, cls.needs)
        return ChoiceColumns(names.text, list(names.choices), names.label, names.pair)

    @classmethod
    def main_metric_for(cls, record, columns: ChoiceColumns | None, tuned: bool) -> str:
        return cls.main_metric

    def __init__(
        self, tokenizer: Tokenizer, train_path: str | Path, dev_path: str | Path, seq_len: int, columns: ChoiceColumns
    ):
        self.batcher = ChoiceBatcher(tokenizer, seq_len)
        train, dev = read_choice_examples(train_path, columns), read_choice_examples(dev_path, columns)
        if len(dev[0].choices) != len(train[0].choices):
            raise UserError(
                f"{dev_path}: {len(dev[0].choices)} choices per question, the training file's have "
                f"{len(train[0].choices)}"
            )
        self.train, self.choices = self.batcher.encode(train)
        self.dev, _ = self.batcher.encode(dev)
        self.train_targets = torch.tensor([e.label for e in train])
        self.dev_targets = np.array([e.label for e in dev])
        self.sizes = {"choices": self.choices, "train_examples": len(train), "dev_examples": len(dev)}

    def model_kwargs(self) -> dict[str, Any]:
        return {}

    def train_batches(self, batch_size: int, rng: np.random.Generator) -> list[dict[str, torch.Tensor]]:
        return [
            {**self.batcher.batch(self.train, self.choices, questions), "labels": self.train_targets[questions]}
            for questions in shuffled_buckets(self.batcher.longest(self.train, self.choices), batch_size, rng)
        ]

    def evaluate(self, model, precision: MixedPrecision) -> dict[str, float]:
        probabilities = predict(model, self.batcher, self.dev, self.choices, precision)
        return {"accuracy": float(np.mean(probabilities.argmax(-1) == self.dev_targets))}

    def saved_config(self) -> dict[str, Any]:
        return {}

    def summary(self) -> dict[str, Any]:
        return dict(self.sizes)


class Chooser:
    """A fine-tuned multiple-choice model with its tokenizer: which continuation fits the context?"""

    def __init__(self, path: str | Path, device: str = "cpu", trust_pickle: bool = False):
        files = read_model_files(path)
        if not files.architecture.endswith("ForMultipleChoice"):  # else its scoring head would be random
            raise UserError(
                f"{files.directory}: not a multiple-choice model ({files.architecture or 'none'}); make one with "
                f"`bertforge finetune MODEL --task {MULTIPLE_CHOICE.name} ...`"
            )
        _, self.model, tokenizer = load_served(files, BertForMultipleChoice, trust_pickle)
        self.precision = MixedPrecision(resolve_device(device), "fp32")
        self.model.to(self.precision.device)
        self.batcher = ChoiceBatcher(tokenizer, max_input_length(tokenizer, self.model.config.max_position_embeddings))

    def choose(self, context: str, choices: list[str]) -> dict[str, Any]:
        """The best choice's index and text, and every choice's probability."""
        if len(choices) < 2:
            raise UserError("give at least two choices")
        encoded, count = self.batcher.encode([ChoiceExample(context, choices, 0)])
        probabilities = predict(self.model, self.batcher, encoded, count, self.precision)[0]
        best = int(probabilities.argmax())
        return {"choice": best, "text": choices[best], "probabilities": [float(p) for p in probabilities]}
