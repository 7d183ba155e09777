"""How to fine-tune: FinetuneConfig (the tasks themselves are in registry.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import UNPADDING_MODES, Configurable, check_choices, documented, require


@dataclass
class FinetuneConfig(Configurable):
    """How to fine-tune a pre-trained encoder on a labelled task."""

    epochs: int = documented(3, "passes over the training file")
    max_steps: int = documented(
        0,
        "stop after this many steps, mid-epoch if need be, and score dev there (0 = all epochs); the lr schedule "
        "spans them: a large task (SST-2) within a CPU budget",
    )
    dev_every_epoch: bool = documented(
        True,
        "score dev after every epoch and keep the best epoch's model; off: score and keep only the last, which "
        "saves a SQuAD run a dev pass (10,570 questions) per epoch",
    )
    lr: float = documented(
        5e-5, "peak learning rate (BERT: 2e-5 to 5e-5; small models like 1e-4 or more)", at_least=0.0
    )
    batch_size: int = documented(32, "examples per step")
    seq_len: int = documented(
        0,
        "longest input in tokens (0 = the task's default: 384 for question answering, else 128); longer texts "
        "are truncated, the longer of a pair first, except that tagging and QA read long inputs in windows",
    )
    stride: int = documented(
        128, "question answering: context tokens that consecutive windows share (at most half a window)"
    )
    max_answer_length: int = documented(30, "question answering: longest answer, in tokens")
    warmup: float = documented(
        0.1, "warm-up as a fraction of all steps (< 1) or a number of steps (>= 1)", at_least=0.0
    )
    weight_decay: float = documented(0.01, "AdamW decoupled weight decay (never on LayerNorm or biases)", at_least=0.0)
    grad_clip: float = documented(1.0, "clip the global gradient norm to this (0 = off)", at_least=0.0)
    dropout: float | None = documented(
        None, "hidden and attention dropout while fine-tuning (default: the model's own)"
    )
    seed: int = documented(0, "seed for the new head's init and the data order", at_least=0)
    dev_fraction: float = documented(
        0.1,
        "classification, multi-label, regression without --dev: this share of --train (of each label, for one "
        "label per text) becomes dev, one fixed draw for every seed and arm",
    )
    from_scratch: bool = documented(
        False, "same architecture, random init: the baseline that shows what pre-training buys"
    )
    tune_thresholds: bool = documented(
        False,
        "fit decision thresholds on dev, saved with the model and used by classify and answer, and pick the best "
        "epoch by the tuned score: multi-label, each label's threshold for its best F1 (0.5 leaves rare labels "
        "unpredicted); question answering on SQuAD v2.0, when to answer 'no answer' (BERT's tau)",
    )
    log_every: int = documented(50, "steps between progress lines when the output is a log, not a terminal")
    checkpoint_minutes: float = documented(
        10.0,
        "within an epoch, save where the run is this often, for --resume (every epoch's end is saved too; 0: only "
        "there)",
    )
    device: str = documented("auto", "auto | cpu | cuda | cuda:N")
    precision: str = documented("auto", "as for pretrain", ("auto", "fp32", "bf16", "fp16"))
    activation_checkpointing: bool = documented(False, "as for pretrain: less memory for more compute")
    unpad: str = documented(
        "auto",
        "run padded batches on their real tokens only, the sequences packed into fewer rows (the same numbers): "
        "auto where that saves a quarter of the rows or more",
        UNPADDING_MODES,
    )
    trust_pickle: bool = documented(
        False,
        "read a model directory that has only pytorch_model.bin (older hub repositories): tensors alone are "
        "unpickled, but only for sources you trust",
    )

    def __post_init__(self) -> None:
        require(
            [
                *check_choices(self),
                (self.epochs > 0 and self.batch_size > 0, "epochs and batch_size must be positive"),
                (self.log_every > 0, f"log_every must be positive, not {self.log_every}"),
                (self.checkpoint_minutes >= 0, f"checkpoint_minutes must be >= 0, not {self.checkpoint_minutes}"),
                (self.max_steps >= 0, f"max_steps must be >= 0, not {self.max_steps}"),
                (self.seq_len == 0 or self.seq_len >= 8, f"seq_len must be at least 8 (or 0), not {self.seq_len}"),
                (self.dropout is None or 0.0 <= self.dropout < 1.0, "dropout must be in [0, 1)"),
                (self.stride >= 0, "stride must not be negative"),
                (self.max_answer_length > 0, "max_answer_length must be positive"),
                (0.0 < self.dev_fraction < 1.0, f"dev_fraction must be in (0, 1), not {self.dev_fraction}"),
            ],
            "finetune",
        )
