"""Atomic writes: a killed process leaves either the old file or the new one, never a torn one.

Also where the package's own files (assets/) are found.
"""

from __future__ import annotations

import contextlib
import csv
import importlib.resources
import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import UserError


def asset_path(name: str) -> Path:
    """A file shipped in bertforge/assets (the bundled corpora, the modeling file for `transformers`)."""
    return Path(str(importlib.resources.files("bertforge") / "assets" / name))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json(path: str | Path, data: Any) -> None:
    """Write JSON atomically (`write_text`)."""
    write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def write_text(path: str | Path, text: str) -> None:
    """Write text to a temporary file beside `path`, fsync it, then rename over `path`."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


TABLE_OUTPUTS = (".csv", ".tsv", ".jsonl")  # what the answering commands' --out writes


def table_output(path: str | Path) -> Path:
    """`path`, if `write_answers` can write it: checked before a model runs, not after."""
    path = Path(path)
    if path.suffix.lower() not in TABLE_OUTPUTS:
        raise UserError(f"{path}: answers are written as {', '.join(TABLE_OUTPUTS)}; name the file so")
    return path


def write_answers(
    path: str | Path, records: list[dict[str, Any]], rows: list[dict[str, Any]], columns: list[str]
) -> None:
    """A command's answers, written atomically: to .jsonl the `records` as they are, a line each; to .csv or .tsv
    their flat `rows` under `columns`, which a spreadsheet opens as it is."""
    path = table_output(path)
    if path.suffix.lower() == ".jsonl":
        write_text(path, "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))
        return
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
    writer.writeheader()
    writer.writerows(rows)
    write_text(path, out.getvalue())


@contextlib.contextmanager
def atomic_directory(target: str | Path) -> Iterator[Path]:
    """Yield a temporary sibling directory; on success it replaces `target` in one rename.

    If the body raises (a full disk, a kill), the temporary directory is
    removed and `target`, if it existed, is untouched.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.tmp-"))
    try:
        yield tmp
        for child in tmp.iterdir():
            if child.is_file():
                with open(child, "rb") as f:
                    os.fsync(f.fileno())
        if target.exists():
            # Two renames: the old directory is moved aside before the new one takes its name.
            old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.old-"))
            os.replace(target, old / target.name)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
        _fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
