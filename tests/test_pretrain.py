"""The main job end to end: pretrain, resume exactly, save atomically, stop cleanly, answer questions."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from bertforge.checkpoint import checkpoint_dirs
from bertforge.config import ModelConfig, TrainConfig
from bertforge.errors import UserError
from bertforge.train import Trainer, lr_factor

from conftest import make_documents, write_corpus

TINY = ["--preset", "tiny", "--hidden-size", "32", "--num-heads", "2", "--intermediate-size", "64", "--num-layers", "2",
        "--max-position-embeddings", "64", "--seq-len", "64", "--batch-size", "8", "--precision", "fp32", "--num-workers", "0",
        "--eval-batches", "2", "--quiet"]


def bertforge(*args, check=True, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "bertforge", *map(str, args)], capture_output=True, text=True, **kwargs)
    if check and done.returncode != 0:
        raise AssertionError(f"bertforge {' '.join(map(str, args))} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done


def metrics(run_dir: Path, split: str = "train") -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["split"] == split]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretrain")
    write_corpus(root / "corpus.txt", make_documents(n_docs=40, sentences=8, seed=5))
    bertforge("tokenizer", "train", root / "corpus.txt", "--out", root / "tok", "--vocab-size", "120", "--min-frequency", "1")
    bertforge("prepare", root / "corpus.txt", "--tokenizer", root / "tok", "--out", root / "data", "--valid-fraction", "0.1")
    return root


def test_tiny_run_end_to_end(workdir):
    run = workdir / "e2e"
    bertforge("pretrain", "--data", workdir / "data", "--out", run, *TINY, "--max-steps", "30", "--log-every", "5",
              "--eval-every", "15", "--save-every", "15", "--keep-last", "1")
    train = metrics(run)
    assert [r["step"] for r in train] == [5, 10, 15, 20, 25, 30]
    for key in ("tokens", "loss", "mlm_loss", "nsp_loss", "mlm_acc", "nsp_acc", "lr", "grad_norm", "tokens_per_s", "mfu"):
        assert all(key in r for r in train), key
    assert train[-1]["loss"] < train[0]["loss"]
    assert [r["step"] for r in metrics(run, "valid")] == [15, 30]
    assert [p.name for p in checkpoint_dirs(run)] == ["step_000030"]  # keep-last 1
    for name in ("config.json", "model.safetensors", "tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        assert (run / "model" / name).is_file(), name
    assert (run / "plots" / "training_curves.png").stat().st_size > 10_000

    evaluation = json.loads(bertforge("evaluate", run, "--data", workdir / "data", "--json").stdout)
    assert 0 <= evaluation["mlm_acc"] <= 1 and evaluation["perplexity"] > 1 and "nsp_acc" in evaluation
    raw = json.loads(bertforge("evaluate", run, "--data", workdir / "corpus.txt", "--json").stdout)
    assert raw["masked_tokens"] > 0
    filled = json.loads(bertforge("fill-mask", run, "the cat sat on the [MASK].", "--json").stdout)
    assert len(filled["masks"][0]["predictions"]) == 5
    # a checkpoint is a complete model directory too: an intermediate step can be queried and fine-tuned
    step = checkpoint_dirs(run)[-1]
    from_checkpoint = json.loads(bertforge("fill-mask", step, "the cat sat on the [MASK].", "--json").stdout)
    assert from_checkpoint == filled  # step 30 is the final model
    nsp = json.loads(bertforge("nsp", run, "the cat sat on the mat.", "the dog found the money.", "--json").stdout)
    assert 0.0 <= nsp["is_next_prob"] <= 1.0 and nsp["label"] in ("IsNext", "NotNext")


def test_resume_continues_exactly(workdir):
    """2N steps in one go == N steps, then a resumed run for the other N (dropout on, so RNG state matters)."""
    full = workdir / "full"
    bertforge("pretrain", "--data", workdir / "data", "--out", full, *TINY, "--max-steps", "24", "--log-every", "2",
              "--save-every", "12", "--keep-last", "5", "--eval-every", "0")
    resumed = workdir / "resumed"
    shutil.copytree(full, resumed)
    shutil.rmtree(resumed / "checkpoints" / "step_000024")  # as if the run had stopped at step 12
    shutil.rmtree(resumed / "model")
    bertforge("pretrain", "--data", workdir / "data", "--out", resumed, "--resume", "--quiet")
    a, b = metrics(full), metrics(resumed)
    assert [r["step"] for r in a] == [r["step"] for r in b] == list(range(2, 25, 2))
    for x, y in zip(a, b):
        for key in ("loss", "mlm_loss", "nsp_loss", "mlm_acc", "nsp_acc", "lr", "grad_norm", "tokens"):
            assert x[key] == pytest.approx(y[key], rel=1e-6, abs=1e-7), (x["step"], key)


def test_interrupted_save_leaves_the_previous_checkpoint_loadable(workdir, monkeypatch):
    run = workdir / "atomic"
    model_config = ModelConfig.preset("tiny", vocab_size=json.loads((workdir / "data" / "meta.json").read_text())["vocab_size"],
                                      hidden_size=32, num_heads=2, intermediate_size=64, max_position_embeddings=64)
    cfg = TrainConfig(seq_len=64, batch_size=8, max_steps=2, precision="fp32", num_workers=0, eval_every=0, save_every=0)
    trainer = Trainer(workdir / "data", run, model_config, cfg, progress=False)
    trainer.train()
    assert [p.name for p in checkpoint_dirs(run)] == ["step_000002"]

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    trainer.state.step = 3
    monkeypatch.setattr("bertforge.checkpoint.torch.save", disk_full)
    with pytest.raises(UserError, match="No space left"):
        trainer.save()
    monkeypatch.undo()
    assert [p.name for p in checkpoint_dirs(run)] == ["step_000002"]
    assert not [p for p in (run / "checkpoints").iterdir() if p.name.startswith(".")]  # no torn leftovers
    fresh = Trainer(workdir / "data", run, model_config, cfg, resume=True, progress=False)
    assert fresh.state.step == 2
    torch.testing.assert_close(fresh.model.state_dict()["nsp_head.weight"], trainer.model.state_dict()["nsp_head.weight"])


def test_sigint_saves_a_checkpoint_and_says_how_to_resume(workdir):
    run = workdir / "sigint"
    process = subprocess.Popen([sys.executable, "-m", "bertforge", "pretrain", "--data", str(workdir / "data"), "--out", str(run),
                                *TINY, "--max-steps", "100000", "--log-every", "1", "--eval-every", "0", "--save-every", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not (run / "metrics.jsonl").is_file() and time.time() < deadline:
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGINT
    assert "--resume" in stderr
    saved = checkpoint_dirs(run)
    assert len(saved) == 1 and int(saved[0].name.split("_")[1]) >= 1


def test_transformers_pipeline_gives_the_same_fill_mask_answers(workdir):
    transformers = pytest.importorskip("transformers")
    run = workdir / "e2e"
    if not (run / "model").is_dir():
        pytest.skip("needs test_tiny_run_end_to_end")
    ours = json.loads(bertforge("fill-mask", run, "the dog [MASK] at the window.", "--top-k", "5", "--json").stdout)
    reference = transformers.pipeline("fill-mask", model=str(run / "model"), top_k=5)("the dog [MASK] at the window.")
    assert [p["token_id"] for p in ours["masks"][0]["predictions"]] == [r["token"] for r in reference]
    assert [p["score"] for p in ours["masks"][0]["predictions"]] == pytest.approx([r["score"] for r in reference], abs=1e-5)


def one_line_error(done: subprocess.CompletedProcess, *fragments: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_cli_error_paths(workdir, tmp_path):
    one_line_error(bertforge("prepare", tmp_path / "missing.txt", "--tokenizer", workdir / "tok", "--out", tmp_path / "d", check=False),
                   "missing.txt", "no such file")
    (tmp_path / "empty.txt").write_text("")
    one_line_error(bertforge("tokenizer", "train", tmp_path / "empty.txt", "--out", tmp_path / "t", check=False), "empty.txt")
    run = workdir / "e2e"
    if not (run / "model").is_dir():
        pytest.skip("needs test_tiny_run_end_to_end")
    one_line_error(bertforge("fill-mask", run, "no blank here", check=False), "[MASK]")
    # A tokenizer with a bigger vocabulary than the model's embedding table.
    mismatched = tmp_path / "mismatched"
    shutil.copytree(run / "model", mismatched)
    write_corpus(tmp_path / "other.txt", [["completely different words appear here now"] * 3, ["zebra yak quokka"] * 3])
    bertforge("tokenizer", "train", workdir / "corpus.txt", tmp_path / "other.txt", "--out", tmp_path / "bigtok",
              "--vocab-size", "400", "--min-frequency", "1")
    for name in ("tokenizer.json", "vocab.txt"):
        shutil.copy(tmp_path / "bigtok" / name, mismatched / name)
    one_line_error(bertforge("fill-mask", mismatched, "the [MASK] sat.", check=False), "tokenizer", "vocabulary")
    # A run directory is never silently overwritten, and a resumed run keeps its architecture.
    one_line_error(bertforge("pretrain", "--data", workdir / "data", "--out", run, *TINY, "--max-steps", "2", check=False), "--overwrite")
    one_line_error(bertforge("pretrain", "--data", workdir / "data", "--out", run, "--resume", "--num-layers", "3", "--quiet", check=False),
                   "num_layers: 2 -> 3")
    one_line_error(bertforge("pretrain", "--data", workdir / "data", "--out", tmp_path / "long", *TINY, "--seq-len", "128", check=False),
                   "position table")


def test_learning_rate_schedules():
    linear = TrainConfig(warmup=0.1, schedule="linear")
    assert lr_factor(0.05, linear) == pytest.approx(0.5)
    assert lr_factor(0.1, linear) == pytest.approx(1.0)
    assert lr_factor(0.55, linear) == pytest.approx(0.5)
    assert lr_factor(1.0, linear) == pytest.approx(0.0)
    cosine = TrainConfig(warmup=0.0, schedule="cosine")
    assert lr_factor(0.5, cosine) == pytest.approx(0.5)
    assert lr_factor(0.5, TrainConfig(warmup=0.0, schedule="constant")) == 1.0
    steps = TrainConfig(warmup=10, max_steps=100)
    assert lr_factor(0.05, steps) == pytest.approx(0.5)


def test_time_budget_stops_the_run(workdir):
    run = workdir / "budget"
    started = time.perf_counter()
    bertforge("pretrain", "--data", workdir / "data", "--out", run, *TINY, "--time-budget", "3s", "--log-every", "1", "--eval-every", "0")
    train = metrics(run)
    assert train and train[-1]["elapsed"] >= 3.0 - 0.5
    assert train[0]["lr"] > train[-1]["lr"] * 1.5 or train[-1]["lr"] < 1e-4  # decays with elapsed time
    assert time.perf_counter() - started < 40
