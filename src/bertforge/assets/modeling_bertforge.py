"""bertforge's variants for `transformers`: `from_pretrained(directory, trust_remote_code=True)`.

bertforge writes this file beside the weights of a model that no `transformers` class computes: one trained with
`--attention-bias alibi` (the `budget` recipe), `--feed-forward glu` or `--position-embedding rotary`. Its
config.json maps every Auto class here. Each class is the `transformers` class of the model's family (BERT, or
RoBERTa-PreLayerNorm for pre-LN), unchanged except for what config.json's "bertforge" entry names:
- ALiBi: the encoder adds ALiBi's distance penalty to the attention scores: the padding mask is turned into a
  (batch, heads, T, T) additive mask, which `transformers` passes to every layer's attention as it is;
- a gated feed-forward: each layer's `intermediate.dense` is twice as tall (gate rows, then value rows) and gives
  act(gate) * value, the layer's own activation then passing it on as it is;
- rotary positions: each layer's `query` and `key` turn their output, head by head, by the angle of its position
  in the sequence (the position table, all zeros, adds nothing).
The weights keep the family's names.

It needs only torch and `transformers` (tested with 4.48, 4.57 and 5.x), not
bertforge, so the directory works wherever it is copied.
"""

from __future__ import annotations

import inspect
import types

import torch
from transformers import (
    BertConfig,
    BertForMaskedLM,
    BertForMultipleChoice,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    RobertaPreLayerNormConfig,
    RobertaPreLayerNormForMaskedLM,
    RobertaPreLayerNormForMultipleChoice,
    RobertaPreLayerNormForQuestionAnswering,
    RobertaPreLayerNormForSequenceClassification,
    RobertaPreLayerNormForTokenClassification,
    RobertaPreLayerNormModel,
)

# alibi_bias, rotary_angles and rotate: bertforge.model.positions as written there, byte for byte (a test
# compares them), so that this file and bertforge compute the same.


def alibi_bias(num_heads: int, seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """ALiBi's distance penalty, symmetric for an encoder: -m_h·|i - j|, with slopes m_h = 1/2, 1/4, 1/8, ...

    Added to the attention scores, it makes each head prefer near keys from the
    first step (head h mostly within about 2^(h+1) tokens) instead of having to
    learn from the position table which positions are neighbours.
    """
    slopes = 2.0 ** -torch.arange(1, num_heads + 1, dtype=torch.float32, device=device)  # (nh,)
    position = torch.arange(seq_len, dtype=torch.float32, device=device)
    distance = (position[:, None] - position[None, :]).abs()  # (T, T)
    return -slopes[:, None, None] * distance


def rotary_angles(positions: torch.Tensor, head_size: int, base: float = 10000.0):
    """RoPE's angles (Su et al. 2021): position t turns the pair of dims (i, i + hs/2) by t·θ_i, θ_i = base^(-2i/hs).

    positions (T,) or (B, T) -> cos and sin, each (..., hs), every angle written twice (once for each dim of its
    pair).
    """
    inv_freq = base ** -(torch.arange(0, head_size, 2, dtype=torch.float32, device=positions.device) / head_size)
    angles = positions.float()[..., None] * inv_freq  # (..., hs/2)
    angles = torch.cat([angles, angles], dim=-1)  # (..., hs)
    return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (..., hs) with each pair (x_i, x_{i+hs/2}) turned by its position's angle (cos and sin broadcast to x): a
    query at t and a key at s then score q·k by what they hold and by t - s alone, which makes position relative.

    (x_i, x_{i+hs/2}) -> (x_i·cos - x_{i+hs/2}·sin, x_{i+hs/2}·cos + x_i·sin). The quarter turn (-x_{i+hs/2}, x_i)
    is x rolled by hs/2 with the first half's sign flipped, folded into sin: two fewer passes over x than
    slicing, negating and concatenating (elementwise bf16 work is slow on CPUs).
    """
    half = x.shape[-1] // 2
    sign = torch.ones(x.shape[-1], dtype=sin.dtype, device=sin.device)
    sign[:half] = -1
    return x * cos + x.roll(half, dims=-1) * (sin * sign)


def _alibi_attention_mask(encoder, forward, args, kwargs):
    """The encoder's arguments with its (B, T) padding mask made the bias, padding folded in as -inf."""
    bound = inspect.signature(forward).bind(*args, **kwargs)
    tokens = bound.arguments.get("input_ids")
    if tokens is None:
        tokens = bound.arguments["inputs_embeds"]
    batch, seq_len = tokens.shape[:2]
    padding_mask = bound.arguments.get("attention_mask")
    if padding_mask is not None and padding_mask.dim() != 2:
        raise ValueError("a bertforge ALiBi model builds its own attention mask: pass attention_mask as (batch, seq)")
    bias = alibi_bias(encoder.config.num_attention_heads, seq_len, tokens.device).to(encoder.dtype)[None]
    if padding_mask is None:
        bias = bias.expand(batch, -1, -1, -1)  # (B, nh, T, T)
    else:
        bias = bias.masked_fill(~padding_mask.bool()[:, None, None, :], float("-inf"))  # (B, nh, T, T)
    bound.arguments["attention_mask"] = bias
    return bound.args, bound.kwargs


def _forward_with_alibi(encoder, *args, **kwargs):
    """The encoder's forward, adding the bias. Set on the instance as a bound method, so that the bias is there
    however forward is called (Sentence-Transformers calls model.forward directly, past any forward hook), and
    in a deep copy of the model, which binds it to the copy."""
    plain = type(encoder).forward.__get__(encoder)
    args, kwargs = _alibi_attention_mask(encoder, plain, args, kwargs)
    return plain(*args, **kwargs)


def _bias_as_it_is(encoder, attention_mask, *args, **kwargs):
    """transformers 4.x makes every mask additive as (1 - mask) × min, and refuses a 4-d one: the bias is additive
    already, so it passes as it is. (5.x passes a 4-d mask on by itself and does not call this.)"""
    if attention_mask.dim() == 4:
        return attention_mask
    return type(encoder).get_extended_attention_mask(encoder, attention_mask, *args, **kwargs)


class GatedDense(torch.nn.Linear):
    """A gated feed-forward's `intermediate.dense`: one matmul makes the gate and the value, and act(gate) * value
    comes out (bertforge.model.blocks.GatedFeedForward, which a test keeps equal)."""

    def __init__(self, in_features: int, inner: int, act):
        super().__init__(in_features, 2 * inner)
        self.act = act

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        gate, value = super().forward(hidden).chunk(2, dim=-1)  # (..., I) each
        return self.act(gate) * value


class RotaryDense(torch.nn.Linear):
    """A layer's `query` or `key` with rotary positions: the projection (B, T, H), each head's slice turned by the
    angle of its position 0..T-1 (bertforge.model.blocks.RotarySelfAttention does the same to q and k)."""

    def __init__(self, size: int, num_heads: int):
        super().__init__(size, size)
        self.num_heads = num_heads

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        projected = super().forward(hidden)  # (B, T, H)
        *batch, seq_len, size = projected.shape
        heads = projected.view(*batch, seq_len, self.num_heads, size // self.num_heads).transpose(-3, -2)
        angles = rotary_angles(torch.arange(seq_len, device=heads.device), size // self.num_heads)
        cos, sin = (a.to(heads.dtype) for a in angles)  # (T, hs) each
        return rotate(heads, cos, sin).transpose(-3, -2).reshape(projected.shape)  # (B, nh, T, hs) -> (B, T, H)


def _with_variants(family_class, config_class):
    """`family_class` with config.json's variants: ALiBi in its encoder (its base model, or itself), a gated
    feed-forward and rotary queries and keys in every layer."""

    def __init__(self, config, *args, **kwargs):
        family_class.__init__(self, config, *args, **kwargs)
        variants = getattr(config, "bertforge", {})
        encoder = self.base_model
        replaced = []  # built after the family's own initialisation: initialised below as the family initialises
        if variants.get("attention_bias") == "alibi":
            encoder.forward = types.MethodType(_forward_with_alibi, encoder)
            encoder.get_extended_attention_mask = types.MethodType(_bias_as_it_is, encoder)
        if variants.get("feed_forward") == "glu":
            for layer in encoder.encoder.layer:
                intermediate = layer.intermediate
                intermediate.dense = GatedDense(
                    config.hidden_size, config.intermediate_size, intermediate.intermediate_act_fn
                )
                intermediate.intermediate_act_fn = torch.nn.Identity()  # GatedDense has applied it to the gate
                replaced.append(intermediate.dense)
        if variants.get("position_embedding") == "rotary":
            for layer in encoder.encoder.layer:
                attention = layer.attention.self
                attention.query = RotaryDense(config.hidden_size, config.num_attention_heads)
                attention.key = RotaryDense(config.hidden_size, config.num_attention_heads)
                replaced += [attention.query, attention.key]
        for module in replaced:  # normal(0, initializer_range) and zero bias, not torch's default for a Linear
            self._init_weights(module)

    return type(
        f"Bertforge{family_class.__name__}", (family_class,), {"__init__": __init__, "config_class": config_class}
    )


class BertforgeBertConfig(BertConfig):
    model_type = "bertforge"


class BertforgeRobertaPreLayerNormConfig(RobertaPreLayerNormConfig):
    model_type = "bertforge"


BertforgeBertModel = _with_variants(BertModel, BertforgeBertConfig)
BertforgeBertForPreTraining = _with_variants(BertForPreTraining, BertforgeBertConfig)
BertforgeBertForMaskedLM = _with_variants(BertForMaskedLM, BertforgeBertConfig)
BertforgeBertForSequenceClassification = _with_variants(BertForSequenceClassification, BertforgeBertConfig)
BertforgeBertForTokenClassification = _with_variants(BertForTokenClassification, BertforgeBertConfig)
BertforgeBertForQuestionAnswering = _with_variants(BertForQuestionAnswering, BertforgeBertConfig)
BertforgeBertForMultipleChoice = _with_variants(BertForMultipleChoice, BertforgeBertConfig)

BertforgeRobertaPreLayerNormModel = _with_variants(RobertaPreLayerNormModel, BertforgeRobertaPreLayerNormConfig)
BertforgeRobertaPreLayerNormForMaskedLM = _with_variants(
    RobertaPreLayerNormForMaskedLM, BertforgeRobertaPreLayerNormConfig
)
BertforgeRobertaPreLayerNormForSequenceClassification = _with_variants(
    RobertaPreLayerNormForSequenceClassification, BertforgeRobertaPreLayerNormConfig
)
BertforgeRobertaPreLayerNormForTokenClassification = _with_variants(
    RobertaPreLayerNormForTokenClassification, BertforgeRobertaPreLayerNormConfig
)
BertforgeRobertaPreLayerNormForQuestionAnswering = _with_variants(
    RobertaPreLayerNormForQuestionAnswering, BertforgeRobertaPreLayerNormConfig
)
BertforgeRobertaPreLayerNormForMultipleChoice = _with_variants(
    RobertaPreLayerNormForMultipleChoice, BertforgeRobertaPreLayerNormConfig
)
