"""The training progress bar: steps or seconds, with rate, ETA and the latest metrics.

Redrawn at most once a second, so logs stay readable (every redraw is a line
there). In a time-budget run the bar counts seconds, clamped to the budget:
the last step always overshoots it, and a count past tqdm's total would make
tqdm drop the total.
"""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm


class TrainingProgress:
    def __init__(self, enabled: bool, time_budget: float, max_steps: int, step: int, elapsed: float):
        self.time_budget = time_budget
        self.bar = None
        if not enabled:
            return
        if time_budget:
            # The total is written into the format, not read back from tqdm, which may reset it.
            self.bar = tqdm(
                total=time_budget,
                initial=min(elapsed, time_budget),
                unit="s",
                desc="pretrain",
                dynamic_ncols=True,
                mininterval=1.0,
                file=sys.stderr,
                bar_format="{l_bar}{bar}| {n:.0f}/" + f"{time_budget:.0f}s" + " [{elapsed}<{remaining}{postfix}]",
            )
        else:
            self.bar = tqdm(
                total=max_steps,
                initial=step,
                unit="step",
                desc="pretrain",
                dynamic_ncols=True,
                mininterval=1.0,
                file=sys.stderr,
            )

    def __enter__(self) -> TrainingProgress:
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()

    def update(self, step: int, elapsed: float) -> None:
        if self.bar is None:
            return
        target = min(elapsed, self.time_budget) if self.time_budget else min(step, self.bar.total)
        if target > self.bar.n:
            self.bar.update(target - self.bar.n)

    def show(self, record: dict[str, Any] | None, pair_objective: str) -> None:
        """The latest logged metrics beside the bar."""
        if self.bar is None or not record:
            return
        shown = {"loss": f"{record['loss']:.3f}", "mlm_acc": f"{record['mlm_acc']:.3f}"}
        if f"{pair_objective}_acc" in record:
            shown[f"{pair_objective}_acc"] = f"{record[f'{pair_objective}_acc']:.3f}"
        if "rtd_acc" in record:
            shown["rtd_acc"] = f"{record['rtd_acc']:.3f}"
        shown["tok_s"] = f"{record['tokens_per_s']:.0f}"
        self.bar.set_postfix(shown, refresh=False)

    @staticmethod
    def write(message: str) -> None:
        """A line above the bar (or on stderr without one)."""
        tqdm.write(message, file=sys.stderr)
