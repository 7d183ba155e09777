"""The position arithmetic that bertforge's encoder and the exported modeling file both compute: torch alone.

assets/modeling_bertforge.py, which travels with a model to machines without bertforge, carries `alibi_bias`,
`rotary_angles` and `rotate` as they are written here, byte for byte (tests/test_hf_parity.py compares the
source): a change here fails that test until the modeling file has it too.
"""

from __future__ import annotations

import math

import torch


def sinusoidal_table(num_positions: int, dim: int, rms: float) -> torch.Tensor:
    """Fixed positions of "Attention Is All You Need": sin on even, cos on odd dims, scaled so that the entries'
    root mean square is `rms` (the paper's unscaled table has 1/√2)."""
    position = torch.arange(num_positions, dtype=torch.float32).unsqueeze(1)  # (P, 1)
    inv_freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))  # (dim/2,)
    table = torch.zeros(num_positions, dim)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq[: dim // 2])
    return table * (rms * math.sqrt(2))  # (P, dim): each sin/cos pair has sin² + cos² = 1


def alibi_bias(num_heads: int, seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """ALiBi's distance penalty, symmetric for an encoder: -m_h·|i - j|, with slopes m_h = 1/2, 1/4, 1/8, ...

    Added to the attention scores, it makes each head prefer near keys from the
    first step (head h mostly within about 2^(h+1) tokens) instead of having to
    learn from the position table which positions are neighbours.
    """
    slopes = 2.0 ** -torch.arange(1, num_heads + 1, dtype=torch.float32, device=device)  # (nh,)
    position = torch.arange(seq_len, dtype=torch.float32, device=device)
    distance = (position[:, None] - position[None, :]).abs()  # (T, T)
    return -slopes[:, None, None] * distance  # (nh, T, T)


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
