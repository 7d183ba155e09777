"""Sequence classification, multi-label classification and regression: one text or a text pair in, a label
(any number of labels; a number) out.

    bertforge finetune MODEL --train train.tsv --dev dev.tsv --text-column sentence --label-column label --out sst2
    bertforge finetune MODEL --task regression --train train.tsv --dev dev.tsv \\
        --text-column s1 --pair-column s2 --label-column score --out sts
    bertforge finetune MODEL --train sentence_polarity/ --out mr     # a file per class; dev held out of train
    bertforge finetune MODEL --task multi-label --train train.tsv --dev dev.tsv \\
        --text-column text --label-column labels --out emotions      # a cell "joy,love": two labels

Single texts are encoded [CLS] text [SEP], pairs [CLS] a [SEP] b [SEP] with
segment ids 0 and 1; the pooled [CLS] vector feeds the head. Files are TSV, CSV,
JSONL, Parquet or Arrow with named columns (indexes for headerless tables); labels
stored as numbers are named by --label-names or by the names `datasets` keeps in
its files' metadata (SST-2's 0 and 1 are "negative" and "positive"); or, with no columns
named, files that say their labels themselves: a directory with one file per
class (an example per line) or one folder per class (an example per file), or
lines that start with their label (fastText's `__label__pos ...`, TREC's
`NUM:dist ...`). A multi-label table keeps a text's labels in one column
("joy,love", or a JSONL list) or a 0/1 column per label; a fastText line may
start with several labels. Without a dev file, a fixed share (of each class) is
held out. The saved model is a `transformers` BertForSequenceClassification
directory with id2label and problem_type, so `pipeline("text-classification")`
loads it. targets.py turns labels into what the loss takes and scores answers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer

from ..data.batching import Encoded, TextBatcher, length_buckets, mean_over_windows, shuffled_buckets
from ..engine.runtime import MixedPrecision, resolve_device
from ..errors import UserError
from ..fileio import write_answers
from ..formats.catalog import format_named
from ..formats.corpus import read_documents
from ..formats.rows import class_label_names, label_name, read_rows
from ..formats.textfiles import format_of, open_text
from ..model.heads import MULTI_LABEL, REGRESSION, SINGLE_LABEL, BertForSequenceClassification
from ..modelfiles.directory import read_model_files
from ..modelfiles.heads import label_names
from ..serving.served import load_served
from ..tokenizer import max_input_length
from . import registry
from .targets import TARGETS, THRESHOLD, TunedLabelSet

# The loss each of the three tasks trains the one head with, as `transformers`' problem_type names it.
PROBLEM_TYPES = {
    registry.CLASSIFICATION: SINGLE_LABEL,
    registry.MULTI_LABEL: MULTI_LABEL,
    registry.REGRESSION: REGRESSION,
}
FASTTEXT_LABEL = "__label__"
SKIPPED_IN_CLASS_DIRECTORY = re.compile(r"^(\.|readme)", re.IGNORECASE)  # hidden files, a data set's README
YES, NO = {"1", "1.0", "true", "yes"}, {"0", "0.0", "false", "no", ""}  # what a multi-label table's 0/1 column holds


@dataclass
class Columns:
    """Where a table keeps the text, the optional second text and the label. With neither text nor label, the
    files say them themselves: a directory of classes, or label-first lines."""

    text: str | None = None
    label: str | None = None
    pair: str | None = None
    label_until: str | None = None  # keep each label up to this separator: TREC's "NUM:dist" -> "NUM" with ":"
    label_separator: str = ","  # multi-label: a label column's cell "joy,love" holds two labels
    label_columns: tuple[str, ...] = ()  # multi-label: a 0/1 column per label, named after it (Jigsaw's toxic, ...)
    label_names: tuple[str, ...] = ()  # what the label column's numbers 0, 1, ... stand for, where the file says not

    def __post_init__(self) -> None:
        labelled = self.label is not None or bool(self.label_columns)
        if (self.text is None) == labelled or (self.pair and self.text is None):
            raise UserError(
                "name both the text and the label column (a table), or neither (a directory of classes, or lines "
                "that start with their label)"
            )
        if self.label is not None and self.label_columns:
            raise UserError("name one label column holding the labels, or a 0/1 column per label, not both")
        if self.label_names and self.label is None:
            raise UserError("label names say what a label column's numbers stand for; name the label column")
        if not self.label_separator:
            raise UserError("the label separator is empty; give the character between a cell's labels, like ','")


@dataclass
class Example:
    text: str
    pair: str | None
    label: str | tuple[str, ...]  # multi-label: the text's labels, perhaps none


def read_examples(path: str | Path, columns: Columns, multi_label: bool = False) -> list[Example]:
    """A table's rows, a directory of classes, or label-first lines (see the module's docstring)."""
    path = Path(path)
    if columns.label_columns and not multi_label:
        raise UserError("a 0/1 column per label is a multi-label table: use --task multi-label")
    if path.is_dir():
        if columns.text is not None:
            raise UserError(f"{path}: a directory of classes has no columns; leave out the text and label columns")
        if multi_label:
            raise UserError(f"{path}: a directory of classes gives each text one label; multi-label reads a table")
        examples = _class_directory(path)
    elif columns.text is None and format_named(format_of(path)).has_rows:  # label-first lines are plain text
        label_flag = "--label-column (or --label-columns)" if multi_label else "--label-column"
        raise UserError(f"{path} is a table: name its text and label columns with --text-column and {label_flag}")
    elif columns.text is None:
        examples = _label_first_lines(path, multi_label)
    else:
        examples = _table_rows(path, columns, multi_label)
    if columns.label_until:
        examples = [replace(e, label=_cut(e.label, columns.label_until)) for e in examples]
    if not examples:
        raise UserError(f"{path}: no examples (empty file)")
    return examples


def _cut(label: str | tuple[str, ...], separator: str) -> str | tuple[str, ...]:
    """Each label up to `separator`; a set of labels keeps each cut label once."""
    if isinstance(label, tuple):
        return tuple(dict.fromkeys(part.split(separator, 1)[0] for part in label))
    return label.split(separator, 1)[0]


def _table_rows(path: Path, columns: Columns, multi_label: bool) -> list[Example]:
    """Rows of a TSV, CSV, JSONL, Parquet or Arrow file. Numeric column names index a headerless table. A label
    column of numbers is named by `columns.label_names`, or by the names a `datasets` file keeps for it."""
    label_columns = list(columns.label_columns) or [columns.label]
    names = [columns.text, *label_columns] + ([columns.pair] if columns.pair else [])
    label_names = columns.label_names or (class_label_names(path, columns.label) if columns.label else ())
    examples = []
    for number, row in read_rows(path, names):
        where = f"{path}:{number}"
        if columns.label_columns:
            label: str | tuple[str, ...] = tuple(c for c in columns.label_columns if _yes(row[c], path, number, c))
        elif multi_label:
            label = _label_list(row[columns.label], columns.label_separator, label_names, where)
        else:
            label = label_name(row[columns.label], label_names, where)
        examples.append(Example(str(row[columns.text]), str(row[columns.pair]) if columns.pair else None, label))
    return examples


def _label_list(cell: Any, separator: str, names: tuple[str, ...], where: str) -> tuple[str, ...]:
    """A cell's labels: a list as it is, text split at `separator`; empty parts are no labels."""
    parts = cell if isinstance(cell, list) else str(cell).split(separator)
    return tuple(dict.fromkeys(label_name(part, names, where) for part in parts if str(part).strip()))


def _yes(cell: Any, path: Path, number: int, column: str) -> bool:
    value = str(cell).strip().lower()
    if value not in YES | NO:
        raise UserError(f"{path}:{number}: column {column!r} holds {cell!r}; a label's own column holds 0 or 1")
    return value in YES


def _label_first_lines(path: Path, multi_label: bool) -> list[Example]:
    """Lines "LABEL text", fastText's `__label__` prefix dropped; a multi-label line may start with several
    `__label__`s. Blank lines are skipped."""
    examples = []
    with open_text(path) as f:
        for number, line in enumerate(f, 1):
            words = line.split()
            if not words:
                continue
            count = 1  # a TREC-style label is the first word; fastText's are every leading __label__ word
            if words[0].startswith(FASTTEXT_LABEL):
                count = next((i for i, w in enumerate(words) if not w.startswith(FASTTEXT_LABEL)), len(words))
            if count == len(words):
                raise UserError(f"{path}:{number}: a line holds a label, a space, then its text")
            if count > 1 and not multi_label:
                raise UserError(f"{path}:{number}: several labels on one line (multi-label): use --task multi-label")
            labels = tuple(dict.fromkeys(w.removeprefix(FASTTEXT_LABEL) for w in words[:count]))
            text = line.split(None, count)[count].strip()
            examples.append(Example(text, None, labels if multi_label else labels[0]))
    return examples


def _class_directory(directory: Path) -> list[Example]:
    """One file per class with an example per line (MR's rt-polarity.pos and .neg), or one folder per class with
    an example per file (IMDB's pos/ and neg/), a document (PDF, Word, e-book, web page) read whole as
    `classify --per-file` reads it. Hidden files and README files are skipped."""
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
            examples.extend(Example(text, None, entry.name) for text in read_documents(entry)[0])
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
    if not held and by_label and len(groups) * 2 > len(examples):  # most labels have one example: none can go
        raise UserError(
            f"{len(groups):,} labels for {len(examples):,} examples: too few of each to hold out {fraction:g} of "
            "each label for dev (at least one stays in train); give --dev, or check --label-column"
        )
    if not held:
        raise UserError(f"holding out {fraction:g} of {len(examples)} examples leaves no dev examples: give --dev")
    train = [e for i, e in enumerate(examples) if i not in held]
    dev = [e for i, e in enumerate(examples) if i in held]
    return train, dev


def encode_examples(batcher: TextBatcher, examples: list[Example]) -> Encoded:
    """Single sentences, or pairs when any example has one (a missing second text is empty)."""
    pairs = None if all(e.pair is None for e in examples) else [e.pair or "" for e in examples]
    return batcher.encode([e.text for e in examples], pairs)


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
        out[indices] = model.probabilities(logits.float()).cpu().numpy()
    return out


# ---------------------------------------------------------------- the task


class ClassificationTask:
    """Labelled (or scored) texts and text pairs, for `finetune`."""

    model_class = BertForSequenceClassification

    @classmethod
    def from_files(cls, record, tokenizer, train, dev, seq_len, cfg, columns: Columns | None) -> ClassificationTask:
        return cls(
            tokenizer,
            train,
            dev,
            seq_len,
            columns or Columns(),
            PROBLEM_TYPES[record],
            cfg.dev_fraction,
            cfg.tune_thresholds,
        )

    @staticmethod
    def columns_from(names: registry.ColumnNames) -> Columns:
        """No text and label columns: a directory of classes, or label-first lines."""
        return Columns(
            names.text,
            names.label,
            names.pair,
            names.label_until,
            names.separator,
            names.label_columns,
            names.label_names,
        )

    @staticmethod
    def main_metric_for(record, columns: Columns | None, tuned: bool) -> str:
        return (TunedLabelSet if tuned else TARGETS[PROBLEM_TYPES[record]]).main_metric

    def __init__(
        self,
        tokenizer: Tokenizer,
        train_path: str | Path,
        dev_path: str | Path | None,
        seq_len: int,
        columns: Columns,
        problem_type: str = SINGLE_LABEL,
        dev_fraction: float = 0.1,
        tune_thresholds: bool = False,
    ):
        """Without `dev_path`, `dev_fraction` of the training examples (of each label, for one label per text) is
        the dev set. `tune_thresholds` (multi-label) fits a threshold per label on dev."""
        if problem_type == REGRESSION and columns.label_names:
            raise UserError("regression learns numbers; label names are for classes")
        self.batcher = TextBatcher(tokenizer, seq_len)
        multi_label = problem_type == MULTI_LABEL
        train = read_examples(train_path, columns, multi_label)
        held_out = dev_path is None
        if held_out:
            train, dev = hold_out(train, dev_fraction, by_label=problem_type == SINGLE_LABEL)
            dev_path = f"{train_path} (the held-out share)"
        else:
            dev = read_examples(dev_path, columns, multi_label)
        targets = TunedLabelSet if tune_thresholds else TARGETS[problem_type]
        self.targets = targets([e.label for e in train], [e.label for e in dev], dev_path)
        self.main_metric = self.targets.main_metric
        self.train_targets = self.targets.encode([e.label for e in train], train_path)
        self.dev_targets = self.targets.encode([e.label for e in dev], dev_path)
        self.train, self.dev = encode_examples(self.batcher, train), encode_examples(self.batcher, dev)
        self.sizes = {"train_examples": len(train), "dev_examples": len(dev), "dev_held_out_of_train": held_out}

    def model_kwargs(self) -> dict[str, Any]:
        return {"num_labels": self.targets.num_labels, "problem_type": self.targets.problem_type}

    def train_batches(self, batch_size: int, rng: np.random.Generator) -> list[dict[str, torch.Tensor]]:
        return [
            {**self.batcher.batch(self.train, indices), "labels": self.train_targets[indices]}
            for indices in shuffled_buckets(self.train, batch_size, rng)
        ]

    def evaluate(self, model, precision: MixedPrecision) -> dict[str, float]:
        return self.targets.score(predict(model, self.batcher, self.dev, precision), self.dev_targets)

    def saved_config(self) -> dict[str, Any]:
        return self.targets.saved_config()

    def summary(self) -> dict[str, Any]:
        return {**self.targets.summary(), **self.sizes}


class Classifier:
    """A fine-tuned classification (one label, a set of labels, or regression) model with its tokenizer and
    label names."""

    def __init__(self, path: str | Path, device: str = "cpu", trust_pickle: bool = False):
        files = read_model_files(path)
        directory, config = files.directory, files.raw
        self.directory = directory
        self.labels = label_names(directory, config, "classification")
        self.problem_type = config.get("problem_type") or SINGLE_LABEL
        if self.problem_type not in TARGETS:
            raise UserError(f"{directory}: unknown problem_type {self.problem_type!r} in config.json")
        self.thresholds = _label_thresholds(config.get("label_thresholds"), self.labels, directory)
        kwargs = {"num_labels": len(self.labels), "problem_type": self.problem_type}
        _, self.model, tokenizer = load_served(files, BertForSequenceClassification, trust_pickle, **kwargs)
        self.precision = MixedPrecision(resolve_device(device), "fp32")
        self.model.to(self.precision.device)
        self.batcher = TextBatcher(tokenizer, max_input_length(tokenizer, self.model.config.max_position_embeddings))

    def classify(
        self,
        texts: list[str],
        pairs: list[str] | None = None,
        threshold: float | None = None,
        whole: bool = False,
    ) -> list[dict[str, Any]]:
        """One result per text: the label (for multi-label, the labels at probability `threshold` or above, perhaps
        none; by default each label's own threshold, fitted by `finetune --tune-thresholds`, else 0.5) and every
        label's probability; for regression the value. A higher threshold trades recall for precision.

        A text longer than the model's position table is cut to it, or with `whole` read in windows of that
        length overlapping by a quarter, its probabilities (or value) the mean over them and `windows` their number.
        """
        if threshold is not None and self.problem_type != MULTI_LABEL:
            raise UserError("a threshold picks the labels of a multi-label model; this model gives one label")
        if threshold is not None and not 0.0 <= threshold <= 1.0:
            raise UserError(f"a threshold is a probability, from 0 to 1, not {threshold:g}")
        if whole and pairs:
            raise UserError("a text pair is read as one sequence; only single texts are read whole, in windows")
        thresholds = self.thresholds if threshold is None else [threshold] * len(self.labels)
        examples = [Example(t, pairs[i] if pairs else None, "") for i, t in enumerate(texts)]
        if whole:
            encoded, owners = self.batcher.encode_windows(texts)
            per_window = predict(self.model, self.batcher, encoded, self.precision)  # (windows, outputs)
            outputs, windows = mean_over_windows(per_window, owners, len(texts))
        else:
            outputs = predict(self.model, self.batcher, encode_examples(self.batcher, examples), self.precision)
            windows = None
        if not np.isfinite(outputs).all():  # weights within float range can still overflow: never a nan answer
            raise UserError(f"{self.directory}: the model answered values that are not numbers (its weights overflow)")
        results = []
        for i, (e, out) in enumerate(zip(examples, outputs)):
            result: dict[str, Any] = {"text": e.text, **({"pair": e.pair} if e.pair is not None else {})}
            if windows is not None:
                result["windows"] = int(windows[i])
            if self.problem_type == REGRESSION:
                result["value"] = float(out[0])
                results.append(result)
                continue
            if self.problem_type == MULTI_LABEL:
                result["labels"] = [label for label, q, t in zip(self.labels, out, thresholds) if q >= t]
            else:
                result["label"] = self.labels[int(out.argmax())]
            result["probabilities"] = {label: float(q) for label, q in zip(self.labels, out)}
            results.append(result)
        return results

    def relevance(self, query: str, texts: list[str], label: str | None = None) -> list[float]:
        """How well each text answers `query`, the model reading the two together as a pair, [CLS] query [SEP] text
        [SEP]: a cross-encoder. Reading both at once orders a search's hits better than the cosine of two vectors
        each computed alone, at a forward pass per text, so it re-ranks the few a vector search found. The score is
        a regression model's value, or the probability of `label` (by default "1", the match in a 0/1 table)."""
        label = self.relevant_label(label)
        results = self.classify([query] * len(texts), texts)
        return [r["value"] if label is None else r["probabilities"][label] for r in results]

    def relevant_label(self, label: str | None) -> str | None:
        """The label whose probability `relevance` scores by (None for a regression model, scored by its value)."""
        if self.problem_type == REGRESSION:
            if label is not None:
                raise UserError("a regression model's score is its value; a relevant label is for a classifier")
            return None
        label = "1" if label is None else label
        if label not in self.labels:
            raise UserError(
                f"this model has no label {label!r} (its labels: {', '.join(self.labels)}); say which one means "
                "relevant (--relevant-label)"
            )
        return label


def write_predictions(path: str | Path, results: list[dict[str, Any]]) -> None:
    """`Classifier.classify`'s results as a file: a .jsonl line each as they are, or a .csv/.tsv row each with the
    text (and pair) or the file (`source`, classified whole), the label (a multi-label model's labels joined by
    ","; a regression model's value), the windows a text read whole took, and each label's probability in a column
    p_LABEL."""
    rows = [
        {
            **{k: r[k] for k in ("source", "text", "pair", "label", "value") if k in r},
            **({"labels": ",".join(r["labels"])} if "labels" in r else {}),
            **({"windows": r["windows"]} if "windows" in r else {}),
            **{f"p_{label}": f"{p:.6f}" for label, p in r.get("probabilities", {}).items()},
        }
        for r in results
    ]
    write_answers(path, results, rows, list(rows[0]) if rows else ["text"])


def _label_thresholds(saved: Any, labels: list[str], directory: Path) -> list[float]:
    """Each label's threshold: those config.json keeps from `finetune --tune-thresholds`, else THRESHOLD."""
    if saved is None:
        return [THRESHOLD] * len(labels)
    where = f"{directory / 'config.json'}: label_thresholds"
    if not isinstance(saved, dict) or set(saved) != set(labels):
        raise UserError(f"{where} must give a threshold for each label in id2label, and no other")
    bad = [label for label in labels if not isinstance(saved[label], (int, float)) or not 0 <= saved[label] <= 1]
    if bad:
        raise UserError(f"{where}: {bad[0]!r} has {saved[bad[0]]!r}, not a probability from 0 to 1")
    return [float(saved[label]) for label in labels]
