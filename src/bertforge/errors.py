"""The exceptions the CLI turns into exit codes rather than tracebacks.

UserError: the user's input is wrong; printed as one line on stderr, exit 2.
Stopped: a loop saved where it was and stopped on a signal; exit 128 + its number.
Interrupted: SIGINT or SIGTERM anywhere else; what was being written was left out whole; exit 128 + its number.
TrainingFailed: training went wrong (the weights stopped being numbers); one line, exit 1, nothing bad saved.
Anything else is a bug and keeps its traceback.
"""

import contextlib
import os
import sys


class UserError(Exception):
    """Bad input: a missing or empty file, a wrong column, a mismatched model."""


class TrainingFailed(Exception):
    """A run that cannot go on: its weights are not finite. Nothing was saved from the step it failed at."""


class Stopped(Exception):
    """SIGINT or SIGTERM arrived; the loop saved a checkpoint first, and the message says how to resume."""

    def __init__(self, signal_number: int, message: str):
        super().__init__(message)
        self.signal_number = signal_number


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM outside a training loop: raised in the main thread, so that every `finally` and every
    atomic write on the way out runs (a KeyboardInterrupt, so that libraries clean up as they do for Ctrl-C)."""

    def __init__(self, signal_number: int):
        super().__init__(f"interrupted by signal {signal_number}")
        self.signal_number = signal_number


def one_line(error: BaseException) -> str:
    """A library's exception as one line of a UserError. torch's refusal to unpickle is a paragraph whose one telling
    line names the object it refused ("Trying to load unsupported GLOBAL posix.system ..."); otherwise the first."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    telling = next((line for line in lines if "unsupported GLOBAL" in line or "Unsupported global" in line), None)
    return telling or (lines[0] if lines else type(error).__name__)


@contextlib.contextmanager
def native_logs_silenced():
    """A native library's own lines on the process's stderr (SentencePiece's C++ log, absl's) dropped while it
    runs: a file it refuses must end in bertforge's one line, not in three of the library's before it. Python's
    sys.stderr is flushed first and is the same file again after."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to silence
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
