"""A loop's metrics log: metrics.jsonl, one JSON object per logged step or evaluation, optionally TensorBoard,
and reading it back for figures and reports.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..display import Table
from ..errors import UserError


class MetricsLog:
    """A JSON-lines file, one object per logged step or evaluation, and optionally TensorBoard event files."""

    def __init__(self, path: Path, tensorboard_dir: Path | None = None):
        self.path = path
        self.tensorboard = _open_tensorboard(tensorboard_dir) if tensorboard_dir else None

    def truncate(self, step: int) -> None:
        """Drop lines logged after `step` (a resumed run writes them again) and a line torn by a kill."""
        if not self.path.is_file():
            return
        kept = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                if json.loads(line)["step"] <= step:
                    kept.append(line)
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
        self.path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        if self.tensorboard is not None:
            for key, value in record.items():
                if isinstance(value, (int, float)) and key != "step":
                    self.tensorboard.add_scalar(f"{record['split']}/{key}", value, record["step"])

    def close(self) -> None:
        if self.tensorboard is not None:
            self.tensorboard.close()
            self.tensorboard = None


def _open_tensorboard(directory: Path):
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise UserError("--tensorboard needs the tensorboard package: pip install tensorboard") from None
    return SummaryWriter(str(directory))


def read_metrics(path: str | Path) -> tuple[Table, Table]:
    """(train records, held-out records) from a metrics.jsonl; a torn last line is skipped."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no metrics yet")
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    train = Table(
        (r for r in records if r.get("split") == "train"), ["step", "tokens", "loss", "mlm_acc", "lr", "tokens_per_s"]
    )
    valid = Table((r for r in records if r.get("split") == "valid"), ["step", "mlm_loss", "mlm_acc", "perplexity"])
    return train, valid
