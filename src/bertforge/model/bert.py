"""BERT, top to bottom as in the paper (Devlin et al. 2019).

    input ids ─► Embeddings (token + segment + position) ─► N × EncoderLayer ─► sequence output
                                                                                 │
                      MLM head (masked positions only) ◄──────────────────────────┤
                      NSP head ◄── Pooler (dense + tanh on [CLS]) ◄───────────────┘

Shapes: B batch, T sequence length, H hidden size, nh heads, hs = H / nh,
N number of predicted (masked) positions (N' rounded up to a multiple of 64), V vocabulary size.

Parallelism, compilation and device placement live in the trainer, not here.
Each model class names the `transformers` architecture it corresponds to;
`hf.py` maps the weights (through the model's family, families/) and `directory.py` saves and loads model
directories.

ModernBERT (Warner et al. 2024) is this same code with other settings (ModelConfig): pre-LN without the first
layer's attention norm, no biases, no segment or position tables (rotary positions), a gated feed-forward,
sliding-window layers, and task heads that transform their input (dense, activation, LayerNorm) first.
Packed windows may keep their documents apart (`document_ids`): attention stays inside each document, and
positions restart at each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..labels import IGNORE_INDEX
from .config import ModelConfig
from .dropout import Dropout, dropout
from .families import family_of
from .unpadding import plan_packing

GATHERED_ROWS_MULTIPLE = 64  # the MLM head's row count is rounded up to this (see BertForPreTraining.forward)


def activation(config: ModelConfig):
    """The feed-forward and head non-linearity the config names: gelu (BERT) or relu."""
    return F.gelu if config.hidden_act == "gelu" else F.relu


# What the dense layer on [CLS] passes its output through: BERT's pooler (and RoBERTa's classification head) tanh,
# DistilBERT's pre-classifier relu, ELECTRA's classification head gelu.
POOLER_ACTIVATIONS = {"tanh": torch.tanh, "relu": F.relu, "gelu": F.gelu}


def rotary_angles(positions: torch.Tensor, head_size: int, base: float = 10000.0):
    """RoPE's angles (Su et al. 2021): position t turns the pair of dims (i, i + hs/2) by t·θ_i, θ_i = base^(-2i/hs).

    positions (T,) or (B, T) -> cos and sin, each (..., hs), every angle written twice (once for each dim of its
    pair).
    """
    inv_freq = base ** -(torch.arange(0, head_size, 2, dtype=torch.float32, device=positions.device) / head_size)
    angles = positions.float()[..., None] * inv_freq  # (..., hs/2)
    angles = torch.cat([angles, angles], dim=-1)  # (..., hs)
    return angles.cos(), angles.sin()


def document_positions(document_ids: torch.Tensor) -> torch.Tensor:
    """(B, T) document ids of a packed window -> (B, T) positions, from 0 at each document's first token."""
    index = torch.arange(document_ids.shape[1], device=document_ids.device).expand_as(document_ids)  # (B, T)
    starts = torch.ones_like(document_ids, dtype=torch.bool)
    starts[:, 1:] = document_ids[:, 1:] != document_ids[:, :-1]  # (B, T): where a document begins
    return index - torch.where(starts, index, 0).cummax(dim=1).values  # (B, T)


def sliding_window(seq_len: int, window: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(T, T) bool: True where key j lies within window // 2 of query i (ModernBERT's local layers)."""
    position = torch.arange(seq_len, device=device)
    return (position[:, None] - position[None, :]).abs() <= window // 2


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


def additive_mask(attn_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A mask as a bias to add to the scores: a float one as it is, a bool one (True = a real key) as 0 / -inf.

    Adding a bias lets the gradient pass through untouched, where masked_fill
    masks it again in the backward pass: 1.1x on explicit attention's forward
    and backward at mini's shape (benchmarks/README.md).
    """
    if attn_mask.is_floating_point():
        return attn_mask.to(dtype)
    return torch.zeros(attn_mask.shape, dtype=dtype, device=attn_mask.device).masked_fill(~attn_mask, float("-inf"))


class Embeddings(nn.Module):
    """BERT's input representation: token + segment + position, then LayerNorm and dropout. Rotary positions enter
    in attention instead (the table's slot stays, frozen at zero, for the directories that carry it), and a model
    without a pair objective may have no segments (type_vocab_size 0): ModernBERT's is the token alone; RoBERTa's
    one segment row is added to every token. Tables narrower than the hidden states (ELECTRA-small's E = 128 for
    H = 256) are projected up after their LayerNorm."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        E = config.embedding_width
        self.token = nn.Embedding(config.padded_vocab_size, E, padding_idx=config.pad_token_id)
        self.segment = nn.Embedding(config.type_vocab_size, E) if config.type_vocab_size else None
        self.one_segment = config.type_vocab_size == 1  # RoBERTa's: every token is segment 0, whatever it is given
        self.position = nn.Embedding(config.max_position_embeddings, E)
        self.project = nn.Linear(E, config.hidden_size) if E != config.hidden_size else None
        scheme = config.position_scheme
        self.adds_positions = scheme.added
        if scheme.fixed is not None:  # a fixed table in the learned slot: frozen, never re-initialised
            table = scheme.fixed(config.max_position_embeddings, E, config.initializer_range)  # (P, E)
            self.position.weight = nn.Parameter(table, requires_grad=False)
        elif not scheme.added:  # positions enter elsewhere (attention) or not at all; the slot stays, frozen at zero
            self.position.weight = nn.Parameter(torch.zeros_like(self.position.weight), requires_grad=False)
        self.norm = nn.LayerNorm(E, eps=config.layer_norm_eps, bias=config.norm_bias)
        self.dropout = Dropout(config.hidden_dropout)

    def segments(self, token_type_ids: torch.Tensor) -> torch.Tensor:
        """(B, T) segment ids -> (B, T, E) segment embeddings; one segment's row for every token where there is one."""
        if self.one_segment:
            token_type_ids = torch.zeros_like(token_type_ids)
        return self.segment(token_type_ids)

    def parts(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, positions: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The three summands, before LayerNorm: each (B, T, E); zeros for a part the model has not.
        `positions` (B, T) where they are not 0..T-1 (documents packed apart)."""
        token = self.token(input_ids)
        segment = self.segments(token_type_ids) if self.segment is not None else torch.zeros_like(token)
        if positions is not None:
            position = self.position(positions)  # (B, T, H)
        else:
            position = self.position.weight[: input_ids.shape[1]].unsqueeze(0).expand_as(token)  # (B, T, H)
        return token, segment, position

    def forward(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        x = self.token(input_ids)  # (B, T, E)
        if self.segment is not None:
            x = x + self.segments(token_type_ids)
        if self.adds_positions:
            x = x + (self.position(positions) if positions is not None else self.position.weight[: x.shape[1]])
        x = self.dropout(self.norm(x))  # (B, T, E)
        return self.project(x) if self.project is not None else x  # (B, T, H)


class SelfAttention(nn.Module):
    """Multi-head self-attention with one fused QKV projection.

    Two ways to compute the same thing: PyTorch's fused `scaled_dot_product_attention`
    (flash kernels), or the explicit softmax(q kᵀ / √hs) v. The explicit form is
    needed to return the probabilities, and on CPUs in bf16 it trains faster
    (`set_explicit_attention`; benchmarks/README.md has the measurement). On
    CPUs it is also taken whenever attention dropout is on: there the fused
    kernel falls back to these same steps with torch's slower mask (dropout.py).
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.num_heads = config.num_heads
        self.head_size = config.hidden_size // config.num_heads
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=config.linear_bias)
        self.out = nn.Linear(config.hidden_size, config.hidden_size, bias=config.linear_bias)
        self.dropout_p = config.attention_dropout
        self.explicit = False  # compute attention in the explicit form even when no probabilities are asked for

    def forward(
        self,
        x: torch.Tensor,
        attn_mask: torch.Tensor | None,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        need_weights: bool = False,
    ):
        """x (B, T, H); attn_mask None (every query sees every key), or bool, True where a query may see a key:
        (B, 1, 1, T) for padding keys, (B or 1, 1, T, T) for documents or windows; or a float bias added to the
        scores, (B or 1, nh, T, T), -inf where a key is out of sight. `rotary`: the (cos, sin) of each position,
        (T, hs) or (B, T, hs), for rotary positions.

        Returns the output (B, T, H) and, only if `need_weights`, the
        attention probabilities (B, nh, T, T), whose rows sum to 1 and are zero on keys out of sight.
        """
        B, T, H = x.shape
        qkv = self.qkv(x)  # (B, T, 3H)
        query_key, v = qkv[..., : 2 * H], qkv[..., 2 * H :]  # (B, T, 2H), (B, T, H)
        if rotary is not None:  # queries and keys turned together, every head of both at once
            cos, sin = (a.to(qkv.dtype).unsqueeze(-2) for a in rotary)  # (T or B, T, 1, hs)
            heads = query_key.view(B, T, 2 * self.num_heads, self.head_size)  # (B, T, 2nh, hs)
            query_key = rotate(heads, cos, sin).view(B, T, 2 * H)
        q, k = query_key.split(H, dim=2)  # 2 × (B, T, H)
        q = q.view(B, T, self.num_heads, self.head_size).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.num_heads, self.head_size).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.num_heads, self.head_size).transpose(1, 2)  # (B, nh, T, hs)
        dropout_p = self.dropout_p if self.training else 0.0
        if attn_mask is not None and attn_mask.is_floating_point():
            attn_mask = attn_mask.to(q.dtype)  # SDPA wants the bias in the query's dtype (bf16 under autocast)
        probs = None
        if need_weights or self.explicit or (dropout_p > 0 and x.device.type == "cpu"):
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_size)  # (B, nh, T, T)
            if attn_mask is not None:
                scores = scores + additive_mask(attn_mask, scores.dtype)
            probs = scores.softmax(dim=-1)  # (B, nh, T, T)
            y = dropout(probs, dropout_p, self.training) @ v  # (B, nh, T, hs)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p)  # (B, nh, T, hs)
        y = y.transpose(1, 2).reshape(B, T, H)  # (B, T, H): heads side by side again
        return self.out(y), probs if need_weights else None


class FeedForward(nn.Module):
    """Position-wise feed-forward: H -> intermediate -> H. As a gated linear unit (`feed_forward="glu"`), `up`
    makes two halves, the gate (activated) and the value, multiplied: each unit decides how much of its value to
    pass, which trains better per FLOP than the activation alone (Shazeer 2020)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.gated = config.feed_forward == "glu"
        inner = config.intermediate_size
        # gate rows, then value rows (ModernBERT's Wi: its "input" rows, activated, then its "gate" rows)
        self.up = nn.Linear(config.hidden_size, 2 * inner if self.gated else inner, bias=config.linear_bias)
        self.down = nn.Linear(inner, config.hidden_size, bias=config.linear_bias)
        self.act = activation(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.gated:
            return self.down(self.act(self.up(x)))  # (B, T, H)
        gate, value = self.up(x).chunk(2, dim=-1)  # (B, T, I) each
        return self.down(self.act(gate) * value)  # (B, T, H)


class EncoderLayer(nn.Module):
    """One Transformer block: attention and feed-forward, each with residual, dropout and LayerNorm.

    post-LN (BERT):  x = LN(x + drop(attn(x)));   x = LN(x + drop(ffn(x)))
    pre-LN:          x = x + drop(attn(LN(x)));   x = x + drop(ffn(LN(x)))
    ModernBERT's first layer leaves out its attention LN: the embeddings' LayerNorm has just normalised x.
    """

    def __init__(self, config: ModelConfig, index: int = 0):
        super().__init__()
        self.pre_norm = config.norm_style == "pre"
        self.attention = SelfAttention(config)
        keeps_norm = index > 0 or config.first_attention_norm
        norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps, bias=config.norm_bias)
        self.attention_norm = norm if keeps_norm else nn.Identity()
        self.ffn = FeedForward(config)
        self.ffn_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps, bias=config.norm_bias)
        self.dropout = Dropout(config.hidden_dropout)
        self.is_global = config.is_global_layer(index)  # sees the whole sequence, not a window of it

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None, rotary=None, need_weights: bool = False):
        if self.pre_norm:
            attended, probs = self.attention(self.attention_norm(x), attn_mask, rotary, need_weights)
            x = x + self.dropout(attended)
            x = x + self.dropout(self.ffn(self.ffn_norm(x)))
        else:
            attended, probs = self.attention(x, attn_mask, rotary, need_weights)
            x = self.attention_norm(x + self.dropout(attended))
            x = self.ffn_norm(x + self.dropout(self.ffn(x)))
        return x, probs  # (B, T, H), (B, nh, T, T) or None


@dataclass
class EncoderOutput:
    sequence_output: torch.Tensor  # (B, T, H) last layer
    pooled_output: torch.Tensor  # (B, H) tanh(dense([CLS]))
    hidden_states: list[torch.Tensor] | None = None  # L + 1 × (B, T, H): embeddings, then each layer
    attentions: list[torch.Tensor] | None = None  # L × (B, nh, T, T)


class BertModel(nn.Module):
    """Embeddings, the encoder stack and (for heads that read [CLS]) the pooler: the body every head sits on."""

    def __init__(self, config: ModelConfig, pooler: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.layers = nn.ModuleList(EncoderLayer(config, i) for i in range(config.num_layers))
        # Pre-LN leaves the residual stream unnormalised, so it needs one LayerNorm at the top.
        self.final_norm = (
            nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps, bias=config.norm_bias)
            if config.norm_style == "pre"
            else None
        )
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size) if pooler else None
        self.pooler_act = POOLER_ACTIVATIONS[config.pooler_activation]
        self.recompute_layers = False  # set_activation_checkpointing: a training-time choice, not the architecture

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        document_ids: torch.Tensor | None = None,
    ) -> EncoderOutput:
        """input_ids, token_type_ids, attention_mask: (B, T); attention_mask is 1 on real tokens, 0 on padding.
        document_ids (B, T): which document of a packed window each token belongs to; attention stays inside
        each, and positions restart at each (None: one text per row).

        A padded batch may run packed (unpadding.py): its sequences side by side in fewer rows, kept apart as
        documents are, which is the same arithmetic on every real token. Padding positions then come back zero."""
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        packing = None
        if attention_mask is not None and document_ids is None and not output_attentions:
            packing = plan_packing(attention_mask)
        if packing is None:
            x, hidden_states, attentions = self._encode(
                input_ids, token_type_ids, attention_mask, document_ids, output_hidden_states, output_attentions
            )
        else:
            x, hidden_states, _ = self._encode(
                packing.pack(input_ids, fill=self.config.pad_token_id),  # (R, T)
                packing.pack(token_type_ids),
                None,  # the document ids keep every sequence (and the empty slots) to itself
                packing.document_ids,
                output_hidden_states,
                False,
            )
            x = packing.unpack(x)  # (B, T, H)
            hidden_states = [packing.unpack(h) for h in hidden_states] if hidden_states is not None else None
            attentions = None
        pooled = self.pooler_act(self.pooler(x[:, 0])) if self.pooler is not None else None  # (B, H): [CLS] summary
        return EncoderOutput(x, pooled, hidden_states, attentions)

    def _encode(self, input_ids, token_type_ids, attention_mask, document_ids, output_hidden_states, output_attentions):
        """The embeddings and the layers: (B, T, H) last hidden states, and the hidden states and attention
        probabilities of every layer where asked for."""
        T = input_ids.shape[1]
        positions = document_positions(document_ids) if document_ids is not None else None  # (B, T)
        global_mask = self._attention_mask(attention_mask, document_ids, T, input_ids.device)
        local_mask = global_mask
        if self.config.local_attention and any(not layer.is_global for layer in self.layers):
            window = sliding_window(T, self.config.local_attention, input_ids.device)  # (T, T)
            local_mask = _restrict(global_mask, window)
        rotary = self._rotary_angles(positions, T, input_ids.device)
        x = self.embeddings(input_ids, token_type_ids, positions)  # (B, T, H)
        hidden_states = [x] if output_hidden_states else None
        attentions = [] if output_attentions else None
        recompute = self.recompute_layers and self.training and torch.is_grad_enabled()
        for layer in self.layers:
            mask = global_mask if layer.is_global else local_mask
            angles = rotary[layer.is_global] if rotary is not None else None
            if recompute:  # keep only the layer's input; its inside is computed again in the backward pass
                x, probs = checkpoint(layer, x, mask, angles, output_attentions, use_reentrant=False)
            else:
                x, probs = layer(x, mask, angles, output_attentions)
            if output_hidden_states:
                hidden_states.append(x)
            if output_attentions:
                attentions.append(probs)
        if self.final_norm is not None:
            x = self.final_norm(x)
            if output_hidden_states:
                hidden_states[-1] = x
        return x, hidden_states, attentions

    def _attention_mask(
        self, attention_mask: torch.Tensor | None, document_ids: torch.Tensor | None, seq_len: int, device
    ) -> torch.Tensor | None:
        """What the global layers may see: None for everything (SDPA's fastest kernel), else bool (True = may see)
        or, with ALiBi, its float bias with -inf where a key is out of sight."""
        mask = None
        # With no padding the mask is dropped, which lets SDPA pick its fastest (flash) kernel.
        if attention_mask is not None and not bool(attention_mask.all()):
            mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)
        if document_ids is not None:  # a token sees its own document's tokens only
            same = (document_ids[:, :, None] == document_ids[:, None, :])[:, None]  # (B, 1, T, T)
            mask = same if mask is None else mask & same
        variant = self.config.bias_variant
        if variant.bias is not None:  # one bias for all layers, what is out of sight folded in
            bias = variant.bias(self.config.num_heads, seq_len, device)[None]  # (1, nh, T, T)
            mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))  # (B, nh, T, T)
        return mask

    def _rotary_angles(self, positions: torch.Tensor | None, seq_len: int, device) -> dict | None:
        """{is a global layer: (cos, sin)} for rotary positions (each (T, hs), or (B, T, hs) with `positions`),
        computed once for all layers; ModernBERT's local layers turn by another base than its global ones."""
        config = self.config
        if not config.position_scheme.rotary:
            return None
        head_size = config.hidden_size // config.num_heads
        positions = positions if positions is not None else torch.arange(seq_len, device=device)
        angles = {True: rotary_angles(positions, head_size, config.rope_theta)}
        if config.local_attention:
            same = config.local_rope_theta == config.rope_theta
            angles[False] = angles[True] if same else rotary_angles(positions, head_size, config.local_rope_theta)
        return angles


def _restrict(mask: torch.Tensor | None, window: torch.Tensor) -> torch.Tensor:
    """A global layer's mask narrowed to a window (T, T) of bool: keys outside it out of sight too."""
    if mask is None:
        return window[None, None]  # (1, 1, T, T)
    if mask.is_floating_point():
        return mask.masked_fill(~window, float("-inf"))
    return mask & window


class MaskedLMHead(nn.Module):
    """dense -> activation -> LayerNorm -> decoder (tied to the token embeddings) + bias. The dense layer maps the
    hidden states to the embeddings' width (H -> E, the same unless ELECTRA's tables are narrower)."""

    def __init__(self, config: ModelConfig, token_embedding: nn.Embedding):
        super().__init__()
        self.vocab_size = config.vocab_size
        E = config.embedding_width
        self.transform = nn.Linear(config.hidden_size, E, bias=config.linear_bias)
        self.act = activation(config)
        self.norm = nn.LayerNorm(E, eps=config.layer_norm_eps, bias=config.norm_bias)
        if config.tie_word_embeddings:
            self.decoder_weight = token_embedding.weight  # the same Parameter: one matrix, two uses
        else:
            self.decoder_weight = nn.Parameter(
                torch.empty_like(token_embedding.weight).normal_(0.0, config.initializer_range)
            )
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden (..., H) -> logits (..., V), exactly V columns even when the table is padded."""
        return self.padded_logits(hidden)[..., : self.vocab_size]

    def padded_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden (..., H) -> logits (..., V'): a column per row of the padded table (aligned to 64 rows).

        The pad columns are -inf, so a softmax or cross-entropy over them gives them
        probability and gradient 0. The training loss uses these as they are: cutting
        the pad columns first cost a zero-filled (N, V') gradient in every backward pass.
        """
        h = self.norm(self.act(self.transform(hidden)))  # (..., E)
        pad = self.decoder_weight.shape[0] - self.vocab_size
        bias = torch.cat([self.bias, self.bias.new_full((pad,), float("-inf"))])  # (V',)
        # The bias is added outside the matmul: under bf16 autocast the fp32 add promotes the logits to fp32.
        return F.linear(h, self.decoder_weight) + bias  # (..., V')


@dataclass
class PreTrainingOutput:
    loss: torch.Tensor | None  # mlm_loss + nsp_loss (or mlm_loss alone without NSP labels)
    mlm_loss: torch.Tensor | None
    nsp_loss: torch.Tensor | None
    mlm_logits: torch.Tensor  # (N, V) at labelled positions when labels are given, else (B, T, V)
    nsp_logits: torch.Tensor | None  # (B, 2): column 0 = IsNext, 1 = NotNext; None when training MLM only
    mlm_targets: torch.Tensor | None = None  # (N,) the labels matching mlm_logits rows
    # ELECTRA (electra.py): the discriminator's replaced-token loss, mean over real tokens, and its counts (0-d)
    rtd_loss: torch.Tensor | None = None
    rtd_correct: torch.Tensor | None = None  # tokens judged right: replaced or original
    rtd_tokens: torch.Tensor | None = None  # real (non-padding) tokens judged

    def mlm_correct(self) -> torch.Tensor:
        """Number of correct MLM predictions, a 0-d tensor (no host sync).

        max(-1).indices is argmax (the first maximum wins ties, as documented for both) at a third of argmax's
        time on CPU over (N, V) bf16 logits: argmax there took 28 ms of a 120 ms demo step.
        """
        return (self.mlm_logits.max(-1).indices == self.mlm_targets).sum()


class BertForPreTraining(nn.Module):
    """The BERT pre-training model: encoder + masked-LM head + next-sentence head.

    Without a pair head (`pair_head` False, or a model that cannot tell segment A from B) it is a masked LM alone,
    with no pooler either, and is saved as one (`transformers`' BertForMaskedLM, RobertaForMaskedLM, ...): a head
    that never trained is never saved."""

    def __init__(self, config: ModelConfig, pair_head: bool | None = None, pooler: bool | None = None):
        super().__init__()
        self.config = config
        pair = config.type_vocab_size > 1 if pair_head is None else pair_head and config.type_vocab_size > 1
        # The pair head reads the pooler; without one, a pooler only where asked (a released encoder's, kept)
        self.bert = BertModel(config, pooler=pair or bool(pooler))
        self.mlm_head = MaskedLMHead(config, self.bert.embeddings.token)
        self.nsp_head = nn.Linear(config.hidden_size, 2) if pair else None
        self.apply(lambda module: init_weights(module, config))

    @property
    def hf_architecture(self) -> str:
        return "BertForPreTraining" if self.nsp_head is not None else "BertForMaskedLM"

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        mlm_labels: torch.Tensor | None = None,
        nsp_labels: torch.Tensor | None = None,
        document_ids: torch.Tensor | None = None,
    ) -> PreTrainingOutput:
        """mlm_labels (B, T): the original id where a prediction is due, -100 elsewhere.
        nsp_labels (B,): 0 = IsNext, 1 = NotNext; omit them to train MLM only.
        document_ids (B, T): the documents of packed windows, kept apart (BertModel)."""
        encoded = self.bert(input_ids, token_type_ids, attention_mask, document_ids=document_ids)
        if mlm_labels is None:
            nsp_logits = self.nsp_head(encoded.pooled_output) if self.nsp_head is not None else None  # (B, 2)
            return PreTrainingOutput(None, None, None, self.mlm_head(encoded.sequence_output), nsp_logits)
        # Training MLM only, the pair head stays out of the graph: under DDP an output no loss uses is an error.
        nsp_logits = self.nsp_head(encoded.pooled_output) if nsp_labels is not None else None  # (B, 2)

        # Gather first: the decoder (H x V, the largest matmul) runs only where a label is.
        rows = (mlm_labels.flatten() != IGNORE_INDEX).nonzero().squeeze(1)  # (N,) indices into B·T
        n, extra = rows.numel(), -rows.numel() % GATHERED_ROWS_MULTIPLE
        # N changes with every batch. Rounded up to a multiple of 64 (extra rows read position 0, their label
        # ignored), batches share a few shapes: oneDNN reuses its kernels and glibc its freed blocks, where each
        # new N cost a kernel build and left memory behind (benchmarks/bench_gather_shapes.py).
        rows = F.pad(rows, (0, extra))  # (N',)
        targets = F.pad(mlm_labels.flatten()[rows[:n]], (0, extra), value=IGNORE_INDEX)  # (N',)
        logits = self.mlm_head.padded_logits(encoded.sequence_output.flatten(0, 1)[rows])  # (N', V')
        mlm_loss = F.cross_entropy(logits.float(), targets, ignore_index=IGNORE_INDEX) if n else logits.sum() * 0.0
        nsp_loss = F.cross_entropy(nsp_logits.float(), nsp_labels) if nsp_labels is not None else None
        loss = mlm_loss if nsp_loss is None else mlm_loss + nsp_loss
        mlm_logits = logits[:n, : self.config.vocab_size]  # (N, V)
        return PreTrainingOutput(loss, mlm_loss, nsp_loss, mlm_logits, nsp_logits, targets[:n])


def encoder_has_pooler(config: ModelConfig) -> bool:
    """Whether the family's bare encoder class has a pooler (BertModel and RobertaModel do; ELECTRA's, DistilBERT's
    and ModernBERT's do not), so that a model saved as that class (a discriminator, a sentence encoder) has what
    its class loads, and no more."""
    return family_of(config).base_pooler and config.task_head != "transform"


class ReplacedTokenHead(nn.Module):
    """ELECTRA's discriminator head: dense -> activation -> one logit per token, > 0 meaning "replaced"."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = activation(config)
        self.prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.prediction(self.act(self.dense(hidden))).squeeze(-1)  # (B, T, H) -> (B, T)


class BertForReplacedTokenDetection(nn.Module):
    """ELECTRA's discriminator (Clark et al. 2020): the encoder, and for every token whether it was replaced.

    The encoder is what fine-tuning keeps. Its pooler is not trained (no pair
    objective), as in any MLM-only model; fine-tuning trains it with the classifier.
    """

    hf_architecture = "BertForReplacedTokenDetection"

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config, pooler=encoder_has_pooler(config))
        self.rtd_head = ReplacedTokenHead(config)
        self.apply(lambda module: init_weights(module, config))

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, document_ids=None) -> torch.Tensor:
        """Logits (B, T): > 0 where the token is judged replaced."""
        encoded = self.bert(input_ids, token_type_ids, attention_mask, document_ids=document_ids)
        return self.rtd_head(encoded.sequence_output)


def set_dropout(model: nn.Module, hidden: float, attention: float) -> None:
    """Change dropout after loading: a model pre-trained without it is usually fine-tuned with it."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = hidden
        elif isinstance(module, SelfAttention):
            module.dropout_p = attention
    model.config.hidden_dropout, model.config.attention_dropout = hidden, attention


def set_explicit_attention(model: nn.Module, explicit: bool) -> None:
    """Choose the attention form of every layer (the results are the same; the speed differs by device and dtype)."""
    for module in model.modules():
        if isinstance(module, SelfAttention):
            module.explicit = explicit


def set_activation_checkpointing(model: nn.Module, on: bool) -> None:
    """Keep each encoder layer's input only, and compute the layer again in the backward pass: the activations a
    step keeps shrink from every layer's insides to one tensor a layer, for about one more forward pass of compute.
    Dropout draws the same masks the second time (torch.utils.checkpoint restores the generator), so the gradients
    are exactly those of a step without it."""
    for module in model.modules():
        if isinstance(module, BertModel):
            module.recompute_layers = on


def init_weights(module: nn.Module, config: ModelConfig) -> None:
    """BERT's init: weights ~ N(0, 0.02), biases zero, LayerNorm (1, 0), [PAD] row zero."""
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, 0.0, config.initializer_range)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif (
        isinstance(module, nn.Embedding) and module.weight.requires_grad
    ):  # a frozen (sinusoidal) table keeps its values
        nn.init.normal_(module.weight, 0.0, config.initializer_range)
        if module.padding_idx is not None:
            with torch.no_grad():
                module.weight[module.padding_idx].zero_()
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)


def use_fast_paths(model: nn.Module, device: str, precision: str) -> None:
    """Switch on the model's fast paths for training steps, where they were measured to pay (benchmarks/README.md).

    Each computes the same result as the readable default. On CPUs in bf16 the
    explicit attention form beats PyTorch's flash kernel, whose backward pass is
    several times slower there; elsewhere the fused kernel wins or ties.
    Pre-training and fine-tuning call this. Forward-only work (inference,
    evaluation) keeps the fused kernel: it measured 1.08x faster there in bf16.
    """
    set_explicit_attention(model, device == "cpu" and precision == "bf16")
