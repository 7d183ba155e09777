"""The run directory and its checkpoints: what a pre-training run writes, and its policy.

    RUN_DIR/config.json           the model and train configs, the data, the recipe
    RUN_DIR/metrics.jsonl         one JSON object per logged step or evaluation
    RUN_DIR/checkpoints/step_000500/
        config.json, model.safetensors,  the model with its tokenizer: a Hugging Face directory
        tokenizer.json, vocab.txt, ...   that every command (evaluate, fill-mask, finetune) reads
        optimizer.pt                     AdamW moments and the torch RNG states (tensors only)
        trainer_state.json               step, data position, elapsed time, configs
        checksums.json                   the sha256 of every other file (engine/checkpoint.py)
    RUN_DIR/model/                the final model directory
    RUN_DIR/plots/

The policy: a directory holding a run is never overwritten without --overwrite, a directory holding something
else never without it, and --resume refuses a changed architecture. A run that stopped before its first
checkpoint is no run: the same command starts it again.
"""

from __future__ import annotations

import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from ..data.directory import read_meta
from ..engine.checkpoint import (
    checkpoint_dirs,
    load_tensors,
    optimizer_and_rng,
    read_state_file,
    remove_stale_temporaries,
    restore_optimizer_and_rng,
    write_checksums,
)
from ..errors import UserError
from ..fileio import PROBE_PREFIX, atomic_directory, read_json, write_json
from ..model.config import ARCHITECTURE_FIELDS, ModelConfig
from ..modelfiles.directory import saved_parts, write_model_files
from ..modelfiles.hf import from_hf_state_dict
from ..modelfiles.origin import Origin

METRICS, TENSORBOARD = "metrics.jsonl", "tensorboard"  # in the run directory
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
    warmup_elapsed: float = 0.0  # seconds when a new head's warm-up ended (the encoder's schedule starts there)


@dataclass
class RunResult:
    """How a run ended: where it is, the signal that stopped it, its last held-out scores."""

    state: TrainerState
    interrupted: int = 0  # the signal that stopped the run, 0 if it finished
    final_eval: dict[str, Any] = field(default_factory=dict)
    is_main: bool = True  # rank 0, the process that reports


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
    card: dict[str, Any] | None = None,
    origin: Origin | None = None,
) -> Path:
    """A complete model directory (a checkpoint is queried like a final model, has its model card, and goes back
    out as what the run started from, `origin`) plus optimizer and trainer state."""
    target = run_dir / "checkpoints" / f"step_{state.step:06d}"
    with atomic_directory(target) as tmp:
        write_model_files(model, tmp, tokenizer, extra_config, card, origin)
        torch.save(optimizer_and_rng(optimizer, scaler), tmp / "optimizer.pt")
        write_json(tmp / "trainer_state.json", {"state": state.__dict__, **configs})
        write_checksums(tmp)
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
    restore_optimizer_and_rng(load_tensors(directory / "optimizer.pt"), optimizer, scaler, directory / "optimizer.pt")
    return TrainerState(**info["state"])


def read_trainer_state(directory: Path) -> dict[str, Any]:
    return read_state_file(directory / "trainer_state.json")


# ---------------------------------------------------------------- the run directory


def run_configs(run_dir: Path) -> dict[str, Any] | None:
    """The configs a run directory was started with, or None if it holds no run: no config.json, or one written
    by a run that stopped before its first checkpoint (which the same command then starts again)."""
    path = run_dir / "config.json"
    if not path.is_file() or not holds_progress(run_dir):
        return None
    return read_json(path, "config")


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
    # of the run about to start aside, and the main process's write probe: under DDP the other processes look
    # while it locks the directory.
    names = [p.name for p in run_dir.iterdir()] if run_dir.is_dir() else []
    foreign = sorted(name for name in names if name != SWEEP_LOG and not name.startswith(PROBE_PREFIX))
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
    if resume and saved is not None:  # its settings change when a checkpoint of the new ones is saved (Trainer.save)
        remove_stale_temporaries(run_dir)
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(run_dir / "config.json", configs)


def card_facts(
    data_dir: Path,
    state: TrainerState,
    device: str,
    held_out: dict[str, Any] | None = None,
    held_out_before: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What the model card of a directory a run saves says: the corpus, how far the run got, and the held-out scores
    (now, and a continued run's before) where they were taken."""
    meta = read_meta(data_dir)
    splits = meta["splits"]
    facts: dict[str, Any] = {
        "corpus": {
            "files": meta.get("sources", []),
            "characters": meta.get("filters", {}).get("chars_kept", 0),
            "train_tokens": splits["train"]["tokens"],
            "valid_tokens": splits["valid"]["tokens"],
        },
        "training": {"steps": state.step, "tokens": state.tokens_seen, "seconds": state.elapsed, "device": device},
    }
    if held_out is not None:
        facts["held_out"] = held_out
    if held_out_before is not None:
        facts["held_out_before"] = held_out_before
    return facts
