"""What a request may hold: JSON bodies checked field by field before any work is queued.

Every fault is an `Invalid` carrying its HTTP status and one line; the app answers it as one JSON error. Nothing
here touches a model: the answer kinds (answers.py) say which fields each endpoint takes and build on these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class Invalid(Exception):
    """A request the service refuses: its status (400 malformed, 413 too large, 422 wrong content) and why."""

    def __init__(self, message: str, status: int = 422):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Limits:
    """What one request may ask for: its texts (inputs, documents, pairs) and each text's characters."""

    max_texts: int
    max_characters: int


def fields(body: Any, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """The body as a JSON object holding every required field and no field beyond the optional ones: an unknown
    field is refused (a misspelt "dimension" would otherwise be ignored without a word)."""
    if not isinstance(body, dict):
        raise Invalid("the body is not a JSON object")
    missing = [name for name in required if name not in body]
    if missing:
        raise Invalid(f"missing field {missing[0]!r}")
    unknown = sorted(set(body) - set(required) - set(optional))
    if unknown:
        raise Invalid(f"unknown field {unknown[0][:60]!r} (this endpoint takes {', '.join(required + optional)})")
    return body


def text(value: Any, name: str, limits: Limits) -> str:
    """One non-empty text of at most the characters the service allows."""
    if not isinstance(value, str):
        raise Invalid(f"{name} must be a string, not {type(value).__name__}")
    if not value.strip():
        raise Invalid(f"{name} is empty")
    if len(value) > limits.max_characters:
        raise Invalid(f"{name} has {len(value):,} characters; the service takes at most {limits.max_characters:,}", 413)
    return value


def texts(value: Any, name: str, limits: Limits) -> list[str]:
    """One text or a non-empty list of them, as OpenAI's and TEI's `input(s)` take them."""
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values:
        raise Invalid(f"{name} must be a string or a non-empty list of strings")
    if len(values) > limits.max_texts:
        raise Invalid(f"{name} holds {len(values):,} texts; the service takes at most {limits.max_texts:,}", 413)
    return [text(item, f"{name}[{i}]", limits) for i, item in enumerate(values)]


def integer(value: Any, name: str, least: int, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise Invalid(f"{name} must be a whole number from {least} to {most}")
    return value


def flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f"{name} must be true or false")
    return value


def choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise Invalid(f"{name} must be one of {', '.join(choices)}")
    return value
