"""Typed, documented configuration: the model, pre-training and fine-tuning.

Each dataclass owns its fields; the CLI turns every field into a flag
(`num_layers` -> `--num-layers`) whose help is the field's text, and `sweep`
parses its grid values with the same `parse_field` (one typed parser).
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Callable
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


def documented(
    default: Any, help: str, choices: tuple[str, ...] | None = None, parse: Callable[[str], Any] | None = None
) -> Any:
    """A dataclass field that carries its help text (and, for strings, its allowed values) in metadata."""
    return field(default=default, metadata={"help": help, "choices": choices, "parse": parse})


_DURATION_UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hr": 3600, "hour": 3600}
_DURATION_PART = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*", re.IGNORECASE)


def parse_duration(text: str) -> float:
    """Seconds from "90", "90s", "30m", "5min", "1.5h", "2 hours" or "1h30m" (a bare number is seconds)."""
    position, seconds = 0, 0.0
    while position < len(text):
        part = _DURATION_PART.match(text, position)
        unit = part and (part[2].lower() or "s")
        if unit and unit not in _DURATION_UNITS and unit.endswith("s"):  # plurals: 2 hours, 5 mins
            unit = unit[:-1]
        if not part or part.end() == position or unit not in _DURATION_UNITS:
            raise ValueError(f"not a duration: {text!r} (use 90s, 30m, 5min, 1.5h or 1h30m)")
        seconds += float(part[1]) * _DURATION_UNITS[unit]
        position = part.end()
    if not text.strip():
        raise ValueError("not a duration: an empty text (use 90s, 30m, 5min, 1.5h or 1h30m)")
    return seconds


_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """Bytes from "1073741824", "512M", "1G", "1.5GB" or "64k" (powers of 1,024)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([kmgt]?)(?:i?b)?\s*", text, re.IGNORECASE)
    if not match:
        raise ValueError(f"not a size: {text!r} (use 512M, 1G or a number of bytes)")
    return int(float(match[1]) * _SIZE_UNITS[match[2].lower()])


def parse_bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes", "on"):
        return True
    if text.lower() in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"{text!r} is not true or false")


def field_parser(cls, name: str) -> Callable[[str], Any]:
    """text -> a value of `cls.name`'s type: the one typed parser behind CLI flags and sweep grids."""
    f = next(f for f in fields(cls) if f.name == name)
    if f.metadata.get("parse"):
        return f.metadata["parse"]
    kind = typing.get_type_hints(cls)[name]
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        kind = next(a for a in typing.get_args(kind) if a is not type(None))  # Optional[X] -> X
    return parse_bool if kind is bool else kind


def parse_field(cls, name: str, text: str) -> Any:
    """Parse and check one value for field `name` of `cls`; a bad value is a UserError naming the field."""
    f = next(f for f in fields(cls) if f.name == name)
    try:
        value = field_parser(cls, name)(text)
    except ValueError as e:
        raise UserError(f"{name}: {e}") from None
    choices = f.metadata.get("choices")
    if choices and value not in choices:
        raise UserError(f"{name}: {value!r} is not one of {', '.join(choices)}")
    return value


def _require(checks: list[tuple[bool, str]], what: str) -> None:
    for ok, message in checks:
        if not ok:
            raise UserError(f"invalid {what} config: {message}")


def _check_choices(config) -> list[tuple[bool, str]]:
    """Every string field with declared choices holds one of them."""
    return [
        (
            getattr(config, f.name) in f.metadata["choices"],
            f"{f.name} must be one of {', '.join(f.metadata['choices'])}, not {getattr(config, f.name)!r}",
        )
        for f in fields(config)
        if f.metadata.get("choices")
    ]


class _DictMixin:
    """Plain-dict round trip for configs saved in JSON; unknown keys (from other versions) are ignored."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]):
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


# Fields that change what a trained model computes; anything else (dropout) may change on --resume.
ARCHITECTURE_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_layers",
    "num_heads",
    "intermediate_size",
    "max_position_embeddings",
    "type_vocab_size",
    "layer_norm_eps",
    "hidden_act",
    "norm_style",
    "position_embedding",
    "attention_bias",
    "feed_forward",
    "tie_word_embeddings",
    "pad_token_id",
    "pad_vocab_multiple",
    "norm_bias",
    "linear_bias",
    "first_attention_norm",
    "rope_theta",
    "local_attention",
    "global_attention_every",
    "local_rope_theta",
    "task_head",
    "classifier_pooling",
)


# The largest of each size a model directory may ask for: a config.json is input, and one asking for two billion
# token ids would have torch allocate a terabyte before anything else is checked. Far past every BERT built.
SIZE_LIMITS = {
    "vocab_size": 1 << 24,
    "hidden_size": 1 << 16,
    "num_layers": 1024,
    "num_heads": 1024,
    "intermediate_size": 1 << 18,
    "max_position_embeddings": 1 << 20,
    "type_vocab_size": 1024,
}


@dataclass
class ModelConfig(_DictMixin):
    """Shape and variant of a BERT encoder with its pre-training heads."""

    vocab_size: int = documented(30522, "number of token ids the tokenizer can produce")
    hidden_size: int = documented(256, "width H of every hidden state")
    num_layers: int = documented(4, "number of Transformer encoder layers L")
    num_heads: int = documented(4, "attention heads A per layer; must divide hidden_size")
    intermediate_size: int = documented(1024, "width of the feed-forward inner layer (4H in BERT)")
    max_position_embeddings: int = documented(
        512,
        "longest sequence the position table covers; pretrain makes it --seq-len unless given, and a run that "
        "continues (--init-from) on longer sequences grows it, as BERT's second phase at 512 tokens",
    )
    type_vocab_size: int = documented(
        2, "number of segments (A and B); 0: no segment embeddings, for MLM alone (as ModernBERT has none)"
    )
    hidden_dropout: float = documented(0.1, "dropout on embeddings and sub-layer outputs")
    attention_dropout: float = documented(0.1, "dropout on attention probabilities")
    layer_norm_eps: float = documented(1e-12, "LayerNorm epsilon")
    hidden_act: str = documented("gelu", "feed-forward activation", ("gelu", "relu"))
    norm_style: str = documented(
        "post",
        "post: LayerNorm after each residual (BERT); pre: before each sub-layer, plus a "
        "final LayerNorm (more stable at high learning rates)",
        ("post", "pre"),
    )
    position_embedding: str = documented(
        "learned",
        "learned (BERT); sinusoidal (fixed, as in the Transformer paper, at the token embeddings' initial size); or "
        "rotary (RoPE, Su et al. 2021, as in ModernBERT: queries and keys turned by their position's angle, so "
        "attention sees relative positions; no table, and the directory carries its own code for transformers)",
        ("learned", "sinusoidal", "rotary"),
    )
    attention_bias: str = documented(
        "none",
        "none, or alibi: a fixed penalty -m·|i-j| on attention scores that makes every head start out looking near "
        "(ALiBi, Press et al. 2022, made symmetric for an encoder; slopes 1/2, 1/4, ... per head, so a model of few "
        "heads sees little past a dozen tokens and its [CLS] cannot read a sentence pair: an NSP head stays at "
        "chance). The positions stay too, since the penalty cannot tell left from right. No transformers class has "
        "it: the model directory carries its own, loaded with trust_remote_code=True",
        ("none", "alibi"),
    )
    feed_forward: str = documented(
        "mlp",
        "mlp: down(act(up(x))) (BERT); glu: down(act(gate(x)) * up(x)), a gated linear unit (GEGLU with gelu; "
        "Shazeer 2020, used by Cramming and ModernBERT), with 1.5x the weights at one intermediate_size: give "
        "2/3 of it for the same compute. No transformers class has it: the directory carries its own code",
        ("mlp", "glu"),
    )
    tie_word_embeddings: bool = documented(True, "share the MLM decoder weight with the token embedding")
    pad_token_id: int = documented(0, "id of [PAD]; its embedding row stays zero at init")
    initializer_range: float = documented(0.02, "std of the normal init of weights")
    pad_vocab_multiple: int = documented(64, "round the embedding table up to a multiple of this for speed (1 = off)")
    norm_bias: bool = documented(True, "every LayerNorm has a bias (BERT); ModernBERT's have none")
    linear_bias: bool = documented(
        True, "the attention, feed-forward and head projections have biases (BERT); ModernBERT's have none"
    )
    first_attention_norm: bool = documented(
        True,
        "pre-LN: the first layer normalises its input before attention (false: as ModernBERT, which relies on the "
        "embeddings' LayerNorm just before it)",
    )
    rope_theta: float = documented(
        10000.0, "rotary: the base of the angles, θ_i = base^(-2i/hs) (ModernBERT's global layers: 160,000)"
    )
    local_attention: int = documented(
        0,
        "sliding-window attention: in a local layer each token sees the tokens within local_attention/2 on either "
        "side (ModernBERT: 128); 0 = every layer sees the whole sequence",
    )
    global_attention_every: int = documented(
        1, "with local_attention: layers 0, N, 2N, ... see the whole sequence, the others a window (ModernBERT: 3)"
    )
    local_rope_theta: float = documented(10000.0, "rotary: the base of the local layers' angles (ModernBERT: 10,000)")
    task_head: str = documented(
        "pooler",
        "what a fine-tuning head reads: pooler (BERT: dense + tanh on [CLS] for a sequence, the hidden states as "
        "they are for tagging and QA) or transform (ModernBERT: dense, activation and LayerNorm, on [CLS] or on "
        "every token, before the task's classifier)",
        ("pooler", "transform"),
    )
    classifier_pooling: str = documented(
        "cls",
        "what a sequence classifier summarises a text by: [CLS], or (mean) the mean of its tokens",
        ("cls", "mean"),
    )

    def __post_init__(self) -> None:
        _require(
            [
                (
                    self.hidden_size % self.num_heads == 0,
                    f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}",
                ),
                *_check_choices(self),
                (
                    self.position_embedding != "rotary" or self.hidden_size // self.num_heads % 2 == 0,
                    f"rotary positions turn pairs of dims: the head size {self.hidden_size // self.num_heads} "
                    "(hidden_size / num_heads) must be even",
                ),
                (
                    self.vocab_size > 0 and self.num_layers > 0 and self.pad_vocab_multiple > 0,
                    "vocab_size, num_layers and pad_vocab_multiple must be positive",
                ),
                *(
                    (getattr(self, name) <= most, f"{name} {getattr(self, name):,} is past any BERT's ({most:,})")
                    for name, most in SIZE_LIMITS.items()
                ),
                (0.0 <= self.hidden_dropout < 1.0 and 0.0 <= self.attention_dropout < 1.0, "dropout must be in [0, 1)"),
                (self.type_vocab_size >= 0, f"type_vocab_size must be >= 0, not {self.type_vocab_size}"),
                (
                    self.first_attention_norm or self.norm_style == "pre",
                    "first_attention_norm false leaves out a pre-LN norm: it needs norm_style pre",
                ),
                (
                    self.local_attention >= 0 and self.global_attention_every >= 1,
                    "local_attention must be >= 0 and global_attention_every >= 1",
                ),
                (
                    self.classifier_pooling == "cls" or self.task_head == "transform",
                    "classifier_pooling mean is ModernBERT's, with task_head transform",
                ),
            ],
            "model",
        )

    def is_global_layer(self, layer: int) -> bool:
        """Whether layer `layer` (from 0) sees the whole sequence, not a window of it."""
        return not self.local_attention or layer % self.global_attention_every == 0

    @property
    def padded_vocab_size(self) -> int:
        m = self.pad_vocab_multiple
        return (self.vocab_size + m - 1) // m * m

    def architecture(self) -> dict[str, Any]:
        """The fields that define what the weights mean (not dropout or init)."""
        return {name: getattr(self, name) for name in ARCHITECTURE_FIELDS}

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ModelConfig:
        """A named size (tiny … large), then `overrides`."""
        return cls(**{**preset_size(name), **overrides})


def preset_size(name: str) -> dict[str, int]:
    """The fields a named size sets: layers, width, heads, and intermediate = 4 × width."""
    if name not in PRESETS:
        raise UserError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    layers, hidden, heads = PRESETS[name]
    return dict(num_layers=layers, hidden_size=hidden, num_heads=heads, intermediate_size=4 * hidden)


@dataclass
class TrainConfig(_DictMixin):
    """How to pre-train: data, objectives, optimisation, schedule, logging and checkpoints."""

    init_from: str = documented(
        "",
        "a model or run directory to continue pre-training (e.g. on your domain's text), ours or a transformers BERT: "
        "its architecture and weights are the start, and the data must be prepared with its tokenizer",
    )
    seq_len: int = documented(128, "target length of an instance, [CLS] A [SEP] B [SEP] included")
    batch_size: int = documented(32, "instances per optimizer micro-step (per process)")
    grad_accum: int = documented(1, "micro-steps accumulated into one optimizer step")
    batch_ramp_steps: int = documented(
        0, "optimizer steps over which the batch grows linearly from batch_size_start to batch_size (0 = no ramp)"
    )
    batch_size_start: int = documented(8, "instances per micro-step at the first step of a batch ramp")
    max_steps: int = documented(1000, "optimizer steps to run (ignored when time_budget is set)")
    time_budget: float = documented(
        0.0, "training time, e.g. 90s, 30m, 1.5h; the lr schedule follows the clock (0 = off)", parse=parse_duration
    )
    lr: float = documented(5e-4, "peak learning rate")
    warmup: float = documented(0.06, "warm-up as a fraction of the run (< 1) or a number of steps (>= 1)")
    schedule: str = documented("linear", "lr after warm-up", ("linear", "cosine", "constant"))
    weight_decay: float = documented(0.01, "AdamW decoupled weight decay (never on LayerNorm or biases)")
    adam_beta1: float = documented(0.9, "AdamW beta1")
    adam_beta2: float = documented(0.999, "AdamW beta2")
    adam_eps: float = documented(1e-6, "AdamW epsilon")
    grad_clip: float = documented(1.0, "clip the global gradient norm to this (0 = off)")
    pair_objective: str = documented(
        "nsp",
        "sentence-pair task beside MLM: nsp (BERT: is B the next text?), sop (ALBERT: "
        "are A and B in order?) or none (MLM only)",
        ("nsp", "sop", "none"),
    )
    objective: str = documented(
        "mlm",
        "mlm: the model learns to fill in the masked tokens (BERT); electra: a small generator fills them in, and "
        "the model learns for every token whether it was replaced (ELECTRA, Clark et al. 2020). An electra run "
        "saves the generator, which does fill-mask, in model/generator",
        ("mlm", "electra"),
    )
    generator_layers: int = documented(
        1, "electra: layers of the generator, which has the model's width and shares its embeddings"
    )
    rtd_weight: float = documented(50.0, "electra: weight of the replaced-token loss beside the generator's MLM loss")
    generator_temperature: float = documented(
        1.0,
        "electra: replacements are drawn from softmax(generator logits / this); above 1 draws less likely tokens, "
        "which a discriminator early in a short run can learn to spot (1 = the paper)",
    )
    mask_prob: float = documented(0.15, "fraction of non-special tokens chosen for MLM")
    mask_prob_final: float = documented(
        0.0,
        "mask rate at the end of the run, reached linearly from mask_prob, e.g. 0.3 -> 0.15 "
        "(Ankner et al. 2023) (0 = no schedule: mask_prob throughout)",
    )
    mask_token_prob: float = documented(0.8, "of chosen tokens, fraction replaced by [MASK]")
    random_token_prob: float = documented(0.1, "of chosen tokens, fraction replaced by a random token")
    max_predictions: int = documented(
        0, "cap on MLM predictions per sequence (0 = ceil(seq_len x mask_prob), never binding)"
    )
    whole_word_mask: bool = documented(False, "mask all ## pieces of a word together")
    short_seq_prob: float = documented(0.1, "probability of a shorter random target length (BERT: 0.1)")
    seed: int = documented(0, "seed for init, data order and masking")
    log_every: int = documented(10, "optimizer steps between metrics.jsonl lines")
    eval_every: int = documented(200, "optimizer steps between held-out evaluations (0 = only at the end)")
    eval_batches: int = documented(20, "held-out batches per evaluation")
    save_every: int = documented(500, "optimizer steps between checkpoints (0 = only at the end)")
    keep_last: int = documented(3, "checkpoints kept on disk")
    max_bad_steps: int = documented(5, "consecutive non-finite losses that stop the run")
    device: str = documented("auto", "auto | cpu | cuda | cuda:N")
    precision: str = documented(
        "auto", "auto picks bf16 on CUDA and on CPUs measured to be fast at it", ("auto", "fp32", "bf16", "fp16")
    )
    compile: bool = documented(False, "torch.compile the model")
    activation_checkpointing: bool = documented(
        False,
        "keep each encoder layer's input only and compute the layer again in the backward pass: a step's activation "
        "memory for about a third more compute, for long sequences or a large model on a small GPU",
    )
    num_workers: int = documented(1, "data loader worker processes")
    document_mask: bool = documented(
        False,
        "without a pair objective: attention stays inside each document of a packed window, and positions "
        "restart at each (ModernBERT, MosaicBERT, NeoBERT); otherwise documents joined by [SEP] see each other",
    )

    def __post_init__(self) -> None:
        _require(
            [
                *_check_choices(self),
                (
                    self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:"),
                    f"device must be auto, cpu or cuda, not {self.device!r}",
                ),
                (0.0 < self.mask_prob < 1.0, f"mask_prob must be in (0, 1), not {self.mask_prob}"),
                (
                    0.0 <= self.mask_prob_final < 1.0,
                    f"mask_prob_final must be in (0, 1), or 0 for none, not {self.mask_prob_final}",
                ),
                (
                    self.mask_token_prob + self.random_token_prob <= 1.0,
                    "mask_token_prob + random_token_prob must be <= 1",
                ),
                (self.seq_len >= 8, f"seq_len must be at least 8, not {self.seq_len}"),
                (self.batch_size > 0 and self.grad_accum > 0, "batch_size and grad_accum must be positive"),
                (self.batch_ramp_steps >= 0, f"batch_ramp_steps must be >= 0, not {self.batch_ramp_steps}"),
                (
                    self.batch_ramp_steps == 0 or 0 < self.batch_size_start <= self.batch_size,
                    f"a batch ramp starts at 1 to batch_size ({self.batch_size}) instances, "
                    f"not batch_size_start {self.batch_size_start}",
                ),
                (self.max_predictions >= 0, "max_predictions must be positive, or 0 for automatic"),
                (
                    self.objective != "electra" or self.pair_objective == "none",
                    f"electra has no pair objective: add --pair-objective none (not {self.pair_objective})",
                ),
                (
                    not (self.init_from and self.objective == "electra"),
                    "init_from continues a BERT's masked-LM pre-training; an electra run starts new models",
                ),
                (
                    self.generator_layers > 0 and self.rtd_weight > 0 and self.generator_temperature > 0,
                    "generator_layers, rtd_weight and generator_temperature must be positive",
                ),
                (
                    not self.document_mask or self.pair_objective == "none",
                    "document_mask keeps the documents of a packed window apart: it needs pair_objective none "
                    "(pairs are never packed)",
                ),
            ],
            "train",
        )

    def batch_size_at(self, step: int) -> int:
        """Instances per micro-step at optimizer step `step` (0-based): the ramp, then batch_size."""
        if step >= self.batch_ramp_steps:
            return self.batch_size
        return round(self.batch_size_start + (self.batch_size - self.batch_size_start) * step / self.batch_ramp_steps)

    @property
    def peak_mask_prob(self) -> float:
        """The highest mask rate of the run: the collator masks at it, and a schedule thins from there."""
        return max(self.mask_prob, self.mask_prob_final)

    def mask_rate(self, progress: float) -> float:
        """The mask rate at `progress` ∈ [0, 1] of the run."""
        if not self.mask_prob_final:
            return self.mask_prob
        return self.mask_prob + (self.mask_prob_final - self.mask_prob) * progress

    @property
    def predictions_per_sequence(self) -> int:
        """The cap on MLM predictions: max_predictions, or (0) enough never to bind at the peak mask rate."""
        return self.max_predictions or math.ceil(self.seq_len * self.peak_mask_prob)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        if "nsp" in values and "pair_objective" not in values:  # runs saved before pair_objective existed
            values = {**values, "pair_objective": "nsp" if values["nsp"] else "none"}
        return super().from_dict(values)


# What `finetune --task` learns. The first three are sequence classification: one label per text, any number
# of labels per text, or a number; sentence-similarity trains sentence vectors (an encoder without a head).
FINETUNE_TASKS = (
    "classification",
    "multi-label",
    "regression",
    "token-classification",
    "question-answering",
    "multiple-choice",
    "sentence-similarity",
)
# The tasks whose answers hang on a decision threshold that --tune-thresholds fits on dev.
THRESHOLD_TASKS = ("multi-label", "question-answering")


@dataclass
class FinetuneConfig(_DictMixin):
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
    lr: float = documented(5e-5, "peak learning rate (BERT: 2e-5 to 5e-5; small models like 1e-4 or more)")
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
    warmup: float = documented(0.1, "warm-up as a fraction of all steps (< 1) or a number of steps (>= 1)")
    weight_decay: float = documented(0.01, "AdamW decoupled weight decay (never on LayerNorm or biases)")
    grad_clip: float = documented(1.0, "clip the global gradient norm to this (0 = off)")
    dropout: float | None = documented(
        None, "hidden and attention dropout while fine-tuning (default: the model's own)"
    )
    seed: int = documented(0, "seed for the new head's init and the data order")
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

    def __post_init__(self) -> None:
        _require(
            [
                *_check_choices(self),
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

    def sequence_length(self, task: str) -> int:
        """seq_len, or the task's default when it is 0."""
        return self.seq_len or (384 if task == "question-answering" else 128)


@dataclass(frozen=True)
class Recipe:
    """A named set of defaults for pretrain: a model size, then ModelConfig and TrainConfig values.

    Explicit flags override a recipe; --preset overrides its size.
    """

    description: str
    preset: str
    model: dict[str, Any]
    train: dict[str, Any]


RECIPES: dict[str, Recipe] = {
    "bert": Recipe(
        "BERT's own recipe (Devlin et al. 2019): post-LN, NSP, dropout 0.1, AdamW beta2 0.999, lr 1e-4 with 1% warm-up "
        "(BERT warmed up for 10k of 1M steps), clip 1.0. For learning what BERT did; slow to learn on a small budget.",
        "mini",
        {"norm_style": "post", "hidden_dropout": 0.1, "attention_dropout": 0.1},
        {
            "pair_objective": "nsp",
            "lr": 1e-4,
            "warmup": 0.01,
            "adam_beta2": 0.999,
            "grad_clip": 1.0,
            "weight_decay": 0.01,
            "mask_prob": 0.15,
            "schedule": "linear",
        },
    ),
    "budget": Recipe(
        "Learning on a small budget, after Cramming (Geiping & Goldstein 2022) and 24hBERT: pre-LN, MLM only on "
        "full-length windows, no dropout, AdamW beta2 0.98, lr 1e-3 with 2% warm-up decaying to zero, clip 0.5; "
        "and rotary positions (RoPE, as in ModernBERT), which learned more per CPU minute than the ALiBi bias that "
        "first took the model off the bigram plateau, and which let [CLS] read the whole window, as ALiBi's slopes "
        "did not; and 25% of tokens masked, not BERT's 15%: more to predict per window learned more per CPU hour "
        "(Wettig et al. 2023 found higher rates pay too). transformers loads a rotary model only with "
        "trust_remote_code=True (its directory carries the code): add --position-embedding learned for one it loads "
        "without.",
        "mini",
        {
            "norm_style": "pre",
            "hidden_dropout": 0.0,
            "attention_dropout": 0.0,
            "attention_bias": "none",
            "position_embedding": "rotary",
        },
        {
            "pair_objective": "none",
            "lr": 1e-3,
            "warmup": 0.02,
            "adam_beta2": 0.98,
            "grad_clip": 0.5,
            "weight_decay": 0.01,
            "mask_prob": 0.25,
            "schedule": "linear",
        },
    ),
}


DEFAULT_RECIPE = "bert"


def recipe_configs(
    recipe: str, preset: str | None, model_values: dict[str, Any], train_values: dict[str, Any]
) -> tuple[ModelConfig, TrainConfig]:
    """The recipe's defaults, its (or the given) preset's size on top, then the explicitly given values.

    Unless given, the position table is as long as the training sequences: rows past them would keep their
    random start, and a longer text would reach them at inference (the hour's mini, trained at 128 with a table of
    512: held-out MLM accuracy 0.408 on 128-token sequences, 0.300 on 256). A later --init-from run on longer
    sequences grows the table (BERT's second phase, at 512 tokens).
    """
    if recipe not in RECIPES:
        raise UserError(f"unknown recipe {recipe!r}; choose one of {', '.join(RECIPES)}")
    chosen = RECIPES[recipe]
    train = TrainConfig(**{**chosen.train, **train_values})
    trained_length = {"max_position_embeddings": train.seq_len}
    model = ModelConfig.preset(preset or chosen.preset, **{**chosen.model, **trained_length, **model_values})
    return model, train
