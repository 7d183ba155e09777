"""MPNet's relative attention bias (Song et al. 2020, as T5's, Raffel et al. 2020): every layer adds to its scores a
learned value per head for the bucket of each query-key distance, from one table the layers share.

    distance j - i  ->  bucket: 16 a direction; exact for the 8 nearest, then log-spaced out to 128, the last
                        bucket for anything farther
    table (32, nh)  ->  bias (1, nh, T, T), added to every layer's scores before the softmax

It is a sight (bert.py's `Sight`: what each layer's attention sees), built in the place of BERT's from the
`relative` attention bias's record (variants.py); the encoder holds it as a module, so its table is a weight of the
model (`bert.sight.relative_attention_bias`, MPNet's `encoder.relative_attention_bias`).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .bert import Sight, View
from .config import ModelConfig

BUCKETS = 32  # MPNetEncoder buckets into 32 whatever its config says
MAX_DISTANCE = 128


def relative_buckets(seq_len: int, device: torch.device, buckets: int = BUCKETS, far: int = MAX_DISTANCE):
    """(T, T) the bucket of each key's distance from each query, as MPNet's `relative_position_bucket` gives it:
    half the buckets for keys before the query, half after; in each, one bucket a distance up to a quarter of the
    buckets, then logarithmically wider ones up to `far`."""
    position = torch.arange(seq_len, device=device)
    distance = position[:, None] - position[None, :]  # (T, T): query - key
    half = buckets // 2
    bucket = (distance < 0).long() * half  # keys after the query take the upper half
    distance = distance.abs()
    exact = half // 2
    logarithmic = (
        exact + (torch.log(distance.float() / exact) / math.log(far / exact) * (half - exact)).long()
    )  # (T, T); -inf at distance 0, never taken
    logarithmic = logarithmic.clamp(max=half - 1)
    return bucket + torch.where(distance < exact, distance, logarithmic)  # (T, T)


class RelativeBucketSight(nn.Module):
    """What each layer's attention sees in MPNet: BERT's mask, and one bias for every layer from the shared table."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.num_layers = config.num_layers
        self.relative_attention_bias = nn.Embedding(BUCKETS, config.num_heads)  # (buckets, nh)

    def forward(self, input_ids, attention_mask, document_ids, positions) -> list[View]:
        """One View per layer, all the same: the bias (1, nh, T, T), -inf folded in where a key is out of sight."""
        buckets = relative_buckets(input_ids.shape[1], input_ids.device)  # (T, T)
        bias = self.relative_attention_bias(buckets).permute(2, 0, 1)[None]  # (1, nh, T, T)
        mask = Sight.mask(attention_mask, document_ids)
        bias = bias if mask is None else bias.masked_fill(~mask, float("-inf"))  # (B, nh, T, T)
        return [View(bias)] * self.num_layers
