"""Sequence classification and regression: one text or a text pair in, a label (or a number) out.

Single texts are encoded [CLS] text [SEP], pairs [CLS] a [SEP] b [SEP] with
segment ids 0 and 1; the pooled [CLS] vector feeds the head. Files are TSV, CSV
or JSONL with named columns (indexes for headerless tables); or, with no columns
named, files that say their labels themselves: a directory with one file per
class (an example per line) or one folder per class (an example per file), or
lines that start with their label (fastText's `__label__pos ...`, TREC's
`NUM:dist ...`). Without a dev file, a fixed share of each class is held out. The saved model is
a `transformers` BertForSequenceClassification directory with id2label (or
problem_type "regression"), so `pipeline("text-classification")` loads it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer

from .batching import Encoded, TextBatcher, length_buckets, shuffled_buckets
from .errors import UserError
from .model import BertForSequenceClassification
from .modeldir import load_model_and_tokenizer, read_config, resolve_model_dir
from .runtime import MixedPrecision, resolve_device
from .textfiles import open_text, read_rows

FASTTEXT_LABEL = "__label__"
SKIPPED_IN_CLASS_DIRECTORY = re.compile(r"^(\.|readme)", re.IGNORECASE)  # hidden files, a data set's README


@dataclass
class Columns:
    """Where a table keeps the text, the optional second text and the label. With neither text nor label, the
    files say them themselves: a directory of classes, or label-first lines."""

    text: str | None = None
    label: str | None = None
    pair: str | None = None
    label_until: str | None = None  # keep each label up to this separator: TREC's "NUM:dist" -> "NUM" with ":"

    def __post_init__(self) -> None:
        if (self.text is None) != (self.label is None) or (self.pair and self.text is None):
            raise UserError(
                "name both the text and the label column (a table), or neither (a directory of classes, or lines "
                "that start with their label)"
            )


@dataclass
class Example:
    text: str
    pair: str | None
    label: str


def read_examples(path: str | Path, columns: Columns) -> list[Example]:
    """A table's rows, a directory of classes, or label-first lines (see the module's docstring)."""
    path = Path(path)
    if path.is_dir():
        if columns.text is not None:
            raise UserError(f"{path}: a directory of classes has no columns; leave out the text and label columns")
        examples = _class_directory(path)
    elif columns.text is None:
        examples = _label_first_lines(path)
    else:
        examples = _table_rows(path, columns)
    if columns.label_until:
        examples = [replace(e, label=e.label.split(columns.label_until, 1)[0]) for e in examples]
    if not examples:
        raise UserError(f"{path}: no examples (empty file)")
    return examples


def _table_rows(path: Path, columns: Columns) -> list[Example]:
    """Rows of a TSV, CSV or JSONL file. Numeric column names index a headerless table."""
    names = [columns.text, columns.label] + ([columns.pair] if columns.pair else [])
    return [
        Example(
            str(row[columns.text]), str(row[columns.pair]) if columns.pair else None, str(row[columns.label]).strip()
        )
        for _, row in read_rows(path, names)
    ]


def _label_first_lines(path: Path) -> list[Example]:
    """Lines "LABEL text" (fastText's `__label__` prefix dropped); blank lines skipped."""
    examples = []
    with open_text(path) as f:
        for number, line in enumerate(f, 1):
            parts = line.split(None, 1)
            if not parts:
                continue
            if len(parts) < 2:
                raise UserError(f"{path}:{number}: a line holds a label, a space, then its text")
            label, text = parts[0].removeprefix(FASTTEXT_LABEL), parts[1].strip()
            if text.startswith(FASTTEXT_LABEL):
                raise UserError(f"{path}:{number}: several labels on one line (multi-label) are not supported")
            examples.append(Example(text, None, label))
    return examples


def _class_directory(directory: Path) -> list[Example]:
    """One file per class with an example per line (MR's rt-polarity.pos and .neg), or one folder per class with
    an example per file (IMDB's pos/ and neg/). Hidden files and README files are skipped."""
    entries = sorted(p for p in directory.iterdir() if not SKIPPED_IN_CLASS_DIRECTORY.match(p.name))
    if len(entries) < 2 or not (all(p.is_file() for p in entries) or all(p.is_dir() for p in entries)):
        raise UserError(
            f"{directory}: a directory of classes holds one file per class, or one folder per class, at least two"
        )
    examples = []
    if entries[0].is_file():
        for entry, label in zip(entries, class_names([p.name for p in entries])):
            with open_text(entry) as f:
                examples.extend(Example(line.strip(), None, label) for line in f if line.strip())
    else:
        for entry in entries:
            for file in sorted(p for p in entry.iterdir() if p.is_file() and not p.name.startswith(".")):
                with open_text(file) as f:
                    text = " ".join(f.read().split())
                if text:
                    examples.append(Example(text, None, entry.name))
    return examples


def class_names(file_names: list[str]) -> list[str]:
    """The file names less the parts (split at . - _) they all share at the start and the end:
    rt-polarity.pos / rt-polarity.neg -> pos / neg; plot.tok.gt9.5000 / quote.tok.gt9.5000 -> plot / quote.
    The whole names where that leaves any label empty or two the same."""
    parts = [re.split(r"([._-])", name) for name in file_names]
    shortest = min(len(p) for p in parts)
    start = next((i for i in range(shortest) if len({p[i] for p in parts}) > 1), shortest)
    end = next((i for i in range(1, shortest - start + 1) if len({p[-i] for p in parts}) > 1), shortest - start + 1)
    labels = ["".join(p[start : len(p) - end + 1]).strip("._-") for p in parts]
    return labels if all(labels) and len(set(labels)) == len(labels) else list(file_names)


def hold_out(examples: list[Example], fraction: float, by_label: bool) -> tuple[list[Example], list[Example]]:
    """(train, dev) with `fraction` of the examples as dev: the same draw for every fine-tuning seed and arm.
    `by_label` takes it from each label apart (at least one of each stays in train), so that a small class
    keeps its share."""
    rng = np.random.default_rng(0)
    groups: dict[str, list[int]] = {}
    for i, example in enumerate(examples):
        groups.setdefault(example.label if by_label else "", []).append(i)
    held: set[int] = set()
    for indices in groups.values():
        count = min(round(fraction * len(indices)), len(indices) - 1)
        held.update(int(i) for i in rng.permutation(indices)[:count])
    if not held:
        raise UserError(f"holding out {fraction:g} of {len(examples)} examples leaves no dev examples: give --dev")
    train = [e for i, e in enumerate(examples) if i not in held]
    dev = [e for i, e in enumerate(examples) if i in held]
    return train, dev


def label_mapping(train: list[Example], dev: list[Example], dev_path: str | Path) -> list[str]:
    """Labels sorted (numbers numerically), so the mapping is stable; dev may not add labels."""
    labels = sorted({e.label for e in train}, key=lambda x: (not _is_number(x), float(x) if _is_number(x) else 0.0, x))
    if len(labels) < 2:
        raise UserError(f"the training file has {len(labels)} distinct label(s); classification needs at least 2")
    unknown = sorted({e.label for e in dev} - set(labels))
    if unknown:
        raise UserError(f"{dev_path}: label {unknown[0]!r} does not occur in the training file")
    return labels


def regression_targets(examples: list[Example], path: str | Path) -> np.ndarray:
    """The labels as numbers; the first that is not one is named."""
    values = []
    for number, e in enumerate(examples, start=1):
        if not _is_number(e.label):
            raise UserError(f"{path}: example {number} has label {e.label!r}, not a number (regression needs numbers)")
        values.append(float(e.label))
    return np.array(values, dtype=np.float32)


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def encode_examples(batcher: TextBatcher, examples: list[Example]) -> Encoded:
    """Single sentences, or pairs when any example has one (a missing second text is empty)."""
    pairs = None if all(e.pair is None for e in examples) else [e.pair or "" for e in examples]
    return batcher.encode([e.text for e in examples], pairs)


# ---------------------------------------------------------------- metrics


def classification_metrics(predictions: np.ndarray, labels: np.ndarray, num_labels: int) -> dict[str, float]:
    """Accuracy and macro-F1; Matthews correlation and positive-class F1 too for binary tasks."""
    result = {"accuracy": float((predictions == labels).mean())}
    f1s = []
    for c in range(num_labels):
        tp = float(((predictions == c) & (labels == c)).sum())
        fp = float(((predictions == c) & (labels != c)).sum())
        fn = float(((predictions != c) & (labels == c)).sum())
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    result["macro_f1"] = float(np.mean(f1s))
    if num_labels == 2:
        tp = float(((predictions == 1) & (labels == 1)).sum())
        tn = float(((predictions == 0) & (labels == 0)).sum())
        fp = float(((predictions == 1) & (labels == 0)).sum())
        fn = float(((predictions == 0) & (labels == 1)).sum())
        denominator = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
        result["mcc"] = (tp * tn - fp * fn) / denominator if denominator else 0.0
        result["f1"] = f1s[1]  # F1 of the positive class (label id 1), as GLUE reports it
    return result


def regression_metrics(predictions: np.ndarray, targets: np.ndarray) -> dict[str, float]:
    """Mean squared error, and Pearson and Spearman correlation (GLUE's STS-B reports the two correlations)."""
    return {
        "mse": float(np.mean((predictions - targets) ** 2)),
        "pearson": _pearson(predictions, targets),
        "spearman": _pearson(_ranks(predictions), _ranks(targets)),
    }


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    x, y = x - x.mean(), y - y.mean()
    denominator = math.sqrt(float((x * x).sum() * (y * y).sum()))
    return float((x * y).sum() / denominator) if denominator else 0.0


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties sharing their average rank (as Spearman's correlation needs)."""
    _, distinct_of, counts = np.unique(values, return_inverse=True, return_counts=True)
    last_rank = np.cumsum(counts)  # a distinct value holds ranks last - count + 1 .. last
    return (last_rank - (counts - 1) / 2)[distinct_of]


@torch.no_grad()
def predict(
    model: BertForSequenceClassification,
    batcher: TextBatcher,
    encoded: Encoded,
    precision: MixedPrecision,
    batch_size: int = 64,
) -> np.ndarray:
    """(n, num_labels) class probabilities, or for regression (n, 1) values, in input order."""
    model.eval()
    out = np.zeros((len(encoded), model.num_labels), dtype=np.float32)
    for indices in length_buckets(encoded, batch_size):
        batch = {k: v.to(precision.device) for k, v in batcher.batch(encoded, indices).items()}
        with precision.autocast():
            logits, _ = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        logits = logits.float()
        out[indices] = (logits if model.regression else logits.softmax(-1)).cpu().numpy()
    return out


# ---------------------------------------------------------------- the task


class ClassificationTask:
    """Labelled (or scored) texts and text pairs, for `finetune`."""

    model_class = BertForSequenceClassification

    def __init__(
        self,
        tokenizer: Tokenizer,
        train_path: str | Path,
        dev_path: str | Path | None,
        seq_len: int,
        columns: Columns,
        regression: bool = False,
        dev_fraction: float = 0.1,
    ):
        """Without `dev_path`, `dev_fraction` of the training examples (of each label) is the dev set."""
        self.regression = regression
        self.main_metric = "pearson" if regression else "accuracy"
        self.batcher = TextBatcher(tokenizer, seq_len)
        train = read_examples(train_path, columns)
        held_out = dev_path is None
        if held_out:
            train, dev = hold_out(train, dev_fraction, by_label=not regression)
            dev_path = f"{train_path} (the held-out share)"
        else:
            dev = read_examples(dev_path, columns)
        if regression:
            self.labels: list[str] = []
            train_targets, self.dev_targets = regression_targets(train, train_path), regression_targets(dev, dev_path)
            self.train_targets = torch.from_numpy(train_targets)
        else:
            self.labels = label_mapping(train, dev, dev_path)
            label_id = {label: i for i, label in enumerate(self.labels)}
            self.train_targets = torch.tensor([label_id[e.label] for e in train])
            self.dev_targets = np.array([label_id[e.label] for e in dev])
        self.train, self.dev = encode_examples(self.batcher, train), encode_examples(self.batcher, dev)
        self.sizes = {"train_examples": len(train), "dev_examples": len(dev), "dev_held_out_of_train": held_out}

    def model_kwargs(self) -> dict[str, Any]:
        return {"regression": True} if self.regression else {"num_labels": len(self.labels)}

    def train_batches(self, batch_size: int, rng: np.random.Generator) -> list[dict[str, torch.Tensor]]:
        return [
            {**self.batcher.batch(self.train, indices), "labels": self.train_targets[indices]}
            for indices in shuffled_buckets(self.train, batch_size, rng)
        ]

    def evaluate(self, model, precision: MixedPrecision) -> dict[str, float]:
        outputs = predict(model, self.batcher, self.dev, precision)
        if self.regression:
            return regression_metrics(outputs[:, 0], self.dev_targets)
        return classification_metrics(outputs.argmax(-1), self.dev_targets, len(self.labels))

    def saved_config(self) -> dict[str, Any]:
        if self.regression:
            return {"problem_type": "regression", "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}
        return {
            "id2label": {str(i): label for i, label in enumerate(self.labels)},
            "label2id": {label: i for i, label in enumerate(self.labels)},
            "problem_type": "single_label_classification",
        }

    def summary(self) -> dict[str, Any]:
        return {"labels": self.labels, **self.sizes} if not self.regression else {"regression": True, **self.sizes}


class Classifier:
    """A fine-tuned classification (or regression) model with its tokenizer and label names."""

    def __init__(self, path: str | Path, device: str = "cpu", trust_pickle: bool = False):
        directory = resolve_model_dir(path)
        config = read_config(directory)
        if "id2label" not in config:
            raise UserError(f"{directory}: not a classification model (no id2label in config.json)")
        self.regression = config.get("problem_type") == "regression"
        self.labels = [config["id2label"][str(i)] for i in range(len(config["id2label"]))]
        kwargs = {"regression": True} if self.regression else {"num_labels": len(self.labels)}
        _, self.model, tokenizer = load_model_and_tokenizer(
            directory, BertForSequenceClassification, trust_pickle, **kwargs
        )
        self.precision = MixedPrecision(resolve_device(device), "fp32")
        self.model.to(self.precision.device)
        self.batcher = TextBatcher(tokenizer, self.model.config.max_position_embeddings)

    def classify(self, texts: list[str], pairs: list[str] | None = None) -> list[dict[str, Any]]:
        """One result per text: the label and every label's probability, or for regression the value."""
        examples = [Example(t, pairs[i] if pairs else None, "") for i, t in enumerate(texts)]
        outputs = predict(self.model, self.batcher, encode_examples(self.batcher, examples), self.precision)
        results = []
        for e, out in zip(examples, outputs):
            result: dict[str, Any] = {"text": e.text, **({"pair": e.pair} if e.pair is not None else {})}
            if self.regression:
                result["value"] = float(out[0])
            else:
                result["label"] = self.labels[int(out.argmax())]
                result["probabilities"] = {label: float(q) for label, q in zip(self.labels, out)}
            results.append(result)
        return results
