"""The encoder's variants: where a token's position enters, what attention adds to its scores, the feed-forward
and the place of the LayerNorms. Each is a record in its registry that everything else asks: the config (its
name, its help and what it requires of the shape), the model (the block it is built with, named "module:Class"
and imported when a model is built: bert.py's for BERT's own choice, blocks.py's for the rest) and the export
(whether a `transformers` class computes it, or the directory must carry modeling_bertforge.py). A new one is a
record here and a line that registers it (docs/architecture.md walks through one).

Torch is imported only where a variant computes something: the configs are read by verbs that never load it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import UserError
from ..families import DEBERTA_SHAPE, MPNET_SHAPE
from ..registry import Registry, resolve

if TYPE_CHECKING:
    import torch

    from .config import ModelConfig


@dataclass(frozen=True)
class PositionScheme:
    """How a token's position reaches the encoder. The embeddings keep a position table's slot in every scheme
    (the directories carry it); a scheme that adds nothing leaves it frozen at zero."""

    name: str
    help: str  # for --position-embedding, after the name
    added: bool = True  # its table is added to the token embeddings
    # (positions, width, rms) -> the frozen table; the function or "module:name"
    fixed: str | Callable[[int, int, float], torch.Tensor] | None = None
    rotary: bool = False  # attention turns queries and keys by their position's angle (the head size must be even)
    native: bool = True  # transformers' BERT computes it; else the saved directory carries its own code
    attention: str = "bertforge.model.bert:SelfAttention"  # the attention block built for it
    sight: str | None = None  # the sight built for it, where a block holds weights every layer shares (DeBERTa's)
    requires: dict[str, object] = field(default_factory=dict)  # the settings it comes with: a family's shape


@dataclass(frozen=True)
class AttentionBias:
    """What attention adds to its scores before the softmax, the same for every layer."""

    name: str
    help: str  # for --attention-bias, after the name
    # (num_heads, seq_len, device) -> (nh, T, T) added to the scores; the function or "module:name"
    bias: str | Callable[..., torch.Tensor] | None = None
    native: bool = True  # transformers' BERT computes it (only "none" does)
    pair_caution: str | None = None  # said when a run with a pair objective (NSP, SOP) starts with it
    # the sight built for it, "module:Class", where a block computes it with weights of its own (MPNet's table);
    # None: `bias` (or nothing) on bert.py's sight
    sight: str | None = None
    requires: dict[str, object] = field(default_factory=dict)  # the settings it comes with: a family's shape


@dataclass(frozen=True)
class FeedForwardKind:
    """What each position's feed-forward computes."""

    name: str
    help: str  # for --feed-forward, after the name
    block: str  # the module built for it, "module:Class"
    gated: bool = False  # its up projection makes a gate and a value: 3 weight matrices of H × intermediate, not 2
    native: bool = True  # transformers' BERT computes it

    @property
    def matrices(self) -> int:
        """Weight matrices of H × intermediate_size in one layer's feed-forward."""
        return 3 if self.gated else 2


@dataclass(frozen=True)
class NormStyle:
    """Where each encoder layer's LayerNorms sit."""

    name: str
    help: str  # for --norm-style, after the name
    layer: str  # the encoder layer built for it, "module:Class"


CODE_FIELDS = ("fixed", "attention", "bias", "sight", "block", "layer")  # where a record names code


def check_code(record, registry: Registry) -> None:
    """A record names code as "module:name" inside bertforge (resolved when a model is built), or holds your own
    object itself: a name outside the package (`os:system`) is refused when the record is registered, before
    any model imports it."""
    for name in CODE_FIELDS:
        target = getattr(record, name, None)
        if isinstance(target, str) and not (target.startswith("bertforge.") and ":" in target):
            raise UserError(
                f"{registry.kind} {record.name!r}: {name} {target!r} names no bertforge code; give your own object "
                "itself, or 'bertforge.module:name'"
            )


POSITION_SCHEMES: Registry[PositionScheme] = Registry("position scheme", PositionScheme, check_code)
ATTENTION_BIASES: Registry[AttentionBias] = Registry("attention bias", AttentionBias, check_code)
FEED_FORWARDS: Registry[FeedForwardKind] = Registry("feed-forward kind", FeedForwardKind, check_code)
NORM_STYLES: Registry[NormStyle] = Registry("norm style", NormStyle, check_code)


@dataclass(frozen=True)
class Blocks:
    """The classes one model is built from, each called with the config: the paper's (bert.py) or a variant's
    (blocks.py), chosen here once so that no forward path asks the config again."""

    attention: Callable  # (config) -> a SelfAttention
    feed_forward: Callable  # (config) -> a FeedForward
    norm: Callable  # (config, width) -> the normalisation every norm of the model is
    layer: Callable  # (config, blocks, index) -> an EncoderLayer, and its final_norm(config, blocks)
    sight: Callable  # (config) -> what each layer's attention may see, per call: a bert.Sight
    segments: Callable  # (config) -> the segment table
    positions: Callable  # (config) -> the position table


def blocks_of(config: ModelConfig) -> Blocks:
    """The blocks `config` names, imported on first use."""
    plain_sight = not config.position_scheme.rotary and config.bias_variant.bias is None and not config.local_attention
    return Blocks(
        attention=resolve(config.position_scheme.attention),
        feed_forward=resolve(config.feed_forward_kind.block),
        norm=resolve("bertforge.model.blocks:layer_norm"),
        layer=resolve(config.norm.layer),
        sight=resolve(
            config.bias_variant.sight
            or config.position_scheme.sight
            or ("bertforge.model.bert:Sight" if plain_sight else "bertforge.model.blocks:VariantSight")
        ),
        segments=resolve("bertforge.model.blocks:segment_table"),
        positions=resolve("bertforge.model.blocks:position_table"),
    )


def is_gated(feed_forward: str | None) -> bool:
    """Whether a feed-forward kind named in flags or a saved run is gated (an unknown name is not: the config
    that takes it says so)."""
    return feed_forward in FEED_FORWARDS and FEED_FORWARDS[feed_forward].gated


def choices_help(table: Registry) -> str:
    """The help of a variant field: each choice by name, then what it does."""
    return "; ".join(f"{variant.name}: {variant.help}" for variant in table.records())


POSITION_SCHEMES.register(PositionScheme("learned", "a trained table (BERT)"))
POSITION_SCHEMES.register(
    PositionScheme(
        "sinusoidal",
        "a fixed table, as in the Transformer paper, at the token embeddings' initial size",
        # At the token embeddings' scale: unscaled (entries of RMS 0.71 against 0.02) it drowned the tokens in the
        # sum that LayerNorm sees, and a budget run stayed at the unigram level for 800 steps. The paper balanced
        # the two by multiplying the token embeddings by √H instead.
        fixed="bertforge.model.positions:sinusoidal_table",
    )
)
POSITION_SCHEMES.register(
    PositionScheme(
        "rotary",
        "RoPE (Su et al. 2021, as in ModernBERT): queries and keys turned by their position's angle, so attention "
        "sees relative positions; no table, and the directory carries its own code for transformers",
        added=False,
        rotary=True,
        native=False,
        attention="bertforge.model.blocks:RotarySelfAttention",
    )
)
POSITION_SCHEMES.register(
    PositionScheme(
        "disentangled",
        "DeBERTa's: no table added to the tokens; each layer's attention adds content-to-position and "
        "position-to-content terms over log-bucketed relative positions, from one table the layers share (a model "
        "with it is saved as a DeBERTa-v2, which has DeBERTa's shape: post-LN, an mlp feed-forward, no bias)",
        added=False,
        native=False,
        attention="bertforge.model.deberta:DisentangledSelfAttention",
        sight="bertforge.model.deberta:DisentangledSight",
        requires={k: v for k, v in DEBERTA_SHAPE.items() if k != "position_embedding"},
    )
)
ATTENTION_BIASES.register(AttentionBias("none", "attention scores as they are (BERT)"))
ATTENTION_BIASES.register(
    AttentionBias(
        "alibi",
        "a fixed penalty -m·|i-j| on attention scores that makes every head start out looking near (ALiBi, Press "
        "et al. 2022, made symmetric for an encoder; slopes 1/2, 1/4, ... per head, so a model of few heads sees "
        "little past a dozen tokens and its [CLS] cannot read a sentence pair: an NSP head stays at chance). The "
        "positions stay too, since the penalty cannot tell left from right. No transformers class has it: the model "
        "directory carries its own, loaded with trust_remote_code=True",
        bias="bertforge.model.positions:alibi_bias",
        native=False,
        pair_caution="ALiBi keeps each head near (slopes 1/2 to 1/2^num_heads), so [CLS] may not read the second "
        "text: the pair head stayed at chance with it on tiny (--position-embedding rotary --attention-bias none "
        "let it learn)",
    )
)
ATTENTION_BIASES.register(
    AttentionBias(
        "relative",
        "a learned value per head for each bucket of query-key distance (exact up to 8, log-spaced to 128), one "
        "table shared by every layer (MPNet's, as T5's): a model with it is saved as an MPNet, which has MPNet's "
        "shape (post-LN, learned positions, an mlp feed-forward, no segments)",
        native=False,
        sight="bertforge.model.mpnet:RelativeBucketSight",
        requires={k: v for k, v in MPNET_SHAPE.items() if k != "attention_bias"},
    )
)
FEED_FORWARDS.register(FeedForwardKind("mlp", "down(act(up(x))) (BERT)", "bertforge.model.bert:FeedForward"))
FEED_FORWARDS.register(
    FeedForwardKind(
        "glu",
        "down(act(gate(x)) * up(x)), a gated linear unit (GEGLU with gelu; Shazeer 2020, used by Cramming and "
        "ModernBERT), with 1.5x the weights at one intermediate_size: give 2/3 of it for the same compute. No "
        "transformers class has it: the directory carries its own code",
        "bertforge.model.blocks:GatedFeedForward",
        gated=True,
        native=False,
    )
)
NORM_STYLES.register(NormStyle("post", "LayerNorm after each residual (BERT)", "bertforge.model.bert:EncoderLayer"))
NORM_STYLES.register(
    NormStyle(
        "pre",
        "before each sub-layer, plus a final LayerNorm (more stable at high learning rates)",
        "bertforge.model.blocks:PreNormEncoderLayer",
    )
)
