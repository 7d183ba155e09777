"""Progress of long work: a bar on a terminal, plain lines in a log.

On a terminal, a tqdm bar with rate and ETA, redrawn at most once a second. When
stderr is a file or a pipe (`bertforge pretrain ... > run.log 2>&1`, a job
scheduler's log), a bar's carriage-return frames would fill the log, so the same
work prints a plain line now and then instead: every --log-every steps for
training, every tenth of the work for `prepare`. Both go to stderr, with the
messages; results go to stdout.

    TrainingProgress   pre-training: steps or seconds, and the latest metrics
    Progress           any other count (bytes prepared, fine-tuning steps)
"""

from __future__ import annotations

import sys
import time
from typing import Any

from tqdm import tqdm


def on_terminal() -> bool:
    return sys.stderr.isatty()


def duration(seconds: float) -> str:
    """1h02m, 4m05s or 12s."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def say(message: str) -> None:
    """A line on stderr, above a bar if one is drawn."""
    tqdm.write(message, file=sys.stderr)


class TrainingProgress:
    """Pre-training's progress. In a time-budget run the bar counts seconds, clamped to the budget: the last step
    always overshoots it, and a count past tqdm's total would make tqdm drop the total."""

    def __init__(self, enabled: bool, time_budget: float, max_steps: int, step: int, elapsed: float):
        self.time_budget, self.max_steps = time_budget, max_steps
        self.enabled = enabled
        self.start = (step, elapsed)  # where this process began: its own rate gives the ETA
        self.bar = None
        if not enabled or not on_terminal():
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
        """The latest logged metrics: beside the bar, or as a line of the log."""
        if not self.enabled or not record:
            return
        shown = {"loss": f"{record['loss']:.3f}", "mlm_acc": f"{record['mlm_acc']:.3f}"}
        if f"{pair_objective}_acc" in record:
            shown[f"{pair_objective}_acc"] = f"{record[f'{pair_objective}_acc']:.3f}"
        if "rtd_acc" in record:
            shown["rtd_acc"] = f"{record['rtd_acc']:.3f}"
        if self.bar is not None:
            shown["tok_s"] = f"{record['tokens_per_s']:.0f}"
            self.bar.set_postfix(shown, refresh=False)
            return
        step, elapsed = record["step"], record["elapsed"]
        total = f"/{self.max_steps}" if not self.time_budget else ""
        metrics = "  ".join(f"{k} {v}" for k, v in shown.items())
        say(
            f"step {step}{total}  {metrics}  lr {record['lr']:.2e}  tok/s {record['tokens_per_s']:,.0f}  "
            f"elapsed {duration(elapsed)}  eta {duration(self._remaining(step, elapsed))}"
        )

    def _remaining(self, step: int, elapsed: float) -> float:
        if self.time_budget:
            return self.time_budget - elapsed
        steps, seconds = step - self.start[0], elapsed - self.start[1]
        return (self.max_steps - step) * seconds / max(steps, 1)

    write = staticmethod(say)


class Progress:
    """A count of work (bytes, steps) toward a total: a bar on a terminal; in a log, a line each `every` of the
    total's tenths, or each `every` units when given, with `describe()`'s words on it."""

    def __init__(self, total: float, desc: str, unit: str = "", enabled: bool = True, initial: float = 0,
                 every: float | None = None, unit_scale: bool = False):  # fmt: skip
        self.total, self.desc, self.enabled = total, desc, enabled
        self.n, self.started = initial, (time.perf_counter(), initial)
        self.every = every or max(total / 10, 1)
        self.next_line = initial + self.every
        self.postfix = ""
        self.bar = None
        if enabled and on_terminal():
            # delay: nothing is drawn for work that fails (or finishes) within a second: an error stays one line
            self.bar = tqdm(total=total, initial=initial, desc=desc, unit=unit or "it", unit_scale=unit_scale,
                            mininterval=1.0, delay=1.0, file=sys.stderr, dynamic_ncols=True)  # fmt: skip

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, n: float = 1, postfix: str = "") -> None:
        self.n += n
        self.postfix = postfix or self.postfix
        if self.bar is not None:
            self.bar.update(n)
            if postfix:
                self.bar.set_postfix_str(postfix, refresh=False)
        elif self.enabled and self.n >= self.next_line:
            self.next_line = self.n + self.every
            seconds = time.perf_counter() - self.started[0]
            eta = (self.total - self.n) * seconds / max(self.n - self.started[1], 1e-9)
            parts = [f"{self.desc}: {self.n / max(self.total, 1):.0%}", self.postfix]
            say("  ".join([*filter(None, parts), f"elapsed {duration(seconds)}", f"eta {duration(eta)}"]))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
