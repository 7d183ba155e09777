"""The tasks `finetune` learns: one record each, in one registry that `finetune`, `score`, the CLI and the model
card all ask, and that a task of your own joins through the same `register_task` the built-in ones use.

    record = task_record("token-classification")
    record.columns(ColumnNames(text="tokens", label="ner_tags"))   what the task reads, from what a user named
    record.build(tokenizer, train, dev, seq_len, cfg, columns)     the Task, its files read and encoded
    record.metric(columns, tuned)                                  the dev score that picks the best epoch

A built-in record names its class as "module:Class", imported on first use, so the CLI lists the tasks without
importing torch. That class answers three questions beside the Task protocol: `from_files` (the Task),
`columns_from` (the columns from a user's names) and `main_metric_for` (known before the files are read, so that
`score` can lead its table with it).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import UserError
from ..registry import Registry, resolve

if TYPE_CHECKING:
    import numpy as np
    import torch
    from tokenizers import Tokenizer

    from ..engine.runtime import MixedPrecision
    from .config import FinetuneConfig


class Task(Protocol):
    """What a task gives the fine-tuning loop; `register_task` adds one of your own.

    model_class     the model fine-tuned: one of bertforge's (BertForSequenceClassification, ...ForTokenClassification,
                    ...ForQuestionAnswering, ...ForMultipleChoice, BertForSentenceEmbedding), whose forward(**batch)
                    returns (logits, loss) and whose directory `transformers` reads
    main_metric     the dev score that picks the best epoch (higher is better)
    model_kwargs    what the model's head is built with (num_labels=...)
    train_batches   one epoch's batches, in an order drawn from `rng`: dicts of tensors for the model's forward
    evaluate        the dev scores, {name: value}, main_metric among them
    saved_config    what config.json keeps beside the weights (id2label, thresholds)
    summary         what summary.json says of the data (labels, sizes)
    """

    model_class: type
    main_metric: str

    def model_kwargs(self) -> dict[str, Any]: ...
    def train_batches(self, batch_size: int, rng: np.random.Generator) -> list[dict[str, torch.Tensor]]: ...
    def evaluate(self, model, precision: MixedPrecision) -> dict[str, float]: ...
    def saved_config(self) -> dict[str, Any]: ...
    def summary(self) -> dict[str, Any]: ...


# make(tokenizer, train, dev, seq_len, cfg, columns) -> a Task, its files read and encoded
TaskMaker = Callable[["Tokenizer", Path, "Path | None", int, "FinetuneConfig", Any], Task]


@dataclass(frozen=True)
class ColumnNames:
    """What a user named, the same for `finetune`'s flags and a `score --tasks` spec (None: not named); each task
    turns it into the columns it reads."""

    text: str | None = None
    label: str | None = None
    pair: str | None = None
    choices: tuple[str, ...] = ()
    label_until: str | None = None
    separator: str = ","
    label_columns: tuple[str, ...] = ()
    label_names: tuple[str, ...] = ()


FLAGS = {"text": "--text-column", "label": "--label-column", "pair": "--pair-column", "choices": "--choice-columns"}


class MissingColumns(UserError):
    """A task that reads named columns was not told them; `needed` are ColumnNames fields, which `finetune`
    spells as flags (this message) and `score` as its spec's options."""

    def __init__(self, task: str, needed: tuple[str, ...], extra: str = ""):
        self.task, self.needed = task, needed
        super().__init__(f"--task {task} needs {listed([FLAGS[n] for n in needed])}{extra}")


def listed(items: list[str]) -> str:
    """["a", "b", "c"] -> "a, b and c", as a message says it."""
    return ", ".join(items[:-1]) + f" and {items[-1]}" if len(items) > 1 else items[0]


@dataclass(frozen=True)
class TaskRecord:
    """Everything bertforge knows of a task by its name.

    summary       one line for --task's help
    make          "module:Class" (a built-in task's class in bertforge.tasks) or a TaskMaker of your own
    seq_len       the input length when --seq-len is 0
    dev_required  no dev file is held out of --train: the task needs --dev
    thresholds    --tune-thresholds fits something on dev for it
    label_names   labels stored as numbers may be named (--label-names)
    main_metric   a task of your own: the dev score `score` leads with (a built-in's class says its own)
    """

    name: str
    make: str | TaskMaker
    summary: str = ""
    seq_len: int = 128
    dev_required: bool = False
    thresholds: bool = False
    label_names: bool = False
    main_metric: str = ""

    @property
    def built_in(self) -> bool:
        """One of bertforge's: its class is named, not given."""
        return isinstance(self.make, str)

    def _task_class(self):
        return resolve(f".{self.make}", __package__)

    def columns(self, names: ColumnNames) -> Any:
        """The columns this task reads, from what a user named; a task of your own gets the names themselves."""
        if names.label_names and not self.label_names:
            raise UserError(f"--label-names names classes; --task {self.name} has none")
        return self._task_class().columns_from(names) if self.built_in else names

    def build(
        self, tokenizer, train: str | Path, dev: str | Path | None, seq_len: int, cfg: FinetuneConfig, columns: Any
    ) -> Task:
        """The Task with its files read and encoded (any bad input raises here)."""
        if cfg.tune_thresholds and not self.thresholds:
            raise UserError(
                f"--tune-thresholds fits the thresholds of {listed(threshold_tasks())}; --task {self.name} has none"
            )
        if dev is None and self.dev_required:
            raise UserError(
                f"--task {self.name} needs --dev (only {listed(held_out_tasks())} hold out a share of --train)"
            )
        make = partial(self._task_class().from_files, self) if self.built_in else self.make
        return make(tokenizer, Path(train), Path(dev) if dev else None, seq_len, cfg, columns)

    def metric(self, columns: Any = None, tuned: bool = False) -> str:
        """The dev score that picks the best epoch, known before the files are read."""
        if not self.built_in:
            return self.main_metric
        return self._task_class().main_metric_for(self, columns, tuned)


MAX_SEQ_LEN = 1 << 16  # a task's default input length, at most (a position table is never longer)
TASK_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")  # what --task NAME accepts
FACTS = ("summary", "seq_len", "dev_required", "thresholds", "label_names", "main_metric")


def check_task(record: TaskRecord, tasks: Registry) -> None:
    """A task record that would not work is refused when it is registered: its name as --task takes it, a maker
    that is a function or names a module of bertforge.tasks, each fact of its type."""
    name = record.name
    if not isinstance(name, str) or not TASK_NAME.fullmatch(name):
        raise UserError(f"a task's name is lowercase letters, digits and dashes, not {name!r}")
    make = record.make
    if not (isinstance(make, str) or callable(make)):
        raise UserError(f"task {name!r}: make is a function or class that reads the files, not {make!r}")
    types = {f.name: f.type for f in dataclasses.fields(TaskRecord)}
    for fact in FACTS:
        kind = {"str": str, "int": int, "bool": bool}[types[fact]]
        value = getattr(record, fact)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            wanted = {str: "a text", int: "a whole number", bool: "true or false"}[kind]
            raise UserError(f"task {name!r}: {fact} is {value!r}, not {wanted}")
    if not 1 <= record.seq_len <= MAX_SEQ_LEN:
        raise UserError(f"task {name!r}: seq_len {record.seq_len} is not a length from 1 to {MAX_SEQ_LEN:,} tokens")
    if isinstance(make, str):  # its module found now (not imported: --help lists tasks without torch)
        module, _, cls = make.partition(":")
        if not cls or not module.isidentifier() or importlib.util.find_spec(f"{__package__}.{module}") is None:
            raise UserError(f"task {name!r}: {make!r} names no module of bertforge.tasks as 'module:Class'")


TASKS: Registry[TaskRecord] = Registry("task", TaskRecord, check_task)


def register_task(name: str, make: str | TaskMaker, **facts: Any) -> TaskRecord:
    """Teach `finetune(model, name, train, dev, out, ...)` a task: `make(tokenizer, train, dev, seq_len, cfg,
    columns)` reads `train` and `dev` (any format you like) and returns a `Task`; `facts` are TaskRecord's fields
    (summary, seq_len, dev_required, thresholds, main_metric). The loop gives it what the built-in tasks get: a
    fresh head on the pre-trained encoder, warm-up and decay, mixed precision, dev scores every epoch, the best
    epoch kept as a `transformers` directory, checkpoints and `resume`. The same as
    `TASKS.register(TaskRecord(name, make, **facts))`; the built-in tasks below are registered so too, naming
    their class as "module:Class"."""
    unknown = [fact for fact in facts if fact not in FACTS]
    if unknown:
        raise UserError(f"task {name!r}: {unknown[0]!r} is not a fact of a task; they are {', '.join(FACTS)}")
    return TASKS.register(TaskRecord(name, make, **facts))


def task_record(name: str) -> TaskRecord:
    return TASKS.get(name)


def held_out_tasks() -> list[str]:
    """The tasks that hold dev out of the training file when given none."""
    return [r.name for r in TASKS.records() if not r.dev_required]


def threshold_tasks() -> list[str]:
    """The tasks whose answers hang on a decision threshold that --tune-thresholds fits on dev."""
    return [r.name for r in TASKS.records() if r.thresholds]


# The built-in tasks, in the order --task lists them. The first three are sequence classification (one head,
# three losses); sentence-similarity trains sentence vectors (an encoder without a head).
CLASSIFICATION = register_task(
    "classification", "classification:ClassificationTask", summary="one label per text or pair", label_names=True
)
MULTI_LABEL = register_task(
    "multi-label",
    "classification:ClassificationTask",
    summary="any number of labels per text",
    thresholds=True,
    label_names=True,
)
REGRESSION = register_task("regression", "classification:ClassificationTask", summary="a number per text or pair")
TAGGING = register_task(
    "token-classification",
    "tagging:TaggingTask",
    summary="a tag per word: entities, parts of speech",
    dev_required=True,
    label_names=True,
)
QUESTION_ANSWERING = register_task(
    "question-answering",
    "qa:QuestionAnsweringTask",
    summary="an answer as a span of a context, SQuAD-style",
    seq_len=384,
    dev_required=True,
    thresholds=True,
)
MULTIPLE_CHOICE = register_task(
    "multiple-choice",
    "multiple_choice:MultipleChoiceTask",
    summary="one choice of several, SWAG-style",
    dev_required=True,
)
SENTENCE_SIMILARITY = register_task(
    "sentence-similarity", "similarity:SimilarityTask", summary="sentence vectors from pairs, for search"
)
