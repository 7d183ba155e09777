"""Checkpoints that any loop writes: directories written whole, checked before they are read.

A checkpoint directory is built under a temporary name and renamed into place, so a run killed mid-save leaves
the previous checkpoint whole. Its files' checksums (checksums.json) are checked before a resume reads them: one
whose bytes changed on disk since (a bad sector, a copy cut short) is never trained on, and `intact_checkpoint`
sets it aside for the one before. The optimizer's state and the RNGs are saved as tensors only, and read back
without unpickling arbitrary objects. Knows no model: pre-training's and fine-tuning's checkpoints build on this.
"""

from __future__ import annotations

import json
import re
import shutil
import warnings
from pathlib import Path
from typing import Any

import torch

from ..errors import UserError, one_line
from ..fileio import read_json, remove_abandoned, sha256_of, write_json
from .optim import load_optimizer_state

STEP_DIR = re.compile(r"step_(\d{6,})$")
CHECKSUMS = "checksums.json"  # in a checkpoint: {file: sha256} of every other file
DAMAGED = ".damaged"  # a checkpoint whose files fail their checksums is renamed step_NNNNNN.damaged


def checkpoint_dirs(run_dir: Path) -> list[Path]:
    """Complete checkpoints, oldest first (temporary directories are ignored)."""
    directory = run_dir / "checkpoints"
    if not directory.is_dir():
        return []
    found = [p for p in directory.iterdir() if p.is_dir() and STEP_DIR.match(p.name)]
    return sorted(found, key=checkpoint_step)


def checkpoint_step(checkpoint: Path) -> int:
    """The step a checkpoint directory (step_NNNNNN) was saved at."""
    return int(STEP_DIR.match(checkpoint.name).group(1))


def remove_stale_temporaries(run_dir: Path) -> None:
    """Temporary directories a killed save left behind (never mistaken for checkpoints, but clutter)."""
    remove_abandoned(run_dir / "checkpoints", "step_*")


# ---------------------------------------------------------------- integrity


def write_checksums(directory: Path) -> None:
    """Record the sha256 of every file below `directory` (a checkpoint being written) in its checksums.json."""
    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.name != CHECKSUMS)
    write_json(directory / CHECKSUMS, {p.relative_to(directory).as_posix(): sha256_of(p) for p in files})


def damage(directory: Path) -> str | None:
    """What is wrong with a checkpoint's files (a file missing, or its bytes changed since it was written), or
    None if they are as written. A checkpoint from before checksums were kept has nothing to check."""
    path = directory / CHECKSUMS
    if not path.is_file():
        return None
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        return f"{CHECKSUMS} is unreadable ({e})"
    for name, digest in recorded.items():
        file = directory / name
        if not file.is_file():
            return f"{name} is missing"
        if sha256_of(file) != digest:
            return f"{name} does not match its checksum"
    return None


def intact_checkpoint(run_dir: Path, set_aside: bool = True) -> Path | None:
    """The latest checkpoint whose files are as they were written. Damaged ones after it are renamed
    step_NNNNNN.damaged (kept, never read again, with a warning naming the one resumed from instead); with
    `set_aside` False (processes other than the main one) they are only passed over."""
    found = checkpoint_dirs(run_dir)
    while found:
        latest = found.pop()
        problem = damage(latest)
        if problem is None:
            return latest
        if not set_aside:
            continue
        aside = latest.with_name(latest.name + DAMAGED)
        shutil.rmtree(aside, ignore_errors=True)
        latest.rename(aside)
        instead = f"resuming from {found[-1].name}" if found else "no earlier checkpoint to resume from"
        warnings.warn(f"{latest} is damaged ({problem}): set aside as {aside.name}; {instead}", stacklevel=2)
    return None


def all_finite(model: torch.nn.Module) -> bool:
    """Whether every weight is a number: a model that diverged (or read damaged moments) is never saved."""
    return all(bool(torch.isfinite(p).all()) for p in model.parameters())


def load_tensors(path: Path) -> dict[str, Any]:
    """A checkpoint's tensors file: our own, and still loaded without unpickling arbitrary objects."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # missing, torn or foreign: torch raises several types
        raise UserError(f"{path}: unreadable checkpoint ({one_line(e)})") from None


def optimizer_and_rng(optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None) -> dict[str, Any]:
    """What a loop needs beside the weights to go on exactly: AdamW's moments, the RNG states, the loss scale."""
    tensors = {"optimizer": optimizer.state_dict(), "cpu_rng": torch.get_rng_state()}
    if torch.cuda.is_available():
        tensors["cuda_rng"] = torch.cuda.get_rng_state_all()
    if scaler is not None:
        tensors["scaler"] = scaler.state_dict()
    return tensors


def restore_optimizer_and_rng(
    tensors: dict[str, Any], optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None, source: Path
) -> None:
    """Put back what `optimizer_and_rng` saved (`source`, the file it was read from), checked as an input:
    the optimizer's state by `load_optimizer_state`, the RNG states by their type."""
    if not isinstance(tensors, dict) or "optimizer" not in tensors or not _is_rng_state(tensors.get("cpu_rng")):
        raise UserError(f"{source}: not a checkpoint state bertforge writes")
    load_optimizer_state(optimizer, tensors["optimizer"], str(source))
    torch.set_rng_state(tensors["cpu_rng"])
    if "cuda_rng" in tensors and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(tensors["cuda_rng"])
    if scaler is not None and "scaler" in tensors:
        scaler.load_state_dict(tensors["scaler"])


def _is_rng_state(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype == torch.uint8 and value.shape == torch.get_rng_state().shape


def read_state_file(path: Path) -> dict[str, Any]:
    """A checkpoint's JSON state, or one line saying it cannot be read."""
    try:
        return read_json(path, "config")
    except UserError as e:
        raise UserError(f"unreadable checkpoint state: {e}") from None
