"""DeBERTa's disentangled attention (He et al. 2021; v3, He et al. 2023): no positions added to the tokens; each
layer's scores add, to content-to-content, a content-to-position and a position-to-content term over the relative
position of every query and key, log-bucketed past a few dozen tokens, from one table of relative positions the
layers share (LayerNorm'd), projected by each layer's own query and key matrices (DeBERTa-v3 shares them).

    scores[i, j] = ( q_i·k_j  +  q_i·pk[δ(i, j)]  +  k_j·pq[δ(i, j)] ) / √(3·hs)
    δ(i, j)      = clamp(bucket(i - j) + span, 0, 2·span - 1)      span = 256 buckets a direction
    pk, pq       = the shared table (2·span, H) through the layer's key and query projections

Two blocks, built in place of BERT's from the `disentangled` position scheme's record (variants.py): the sight
(`DisentangledSight`) holds the shared table and hands each layer the table and the buckets (View.relative); the
attention (`DisentangledSelfAttention`) scales its queries by 1/√3 and adds the two position terms as a bias
(SelfAttention.scores_mask), so PyTorch's fused attention still computes the rest.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .bert import SelfAttention, Sight, View, additive_mask
from .config import ModelConfig
from .dropout import Dropout

BUCKETS = 256  # position_buckets of every released DeBERTa-v2 and v3
TERMS = 3  # content-to-content, content-to-position, position-to-content: the scores are scaled by √(3·hs)


def log_buckets(seq_len: int, device: torch.device, buckets: int, max_position: int) -> torch.Tensor:
    """(T, T) the bucket of each query-key distance i - j, as DeBERTa's `make_log_bucket_position` gives it: the
    distance itself within half the buckets, then logarithmically coarser out to `max_position`, signed."""
    position = torch.arange(seq_len, device=device)
    distance = position[:, None] - position[None, :]  # (T, T): query - key
    mid = buckets // 2
    near = (distance < mid) & (distance > -mid)
    magnitude = torch.where(near, torch.tensor(mid - 1, device=device), distance.abs())
    scale = torch.log(torch.tensor((max_position - 1) / mid))  # in float32, as DeBERTa's: a bucket's edge is exact
    far = torch.ceil(torch.log(magnitude / mid) / scale * (mid - 1)) + mid
    return torch.where(magnitude <= mid, distance.to(far.dtype), far * torch.sign(distance)).long()  # (T, T)


class DisentangledSight(nn.Module):
    """BERT's mask, and for every layer the shared table of relative positions (LayerNorm'd) and each query-key
    pair's row in it, δ(i, j)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.num_layers = config.num_layers
        self.max_position = config.max_position_embeddings
        self.relative = nn.Embedding(2 * BUCKETS, config.hidden_size)  # (2·span, H)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, input_ids, attention_mask, document_ids, positions) -> list[View]:
        seq_len = input_ids.shape[1]
        buckets = log_buckets(seq_len, input_ids.device, BUCKETS, self.max_position)  # (T, T)
        rows = (buckets + BUCKETS).clamp(0, 2 * BUCKETS - 1)  # (T, T): δ(i, j)
        table = self.norm(self.relative.weight)  # (2·span, H)
        return [View(Sight.mask(attention_mask, document_ids), relative=(table, rows))] * self.num_layers


class DisentangledSelfAttention(SelfAttention):
    """Attention with DeBERTa's content-to-position and position-to-content terms, the relative table projected by
    this layer's own query and key matrices (the parts of its fused QKV)."""

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        self.position_dropout = Dropout(config.hidden_dropout)  # on the shared table, as each layer reads it

    def place(self, query_key: torch.Tensor, view: View) -> torch.Tensor:
        """Queries scaled by 1/√3: with SelfAttention's 1/√hs, q·k is scaled by 1/√(3·hs)."""
        H = query_key.shape[-1] // 2
        return torch.cat([query_key[..., :H] / math.sqrt(TERMS), query_key[..., H:]], dim=-1)  # (B, T, 2H)

    def scores_mask(self, q: torch.Tensor, k: torch.Tensor, view: View) -> torch.Tensor:
        """The two position terms, (B, nh, T, T), scaled as q·k is, plus the view's mask (-inf where out of sight);
        q (B, nh, T, hs) comes scaled by 1/√3 (`place`), k as projected."""
        table, rows = view.relative  # (2·span, H), (T, T)
        H = self.num_heads * self.head_size
        table = self.position_dropout(table)
        projected = table @ self.qkv.weight[: 2 * H].T  # (2·span, 2H): the table through W_q and W_k
        if self.qkv.bias is not None:
            projected = projected + self.qkv.bias[: 2 * H]
        pq, pk = (part.view(-1, self.num_heads, self.head_size).transpose(0, 1) for part in projected.split(H, -1))
        B, nh, T, hs = q.shape  # pq, pk: (nh, 2·span, hs)
        index = rows.expand(B, nh, T, T)
        c2p = torch.gather(q @ pk.transpose(-1, -2).to(q.dtype), -1, index)  # (B, nh, T, T): q_i·pk[δ(i, j)]
        p2c = torch.gather(k @ pq.transpose(-1, -2).to(k.dtype), -1, index.transpose(-1, -2))  # [j, i]: k_j·pq[δ]
        terms = (c2p + p2c.transpose(-1, -2) / math.sqrt(TERMS)) / math.sqrt(hs)  # (B, nh, T, T)
        return terms if view.mask is None else terms + additive_mask(view.mask, terms.dtype)
