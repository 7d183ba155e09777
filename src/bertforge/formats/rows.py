"""Reading rows from tables and JSON lines, streaming: the labelled files of fine-tuning, and corpora kept as columns.

    read_rows(path, columns)    (line number, {column: value}) from .tsv, .csv, .xlsx or .ods (the first sheet,
                                or book.xlsx#name's; spreadsheets.py), .jsonl (or a .json array of records),
                                .parquet or .arrow (a `datasets.save_to_disk` shard), streaming
    class_label_names(path, c)  the names a `datasets` table's integer labels stand for

Columns are header names, or indexes ("0", "1") for a file without a header:
a table is headerless exactly when every column asked for is a number. TSV is
read without quote processing (GLUE's files contain bare quotes), CSV with it.
"""

from __future__ import annotations

import csv
import importlib
import io
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ..errors import UserError
from . import catalog
from .catalog import format_named
from .spreadsheets import sheet_rows
from .textfiles import ReadStats, format_of, open_text, optional_module, read_errors

# The longest record a reader takes whole: a JSONL line, a CSV field, an element of a JSON array (characters).
# Longer ones are refused in one line: a 3 GB line would need gigabytes, and no training text is one record of
# more than a book or two.
MAX_RECORD_CHARS = 1 << 26


def read_rows(
    path: str | Path,
    columns: list[str],
    stats: ReadStats | None = None,
    on_error: str = "fail",
    optional: tuple[str, ...] = (),
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, {column: value}) for every non-empty row; a missing column names the file and line.

    `on_error="skip"` skips JSONL lines that are not JSON or lack a column (counted in
    `stats.skipped_lines`) instead of stopping at them. The `optional` columns are in a row where the file has
    them (a text row always holds all of its own).
    """
    path = Path(path)
    counted = stats  # a caller that counts says itself what was replaced; otherwise the stream does
    stats = stats if stats is not None else ReadStats()
    kind = format_of(path)
    fmt = format_named(kind)
    if fmt.shape == catalog.COLUMNS:
        yield from _columnar_rows(path, kind, columns, stats, optional)
        return
    if fmt.laid_out:
        raise UserError(f"{path}: {fmt.what} holds no rows or lines to read; give a .txt, .tsv, .csv or .jsonl file")
    if fmt.shape == catalog.SHEET:
        yield from _checked(_table_rows(sheet_rows(path), path, columns, kind), path, kind, columns, on_error, stats)
        return
    try:
        with open_text(path, counted) as f:
            yield from text_rows(f, str(path), kind, columns, stats, on_error)
    except read_errors() as e:  # a truncated or corrupt compressed file
        raise UserError(f"{path}: cannot read ({e})") from None


def text_rows(
    f: IO[str], name: str, kind: str, columns: list[str], stats: ReadStats, on_error: str = "fail"
) -> Iterator[tuple[int, dict[str, Any]]]:
    """`read_rows` of a JSONL, CSV or TSV text stream (a file's, or an archive member's); `name` for messages."""
    rows = (
        _jsonl_rows(f, name, stats)
        if kind == "jsonl"
        else _table_rows(_delimited(f, kind, stats, name), name, columns, kind)
    )
    yield from _checked(rows, name, kind, columns, on_error, stats)


def _checked(
    rows: Iterator[tuple[int, dict[str, Any] | str]],
    path: Path,
    kind: str,
    columns: list[str],
    on_error: str,
    stats: ReadStats,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The rows that hold every column; a broken one stops reading, naming its line, or (on_error "skip", JSONL)
    is counted and skipped."""
    for number, row in rows:
        if isinstance(row, str):
            problem = row
        else:
            missing = [c for c in columns if c not in row]
            null = next((c for c in columns if c in row and row[c] is None), None)
            if null is not None:  # JSON's null was read as the text "None"
                problem = f"field {null!r} is null"
            elif not missing:
                yield number, row
                continue
            elif kind != "jsonl":
                raise UserError(f"{path}:{number}: row has {len(row)} columns, column {missing[0]!r} is missing")
            else:
                problem = f"missing field {missing[0]!r}"
        if on_error != "skip":
            raise UserError(f"{path}:{number}: {problem} (use --on-error skip to skip such lines)")
        stats.skipped_lines += 1


def _jsonl_rows(f: IO[str], path: Path, stats: ReadStats) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(line number, the object) per non-empty line, or (line number, what is wrong with it); a file that opens
    with '[' holds one JSON array of records instead (Alpaca's data, `to_json(lines=False)`, many exports)."""
    head = f.read(JSON_PIECE)
    while head.isspace() and (more := f.read(JSON_PIECE)):  # to the first character that says which
        head += more
    if head.lstrip().startswith("["):
        yield from _json_array_rows(f, head, path, stats)
        return
    lines = itertools.chain(
        io.StringIO(head + f.readline(MAX_RECORD_CHARS)), iter(lambda: f.readline(MAX_RECORD_CHARS), "")
    )
    for number, line in enumerate(lines, start=1):
        stats.bytes_read += len(line)
        if len(line) >= MAX_RECORD_CHARS and not line.endswith("\n"):
            raise UserError(f"{path}:{number}: a line of more than {MAX_RECORD_CHARS:,} characters; split it")
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            yield number, f"not JSON ({e.msg})"
            continue
        yield number, _record(row, line)


def _record(row: Any, source: str) -> dict[str, Any] | str:
    """A JSON object as a record, or what is wrong with it: not an object, or holding a lone surrogate (`"\\ud800"`
    is valid JSON but no character: the tokenizer cannot take it). Only a `source` that escapes one is checked."""
    if not isinstance(row, dict):
        return "not a JSON object"
    if "\\ud" not in source and "\\uD" not in source:
        return row
    try:
        json.dumps(row, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as e:
        return f"holds a lone surrogate (\\u{ord(e.object[e.start]):04x}), which is not a character"
    return row


JSON_PIECE = 1 << 16  # characters read at a time from a JSON array: it streams, a record at a time
BETWEEN_ELEMENTS = re.compile(r"[ \t\r\n,]*")  # matched in place: a slice of the piece per element would copy it


def _json_array_rows(f: IO[str], text: str, path: Path, stats: ReadStats) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(the line it starts on, the object) for each element of the JSON array that `text`, then the rest of `f`,
    holds: read a piece at a time, so an array of any length passes through the memory of one element. An element
    that is broken stops the reading (nothing after it can be trusted to be where it seems), naming its line."""
    decoder = json.JSONDecoder()
    stats.bytes_read += len(text)
    at = text.index("[") + 1
    line = 1 + text.count("\n", 0, at)
    done = False  # the file has been read to its end
    while True:
        while True:  # past blanks and the comma between elements, reading on while the piece ends in them
            stripped = BETWEEN_ELEMENTS.match(text, at).end()
            line += text.count("\n", at, stripped)
            at = stripped
            if at < len(text) or done:
                break
            text, at, done = _read_on(f, text, at, stats)
        if at == len(text):
            raise UserError(f"{path}:{line}: the JSON array is not closed with ']' (a file cut short?)")
        if text[at] == "]":
            return
        try:
            row, end = decoder.raw_decode(text, at)
            complete = end < len(text) or done  # a number at a piece's end may go on in the next one
        except json.JSONDecodeError as e:
            if done:
                where = line + text.count("\n", at, e.pos)
                raise UserError(f"{path}:{where}: not JSON ({e.msg}); an array is not read past it") from None
            complete = False
        if not complete:
            if len(text) - at > MAX_RECORD_CHARS:
                raise UserError(f"{path}:{line}: an element of more than {MAX_RECORD_CHARS:,} characters; split it")
            text, at, done = _read_on(f, text, at, stats)
            continue
        yield line, _record(row, text[at:end])
        line += text.count("\n", at, end)
        at = end


def _read_on(f: IO[str], text: str, at: int, stats: ReadStats) -> tuple[str, int, bool]:
    """The unread part of `text` and the next piece of `f`; whether `f` is done."""
    piece = f.read(JSON_PIECE)
    stats.bytes_read += len(piece)
    return text[at:] + piece, 0, not piece


def _columnar_rows(
    path: Path, kind: str, columns: list[str], stats: ReadStats, optional: tuple[str, ...] = ()
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number, {column: value}) from Parquet or Arrow IPC, a record batch at a time (bounded memory).

    Columns are names, or indexes into the schema. Arrow files are those of
    `datasets.save_to_disk` (the IPC stream format) or the IPC file format.
    """
    pa = optional_module("pyarrow", path)
    try:
        schema, batches = _open_columnar(pa, path, kind)
        names = schema.names
        columns = [*columns, *(c for c in optional if c in names)]
        wanted = [_column_name(c, names) for c in columns]
        unknown = [c for c, name in zip(columns, wanted) if name not in names]
        if unknown:
            raise UserError(f"{path}: no column {unknown[0]!r}; the columns are {', '.join(map(repr, names))}")
        number = 0
        for batch in batches(list(dict.fromkeys(wanted))):
            # A crafted file's offsets may point anywhere: checked before Python reads a string through them, which
            # would read out of bounds (SIGSEGV) or ask for a negative size.
            batch.validate(full=True)
            values = batch.to_pydict()
            for i in range(batch.num_rows):
                number += 1
                row = {c: values[name][i] for c, name in zip(columns, wanted)}
                stats.bytes_read += sum(len(v) for v in row.values() if isinstance(v, str))
                yield number, row
    except (OSError, pa.ArrowException) as e:
        raise UserError(f"{path}: cannot read as {kind} ({e})") from None


def _open_columnar(pa, path: Path, kind: str):
    """(schema, a function from column names to their record batches) of a Parquet or Arrow IPC file."""
    if kind == "parquet":
        parquet = importlib.import_module("pyarrow.parquet").ParquetFile(path)
        return parquet.schema_arrow, lambda wanted: parquet.iter_batches(batch_size=1024, columns=wanted)
    source = pa.memory_map(str(path))
    try:
        stream = pa.ipc.open_stream(source)
        return stream.schema, lambda wanted: (batch.select(wanted) for batch in stream)
    except pa.ArrowInvalid:
        file = pa.ipc.open_file(source)
        batches = (file.get_batch(i) for i in range(file.num_record_batches))
        return file.schema, lambda wanted: (batch.select(wanted) for batch in batches)


def _column_name(column: str, names: list[str]) -> str:
    """A column given by name, or by its index into `names`."""
    return names[int(column)] if column.isdigit() and int(column) < len(names) else column


def class_label_names(path: str | Path, column: str) -> tuple[str, ...]:
    """The label names a Parquet or Arrow file's integer `column` stands for, or () where the file does not say.

    `datasets` stores a ClassLabel column (or a list of them: NER tags, GoEmotions' labels) as integers and
    keeps the names in the schema's "huggingface" metadata, in the files of the Hub and of `save_to_disk` alike.
    """
    path = Path(path)
    kind = format_of(path)
    if format_named(kind).shape != catalog.COLUMNS:
        return ()
    pa = optional_module("pyarrow", path)
    try:
        schema, _ = _open_columnar(pa, path, kind)
    except (OSError, pa.ArrowException) as e:
        raise UserError(f"{path}: cannot read as {kind} ({e})") from None
    try:
        features = json.loads((schema.metadata or {}).get(b"huggingface", b"{}"))["info"]["features"]
        feature = features[_column_name(column, schema.names)]
    except (KeyError, TypeError, ValueError):
        return ()
    feature = feature.get("feature", feature) if isinstance(feature, dict) else {}  # a list of labels: its items
    names = feature.get("names") if isinstance(feature, dict) else None
    return tuple(str(name) for name in names) if isinstance(names, list) else ()


def label_name(value: Any, names: tuple[str, ...], where: str) -> str:
    """A label as text. With `names`, the label is a number (an integer, or a cell of digits) indexing them. An
    empty cell is no label (it would become a class of its own, named ''): refused with its line."""
    text = str(value).strip() if value is not None else ""
    if not text:
        raise UserError(f"{where}: the label is empty; every example needs its label")
    if not names:
        return text
    if not text.isdigit() or int(text) >= len(names):
        raise UserError(
            f"{where}: label {value!r} is not a number from 0 to {len(names) - 1}, the {len(names)} label names given"
        )
    return names[int(text)]


def _delimited(f: IO[str], kind: str, stats: ReadStats, name: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, cells) of a CSV or TSV file; a field longer than MAX_RECORD_CHARS is refused, naming its line."""
    csv.field_size_limit(MAX_RECORD_CHARS)
    reader = csv.reader(
        f, delimiter="," if kind == "csv" else "\t", quoting=csv.QUOTE_MINIMAL if kind == "csv" else csv.QUOTE_NONE
    )
    try:
        for cells in reader:
            stats.bytes_read += sum(len(cell) for cell in cells) + len(cells)
            yield reader.line_num, cells
    except csv.Error as e:
        raise UserError(f"{name}:{reader.line_num}: {e} ({MAX_RECORD_CHARS:,} characters); split the text") from None


def _table_rows(
    rows: Iterator[tuple[int, list[str]]], path: Path, columns: list[str], kind: str
) -> Iterator[tuple[int, dict[str, str]]]:
    """A table's rows by column name: the header's, or the index of each cell when every column asked for is a
    number (a file without a header). A spreadsheet leaves a row's empty cells at its end out: they are ""."""
    headerless = all(c.isdigit() for c in columns)
    header = None
    if not headerless:
        header = [h.strip() for h in next(rows, (0, []))[1]]
        unknown = [c for c in columns if c not in header]
        if unknown:
            raise UserError(
                f"{path}: no column {unknown[0]!r}; the header has {', '.join(repr(h) for h in header)}"
                + _separator_hint(header, kind)
            )
        twice = next((c for c in columns if header.count(c) > 1), None)
        if twice is not None:  # which of the two is meant? (the last one was taken, silently)
            raise UserError(f"{path}: the header names column {twice!r} {header.count(twice)} times; rename them")
    for number, cells in rows:
        if not any(cell.strip() for cell in cells):
            continue
        keys = header if header is not None else [str(i) for i in range(len(cells))]
        if format_named(kind).shape == catalog.SHEET and len(cells) < len(
            keys
        ):  # the empty cells at a row's end are not stored
            cells = cells + [""] * (len(keys) - len(cells))
        yield number, dict(zip(keys, cells))


def _separator_hint(header: list[str], kind: str) -> str:
    """What a one-column header says when the file is split by another character (Excel writes ';' where the
    decimal comma is the custom)."""
    expected = "commas" if kind == "csv" else "tabs"
    fixes = {"tabs": "name it .tsv", "commas": "name it .csv", "';'": "save it with commas, or with tabs as .tsv"}
    found = [
        name for sep, name in (("\t", "tabs"), (";", "';'"), (",", "commas")) if len(header) == 1 and sep in header[0]
    ]
    if kind not in ("csv", "tsv") or not found or found[0] == expected:
        return ""
    return f" (it looks split by {found[0]}, but a .{kind} is read split by {expected}: {fixes[found[0]]})"
