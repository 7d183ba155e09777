"""The machinery of typed, documented configs; the configs themselves live with what they configure
(model/config.py, training/config.py, tasks/config.py, formats/options.py).

Each dataclass owns its fields; the CLI turns every field into a flag
(`num_layers` -> `--num-layers`) whose help is the field's text, and `sweep`
parses its grid values with the same `parse_field` (one typed parser).
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Callable
from dataclasses import field, fields
from typing import Any

from .errors import UserError


def documented(
    default: Any, help: str, choices: tuple[str, ...] | None = None, parse: Callable[[str], Any] | None = None
) -> Any:
    """A dataclass field that carries its help text (and, for strings, its allowed values) in metadata."""
    return field(default=default, metadata={"help": help, "choices": choices, "parse": parse})


# How a padded batch runs (model/unpadding.py); here, without torch, for the flags that choose it.
UNPADDING_MODES = ("auto", "always", "never")

_DURATION_UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hr": 3600, "hour": 3600}
_DURATION_PART = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*", re.IGNORECASE)


def parse_duration(text: str) -> float:
    """Seconds from "90", "90s", "30m", "5min", "1.5h", "2 hours" or "1h30m" (a bare number is seconds)."""
    position, seconds = 0, 0.0
    while position < len(text):
        part = _DURATION_PART.match(text, position)
        unit = part and (part[2].lower() or "s")
        if unit and unit not in _DURATION_UNITS and unit.endswith("s"):  # plurals: 2 hours, 5 mins
            unit = unit[:-1]
        if not part or part.end() == position or unit not in _DURATION_UNITS:
            raise ValueError(f"not a duration: {text!r} (use 90s, 30m, 5min, 1.5h or 1h30m)")
        seconds += float(part[1]) * _DURATION_UNITS[unit]
        position = part.end()
    if not text.strip():
        raise ValueError("not a duration: an empty text (use 90s, 30m, 5min, 1.5h or 1h30m)")
    return seconds


_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """Bytes from "1073741824", "512M", "1G", "1.5GB" or "64k" (powers of 1,024)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([kmgt]?)(?:i?b)?\s*", text, re.IGNORECASE)
    if not match:
        raise ValueError(f"not a size: {text!r} (use 512M, 1G or a number of bytes)")
    return int(float(match[1]) * _SIZE_UNITS[match[2].lower()])


def parse_bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes", "on"):
        return True
    if text.lower() in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"{text!r} is not true or false")


def field_parser(cls, name: str) -> Callable[[str], Any]:
    """text -> a value of `cls.name`'s type: the one typed parser behind CLI flags and sweep grids."""
    f = next(f for f in fields(cls) if f.name == name)
    if f.metadata.get("parse"):
        return f.metadata["parse"]
    kind = typing.get_type_hints(cls)[name]
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        kind = next(a for a in typing.get_args(kind) if a is not type(None))  # Optional[X] -> X
    return {bool: parse_bool, float: parse_finite}.get(kind, kind)


def parse_finite(text: str) -> float:
    """A float setting: a number, never nan or infinity (`--lr nan` would train at no rate, `--warmup nan` at
    lr 0, without a word)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    return value


def parse_field(cls, name: str, text: str) -> Any:
    """Parse and check one value for field `name` of `cls`; a bad value is a UserError naming the field."""
    f = next(f for f in fields(cls) if f.name == name)
    try:
        value = field_parser(cls, name)(text)
    except ValueError as e:
        raise UserError(f"{name}: {e}") from None
    choices = f.metadata.get("choices")
    if choices and value not in choices:
        raise UserError(f"{name}: {value!r} is not one of {', '.join(choices)}")
    return value


def require(checks: list[tuple[bool, str]], what: str) -> None:
    for ok, message in checks:
        if not ok:
            raise UserError(f"invalid {what} config: {message}")


def check_choices(config) -> list[tuple[bool, str]]:
    """Every string field with declared choices holds one of them."""
    return [
        (
            getattr(config, f.name) in f.metadata["choices"],
            f"{f.name} must be one of {', '.join(f.metadata['choices'])}, not {getattr(config, f.name)!r}",
        )
        for f in fields(config)
        if f.metadata.get("choices")
    ]


class Configurable:
    """Plain-dict round trip for configs saved in JSON; unknown keys (from other versions) are ignored."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]):
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})
