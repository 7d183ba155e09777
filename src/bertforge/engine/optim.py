"""The optimizer and the learning-rate schedule, shared by pre-training and fine-tuning."""

from __future__ import annotations

import math

import torch


def build_optimizer(
    model: torch.nn.Module,
    device: str,
    lr: float,
    weight_decay: float,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-6,
) -> torch.optim.AdamW:
    """AdamW; no weight decay on biases and LayerNorm weights (every 1-d parameter), as in BERT.

    Fused (one kernel over all parameters) on CUDA and CPU: on a mini model on
    an AVX2 EPYC its step took 8 ms against 50 for the per-parameter loop.
    """
    params = [p for p in model.parameters() if p.requires_grad]  # parameters() yields the tied matrix once
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    fused = device.split(":")[0] in ("cuda", "cpu")
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=fused)


def warmup_fraction(warmup: float, total_steps: int) -> float:
    """A warm-up given as a fraction of the run (< 1) or as a number of steps (>= 1), as a fraction."""
    return warmup if warmup < 1 else warmup / max(total_steps, 1)


def lr_factor(progress: float, warmup: float, schedule: str) -> float:
    """Multiplier of the peak lr at `progress` ∈ [0, 1] of the run: linear warm-up over the first
    `warmup` of it, then linear decay to zero, cosine decay to zero, or constant."""
    if progress < warmup:
        return progress / warmup
    rest = min(1.0, (progress - warmup) / max(1.0 - warmup, 1e-9))
    if schedule == "linear":
        return max(0.0, 1.0 - rest)
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * rest))
    return 1.0


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
