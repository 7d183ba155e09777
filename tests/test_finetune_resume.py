"""finetune --resume: a fine-tuning stopped by an error or a signal, anywhere, goes on to the model it would have
made; an unfinished run is never overwritten by accident; a changed setting is refused."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from bertforge.errors import Stopped, UserError
from bertforge.tasks import finetune as finetuning
from bertforge.tasks.classification import ClassificationTask, Columns
from bertforge.tasks.config import FinetuneConfig

from conftest import ANIMALS, PEOPLE, bertforge, one_line_error, save_random_model


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory, wordpiece_tokenizer):
    return save_random_model(tmp_path_factory.mktemp("pretrained") / "model", wordpiece_tokenizer)


@pytest.fixture
def task_files(tmp_path):
    """48 labelled sentences (animal or person), 10 of them again as dev: 3 batches of 16 an epoch."""
    rng = random.Random(0)
    rows = []
    for _ in range(48):
        kind = rng.choice(["animal", "person"])
        rows.append((f"{rng.choice(ANIMALS if kind == 'animal' else PEOPLE)} sat there.", kind))
    text = "sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows)
    (tmp_path / "train.tsv").write_text(text, encoding="utf-8")
    (tmp_path / "dev.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows[:10]))
    return tmp_path / "train.tsv", tmp_path / "dev.tsv"


def settings(**overrides) -> FinetuneConfig:
    """Dropout on, so that the resumed run must also draw the dropout masks the whole run drew."""
    values = dict(epochs=12, lr=1e-2, batch_size=16, seq_len=32, dropout=0.1, device="cpu", precision="fp32")
    return FinetuneConfig(**{**values, **overrides})


def run(pretrained, task_files, out, **kwargs):
    train, dev = task_files
    cfg = kwargs.pop("cfg", settings())
    return finetuning.finetune(
        pretrained, "classification", train, dev, out, cfg, Columns("sentence", "label"), False, **kwargs
    )


def log_of(out) -> list[dict]:
    """metrics.jsonl without the wall-clock times."""
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k != "elapsed"} for r in records]


def assert_same_run(a, b) -> None:
    """The same epochs logged, the same best epoch, the same model to the last bit."""
    assert log_of(a) == log_of(b)
    best = [json.loads((out / "summary.json").read_text())["best"] for out in (a, b)]
    assert best[0]["epoch"] == best[1]["epoch"] and best[0]["dev_accuracy"] == best[1]["dev_accuracy"]
    assert best[0]["epoch"] > 1  # the task is learned on the way: the model directory was replaced mid-run
    weights = [load_file(str(out / "model" / "model.safetensors")) for out in (a, b)]
    assert weights[0].keys() == weights[1].keys()
    for name in weights[0]:
        assert torch.equal(weights[0][name], weights[1][name]), name
    assert not (b / "checkpoints").exists()  # a finished run leaves its model, not its checkpoints


class FailingBar(finetuning.Progress):
    """A progress bar that breaks (or signals the process) after the `at`-th optimizer step of the run."""

    at, steps, action = 0, 0, "raise"

    def update(self, n=1, postfix=""):
        FailingBar.steps += n
        if FailingBar.steps == FailingBar.at:
            if FailingBar.action == "raise":
                raise RuntimeError("the progress bar broke")
            os.kill(os.getpid(), signal.SIGTERM)  # recorded by the loop, which saves and stops
        return super().update(n, postfix)


@pytest.mark.parametrize("at", [2, 7, 20])  # inside epoch 1; epoch 3, after two epochs' checkpoints; epoch 7
def test_an_error_mid_epoch_saves_the_step_and_resume_makes_the_same_model(pretrained, task_files, monkeypatch, at):
    whole = task_files[0].parent / "whole"
    run(pretrained, task_files, whole)
    monkeypatch.setattr(finetuning, "Progress", FailingBar)
    monkeypatch.setattr(FailingBar, "at", at)
    monkeypatch.setattr(FailingBar, "steps", 0)
    stopped = task_files[0].parent / "stopped"
    with pytest.raises(RuntimeError, match="progress bar broke"):
        run(pretrained, task_files, stopped)
    saved = json.loads(next((stopped / "checkpoints").glob("step_*/state.json")).read_text())["state"]
    assert (saved["step"], saved["epoch"], saved["batch"]) == (at, (at - 1) // 3 + 1, (at - 1) % 3 + 1)
    assert len(log_of(stopped)) == (at - 1) // 3  # the finished epochs' records
    monkeypatch.setattr(FailingBar, "at", -1)
    run(pretrained, task_files, stopped, resume=True)
    assert_same_run(whole, stopped)


def test_an_error_while_scoring_dev_resumes_at_the_scoring(pretrained, task_files, monkeypatch):
    whole = task_files[0].parent / "whole"
    run(pretrained, task_files, whole)
    evaluate = ClassificationTask.evaluate
    calls = []

    def breaks_the_second_time(self, model, precision):
        calls.append(1)
        if len(calls) == 2:
            raise MemoryError("out of memory in the dev pass")
        return evaluate(self, model, precision)

    monkeypatch.setattr(ClassificationTask, "evaluate", breaks_the_second_time)
    stopped = task_files[0].parent / "stopped"
    with pytest.raises(MemoryError):
        run(pretrained, task_files, stopped)
    saved = json.loads(next((stopped / "checkpoints").glob("step_*/state.json")).read_text())["state"]
    assert (saved["step"], saved["epoch"], saved["batch"]) == (6, 2, 3)  # epoch 2 trained, not yet scored
    monkeypatch.setattr(ClassificationTask, "evaluate", evaluate)
    run(pretrained, task_files, stopped, resume=True)
    assert_same_run(whole, stopped)


def test_a_failed_save_of_the_best_model_resumes_to_the_same_run(pretrained, task_files, monkeypatch):
    """A full disk while model/ is replaced by a better epoch's: the saved place must not claim that epoch as the
    best, or the resumed run would keep the older model."""
    whole = task_files[0].parent / "whole"
    run(pretrained, task_files, whole)
    real_save, saves = finetuning.save_model, []

    def fails_the_second_time(*args, **kwargs):
        saves.append(1)
        if len(saves) == 2:
            raise OSError(28, "No space left on device")
        return real_save(*args, **kwargs)

    monkeypatch.setattr(finetuning, "save_model", fails_the_second_time)
    stopped = task_files[0].parent / "stopped"
    with pytest.raises(OSError, match="No space left"):
        run(pretrained, task_files, stopped)
    monkeypatch.setattr(finetuning, "save_model", real_save)
    run(pretrained, task_files, stopped, resume=True)
    assert_same_run(whole, stopped)


def test_a_signal_saves_and_stops_and_resume_makes_the_same_model(pretrained, task_files, monkeypatch):
    whole = task_files[0].parent / "whole"
    run(pretrained, task_files, whole)
    monkeypatch.setattr(finetuning, "Progress", FailingBar)
    monkeypatch.setattr(FailingBar, "at", 5)
    monkeypatch.setattr(FailingBar, "steps", 0)
    monkeypatch.setattr(FailingBar, "action", "signal")
    stopped = task_files[0].parent / "stopped"
    with pytest.raises(Stopped, match="stopped by signal 15 at step 5.*--resume") as caught:
        run(pretrained, task_files, stopped)
    assert caught.value.signal_number == signal.SIGTERM
    monkeypatch.setattr(FailingBar, "at", -1)
    # recomputing the layers in the backward pass is how, not what: it may change at resume, and changes no bit
    run(pretrained, task_files, stopped, resume=True, cfg=settings(activation_checkpointing=True))
    assert_same_run(whole, stopped)


def test_an_unfinished_run_is_kept_until_resumed_or_overwritten(pretrained, task_files, monkeypatch):
    out = task_files[0].parent / "out"
    monkeypatch.setattr(finetuning, "Progress", FailingBar)
    monkeypatch.setattr(FailingBar, "at", 4)
    monkeypatch.setattr(FailingBar, "steps", 0)
    with pytest.raises(RuntimeError):
        run(pretrained, task_files, out)
    monkeypatch.setattr(FailingBar, "at", -1)
    with pytest.raises(
        UserError, match="an unfinished fine-tuning \\(step 4\\); pass --resume to continue it, or --over"
    ):
        run(pretrained, task_files, out)
    with pytest.raises(UserError, match="epochs: 12 -> 13; lr: 0.01 -> 0.001"):
        run(pretrained, task_files, out, resume=True, cfg=settings(lr=1e-3, epochs=13))
    # where and how fast it computes, and how often it saves, may change
    run(pretrained, task_files, out, resume=True, cfg=settings(checkpoint_minutes=1.0))
    summary = json.loads((out / "summary.json").read_text())
    assert len(log_of(out)) == 12 and not (out / "checkpoints").exists()
    assert run(pretrained, task_files, out, resume=True) == summary  # finished: nothing more to do
    assert len(log_of(out)) == 12
    with pytest.raises(UserError, match="holds a fine-tuned model; pass --overwrite to start over, or give another"):
        run(pretrained, task_files, out)  # a model is never replaced by accident
    # --overwrite starts over, and a start over forgets the last run's summary until it has its own
    monkeypatch.setattr(FailingBar, "at", 2)
    monkeypatch.setattr(FailingBar, "steps", 0)
    with pytest.raises(RuntimeError):
        run(pretrained, task_files, out, overwrite=True)
    assert not (out / "summary.json").exists() and log_of(out) == []


def test_the_cli_exits_128_plus_the_signal_and_resumes(pretrained, task_files):
    """SIGTERM as a scheduler sends it: a checkpoint, exit 143 and the resume command; then --resume finishes."""
    train, dev = task_files
    out = train.parent / "cli"
    command = [
        sys.executable, "-m", "bertforge", "finetune", str(pretrained), "--train", str(train), "--dev", str(dev),
        "--text-column", "sentence", "--label-column", "label", "--out", str(out), "--epochs", "400",
        "--batch-size", "16", "--max-seq-len", "32", "--precision", "fp32", "--quiet",
    ]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    metrics = out / "metrics.jsonl"
    deadline = time.monotonic() + 60
    while not (metrics.is_file() and metrics.read_text().count("\n") >= 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert "stopped by signal 15" in stderr and "--resume" in stderr and "Traceback" not in stderr
    one_line_error(bertforge(*command[3:]), "unfinished fine-tuning", "--resume", "--overwrite")
    done = bertforge(*command[3:], "--resume")
    assert done.returncode == 0, done.stderr
    epochs = [json.loads(line)["epoch"] for line in metrics.read_text().splitlines()]
    assert epochs == list(range(1, 401))
