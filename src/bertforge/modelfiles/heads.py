"""A fine-tuned task's head: its labels as config.json names them, and the head carried through the verbs that
change the encoder under it.

    label_names(directory, config, what)   the labels by id: id2label's, or `transformers`' LABEL_i where a
                                           labelled class was saved without one

`pretrain --init-from` and `tokenizer extend` train or grow a pre-training model (BertForPreTraining); a start that
was a classifier, a tagger, a reader or a multiple-choice model goes back out as that class, its head's weights and
labels as they were (`write_model_files` saves a model's `task_head`), a masked-LM head trained here beside them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..errors import UserError
from ..families.architectures import ARCHITECTURES, Architecture
from .directory import ModelFiles, read_weights
from .hf import from_hf_state_dict

DEFAULT_LABELS = 2  # `transformers`' num_labels where config.json names none: it then writes no id2label either


def label_names(directory: Path, config: dict[str, Any], what: str) -> list[str]:
    """A task model's labels by id, from config.json's id2label, whose keys are the ids 0 to n-1 written as text
    (as `transformers` writes them); `what` the kind of model that needs them. A labelled class saved without
    id2label (`transformers` 5 writes none for its default two labels) has `transformers`' names, LABEL_0 ...,
    num_labels of them (two by default)."""
    id2label = config.get("id2label")
    if id2label is None and _labelled_class(config):
        return [f"LABEL_{i}" for i in range(config.get("num_labels") or DEFAULT_LABELS)]
    if not isinstance(id2label, dict) or not id2label:
        raise UserError(f"{directory}: not a {what} model (no id2label in config.json)")
    if sorted(id2label) != sorted(str(i) for i in range(len(id2label))):
        raise UserError(f"{directory / 'config.json'}: id2label's keys are not the ids 0 to {len(id2label) - 1}")
    return [str(id2label[str(i)]) for i in range(len(id2label))]


def _labelled_class(config: dict[str, Any]) -> bool:
    """Whether config.json names a class whose head answers one of a set of labels (a sequence's or each token's)."""
    named = config.get("architectures")
    first = named[0] if isinstance(named, list) and named and isinstance(named[0], str) else ""
    return any(first.endswith(record.suffix) for record in ARCHITECTURES.records() if record.labelled)


TASK_KEYS = ("id2label", "label2id", "problem_type", "label_thresholds")  # config.json's keys of a task's labels


@dataclass(frozen=True)
class TaskHead:
    """A fine-tuned task's head, carried unchanged through a verb that trains or grows the encoder under it
    (`pretrain --init-from`, `tokenizer extend`): the model goes back out as the class it was, its head and labels
    as they were, a masked-LM head trained here beside them (the task's class in `transformers` loads without it)."""

    architecture: str  # ours: BertForSequenceClassification, BertForTokenClassification, ...
    weights: dict[str, torch.Tensor]  # its modules' weights, by our names
    config: dict[str, Any]  # config.json's keys of its labels (TASK_KEYS)

    @property
    def record(self) -> Architecture:
        return ARCHITECTURES.get(self.architecture)


def read_task_head(files: ModelFiles | None, trust_pickle: bool = False) -> TaskHead | None:
    """The task head a directory's class holds (a classifier's, a tagger's, a reader's, a multiple-choice model's),
    read from its weights; None for a masked LM or an encoder (or no directory). A class that names a head its
    weights lack is refused: what it would go back out with is a head nobody trained."""
    if files is None:
        return None
    family = files.family
    named = [r for r in ARCHITECTURES.records() if family.hf_architecture(r.name) == files.architecture]
    record = next((r for r in named if r.task_head), None)
    if record is None:
        return None
    prefixes = tuple(f"{head}." for head in record.heads)
    state, _ = from_hf_state_dict(read_weights(files.directory, trust_pickle), files.config)
    weights = {name: tensor for name, tensor in state.items() if name.startswith(prefixes)}
    if not weights:
        raise UserError(
            f"{files.directory}: config.json names {files.architecture}, but its weights hold no head of it"
        )
    config = {key: files.raw[key] for key in TASK_KEYS if key in files.raw}
    return TaskHead(record.name, weights, config)
