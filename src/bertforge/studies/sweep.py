"""Ablation sweeps: every combination of a grid, with the same seeds and data, into one results table.

    bertforge sweep --data data --out sweep --recipe budget --grid mask_prob=0.15,0.2 --grid num_layers=2,4 \\
        --max-steps 500 --seeds 3
    bertforge sweep --data data --out size --recipe budget --grid preset=tiny,mini --time-budget 30m --seeds 2

An axis is any model or training setting, or `preset` (a whole model size): with a time budget, the second
example asks which size learns most in 30 minutes on this machine.
Each grid point is an ordinary pre-training run in SWEEP_DIR/runs/NAME, planned
and trained through the Python API (`plan_run`, `pretrain`) in a process of its
own (its threads, its memory, its signals), so it is resumable on its own: a finished run (it has model/) is skipped, an
interrupted one continues from its last checkpoint. The sweep writes
results.csv, results.md (a row per run) and curves.png. With several seeds it
also writes summary.csv and summary.md: a row per setting, each figure's median
and range over the seeds, and the setting's training curve against the first
setting's, measured in seed spreads (replicates.curve_gap).
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from ..config import parse_field
from ..display import cell, markdown_table
from ..engine.metrics import read_metrics
from ..errors import UserError
from ..fileio import check_not_inputs
from ..model.config import ModelConfig, preset_size
from ..plots import save_figure, shorten, subplots
from ..training.config import TrainConfig
from ..training.objectives import pretraining_model
from ..training.plan import plan_run
from ..training.rundir import SWEEP_LOG, holds_progress
from .replicates import aligned, curve_gap, median_range, paired, separated

OWNER = {
    f.name: cls for cls in (ModelConfig, TrainConfig) for f in dataclasses.fields(cls)
}  # field -> its config class


MAX_GRID_POINTS = 1000  # a sweep of more runs than this is a mistake (and its grid is never built in memory)


def parse_grid(specs: list[str]) -> dict[str, list[Any]]:
    """["mask_prob=0.15,0.2", "num_layers=2,4"] -> {"mask_prob": [0.15, 0.2], "num_layers": [2, 4]}: every value
    parsed and checked as its flag's, none twice, at most MAX_GRID_POINTS runs, all before any run starts."""
    axes: dict[str, list[Any]] = {}
    points = 1
    for spec in specs:
        name, _, values = spec.partition("=")
        name = name.strip().replace("-", "_")
        if name not in OWNER and name != "preset":
            raise UserError(f"--grid {spec[:80]!r}: {name[:40]!r} is not a model or training setting, nor preset")
        if name in axes:
            raise UserError(f"--grid {name}: given twice; give its values in one --grid {name}=A,B")
        texts = [v.strip() for v in values.split(",") if v.strip()]
        if not texts:
            raise UserError(f"--grid {spec[:80]!r}: give values, like {name}=a,b")
        points *= len(texts)
        if points > MAX_GRID_POINTS:
            raise UserError(f"--grid: more than {MAX_GRID_POINTS:,} runs; sweep fewer values at a time")
        try:
            axes[name] = [_preset(v) if name == "preset" else parse_field(OWNER[name], name, v) for v in texts]
        except UserError as e:
            raise UserError(f"--grid {e}") from None
        twice = _first_repeat(axes[name])
        if twice is not None:
            raise UserError(f"--grid {name}: the value {twice!r} is given twice")
    if not axes:
        raise UserError("give at least one --grid FIELD=V1,V2")
    return axes


def _preset(name: str) -> str:
    preset_size(name)  # refuses an unknown size by name
    return name


def with_seeds(
    axes: dict[str, list[Any]], fixed: dict[str, Any], seeds: int
) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """(axes, fixed) with `--seeds N` as the grid's last axis: seed = S, ..., S+N-1, from `--seed S` (default 0)."""
    if seeds < 1:
        raise UserError(f"--seeds {seeds}: give 1 or more")
    if seeds == 1:
        return axes, fixed
    if "seed" in axes:
        raise UserError("give the seeds once: --seeds N or --grid seed=A,B")
    first = fixed.get("seed", 0)
    rest = {k: v for k, v in fixed.items() if k != "seed"}
    return {**axes, "seed": list(range(first, first + seeds))}, rest


def _first_repeat(items: list[Any]) -> Any:
    """The first item equal to one before it, None if none is (values may be unhashable: compared by ==)."""
    return next((item for i, item in enumerate(items) if item in items[:i]), None)


def grid_points(axes: dict[str, list[Any]]) -> list[dict[str, Any]]:
    return [dict(zip(axes, values)) for values in itertools.product(*axes.values())]


def run_name(point: dict[str, Any]) -> str:
    """A grid point's run directory name, `mask_prob-0.15__num_layers-2`: every character of a value that a path
    would read (`/`, `..`, a space) made `_`, so that each run lies in SWEEP_DIR/runs itself."""
    return "__".join(f"{k}-{_UNSAFE.sub('_', str(v)).lstrip('.') or '_'}" for k, v in point.items())[:200]


_UNSAFE = re.compile(r"[^A-Za-z0-9.+=-]|\.\.+")


def run_spec(data: str | Path, run_dir: Path, recipe: str | None, settings: dict[str, Any]) -> dict[str, Any]:
    """What one grid point's process is asked to do (JSON): the run's settings split by the config that owns them,
    as `plan_run` takes them. An interrupted run continues where it stopped, with its saved settings (the recipe
    and preset are then its own); one that never saved starts again."""
    resume = holds_progress(run_dir)
    values = {name: value for name, value in settings.items() if name != "preset"}
    return {
        "data": str(data),
        "out": str(run_dir),
        "recipe": None if resume else recipe,
        "preset": None if resume else settings.get("preset"),
        "model": {k: v for k, v in values.items() if OWNER[k] is ModelConfig},
        "train": {k: v for k, v in values.items() if OWNER[k] is TrainConfig},
        "resume": resume,
    }


def run_point(spec: str) -> int:
    """One grid point, in the process `run_sweep` started: plan and train it as `pretrain` does, and answer as
    the command would (0, 2 with one line for bad input, 128 + N when signal N stopped it at a checkpoint)."""
    from ..training.trainer import pretrain

    run = json.loads(spec)
    try:
        plan = plan_run(
            run["data"], run["out"], run["recipe"], run["preset"], run["model"], run["train"], run["resume"]
        )
        result = pretrain(
            run["data"], run["out"], plan.model, plan.train, resume=run["resume"], progress=False, recipe=plan.recipe
        )
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 128 + result.interrupted if result.interrupted else 0


# The command that runs one grid point: this module's run_point, in a fresh interpreter.
POINT_COMMAND = "import sys; from bertforge.studies.sweep import run_point; sys.exit(run_point(sys.argv[1]))"


def run_sweep(
    data: str | Path,
    out: str | Path,
    recipe: str | None,
    axes: dict[str, list[Any]],
    fixed: dict[str, Any],
    parallel: int = 1,
    quiet: bool = False,
) -> list[dict[str, Any]]:
    """Every grid point as a pre-training run with `recipe`, the settings `fixed` and the point's values (a model or
    training field, or `preset`)."""
    out = Path(out)
    starts = [value for value in [*axes.get("init_from", []), fixed.get("init_from")] if value]  # models it reads
    check_not_inputs({"--out": out}, {"--data": data, "--init-from": starts})
    points = grid_points(axes)
    names = [run_name(point) for point in points]
    same = _first_repeat(names)
    if same is not None:
        raise UserError(f"--grid: two grid points would share the run directory {same}; give values that differ")
    threads = max(1, (os.cpu_count() or 1) // parallel)
    pending = []
    for point, name in zip(points, names):
        run_dir = out / "runs" / name
        if (run_dir / "model" / "config.json").is_file():
            _say(f"skip (finished): {run_dir.name}", quiet)
            continue
        spec = run_spec(data, run_dir, recipe, {**fixed, **point})
        try:  # every point's settings are checked before any run starts, as pretrain checks them
            plan_run(
                spec["data"], run_dir, spec["recipe"], spec["preset"], spec["model"], spec["train"], spec["resume"]
            )
        except UserError as e:
            raise UserError(f"grid point {name}: {e}") from None
        pending.append((run_dir, [sys.executable, "-c", POINT_COMMAND, json.dumps(spec)]))
    (out / "runs").mkdir(parents=True, exist_ok=True)
    running: list[tuple[Path, subprocess.Popen, Any]] = []
    failures: list[str] = []
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        _drive(pending, running, failures, parallel, threads, quiet)
    except BaseException:
        for _, process, _ in running:
            process.send_signal(signal.SIGINT)  # each run saves a checkpoint; the next sweep resumes it
        for _, process, log in running:
            process.wait()
            log.close()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    if failures:
        raise UserError(f"{len(failures)} run(s) failed: {'; '.join(failures)}")
    rows = [summarise(out / "runs" / run_name(point), point) for point in points]
    write_results(out, rows, list(axes))
    return rows


def settings_of(rows: list[dict[str, Any]], axes: list[str]) -> dict[tuple, list[dict[str, Any]]]:
    """The runs grouped by their setting: the values of every axis but seed, in grid order."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row[a] for a in axes if a != "seed"), []).append(row)
    return groups


def has_seeds(rows: list[dict[str, Any]], axes: list[str]) -> bool:
    """Whether some setting ran at several seeds: then the sweep also writes summary.md."""
    return len(settings_of(rows, axes)) < len(rows)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _say(message: str, quiet: bool) -> None:
    if not quiet:
        print(message, file=sys.stderr)


def _drive(pending: list, running: list, failures: list[str], parallel: int, threads: int, quiet: bool) -> None:
    """Keep up to `parallel` runs going until all have finished."""
    while pending or running:
        while pending and len(running) < parallel:
            run_dir, command = pending.pop(0)
            run_dir.mkdir(parents=True, exist_ok=True)
            log = open(run_dir / SWEEP_LOG, "a", encoding="utf-8")
            _say(f"run: {run_dir.name}", quiet)
            env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
            running.append((run_dir, subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env), log))
        time.sleep(0.2)
        for item in [r for r in running if r[1].poll() is not None]:
            running.remove(item)
            item[2].close()
            if item[1].returncode != 0:
                failures.append(f"{item[0].name} (exit {item[1].returncode}, see {item[0] / SWEEP_LOG})")


def count_parameters(model_config: dict[str, Any], train_config: dict[str, Any]) -> int:
    """Of what the run trains, each tensor once: parameters() yields the tied decoder/embedding matrix, and
    ELECTRA's shared embeddings, a single time."""
    with torch.device("meta"):  # shapes only, no memory
        model = pretraining_model(ModelConfig.from_dict(model_config), TrainConfig.from_dict(train_config))
    return sum(p.numel() for p in model.parameters())


def summarise(run_dir: Path, point: dict[str, Any]) -> dict[str, Any]:
    train, valid = read_metrics(run_dir / "metrics.jsonl")
    config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    last, held_out = (train[-1] if train else {}), (valid[-1] if valid else {})
    return {
        "run": run_dir.name,
        **point,
        "final_train_loss": last.get("loss"),
        "valid_mlm_acc": held_out.get("mlm_acc"),
        "valid_mlm_loss": held_out.get("mlm_loss"),
        "valid_pair_acc": held_out.get("nsp_acc", held_out.get("sop_acc")),
        "parameters": count_parameters(config["model"], config["train"]),
        "wall_s": last.get("elapsed"),
        "tokens_per_s": last["tokens"] / last["elapsed"] if last.get("elapsed") else None,
    }


RUN_COLUMNS = ["final_train_loss", "valid_mlm_acc", "valid_mlm_loss", "valid_pair_acc", "parameters", "wall_s"]
OVER_SEEDS = ["valid_mlm_acc", "valid_mlm_loss", "valid_pair_acc", "final_train_loss"]  # median and range


def write_results(out: Path, rows: list[dict[str, Any]], axes: list[str]) -> None:
    """results.csv / .md (a row per run) and curves.png; with several seeds, summary.csv / .md too."""
    columns = ["run", *axes, *RUN_COLUMNS, "tokens_per_s"]
    write_table(out / "results", rows, columns)
    groups = settings_of(rows, axes)
    seeded = has_seeds(rows, axes)
    if seeded:
        settings = summarise_settings(out, groups, [a for a in axes if a != "seed"])
        write_table(out / "summary", settings, list(settings[0]), shown_settings(settings, axes))
    plot_sweep(out, {setting_label(key, axes, runs, seeded): runs for key, runs in groups.items()})


def write_table(stem: Path, rows: list[dict[str, Any]], columns: list[str], shown: list[dict[str, Any]] | None = None):
    """STEM.csv with every column; STEM.md of `shown` (default: the rows without their run names)."""
    with open(stem.with_suffix(".csv"), "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows({c: r.get(c) for c in columns} for r in rows)
    if shown is None:
        shown = [{c: r.get(c) for c in columns if c != "run"} for r in rows]
    stem.with_suffix(".md").write_text(markdown_table(shown, list(shown[0])) + "\n", encoding="utf-8")


def shown_settings(settings: list[dict[str, Any]], axes: list[str]) -> list[dict[str, Any]]:
    """The summary as a reader takes it in: each figure as median (min–max)."""

    def spread(s: dict[str, Any], figure: str) -> str | None:
        if s[figure] is None:
            return None
        return f"{cell(s[figure])} ({cell(s[f'{figure}_min'])}–{cell(s[f'{figure}_max'])})"

    return [
        {
            **{a: s[a] for a in axes if a != "seed"},
            "seeds": s["seeds"],
            "held-out MLM acc": spread(s, "valid_mlm_acc"),
            "held-out MLM loss": spread(s, "valid_mlm_loss"),
            "held-out pair acc": spread(s, "valid_pair_acc"),
            "final train loss": spread(s, "final_train_loss"),
            "tokens/s": s["tokens_per_s"],
            "speed vs first": s["speed_vs_first"],
            "loss-curve gap to first": s["loss_curve_gap_to_first"],
            "loss seed spread": s["loss_seed_spread"],
            "acc apart from first": s["acc_apart_from_first"],
            "acc vs first, seed for seed": _paired_cell(s),
        }
        for s in settings
    ]


def _paired_cell(s: dict[str, Any]) -> str | None:
    """'+0.011 (higher in 3 of 3)': the median difference from the first setting over the seeds both ran."""
    if s["acc_paired_pairs"] is None:
        return None
    return f"{s['acc_paired_median']:+.4f} (higher in {s['acc_paired_higher']} of {s['acc_paired_pairs']})"


def summarise_settings(out: Path, groups: dict[tuple, list[dict[str, Any]]], axes: list[str]) -> list[dict[str, Any]]:
    """A row per setting: each figure's median and range over its seeds, its speed, and its training-loss curve
    against the first setting's (the gap between their median curves, and this setting's own seed spread)."""
    curves = {key: [training_losses(out / "runs" / r["run"]) for r in runs] for key, runs in groups.items()}
    first = next(iter(groups))
    first_speed = statistics.median(r["tokens_per_s"] or 0.0 for r in groups[first])
    settings = []
    for key, runs in groups.items():
        setting: dict[str, Any] = {**dict(zip(axes, key)), "seeds": len(runs)}
        for figure in OVER_SEEDS:
            values = [r[figure] for r in runs if r[figure] is not None]
            spread = median_range(values) if values else {"median": None, "min": None, "max": None}
            setting |= {figure: spread["median"], f"{figure}_min": spread["min"], f"{figure}_max": spread["max"]}
        speed = statistics.median(r["tokens_per_s"] or 0.0 for r in runs)
        setting["tokens_per_s"] = speed
        setting["speed_vs_first"] = speed / first_speed if first_speed else None
        setting["loss_curve_gap_to_first"] = curve_gap(curves[first], curves[key])["gap"]
        setting["loss_seed_spread"] = curve_gap(curves[key], curves[key])["spread"]
        # seed -> held-out accuracy, of the first setting and of this one; compared where both were scored
        accuracies = [{r.get("seed"): r["valid_mlm_acc"] for r in group} for group in (groups[first], runs)]
        compared = key != first and None not in [*accuracies[0].values(), *accuracies[1].values()]
        setting["acc_apart_from_first"] = separated(*(list(a.values()) for a in accuracies)) if compared else None
        pairs = (paired(*accuracies) if compared else None) or {}
        setting |= {f"acc_paired_{k}": pairs.get(k) for k in ("median", "higher", "pairs")}
        settings.append(setting)
    return settings


def training_losses(run_dir: Path) -> dict[int, float]:
    """step -> the logged training loss."""
    train, _ = read_metrics(run_dir / "metrics.jsonl")
    return {r["step"]: r["loss"] for r in train}


def setting_label(key: tuple, axes: list[str], runs: list[dict[str, Any]], seeded: bool) -> str:
    if not seeded:
        return shorten(runs[0]["run"].replace("__", ", ").replace("-", "="), 45)
    named = ", ".join(f"{a}={v}" for a, v in zip([a for a in axes if a != "seed"], key))
    return shorten(f"{named or 'all'} ({len(runs)} seeds)", 45)


def plot_sweep(out: Path, settings: dict[str, list[dict[str, Any]]]) -> Path:
    """Training loss and held-out MLM accuracy per setting, by step, and the accuracy by training minutes (where
    settings differ in a step's cost, as sizes do, equal minutes is the fair comparison): a line for one run; for
    several seeds their median, with a band from the lowest to the highest seed."""
    fig, (ax_loss, ax_acc, ax_time) = subplots(1, 3, figsize=(18, 4.5))
    for label, runs in settings.items():
        metrics = [read_metrics(out / "runs" / r["run"] / "metrics.jsonl") for r in runs]
        color = draw_band(ax_loss, [{r["step"]: r["loss"] for r in train} for train, _ in metrics], label)
        held_out = all(valid for _, valid in metrics)
        records = [valid if held_out else train for train, valid in metrics]
        curves = [{r["step"]: r["mlm_acc"] for r in run} for run in records]
        name, marker = (label, "o") if held_out else (f"{label} (train)", None)
        draw_band(ax_acc, curves, name, color=color, marker=marker)
        # a held-out record's own time, or (logged before records had one) the training record's at its step
        minutes = [
            {r["step"]: r["elapsed"] / 60 for r in [*train, *run] if "elapsed" in r}
            for (train, _), run in zip(metrics, records)
        ]
        draw_band(ax_time, curves, name, x_by_step=minutes, color=color, marker=marker)
    ax_loss.set(title="Training loss (MLM + pair objective)", xlabel="optimizer step", ylabel="loss")
    ax_acc.set(title="Held-out MLM accuracy", xlabel="optimizer step", ylabel="accuracy")
    ax_time.set(title="Held-out MLM accuracy by time", xlabel="training minutes", ylabel="accuracy")
    for ax in (ax_loss, ax_acc, ax_time):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Sweep: {out.name}")
    fig.tight_layout()
    return save_figure(fig, out / "curves.png")


def draw_band(
    ax, curves: list[dict[int, float]], label: str, x_by_step: list[dict[int, float]] | None = None, **style
) -> str:
    """The median over `curves` (step -> value) at the steps all of them have, and their min-max band. Its colour.

    With `x_by_step` (per curve, step -> x), at the median x of each step instead of the step itself."""
    steps, by_step = aligned([*curves, *(x_by_step or [])])  # [step], [step][curve, then x map]
    xs = [statistics.median(v[len(curves) :]) for v in by_step] if x_by_step else steps
    by_step = [v[: len(curves)] for v in by_step]
    line = ax.plot(xs, [statistics.median(v) for v in by_step], label=label, **style)[0]
    if len(curves) > 1:
        ax.fill_between(xs, [min(v) for v in by_step], [max(v) for v in by_step], color=line.get_color(), alpha=0.2)
    return line.get_color()
