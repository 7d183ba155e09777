"""benchmarks/gpu_check.sh runs first time on a GPU machine: on the CPU, `--smoke` runs every step at its
smallest (the CUDA tests skip, the races run on the CPU) and writes the one results file the GPU run writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_gpu_check_runs_every_step_and_writes_its_results(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--smoke"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    results = tmp_path / "gpu_check"
    steps = (results / "steps.txt").read_text().splitlines()
    names = ["machine", "cuda_tests", "bench_train", "bench_finetune_shuffled", "bench_finetune_bucketed"]
    assert [line.split()[0] for line in steps] == names
    assert all(" rc=0 " in line for line in steps), steps
    report = (results / "results.md").read_text()
    assert all(f"## {name}" in report for name in names)
    assert "| bertforge fp32 unpadded |" in report and "vs transformers" in report
    assert (results / "bench_train.json").is_file() and (results / "bench_finetune_shuffled.json").is_file()
    wrong = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--bogus"], env=env, capture_output=True)
    assert wrong.returncode == 2
