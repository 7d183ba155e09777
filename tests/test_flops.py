"""MFU's two halves: the useful-FLOP count against torch's own FLOP counter, and the peak it is divided by."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import bertforge.engine.hardware as flops
import bertforge.model.bert as bertforge_model
from bertforge import BertForPreTraining, ModelConfig
from bertforge.engine.hardware import PeakMeter
from bertforge.model.bert import IGNORE_INDEX, set_explicit_attention
from bertforge.training.flops import training_flops_per_token


@pytest.mark.parametrize("explicit", [False, True], ids=["sdpa", "explicit"])
@pytest.mark.parametrize("feed_forward", ["mlp", "glu"])
def test_the_flop_count_of_a_training_step_matches_torchs_counter(explicit, feed_forward, monkeypatch):
    """Forward and backward of one batch, every matmul counted by torch.utils.flop_counter, against the PaLM
    count the trainer's MFU uses. The count's one approximation is the pooler, charged per token though it runs
    on [CLS] only: the two must agree within that."""
    monkeypatch.setattr(bertforge_model, "GATHERED_ROWS_MULTIPLE", 1)  # the head runs on exactly the masked rows
    config = ModelConfig(
        vocab_size=512,
        hidden_size=64,
        num_layers=4,
        num_heads=4,
        intermediate_size=256,
        max_position_embeddings=64,
        feed_forward=feed_forward,
    )
    torch.manual_seed(0)
    model = BertForPreTraining(config)
    set_explicit_attention(model, explicit)
    B, T = 4, 64
    ids = torch.randint(5, 512, (B, T))
    labels = torch.where(torch.rand(B, T) < 0.15, ids, IGNORE_INDEX)
    masked = int((labels != IGNORE_INDEX).sum())
    with FlopCounterMode(display=False) as counter:
        model(
            ids, torch.zeros_like(ids), mlm_labels=labels, nsp_labels=torch.zeros(B, dtype=torch.long)
        ).loss.backward()
    counted = counter.get_total_flops()
    ours = training_flops_per_token(config, T, masked / (B * T)) * B * T
    pooler_approximation = 6 * config.hidden_size**2 * B * T
    assert abs(counted - ours) <= pooler_approximation
    assert counted == pytest.approx(ours, rel=0.03)


def test_the_peak_meter_keeps_the_best_sample_and_samples_again_after_its_interval(monkeypatch):
    samples = iter([50.0, 40.0, 90.0, 70.0, 120.0])  # warm-up, start-up, then each sample current() takes
    monkeypatch.setattr(flops, "matmul_flops_per_second", lambda a, b: next(samples))
    clock = itertools.count(0.0, 10.0)  # each reading of the clock 10 s after the previous
    monkeypatch.setattr(flops.time, "perf_counter", lambda: next(clock))
    meter = PeakMeter("cpu", torch.float32, interval=15.0, seconds=0.0)
    assert meter.peak == 40.0  # the warm-up sample is not counted
    assert meter.current() == 40.0  # 10 s since the last sample: none taken
    # Every other call is 20 s after the last sample, and takes one; a slower sample never lowers the peak.
    assert [meter.current() for _ in range(6)] == [90.0, 90.0, 90.0, 90.0, 120.0, 120.0]
