"""Fine-tuning: one loop for every task.

    bertforge finetune MODEL --task TASK --train TRAIN [--dev DEV] --out OUT    # each task's module shows its own

A task (registry.py names them; classification.py for one label, a set or a number; tagging.py, qa.py,
multiple_choice.py, similarity.py) reads its files, encodes them with
the model's tokenizer, cuts training batches and scores the dev set. This loop
does the rest: a fresh head on the pre-trained encoder (or the same architecture
from random weights with `from_scratch`, the baseline that shows what
pre-training buys), AdamW with warm-up and linear decay, mixed precision, a dev
evaluation after every epoch, the best epoch kept as a `transformers` model
directory, and checkpoints (state.py) from which `--resume` goes on as if
the run had never stopped. Bad input is found while reading, before anything is written.
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..engine.metrics import MetricsLog
from ..engine.optim import build_optimizer, lr_factor, set_lr, warmup_fraction
from ..engine.runtime import MixedPrecision, StopSignals, resolve_device, resolve_precision
from ..errors import Stopped, TrainingFailed, UserError
from ..fileio import check_not_inputs, directory_lock, write_json
from ..model.bert import set_activation_checkpointing, set_dropout, use_fast_paths
from ..model.heads import BertForSentenceEmbedding
from ..model.unpadding import unpadding_mode
from ..modelfiles.directory import PRETRAINING_KEY, load_model, read_model_files, save_model
from ..modelfiles.origin import FINETUNE_KEY, Origin, read_origin
from ..modelfiles.vocabulary import check_vocab
from ..progress import Progress, say
from ..tokenizer import load_tokenizer, max_input_length
from .config import FinetuneConfig
from .registry import Task, task_record
from .state import FitState, load_fit_state, remove_fit_states, run_settings, save_fit_state, unfinished_step


def finetune(
    model_path: str | Path,
    kind: str,
    train: str | Path,
    dev: str | Path | None,
    out: str | Path,
    cfg: FinetuneConfig | None = None,
    columns: Any = None,
    progress: bool = True,
    resume: bool = False,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Fine-tune the model in `model_path` on a task; the best epoch's model goes to OUT/model. Without `dev`,
    a classification, multi-label or regression task holds out `cfg.dev_fraction` of `train`.

    `resume` continues the run OUT holds from its latest checkpoint, leaves a finished one as it is (its summary
    is returned), or starts one; `overwrite` starts over. Without either, an OUT holding a fine-tuning, finished
    or not, is refused: a model is never replaced by accident."""
    cfg = cfg or FinetuneConfig()
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: a file, not a directory")
    created = not out.exists()
    try:
        with directory_lock(out):  # one process per fine-tuning: OUT is checked, then written, under the lock
            return _finetune(model_path, kind, train, dev, out, cfg, columns, progress, resume, overwrite)
    except BaseException:
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # the lock made it: a run that never started leaves nothing
        raise


FINETUNE_NAMES = frozenset({"model", "metrics.jsonl", "summary.json", "checkpoints"})


def _finetune(model_path, kind, train, dev, out: Path, cfg: FinetuneConfig, columns, progress, resume, overwrite):
    """`finetune`, OUT locked."""
    strange = sorted(p.name for p in out.iterdir() if p.name not in FINETUNE_NAMES and not p.name.startswith("."))
    if strange:
        raise UserError(
            f"--out {out} holds files that are not a fine-tuning's ({', '.join(strange[:3])}): give another --out"
        )
    unfinished = unfinished_step(out)
    finished = unfinished is None and (out / "summary.json").is_file()
    if not (resume or overwrite) and (unfinished is not None or finished or (out / "model").is_dir()):
        held = f"an unfinished fine-tuning (step {unfinished})" if unfinished is not None else "a fine-tuned model"
        action = "--resume to continue it, or " if unfinished is not None else ""
        raise UserError(f"{out} holds {held}; pass {action}--overwrite to start over, or give another --out")
    if resume and finished:
        return json.loads((out / "summary.json").read_text(encoding="utf-8"))  # nothing left to do
    files = read_model_files(model_path)
    directory, config = files.directory, files.config
    check_not_inputs({"--out": out}, {"MODEL": directory, "--train": train, "--dev": dev})
    tokenizer = load_tokenizer(directory, files.raw)
    record = task_record(kind)
    seq_len = min(cfg.seq_len or record.seq_len, max_input_length(tokenizer, config.max_position_embeddings))
    task = record.build(tokenizer, train, dev, seq_len, cfg, columns)
    origin = read_origin(files)  # its sentence-transformers modules go back out with the fine-tuned model
    origin.check_computable()
    kwargs = task.model_kwargs()
    if task.model_class is BertForSentenceEmbedding and origin.sentence is not None:
        kwargs["pooling"] = origin.sentence.pooling  # a sentence-embedding model learns with its own pooling
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    model = (
        task.model_class(config, **kwargs)
        if cfg.from_scratch
        else load_model(task.model_class, files, cfg.trust_pickle, keep_heads=False, **kwargs)
    )
    check_vocab(tokenizer, model.config.vocab_size, str(directory), model.config.type_vocab_size)
    if cfg.dropout is not None:
        set_dropout(model, cfg.dropout, cfg.dropout)
    device = resolve_device(cfg.device)
    precision = MixedPrecision(device, resolve_precision(cfg.precision, device))
    model.to(device)
    use_fast_paths(model, device, precision.precision)
    set_activation_checkpointing(model, cfg.activation_checkpointing)
    pretrained = files.raw.get(PRETRAINING_KEY) or {}  # the base's recipe, on the card too
    card = {"recipe": pretrained.get("recipe"), "task": kind, "base_model": str(model_path)}
    card["task_summary"] = record.summary  # what the task learns, in the record's words
    card["labels"] = task.summary().get("labels")
    fitting = _Fitting(task, model, tokenizer, precision, cfg, out, run_settings(cfg, kind), card, origin)
    if unfinished is not None and resume:
        fitting.restore()
    else:
        remove_fit_states(out)
        (out / "summary.json").unlink(missing_ok=True)  # a finished run's, now being replaced
    with unpadding_mode(cfg.unpad):
        return fitting.run(progress)


class _Fitting:
    """One fine-tuning run: the epochs' steps, dev scores, the best epoch's model, and checkpoints to resume."""

    def __init__(
        self,
        task: Task,
        model,
        tokenizer,
        precision: MixedPrecision,
        cfg: FinetuneConfig,
        out: Path,
        settings,
        card: dict[str, Any],
        origin: Origin,
    ):
        self.task, self.model, self.tokenizer, self.precision, self.cfg = task, model, tokenizer, precision, cfg
        self.out, self.settings = out, settings
        self.card = card  # the model card's facts: the task, the model fine-tuned and the labels
        self.origin = origin  # the model fine-tuned: its sentence-transformers modules are saved with this one
        self.optimizer = build_optimizer(model, precision.device, cfg.lr, cfg.weight_decay)
        self.state = FitState()
        self.saved_step: int | None = None  # the step of the latest checkpoint
        self.save_failed = False  # a checkpoint write failed (a full disk): not tried again on the way out
        self.last_save = time.perf_counter()
        self.log = MetricsLog(out / "metrics.jsonl")

    def restore(self) -> None:
        self.state = load_fit_state(self.out, self.model, self.optimizer, self.precision.scaler, self.settings)
        self.saved_step = self.state.step
        say(f"resumed at step {self.state.step} (epoch {self.state.epoch})")

    def run(self, progress: bool) -> dict[str, Any]:
        cfg, state = self.cfg, self.state
        self.out.mkdir(parents=True, exist_ok=True)
        self.log.truncate(state.step - state.batch)  # the epochs finished before this one began, none if fresh
        self.log.path.touch()
        rng = np.random.default_rng(cfg.seed)
        started = time.perf_counter() - state.elapsed
        total_steps = None
        with StopSignals() as signals:
            try:
                for epoch in range(1, cfg.epochs + 1):
                    # Every epoch's batches are drawn, done ones too, so a resumed run's data order is the seed's.
                    batches = self.task.train_batches(cfg.batch_size, rng)
                    if total_steps is None:
                        total_steps = min(len(batches) * cfg.epochs, cfg.max_steps or len(batches) * cfg.epochs)
                    if epoch < state.epoch:
                        continue
                    batches = batches[: total_steps - (state.step - state.batch)]  # a --max-steps run ends early
                    self._train(epoch, batches, total_steps, started, signals, progress)
                    last = epoch == cfg.epochs or state.step >= total_steps
                    self._end_epoch(epoch, len(batches), last, started)
                    if last:
                        break
                    self._save()
                    if signals.received:
                        raise self._stopped(signals.received)
            except Stopped:
                raise
            except TrainingFailed:
                if self.saved_step is None and not state.best:  # nothing to go on from: it leaves nothing behind
                    self.log.path.unlink(missing_ok=True)
                raise
            except BaseException:
                self._save_after_failure()
                raise
        summary = {**self.task.summary(), "main_metric": self.task.main_metric, "best": state.best}
        write_json(self.out / "summary.json", summary)
        remove_fit_states(self.out)
        return summary

    def _train(self, epoch: int, batches: list, total_steps: int, started: float, signals, progress: bool) -> None:
        """The epoch's batches from where it stands, saving every --checkpoint-minutes and on a signal."""
        cfg, state, precision = self.cfg, self.state, self.precision
        warmup = warmup_fraction(cfg.warmup, total_steps)
        self.model.train()
        bar = Progress(len(batches), f"epoch {epoch}/{cfg.epochs}", "batch", progress, state.batch, cfg.log_every)
        with bar:
            for batch in batches[state.batch :]:
                batch = {k: v.to(precision.device) for k, v in batch.items()}
                lr = cfg.lr * lr_factor((state.step + 1) / total_steps, warmup, "linear")
                set_lr(self.optimizer, lr)
                with precision.autocast():
                    _, loss = self.model(**batch)
                if not bool(torch.isfinite(loss)):
                    raise self._diverged(loss)
                precision.backward(loss)
                precision.step(self.optimizer, self.model.parameters(), cfg.grad_clip)
                state.step, state.batch = state.step + 1, state.batch + 1
                state.train_loss += float(loss.detach())
                state.elapsed = time.perf_counter() - started
                bar.update(1, f"step {state.step}  loss {state.train_loss / state.batch:.4f}  lr {lr:.2e}")
                if signals.received:
                    self._save()
                    raise self._stopped(signals.received)
                if cfg.checkpoint_minutes and time.perf_counter() - self.last_save >= 60 * cfg.checkpoint_minutes:
                    self._save()

    def _end_epoch(self, epoch: int, batches: int, last: bool, started: float) -> None:
        """Score dev, log the epoch, keep the model if it is the best so far; then the next epoch starts."""
        state, task = self.state, self.task
        scores = task.evaluate(self.model, self.precision) if self.cfg.dev_every_epoch or last else {}
        record = {
            "epoch": epoch,
            "step": state.step,
            "train_loss": state.train_loss / max(batches, 1),
            "elapsed": time.perf_counter() - started,
            **{f"dev_{k}": v for k, v in scores.items()},
        }
        self.log.write(record)
        if scores:
            say(f"epoch {epoch}: " + ", ".join(f"dev {k} {v:.4f}" for k, v in scores.items()))
            if not state.best or _better(record[f"dev_{task.main_metric}"], state.best[f"dev_{task.main_metric}"]):
                extra = {**task.saved_config(), FINETUNE_KEY: {**self.cfg.to_dict(), "best_epoch": epoch}}
                card = {**self.card, "dev": scores, "best_epoch": epoch}
                save_model(self.model, self.out / "model", self.tokenizer, extra, card, self.origin)
                state.best = record  # only once model/ holds it: a save that fails leaves the last best in both
        state.epoch, state.batch, state.train_loss = epoch + 1, 0, 0.0
        state.elapsed = time.perf_counter() - started

    def _save(self) -> None:
        try:
            save_fit_state(self.out, self.model, self.optimizer, self.precision.scaler, self.state, self.settings)
        except OSError as e:  # a full or read-only disk: the previous checkpoint is whole (written atomically)
            self.save_failed = True
            raise UserError(
                f"could not write a checkpoint in {self.out / 'checkpoints'} ({e.strerror or e}); the previous one "
                "is intact: make room, then run the same command with --resume"
            ) from None
        self.saved_step, self.last_save = self.state.step, time.perf_counter()

    def _save_after_failure(self) -> None:
        """An error in the loop (a full disk, a bug, a bar that broke): keep the steps done, unless saved already
        or saving is what failed."""
        if self.state.step in (0, self.saved_step) or self.save_failed:
            return
        try:
            self._save()
            say(
                f"saved a checkpoint at step {self.state.step} before stopping on an error; fix it, then run the "
                "same command with --resume"
            )
        except Exception as e:  # the original error matters more; say why nothing could be saved
            say(f"could not save a checkpoint after the error: {e}")

    def _diverged(self, loss: torch.Tensor) -> TrainingFailed:
        """A loss that is not a number: the weights the step would train from lead nowhere, and none is saved. A
        run that saved nothing yet (it diverged in its first epoch) leaves nothing behind (`run`)."""
        best = self.state.best
        if best or self.saved_step is not None:
            kept = f"the best epoch so far (epoch {best['epoch']}) is in {self.out / 'model'}" if best else "its last"
            kept += " checkpoint is kept" if not best else ""
            again = "run again with --overwrite"
        else:
            kept, again = "no model was saved", "run again"
        return TrainingFailed(
            f"the loss is {float(loss.detach())} at step {self.state.step + 1} (the run diverged); nothing was saved "
            f"from it, {kept}. Lower --lr or --grad-clip, or check the data, then {again}"
        )

    def _stopped(self, signal_number: int) -> Stopped:
        return Stopped(
            signal_number,
            f"stopped by signal {signal_number} at step {self.state.step}; checkpoint saved in "
            f"{self.out / 'checkpoints'}. Resume with the same command and --resume",
        )


def _better(score: float, best: float) -> bool:
    return not math.isnan(score) and (math.isnan(best) or score > best)
