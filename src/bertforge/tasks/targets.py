"""What a labelled text's label becomes for the model, and how the model's answers are scored.

Sequence classification comes in `transformers`' three problem types, each a
class here with one interface (the task in classification.py holds one):
- `OneLabel`: a class per text (SST-2's positive/negative); targets are class
  ids, answers a distribution over the classes; accuracy and F1.
- `LabelSet`: any number of labels per text, none included (a comment that is
  both toxic and an insult); targets are a 0/1 row per text, answers each
  label's own probability, and a label is predicted at 0.5 or above; micro- and
  macro-averaged F1 and the share of texts whose whole set is right.
  `TunedLabelSet` also fits a threshold per label on dev, for labels too rare
  for a sigmoid to reach 0.5.
- `Number`: a value per text (STS-B's similarity); MSE and correlations.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import UserError
from ..model.heads import MULTI_LABEL, REGRESSION, SINGLE_LABEL
from .cuts import best_cut

THRESHOLD = 0.5  # a label of a set is predicted where its probability reaches this
MIN_POSITIVES_TO_TUNE = 5  # a label with fewer dev texts keeps THRESHOLD: a cut fitted to 2 texts is noise


def sorted_labels(labels: set[str]) -> list[str]:
    """Labels sorted (numbers numerically), so the mapping is stable."""
    return sorted(labels, key=lambda x: (not _is_number(x), float(x) if _is_number(x) else 0.0, x))


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


class OneLabel:
    """A class per text: softmax over the classes, cross-entropy."""

    problem_type = SINGLE_LABEL
    main_metric = "accuracy"
    learns = "one label per text"  # what the messages call it

    @staticmethod
    def each(label: str) -> tuple[str, ...]:
        """A text's labels, as a tuple."""
        return (label,)

    def __init__(self, train: Sequence, dev: Sequence, dev_path: str | Path):
        """The label names, sorted, from the training texts' labels; dev may not add any."""
        self.names = sorted_labels({name for label in train for name in self.each(label)})
        if len(self.names) < 2:
            raise UserError(
                f"the training file has {len(self.names)} distinct label(s); {self.learns} needs at least 2"
            )
        unknown = sorted({name for label in dev for name in self.each(label)} - set(self.names))
        if unknown:
            raise UserError(f"{dev_path}: label {unknown[0]!r} does not occur in the training file")
        self.num_labels = len(self.names)

    def encode(self, labels: Sequence[str], path: str | Path) -> torch.Tensor:
        """(n,) class ids."""
        index = {name: i for i, name in enumerate(self.names)}
        return torch.tensor([index[label] for label in labels])

    def score(self, probabilities: np.ndarray, targets: torch.Tensor) -> dict[str, float]:
        return classification_metrics(probabilities.argmax(-1), targets.numpy(), self.num_labels)

    def saved_config(self) -> dict[str, Any]:
        return {
            "id2label": {str(i): label for i, label in enumerate(self.names)},
            "label2id": {label: i for i, label in enumerate(self.names)},
            "problem_type": self.problem_type,
        }

    def summary(self) -> dict[str, Any]:
        return {"labels": self.names}


class LabelSet(OneLabel):
    """Any number of labels per text: a yes/no per label, binary cross-entropy on each."""

    problem_type = MULTI_LABEL
    main_metric = "micro_f1"
    learns = "a set of labels per text"

    @staticmethod
    def each(labels: tuple[str, ...]) -> tuple[str, ...]:
        return labels

    def encode(self, labels: Sequence[tuple[str, ...]], path: str | Path) -> torch.Tensor:
        """(n, num_labels) 0/1: row i has a 1 for each of text i's labels."""
        index = {name: i for i, name in enumerate(self.names)}
        rows = torch.zeros(len(labels), self.num_labels)
        for i, text_labels in enumerate(labels):
            rows[i, [index[label] for label in text_labels]] = 1.0
        return rows

    def score(self, probabilities: np.ndarray, targets: torch.Tensor) -> dict[str, float]:
        return multi_label_metrics(probabilities >= THRESHOLD, targets.numpy() > 0.5)

    def summary(self) -> dict[str, Any]:
        return {"labels": self.names, "multi_label": True}


class TunedLabelSet(LabelSet):
    """A set of labels per text, each label with its own threshold, fitted on dev to maximise that label's F1.

    A rare label's probability seldom reaches 0.5, so at 0.5 it is never predicted; its own threshold brings it
    back. Scores come at 0.5 and at the fitted thresholds (`tuned_`, which pick the best epoch). The tuned scores
    are fitted on the texts they are measured on, so they flatter the model: measure on a test file."""

    main_metric = "tuned_micro_f1"

    def score(self, probabilities: np.ndarray, targets: torch.Tensor) -> dict[str, float]:
        """Also keeps this dev pass's thresholds, which `saved_config` saves with the epoch's model."""
        truth = targets.numpy() > 0.5
        self.thresholds = best_thresholds(probabilities, truth)
        tuned = multi_label_metrics(probabilities >= self.thresholds, truth)
        return {**super().score(probabilities, targets), **{f"tuned_{k}": v for k, v in tuned.items()}}

    def saved_config(self) -> dict[str, Any]:
        thresholds = {name: float(t) for name, t in zip(self.names, self.thresholds)}
        return {**super().saved_config(), "label_thresholds": thresholds}


class Number:
    """A value per text: one output, mean squared error."""

    problem_type = REGRESSION
    main_metric = "pearson"
    num_labels = 1

    def __init__(self, train: Sequence[str], dev: Sequence[str], dev_path: str | Path):
        pass  # any number is a target; `encode` refuses what is not one

    def encode(self, labels: Sequence[str], path: str | Path) -> torch.Tensor:
        """(n,) the labels as numbers; the first that is not one is named."""
        for number, label in enumerate(labels, start=1):
            if not _is_number(label):
                raise UserError(
                    f"{path}: example {number} has label {label!r}, not a number (regression needs numbers)"
                )
        return torch.tensor([float(label) for label in labels], dtype=torch.float32)

    def score(self, values: np.ndarray, targets: torch.Tensor) -> dict[str, float]:
        return regression_metrics(values[:, 0], targets.numpy())

    def saved_config(self) -> dict[str, Any]:
        return {"problem_type": self.problem_type, "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}

    def summary(self) -> dict[str, Any]:
        return {"problem_type": self.problem_type}  # what the labels are, as the saved config says


TARGETS = {target.problem_type: target for target in (OneLabel, LabelSet, Number)}


# ---------------------------------------------------------------- metrics


def _f1(tp: float, fp: float, fn: float) -> float:
    return float(2 * tp / (2 * tp + fp + fn)) if tp + fp + fn else 0.0


def classification_metrics(predictions: np.ndarray, labels: np.ndarray, num_labels: int) -> dict[str, float]:
    """Accuracy and macro-F1; Matthews correlation and positive-class F1 too for binary tasks."""
    result = {"accuracy": float((predictions == labels).mean())}
    f1s = []
    for c in range(num_labels):
        tp = float(((predictions == c) & (labels == c)).sum())
        fp = float(((predictions == c) & (labels != c)).sum())
        fn = float(((predictions != c) & (labels == c)).sum())
        f1s.append(_f1(tp, fp, fn))
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


def multi_label_metrics(predicted: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """predicted, truth: (n, num_labels) booleans. Micro-F1 counts every (text, label) decision alike, so frequent
    labels weigh most; macro-F1 averages the labels' own F1s, so rare labels count as much; subset accuracy is
    the share of texts whose whole set of labels is right."""
    tp = (predicted & truth).sum(0).astype(float)  # (num_labels,)
    fp = (predicted & ~truth).sum(0).astype(float)
    fn = (~predicted & truth).sum(0).astype(float)
    return {
        "micro_f1": _f1(tp.sum(), fp.sum(), fn.sum()),
        "macro_f1": float(np.mean([_f1(*counts) for counts in zip(tp, fp, fn)])),
        "subset_accuracy": float((predicted == truth).all(1).mean()),
    }


def best_thresholds(probabilities: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """(num_labels,) for each label the threshold between two of its probabilities that maximises its F1 over these
    texts, from probabilities and truth (n, num_labels). A label with fewer than MIN_POSITIVES_TO_TUNE texts keeps
    THRESHOLD."""
    thresholds = np.full(truth.shape[1], THRESHOLD)
    for label in range(truth.shape[1]):
        if truth[:, label].sum() >= MIN_POSITIVES_TO_TUNE:
            thresholds[label] = best_cut(probabilities[:, label], _f1_taking_first(truth[:, label]), 0.0, 1.0)
    return thresholds


def _f1_taking_first(truth: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """For `best_cut`: one label's F1, truth (n,), when the first k texts of an order get it, k = 0..n."""

    def f1(order: np.ndarray) -> np.ndarray:  # (n + 1,)
        hits = np.cumsum(truth[order])
        return np.concatenate([[0.0], 2 * hits / (np.arange(1, len(order) + 1) + truth.sum())])

    return f1


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
