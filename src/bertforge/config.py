"""Typed, documented configuration for the model and for training.

Each dataclass owns its fields; the CLI exposes every field as a flag
(`--num-layers 2`, `--hidden-dropout 0`), so a field's docstring is its help.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any

from .errors import UserError

# name: (num_layers, hidden_size, num_heads), as in Turc et al. 2019 ("Well-Read Students").
PRESETS: dict[str, tuple[int, int, int]] = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}


def _doc(text: str, default: Any) -> Any:
    """A dataclass field carrying its help text in metadata."""
    return field(default=default, metadata={"help": text})


def _require(checks: list[tuple[bool, str]], what: str) -> None:
    for ok, message in checks:
        if not ok:
            raise UserError(f"invalid {what} config: {message}")


class _DictMixin:
    """Plain-dict round trip for configs saved in JSON; unknown keys (from newer versions) are ignored."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]):
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


@dataclass
class ModelConfig(_DictMixin):
    """Shape and variant of a BERT encoder with its pre-training heads."""

    vocab_size: int = _doc("number of token ids the tokenizer can produce", 30522)
    hidden_size: int = _doc("width H of every hidden state", 256)
    num_layers: int = _doc("number of Transformer encoder layers L", 4)
    num_heads: int = _doc("attention heads A per layer; must divide hidden_size", 4)
    intermediate_size: int = _doc("width of the feed-forward inner layer (4H in BERT)", 1024)
    max_position_embeddings: int = _doc("longest sequence the position table covers", 512)
    type_vocab_size: int = _doc("number of segments (A and B)", 2)
    hidden_dropout: float = _doc("dropout on embeddings and sub-layer outputs", 0.1)
    attention_dropout: float = _doc("dropout on attention probabilities", 0.1)
    layer_norm_eps: float = _doc("LayerNorm epsilon", 1e-12)
    hidden_act: str = _doc("feed-forward activation: gelu | relu", "gelu")
    norm_style: str = _doc("post (BERT: LayerNorm after each residual) | pre (before, plus a final LayerNorm)", "post")
    position_embedding: str = _doc("learned (BERT) | sinusoidal (fixed, as in the Transformer paper)", "learned")
    tie_word_embeddings: bool = _doc("share the MLM decoder weight with the token embedding", True)
    pad_token_id: int = _doc("id of [PAD]; its embedding row stays zero at init", 0)
    initializer_range: float = _doc("std of the normal init of weights", 0.02)
    pad_vocab_multiple: int = _doc("round the embedding table up to a multiple of this for speed (1 = off)", 64)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        _require([
            (self.hidden_size % self.num_heads == 0, f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}"),
            (self.hidden_act in ("gelu", "relu"), f"hidden_act must be gelu or relu, not {self.hidden_act!r}"),
            (self.norm_style in ("post", "pre"), f"norm_style must be post or pre, not {self.norm_style!r}"),
            (self.position_embedding in ("learned", "sinusoidal"), f"position_embedding must be learned or sinusoidal, not {self.position_embedding!r}"),
            (self.vocab_size > 0 and self.num_layers > 0 and self.pad_vocab_multiple > 0, "vocab_size, num_layers and pad_vocab_multiple must be positive"),
            (0.0 <= self.hidden_dropout < 1.0 and 0.0 <= self.attention_dropout < 1.0, "dropout must be in [0, 1)"),
        ], "model")

    @property
    def padded_vocab_size(self) -> int:
        m = self.pad_vocab_multiple
        return (self.vocab_size + m - 1) // m * m

    @property
    def is_hf_compatible(self) -> bool:
        """True when `transformers.BertModel` can express this architecture."""
        return self.norm_style == "post" and self.position_embedding == "learned"

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "ModelConfig":
        """A named size (tiny … large) with intermediate = 4 × hidden, then `overrides`."""
        if name not in PRESETS:
            raise UserError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
        layers, hidden, heads = PRESETS[name]
        values = dict(num_layers=layers, hidden_size=hidden, num_heads=heads, intermediate_size=4 * hidden)
        values.update(overrides)
        return cls(**values)



@dataclass
class TrainConfig(_DictMixin):
    """How to pre-train: data, optimisation, schedule, logging and checkpoints."""

    seq_len: int = _doc("target length of an instance, [CLS] A [SEP] B [SEP] included", 128)
    batch_size: int = _doc("instances per optimizer micro-step (per process)", 32)
    grad_accum: int = _doc("micro-steps accumulated into one optimizer step", 1)
    max_steps: int = _doc("optimizer steps to run (ignored when time_budget is set)", 1000)
    time_budget: float = _doc("seconds of training; the lr schedule follows elapsed time (0 = off)", 0.0)
    lr: float = _doc("peak learning rate", 5e-4)
    warmup: float = _doc("warm-up as a fraction of the run (< 1) or a number of steps (>= 1)", 0.06)
    schedule: str = _doc("after warm-up: linear | cosine | constant", "linear")
    weight_decay: float = _doc("AdamW decoupled weight decay (never on LayerNorm or biases)", 0.01)
    adam_beta1: float = _doc("AdamW beta1", 0.9)
    adam_beta2: float = _doc("AdamW beta2", 0.999)
    adam_eps: float = _doc("AdamW epsilon", 1e-6)
    grad_clip: float = _doc("clip the global gradient norm to this (0 = off)", 1.0)
    mask_prob: float = _doc("fraction of non-special tokens chosen for MLM", 0.15)
    mask_token_prob: float = _doc("of chosen tokens, fraction replaced by [MASK]", 0.8)
    random_token_prob: float = _doc("of chosen tokens, fraction replaced by a random token", 0.1)
    max_predictions: int = _doc("cap on MLM predictions per sequence", 20)
    whole_word_mask: bool = _doc("mask all ## pieces of a word together", False)
    short_seq_prob: float = _doc("probability of a shorter random target length (BERT: 0.1)", 0.1)
    nsp: bool = _doc("train next sentence prediction too (--no-nsp for MLM only)", True)
    seed: int = _doc("seed for init, data order and masking", 0)
    log_every: int = _doc("optimizer steps between metrics.jsonl lines", 10)
    eval_every: int = _doc("optimizer steps between held-out evaluations (0 = only at the end)", 200)
    eval_batches: int = _doc("held-out batches per evaluation", 20)
    save_every: int = _doc("optimizer steps between checkpoints (0 = only at the end)", 500)
    keep_last: int = _doc("checkpoints kept on disk", 3)
    max_bad_steps: int = _doc("consecutive non-finite losses that stop the run", 5)
    device: str = _doc("auto | cpu | cuda", "auto")
    precision: str = _doc("auto | fp32 | bf16 | fp16", "auto")
    compile: bool = _doc("torch.compile the model", False)
    num_workers: int = _doc("data loader worker processes", 1)

    def __post_init__(self) -> None:
        _require([
            (self.schedule in ("linear", "cosine", "constant"), f"schedule must be linear, cosine or constant, not {self.schedule!r}"),
            (self.precision in ("auto", "fp32", "bf16", "fp16"), f"precision must be auto, fp32, bf16 or fp16, not {self.precision!r}"),
            (self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:"), f"device must be auto, cpu or cuda, not {self.device!r}"),
            (0.0 < self.mask_prob < 1.0, f"mask_prob must be in (0, 1), not {self.mask_prob}"),
            (self.mask_token_prob + self.random_token_prob <= 1.0, "mask_token_prob + random_token_prob must be <= 1"),
            (self.seq_len >= 8, f"seq_len must be at least 8, not {self.seq_len}"),
            (self.batch_size > 0 and self.grad_accum > 0, "batch_size and grad_accum must be positive"),
            (self.max_predictions > 0, "max_predictions must be positive"),
        ], "train")
