"""Where a fine-tuning run is, saved so that `finetune --resume` continues it as if it had never stopped.

    OUT/checkpoints/step_000340/
        state.json     the epoch in progress, its batches done, the step, the best epoch so far, the settings
        tensors.pt     the model's weights, AdamW's moments, the RNG states (tensors only)

Saved at every epoch's end, every --checkpoint-minutes within one, and when the run is stopped by a signal or
an error. Each is built under a temporary name and renamed into place, and the older one removed after, so a
kill at any moment leaves a whole checkpoint; its files' checksums are checked before a resume reads them.
The epoch's batches are not saved: resuming draws the batches of every epoch again from the seed, which leaves
the data order where it was, and skips the ones done.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..engine.checkpoint import (
    checkpoint_dirs,
    intact_checkpoint,
    load_tensors,
    optimizer_and_rng,
    read_state_file,
    remove_stale_temporaries,
    restore_optimizer_and_rng,
    write_checksums,
)
from ..errors import UserError
from ..fileio import atomic_directory, write_json
from .config import FinetuneConfig

# Settings that may change on --resume: where and how fast it computes, how often it saves.
# how, not what
FREE_ON_RESUME = (
    "device",
    "precision",
    "checkpoint_minutes",
    "activation_checkpointing",
    "log_every",
    "unpad",
    "trust_pickle",
)


@dataclass
class FitState:
    """Where a fine-tuning run is: with the weights, optimizer and RNG, enough to go on exactly."""

    epoch: int = 1  # the epoch in progress, from 1
    batch: int = 0  # its batches done
    step: int = 0  # optimizer steps done, in all
    train_loss: float = 0.0  # the sum of this epoch's batch losses so far
    elapsed: float = 0.0  # seconds of training and dev scoring so far
    best: dict[str, Any] = field(default_factory=dict)  # the best epoch's metrics record so far


def run_settings(cfg: FinetuneConfig, task_name: str) -> dict[str, Any]:
    """What a resumed run must share with the one it continues."""
    return {"task": task_name, **{k: v for k, v in cfg.to_dict().items() if k not in FREE_ON_RESUME}}


def save_fit_state(out: Path, model, optimizer, scaler, state: FitState, settings: dict[str, Any]) -> Path:
    """A checkpoint of the run at `state`; the older ones go once it is whole."""
    target = out / "checkpoints" / f"step_{state.step:06d}"
    with atomic_directory(target) as tmp:
        torch.save({"model": model.state_dict(), **optimizer_and_rng(optimizer, scaler)}, tmp / "tensors.pt")
        write_json(tmp / "state.json", {"state": state.__dict__, "python_rng": random.getstate(), **settings})
        write_checksums(tmp)
    for old in checkpoint_dirs(out)[:-1]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def unfinished_step(out: Path) -> int | None:
    """The step of OUT's latest checkpoint, or None when OUT holds no unfinished fine-tuning."""
    found = checkpoint_dirs(out)
    return read_state_file(found[-1] / "state.json")["state"]["step"] if found else None


def load_fit_state(out: Path, model, optimizer, scaler, settings: dict[str, Any]) -> FitState:
    """Restore weights, optimizer and RNG from OUT's latest checkpoint in place; return where the run was."""
    remove_stale_temporaries(out)
    directory = intact_checkpoint(out)
    if directory is None:
        raise UserError(f"{out}: every checkpoint is damaged (set aside as *.damaged); start over with --overwrite")
    saved = read_state_file(directory / "state.json")
    changed = [f"{k}: {saved.get(k)!r} -> {v!r}" for k, v in settings.items() if saved.get(k) != v]
    if changed:
        raise UserError(
            f"{out} holds a fine-tuning with other settings ({'; '.join(changed)}); resume it with the ones it "
            f"started with, or start over (finetune --overwrite, or delete {out})"
        )
    tensors = load_tensors(directory / "tensors.pt")
    model.load_state_dict(tensors["model"])
    restore_optimizer_and_rng(tensors, optimizer, scaler, directory / "tensors.pt")
    version, internal, gauss = saved["python_rng"]
    random.setstate((version, tuple(internal), gauss))
    return FitState(**saved["state"])


def remove_fit_states(out: Path) -> None:
    """A finished run's checkpoints: its model directory is what it leaves."""
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
