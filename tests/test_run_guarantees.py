"""What a pre-training run promises when something goes wrong or changes under it: a non-finite step is skipped and
too many stop the run; a time-budget run resumes on its own clock; switches that are free at resume change nothing
else; and the rarer flags (a schedule, a prediction cap, TensorBoard, torch.compile) do what they say in a real run."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import types

import pytest
import torch

import bertforge.training.trainer as trainer_module
from bertforge.engine.checkpoint import checkpoint_dirs
from bertforge.engine.optim import lr_factor, warmup_fraction
from bertforge.errors import TrainingFailed, UserError
from bertforge.model.config import ModelConfig
from bertforge.training.config import TrainConfig
from bertforge.training.trainer import Trainer

from conftest import (
    TINY_MODEL,
    TINY_RUN,
    bertforge,
    bertforge_ok,
    one_line_error,
    prepared_data,
    tiny_model_config,
    train_metrics,
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return prepared_data(tmp_path_factory.mktemp("guarantees"), seed=13)


def tiny(workdir, **train) -> tuple[ModelConfig, TrainConfig]:
    """TINY_MODEL's sizes (BERT's dropout kept) and a run logging every step, with `train` on top."""
    settings = dict(seq_len=64, batch_size=8, precision="fp32", num_workers=0, eval_every=0, save_every=0, log_every=1)
    return tiny_model_config(workdir / "data"), TrainConfig(**{**settings, **train})


def cut_back(run, step: int):
    """A copy of the finished `run` as it was when it saved `step`: later checkpoints and the model gone."""
    copy = run.with_name(f"{run.name}_from_{step}")
    shutil.copytree(run, copy)
    for checkpoint in checkpoint_dirs(copy):
        if int(checkpoint.name.removeprefix("step_")) > step:
            shutil.rmtree(checkpoint)
    shutil.rmtree(copy / "model")
    return copy


def assert_same_records(a: list[dict], b: list[dict], keys: tuple[str, ...]) -> None:
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for x, y in zip(a, b):
        for key in keys:
            assert x[key] == pytest.approx(y[key], rel=1e-6, abs=1e-7), (x["step"], key)


# ---------------------------------------------------------------- non-finite steps


def test_a_non_finite_step_changes_no_weight_and_too_many_in_a_row_stop_the_run(workdir, tmp_path, monkeypatch):
    """Step 3's loss alone, then steps 6-8's, are made NaN: each of those updates is skipped (weights and AdamW's
    step count stay), the log counts them, and the third in a row stops the run with one line. Nothing is saved
    from weights whose last loss was not finite: a diverging run's would become the newest checkpoint."""
    run = tmp_path / "run"
    trainer = Trainer(workdir / "data", run, *tiny(workdir, max_steps=12, max_bad_steps=3), progress=False)
    poisoned = {3, 6, 7, 8}
    backward, step = trainer.precision.backward, trainer._step
    changed = {}

    def nan_at_poisoned_steps(loss):
        backward(loss * float("nan") if trainer.state.step + 1 in poisoned else loss)

    def watching_step(micro_batches):
        before = [p.detach().clone() for p in trainer.model.parameters()]
        result = step(micro_batches)
        changed[trainer.state.step + 1] = any(not torch.equal(a, p) for a, p in zip(before, trainer.model.parameters()))
        return result

    monkeypatch.setattr(trainer.precision, "backward", nan_at_poisoned_steps)
    monkeypatch.setattr(trainer, "_step", watching_step)
    with pytest.raises(TrainingFailed, match=r"not finite for 3 steps in a row \(step 8\): the run diverged"):
        trainer.train()
    assert changed == {s: s not in poisoned for s in range(1, 9)}
    assert {float(state["step"]) for state in trainer.optimizer.state.values()} == {4.0}  # steps 1, 2, 4 and 5
    assert [r["bad_steps"] for r in train_metrics(run)] == [0, 0, 1, 1, 1, 2, 3]  # step 8 stopped before its line
    assert checkpoint_dirs(run) == []  # nothing from steps 6-8 (and no checkpoint was due before)


# ---------------------------------------------------------------- resuming


class Clock:
    """time.perf_counter for the trainer, moved on by one second per step: a time budget spent in whole steps."""

    def __init__(self, now: float):
        self.now = now

    def perf_counter(self) -> float:
        return self.now


def clocked_trainer(monkeypatch, start: float, *args, **kwargs) -> Trainer:
    clock = Clock(start)
    monkeypatch.setattr(trainer_module, "time", clock)
    trainer = Trainer(*args, **kwargs)
    step = trainer._step

    def one_second_step(micro_batches):
        clock.now += 1.0
        return step(micro_batches)

    monkeypatch.setattr(trainer, "_step", one_second_step)
    return trainer


def test_a_time_budget_run_resumes_on_its_own_clock_step_for_step(workdir, tmp_path, monkeypatch):
    """A 10-second run saved at 4 seconds and resumed spends only the 6 seconds left, with the lr of the clock it
    saved: the resumed run logs what the uninterrupted one logged."""
    model_config, cfg = tiny(workdir, time_budget=10.0, save_every=4, keep_last=5, warmup=0.2)
    data, whole = workdir / "data", tmp_path / "whole"
    clocked_trainer(monkeypatch, 100.0, data, whole, model_config, cfg, progress=False).train()
    records = train_metrics(whole)
    assert [r["elapsed"] for r in records] == [float(s) for s in range(1, 11)]  # ten one-second steps, no more
    assert [r["lr"] for r in records] == pytest.approx([cfg.lr * lr_factor(s / 10, 0.2, "linear") for s in range(10)])
    resumed = cut_back(whole, 4)
    clocked_trainer(monkeypatch, 5000.0, data, resumed, model_config, cfg, resume=True, progress=False).train()
    assert_same_records(records, train_metrics(resumed), ("loss", "mlm_loss", "nsp_loss", "lr", "elapsed"))


def test_activation_checkpointing_switched_on_at_resume_changes_no_step(workdir, tmp_path):
    """Free at resume: with dropout on, the resumed steps recompute each layer (drawing the same masks again) and
    log what the uninterrupted run logged."""
    model_config, cfg = tiny(workdir, max_steps=8, save_every=4, keep_last=5)
    assert model_config.hidden_dropout > 0
    whole = tmp_path / "whole"
    Trainer(workdir / "data", whole, model_config, cfg, progress=False).train()
    resumed = cut_back(whole, 4)
    switched = dataclasses.replace(cfg, activation_checkpointing=True)
    Trainer(workdir / "data", resumed, model_config, switched, resume=True, progress=False).train()
    assert_same_records(train_metrics(whole), train_metrics(resumed), ("loss", "mlm_loss", "nsp_loss", "grad_norm"))


def test_pretrain_refuses_an_unfinished_run_and_overwrite_starts_it_with_a_clean_log(workdir, tmp_path):
    run = tmp_path / "run"
    command = ["pretrain", "--data", workdir / "data", "--out", run, *TINY_MODEL, *TINY_RUN, "--batch-size", "8",
               "--log-every", "1", "--eval-every", "0", "--save-every", "2"]  # fmt: skip
    bertforge_ok(*command, "--max-steps", "4")
    shutil.rmtree(run / "model")  # as if stopped after its last checkpoint
    before = (run / "metrics.jsonl").read_bytes()
    one_line_error(bertforge(*command, "--max-steps", "4"), "already holds a run", "--resume", "--overwrite")
    assert (run / "metrics.jsonl").read_bytes() == before
    bertforge_ok(*command, "--max-steps", "3", "--overwrite")
    assert [r["step"] for r in train_metrics(run)] == [1, 2, 3]  # the old run's lines are gone, not appended to
    assert [p.name for p in checkpoint_dirs(run)] == ["step_000002", "step_000003"]
    assert json.loads((run / "config.json").read_text())["train"]["max_steps"] == 3


# ---------------------------------------------------------------- flags in a real run


@pytest.mark.parametrize("schedule", ["cosine", "constant"])
def test_a_schedule_and_a_prediction_cap_shape_the_run_and_tensorboard_gets_every_logged_number(
    workdir, tmp_path, monkeypatch, schedule
):
    """TensorBoard's writer is stood in for (the package is optional and not installed for the tests): what the
    run hands it is every number of metrics.jsonl, under split/name at its step."""
    scalars = []

    class SummaryWriter:
        def __init__(self, directory):
            self.directory = directory

        def add_scalar(self, tag, value, step):
            scalars.append((tag, value, step))

        def close(self):
            scalars.append("closed")

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", types.SimpleNamespace(SummaryWriter=SummaryWriter))
    model_config, cfg = tiny(workdir, max_steps=6, warmup=0.3, schedule=schedule, mask_prob=0.5, max_predictions=2,
                             eval_every=3, eval_batches=2)  # fmt: skip
    run = tmp_path / "run"
    Trainer(workdir / "data", run, model_config, cfg, progress=False, tensorboard=True).train()
    records = train_metrics(run)
    expected = [cfg.lr * lr_factor(s / 6, warmup_fraction(0.3, 6), schedule) for s in range(1, 7)]
    assert [r["lr"] for r in records] == pytest.approx(expected)
    previous = 0
    for r in records:  # at most 2 predictions in each of the 8 sequences (without the cap, about 30 each)
        assert 0 < r["masked_fraction"] * (r["tokens"] - previous) <= 2 * 8 + 1e-6
        previous = r["tokens"]
    logged = [
        (f"{r['split']}/{k}", v, r["step"])
        for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
        for k, v in r.items()
        if k != "step" and isinstance(v, (int, float))
    ]
    assert scalars == [*logged, "closed"]
    assert any(tag.startswith("valid/") for tag, *_ in logged)


def test_tensorboard_without_its_package_is_one_line(workdir, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails, as without the package
    with pytest.raises(UserError, match="--tensorboard needs the tensorboard package: pip install tensorboard"):
        Trainer(workdir / "data", tmp_path / "run", *tiny(workdir, max_steps=1), progress=False, tensorboard=True)
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_a_compiled_run_trains_step_for_step_as_the_eager_one_and_saves_plain_weights(workdir, tmp_path, monkeypatch):
    """--compile wraps the step model in torch.compile; dynamo's graphs are run by its eager backend here (inductor's
    C++ code generation takes minutes on two cores and is torch's to test). The saved model has the plain names."""
    model_config, cfg = tiny(workdir, max_steps=4)
    model_config = dataclasses.replace(model_config, hidden_dropout=0.0, attention_dropout=0.0)
    Trainer(workdir / "data", tmp_path / "eager", model_config, cfg, progress=False).train()
    compiled, compile = [], torch.compile

    def compile_eagerly(model, **kwargs):
        compiled.append(model)
        return compile(model, backend="eager", **kwargs)

    monkeypatch.setattr(trainer_module.torch, "compile", compile_eagerly)
    compiled_cfg = dataclasses.replace(cfg, compile=True)
    Trainer(workdir / "data", tmp_path / "compiled", model_config, compiled_cfg, progress=False).train()
    assert len(compiled) == 1
    assert_same_records(train_metrics(tmp_path / "eager"), train_metrics(tmp_path / "compiled"), ("loss", "grad_norm"))
    from safetensors.torch import load_file

    eager, ours = (load_file(tmp_path / name / "model" / "model.safetensors") for name in ("eager", "compiled"))
    assert ours.keys() == eager.keys()  # no _orig_mod. prefixes
    for name in ours:
        torch.testing.assert_close(ours[name], eager[name], rtol=1e-5, atol=1e-6)


def test_another_process_of_the_run_sees_the_main_process_write_probe_as_its_own(tmp_path):
    """Under DDP the main process probes the run directory it locks while the others still check that directory:
    its probe file is the run's, never "files that are not a run"; anything else there still is."""
    from bertforge.fileio import PROBE_PREFIX
    from bertforge.training.rundir import check_run_dir

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / f"{PROBE_PREFIX}abc123").touch()
    check_run_dir(run_dir, {}, resume=False, overwrite=False)
    (run_dir / "notes.txt").touch()
    with pytest.raises(UserError, match="holds files that are not a run \\(notes.txt\\)"):
        check_run_dir(run_dir, {}, resume=False, overwrite=False)
