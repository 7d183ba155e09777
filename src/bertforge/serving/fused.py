"""The int8 export's attention as ONNX Runtime's fused operator (com.microsoft `Attention`), which its quantizer
turns into `QAttention`: the QKV product in int8 and the heads' attention in one kernel.

Traced as PyTorch computes it, BERT's attention is some twenty operators a layer: the QKV product, slices, reshapes
and transposes to heads, scaled products, the padding mask added, softmax, a guard against rows with no key, and the
heads transposed back. Each reads and writes the activations again. On all-MiniLM-L6-v2 (2,000 SST-2 sentences,
batch 32, 2 cores of a Xeon with AVX-512 VNNI) they were 0.9 s of the int8 graph's 2.7 s; the fused operator serves
the same sentences 1.34x as fast (813 to 1,089 sentences/s), its vectors as close to PyTorch's as before
(benchmarks/README.md). The float export keeps ONNX's standard operators: any ONNX runtime serves it.

Only attention that the operator computes is fused: BERT's own, with a padding mask. A layer that adds a bias
(ALiBi, relative position buckets), turns its queries (rotary positions), adds score terms (DeBERTa) or limits what
a query sees (ModernBERT's windows, documents) is traced as it is.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..model.bert import SelfAttention, View
from .smoothing import Smoothed

DOMAIN = "com.microsoft"  # ONNX Runtime's contributed operators


class _Attention(torch.autograd.Function):
    """In PyTorch, BERT's attention from the layer's input and its QKV weights; in the graph, one Attention node."""

    @staticmethod
    def forward(ctx, x, weight, bias, keep, num_heads: int):
        """x (B, T, H), weight (3H, H), bias (3H,), keep (B, T) int32, 1 where a key is a real token."""
        B, T, H = x.shape
        qkv = F.linear(x, weight, bias)  # (B, T, 3H)
        q, k, v = (part.view(B, T, num_heads, H // num_heads).transpose(1, 2) for part in qkv.split(H, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep.bool()[:, None, None, :])  # (B, nh, T, hs)
        return y.transpose(1, 2).reshape(B, T, H)  # (B, T, H)

    @staticmethod
    def symbolic(g, x, weight, bias, keep, num_heads: int):
        weight = g.op("Transpose", weight, perm_i=[1, 0])  # the operator takes (H, 3H): folded into the weights
        attended = g.op(f"{DOMAIN}::Attention", x, weight, bias, keep, num_heads_i=num_heads)
        return attended.setType(x.type())  # (B, T, H) as its input: the exporter cannot infer a foreign op's shape


class FusedAttention(nn.Module):
    """A layer's SelfAttention, exported as the fused operator where its mask is padding alone."""

    def __init__(self, attention: SelfAttention):
        super().__init__()
        self.attention = attention
        self.fused = False  # whether a call took the operator (the exporter must then be told its domain)

    def forward(self, x: torch.Tensor, view: View, need_weights: bool = False):
        mask = view.mask  # None, or bool (B, 1, 1, T) for padding keys; anything else is not the operator's
        if need_weights or mask is None or mask.is_floating_point() or mask.shape[1:3] != (1, 1):
            return self.attention(x, view, need_weights)
        self.fused = True
        B, T, H = x.shape
        qkv = self.attention.qkv
        if isinstance(qkv, Smoothed):
            x = x * qkv.inverse  # the operator reads the weights alone: the smoothing's input scales go first
        bias = qkv.bias if qkv.bias is not None else x.new_zeros(3 * H)
        keep = mask.reshape(B, T).to(torch.int32)  # (B, T)
        attended = _Attention.apply(x, qkv.weight, bias, keep, self.attention.num_heads)  # (B, T, H)
        return self.attention.out(attended), None


def fuse_attention(model: nn.Module) -> list[FusedAttention]:
    """Put FusedAttention around each of BERT's own attentions in `model` (a subclass computes otherwise: kept);
    returns them, to ask after a forward pass which took the operator."""
    wrapped = []
    for parent in list(model.modules()):
        for name, child in parent.named_children():
            if type(child) is SelfAttention:
                wrapped.append(FusedAttention(child))
                setattr(parent, name, wrapped[-1])
    return wrapped
