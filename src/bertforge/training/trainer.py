"""The pre-training loop: MLM (and a pair objective) with AdamW, warm-up and decay, clipping, accumulation,
mixed precision and DDP; held-out evaluation, metrics, checkpoints and exact resume.

    bertforge pretrain --data data/ --out runs/mini --preset mini --max-steps 2000
    torchrun --nproc_per_node=2 -m bertforge pretrain --data data/ --out runs/mini ...

One optimizer step consumes `grad_accum` micro-batches per process. Losses are
normalised by the number of masked tokens in the *whole* step (all micro-batches,
all processes), so N processes × batch B, or accumulation, give the same update
as one process with the full batch.

No run is lost: an error anywhere in the loop (logging, evaluation, the progress
bar) saves a checkpoint before it propagates, and SIGINT/SIGTERM save and stop.
The run directory is locked for the run, and its data directory held against
`prepare` replacing it; a damaged checkpoint is never resumed from, and weights
that are no longer numbers are never saved.
"""

from __future__ import annotations

import contextlib
import gc
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from ..data.directory import read_meta
from ..data.instances import fixed_batches, pretraining_dataset
from ..data.masking import MaskingCollator, MaskingConfig, packed_documents, thin_masks
from ..engine.checkpoint import all_finite, checkpoint_dirs, checkpoint_step, intact_checkpoint
from ..engine.hardware import PeakMeter
from ..engine.metrics import MetricsLog, read_metrics
from ..engine.optim import build_optimizer, set_lr
from ..engine.runtime import (
    AUTOCAST_DTYPES,
    MixedPrecision,
    StopSignals,
    keep_freed_memory,
    lock_together,
    resolve_device,
    resolve_precision,
    setup_distributed,
)
from ..errors import TrainingFailed, UserError
from ..families import encoder_has_pooler
from ..fileio import check_not_inputs, write_json
from ..labels import IGNORE_INDEX
from ..model.bert import hidden_matrices, set_activation_checkpointing, use_fast_paths
from ..model.config import ModelConfig
from ..modelfiles.directory import PRETRAINING_KEY, load_weights, read_model_files, save_model
from ..modelfiles.heads import read_task_head
from ..modelfiles.origin import Origin, read_origin
from ..objectives import pair_objective
from ..progress import TrainingProgress
from ..tokenizer import fingerprint
from .config import TrainConfig, masking_config
from .continued import start_described
from .evaluate import unigram_baseline
from .flops import pretraining_flops_per_token
from .inputs import check_data
from .loader import BatchPlan, make_loader, stop_workers
from .metrics import MetricSums, evaluate_batches, summarise
from .objectives import pretraining_model
from .rundir import (
    METRICS,
    TENSORBOARD,
    RunResult,
    TrainerState,
    card_facts,
    check_run_dir,
    load_checkpoint,
    prepare_run_dir,
    read_trainer_state,
    run_configs,
    save_checkpoint,
)
from .schedule import Schedule


class Trainer:
    """Pre-trains one model on one data directory into one run directory."""

    def __init__(
        self,
        data_dir: str | Path,
        run_dir: str | Path,
        model_config: ModelConfig,
        cfg: TrainConfig,
        resume: bool = False,
        overwrite: bool = False,
        progress: bool = True,
        tensorboard: bool = False,
        recipe: str | None = None,
    ):
        self.data_dir, self.run_dir, self.model_config, self.cfg = Path(data_dir), Path(run_dir), model_config, cfg
        self.show_progress = progress
        self.processes = setup_distributed(cfg.device)
        self.device = resolve_device(cfg.device, self.processes.local_rank)
        self.precision = MixedPrecision(self.device, resolve_precision(cfg.precision, self.device))
        self.locks = contextlib.ExitStack()  # held until `close`: the run directory, and the data it reads
        self.log: MetricsLog | None = None  # the main process's, opened once the run directory is ready
        try:
            self._start(model_config, cfg, resume, overwrite, tensorboard, recipe)
        except BaseException:
            self.close()
            raise

    def _start(self, model_config: ModelConfig, cfg: TrainConfig, resume: bool, overwrite: bool, tensorboard, recipe):
        resume = resume and run_configs(self.run_dir) is not None  # a run that never saved starts again
        start_from = cfg.init_from if not resume else ""  # a resumed run's checkpoint, not --init-from, holds it
        self.tokenizer, start = check_data(self.data_dir, model_config, cfg, start_from)
        self._record(model_config, cfg, recipe)
        check_not_inputs({"--out": self.run_dir}, {"--data": self.data_dir, "--init-from": start and start.directory})
        # The model, and the starting weights in it, before anything is written: a start that cannot be read
        # (a pickle not trusted, weights that do not fit) leaves no run directory behind.
        torch.manual_seed(cfg.seed)
        self.origin: Origin | None = None  # the directory a continued run started from: what it goes back out with
        self.schedule = Schedule(cfg)  # a new masked-LM head's phase, where the start has none
        if start is not None:
            self.origin = read_origin(start)
            self.origin.check_computable()
            self.model = pretraining_model(model_config, cfg, pooler=self._keeps_pooler(model_config))
            load_weights(self.model, start, cfg.trust_pickle, longer_positions=True)
            self.model.task_head = read_task_head(start, cfg.trust_pickle)  # a classifier goes back out as one
            self.schedule = Schedule.for_model(cfg, self.model)
        check_run_dir(self.run_dir, self.configs, resume, overwrite)
        lock_together(self.locks, self.processes, self.device, self.run_dir, self.data_dir)
        checkpoint = intact_checkpoint(self.run_dir, set_aside=self.processes.is_main) if resume else None
        if resume and checkpoint is None:
            raise UserError(f"{self.run_dir}: every checkpoint is damaged (set aside as *.damaged); nothing to resume")
        if start is None:  # a new model, or a resumed run's: a continued run's checkpoint is its origin, as saved
            saved = read_model_files(checkpoint) if checkpoint is not None and cfg.init_from else None
            if saved is not None:
                self.origin = read_origin(saved)
                self.schedule = Schedule.recorded(cfg, saved.pretraining)
            self.model = pretraining_model(model_config, cfg, pooler=self._keeps_pooler(model_config))
            self.model.task_head = read_task_head(saved)
        self.model.untrained_heads = frozenset()  # every head of a pre-training model trains in the run
        self.extra_config[PRETRAINING_KEY].update(self.schedule.record())
        if self.processes.is_main:
            prepare_run_dir(self.run_dir, self.configs, resume, overwrite)
        if self.processes.world > 1:
            dist.barrier()  # rank 0 has prepared the directory before any process reads or writes it
        tensorboard_dir = self.run_dir / TENSORBOARD if tensorboard else None
        self.log = MetricsLog(self.run_dir / METRICS, tensorboard_dir) if self.processes.is_main else None

        if start is not None:
            self._say(f"starting from the weights of {start.directory}")
            for said in start_described(start, self.origin, self.model, model_config, cfg, self.schedule):
                self._say(said)
        caution = model_config.bias_variant.pair_caution
        if caution and cfg.pair_task.head and not resume:
            self._say(caution)
        self.model.to(self.device)
        use_fast_paths(self.model, self.device, self.precision.precision)
        set_activation_checkpointing(self.model, cfg.activation_checkpointing)
        if self.device == "cpu":
            keep_freed_memory()  # the steps' tensors live in host memory: map them once, not every step
        muon = hidden_matrices(self.model) if cfg.optimizer == "muon" else None  # what Muon steps; AdamW the rest
        self.optimizer = build_optimizer(
            self.model, self.device, cfg.lr, cfg.weight_decay, cfg.betas, cfg.adam_eps, muon
        )
        self.state, self.window = TrainerState(), MetricSums()
        if checkpoint is not None:
            self._restore(checkpoint)

        self._build_steps(cfg)
        self.last_eval: dict[str, Any] = {}
        self._saving = False  # an error while saving must not trigger another save
        self._save_failed = False  # a save that failed (a full disk) is not tried again on the way out
        self._bad_streak = 0  # consecutive steps with a non-finite gradient
        self._window_start = (time.perf_counter(), self.state.tokens_seen)  # (time, tokens) the log window began at

    def _record(self, model_config: ModelConfig, cfg: TrainConfig, recipe: str | None) -> None:
        """What the run directory's config.json records, and what every saved model's config.json says of its
        pre-training: evaluate and nsp need to know what the pair head learned."""
        self.configs = {
            "model": model_config.to_dict(),
            "train": cfg.to_dict(),
            "data": str(self.data_dir),
            "tokenizer_fingerprint": fingerprint(self.tokenizer),
            **({"recipe": recipe} if recipe else {}),
        }
        record = {"pair_objective": cfg.pair_objective, "objective": cfg.objective, "document_mask": cfg.document_mask,
                  "recipe": recipe, "init_from": cfg.init_from}  # fmt: skip
        self.extra_config = {PRETRAINING_KEY: {key: value for key, value in record.items() if value}}

    def _build_steps(self, cfg: TrainConfig) -> None:
        """What the steps read and run: the training instances, their masking, the held-out batches, the model as
        each step calls it (wrapped for several processes or compiled), and the meter of its MFU."""
        self.train_data = pretraining_dataset(
            self.data_dir, "train", cfg.seq_len, cfg.pair_objective, cfg.seed, cfg.short_seq_prob
        )
        masking = masking_config(cfg)
        self.collator = MaskingCollator(self.tokenizer, masking, seed=cfg.seed, document_ids=cfg.document_mask)
        self.eval_batches = self._eval_batches()
        self.step_model = self._wrap(self.model)
        dtype = AUTOCAST_DTYPES.get(self.precision.precision, torch.float32)  # MFU against the precision in use
        self.peak = PeakMeter(self.device, dtype) if self.processes.is_main else None

    def _keeps_pooler(self, model_config: ModelConfig) -> bool:
        """Whether the model holds a pooler it does not train: a released encoder's (BertModel's), kept as it was."""
        origin = self.origin
        return origin is not None and origin.encoder_only and origin.pooler and encoder_has_pooler(model_config)

    def close(self) -> None:
        """Close the metrics log (TensorBoard's files are flushed), whatever ended the run, and release the run and
        data directories."""
        if self.log is not None:
            self.log.close()
        self.locks.close()

    def _restore(self, checkpoint: Path) -> None:
        self.state = load_checkpoint(checkpoint, self.model, self.optimizer, self.precision.scaler)
        self.window = MetricSums(read_trainer_state(checkpoint).get("window", {}))
        if self.log is not None:
            self.log.truncate(self.state.step)
        self._say(f"resumed from {checkpoint} at step {self.state.step}")

    def _eval_batches(self) -> list[dict]:
        """Fixed held-out batches, masked at BERT's standard rate whatever --mask-prob trains with: runs compare."""
        if not self.processes.is_main or read_meta(self.data_dir)["splits"]["valid"]["documents"] == 0:
            return []
        cfg = self.cfg
        valid = pretraining_dataset(self.data_dir, "valid", cfg.seq_len, cfg.pair_objective, cfg.seed)
        masking = MaskingConfig.for_evaluation(cfg.seq_len, cfg.whole_word_mask)
        collator = MaskingCollator(self.tokenizer, masking, seed=cfg.seed + 1, document_ids=cfg.document_mask)
        return fixed_batches(valid, collator, cfg.batch_size, cfg.eval_batches)

    def _wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """What the loop calls: the model, compiled and/or wrapped for DDP (kept out of model/)."""
        if self.cfg.compile:
            model = torch.compile(model)
        if self.processes.world > 1:
            device_ids = [self.processes.local_rank] if self.device.startswith("cuda") else None
            # Without a pair objective the pair head and pooler (and ELECTRA's generator's) get no gradient:
            # DDP must be told, or it waits for them and fails at the second step.
            unused = not self.cfg.pair_task.head
            model = torch.nn.parallel.DistributedDataParallel(
                model, device_ids=device_ids, find_unused_parameters=unused
            )
        return model

    # -------------------------------------------------------- the loop

    def train(self) -> RunResult:
        """Step until the budget (steps or seconds) is spent or a signal arrives; save, evaluate, write the model.
        The directories are released when it returns or raises."""
        try:
            return self._train()
        finally:
            self.close()

    def _train(self) -> RunResult:
        cfg = self.cfg
        plan = BatchPlan(self.train_data, cfg.batch_size, self.processes, cfg.seed, cfg.batch_size_at, cfg.grad_accum)
        position = (self.state.epoch, self.state.epoch_offset, self.state.step)
        batches = iter(make_loader(plan, self.collator, position, cfg, self.device))
        started = time.perf_counter() - self.state.elapsed
        self._window_start = (time.perf_counter(), self.state.tokens_seen)
        self.model.train()
        progress = TrainingProgress(
            self.show_progress and self.processes.is_main,
            cfg.time_budget,
            cfg.max_steps,
            self.state.step,
            self.state.elapsed,
        )
        with StopSignals() as signals, progress:
            if self.state.step == 0 and cfg.init_from and cfg.eval_every and not self.schedule.encoder_starts:
                self.evaluate()  # the starting model's held-out score: what continuing it buys is measured from here
            try:
                while True:
                    elapsed, stop = self._agree(time.perf_counter() - started, signals.received)
                    if stop or self.schedule.spent(self.state.step, elapsed):
                        break
                    if (shorter := self.schedule.cut_short(self.state.step, elapsed)) is not None:  # on time
                        self._say(shorter.cut_notice(self.schedule.head_steps))
                        self.schedule, self.state.warmup_elapsed = shorter, elapsed
                        self.extra_config[PRETRAINING_KEY].update(shorter.record())
                    run_progress = self.schedule.progress(self.state.step, elapsed, self.state.warmup_elapsed)
                    lr = self.schedule.lr(self.state.step, run_progress)
                    set_lr(self.optimizer, lr)
                    micro_batches = [next(batches) for _ in range(cfg.grad_accum)]
                    if cfg.mask_prob_final:
                        keep = cfg.mask_rate(run_progress) / cfg.peak_mask_prob
                        micro_batches = [thin_masks(b, keep) for b in micro_batches]
                    grad_norm, tokens = self._step(micro_batches)
                    self._count_step(grad_norm, tokens, [plan.positions.popleft() for _ in range(cfg.grad_accum)][-1])
                    self.state.elapsed = time.perf_counter() - started
                    if self.state.step == self.schedule.encoder_starts:
                        self.state.warmup_elapsed = self.state.elapsed  # where a time budget's schedule starts
                    progress.update(self.state.step, self.state.elapsed)
                    self._periodic(lr, progress)
                if not stop and self.state.step % cfg.log_every:  # a run shorter than a log window logs it too
                    progress.show(self._log_window(self.optimizer.param_groups[0]["lr"]), cfg.pair_objective)
            except BaseException as error:
                self._save_after_failure(error)
                last = checkpoint_dirs(self.run_dir)
                if isinstance(error, TrainingFailed) and self.log is not None and last:
                    # the run is its last checkpoint: the failed steps' rows go with their weights (a run that
                    # never saved keeps them, the one record of how it diverged, until it is started again)
                    self.log.truncate(checkpoint_step(last[-1]))
                raise
            finally:
                stop_workers(batches)
        self.save()
        if not stop and (notice := self.schedule.ceiling_notice(self.state.step)):
            self._say(notice)
        if stop:
            signal_number = signals.received or 15  # another process may have been the one signalled (SIGTERM)
            self._say(
                f"stopped by signal {signal_number} at step {self.state.step}; checkpoint saved. Resume with:\n"
                f"  bertforge pretrain --data {self.data_dir} --out {self.run_dir} --resume"
            )
            return RunResult(self.state, interrupted=signal_number, is_main=self.processes.is_main)
        final = self.last_eval if self.last_eval.get("step") == self.state.step else self.evaluate()
        self._write_model()
        return RunResult(self.state, final_eval=final, is_main=self.processes.is_main)

    def _agree(self, elapsed: float, signalled: int) -> tuple[float, bool]:
        """All processes take the same clock (the slowest one's) and stop together if any was signalled.

        Without this, a time budget or a signal could stop one rank a step before
        the others (a deadlock), and ranks would set slightly different lrs.
        """
        if self.processes.world == 1:
            return elapsed, bool(signalled)
        flags = torch.tensor([elapsed, float(bool(signalled))], dtype=torch.float64, device=self.device)
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        return float(flags[0]), bool(flags[1])

    def _step(self, micro_batches: list[dict[str, torch.Tensor]]) -> tuple[torch.Tensor, int]:
        """Forward and backward over the micro-batches, then one update. Returns (grad norm, tokens of all ranks)."""
        masked, sequences, tokens = self._global_counts(micro_batches)
        pair = self.cfg.pair_task.head
        for i, batch in enumerate(micro_batches):
            # Decided on the CPU copy: no padding (and one document a window) means no mask (flash attention),
            # without a device sync.
            unpadded = bool(batch["attention_mask"].all())
            documents = packed_documents(batch)
            batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
            apart = {"document_ids": documents.to(self.device)} if documents is not None else {}
            if "sampling_draws" in batch:  # ELECTRA: the generator's samples, drawn per instance
                apart["sampling_draws"] = batch["sampling_draws"]
            last = i == len(micro_batches) - 1
            sync = self.step_model.no_sync() if self.processes.world > 1 and not last else contextlib.nullcontext()
            with sync:
                with self.precision.autocast():
                    out = self.step_model(
                        batch["input_ids"],
                        batch["token_type_ids"],
                        None if unpadded else batch["attention_mask"],
                        batch["mlm_labels"],
                        batch["nsp_labels"] if pair else None,
                        **apart,
                    )
                # Sums over this micro-batch, divided by the whole step's counts; × world undoes DDP's averaging.
                loss = out.mlm_loss * (out.mlm_targets.numel() / max(masked, 1.0))
                if pair:
                    loss = loss + out.nsp_loss * (len(batch["input_ids"]) / sequences)
                if out.rtd_loss is not None:  # ELECTRA: every real token is judged
                    loss = loss + self.cfg.rtd_weight * out.rtd_loss * (out.rtd_tokens / tokens)
                self.precision.backward(loss * self.processes.world)
            self.window.add_batch(out, batch["nsp_labels"] if pair else None)
        self.schedule.drop_frozen_gradients(self.model, self.state.step)
        grad_norm = self.precision.step(self.optimizer, self.model.parameters(), self.cfg.grad_clip)
        self.window.add_step(grad_norm)
        return grad_norm, int(tokens)

    def _global_counts(self, micro_batches: list[dict[str, torch.Tensor]]) -> tuple[float, float, float]:
        """Masked tokens, sequences and real tokens in the whole step, over all processes."""
        counts = torch.tensor(
            [
                sum(int((b["mlm_labels"] != IGNORE_INDEX).sum()) for b in micro_batches),
                sum(len(b["input_ids"]) for b in micro_batches),
                sum(int(b["attention_mask"].sum()) for b in micro_batches),
            ],
            dtype=torch.float64,
        )
        if self.processes.world > 1:
            counts = counts.to(self.device)
            dist.all_reduce(counts)
            counts = counts.cpu()
        masked, sequences, tokens = counts.tolist()
        return masked, sequences, tokens

    def _count_step(self, grad_norm: torch.Tensor, tokens: int, position: tuple[int, int]) -> None:
        """Advance the state; a non-finite gradient skipped its update, and too many in a row stop the run."""
        finite = self.precision.scaler is not None or bool(torch.isfinite(grad_norm))
        self._bad_streak = 0 if finite else self._bad_streak + 1
        self.state.bad_steps += 0 if finite else 1
        self.state.step += 1
        self.state.tokens_seen += tokens
        self.state.epoch, self.state.epoch_offset = position
        if self._bad_streak >= self.cfg.max_bad_steps:
            raise TrainingFailed(
                f"the loss was not finite for {self._bad_streak} steps in a row (step {self.state.step}): the run "
                f"diverged, and nothing was saved from it ({self._last_good()}). Lower --lr or --grad-clip, or check "
                "the data"
            )

    def _periodic(self, lr: float, progress: TrainingProgress) -> None:
        """Log, evaluate and save on their schedules."""
        cfg, step = self.cfg, self.state.step
        if step % cfg.log_every == 0:
            progress.show(self._log_window(lr), cfg.pair_objective)
        # the starting encoder is scored where it starts to learn (after a new head's phase, which scores nothing)
        if cfg.eval_every and (step % cfg.eval_every == 0 or (cfg.init_from and step == self.schedule.encoder_starts)):
            self.evaluate()
        if cfg.save_every and step % cfg.save_every == 0:
            self.save()

    def _log_window(self, lr: float) -> dict[str, Any] | None:
        totals = self.window.totals(self.processes, self.device)
        self.window = MetricSums()
        tokens = self.state.tokens_seen - self._window_start[1]
        seconds = time.perf_counter() - self._window_start[0]
        peak_flops = self.peak.current() if self.peak is not None else 0.0  # its sample, if due, is in no window
        self._window_start = (time.perf_counter(), self.state.tokens_seen)
        if not self.processes.is_main or totals["steps"] == 0:
            return None
        tokens_per_s = tokens / max(seconds, 1e-9)
        flops = pretraining_flops_per_token(self.model_config, self.cfg, totals["masked"] / max(tokens, 1))
        record = {
            "step": self.state.step,
            "split": "train",
            "tokens": self.state.tokens_seen,
            **summarise(totals, self.cfg.pair_objective),
            "lr": lr,
            "grad_norm": totals["grad_norm"] / totals["steps"],
            "masked_fraction": totals["masked"] / max(tokens, 1),  # of all tokens, [CLS] and [SEP] included
            "tokens_per_s": tokens_per_s,
            "mfu": flops * tokens_per_s / (peak_flops * self.processes.world),
            "elapsed": self.state.elapsed,
            "bad_steps": self.state.bad_steps,
        }
        self.log.write(record)
        return record

    # -------------------------------------------------------- evaluation and saving

    def evaluate(self) -> dict[str, Any]:
        if not self.processes.is_main or not self.eval_batches:
            return {}
        pair = self.cfg.pair_objective
        result = evaluate_batches(self.model, self.eval_batches, self.precision, pair)
        record = {"step": self.state.step, "split": "valid", **result, "elapsed": self.state.elapsed}
        self.log.write(record)
        self.last_eval = record
        if not self.show_progress:  # --quiet: the final summary says the last one
            return record
        self._say(
            f"step {self.state.step}: held-out MLM loss {result['mlm_loss']:.3f}, accuracy {result['mlm_acc']:.3f}, "
            f"perplexity {result['perplexity']:.1f}"
            + (f", {pair.upper()} accuracy {result[pair + '_acc']:.3f}" if pair_objective(pair).head else "")
            + (f", replaced-token accuracy {result['rtd_acc']:.3f}" if "rtd_acc" in result else "")
        )
        return record

    def save(self) -> None:
        """A checkpoint of the current step (once: a step already saved is not written again). Never of weights
        that gave a non-finite loss at the last step: they are diverging, and a checkpoint of them would be the
        newest, what --resume starts from and what --keep-last keeps instead of the good ones."""
        if not self.processes.is_main:
            return
        if self._bad_streak:
            self._say(f"step {self.state.step}: not saved, its loss is not finite ({self._last_good()})")
            return
        last = checkpoint_dirs(self.run_dir)
        if last and last[-1].name == f"step_{self.state.step:06d}":
            return
        self._check_finite()
        window = {k: float(v) for k, v in self.window.sums.items()}
        self._saving = True
        try:
            save_checkpoint(
                self.run_dir,
                self.model,
                self.optimizer,
                self.state,
                {**self.configs, "window": window},
                self.cfg.keep_last,
                self.precision.scaler,
                self.tokenizer,
                self.extra_config,
                self._card(),
                self.origin,
            )
            # The run's settings are those of its latest checkpoint: a resumed attempt that changed a setting
            # (--lr) changes them only once it has saved a step, so one that fails before leaves them as they were.
            write_json(self.run_dir / "config.json", self.configs)
        except OSError as e:
            self._save_failed = True
            raise UserError(
                f"could not write a checkpoint in {self.run_dir / 'checkpoints'} ({e.strerror or e}); "
                "the previous checkpoint is intact"
            ) from None
        finally:
            self._saving = False

    def _card(self) -> dict[str, Any]:
        """What the model card of a directory saved now says (rundir.card_facts): the held-out scores where they were
        taken at this step, and a continued run's starting score."""
        held_out = None
        if self.last_eval.get("step") == self.state.step:
            baseline = unigram_baseline(self.eval_batches) if self.eval_batches else None
            held_out = {**self.last_eval, "unigram_baseline_acc": baseline}
        start = self._starting_score()
        before = start if start is not None and start.get("step") != self.state.step else None
        return card_facts(self.data_dir, self.state, self.device, held_out, before)

    def _starting_score(self) -> dict[str, Any] | None:
        """A continued run's held-out score of the model it started from: at step 0, or for a new head at the end
        of its warm-up (the encoder still as it was). From the metrics log, which a resumed run keeps."""
        if not self.cfg.init_from or self.log is None or not self.log.path.is_file():
            return None
        _, valid = read_metrics(self.log.path)
        return next((row for row in valid if row["step"] == self.schedule.encoder_starts), None)

    def _check_finite(self) -> None:
        """Weights that are no longer numbers are never saved: the run stops, naming the step."""
        if all_finite(self.model):
            return
        raise TrainingFailed(
            f"the model's weights are not finite at step {self.state.step} (the run diverged, or resumed from "
            f"damaged state); nothing was saved from it: {self._last_good()}. Lower --lr or --grad-clip, or check "
            "the data"
        )

    def _last_good(self) -> str:
        last = checkpoint_dirs(self.run_dir)
        return f"the last checkpoint, {last[-1].name}, is intact" if last else "no checkpoint was saved"

    def _save_after_failure(self, error: BaseException) -> None:
        """An error in the loop: keep the work done so far, unless saving itself is what failed (once is enough)
        or the weights are what went wrong."""
        if self._saving or self._save_failed or self.state.step == 0 or isinstance(error, TrainingFailed):
            return
        try:
            self.save()
            self._say(
                f"saved a checkpoint at step {self.state.step} before stopping on an error; fix it, then --resume"
            )
        except Exception as e:  # the original error matters more; say why nothing could be saved
            self._say(f"could not save a checkpoint after the error: {e}")

    def _write_model(self) -> None:
        """The final model directory (tokenizer included)."""
        if not self.processes.is_main:
            return
        self._check_finite()
        if self._bad_streak:
            raise TrainingFailed(
                f"the run ended with a loss that is not finite (step {self.state.step}); its model was not written "
                f"({self._last_good()}). Lower --lr or --grad-clip, or check the data"
            )
        try:
            save_model(self.model, self.run_dir / "model", self.tokenizer, self.extra_config, self._card(), self.origin)
        except OSError as e:
            raise UserError(
                f"could not write the model in {self.run_dir / 'model'} ({e.strerror or e}); the last checkpoint "
                "is intact: make room, then run the same command with --resume"
            ) from None

    def _say(self, message: str) -> None:
        if self.processes.is_main:
            TrainingProgress.write(message)


def pretrain(data_dir, run_dir, model_config: ModelConfig, cfg: TrainConfig, **options) -> RunResult:
    """Pre-train a BERT on a prepared data directory; see the module docstring."""
    trainer = Trainer(data_dir, run_dir, model_config, cfg, **options)
    try:
        result = trainer.train()
        if result.is_main and not result.interrupted:
            from ..plots import plot_run  # matplotlib, only once there is a run to draw

            plot_run(run_dir)
        if dist.is_initialized():
            dist.barrier()  # rank 0 may still be saving; tearing down under it aborts the other processes
        return result
    finally:
        trainer.close()
        if dist.is_initialized():
            # The DDP wrapper holds the process group; freed only at interpreter exit, Gloo's pending
            # work would need the GIL during finalisation and abort. Release it while Python is alive.
            trainer.step_model = None
            gc.collect()
            dist.destroy_process_group()
