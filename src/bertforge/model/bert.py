"""BERT, top to bottom as in the paper (Devlin et al. 2019).

    input ids ─► Embeddings (token + segment + position) ─► N × EncoderLayer ─► sequence output
                                                                                 │
                      MLM head (masked positions only) ◄──────────────────────────┤
                      NSP head ◄── Pooler (dense + tanh on [CLS]) ◄───────────────┘

Shapes: B batch, T sequence length, H hidden size, E embedding width (H unless narrower), nh heads,
hs = H / nh, L layers, N number of predicted (masked) positions (N' rounded up to a multiple of 64),
V vocabulary size.

This file is the paper's model and nothing else. The variants bertforge also trains (rotary positions, ALiBi, a
gated feed-forward, pre-LN layers, sliding windows: ModernBERT's and Cramming's choices) are blocks in
blocks.py, each a subclass of a block here with one thing changed, and a model is built from the ones its config
names (variants.py), once: no forward path below asks the config what to compute. The same arithmetic,
written for `transformers`, is the exported modeling file (assets/modeling_bertforge.py), which tests hold to
these blocks.

Parallelism, compilation and device placement live in the trainer, not here. Each model class names the
`transformers` architecture it corresponds to; `hf.py` maps the weights (through the model's family, families/)
and `directory.py` saves and loads model directories. Packed windows may keep their documents apart
(`document_ids`, unpadding.py): attention stays inside each document, and positions restart at each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..labels import IGNORE_INDEX
from .config import ModelConfig
from .dropout import Dropout, dropout
from .unpadding import document_mask, document_positions, plan_packing
from .variants import Blocks, blocks_of
from .vocabulary_loss import linear_cross_entropy

GATHERED_ROWS_MULTIPLE = 64  # the MLM head's row count is rounded up to this (see BertForPreTraining.forward)

# What the dense layer on [CLS] passes its output through: BERT's pooler (and RoBERTa's classification head) tanh,
# DistilBERT's pre-classifier relu, ELECTRA's classification head gelu.
POOLER_ACTIVATIONS = {"tanh": torch.tanh, "relu": F.relu, "gelu": F.gelu}


ACTIVATIONS = {"gelu": F.gelu, "relu": F.relu, "silu": F.silu}  # hidden_act's choices (SiLU makes a GLU a SwiGLU)


def activation(config: ModelConfig):
    """The feed-forward and head non-linearity the config names: gelu (BERT), relu or silu."""
    return ACTIVATIONS[config.hidden_act]


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
    """BERT's input representation: token + segment + position, then LayerNorm and dropout.

    The tables are the paper's (two segments, A and B; a learned position table) unless the config says otherwise
    (blocks.segment_table and position_table: RoBERTa's one segment; none for a model without a pair objective; a
    fixed sinusoidal table; a slot frozen at zero where positions enter in attention). Tables narrower than the
    hidden states (ELECTRA-small's E = 128 for H = 256) are projected up after their LayerNorm."""

    def __init__(self, config: ModelConfig, blocks: Blocks):
        super().__init__()
        E = config.embedding_width
        self.token = nn.Embedding(config.padded_vocab_size, E, padding_idx=config.pad_token_id)
        self.segment = blocks.segments(config)  # (2, E): A and B
        self.position = blocks.positions(config)  # (max_position_embeddings, E), learned
        self.norm = blocks.norm(config, E)
        self.dropout = Dropout(config.hidden_dropout)
        self.project = nn.Linear(E, config.hidden_size) if E != config.hidden_size else nn.Identity()

    def parts(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, positions: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The three summands, before LayerNorm, each (B, T, E) (zeros for a part the model has not).
        `positions` (B, T) where they are not 0..T-1 (documents packed apart)."""
        token = self.token(input_ids)  # (B, T, E)
        position = self.position(positions) if positions is not None else self.position.weight[: input_ids.shape[1]]
        return token, self.segment(token_type_ids).expand_as(token), position.expand_as(token)

    def forward(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        token, segment, position = self.parts(input_ids, token_type_ids, positions)  # 3 × (B, T, E)
        x = self.dropout(self.norm(token + segment + position))  # (B, T, E)
        return self.project(x)  # (B, T, H)


@dataclass
class View:
    """What one layer's attention sees: `mask` as SelfAttention.forward takes it, for rotary positions the
    (cos, sin) of each position's angles, (T, hs) or (B, T, hs), and what a family's sight hands every layer beside
    them (`relative`: DeBERTa's shared table of relative positions and their buckets)."""

    mask: torch.Tensor | None
    rotary: tuple[torch.Tensor, torch.Tensor] | None = None
    relative: Any = None


class Sight:
    """What each layer's attention may see. BERT's: every real token of the text (of its own document, in a packed
    window), the same in every layer. Sliding windows, ALiBi's bias and rotary angles are blocks.VariantSight."""

    def __init__(self, config: ModelConfig):
        self.num_layers = config.num_layers

    @staticmethod
    def mask(attention_mask: torch.Tensor | None, document_ids: torch.Tensor | None) -> torch.Tensor | None:
        """None when every query sees every key (which lets SDPA pick its fastest, flash, kernel), else bool,
        True where a query may see a key: (B, 1, 1, T) for padding keys, (B, 1, T, T) for documents."""
        mask = None
        if attention_mask is not None and not bool(attention_mask.all()):
            mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)
        if document_ids is not None:  # a token sees its own document's tokens only
            same = document_mask(document_ids)  # (B, 1, T, T)
            mask = same if mask is None else mask & same
        return mask

    def __call__(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        document_ids: torch.Tensor | None,
        positions: torch.Tensor | None,
    ) -> list[View]:
        """One View per layer, for a batch of `input_ids` (B, T) and its masks; `positions` (B, T) where they are
        not 0..T-1."""
        return [View(self.mask(attention_mask, document_ids))] * self.num_layers


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

    def place(self, query_key: torch.Tensor, view: View) -> torch.Tensor:
        """Queries and keys, (B, T, 2H), as attention scores them. BERT added its positions to the embeddings:
        they are as projected (blocks.RotarySelfAttention turns them by their positions' angles)."""
        return query_key

    def scores_mask(self, q: torch.Tensor, k: torch.Tensor, view: View) -> torch.Tensor | None:
        """What is added to the scores q kᵀ / √hs, for q, k (B, nh, T, hs): the view's mask, in BERT. An attention
        that adds score terms of its own (DeBERTa's content-to-position ones) returns them here, as a float bias."""
        return view.mask

    def forward(self, x: torch.Tensor, view: View, need_weights: bool = False):
        """x (B, T, H); view.mask None (every query sees every key), or bool, True where a query may see a key:
        (B, 1, 1, T) for padding keys, (B or 1, 1, T, T) for documents or windows; or a float bias added to the
        scores, (B or 1, nh, T, T), -inf where a key is out of sight.

        Returns the output (B, T, H) and, only if `need_weights`, the
        attention probabilities (B, nh, T, T), whose rows sum to 1 and are zero on keys out of sight.
        """
        B, T, H = x.shape
        qkv = self.qkv(x)  # (B, T, 3H)
        query_key, v = self.place(qkv[..., : 2 * H], view), qkv[..., 2 * H :]  # (B, T, 2H), (B, T, H)
        q, k = query_key.split(H, dim=2)  # 2 × (B, T, H)
        q = q.view(B, T, self.num_heads, self.head_size).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.num_heads, self.head_size).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.num_heads, self.head_size).transpose(1, 2)  # (B, nh, T, hs)
        dropout_p = self.dropout_p if self.training else 0.0
        mask = self.scores_mask(q, k, view)
        if mask is not None and mask.is_floating_point():
            mask = mask.to(q.dtype)  # SDPA wants a bias in the query's dtype (bf16 under autocast)
        probs = None
        if need_weights or self.explicit or (dropout_p > 0 and x.device.type == "cpu"):
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_size)  # (B, nh, T, T)
            if mask is not None:
                scores = scores + additive_mask(mask, scores.dtype)
            probs = scores.softmax(dim=-1)  # (B, nh, T, T)
            y = dropout(probs, dropout_p, self.training) @ v  # (B, nh, T, hs)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)  # (B, nh, T, hs)
        y = y.transpose(1, 2).reshape(B, T, H)  # (B, T, H): heads side by side again
        return self.out(y), probs if need_weights else None


class FeedForward(nn.Module):
    """Position-wise feed-forward: H -> intermediate -> H, the activation between."""

    def __init__(self, config: ModelConfig, up_rows: int | None = None):
        super().__init__()
        inner = config.intermediate_size
        self.up = nn.Linear(config.hidden_size, up_rows or inner, bias=config.linear_bias)
        self.down = nn.Linear(inner, config.hidden_size, bias=config.linear_bias)
        self.act = activation(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.up(x)))  # (B, T, H)


class EncoderLayer(nn.Module):
    """One Transformer block: attention and feed-forward, each with residual, dropout and LayerNorm after it
    (post-LN, the paper's; blocks.PreNormEncoderLayer puts them before):

        x = LN(x + drop(attn(x)));   x = LN(x + drop(ffn(x)))
    """

    def __init__(self, config: ModelConfig, blocks: Blocks, index: int = 0):
        super().__init__()
        self.attention = blocks.attention(config)
        self.attention_norm = blocks.norm(config, config.hidden_size)
        self.ffn = blocks.feed_forward(config)
        self.ffn_norm = blocks.norm(config, config.hidden_size)
        self.dropout = Dropout(config.hidden_dropout)

    @staticmethod
    def final_norm(config: ModelConfig, blocks: Blocks) -> nn.Module:
        """What the stack ends with: post-LN's output is normalised already."""
        return nn.Identity()

    def forward(self, x: torch.Tensor, view: View, need_weights: bool = False):
        attended, probs = self.attention(x, view, need_weights)
        x = self.attention_norm(x + self.dropout(attended))
        x = self.ffn_norm(x + self.dropout(self.ffn(x)))
        return x, probs  # (B, T, H), (B, nh, T, T) or None


@dataclass
class EncoderOutput:
    sequence_output: torch.Tensor  # (B, T, H) last layer
    pooled_output: torch.Tensor | None  # (B, H) tanh(dense([CLS])); None without a pooler
    hidden_states: list[torch.Tensor] | None = None  # L + 1 × (B, T, H): embeddings, then each layer
    attentions: list[torch.Tensor] | None = None  # L × (B, nh, T, T)


class Pooler(nn.Linear):
    """The summary of a text that sequence heads read: tanh(dense([CLS]'s hidden state)) (BERT's; other families'
    sequence heads put another activation after the same dense layer)."""

    def __init__(self, config: ModelConfig):
        super().__init__(config.hidden_size, config.hidden_size)
        self.act = POOLER_ACTIVATIONS[config.pooler_activation]

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.act(super().forward(hidden[:, 0]))  # (B, T, H) -> (B, H)


class BertModel(nn.Module):
    """Embeddings, the encoder stack and (for heads that read [CLS]) the pooler: the body every head sits on."""

    def __init__(self, config: ModelConfig, pooler: bool = True):
        super().__init__()
        self.config = config
        blocks = blocks_of(config)  # the paper's blocks, or a variant's where the config names one
        self.embeddings = Embeddings(config, blocks)
        self.layers = nn.ModuleList(blocks.layer(config, blocks, i) for i in range(config.num_layers))
        self.final_norm = blocks.layer.final_norm(config, blocks)
        self.pooler = Pooler(config) if pooler else None
        self.sight = blocks.sight(config)
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
        packing = plan_packing(attention_mask, document_ids, output_attentions)
        if packing is None:
            x, hidden_states, attentions = self.encode(
                input_ids, token_type_ids, attention_mask, document_ids, output_hidden_states, output_attentions
            )
        else:  # the same encoder on (R, T) rows of real tokens, its outputs put back in (B, T) places
            x, hidden_states = packing.run(
                self.encode, input_ids, token_type_ids, output_hidden_states, self.config.pad_token_id
            )
            attentions = None
        pooled = self.pooler(x) if self.pooler is not None else None  # (B, H): the [CLS] summary
        return EncoderOutput(x, pooled, hidden_states, attentions)

    def encode(self, input_ids, token_type_ids, attention_mask, document_ids, output_hidden_states, output_attentions):
        """The embeddings and the layers: (B, T, H) last hidden states, and the hidden states and attention
        probabilities of every layer where asked for."""
        positions = document_positions(document_ids) if document_ids is not None else None  # (B, T)
        views = self.sight(input_ids, attention_mask, document_ids, positions)  # one per layer
        x = self.embeddings(input_ids, token_type_ids, positions)  # (B, T, H)
        hidden_states = [x] if output_hidden_states else None
        attentions = [] if output_attentions else None
        recompute = self.recompute_layers and self.training and torch.is_grad_enabled()
        for layer, view in zip(self.layers, views):
            if recompute:  # keep only the layer's input; its inside is computed again in the backward pass
                x, probs = checkpoint(layer, x, view, output_attentions, use_reentrant=False)
            else:
                x, probs = layer(x, view, output_attentions)
            if output_hidden_states:
                hidden_states.append(x)
            if output_attentions:
                attentions.append(probs)
        x = self.final_norm(x)  # (B, T, H)
        if output_hidden_states:
            hidden_states[-1] = x
        return x, hidden_states, attentions


class MaskedLMHead(nn.Module):
    """dense -> activation -> LayerNorm -> decoder (tied to the token embeddings) + bias. The dense layer maps the
    hidden states to the embeddings' width (H -> E, the same unless ELECTRA's tables are narrower)."""

    def __init__(self, config: ModelConfig, token_embedding: nn.Embedding):
        super().__init__()
        self.vocab_size = config.vocab_size
        E = config.embedding_width
        self.transform = nn.Linear(config.hidden_size, E, bias=config.linear_bias)
        self.act = activation(config)
        self.norm = blocks_of(config).norm(config, E)
        if config.tie_word_embeddings:
            self.decoder_weight = token_embedding.weight  # the same Parameter: one matrix, two uses
        else:
            self.decoder_weight = nn.Parameter(
                torch.empty_like(token_embedding.weight).normal_(0.0, config.initializer_range)
            )
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden: torch.Tensor, bias_inside: bool = False) -> torch.Tensor:
        """hidden (..., H) -> logits (..., V), exactly V columns even when the table is padded."""
        return self.padded_logits(hidden, bias_inside)[..., : self.vocab_size]

    def padded_logits(self, hidden: torch.Tensor, bias_inside: bool = False) -> torch.Tensor:
        """hidden (..., H) -> logits (..., V'): a column per row of the padded table (aligned to 64 rows).

        The pad columns are -inf, so a softmax or cross-entropy over them gives them
        probability and gradient 0. The training loss uses these as they are: cutting
        the pad columns first cost a zero-filled (N, V') gradient in every backward pass.

        The bias is added outside the matmul: under bf16 autocast the fp32 add promotes the logits to fp32.
        `bias_inside` (the export, on (N, H) rows) adds it in the product instead: ONNX's Gemm then reads the tied
        table as the embeddings store it, where a product and an add would make the exporter fold in a transposed
        copy of the table (a second 94 MB in BERT-base's graph).
        """
        h = self.transformed(hidden)  # (..., E)
        if bias_inside:
            return F.linear(h, self.decoder_weight, self.padded_bias())  # (..., V')
        return F.linear(h, self.decoder_weight) + self.padded_bias()  # (..., V')

    def transformed(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden (..., H) -> (..., E): what the decoder reads."""
        return self.norm(self.act(self.transform(hidden)))

    def padded_bias(self) -> torch.Tensor:
        """The bias (V',), -inf on the padded table's spare rows."""
        pad = self.decoder_weight.shape[0] - self.vocab_size
        return torch.cat([self.bias, self.bias.new_full((pad,), float("-inf"))])

    def loss(self, hidden: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean cross-entropy, right predictions) of hidden (N, H) against targets (N,), IGNORE_INDEX where a row
        counts for nothing, without the (N, V) logits (vocabulary_loss.py)."""
        return linear_cross_entropy(self.transformed(hidden), self.decoder_weight, self.padded_bias(), targets)


@dataclass
class PreTrainingOutput:
    loss: torch.Tensor | None  # mlm_loss + nsp_loss (or mlm_loss alone without NSP labels)
    mlm_loss: torch.Tensor | None
    nsp_loss: torch.Tensor | None
    mlm_logits: torch.Tensor | None  # (B, T, V) without labels; with them (N, V) at labelled positions, if kept
    nsp_logits: torch.Tensor | None  # (B, 2): column 0 = IsNext, 1 = NotNext; None when training MLM only
    mlm_targets: torch.Tensor | None = None  # (N,) the labels of the labelled positions, mlm_logits' rows
    mlm_hits: torch.Tensor | None = None  # 0-d: right predictions, counted with the loss where no logits are kept
    # ELECTRA (electra.py): the discriminator's replaced-token loss, mean over real tokens, and its counts (0-d)
    rtd_loss: torch.Tensor | None = None
    rtd_correct: torch.Tensor | None = None  # tokens judged right: replaced or original
    rtd_tokens: torch.Tensor | None = None  # real (non-padding) tokens judged

    def mlm_correct(self) -> torch.Tensor:
        """Number of correct MLM predictions, a 0-d tensor (no host sync).

        max(-1).indices is argmax (the first maximum wins ties, as documented for both) at a third of argmax's
        time on CPU over (N, V) bf16 logits: argmax there took 28 ms of a 120 ms demo step.
        """
        if self.mlm_hits is not None:
            return self.mlm_hits
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
        keep_logits: bool = False,
    ) -> PreTrainingOutput:
        """mlm_labels (B, T): the original id where a prediction is due, -100 elsewhere.
        nsp_labels (B,): 0 = IsNext, 1 = NotNext; omit them to train MLM only.
        document_ids (B, T): the documents of packed windows, kept apart (BertModel).
        keep_logits: with labels, return the (N, V) logits too (ELECTRA's generator samples from them). On a CPU
        the loss is otherwise computed without them, a block of rows at a time in cache (vocabulary_loss.py); on a
        GPU, whose memory outruns a loop's launches, and under torch.compile, which fuses the plain form, from them."""
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
        predicted = encoded.sequence_output.flatten(0, 1)[rows]  # (N', H)
        nsp_loss = F.cross_entropy(nsp_logits.float(), nsp_labels) if nsp_labels is not None else None
        if keep_logits or predicted.device.type != "cpu" or torch.compiler.is_compiling():
            logits = self.mlm_head.padded_logits(predicted)  # (N', V')
            mlm_loss = F.cross_entropy(logits.float(), targets, ignore_index=IGNORE_INDEX) if n else logits.sum() * 0
            mlm_logits, hits = logits[:n, : self.config.vocab_size], None  # (N, V)
        else:
            (mlm_loss, hits), mlm_logits = self.mlm_head.loss(predicted, targets), None
        loss = mlm_loss if nsp_loss is None else mlm_loss + nsp_loss
        return PreTrainingOutput(loss, mlm_loss, nsp_loss, mlm_logits, nsp_logits, targets[:n], hits)


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


def hidden_matrices(model: nn.Module) -> list[nn.Parameter]:
    """The weight matrices of the encoder layers (attention and feed-forward): what Muon steps. Embedding tables,
    heads and every 1-d parameter are left to AdamW."""
    layers = (m for m in model.modules() if isinstance(m, EncoderLayer))
    return [p for layer in layers for p in layer.parameters() if p.ndim == 2 and p.requires_grad]


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


def init_residual_outputs(model: nn.Module, how: str) -> None:
    """Initialise again the projections that write to the residual stream (attention's `out`, the feed-forward's
    `down`), whose sum over a stack's layers is what it adds to the embeddings: `normal` keeps init_weights'
    N(0, initializer_range), `scaled` divides that std by sqrt(2 x layers), so that the sum starts as large as one
    projection (GPT-2), `zero` starts every layer as the identity (the stack begins as embeddings -> head, and the
    layers grow in from the first step's gradient; modded-nanogpt). Each stack counts its own layers (ELECTRA's
    generator has fewer); biases stay zero."""
    if how == "normal":
        return
    for stack in (m for m in model.modules() if isinstance(m, BertModel)):
        std = stack.config.initializer_range / math.sqrt(2 * len(stack.layers))
        for layer in stack.layers:
            for projection in (layer.attention.out, layer.ffn.down):
                if how == "zero":
                    nn.init.zeros_(projection.weight)
                else:
                    nn.init.normal_(projection.weight, 0.0, std)


def use_fast_paths(model: nn.Module, device: str, precision: str) -> None:
    """Switch on the model's fast paths for training steps, where they were measured to pay (benchmarks/README.md).

    Each computes the same result as the readable default. On CPUs in bf16 the
    explicit attention form beats PyTorch's flash kernel, whose backward pass is
    several times slower there; elsewhere the fused kernel wins or ties.
    Pre-training and fine-tuning call this. Forward-only work (inference,
    evaluation) keeps the fused kernel: it measured 1.08x faster there in bf16.
    """
    set_explicit_attention(model, device == "cpu" and precision == "bf16")
