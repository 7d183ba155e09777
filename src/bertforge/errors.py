"""The one exception type that means "the user's input is wrong".

The CLI prints its message as one line on stderr and exits 2, with no
traceback; anything else is a bug and keeps its traceback.
"""


class UserError(Exception):
    """Bad input: a missing or empty file, a wrong column, a mismatched model."""
