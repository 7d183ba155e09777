"""The CUDA code paths' logic, exercised on CPU: precision choice, fused AdamW, autocast, GradScaler."""

from __future__ import annotations

import pytest
import torch

from bertforge import BertForPreTraining, ModelConfig
from bertforge.errors import UserError
from bertforge.optim import build_optimizer
from bertforge.runtime import autocast, resolve_device, resolve_precision


@pytest.mark.parametrize("bf16, expected", [(True, "bf16"), (False, "fp16")])
def test_auto_precision_on_cuda(monkeypatch, bf16, expected):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
    assert resolve_precision("auto", "cuda:0") == expected


def test_auto_precision_on_cpu_follows_the_measurement(monkeypatch):
    monkeypatch.setattr("bertforge.runtime.cpu_has_fast_bf16", lambda: False)
    assert resolve_precision("auto", "cpu") == "fp32"
    monkeypatch.setattr("bertforge.runtime.cpu_has_fast_bf16", lambda: True)
    assert resolve_precision("auto", "cpu") == "bf16"
    with pytest.raises(UserError, match="fp16 needs CUDA"):
        resolve_precision("fp16", "cpu")


def test_device_resolution(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu"
    with pytest.raises(UserError, match="no CUDA device"):
        resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto", local_rank=1) == "cuda:1"  # one GPU per torchrun process


def test_optimizer_groups_and_fused_flag():
    model = BertForPreTraining(
        ModelConfig(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32)
    )
    optimizer = build_optimizer(model, "cuda:0", lr=1e-4, weight_decay=0.01)
    decay, no_decay = optimizer.param_groups
    assert optimizer.defaults["fused"] is True
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    assert all(p.ndim >= 2 for p in decay["params"]) and all(p.ndim == 1 for p in no_decay["params"])
    n_unique = len({id(p) for p in model.parameters()})
    assert len(decay["params"]) + len(no_decay["params"]) == n_unique  # the tied decoder weight once
    assert build_optimizer(model, "cpu", lr=1e-4, weight_decay=0.01).defaults["fused"] is False


def test_bf16_autocast_runs_the_model_and_keeps_fp32_losses():
    torch.manual_seed(0)
    model = BertForPreTraining(
        ModelConfig(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32)
    )
    ids = torch.randint(5, 50, (2, 8))
    labels = torch.full((2, 8), -100)
    labels[:, 2] = ids[:, 2]
    with autocast("cpu", "bf16"):
        out = model(ids, mlm_labels=labels, nsp_labels=torch.tensor([0, 1]))
    assert out.nsp_logits.dtype == torch.bfloat16  # autocast took effect
    assert out.mlm_logits.dtype == torch.float32  # the fp32 bias add promotes: the softmax over V stays fp32
    assert out.loss.dtype == torch.float32 and torch.isfinite(out.loss)
