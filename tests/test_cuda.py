"""The CUDA paths on a real GPU: the numbers the CPU computes, exact resume in every precision, and a model trained
on a GPU that answers on a CPU. Skipped where no GPU is (CI has none); test_devices.py covers the device and
precision logic on CPU everywhere."""

from __future__ import annotations

import json

import pytest
import torch

from bertforge import BertForPreTraining, ModelConfig

from conftest import (
    TINY_MODEL,
    TINY_RUN,
    assert_same_steps,
    bertforge_ok,
    prepared_data,
    save_random_model,
    train_metrics,
    whole_and_resumed,
)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

ON_GPU = [*TINY_MODEL, *TINY_RUN, "--batch-size", "8", "--eval-batches", "2", "--device", "cuda"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return prepared_data(tmp_path_factory.mktemp("cuda"), seed=7)


@pytest.mark.parametrize("attention_bias", ["none", "alibi"])
def test_the_gpu_computes_what_the_cpu_computes(attention_bias):
    """Same weights and batch, padding included: logits, losses and gradients agree in fp32 (TF32 is off)."""
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=300,
        hidden_size=64,
        num_layers=2,
        num_heads=4,
        intermediate_size=128,
        max_position_embeddings=64,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        attention_bias=attention_bias,
    )
    cpu_model = BertForPreTraining(config)
    gpu_model = BertForPreTraining(config).cuda()
    gpu_model.load_state_dict(cpu_model.state_dict())
    input_ids = torch.randint(5, 300, (4, 48))  # (B, T)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 30:] = 0  # one padded row: the masked attention path
    mlm_labels = torch.where(torch.rand(4, 48) < 0.15, input_ids, -100)
    mlm_labels[:, 0] = input_ids[:, 0]  # at least one prediction per row
    batch = dict(
        input_ids=input_ids,
        token_type_ids=(torch.arange(48) >= 24).long().expand(4, 48),
        attention_mask=attention_mask,
        mlm_labels=mlm_labels,
        nsp_labels=torch.tensor([0, 1, 0, 1]),
    )
    results = []
    for model, device in ((cpu_model, "cpu"), (gpu_model, "cuda")):
        out = model(**{k: v.to(device) for k, v in batch.items()})
        out.loss.backward()
        grads = {name: p.grad.cpu() for name, p in model.named_parameters() if p.grad is not None}
        results.append((out.mlm_logits.detach().cpu(), out.loss.item(), grads))
    (cpu_logits, cpu_loss, cpu_grads), (gpu_logits, gpu_loss, gpu_grads) = results
    torch.testing.assert_close(gpu_logits, cpu_logits, rtol=1e-4, atol=1e-4)
    assert gpu_loss == pytest.approx(cpu_loss, rel=1e-5)
    assert gpu_grads.keys() == cpu_grads.keys()
    for name in cpu_grads:
        torch.testing.assert_close(gpu_grads[name], cpu_grads[name], rtol=1e-3, atol=1e-5, msg=name)


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_resume_on_the_gpu_continues_exactly(workdir, precision):
    """2N steps in one go == N, then a resumed run for N: the CUDA RNG (dropout) and, in fp16, the loss scale
    come back with the checkpoint."""
    full = workdir / f"full_{precision}"
    resumed = whole_and_resumed(workdir / "data", full, *ON_GPU, "--precision", precision)
    assert_same_steps(full, resumed, list(range(2, 25, 2)), ("loss", "mlm_loss", "nsp_loss", "grad_norm", "lr"))
    saved = json.loads((full / "config.json").read_text())
    assert saved["train"]["precision"] == precision


def test_a_model_trained_on_the_gpu_answers_on_the_cpu(workdir, tmp_path):
    """The everyday path: pre-train on a GPU in its fast precision, then query and fine-tune on a laptop."""
    run = tmp_path / "run"
    bertforge_ok(
        "pretrain", "--data", workdir / "data", "--out", run, *ON_GPU, "--precision", "auto", "--max-steps", "40"
    )
    assert train_metrics(run)[-1]["step"] == 40
    scores = {
        device: json.loads(
            bertforge_ok("evaluate", run / "model", "--data", workdir / "data", "--device", device, "--json").stdout
        )
        for device in ("cpu", "cuda")
    }
    assert scores["cuda"]["mlm_loss"] == pytest.approx(scores["cpu"]["mlm_loss"], rel=1e-4)
    assert scores["cuda"]["mlm_acc"] == pytest.approx(scores["cpu"]["mlm_acc"], abs=1e-3)
    answers = {
        device: json.loads(
            bertforge_ok("fill-mask", run / "model", "the cat [MASK] on the mat.", "--device", device, "--json").stdout
        )["masks"][0]["predictions"]
        for device in ("cpu", "cuda")
    }
    assert answers["cuda"][0]["token"] == answers["cpu"][0]["token"]
    assert [p["score"] for p in answers["cuda"]] == pytest.approx([p["score"] for p in answers["cpu"]], rel=1e-3)


def test_fine_tuning_on_the_gpu_learns_and_the_model_classifies_on_the_cpu(wordpiece_tokenizer, tmp_path):
    pretrained = save_random_model(tmp_path / "pretrained", wordpiece_tokenizer, num_layers=2, hidden_size=48)
    rows = [
        (f"{s} sat on the mat.", kind)
        for kind in ("animal", "person")
        for s in (["the cat", "the dog", "a bird"] if kind == "animal" else ["my friend", "the teacher", "the child"])
    ] * 6
    (tmp_path / "train.tsv").write_text("sentence\tlabel\n" + "".join(f"{t}\t{k}\n" for t, k in rows))
    bertforge_ok(
        "finetune", pretrained, "--train", tmp_path / "train.tsv", "--dev", tmp_path / "train.tsv",
        "--text-column", "sentence", "--label-column", "label",
        "--out", tmp_path / "out", "--epochs", "25", "--lr", "3e-3", "--batch-size", "16", "--seq-len", "32",
        "--device", "cuda", "--quiet",
    )  # fmt: skip
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["best"]["dev_accuracy"] == 1.0, summary
    answer = json.loads(
        bertforge_ok(
            "classify", tmp_path / "out" / "model", "the dog sat on the mat.", "--device", "cpu", "--json"
        ).stdout
    )
    assert answer["label"] == "animal", answer
