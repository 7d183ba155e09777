"""The encoder's variants as blocks: each a block of bert.py with one thing changed, built where a config names it
(variants.py's records name the classes; `blocks_of` chooses them once, when the model is built).

    RotarySelfAttention   queries and keys turned by their positions' angles (RoPE, Su et al. 2021)
    GatedFeedForward      a gated linear unit (Shazeer 2020)
    PreNormEncoderLayer   the norm before each sub-layer, and one at the top
    layer_norm            what every norm of a model is (`Blocks.norm`): BERT's LayerNorm
    VariantSight          sliding windows (ModernBERT's local layers), ALiBi's bias, rotary angles
    segment_table         RoBERTa's one segment, or none (ModernBERT's)
    position_table        a fixed (sinusoidal) table, or none (positions in attention)

ModernBERT (Warner et al. 2024) is BERT built from these with other settings (ModelConfig): pre-LN without the
first layer's attention norm, no biases, no segment or position tables (rotary positions), a gated feed-forward,
sliding-window layers, and task heads that transform their input (dense, activation, LayerNorm) first.

The arithmetic these blocks share with the exported modeling file (rotary angles, ALiBi's bias) is positions.py.
"""

from __future__ import annotations

import torch
from torch import nn

from ..registry import resolve
from .bert import EncoderLayer, FeedForward, SelfAttention, Sight, View
from .config import ModelConfig
from .positions import rotary_angles, rotate
from .variants import Blocks


def layer_norm(config: ModelConfig, width: int) -> nn.LayerNorm:
    """BERT's LayerNorm: centred, scaled, then its gain (and bias, where the config has norm biases)."""
    return nn.LayerNorm(width, eps=config.layer_norm_eps, bias=config.norm_bias)


def sliding_window(seq_len: int, window: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(T, T) bool: True where key j lies within window // 2 of query i (ModernBERT's local layers)."""
    position = torch.arange(seq_len, device=device)
    return (position[:, None] - position[None, :]).abs() <= window // 2


def restrict(mask: torch.Tensor | None, window: torch.Tensor) -> torch.Tensor:
    """A global layer's mask narrowed to a window (T, T) of bool: keys outside it out of sight too."""
    if mask is None:
        return window[None, None]  # (1, 1, T, T)
    if mask.is_floating_point():
        return mask.masked_fill(~window, float("-inf"))
    return mask & window


class RotarySelfAttention(SelfAttention):
    """Attention with rotary positions: queries and keys, every head of both at once, turned by the angles of
    their positions (View.rotary), so that their scores depend on the distance between them."""

    def place(self, query_key: torch.Tensor, view: View) -> torch.Tensor:
        B, T, _ = query_key.shape
        cos, sin = (a.to(query_key.dtype).unsqueeze(-2) for a in view.rotary)  # (T or B, T, 1, hs)
        heads = query_key.view(B, T, 2 * self.num_heads, self.head_size)  # (B, T, 2nh, hs)
        return rotate(heads, cos, sin).view(B, T, 2 * self.num_heads * self.head_size)  # (B, T, 2H)


class GatedFeedForward(FeedForward):
    """A gated linear unit: `up` makes two halves, the gate (activated) and the value, multiplied: each unit
    decides how much of its value to pass, which trains better per FLOP than the activation alone (Shazeer 2020).
    Gate rows, then value rows (ModernBERT's Wi: its "input" rows, activated, then its "gate" rows)."""

    def __init__(self, config: ModelConfig):
        super().__init__(config, up_rows=2 * config.intermediate_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, value = self.up(x).chunk(2, dim=-1)  # (B, T, I) each
        return self.down(self.act(gate) * value)  # (B, T, H)


class PreNormEncoderLayer(EncoderLayer):
    """The LayerNorms before each sub-layer, the residual stream left as it is (more stable at high learning rates):

        x = x + drop(attn(LN(x)));   x = x + drop(ffn(LN(x)))

    ModernBERT's first layer leaves out its attention LN (`first_attention_norm` false): the embeddings' LayerNorm
    has just normalised x."""

    def __init__(self, config: ModelConfig, blocks: Blocks, index: int = 0):
        super().__init__(config, blocks, index)
        if index == 0 and not config.first_attention_norm:
            self.attention_norm = nn.Identity()

    @staticmethod
    def final_norm(config: ModelConfig, blocks: Blocks) -> nn.Module:
        """Pre-LN leaves the residual stream unnormalised, so the stack ends with one norm."""
        return blocks.norm(config, config.hidden_size)

    def forward(self, x: torch.Tensor, view: View, need_weights: bool = False):
        attended, probs = self.attention(self.attention_norm(x), view, need_weights)
        x = x + self.dropout(attended)
        x = x + self.dropout(self.ffn(self.ffn_norm(x)))
        return x, probs  # (B, T, H), (B, nh, T, T) or None


class VariantSight(Sight):
    """What each layer sees when the config changes it: ALiBi's bias on every layer's scores (what is out of sight
    folded in as -inf), a window in the local layers (ModernBERT's every layer but each third), and for rotary
    positions each layer's angles (ModernBERT's local layers turn by another base than its global ones)."""

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        self.num_heads = config.num_heads
        self.head_size = config.hidden_size // config.num_heads
        self.bias = resolve(config.bias_variant.bias)  # None, or (num_heads, seq_len, device) -> (nh, T, T)
        self.window = config.local_attention
        self.global_layers = [config.is_global_layer(i) for i in range(config.num_layers)]
        self.rotary = config.position_scheme.rotary
        self.bases = {True: config.rope_theta, False: config.local_rope_theta}

    def __call__(self, input_ids, attention_mask, document_ids, positions) -> list[View]:
        seq_len, device = input_ids.shape[1], input_ids.device
        mask = self.mask(attention_mask, document_ids)
        if self.bias is not None:  # one bias for all layers, what is out of sight folded in
            bias = self.bias(self.num_heads, seq_len, device)[None]  # (1, nh, T, T)
            mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))  # (B, nh, T, T)
        masks = {True: mask}  # by whether a layer is global
        if not all(self.global_layers):
            masks[False] = restrict(mask, sliding_window(seq_len, self.window, device))  # (B or 1, 1 or nh, T, T)
        angles = dict.fromkeys(masks)
        if self.rotary:
            positions = positions if positions is not None else torch.arange(seq_len, device=device)
            for is_global in masks:
                same = not is_global and self.bases[False] == self.bases[True]
                base = self.bases[is_global]
                angles[is_global] = angles[True] if same else rotary_angles(positions, self.head_size, base)
        return [View(masks[is_global], angles[is_global]) for is_global in self.global_layers]


class OneSegment(nn.Embedding):
    """RoBERTa's segment table of one row, added to every token whatever segment it is given."""

    def forward(self, token_type_ids: torch.Tensor) -> torch.Tensor:
        return super().forward(torch.zeros_like(token_type_ids))  # (B, T, E)


class NoSegments(nn.Module):
    """No segment table (a model without a pair objective, as ModernBERT): it adds nothing."""

    def forward(self, token_type_ids: torch.Tensor) -> torch.Tensor:
        return torch.zeros((), device=token_type_ids.device)  # broadcasts to (B, T, E)


def segment_table(config: ModelConfig) -> nn.Module:
    """The segment embeddings: the paper's table of `type_vocab_size` rows (A and B), RoBERTa's one, or none."""
    if config.type_vocab_size == 0:
        return NoSegments()
    table = OneSegment if config.type_vocab_size == 1 else nn.Embedding
    return table(config.type_vocab_size, config.embedding_width)


def position_table(config: ModelConfig) -> nn.Embedding:
    """The position embeddings: the paper's learned table; a fixed one (sinusoidal), frozen and never
    re-initialised; or, where positions enter elsewhere (attention) or not at all, the slot the directories carry,
    frozen at zero, so that adding it adds nothing."""
    table = nn.Embedding(config.max_position_embeddings, config.embedding_width)
    scheme = config.position_scheme
    if scheme.fixed is not None:
        fill = resolve(scheme.fixed)
        values = fill(config.max_position_embeddings, config.embedding_width, config.initializer_range)  # (P, E)
        table.weight = nn.Parameter(values, requires_grad=False)
    elif not scheme.added:
        table.weight = nn.Parameter(torch.zeros_like(table.weight), requires_grad=False)
    return table
