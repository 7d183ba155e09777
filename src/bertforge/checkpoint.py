"""Checkpoints and the run directory: everything needed to continue a run exactly, written atomically.

    RUN_DIR/checkpoints/step_000500/
        config.json, model.safetensors,  the model with its tokenizer: a Hugging Face directory
        tokenizer.json, vocab.txt, ...   that every command (evaluate, fill-mask, finetune) reads
        optimizer.pt                     AdamW moments and the torch RNG states (tensors only)
        trainer_state.json               step, data position, elapsed time, configs
        checksums.json                   the sha256 of every other file, checked before a resume reads them

A checkpoint directory is built under a temporary name and renamed into place,
so a run killed mid-save leaves the previous checkpoint whole. One whose bytes
changed on disk since (a bad sector, a copy cut short) is never trained on: a
resume takes the latest intact one and sets the damaged ones aside.

The run directory's policy lives here too: a directory holding a run is never
overwritten without --overwrite, a directory holding something else never
without it, and --resume refuses a changed architecture. A run that stopped
before its first checkpoint is no run: the same command starts it again.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from .config import ARCHITECTURE_FIELDS, ModelConfig
from .errors import UserError
from .fileio import atomic_directory, remove_abandoned, write_json
from .hf import from_hf_state_dict
from .modeldir import saved_parts, write_model_files

STEP_DIR = re.compile(r"step_(\d{6,})$")
METRICS, TENSORBOARD = "metrics.jsonl", "tensorboard"  # in the run directory
CHECKSUMS = "checksums.json"  # in a checkpoint: {file: sha256} of every other file
DAMAGED = ".damaged"  # a checkpoint whose files fail their checksums is renamed step_NNNNNN.damaged
SWEEP_LOG = "sweep.log"  # what a sweep writes into a run's directory before the run starts


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
    remove_abandoned(run_dir / "checkpoints", "step_*")


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
        write_checksums(tmp)
    for old in checkpoint_dirs(run_dir)[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return target


# ---------------------------------------------------------------- integrity


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def write_checksums(directory: Path) -> None:
    """Record the sha256 of every file below `directory` (a checkpoint being written) in its checksums.json."""
    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.name != CHECKSUMS)
    write_json(directory / CHECKSUMS, {p.relative_to(directory).as_posix(): _sha256(p) for p in files})


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
        if _sha256(file) != digest:
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
    restore_optimizer_and_rng(load_tensors(directory / "optimizer.pt"), optimizer, scaler)
    return TrainerState(**info["state"])


def load_tensors(path: Path) -> dict[str, Any]:
    """A checkpoint's tensors file: our own, and still loaded without unpickling arbitrary objects."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # missing, torn or foreign: torch raises several types
        raise UserError(f"{path}: unreadable checkpoint ({e})") from None


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
    """The configs a run directory was started with, or None if it holds no run: no config.json, or one written
    by a run that stopped before its first checkpoint (which the same command then starts again)."""
    path = run_dir / "config.json"
    if not path.is_file() or not holds_progress(run_dir):
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise UserError(f"{path}: not valid JSON ({e})") from None


def holds_progress(run_dir: Path) -> bool:
    """A checkpoint or a final model: something a rerun must not throw away without being asked."""
    return bool(checkpoint_dirs(run_dir)) or (run_dir / "model").is_dir()


def architecture_changes(saved: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """ "name: old -> new" for every architecture field that differs (dropout and the like may change).
    A field the saved run predates counts as its default."""
    saved = {**ModelConfig().to_dict(), **saved}
    return [f"{k}: {saved.get(k)!r} -> {wanted.get(k)!r}" for k in ARCHITECTURE_FIELDS if saved.get(k) != wanted.get(k)]


def check_run_dir(run_dir: Path, configs: dict[str, Any], resume: bool, overwrite: bool) -> None:
    """The directory against the wish (a new run, --resume, --overwrite): one line where they disagree."""
    saved = run_configs(run_dir)
    if saved is not None and not (resume or overwrite):
        raise UserError(f"{run_dir} already holds a run; pass --resume to continue it or --overwrite to start over")
    if saved is not None and resume:
        changes = architecture_changes(saved["model"], configs["model"])
        if changes:
            raise UserError(f"--resume with a changed model architecture is refused: {'; '.join(changes)}")
    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"--out {run_dir}: a file, not a directory")
    # A directory without a run's config.json is another's (a run's model/ may be someone's model), a sweep's log
    # of the run about to start aside.
    foreign = sorted(p.name for p in run_dir.iterdir() if p.name != SWEEP_LOG) if run_dir.is_dir() else []
    if foreign and not overwrite and not (run_dir / "config.json").is_file():
        raise UserError(
            f"--out {run_dir} holds files that are not a run ({', '.join(foreign[:3])}); choose another directory, "
            "or pass --overwrite to write the run among them"
        )


def prepare_run_dir(run_dir: Path, configs: dict[str, Any], resume: bool, overwrite: bool) -> None:
    """Clear what a run started over (--overwrite, or a run that never reached a checkpoint) leaves, then write
    config.json. Called by the main process, with the directory locked and `check_run_dir` passed."""
    saved = run_configs(run_dir)
    if saved is None or (overwrite and not resume):
        if saved is None and (run_dir / "config.json").is_file():
            warnings.warn(
                f"{run_dir} held a run that stopped before its first checkpoint: starting it again", stacklevel=3
            )
        for name in ("checkpoints", "model", "plots", METRICS, TENSORBOARD):
            target = run_dir / name
            shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)
    if resume:
        remove_stale_temporaries(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(run_dir / "config.json", configs)
