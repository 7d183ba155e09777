"""Fine-tuning: one loop for every task.

    bertforge finetune run --task classification --train train.tsv --dev dev.tsv \\
        --text-column sentence --label-column label --out sst2
    bertforge finetune run --task regression --train train.tsv --dev dev.tsv \\
        --text-column s1 --pair-column s2 --label-column score --out sts
    bertforge finetune run --train sentence_polarity/ --out mr     # a file per class; dev held out of train
    bertforge finetune run --task multi-label --train train.tsv --dev dev.tsv \\
        --text-column text --label-column labels --out emotions      # a cell "joy,love": two labels
    bertforge finetune run --task token-classification --train train.conll --dev dev.conll --out ner
    bertforge finetune run --task token-classification --train train.parquet --dev validation.parquet \\
        --out ner                                      # `datasets`' tokens and ner_tags, tag names from the file
    bertforge finetune run --task question-answering --train train.json --dev dev.json --out squad
    bertforge finetune run --task multiple-choice --train train.csv --dev val.csv --text-column sent1 \
        --pair-column sent2 --choice-columns ending0,ending1,ending2,ending3 --label-column label --out swag
    bertforge finetune run --task sentence-similarity --train pairs.tsv --text-column question \
        --pair-column answer --out search          # sentence vectors for `bertforge embed`; dev held out

A task (classification.py for one label, a set or a number; tagging.py, qa.py, multiple_choice.py,
similarity.py) reads its files, encodes them with
the model's tokenizer, cuts training batches and scores the dev set. This loop
does the rest: a fresh head on the pre-trained encoder (or the same architecture
from random weights with `from_scratch`, the baseline that shows what
pre-training buys), AdamW with warm-up and linear decay, mixed precision, a dev
evaluation after every epoch, and the best epoch kept as a `transformers` model
directory. Bad input is found while reading, before anything is written.
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from tqdm import tqdm

from .classification import PROBLEM_TYPES, ClassificationTask, Columns
from .config import FINETUNE_TASKS, THRESHOLD_TASKS, FinetuneConfig
from .errors import UserError
from .fileio import write_json
from .hf import config_from_hf
from .model import set_dropout
from .modeldir import check_vocab, load_model, read_config, resolve_model_dir, save_model
from .multiple_choice import ChoiceColumns, MultipleChoiceTask
from .optim import build_optimizer, lr_factor, set_lr, warmup_fraction
from .qa import QuestionAnsweringTask
from .runtime import MixedPrecision, resolve_device, resolve_precision, use_fast_paths
from .similarity import PairColumns, SimilarityTask
from .tagging import TagColumns, TaggingTask
from .tokenizer import load_tokenizer


class Task(Protocol):
    """What a task gives the loop."""

    model_class: type
    main_metric: str  # the dev metric that picks the best epoch (higher is better)

    def model_kwargs(self) -> dict[str, Any]: ...
    def train_batches(self, batch_size: int, rng: np.random.Generator) -> list[dict[str, torch.Tensor]]: ...
    def evaluate(self, model, precision: MixedPrecision) -> dict[str, float]: ...
    def saved_config(self) -> dict[str, Any]: ...
    def summary(self) -> dict[str, Any]: ...


def make_task(
    kind: str,
    tokenizer,
    train: str | Path,
    dev: str | Path | None,
    seq_len: int,
    cfg: FinetuneConfig,
    columns: Columns | ChoiceColumns | TagColumns | PairColumns | None = None,
) -> Task:
    """The task object for `kind`, with its files read and encoded (any bad input raises here)."""
    if cfg.tune_thresholds and kind not in THRESHOLD_TASKS:
        raise UserError(
            "--tune-thresholds fits a threshold per label of --task multi-label, or when --task question-answering "
            f"answers 'no answer'; --task {kind} has none"
        )
    if kind in PROBLEM_TYPES:
        return ClassificationTask(
            tokenizer,
            train,
            dev,
            seq_len,
            columns or Columns(),
            PROBLEM_TYPES[kind],
            cfg.dev_fraction,
            cfg.tune_thresholds,
        )
    if kind == "sentence-similarity":
        if columns is not None and not isinstance(columns, PairColumns):
            raise UserError("--task sentence-similarity reads --text-column, --pair-column and --label-column")
        return SimilarityTask(tokenizer, train, dev, seq_len, columns, cfg.dev_fraction)
    if dev is None:
        raise UserError(
            f"--task {kind} needs --dev (only classification, multi-label, regression and sentence-similarity hold "
            "out a share of --train)"
        )
    if kind == "token-classification":
        return TaggingTask(tokenizer, train, dev, seq_len, columns or TagColumns())
    if kind == "question-answering":
        return QuestionAnsweringTask(
            tokenizer, train, dev, seq_len, cfg.stride, cfg.max_answer_length, cfg.tune_thresholds
        )
    if kind == "multiple-choice":
        if not isinstance(columns, ChoiceColumns):
            raise UserError("--task multiple-choice needs --text-column, --choice-columns and --label-column")
        return MultipleChoiceTask(tokenizer, train, dev, seq_len, columns)
    raise UserError(f"unknown task {kind!r}; choose one of {', '.join(FINETUNE_TASKS)}")


def finetune(
    model_path: str | Path,
    kind: str,
    train: str | Path,
    dev: str | Path | None,
    out: str | Path,
    cfg: FinetuneConfig | None = None,
    columns: Columns | ChoiceColumns | TagColumns | PairColumns | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Fine-tune the model in `model_path` on a task; the best epoch's model goes to OUT/model. Without `dev`,
    a classification, multi-label or regression task holds out `cfg.dev_fraction` of `train`."""
    cfg = cfg or FinetuneConfig()
    directory = resolve_model_dir(model_path)
    tokenizer = load_tokenizer(directory)
    config = config_from_hf(read_config(directory), str(directory / "config.json"))
    seq_len = min(cfg.sequence_length(kind), config.max_position_embeddings)
    task = make_task(kind, tokenizer, train, dev, seq_len, cfg, columns)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    model = (
        task.model_class(config, **task.model_kwargs())
        if cfg.from_scratch
        else load_model(task.model_class, directory, keep_heads=False, **task.model_kwargs())
    )
    check_vocab(tokenizer, model.config.vocab_size, str(directory))
    if cfg.dropout is not None:
        set_dropout(model, cfg.dropout, cfg.dropout)
    device = resolve_device(cfg.device)
    precision = MixedPrecision(device, resolve_precision(cfg.precision, device))
    model.to(device)
    use_fast_paths(model, device, precision.precision)
    return _fit(task, model, tokenizer, precision, cfg, Path(out), progress)


def _fit(
    task: Task, model, tokenizer, precision: MixedPrecision, cfg: FinetuneConfig, out: Path, progress: bool
) -> dict:
    optimizer = build_optimizer(model, precision.device, cfg.lr, cfg.weight_decay)
    rng = np.random.default_rng(cfg.seed)
    out.mkdir(parents=True, exist_ok=True)
    metrics_path = out / "metrics.jsonl"
    metrics_path.write_text("", encoding="utf-8")
    best: dict[str, Any] = {}
    step, total_steps, started = 0, None, time.perf_counter()
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        batches = task.train_batches(cfg.batch_size, rng)
        if total_steps is None:
            total_steps = min(len(batches) * cfg.epochs, cfg.max_steps) if cfg.max_steps else len(batches) * cfg.epochs
        warmup = warmup_fraction(cfg.warmup, total_steps)
        batches = batches[: total_steps - step]  # the last epoch of a --max-steps run ends early
        bar = tqdm(batches, desc=f"epoch {epoch}/{cfg.epochs}", disable=not progress, file=sys.stderr, mininterval=1.0)
        train_loss = 0.0
        for b, batch in enumerate(bar):
            batch = {k: v.to(precision.device) for k, v in batch.items()}
            set_lr(optimizer, cfg.lr * lr_factor((step + 1) / total_steps, warmup, "linear"))
            with precision.autocast():
                _, loss = model(**batch)
            precision.backward(loss)
            precision.step(optimizer, model.parameters(), cfg.grad_clip)
            step += 1
            train_loss += float(loss.detach())
            bar.set_postfix(loss=f"{train_loss / (b + 1):.4f}", refresh=False)
        last = epoch == cfg.epochs or step >= total_steps
        scores = task.evaluate(model, precision) if cfg.dev_every_epoch or last else {}
        record = {
            "epoch": epoch,
            "step": step,
            "train_loss": train_loss / max(len(batches), 1),
            "elapsed": time.perf_counter() - started,
            **{f"dev_{k}": v for k, v in scores.items()},
        }
        with open(metrics_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        if scores:
            tqdm.write(f"epoch {epoch}: " + ", ".join(f"dev {k} {v:.4f}" for k, v in scores.items()), file=sys.stderr)
            if not best or _better(record[f"dev_{task.main_metric}"], best[f"dev_{task.main_metric}"]):
                best = record
                extra = {**task.saved_config(), "bertforge_finetune": {**cfg.to_dict(), "best_epoch": epoch}}
                save_model(model, out / "model", tokenizer, extra)
        if last:
            break
    summary = {**task.summary(), "main_metric": task.main_metric, "best": best}
    write_json(out / "summary.json", summary)
    return summary


def _better(score: float, best: float) -> bool:
    return not math.isnan(score) and (math.isnan(best) or score > best)
