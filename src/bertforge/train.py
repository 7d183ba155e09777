"""The pre-training loop: AdamW, warm-up and decay, clipping, accumulation, mixed precision, DDP,
held-out evaluation, metrics, progress, checkpoints and exact resume.

    bertforge pretrain --data data/ --out runs/mini --preset mini --max-steps 2000
    torchrun --nproc_per_node=2 -m bertforge pretrain --data data/ --out runs/mini ...

One optimizer step consumes `grad_accum` micro-batches per process. Losses are
normalised by the number of masked tokens in the *whole* step (all micro-batches,
all processes), so N processes × batch B, or accumulation, give the same update
as one process with the full batch.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import shutil
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch
import torch.distributed as dist
from tqdm import tqdm

from .checkpoint import TrainerState, checkpoint_dirs, load_checkpoint, read_trainer_state, remove_stale_temporaries, save_checkpoint
from .config import ModelConfig, TrainConfig
from .data import MaskingCollator, MaskingConfig, PretrainingDataset, mix_seed
from .prepare import read_meta
from .errors import UserError
from .evaluate import evaluate_batches, fixed_eval_batches
from .fileio import write_json
from .flops import cpu_has_fast_bf16, measure_peak_flops, training_flops_per_token
from .model import IGNORE_INDEX, BertForPreTraining
from .tokenizer import fingerprint, load_tokenizer, special_ids

METRICS = "metrics.jsonl"
WINDOW_KEYS = ("steps", "mlm_sum", "masked", "nsp_sum", "nsp_correct", "sequences", "mlm_correct", "grad_norm")


# ---------------------------------------------------------------- devices and precision


@dataclass
class Distributed:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup_distributed(device: str) -> Distributed:
    """torchrun sets WORLD_SIZE/RANK/LOCAL_RANK; NCCL on CUDA, gloo on CPU."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Distributed()
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    return Distributed(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def resolve_device(requested: str, local_rank: int = 0) -> str:
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda"):
        if not torch.cuda.is_available():
            raise UserError("--device cuda requested but no CUDA device is available")
        return f"cuda:{local_rank}" if requested == "cuda" else requested
    return "cpu"


def resolve_precision(requested: str, device: str) -> str:
    """auto: bf16 on CUDA with bf16, fp16 on older CUDA, bf16 on CPUs measured to be fast at it, else fp32."""
    if requested != "auto":
        if requested == "fp16" and not device.startswith("cuda"):
            raise UserError("--precision fp16 needs CUDA; use bf16 or fp32 on CPU")
        return requested
    if device.startswith("cuda"):
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "bf16" if cpu_has_fast_bf16() else "fp32"


AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def autocast(device: str, precision: str):
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.split(":")[0], dtype=AUTOCAST_DTYPES[precision])


# ---------------------------------------------------------------- optimisation


def build_optimizer(model: torch.nn.Module, cfg: TrainConfig, device: str) -> torch.optim.AdamW:
    """AdamW; no weight decay on biases and LayerNorm weights (every 1-d parameter), as in BERT."""
    params = [p for p in model.parameters() if p.requires_grad]  # parameters() yields the tied matrix once
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps,
                             fused=device.startswith("cuda"))


def lr_factor(progress: float, cfg: TrainConfig) -> float:
    """Multiplier of the peak lr at `progress` ∈ [0, 1] of the run: linear warm-up, then the schedule."""
    warmup = cfg.warmup if cfg.warmup < 1 else cfg.warmup / max(cfg.max_steps, 1)
    if progress < warmup:
        return progress / warmup
    rest = min(1.0, (progress - warmup) / max(1.0 - warmup, 1e-9))
    if cfg.schedule == "linear":
        return max(0.0, 1.0 - rest)
    if cfg.schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * rest))
    return 1.0


# ---------------------------------------------------------------- data


class BatchPlan:
    """The deterministic sequence of (epoch, index) lists each process reads, from any position.

    Each epoch's instances are shuffled from (seed, epoch); the global batch of
    B × world instances is cut into per-rank slices, so ranks read disjoint data.
    Positions count instances consumed in the epoch by all processes together,
    which lets a checkpoint from N processes resume on M.
    """

    def __init__(self, dataset: PretrainingDataset, batch_size: int, dist_info: Distributed, seed: int):
        self.dataset = dataset
        self.batch_size = batch_size
        self.dist = dist_info
        self.seed = seed
        self.positions: deque[tuple[int, int]] = deque()  # (epoch, offset) after each batch handed out

    def batches(self, epoch: int, offset: int) -> Iterator[list[tuple[int, int]]]:
        B, G = self.batch_size, self.batch_size * self.dist.world
        while True:
            n = self.dataset.num_instances(epoch)
            if n < G:
                raise UserError(f"the training split has {n} instances, fewer than one global batch of {G}; "
                                "lower --batch-size or add text")
            order = np.random.default_rng(mix_seed(self.seed, epoch, 3)).permutation(n)
            for start in range(offset, n - G + 1, G):
                mine = order[start + self.dist.rank * B : start + (self.dist.rank + 1) * B]
                self.positions.append((epoch, start + G))
                yield [(epoch, int(i)) for i in mine]
            epoch, offset = epoch + 1, 0


def make_loader(plan: BatchPlan, collator: MaskingCollator, state: TrainerState, cfg: TrainConfig, device: str):
    return torch.utils.data.DataLoader(
        plan.dataset, batch_sampler=plan.batches(state.epoch, state.epoch_offset), collate_fn=collator,
        num_workers=cfg.num_workers, pin_memory=device.startswith("cuda"),
        prefetch_factor=4 if cfg.num_workers else None,
        # Its own generator: creating the loader must not draw from the global RNG (dropout) on resume.
        generator=torch.Generator().manual_seed(cfg.seed),
    )


# ---------------------------------------------------------------- the run


@dataclass
class RunResult:
    state: TrainerState
    interrupted: int = 0  # the signal that stopped the run, 0 if it finished
    final_eval: dict[str, Any] = field(default_factory=dict)
    is_main: bool = True  # rank 0, the process that reports


def run_configs(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / "config.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def config_differences(saved: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    return [f"{k}: {saved.get(k)!r} -> {wanted.get(k)!r}" for k in sorted(set(saved) | set(wanted)) if saved.get(k) != wanted.get(k)]


class Trainer:
    def __init__(self, data_dir: str | Path, run_dir: str | Path, model_config: ModelConfig, cfg: TrainConfig,
                 resume: bool = False, overwrite: bool = False, progress: bool = True, tensorboard: bool = False):
        self.data_dir, self.run_dir = Path(data_dir), Path(run_dir)
        self.cfg = cfg
        self.progress = progress
        requested_device = resolve_device(cfg.device)
        self.dist = setup_distributed(requested_device)
        self.device = resolve_device(cfg.device, self.dist.local_rank)
        self.precision = resolve_precision(cfg.precision, self.device)
        meta = read_meta(self.data_dir)
        self.tokenizer = load_tokenizer(self.data_dir)  # a data directory carries its tokenizer.json
        if fingerprint(self.tokenizer) != meta["tokenizer_fingerprint"]:
            raise UserError(f"{self.data_dir}: tokenizer.json does not match the one the data was prepared with")
        if model_config.vocab_size != meta["vocab_size"]:
            raise UserError(f"model vocab_size {model_config.vocab_size} does not match the data's tokenizer ({meta['vocab_size']} tokens)")
        if cfg.seq_len > model_config.max_position_embeddings:
            raise UserError(f"--seq-len {cfg.seq_len} exceeds the position table (max_position_embeddings {model_config.max_position_embeddings})")
        if cfg.time_budget and cfg.warmup >= 1:
            raise UserError("with --time-budget, give --warmup as a fraction of the budget (< 1)")
        self.model_config = model_config
        self.configs = {"model": model_config.to_dict(), "train": cfg.to_dict(), "data": str(self.data_dir),
                        "tokenizer_fingerprint": meta["tokenizer_fingerprint"]}
        self._prepare_run_dir(resume, overwrite)

        torch.manual_seed(cfg.seed)
        self.model = BertForPreTraining(model_config).to(self.device)
        self.optimizer = build_optimizer(self.model, cfg, self.device)
        self.scaler = torch.amp.GradScaler("cuda") if self.precision == "fp16" else None
        self.state = TrainerState()
        self.window = dict.fromkeys(WINDOW_KEYS, 0.0)
        if resume and self.dist.is_main:
            remove_stale_temporaries(self.run_dir)
        if resume and checkpoint_dirs(self.run_dir):
            latest = checkpoint_dirs(self.run_dir)[-1]
            self.state = load_checkpoint(latest, self.model, self.optimizer, self.scaler)
            self.window.update(read_trainer_state(latest).get("window", {}))
            self._truncate_metrics(self.state.step)
            self._log(f"resumed from {latest} at step {self.state.step}")

        ids = special_ids(self.tokenizer)
        masking = MaskingConfig(cfg.mask_prob, cfg.mask_token_prob, cfg.random_token_prob, cfg.max_predictions, cfg.whole_word_mask)
        self.collator = MaskingCollator(self.tokenizer, masking, seed=cfg.seed)
        self.train_data = PretrainingDataset(self.data_dir, "train", cfg.seq_len, cfg.short_seq_prob, cfg.nsp, cfg.seed, ids.cls, ids.sep)
        self.eval_batches = []
        if self.dist.is_main and meta["splits"]["valid"]["documents"] > 0:
            valid = PretrainingDataset(self.data_dir, "valid", cfg.seq_len, 0.0, cfg.nsp, cfg.seed, ids.cls, ids.sep)
            # Fixed masks at BERT's standard rate, whatever --mask-prob trains with: evaluations and runs compare.
            eval_masking = MaskingConfig(max_predictions=cfg.max_predictions, whole_word_mask=cfg.whole_word_mask)
            eval_collator = MaskingCollator(self.tokenizer, eval_masking, seed=cfg.seed + 1)
            self.eval_batches = fixed_eval_batches(valid, eval_collator, cfg.batch_size, cfg.eval_batches)

        self.step_model = self.model
        if cfg.compile:
            self.step_model = torch.compile(self.model)
        if self.dist.world > 1:
            device_ids = [self.dist.local_rank] if self.device.startswith("cuda") else None
            self.step_model = torch.nn.parallel.DistributedDataParallel(self.step_model, device_ids=device_ids)
        self.tensorboard = self._open_tensorboard() if tensorboard and self.dist.is_main else None
        self.peak_flops = measure_peak_flops(self.device, AUTOCAST_DTYPES.get(self.precision, torch.float32)) if self.dist.is_main else 0.0
        self.stop_signal = 0
        self.last_eval: dict[str, Any] = {}

    # -------------------------------------------------------- run directory

    def _prepare_run_dir(self, resume: bool, overwrite: bool) -> None:
        saved = run_configs(self.run_dir)
        if saved is not None and not (resume or overwrite):
            raise UserError(f"{self.run_dir} already holds a run; pass --resume to continue it or --overwrite to start over")
        if saved is not None and resume:
            differences = config_differences(saved["model"], self.configs["model"])
            if differences:
                raise UserError(f"--resume with a changed model config is refused: {'; '.join(differences)}")
        if self.dist.world > 1:
            dist.barrier()  # every rank has checked the directory before rank 0 writes to it
        if not self.dist.is_main:
            return
        if saved is not None and overwrite and not resume:
            for name in ("checkpoints", "model", "plots", METRICS, "tensorboard"):
                target = self.run_dir / name
                shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        write_json(self.run_dir / "config.json", self.configs)

    def _truncate_metrics(self, step: int) -> None:
        """Drop lines logged after the checkpoint (the resumed run writes them again), and a line torn by a kill."""
        path = self.run_dir / METRICS
        if self.dist.is_main and path.is_file():
            kept = []
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    if json.loads(line)["step"] <= step:
                        kept.append(line)
                except (json.JSONDecodeError, KeyError):
                    continue
            path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")

    def _open_tensorboard(self):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise UserError("--tensorboard needs the tensorboard package: pip install tensorboard") from None
        return SummaryWriter(str(self.run_dir / "tensorboard"))

    def _log(self, message: str) -> None:
        if self.dist.is_main:
            tqdm.write(message, file=sys.stderr)

    # -------------------------------------------------------- the loop

    def progress_fraction(self, elapsed: float) -> float:
        if self.cfg.time_budget:
            return min(1.0, elapsed / self.cfg.time_budget)
        return min(1.0, (self.state.step + 1) / self.cfg.max_steps)

    def finished(self, elapsed: float) -> bool:
        if self.cfg.time_budget:
            return elapsed >= self.cfg.time_budget
        return self.state.step >= self.cfg.max_steps

    def train(self) -> RunResult:
        cfg = self.cfg
        plan = BatchPlan(self.train_data, cfg.batch_size, self.dist, cfg.seed)
        batches = iter(make_loader(plan, self.collator, self.state, cfg, self.device))
        started = time.perf_counter() - self.state.elapsed
        window_start, window_tokens = time.perf_counter(), 0
        bar = self._progress_bar()
        previous_handlers = self._install_signal_handlers()
        self.model.train()
        bad_streak = 0
        stopped = False
        try:
            while True:
                elapsed, stopped = self._agree(time.perf_counter() - started)
                if stopped or self.finished(elapsed):
                    break
                micro_batches = [next(batches) for _ in range(cfg.grad_accum)]
                self.state.epoch, self.state.epoch_offset = [plan.positions.popleft() for _ in micro_batches][-1]
                lr = cfg.lr * lr_factor(self.progress_fraction(elapsed), cfg)
                for group in self.optimizer.param_groups:
                    group["lr"] = lr
                grad_norm, tokens = self._step(micro_batches)
                finite = self.scaler is not None or bool(torch.isfinite(grad_norm))
                bad_streak = 0 if finite else bad_streak + 1
                if not finite:
                    self.state.bad_steps += 1
                    if bad_streak >= cfg.max_bad_steps:
                        raise UserError(f"the loss was not finite for {bad_streak} steps in a row (step {self.state.step + 1}); "
                                        "lower --lr or check the data")
                self.state.step += 1
                self.state.tokens_seen += tokens
                window_tokens += tokens
                self.state.elapsed = time.perf_counter() - started
                if bar is not None:
                    bar.update(1 if not cfg.time_budget else self.state.elapsed - bar.n)
                if self.state.step % cfg.log_every == 0:
                    record = self._log_window(lr, window_tokens, time.perf_counter() - window_start)
                    window_start, window_tokens = time.perf_counter(), 0
                    if bar is not None and record:
                        bar.set_postfix(loss=f"{record['loss']:.3f}", mlm_acc=f"{record['mlm_acc']:.3f}",
                                        nsp_acc=f"{record.get('nsp_acc', 0):.3f}", tok_s=f"{record['tokens_per_s']:.0f}", refresh=False)
                if cfg.eval_every and self.state.step % cfg.eval_every == 0:
                    self.evaluate()
                if cfg.save_every and self.state.step % cfg.save_every == 0:
                    self.save()
        finally:
            self._restore_signal_handlers(previous_handlers)
            if bar is not None:
                bar.close()
        self.save()
        if stopped:
            signum = self.stop_signal or signal.SIGTERM  # another process may have been the one signalled
            self._log(f"stopped by signal {signum} at step {self.state.step}; checkpoint saved. Resume with:\n"
                      f"  bertforge pretrain --data {self.data_dir} --out {self.run_dir} --resume")
            return RunResult(self.state, interrupted=signum, is_main=self.dist.is_main)
        final = self.last_eval if self.last_eval.get("step") == self.state.step else self.evaluate()
        self.finish()
        return RunResult(self.state, final_eval=final, is_main=self.dist.is_main)

    def _agree(self, elapsed: float) -> tuple[float, bool]:
        """All processes take the same clock (the slowest one's) and stop together if any was signalled.

        Without this, a time budget or a signal could stop one rank a step before
        the others (a deadlock), and ranks would set slightly different lrs.
        """
        if self.dist.world == 1:
            return elapsed, bool(self.stop_signal)
        flags = torch.tensor([elapsed, float(bool(self.stop_signal))], dtype=torch.float64, device=self.device)
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        return float(flags[0]), bool(flags[1])

    def _step(self, micro_batches: list[dict[str, torch.Tensor]]) -> tuple[torch.Tensor, int]:
        """Forward and backward over the micro-batches, then one optimizer update. Returns (grad norm, tokens, all ranks)."""
        counts = torch.tensor([
            sum(int((b["mlm_labels"] != IGNORE_INDEX).sum()) for b in micro_batches),  # masked tokens
            sum(len(b["input_ids"]) for b in micro_batches),  # sequences
            sum(int(b["attention_mask"].sum()) for b in micro_batches),  # real tokens
        ], dtype=torch.float64)
        if self.dist.world > 1:
            counts = counts.to(self.device)
            dist.all_reduce(counts)
            counts = counts.cpu()
        masked, sequences, tokens = counts.tolist()
        for i, batch in enumerate(micro_batches):
            # Decided on the CPU copy: no padding means no mask (flash attention), without a device sync.
            unpadded = bool(batch["attention_mask"].all())
            batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
            last = i == len(micro_batches) - 1
            sync = self.step_model.no_sync() if self.dist.world > 1 and not last else contextlib.nullcontext()
            with sync:
                with autocast(self.device, self.precision):
                    out = self.step_model(batch["input_ids"], batch["token_type_ids"], None if unpadded else batch["attention_mask"],
                                          batch["mlm_labels"], batch["nsp_labels"] if self.cfg.nsp else None)
                n_masked = out.mlm_targets.numel()
                # Sums over this micro-batch, divided by the whole step's counts; × world undoes DDP's averaging.
                loss = out.mlm_loss * (n_masked / max(masked, 1.0))
                if self.cfg.nsp:
                    loss = loss + out.nsp_loss * (len(batch["input_ids"]) / sequences)
                loss = loss * self.dist.world
                (self.scaler.scale(loss) if self.scaler else loss).backward()
            self._accumulate(out, batch, n_masked)
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip if self.cfg.grad_clip > 0 else float("inf"))
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        elif torch.isfinite(grad_norm):
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.window["grad_norm"] = self.window["grad_norm"] + grad_norm.detach()
        self.window["steps"] += 1
        return grad_norm, int(tokens)

    def _accumulate(self, out, batch: dict[str, torch.Tensor], n_masked: int) -> None:
        """Running sums for the log line, kept on the device (no sync until it is written)."""
        w = self.window
        w["mlm_sum"] = w["mlm_sum"] + out.mlm_loss.detach() * n_masked
        w["masked"] += n_masked
        w["mlm_correct"] = w["mlm_correct"] + out.mlm_correct()
        w["sequences"] += len(batch["input_ids"])
        if self.cfg.nsp:
            w["nsp_sum"] = w["nsp_sum"] + out.nsp_loss.detach() * len(batch["input_ids"])
            w["nsp_correct"] = w["nsp_correct"] + (out.nsp_logits.argmax(-1) == batch["nsp_labels"]).sum()

    def _window_values(self) -> dict[str, float]:
        values = torch.tensor([float(self.window[k]) for k in WINDOW_KEYS], dtype=torch.float64)
        if self.dist.world > 1:
            values = values.to(self.device)
            dist.all_reduce(values)
            values = values.cpu()
            values[WINDOW_KEYS.index("steps")] /= self.dist.world
            values[WINDOW_KEYS.index("grad_norm")] /= self.dist.world
        return dict(zip(WINDOW_KEYS, values.tolist()))

    def _log_window(self, lr: float, tokens: int, seconds: float) -> dict[str, Any] | None:
        w = self._window_values()
        self.window = dict.fromkeys(WINDOW_KEYS, 0.0)
        if not self.dist.is_main or w["steps"] == 0:
            return None
        mlm_loss = w["mlm_sum"] / max(w["masked"], 1)
        record = {"step": self.state.step, "split": "train", "tokens": self.state.tokens_seen,
                  "loss": mlm_loss, "mlm_loss": mlm_loss, "mlm_acc": w["mlm_correct"] / max(w["masked"], 1)}
        if self.cfg.nsp:
            nsp_loss = w["nsp_sum"] / max(w["sequences"], 1)
            record.update(loss=mlm_loss + nsp_loss, nsp_loss=nsp_loss, nsp_acc=w["nsp_correct"] / max(w["sequences"], 1))
        tokens_per_s = tokens / max(seconds, 1e-9)
        flops = training_flops_per_token(self.model_config, self.cfg.seq_len, w["masked"] / max(tokens, 1))
        record.update(lr=lr, grad_norm=w["grad_norm"] / w["steps"], tokens_per_s=tokens_per_s,
                      mfu=flops * tokens_per_s / (self.peak_flops * self.dist.world) if self.peak_flops else 0.0,
                      elapsed=self.state.elapsed, bad_steps=self.state.bad_steps)
        self._write_metrics(record)
        return record

    def _write_metrics(self, record: dict[str, Any]) -> None:
        with open(self.run_dir / METRICS, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        if self.tensorboard is not None:
            for key, value in record.items():
                if isinstance(value, (int, float)) and key != "step":
                    self.tensorboard.add_scalar(f"{record['split']}/{key}", value, record["step"])

    def evaluate(self) -> dict[str, Any]:
        if not self.dist.is_main or not self.eval_batches:
            return {}
        result = evaluate_batches(self.model, self.eval_batches, self.device, self.precision, self.cfg.nsp)
        self.model.train()
        record = {"step": self.state.step, "split": "valid", **result}
        self._write_metrics(record)
        self.last_eval = record
        self._log(f"step {self.state.step}: held-out MLM loss {result['mlm_loss']:.3f}, accuracy {result['mlm_acc']:.3f}, "
                  f"perplexity {result['perplexity']:.1f}" + (f", NSP accuracy {result['nsp_acc']:.3f}" if self.cfg.nsp else ""))
        return record

    def save(self) -> None:
        if not self.dist.is_main:
            return
        last = checkpoint_dirs(self.run_dir)
        if last and last[-1].name == f"step_{self.state.step:06d}":
            return
        window = {k: float(v) for k, v in self.window.items()}
        try:
            save_checkpoint(self.run_dir, self.model, self.optimizer, self.state, {**self.configs, "window": window},
                            self.cfg.keep_last, self.scaler, self.tokenizer)
        except OSError as e:
            raise UserError(f"could not write a checkpoint in {self.run_dir / 'checkpoints'} ({e.strerror or e}); "
                            "the previous checkpoint is intact") from None

    def finish(self) -> None:
        """The final model directory and the training-curve figure."""
        if not self.dist.is_main:
            return
        from .plots import plot_training_curves

        self.model.save_pretrained(self.run_dir / "model", self.tokenizer)
        plot_training_curves(self.run_dir / METRICS, self.run_dir / "plots" / "training_curves.png")
        if self.tensorboard is not None:
            self.tensorboard.close()

    # -------------------------------------------------------- progress and signals

    def _progress_bar(self):
        if not (self.progress and self.dist.is_main):
            return None
        if self.cfg.time_budget:
            return tqdm(total=self.cfg.time_budget, initial=self.state.elapsed, unit="s", desc="pretrain", dynamic_ncols=True,
                        mininterval=1.0, bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f}s [{elapsed}<{remaining}{postfix}]")
        # Redrawn at most once a second: readable in logs too, where every redraw is a new line.
        return tqdm(total=self.cfg.max_steps, initial=self.state.step, unit="step", desc="pretrain", dynamic_ncols=True, mininterval=1.0)

    def _install_signal_handlers(self):
        def stop(signum, frame):
            self.stop_signal = signum

        if threading.current_thread() is threading.main_thread():
            return {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        return {}

    @staticmethod
    def _restore_signal_handlers(previous) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def pretrain(data_dir, run_dir, model_config: ModelConfig, cfg: TrainConfig, **options) -> RunResult:
    """Pre-train a BERT on a prepared data directory; see the module docstring."""
    trainer = Trainer(data_dir, run_dir, model_config, cfg, **options)
    try:
        result = trainer.train()
        if dist.is_initialized():
            dist.barrier()  # rank 0 may still be saving; tearing down under it aborts the other processes
        return result
    finally:
        if dist.is_initialized():
            # The DDP wrapper holds the process group; freed only at interpreter exit, Gloo's pending
            # work would need the GIL during finalisation and abort. Release it while Python is alive.
            trainer.step_model = None
            gc.collect()
            dist.destroy_process_group()
