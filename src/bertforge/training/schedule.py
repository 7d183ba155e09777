"""A run's schedule, one object the trainer is given: how far the run is, its learning rate, when it ends, and the
phase in which a new masked-LM head learns alone.

A released encoder without a masked-LM head (BertModel, a sentence-embedding model) gets a new one. Its random
weights would send random gradients into the encoder, so for its first `head_steps` steps the head learns alone,
at its own constant rate (it learns from nothing, as a model trained from scratch does), the encoder's gradients
dropped; the encoder's schedule, its warm-up first, starts when it begins to learn. A run without such a head has
no such phase (head_steps 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

from ..engine.optim import lr_factor, warmup_fraction
from ..errors import UserError
from .config import TrainConfig

HEAD = "mlm_head"  # the new head's module: its parameters alone learn in the first phase
RECORD_KEY = "head_warmup"  # what config.json's pre-training record keeps of the phase, for a resumed run


@dataclass(frozen=True)
class Schedule:
    cfg: TrainConfig
    head_steps: int = 0  # steps a new masked-LM head learns alone, the encoder frozen

    @classmethod
    def for_model(cls, cfg: TrainConfig, model: nn.Module) -> Schedule:
        """A new run's schedule: a head phase where the model's masked-LM head starts untrained."""
        steps = cfg.head_warmup_steps if HEAD in getattr(model, "untrained_heads", ()) else 0
        if steps and not cfg.time_budget and steps >= cfg.max_steps:
            raise UserError(
                f"--head-warmup-steps {steps} is not shorter than --max-steps {cfg.max_steps}: the encoder would "
                "never learn; give more steps or a shorter warm-up"
            )
        return cls(cfg, steps)

    @classmethod
    def recorded(cls, cfg: TrainConfig, pretraining: dict[str, Any]) -> Schedule:
        """A resumed continued run's schedule, as its checkpoint's pre-training record kept it."""
        return cls(cfg, pretraining.get(RECORD_KEY, 0))

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
        return (
            f"{start} has no masked-LM head: a new one, its decoder tied to the token embeddings, trains alone for "
            f"the first {self.head_steps} steps (--head-warmup-steps), the encoder frozen, so that a random head's "
            "gradients never reach the encoder"
        )

    def progress(self, step: int, elapsed: float, encoder_started_at: float) -> float:
        """How far the schedules (lr, mask rate) are, in [0, 1], for the next step. The head phase is not counted:
        the encoder's schedule begins when the encoder starts to learn (`encoder_started_at` seconds, under a time
        budget)."""
        cfg, head = self.cfg, self.head_steps
        if cfg.time_budget:
            start = encoder_started_at if head else 0.0
            return min(1.0, max(elapsed - start, 0.0) / max(cfg.time_budget - start, 1e-9))
        return min(1.0, max(step - head + 1, 0) / max(cfg.max_steps - head, 1))

    def lr(self, step: int, progress: float) -> float:
        """The learning rate of the next step: the new head's own, constant, in its phase; then the schedule's."""
        cfg = self.cfg
        if step < self.head_steps:
            return cfg.head_warmup_lr
        steps = cfg.max_steps - self.head_steps  # the encoder's, for a warm-up given in steps
        return cfg.lr * lr_factor(progress, warmup_fraction(cfg.warmup, max(steps, 1)), cfg.schedule)

    def spent(self, step: int, elapsed: float) -> bool:
        """Whether the run has had its steps, or its time."""
        return elapsed >= self.cfg.time_budget if self.cfg.time_budget else step >= self.cfg.max_steps

    def drop_frozen_gradients(self, model: nn.Module, step: int) -> None:
        """Before the update of `step`: in the head phase every gradient but the head's own is dropped, so the
        encoder (the tied decoder, the token table, included) stays as it was while the head learns to read it.
        Dropping gradients, rather than not computing them, works under DDP and torch.compile alike."""
        if step >= self.head_steps:
            return
        for name, parameter in model.named_parameters():
            if not name.startswith(HEAD + "."):
                parameter.grad = None
