"""What a `pretrain` command trains: its model and train configs, from a recipe, a resumed run or a model.

    a new run        the recipe's defaults, its preset (or --preset), then the flags given
    --init-from DIR  the starting model's architecture instead of a preset, then the same
    --resume         the run's saved configs, then the flags given (a --preset then sets only the size, which must
                     match the saved one: the trainer checks); a run that never reached a checkpoint is new again

One place for these rules, so that the command line and the Python API agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.directory import read_meta
from ..errors import UserError
from ..model.config import ModelConfig, preset_size
from ..model.variants import is_gated
from .config import DEFAULT_RECIPE, TrainConfig, recipe_configs
from .continued import continued_configs
from .rundir import run_configs


@dataclass
class RunPlan:
    """The configs a run trains with, and the recipe it started from (None for a run saved before recipes were
    recorded)."""

    model: ModelConfig
    train: TrainConfig
    recipe: str | None


def plan_run(
    data_dir: str | Path,
    run_dir: str | Path,
    recipe: str | None = None,
    preset: str | None = None,
    model_values: dict[str, Any] | None = None,
    train_values: dict[str, Any] | None = None,
    resume: bool = False,
) -> RunPlan:
    """The configs of a new run, or of the run in `run_dir` with `resume`; `model_values` and `train_values` are
    the fields given explicitly (the command line's flags), on top of everything else."""
    model_values, train_values = dict(model_values or {}), dict(train_values or {})
    if train_values.get("time_budget") and "max_steps" in train_values:
        raise UserError("--max-steps and --time-budget both set how long the run is; give one of them")
    saved = run_configs(Path(run_dir)) if resume else None
    if saved is None:
        recipe = recipe or DEFAULT_RECIPE
        if train_values.get("init_from"):
            if preset:
                raise UserError(f"--preset {preset}: the model's size comes from --init-from; leave the flag out")
            model, train = continued_configs(recipe, train_values["init_from"], model_values, train_values)
            return RunPlan(model, train, recipe)
        model_values.setdefault("vocab_size", read_meta(data_dir)["vocab_size"])
        model, train = recipe_configs(recipe, preset, model_values, train_values)
        return RunPlan(model, train, recipe)
    started = saved.get("recipe")
    if recipe and recipe != started:
        began = f"started from recipe {started}" if started else "predates recorded recipes"
        raise UserError(
            f"--recipe {recipe}: this run {began}, and a resumed run keeps its saved settings (flags change them)"
        )
    if saved["train"].get("time_budget") and "max_steps" in train_values:
        raise UserError("--max-steps: this run's length is its --time-budget; give --time-budget to change it")
    gated = is_gated(model_values.get("feed_forward", saved["model"].get("feed_forward")))
    size = preset_size(preset, gated) if preset else {}  # the size alone: the saved recipe's settings stay
    model = ModelConfig.from_dict({**saved["model"], **size, **model_values})
    return RunPlan(model, TrainConfig.from_dict({**saved["train"], **train_values}), started)
