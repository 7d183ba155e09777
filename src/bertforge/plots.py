"""Figures, drawn with matplotlib's Agg backend (no display needed)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .errors import UserError  # noqa: E402


def read_metrics(path: str | Path) -> tuple[list[dict], list[dict]]:
    """(train records, held-out records) from a metrics.jsonl."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no metrics yet")
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in records if r["split"] == "train"], [r for r in records if r["split"] == "valid"]


def plot_training_curves(metrics_path: str | Path, out: str | Path, title: str | None = None) -> Path:
    """Loss (total, MLM, NSP), accuracy (MLM, NSP) and learning rate over steps, with held-out points."""
    train, valid = read_metrics(metrics_path)
    if not train and not valid:
        raise UserError(f"{metrics_path}: no metrics to plot")
    fig, (ax_loss, ax_acc, ax_lr) = plt.subplots(1, 3, figsize=(15, 4.2))
    steps = [r["step"] for r in train]
    # One colour per quantity: the held-out points sit on their training curve's colour.
    for key, style, color in (("loss", "-", "tab:blue"), ("mlm_loss", "--", "tab:orange"), ("nsp_loss", ":", "tab:green")):
        label = key.replace("_", " ").replace("mlm", "MLM").replace("nsp", "NSP")
        if train and key in train[0]:
            ax_loss.plot(steps, [r[key] for r in train], style, color=color, label=f"train {label}")
        if key != "loss" and valid and key in valid[0]:
            ax_loss.plot([r["step"] for r in valid], [r[key] for r in valid], "o", color=color, label=f"held-out {label}")
    for key, style, color in (("mlm_acc", "-", "tab:orange"), ("nsp_acc", "--", "tab:green")):
        name = key.replace("_acc", "").upper()
        if train and key in train[0]:
            ax_acc.plot(steps, [r[key] for r in train], style, color=color, label=f"train {name} accuracy")
        if valid and key in valid[0]:
            ax_acc.plot([r["step"] for r in valid], [r[key] for r in valid], "o", color=color, label=f"held-out {name} accuracy")
    if train:
        ax_lr.plot(steps, [r["lr"] for r in train], color="tab:purple", label="learning rate")
    for ax, ylabel, name in ((ax_loss, "loss", "Loss"), (ax_acc, "accuracy", "Accuracy"), (ax_lr, "learning rate", "Learning rate")):
        ax.set_xlabel("optimizer step")
        ax.set_ylabel(ylabel)
        ax.set_title(name)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    fig.suptitle(title or f"Pre-training curves: {Path(metrics_path).parent.name}")
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
