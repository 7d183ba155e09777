"""A run's schedule, one object the trainer is given: how far the run is, its learning rate, when it ends, and the
phase in which a new masked-LM head learns alone.

A released encoder without a masked-LM head (BertModel, a sentence-embedding model) gets a new one. Its random
weights would send random gradients into the encoder, so for its first `head_steps` steps the head learns alone,
at its own constant rate (it learns from nothing, as a model trained from scratch does), the encoder's gradients
dropped; the encoder's schedule, its warm-up first, starts when it begins to learn. A run without such a head has
no such phase (head_steps 0).

The phase fits the run it is in. Its default is a tenth of the run, at most DEFAULT_HEAD_STEPS steps, so that a
30-step continuation is not refused for a warm-up nobody asked for; under a time budget (whose steps are not known
ahead) it ends at its steps or at a share of the time, whichever comes first: a tenth for the default, half for a
value given. Only a value given that leaves the encoder no steps is refused.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from torch import nn

from ..engine.optim import lr_factor, warmup_fraction
from ..errors import UserError
from .config import TrainConfig

HEAD = "mlm_head"  # the new head's module: its parameters alone learn in the first phase
RECORD_KEY = "head_warmup"  # what config.json's pre-training record keeps of the phase, for a resumed run


DEFAULT_HEAD_STEPS = 100  # the default head phase's longest, in steps (experiments/headless.py measured it)
DEFAULT_HEAD_SHARE = 0.1  # the default head phase's share of a run, in steps or under a time budget in time
GIVEN_HEAD_SHARE = 0.5  # the longest share of a time budget a head phase given in steps may take


@dataclass(frozen=True)
class Schedule:
    cfg: TrainConfig
    head_steps: int = 0  # steps a new masked-LM head learns alone, the encoder frozen

    @classmethod
    def for_model(cls, cfg: TrainConfig, model: nn.Module) -> Schedule:
        """A new run's schedule: a head phase where the model's masked-LM head starts untrained."""
        if HEAD not in getattr(model, "untrained_heads", ()):
            return cls(cfg, 0)
        if cfg.head_warmup_steps is not None:
            return cls(cfg, cfg.head_warmup_steps).checked("--head-warmup-steps")
        if cfg.time_budget:
            return cls(cfg, DEFAULT_HEAD_STEPS)
        return cls(cfg, min(DEFAULT_HEAD_STEPS, int(cfg.max_steps * DEFAULT_HEAD_SHARE)))

    @classmethod
    def recorded(cls, cfg: TrainConfig, pretraining: dict[str, Any]) -> Schedule:
        """A resumed continued run's schedule, as its checkpoint's pre-training record kept it."""
        return cls(cfg, pretraining.get(RECORD_KEY, 0)).checked("the run's head phase")

    def checked(self, named: str) -> Schedule:
        """The schedule, unless its head phase leaves the encoder no steps of the run's."""
        steps, cfg = self.head_steps, self.cfg
        if steps and not cfg.time_budget and steps >= cfg.max_steps:
            raise UserError(
                f"{named} {steps} is not shorter than --max-steps {cfg.max_steps}: the encoder would never learn; "
                "give more steps or a shorter warm-up"
            )
        return self

    @property
    def head_seconds(self) -> float:
        """Under a time budget, the longest the head phase may take: its share of the budget."""
        if not self.cfg.time_budget:
            return math.inf
        share = DEFAULT_HEAD_SHARE if self.cfg.head_warmup_steps is None else GIVEN_HEAD_SHARE
        return self.cfg.time_budget * share

    def cut_short(self, step: int, elapsed: float) -> Schedule | None:
        """Before the update after `step`, at `elapsed` seconds: the schedule with its head phase ended now, where
        its share of a time budget has passed before its steps did; None where the phase goes on or is over."""
        if 0 < step < self.head_steps and elapsed >= self.head_seconds:
            return dataclasses.replace(self, head_steps=step)
        return None

    def cut_notice(self, planned: int) -> str:
        """What a run says when its head phase ended on time (`cut_short`) rather than after its `planned` steps."""
        return (
            f"the new head's warm-up ends at step {self.head_steps}, not {planned}: {self.head_seconds:.0f} s, its "
            "share of --time-budget, have passed; the encoder learns from here"
        )

    def record(self) -> dict[str, Any]:
        """What config.json's pre-training record keeps of the schedule (the card says it, a resume reads it)."""
        return {RECORD_KEY: self.head_steps} if self.head_steps else {}

    @property
    def encoder_starts(self) -> int:
        """The step at which the encoder starts to learn: where a continued run's starting score is taken."""
        return self.head_steps

    def announce(self, start: str) -> str | None:
        """What the run says of its head phase, `start` the starting model as messages name it."""
        if not self.head_steps:
            return None
        length = f"the first {self.head_steps} steps"
        if self.cfg.time_budget:
            length += f" or {self.head_seconds:.0f} s of --time-budget, whichever ends first"
        return (
            f"{start} has no masked-LM head: a new one, its decoder tied to the token embeddings, trains alone for "
            f"{length} (--head-warmup-steps), the encoder frozen, so that a random head's gradients never reach the "
            "encoder"
        )

    def progress(self, step: int, elapsed: float, encoder_started_at: float) -> float:
        """How far the schedules (lr, mask rate) are, in [0, 1], for the next step. The head phase is not counted:
        the encoder's schedule begins when the encoder starts to learn (`encoder_started_at` seconds, under a time
        budget)."""
        cfg, head = self.cfg, self.head_steps
        if cfg.time_budget:
            start = encoder_started_at if head else 0.0
            return min(1.0, max(elapsed - start, 0.0) / max(cfg.time_budget - start, 1e-9))
        steps = min(1.0, max(step - head + 1, 0) / max(cfg.max_steps - head, 1))
        return max(steps, min(1.0, elapsed / cfg.time_limit)) if cfg.time_limit else steps

    def lr(self, step: int, progress: float) -> float:
        """The learning rate of the next step: the new head's own, constant, in its phase; then the schedule's."""
        cfg = self.cfg
        if step < self.head_steps:
            return cfg.head_warmup_lr
        steps = cfg.max_steps - self.head_steps  # the encoder's, for a warm-up given in steps
        return cfg.lr * lr_factor(progress, warmup_fraction(cfg.warmup, max(steps, 1)), cfg.schedule)

    def spent(self, step: int, elapsed: float) -> bool:
        """Whether the run has had its steps, or its time (a budget, or a ceiling on its steps)."""
        cfg = self.cfg
        if cfg.time_budget:
            return elapsed >= cfg.time_budget
        return step >= cfg.max_steps or bool(cfg.time_limit and elapsed >= cfg.time_limit)

    def ceiling_notice(self, step: int) -> str | None:
        """What a run of steps says when its time ceiling (--time-limit) ended it at `step`, short of its steps."""
        cfg = self.cfg
        if not cfg.time_limit or step >= cfg.max_steps:
            return None
        return (
            f"--time-limit {cfg.time_limit:.0f}s reached at step {step:,} of {cfg.max_steps:,}: this machine was "
            "slower (or busier) than the run was planned for, and the model learned less; its schedules ran to their "
            "end"
        )

    def drop_frozen_gradients(self, model: nn.Module, step: int) -> None:
        """Before the update of `step`: in the head phase every gradient but the head's own is dropped, so the
        encoder (the tied decoder, the token table, included) stays as it was while the head learns to read it.
        Dropping gradients, rather than not computing them, works under DDP and torch.compile alike."""
        if step >= self.head_steps:
            return
        for name, parameter in model.named_parameters():
            if not name.startswith(HEAD + "."):
                parameter.grad = None
