"""The exceptions the CLI turns into exit codes rather than tracebacks.

UserError: the user's input is wrong; printed as one line on stderr, exit 2.
Stopped: a loop saved where it was and stopped on a signal; exit 128 + its number.
Anything else is a bug and keeps its traceback.
"""


class UserError(Exception):
    """Bad input: a missing or empty file, a wrong column, a mismatched model."""


class Stopped(Exception):
    """SIGINT or SIGTERM arrived; the loop saved a checkpoint first, and the message says how to resume."""

    def __init__(self, signal_number: int, message: str):
        super().__init__(message)
        self.signal_number = signal_number
