"""The model's shape and variant: ModelConfig, and the named sizes of Turc et al. 2019 (tiny ... large).

A field that changes what the weights mean is an architecture field: a resumed run may not change it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..config import Configurable, check_choices, documented, require
from ..errors import UserError
from ..families import FAMILIES, family_of
from .variants import (
    ATTENTION_BIASES,
    FEED_FORWARDS,
    NORM_STYLES,
    POSITION_SCHEMES,
    AttentionBias,
    FeedForwardKind,
    NormStyle,
    PositionScheme,
    choices_help,
)

# name: (num_layers, hidden_size, num_heads), as in Turc et al. 2019 ("Well-Read Students").
PRESETS: dict[str, tuple[int, int, int]] = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}


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
    "family",
    "embedding_size",
    "pooler_activation",
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
    "pad_vocab_multiple": 1 << 12,  # 2^40 asked for a 562 TB table
    "embedding_size": 1 << 16,
}


MIN_POSITIONS = 3  # the shortest input a model reads: [CLS], one token, [SEP]


@dataclass
class ModelConfig(Configurable):
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
    hidden_act: str = documented(
        "gelu", "feed-forward activation (silu with a glu feed-forward: SwiGLU)", ("gelu", "relu", "silu")
    )
    norm_style: str = documented("post", choices_help(NORM_STYLES), NORM_STYLES)
    position_embedding: str = documented(
        "learned",
        choices_help(POSITION_SCHEMES),
        POSITION_SCHEMES,  # the registry: a new scheme is a choice at once
    )
    attention_bias: str = documented("none", choices_help(ATTENTION_BIASES), ATTENTION_BIASES)
    feed_forward: str = documented("mlp", choices_help(FEED_FORWARDS), FEED_FORWARDS)
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
    family: str = documented(
        "",
        f"the transformers model family the model is saved as ({', '.join(FAMILIES)}): a model read from a "
        "directory keeps its own; empty: chosen by its shape (bert; roberta-prelayernorm for pre-LN; modernbert for "
        "ModernBERT's; the family the relative attention bias comes from)",
    )
    embedding_size: int = documented(
        0,
        "width E of the token, segment and position tables when narrower than hidden_size, projected up to it "
        "after the embeddings' LayerNorm, and the masked-LM head's width (ELECTRA's small models); 0: hidden_size",
    )
    pooler_activation: str = documented(
        "tanh",
        "the non-linearity of the dense layer on [CLS] that sequence heads read: tanh (BERT's pooler, RoBERTa's "
        "classification head), relu (DistilBERT's pre-classifier) or gelu (ELECTRA's classification head)",
        ("tanh", "relu", "gelu"),
    )

    def __post_init__(self) -> None:
        sizes = ("hidden_size", "num_heads", "intermediate_size", "max_position_embeddings")
        require(  # first, as the checks below divide by them: a config.json is input
            [(getattr(self, name) > 0, f"{name} must be positive, not {getattr(self, name)}") for name in sizes]
            + [
                (
                    math.isfinite(value) and value > 0,
                    f"{name} must be a positive number, not {value}",
                )
                for name, value in (
                    ("layer_norm_eps", self.layer_norm_eps),
                    ("rope_theta", self.rope_theta),
                    ("local_rope_theta", self.local_rope_theta),
                )
            ]
            + [
                (
                    self.max_position_embeddings >= MIN_POSITIONS,
                    f"max_position_embeddings {self.max_position_embeddings} reads no text: [CLS] a token [SEP] "
                    f"needs {MIN_POSITIONS}",
                ),
                (
                    math.isfinite(self.initializer_range) and self.initializer_range >= 0,
                    f"initializer_range must be a number >= 0, not {self.initializer_range}",
                ),
                (
                    0 <= self.pad_token_id < self.vocab_size,
                    f"pad_token_id {self.pad_token_id} is not an id of the {self.vocab_size}-token vocabulary",
                ),
            ],
            "model",
        )
        require(
            [
                (
                    self.hidden_size % self.num_heads == 0,
                    f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}",
                ),
                *check_choices(self),
                (
                    self.position_embedding not in POSITION_SCHEMES  # said by the choices above
                    or not self.position_scheme.rotary
                    or self.hidden_size // self.num_heads % 2 == 0,
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
                *(  # a variant that is a family's computation comes with that family's shape
                    (
                        getattr(self, name) == value,
                        f"{field} {getattr(self, field)} comes with {name} {value}, not {getattr(self, name)}",
                    )
                    for field, registry in (
                        ("attention_bias", ATTENTION_BIASES),
                        ("position_embedding", POSITION_SCHEMES),
                    )
                    if getattr(self, field) in registry
                    for name, value in registry[getattr(self, field)].requires.items()
                ),
                (
                    family_of(self).head_activation in (None, self.hidden_act),
                    f"hidden_act {self.hidden_act}: the {family_of(self).title} family's masked-LM head applies "
                    f"{family_of(self).head_activation} whatever hidden_act says, so transformers would compute "
                    "another model; use gelu",
                ),
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
                (
                    0 <= self.embedding_size <= self.hidden_size,
                    f"embedding_size {self.embedding_size} must be between 0 (hidden_size) and hidden_size",
                ),
            ],
            "model",
        )

    def is_global_layer(self, layer: int) -> bool:
        """Whether layer `layer` (from 0) sees the whole sequence, not a window of it."""
        return not self.local_attention or layer % self.global_attention_every == 0

    def parameter_estimate(self) -> int:
        """About how many parameters a model of this config has (biases and norms left out): known before the
        model is built, so that a config.json asking for far more than its weights hold is refused before
        anything is allocated."""
        E, H, inner = self.embedding_width, self.hidden_size, self.intermediate_size
        tables = (self.padded_vocab_size + self.max_position_embeddings + self.type_vocab_size) * E
        tables += E * H if E != H else 0
        layer = 4 * H * H + self.feed_forward_kind.matrices * H * inner
        head = H * E + (0 if self.tie_word_embeddings else self.padded_vocab_size * E)
        return tables + self.num_layers * layer + head

    @property
    def position_scheme(self) -> PositionScheme:
        """The object that says how positions reach the encoder (model/variants.py)."""
        return POSITION_SCHEMES[self.position_embedding]

    @property
    def feed_forward_kind(self) -> FeedForwardKind:
        """The object that says what the feed-forward computes (model/variants.py)."""
        return FEED_FORWARDS[self.feed_forward]

    @property
    def norm(self) -> NormStyle:
        """The object that says where the LayerNorms sit (model/variants.py)."""
        return NORM_STYLES[self.norm_style]

    @property
    def bias_variant(self) -> AttentionBias:
        """The object that says what attention adds to its scores (model/variants.py)."""
        return ATTENTION_BIASES[self.attention_bias]

    @property
    def embedding_width(self) -> int:
        """E: the embedding tables' width (hidden_size unless embedding_size narrows them)."""
        return self.embedding_size or self.hidden_size

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


def preset_size(name: str, gated: bool = False) -> dict[str, int]:
    """The fields a named size sets: layers, width, heads, and intermediate = 4 × width, or for a gated
    feed-forward the width at which it costs the same (`glu_width`)."""
    if name not in PRESETS:
        raise UserError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    layers, hidden, heads = PRESETS[name]
    inner = glu_width(4 * hidden) if gated else 4 * hidden
    return dict(num_layers=layers, hidden_size=hidden, num_heads=heads, intermediate_size=inner)


def glu_width(plain: int) -> int:
    """The inner width at which a gated feed-forward costs what a plain one of width `plain` does: its up
    projection makes two halves, so 2/3 of the width (a multiple of 8: mini's 1024 becomes 680)."""
    return 2 * plain // 3 // 8 * 8
