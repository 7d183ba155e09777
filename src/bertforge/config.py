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
from dataclasses import dataclass, field, fields
from typing import Any

from .errors import UserError


def documented(
    default: Any,
    help: str,
    choices: tuple[str, ...] | None = None,
    parse: Callable[[str], Any] | None = None,
    at_least: float | None = None,
    at_most: float | None = None,
) -> Any:
    """A dataclass field that carries its help text, and what a value must be, in metadata: for strings, the
    allowed values; for numbers, the range (inclusive; every float is finite). `check_fields` holds a config to
    them, wherever it was made: flags, a sweep's grid, a saved run, the Python API."""
    limits = {"choices": choices, "at_least": at_least, "at_most": at_most}
    return field(default=default, metadata={"help": help, "parse": parse, **limits})


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


@dataclass(frozen=True)
class Key:
    """What a key of a JSON file another program wrote (config.json, tokenizer_config.json) must hold: one of
    `kinds` (bool is no int here), `check`ed further where given, described by `rule` in messages."""

    kinds: tuple[type, ...]
    rule: str
    check: Callable[[Any], bool] | None = None


FLAG = Key((bool,), "true or false")  # a switch, in every file's schema
# The kinds of value a model's config.json holds, in the ranges no setting of any model leaves (how large a model
# may be is ModelConfig's to say): modelfiles/schema.py's keys and each family's own (families/).
MAX_ID = 1 << 40
COUNT = Key((int,), "a positive whole number", lambda v: 1 <= v < MAX_ID)
INDEX = Key((int,), "a whole number, 0 or more", lambda v: 0 <= v < MAX_ID)
RATE = Key((int, float), "a number from 0 to 1", lambda v: 0 <= v <= 1)
POSITIVE = Key((int, float), "a positive number", lambda v: 0 < v < 1e30)
NAME = Key((str,), "a name", lambda v: 0 < len(v) <= 200)
TABLE = Key((dict,), "a JSON object")


def check_keys(values: dict[str, Any], schema: dict[str, Key], source: str) -> None:
    """Every key of `schema` that `values` holds (and not as null) holds what it must: one line naming the file,
    the key and what it holds otherwise."""
    for name, key in schema.items():
        value = values.get(name)
        if value is None:
            continue
        fits = isinstance(value, key.kinds) and not (isinstance(value, bool) and bool not in key.kinds)
        if not fits or (key.check is not None and not key.check(value)):
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            raise UserError(f"{source}: {name} is {shown}, not {key.rule}")


def strings(value: Any) -> bool:
    return all(isinstance(item, str) for item in value)


def require(checks: list[tuple[bool, str]], what: str) -> None:
    for ok, message in checks:
        if not ok:
            raise UserError(f"invalid {what} config: {message}")


def check_choices(config) -> list[tuple[bool, str]]:
    """Every field holds what its declaration allows: a string one of its choices, a float a finite number, a
    number within its range."""
    checks = []
    for f in fields(config):
        value, meta = getattr(config, f.name), f.metadata
        if meta.get("choices"):
            checks.append(
                (value in meta["choices"], f"{f.name} must be one of {', '.join(meta['choices'])}, not {value!r}")
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            checks.append((False, f"{f.name} must be a finite number, not {value}"))
        elif meta.get("at_least") is not None and value < meta["at_least"]:
            checks.append((False, f"{f.name} must be at least {meta['at_least']:g}, not {value:g}"))
        elif meta.get("at_most") is not None and value > meta["at_most"]:
            checks.append((False, f"{f.name} must be at most {meta['at_most']:g}, not {value:g}"))
    return checks


class Configurable:
    """Plain-dict round trip for configs saved in JSON; unknown keys (from other versions) are ignored."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]):
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})
