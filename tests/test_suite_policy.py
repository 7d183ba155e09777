"""The suite's own rules: a test that skips for a reason other than missing hardware fails the run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

PLANTED = """
import pytest


def test_forgot_something():
    pytest.skip("the data set is not here")


@pytest.mark.skipif(True, reason="needs a CUDA GPU")
def test_on_a_gpu():
    pass
"""


def run_suite(directory: Path, source: str) -> subprocess.CompletedProcess:
    shutil.copy(Path(__file__).with_name("conftest.py"), directory / "conftest.py")
    (directory / "test_planted.py").write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-n", "0", str(directory)],
        capture_output=True,
        text=True,
        cwd=directory,
    )


def test_an_unexpected_skip_fails_the_run_and_a_missing_gpu_does_not(tmp_path):
    done = run_suite(tmp_path, PLANTED)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "test_planted.py::test_forgot_something: Skipped: the data set is not here" in done.stdout
    unexpected = done.stdout.split("unexpected skips")[1].split("short test summary")[0]
    assert "test_forgot_something" in unexpected and "test_on_a_gpu" not in unexpected
