"""A safetensors file's index, read from its header's bytes alone: the names, shapes and dtypes of its tensors.

The header's length is read first and bounded (the format's 100 MB), every entry is checked as the format defines it
(a known dtype, a shape of whole numbers, offsets inside the data holding exactly its bytes), and the file is
never mapped: a header that lists a tensor of gigabytes costs its few bytes, under any address-space limit.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..errors import UserError, one_line
from ..fileio import parse_json

WeightIndex = dict[str, tuple[tuple[int, ...], str]]  # name -> (shape, dtype), from a safetensors header


HEADER_LIMIT = 100 << 20  # the largest header the safetensors format allows
DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


def weight_index(directory: Path) -> WeightIndex | None:
    """name -> (shape, dtype) of every tensor in model.safetensors, from its header's bytes alone (its length read
    first and bounded, every entry's offsets checked against the file): the file is never mapped, so a header that
    lists a tensor of gigabytes costs its few bytes. None for a pickle-only directory."""
    path = directory / "model.safetensors"
    if not path.is_file():
        return None
    try:
        with open(path, "rb") as f:
            size = path.stat().st_size
            length = int.from_bytes(f.read(8), "little")
            if size < 8 or not 2 <= length <= min(HEADER_LIMIT, size - 8):
                raise ValueError("its header's length does not fit the file")
            header = parse_json(f.read(length), path, "config")
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror or e})") from None
    except (ValueError, UserError) as e:
        raise UserError(f"{path}: corrupted or truncated safetensors file ({one_line(e)})") from None
    return _entries(path, header, size - 8 - length)


def _entries(path: Path, header: Any, data_bytes: int) -> WeightIndex:
    """A safetensors header's tensors, each entry checked as the format defines it: a known dtype, a shape of
    whole numbers, and offsets inside the data that hold exactly its bytes."""
    if not isinstance(header, dict):
        raise UserError(f"{path}: corrupted safetensors file (its header is not a table of tensors)")
    index: WeightIndex = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = entry.get("dtype") if isinstance(entry, dict) else None
        shape = entry.get("shape") if isinstance(entry, dict) else None
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if (
            not isinstance(dtype, str)
            or dtype not in DTYPE_BYTES
            or not _whole_numbers(shape)
            or not _whole_numbers(offsets)
            or len(offsets) != 2
        ):
            raise UserError(f"{path}: corrupted safetensors file (the entry of {str(name)[:80]!r} is not a tensor's)")
        begin, end = offsets
        if not begin <= end <= data_bytes or end - begin != math.prod(shape) * DTYPE_BYTES[dtype]:
            raise UserError(f"{path}: corrupted or truncated safetensors file ({str(name)[:80]!r} lies outside it)")
        index[name] = (tuple(shape), dtype)
    return index


def _whole_numbers(values: Any) -> bool:
    return isinstance(values, list) and all(type(value) is int and value >= 0 for value in values)
