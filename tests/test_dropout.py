"""Dropout with four 16-bit uniforms per 64-bit draw: F.dropout's statistics, gradient and reproducibility."""

from __future__ import annotations

import math

import pytest
import torch

from bertforge.model.dropout import dropout, keep_mask

from conftest import within_binomial

N = 400_000


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_each_of_the_four_lanes_drops_at_the_rate_independently_of_its_neighbour(p):
    torch.manual_seed(0)
    keep, _ = keep_mask(torch.Size((N // 4, 4)), p)  # column j = lane j of each 64-bit draw
    dropped = ~keep
    assert within_binomial(dropped.float().mean().item() * (N), N, p, sigmas=5)
    for lane in range(4):
        assert within_binomial(dropped[:, lane].float().mean().item() * (N // 4), N // 4, p, sigmas=5)
    for lane in range(3):  # two lanes of one draw, then across draws (row i lane 3 with row i + 1 lane 0)
        both = (dropped[:, lane] & dropped[:, lane + 1]).float().mean().item()
        assert within_binomial(both * (N // 4), N // 4, p * p, sigmas=5)
    across = (dropped[:-1, 3] & dropped[1:, 0]).float().mean().item()
    assert within_binomial(across * (N // 4 - 1), N // 4 - 1, p * p, sigmas=5)


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_kept_values_are_scaled_by_the_rounded_rate_so_the_mean_is_kept(p):
    torch.manual_seed(1)
    x = torch.ones(N)
    y = dropout(x, p, training=True)
    dropped_levels = round(p * 65536)
    scale = 65536 / (65536 - dropped_levels)
    torch.testing.assert_close(y[y != 0], torch.full_like(y[y != 0], scale))
    assert within_binomial((y == 0).float().mean().item() * (N), N, dropped_levels / 65536, sigmas=5)
    assert abs(y.mean().item() - 1.0) < 5 * math.sqrt(p / (1 - p) / N)


def test_the_gradient_flows_through_kept_elements_only_with_the_same_scale():
    torch.manual_seed(2)
    x = (torch.rand(64, 33) + 0.5).requires_grad_()  # no zeros: y == 0 exactly where dropped
    y = dropout(x, 0.25, training=True)
    y.backward(torch.ones_like(y))
    kept = y != 0
    assert 0 < kept.sum() < kept.numel()
    torch.testing.assert_close(x.grad, kept.float() * (65536 / (65536 - 16384)))
    torch.testing.assert_close(y, x.detach() * x.grad)


def test_masks_follow_the_global_seed_and_differ_between_calls():
    x = torch.ones(1000)
    torch.manual_seed(3)
    first, second = dropout(x, 0.5, True), dropout(x, 0.5, True)
    torch.manual_seed(3)
    assert torch.equal(dropout(x, 0.5, True), first)
    assert not torch.equal(first, second)


def test_evaluation_and_p_zero_return_the_input_and_bf16_stays_bf16():
    x = torch.randn(5, 7)
    assert dropout(x, 0.5, training=False) is x
    assert dropout(x, 0.0, training=True) is x
    assert dropout(x.bfloat16(), 0.5, training=True).dtype == torch.bfloat16


def test_cpu_attention_with_dropout_takes_the_explicit_form_with_this_mask():
    """In training on CPU, attention with dropout computes what the probabilities-returning form does, mask
    included: the fused kernel (which would draw torch's mask instead) is not used."""
    from bertforge import ModelConfig
    from bertforge.model.bert import SelfAttention, View

    config = ModelConfig(vocab_size=50, hidden_size=32, num_layers=1, num_heads=4, intermediate_size=64)
    config.attention_dropout = 0.3
    attention = SelfAttention(config).train()
    x = torch.randn(2, 9, 32)
    torch.manual_seed(4)
    fused_or_explicit, _ = attention(x, View(None))
    torch.manual_seed(4)
    explicit, probs = attention(x, View(None), need_weights=True)
    assert probs is not None
    torch.testing.assert_close(fused_or_explicit, explicit, rtol=0, atol=0)
    torch.manual_seed(4)
    attention.eval()
    assert not torch.allclose(attention(x, View(None))[0], explicit)  # dropout did act in training
