"""The runtime's choices, exercised on CPU: the CUDA paths' logic (precision choice, fused AdamW, autocast,
GradScaler) and the allocator setting of CPU training."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

from bertforge import BertForPreTraining, ModelConfig
from bertforge.engine.optim import build_optimizer
from bertforge.engine.runtime import _GLIBC, autocast, resolve_device, resolve_precision
from bertforge.errors import UserError


@pytest.mark.parametrize("bf16, expected", [(True, "bf16"), (False, "fp16")])
def test_auto_precision_on_cuda(monkeypatch, bf16, expected):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
    assert resolve_precision("auto", "cuda:0") == expected


def test_auto_precision_on_cpu_follows_the_measurement(monkeypatch):
    monkeypatch.setattr("bertforge.engine.runtime.cpu_has_fast_bf16", lambda: False)
    assert resolve_precision("auto", "cpu") == "fp32"
    monkeypatch.setattr("bertforge.engine.runtime.cpu_has_fast_bf16", lambda: True)
    assert resolve_precision("auto", "cpu") == "bf16"
    with pytest.raises(UserError, match="fp16 needs CUDA"):
        resolve_precision("fp16", "cpu")


def test_bf16_asked_for_on_a_cpu_that_would_emulate_it_is_warned_about(monkeypatch):
    monkeypatch.setattr("bertforge.engine.runtime.cpu_has_bf16_instructions", lambda: False)
    with pytest.warns(UserWarning, match="emulated"):
        assert resolve_precision("bf16", "cpu") == "bf16"  # what was asked for, with the warning
    monkeypatch.setattr("bertforge.engine.runtime.cpu_has_bf16_instructions", lambda: True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_precision("bf16", "cpu") == "bf16"
        assert resolve_precision("bf16", "cuda:0") == "bf16"


def test_device_resolution(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu"
    with pytest.raises(UserError, match="no CUDA device"):
        resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("auto", local_rank=1) == "cuda:1"  # one GPU per torchrun process
    assert resolve_device("cuda:1") == "cuda:1"
    with pytest.raises(UserError, match=r"cuda:2 does not exist: this machine has 2 GPU\(s\).*--nproc_per_node 2"):
        resolve_device("auto", local_rank=2)  # a third process on a node with two GPUs
    with pytest.raises(UserError, match=r"cuda:3 does not exist: this machine has 2 GPU\(s\), cuda:0 to cuda:1$"):
        resolve_device("cuda:3")
    with pytest.raises(UserError, match="cuda or cuda:N"):
        resolve_device("cuda:one")


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
    assert build_optimizer(model, "cpu", lr=1e-4, weight_decay=0.01).defaults["fused"] is True
    assert build_optimizer(model, "mps", lr=1e-4, weight_decay=0.01).defaults["fused"] is False


def test_bf16_autocast_runs_the_model_and_keeps_fp32_losses():
    torch.manual_seed(0)
    model = BertForPreTraining(
        ModelConfig(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32)
    ).eval()  # no dropout: the two passes below see the same network
    ids = torch.randint(5, 50, (2, 8))
    labels = torch.full((2, 8), -100)
    labels[:, 2] = ids[:, 2]
    with autocast("cpu", "bf16"):
        out = model(ids, mlm_labels=labels, nsp_labels=torch.tensor([0, 1]), keep_logits=True)
        blockwise = model(ids, mlm_labels=labels, nsp_labels=torch.tensor([0, 1]))
    assert out.nsp_logits.dtype == torch.bfloat16  # autocast took effect
    assert out.mlm_logits.dtype == torch.float32  # the fp32 bias add promotes: the softmax over V stays fp32
    assert out.loss.dtype == blockwise.loss.dtype == torch.float32 and torch.isfinite(out.loss)
    torch.testing.assert_close(blockwise.loss, out.loss)


def test_bf16_inference_stays_within_the_stated_tolerance_of_fp32(wordpiece_tokenizer):
    """`--precision bf16` for fill-mask, nsp and embed: probabilities within 1e-2, embeddings at cosine >= 0.999."""
    from bertforge.inference import Bert

    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=wordpiece_tokenizer.get_vocab_size(), hidden_size=64, num_layers=2, num_heads=2,
        intermediate_size=128, initializer_range=0.2,  # wide weights: peaked answers, so the test can fail
    )  # fmt: skip
    model = BertForPreTraining(config)
    exact, fast = (Bert(model, wordpiece_tokenizer, precision=p) for p in ("fp32", "bf16"))
    assert fast.precision == "bf16"
    text = "the cat sat on the [MASK] and [MASK] looked at the window."
    every = wordpiece_tokenizer.get_vocab_size()  # bf16's whole distribution: a near-tie may reorder ranks 5 and 6
    for a, b in zip(exact.fill_mask(text, top_k=5)["masks"], fast.fill_mask(text, top_k=every)["masks"]):
        assert a["predictions"][0]["score"] > 0.05  # a peaked answer, not a uniform one
        scores = {p["token_id"]: p["score"] for p in b["predictions"]}
        assert a["predictions"][0]["token_id"] in [p["token_id"] for p in b["predictions"][:5]]
        for p in a["predictions"]:
            assert abs(p["score"] - scores[p["token_id"]]) <= 1e-2
    assert abs(exact.nsp("the cat sat.", "the dog ran.")["is_next_prob"] - fast.nsp("the cat sat.", "the dog ran.")[
        "is_next_prob"]) <= 1e-2  # fmt: skip
    texts = ["the cat sat on the mat.", "a bird found the money in the garden.", "my friend painted the red house."]
    for pooling in ("cls", "mean"):
        x, y = exact.embed(texts, pooling=pooling), fast.embed(texts, pooling=pooling)
        cosine = (x * y).sum(1) / (np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1))
        assert cosine.min() >= 0.999 and y.dtype == np.float32


# Steps that each allocate and free a 64 MB tensor; the page faults of the last two, once the heap has settled.
STEPS = """
import resource, sys, torch
from bertforge.engine.runtime import keep_freed_memory
if sys.argv[1] == "kept":
    keep_freed_memory()
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for step in range(12):
    if step == 4:
        start = faults()
    torch.ones(16 * 2**20).sum()
print(faults() - start)
"""


@pytest.mark.skipif(_GLIBC is None, reason="the setting is glibc's")
def test_kept_memory_is_reused_instead_of_faulted_in_again():
    """glibc's default unmaps a freed 64 MB block and faults the next one in page by page; the trainer's setting
    keeps it for the next step."""

    def faults(allocator: str) -> int:
        done = subprocess.run([sys.executable, "-c", STEPS, allocator], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return int(done.stdout.split()[-1])

    default = faults("default")
    assert default >= 8 * 32, default  # every step faults its block in: 131,080 with 4 kB pages (measured)
    # Kept, glibc still places a block afresh now and then: 0 in most of 30 runs, 2 of the 8 steps at most, but
    # once 6 of 8 (a CI run); the fewest of three runs says what the setting does, not what one run met.
    kept = min(faults("kept") for _ in range(3))
    assert kept * 2 < default, (kept, default)
