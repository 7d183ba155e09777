"""Ablation sweeps: every combination of a grid, with the same seed and data, into one results table.

    bertforge sweep --data data --out sweep --recipe budget --grid mask_prob=0.15,0.2 --grid num_layers=2,4 \\
        --max-steps 500

Each grid point is an ordinary `bertforge pretrain` run in SWEEP_DIR/runs/NAME,
so it is resumable on its own: a finished run (it has model/) is skipped, an
interrupted one continues from its last checkpoint. The sweep writes
results.csv, results.md and curves.png.
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from .config import ModelConfig, TrainConfig, parse_field
from .display import markdown_table
from .electra import pretraining_model
from .errors import UserError
from .metrics import read_metrics
from .plots import save_figure, shorten, subplots

OWNER = {
    f.name: cls for cls in (ModelConfig, TrainConfig) for f in dataclasses.fields(cls)
}  # field -> its config class


def parse_grid(specs: list[str]) -> dict[str, list[Any]]:
    """["mask_prob=0.15,0.2", "num_layers=2,4"] -> {"mask_prob": [0.15, 0.2], "num_layers": [2, 4]}."""
    axes: dict[str, list[Any]] = {}
    for spec in specs:
        name, _, values = spec.partition("=")
        name = name.strip().replace("-", "_")
        if name not in OWNER:
            raise UserError(f"--grid {spec!r}: {name!r} is not a model or training setting")
        if not values:
            raise UserError(f"--grid {spec!r}: give values, like {name}=a,b")
        try:
            axes[name] = [parse_field(OWNER[name], name, v.strip()) for v in values.split(",") if v.strip()]
        except UserError as e:
            raise UserError(f"--grid {e}") from None
    if not axes:
        raise UserError("give at least one --grid FIELD=V1,V2")
    return axes


def grid_points(axes: dict[str, list[Any]]) -> list[dict[str, Any]]:
    return [dict(zip(axes, values)) for values in itertools.product(*axes.values())]


def run_name(point: dict[str, Any]) -> str:
    return "__".join(f"{k}-{v}" for k, v in point.items())


def as_flags(settings: dict[str, Any]) -> list[str]:
    flags = []
    for name, value in settings.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            flags.append(flag if value else "--no-" + name.replace("_", "-"))
        else:
            flags += [flag, str(value)]
    return flags


def run_sweep(
    data: str | Path,
    out: str | Path,
    base: list[str],
    axes: dict[str, list[Any]],
    fixed: dict[str, Any],
    parallel: int = 1,
    quiet: bool = False,
) -> list[dict[str, Any]]:
    """Every grid point as a `pretrain` run with the flags `base` (recipe, preset), `fixed` and the point's values."""
    out = Path(out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    points = grid_points(axes)
    threads = max(1, (os.cpu_count() or 1) // parallel)
    pending = []
    for point in points:
        run_dir = out / "runs" / run_name(point)
        if (run_dir / "model" / "config.json").is_file():
            _say(f"skip (finished): {run_dir.name}", quiet)
            continue
        command = [sys.executable, "-m", "bertforge", "pretrain", "--data", str(data), "--out", str(run_dir), "--quiet"]
        command += as_flags({**fixed, **point})
        # An interrupted run continues where it stopped, with its saved settings.
        command += ["--resume"] if (run_dir / "config.json").is_file() else base
        pending.append((run_dir, command))
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
            log = open(run_dir / "sweep.log", "a", encoding="utf-8")
            _say(f"run: {run_dir.name}", quiet)
            env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
            running.append((run_dir, subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env), log))
        time.sleep(0.2)
        for item in [r for r in running if r[1].poll() is not None]:
            running.remove(item)
            item[2].close()
            if item[1].returncode != 0:
                failures.append(f"{item[0].name} (exit {item[1].returncode}, see {item[0] / 'sweep.log'})")


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


def write_results(out: Path, rows: list[dict[str, Any]], axes: list[str]) -> None:
    columns = [
        "run",
        *axes,
        "final_train_loss",
        "valid_mlm_acc",
        "valid_mlm_loss",
        "valid_pair_acc",
        "parameters",
        "wall_s",
        "tokens_per_s",
    ]
    with open(out / "results.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows({c: r.get(c) for c in columns} for r in rows)
    (out / "results.md").write_text(markdown_table(rows, columns[1:]) + "\n", encoding="utf-8")
    plot_sweep(out, rows)


def plot_sweep(out: Path, rows: list[dict[str, Any]]) -> Path:
    """Training loss and held-out MLM accuracy of every run, overlaid."""
    fig, (ax_loss, ax_acc) = subplots(1, 2, figsize=(13, 4.5))
    for row in rows:
        train, valid = read_metrics(out / "runs" / row["run"] / "metrics.jsonl")
        label = shorten(row["run"].replace("__", ", ").replace("-", "="), 45)
        line = ax_loss.plot([r["step"] for r in train], [r["loss"] for r in train], label=label)[0]
        if valid:
            ax_acc.plot(
                [r["step"] for r in valid], [r["mlm_acc"] for r in valid], "o-", color=line.get_color(), label=label
            )
        else:
            ax_acc.plot(
                [r["step"] for r in train],
                [r["mlm_acc"] for r in train],
                color=line.get_color(),
                label=f"{label} (train)",
            )
    ax_loss.set(title="Training loss (MLM + pair objective)", xlabel="optimizer step", ylabel="loss")
    ax_acc.set(title="Held-out MLM accuracy", xlabel="optimizer step", ylabel="accuracy")
    for ax in (ax_loss, ax_acc):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Sweep: {out.name}")
    fig.tight_layout()
    return save_figure(fig, out / "curves.png")
