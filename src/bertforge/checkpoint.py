"""Checkpoints and the run directory: everything needed to continue a run exactly, written atomically.

    RUN_DIR/checkpoints/step_000500/
        config.json, model.safetensors,  the model with its tokenizer: a Hugging Face directory
        tokenizer.json, vocab.txt, ...   that every command (evaluate, fill-mask, finetune) reads
        optimizer.pt                     AdamW moments and the torch RNG states (tensors only)
        trainer_state.json               step, data position, elapsed time, configs

A checkpoint directory is built under a temporary name and renamed into place,
so a run killed mid-save leaves the previous checkpoint whole.

The run directory's policy lives here too: a directory holding a run is never
overwritten without --overwrite, and --resume refuses a changed architecture.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from safetensors.torch import load_file

from .config import ARCHITECTURE_FIELDS, ModelConfig
from .errors import UserError
from .fileio import atomic_directory, write_json
from .hf import from_hf_state_dict
from .modeldir import saved_parts, write_model_files
from .runtime import Distributed

STEP_DIR = re.compile(r"step_(\d{6,})$")
METRICS, TENSORBOARD = "metrics.jsonl", "tensorboard"  # in the run directory


@dataclass
class TrainerState:
    """Where a run is: enough, with the model and optimizer, to continue as if never stopped."""

    step: int = 0
    epoch: int = 0
    epoch_offset: int = 0  # instances of this epoch already consumed (across all processes)
    elapsed: float = 0.0  # seconds of training so far
    tokens_seen: int = 0
    bad_steps: int = 0  # non-finite losses skipped, in total


def checkpoint_dirs(run_dir: Path) -> list[Path]:
    """Complete checkpoints, oldest first (temporary directories are ignored)."""
    directory = run_dir / "checkpoints"
    if not directory.is_dir():
        return []
    found = [p for p in directory.iterdir() if p.is_dir() and STEP_DIR.match(p.name)]
    return sorted(found, key=lambda p: int(STEP_DIR.match(p.name).group(1)))


def remove_stale_temporaries(run_dir: Path) -> None:
    """Temporary directories a killed save left behind (never mistaken for checkpoints, but clutter)."""
    directory = run_dir / "checkpoints"
    if directory.is_dir():
        for leftover in directory.glob(".step_*"):
            shutil.rmtree(leftover, ignore_errors=True)


def save_checkpoint(
    run_dir: Path,
    model,
    optimizer: torch.optim.Optimizer,
    state: TrainerState,
    configs: dict[str, Any],
    keep_last: int,
    scaler: torch.amp.GradScaler | None,
    tokenizer,
    extra_config: dict[str, Any],
) -> Path:
    """A complete model directory (a checkpoint is queried like a final model) plus optimizer and trainer state."""
    target = run_dir / "checkpoints" / f"step_{state.step:06d}"
    with atomic_directory(target) as tmp:
        write_model_files(model, tmp, tokenizer, extra_config)
        torch.save(optimizer_and_rng(optimizer, scaler), tmp / "optimizer.pt")
        write_json(tmp / "trainer_state.json", {"state": state.__dict__, **configs})
    for old in checkpoint_dirs(run_dir)[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return target


def load_checkpoint(
    directory: Path, model, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None = None
) -> TrainerState:
    """Restore model, optimizer and RNG in place; return where the run was."""
    info = read_trainer_state(directory)
    for subdirectory, (part, _) in saved_parts(model).items():
        try:
            weights = load_file(str(directory / subdirectory / "model.safetensors"))
        except Exception as e:  # safetensors raises several types for a torn file
            raise UserError(f"{directory / subdirectory}: unreadable checkpoint weights ({e})") from None
        state_dict, _ = from_hf_state_dict(weights, part.config)
        expected = part.state_dict().keys()  # the tied decoder is implied for a model with no MLM head too
        part.load_state_dict({k: v for k, v in state_dict.items() if k in expected})
    # Our own file, and still loaded without unpickling arbitrary objects.
    restore_optimizer_and_rng(
        torch.load(directory / "optimizer.pt", map_location="cpu", weights_only=True), optimizer, scaler
    )
    return TrainerState(**info["state"])


def optimizer_and_rng(optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None) -> dict[str, Any]:
    """What a loop needs beside the weights to go on exactly: AdamW's moments, the RNG states, the loss scale."""
    tensors = {"optimizer": optimizer.state_dict(), "cpu_rng": torch.get_rng_state()}
    if torch.cuda.is_available():
        tensors["cuda_rng"] = torch.cuda.get_rng_state_all()
    if scaler is not None:
        tensors["scaler"] = scaler.state_dict()
    return tensors


def restore_optimizer_and_rng(
    tensors: dict[str, Any], optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None
) -> None:
    """Put back what `optimizer_and_rng` saved."""
    optimizer.load_state_dict(tensors["optimizer"])
    torch.set_rng_state(tensors["cpu_rng"])
    if "cuda_rng" in tensors and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(tensors["cuda_rng"])
    if scaler is not None and "scaler" in tensors:
        scaler.load_state_dict(tensors["scaler"])


def read_trainer_state(directory: Path) -> dict[str, Any]:
    return read_state_file(directory / "trainer_state.json")


def read_state_file(path: Path) -> dict[str, Any]:
    """A checkpoint's JSON state, or one line saying it cannot be read."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise UserError(f"{path}: unreadable checkpoint state ({e})") from None


# ---------------------------------------------------------------- the run directory


def run_configs(run_dir: Path) -> dict[str, Any] | None:
    """The configs a run directory was started with, or None if it holds no run."""
    path = run_dir / "config.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise UserError(f"{path}: not valid JSON ({e})") from None


def architecture_changes(saved: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """ "name: old -> new" for every architecture field that differs (dropout and the like may change).
    A field the saved run predates counts as its default."""
    saved = {**ModelConfig().to_dict(), **saved}
    return [f"{k}: {saved.get(k)!r} -> {wanted.get(k)!r}" for k in ARCHITECTURE_FIELDS if saved.get(k) != wanted.get(k)]


def prepare_run_dir(
    run_dir: Path, configs: dict[str, Any], resume: bool, overwrite: bool, processes: Distributed
) -> None:
    """Check the directory against the wish (new run, --resume, --overwrite), then write config.json."""
    saved = run_configs(run_dir)
    if saved is not None and not (resume or overwrite):
        raise UserError(f"{run_dir} already holds a run; pass --resume to continue it or --overwrite to start over")
    if saved is not None and resume:
        changes = architecture_changes(saved["model"], configs["model"])
        if changes:
            raise UserError(f"--resume with a changed model architecture is refused: {'; '.join(changes)}")
    if processes.world > 1:
        dist.barrier()  # every process has checked the directory before rank 0 writes to it
    if not processes.is_main:
        return
    if saved is not None and overwrite and not resume:
        for name in ("checkpoints", "model", "plots", METRICS, TENSORBOARD):
            target = run_dir / name
            shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)
    if resume:
        remove_stale_temporaries(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(run_dir / "config.json", configs)
