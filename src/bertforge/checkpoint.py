"""Checkpoints: everything needed to continue a run exactly, written atomically.

    RUN_DIR/checkpoints/step_000500/
        config.json, model.safetensors,  the model with its tokenizer: a Hugging Face directory
        tokenizer.json, vocab.txt, ...   that every command (evaluate, fill-mask, finetune) reads
        optimizer.pt                     AdamW moments and the torch RNG states (tensors only)
        trainer_state.json               step, data position, elapsed time, configs

A checkpoint directory is built under a temporary name and renamed into place,
so a run killed mid-save leaves the previous checkpoint whole.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from .errors import UserError
from .fileio import atomic_directory, write_json
from .hf import from_hf_state_dict, write_model_files

STEP_DIR = re.compile(r"step_(\d{6,})$")


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


def save_checkpoint(run_dir: Path, model, optimizer: torch.optim.Optimizer, state: TrainerState, configs: dict[str, Any],
                    keep_last: int, scaler: torch.amp.GradScaler | None = None, tokenizer=None) -> Path:
    target = run_dir / "checkpoints" / f"step_{state.step:06d}"
    with atomic_directory(target) as tmp:
        write_model_files(model, tmp, tokenizer)
        tensors = {"optimizer": optimizer.state_dict(), "cpu_rng": torch.get_rng_state()}
        if torch.cuda.is_available():
            tensors["cuda_rng"] = torch.cuda.get_rng_state_all()
        if scaler is not None:
            tensors["scaler"] = scaler.state_dict()
        torch.save(tensors, tmp / "optimizer.pt")
        write_json(tmp / "trainer_state.json", {"state": state.__dict__, **configs})
    for old in checkpoint_dirs(run_dir)[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return target


def load_checkpoint(directory: Path, model, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None = None) -> TrainerState:
    """Restore model, optimizer and RNG in place; return where the run was."""
    info = read_trainer_state(directory)
    try:
        weights = load_file(str(directory / "model.safetensors"))
    except Exception as e:  # safetensors raises several types for a torn file
        raise UserError(f"{directory}: unreadable checkpoint weights ({e})") from None
    state_dict, _ = from_hf_state_dict(weights, model.config)
    model.load_state_dict(state_dict)
    # Our own file, and still loaded without unpickling arbitrary objects.
    tensors = torch.load(directory / "optimizer.pt", map_location="cpu", weights_only=True)
    optimizer.load_state_dict(tensors["optimizer"])
    torch.set_rng_state(tensors["cpu_rng"])
    if "cuda_rng" in tensors and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(tensors["cuda_rng"])
    if scaler is not None and "scaler" in tensors:
        scaler.load_state_dict(tensors["scaler"])
    return TrainerState(**info["state"])


def read_trainer_state(directory: Path) -> dict[str, Any]:
    path = directory / "trainer_state.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise UserError(f"{path}: unreadable checkpoint state ({e})") from None
