"""FLOP accounting for MFU: MFU = achieved useful FLOP/s ÷ measured peak FLOP/s (engine/hardware.py).

Useful FLOPs follow the PaLM count: 6 FLOPs per parameter per token (forward + backward) for the non-embedding
parameters, plus attention's 12·L·H·T per token. The MLM head is counted only at the positions it actually runs
on (the masked ones).
"""

from __future__ import annotations

import dataclasses

from ..model.config import ModelConfig
from .config import TrainConfig


def training_flops_per_token(config: ModelConfig, seq_len: int, mask_fraction: float) -> float:
    """Forward + backward FLOPs per input token of BertForPreTraining."""
    H, L, inner = config.hidden_size, config.num_layers, config.intermediate_size
    ffn = config.feed_forward_kind.matrices * H * inner  # a gated unit's up makes gate and value
    per_layer = 4 * H * H + ffn  # QKV, attention output, feed-forward (weights only)
    body = L * per_layer + H * H  # + pooler (on [CLS] only, a rounding error either way)
    head = (H * H + H * config.vocab_size) * mask_fraction  # transform + decoder, masked positions only
    attention = 12 * L * H * seq_len  # q·kᵀ and p·v, forward and backward (PaLM appendix B)
    return 6 * (body + head) + attention


def pretraining_flops_per_token(config: ModelConfig, cfg: TrainConfig, mask_fraction: float) -> float:
    """Per input token of what `cfg.objective` trains; ELECTRA's discriminator has its per-token head, no MLM head,
    and its generator is an MLM model of `generator_layers` layers."""
    if not cfg.token_task.discriminator:
        return training_flops_per_token(config, cfg.seq_len, mask_fraction)
    generator = dataclasses.replace(config, num_layers=cfg.generator_layers)
    discriminator_head = 6 * (config.hidden_size**2 + config.hidden_size)
    return (
        training_flops_per_token(generator, cfg.seq_len, mask_fraction)
        + training_flops_per_token(config, cfg.seq_len, 0.0)
        + discriminator_head
    )
