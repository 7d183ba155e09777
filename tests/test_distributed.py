"""Several processes (torchrun + DDP, gloo on CPU) train exactly like one process with the whole batch."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from conftest import TINY_MODEL, TINY_RUN, prepared_data, train_metrics

COMMON = [
    *TINY_MODEL,
    *TINY_RUN,
    "--hidden-dropout",
    "0",
    "--attention-dropout",
    "0",
    "--eval-every",
    "0",
    "--log-every",
    "1",
]
KEYS = ("loss", "mlm_loss", "nsp_loss", "mlm_acc", "nsp_acc", "rtd_loss", "rtd_acc", "grad_norm", "lr", "tokens")


def run(nproc: int, *args) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if nproc == 1:
        command = [sys.executable, "-m", "bertforge", "pretrain", *map(str, args)]
    else:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={nproc}",
            "-m",
            "bertforge",
            "pretrain",
            *map(str, args),
        ]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def assert_same_trajectory(a, b):
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for x, y in zip(a, b):
        for key in (k for k in KEYS if k in x or k in y):  # a run without a pair objective has no nsp_*
            assert x[key] == pytest.approx(y[key], rel=1e-5, abs=1e-5), (x["step"], key, x[key], y[key])


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return prepared_data(tmp_path_factory.mktemp("ddp"), seed=11, n_docs=60)


def test_two_processes_with_batch_b_match_one_process_with_batch_2b_and_resume_across_world_sizes(data_dir):
    data = data_dir / "data"
    one = data_dir / "one"
    two = data_dir / "two"
    # A batch ramp (per process: 8 -> 16 and 4 -> 8 over 4 steps, whole numbers on both sides) and a mask-rate
    # schedule too: both must split across processes exactly.
    levers = ["--batch-ramp-steps", "4", "--mask-prob", "0.3", "--mask-prob-final", "0.1", "--max-steps", "8"]
    run(1, "--data", data, "--out", one, *COMMON, *levers, "--batch-size", "16", "--batch-size-start", "8",
        "--save-every", "4")  # fmt: skip
    run(2, "--data", data, "--out", two, *COMMON, *levers, "--batch-size", "8", "--batch-size-start", "4",
        "--save-every", "4")  # fmt: skip
    assert_same_trajectory(train_metrics(one), train_metrics(two))
    assert (two / "model" / "model.safetensors").is_file()  # rank 0 wrote the final model

    # A checkpoint written by two processes continues in one (per-process batch doubled: same global batch).
    resumed = data_dir / "resumed"
    shutil.copytree(two, resumed)
    shutil.rmtree(resumed / "checkpoints" / "step_000008")
    shutil.rmtree(resumed / "model")
    run(1, "--data", data, "--out", resumed, "--resume", "--batch-size", "16", "--batch-size-start", "8", "--quiet")
    assert_same_trajectory(train_metrics(one), train_metrics(resumed))


def test_gradient_accumulation_matches_the_whole_batch(data_dir):
    data = data_dir / "data"
    whole, accumulated = data_dir / "whole", data_dir / "accumulated"
    run(1, "--data", data, "--out", whole, *COMMON, "--batch-size", "16", "--max-steps", "4", "--save-every", "0")
    run(
        1,
        "--data",
        data,
        "--out",
        accumulated,
        *COMMON,
        "--batch-size",
        "8",
        "--grad-accum",
        "2",
        "--max-steps",
        "4",
        "--save-every",
        "0",
    )
    assert_same_trajectory(train_metrics(whole), train_metrics(accumulated))


def test_objectives_that_leave_a_head_untrained_run_on_several_processes(data_dir):
    """MLM only (`--recipe budget`) and ELECTRA leave heads no loss reaches (the pair head and pooler, the
    generator's); DDP must not wait for their gradients. Both match one process with the whole batch step for step,
    ELECTRA too: each instance's replacement tokens are drawn from its own seed, so the two ranks sample different
    draws, exactly those that one process draws for the same instances, and end with the same weights. The MLM
    runs step with Muon, whose loss trajectories match across processes; ELECTRA's, whose weights are compared to
    1e-5, with `budget`'s AdamW: Muon's bf16 Newton-Schulz turns the all-reduce's fp32 rounding into bf16 roundings
    of the update."""
    data = data_dir / "data"
    budget = ["--recipe", "budget", "--attention-bias", "none", "--max-steps", "3", "--save-every", "0"]
    mlm = [*COMMON, *budget, "--optimizer", "muon"]
    run(1, "--data", data, "--out", data_dir / "mlm1", *mlm, "--batch-size", "16")
    run(2, "--data", data, "--out", data_dir / "mlm2", *mlm, "--batch-size", "8")
    assert_same_trajectory(train_metrics(data_dir / "mlm1"), train_metrics(data_dir / "mlm2"))
    electra = [*COMMON, *budget, "--objective", "electra"]
    run(1, "--data", data, "--out", data_dir / "electra1", *electra, "--batch-size", "16")
    run(2, "--data", data, "--out", data_dir / "electra2", *electra, "--batch-size", "8")
    one, two = train_metrics(data_dir / "electra1"), train_metrics(data_dir / "electra2")
    assert [r["step"] for r in two] == [1, 2, 3] and all("rtd_loss" in r for r in two)
    assert_same_trajectory(one, two)
    for part in ("model.safetensors", "generator/model.safetensors"):
        ours, theirs = (
            load_file(data_dir / "electra1" / "model" / part),
            load_file(data_dir / "electra2" / "model" / part),
        )
        assert ours.keys() == theirs.keys()
        for name in ours:
            torch.testing.assert_close(ours[name], theirs[name], rtol=1e-5, atol=1e-6, msg=f"{part}: {name}")


def test_accumulating_and_evaluating_processes_match_one_and_a_run_resumes_onto_more_processes(data_dir):
    """DDP's no_sync path (--grad-accum 2 on each of two processes), the held-out evaluation of a DDP run (the main
    process's, on batches of the per-process size), and a one-process checkpoint continued by two processes: each
    logs what one process accumulating the same 16 sequences in micro-batches of 4 logged."""
    data = data_dir / "data"
    evaluating = ["--eval-every", "2", "--eval-batches", "2", "--max-steps", "4", "--save-every", "2"]
    one, two = data_dir / "one_accumulating", data_dir / "two_accumulating"
    run(1, "--data", data, "--out", one, *COMMON, *evaluating, "--batch-size", "4", "--grad-accum", "4")
    run(2, "--data", data, "--out", two, *COMMON, *evaluating, "--batch-size", "4", "--grad-accum", "2")
    assert_same_trajectory(train_metrics(one), train_metrics(two))
    held_out = train_metrics(one, "valid")
    assert [r["step"] for r in held_out] == [2, 4]
    assert_same_trajectory(held_out, train_metrics(two, "valid"))

    resumed = data_dir / "one_then_two"
    shutil.copytree(one, resumed)
    shutil.rmtree(resumed / "checkpoints" / "step_000004")
    shutil.rmtree(resumed / "model")
    run(2, "--data", data, "--out", resumed, "--resume", "--grad-accum", "2", "--quiet")
    assert_same_trajectory(train_metrics(one), train_metrics(resumed))
    assert_same_trajectory(held_out, train_metrics(resumed, "valid"))
