"""Opening text files and reading rows from them: one place for compression, encodings and table formats.

    open_text(path)             a text stream: .gz/.bz2/.xz/.zst decompressed (and a .zip's one file, as Kaggle
                                serves tables: train.csv.zip), UTF-8 (a byte-order mark dropped)
                                or UTF-16/32 with one, invalid bytes replaced (and counted), binary files refused
    read_rows(path, columns)    (line number, {column: value}) from .tsv, .csv, .xlsx or .ods (the first sheet,
                                or book.xlsx#name's; spreadsheets.py), .jsonl (or a .json array of records),
                                .parquet or .arrow (a `datasets.save_to_disk` shard), streaming
    class_label_names(path, c)  the names a `datasets` table's integer labels stand for

Columns are header names, or indexes ("0", "1") for a file without a header:
a table is headerless exactly when every column asked for is a number. TSV is
read without quote processing (GLUE's files contain bare quotes), CSV with it.
"""

from __future__ import annotations

import bz2
import codecs
import csv
import gzip
import importlib
import io
import itertools
import json
import lzma
import re
import sys
import warnings
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from ..errors import UserError
from . import catalog
from .catalog import format_named
from .spreadsheets import sheet_rows, split_sheet

FORMATS_EXTRA = "pip install 'bertforge[formats]'"


def optional_module(name: str, path: Path):
    """An optional dependency of the `formats` extra, or one line saying how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise UserError(f"{path}: reading this format needs {name}: {FORMATS_EXTRA}") from None


def _open_zstd(path: Path, mode: str) -> IO[bytes]:
    """A .zst file's bytes, decompressed as a stream; a file that ends inside a frame raises EOFError when the
    reading gets there, as gzip, bz2 and xz do for a file cut short (zstandard's own reader stops quietly)."""
    if mode != "rb":
        raise ValueError(f"a .zst file is read as bytes, not {mode!r}")
    return _zstd_reader(open(path, "rb"), optional_module("zstandard", path))


def _zstd_reader(raw: IO[bytes], zstandard) -> IO[bytes]:
    return io.BufferedReader(_ZstdStream(raw, zstandard), buffer_size=1 << 17)


class _ZstdStream(io.RawIOBase):
    """The decompressed bytes of zstd frames, one after another (`zstd` writes one; `pzstd` several)."""

    def __init__(self, raw: IO[bytes], zstandard):
        self._file = raw
        self._new_frame = zstandard.ZstdDecompressor().decompressobj
        self._frame = self._new_frame()
        self._in_frame = False  # compressed bytes of the current frame have been read
        self._out = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._out:
            compressed = self._file.read(1 << 17)
            if not compressed:
                if self._in_frame:
                    raise EOFError("the zstd data ends inside a frame: the file is cut short")
                return 0
            self._out = self._decompress(compressed)
        n = min(len(buffer), len(self._out))
        buffer[:n] = self._out[:n]
        self._out = self._out[n:]
        return n

    def _decompress(self, compressed: bytes) -> bytes:
        out = []
        while compressed:
            out.append(self._frame.decompress(compressed))
            self._in_frame = not self._frame.eof
            compressed = self._frame.unused_data if self._frame.eof else b""
            if self._frame.eof:
                self._frame, self._in_frame = self._new_frame(), bool(compressed)
        return b"".join(out)

    def close(self) -> None:
        self._file.close()
        super().close()


def read_errors() -> tuple[type[BaseException], ...]:
    """What reading a truncated or corrupt file raises: OSError and friends (a zip member's bad data too), and
    zstandard's own error once loaded."""
    zstandard = sys.modules.get("zstandard")
    return (OSError, EOFError, lzma.LZMAError, zlib.error, zipfile.BadZipFile) + (
        (zstandard.ZstdError,) if zstandard else ()
    )


COMPRESSIONS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open, ".zst": _open_zstd}
# The longest record a reader takes whole: a JSONL line, a CSV field, an element of a JSON array (characters).
# Longer ones are refused in one line: a 3 GB line would need gigabytes, and no training text is one record of
# more than a book or two.
MAX_RECORD_CHARS = 1 << 26


MAX_EXPANSION = 200.0  # expanded bytes per compressed byte of an archive's member, at most (CorpusOptions)
RATIO_CHECKED_AFTER = 1 << 20  # expanded bytes before the ratio is judged: a small file compresses oddly


@dataclass
class ExpandedBytes:
    """Bytes expanded so far, over the members of one tar."""

    bytes: int = 0


class Bounded(io.RawIOBase):
    """Expanded bytes (an archive member's), refused once they pass `max_ratio` times the compressed bytes behind
    them: text expands 3 to 10 times, a zip bomb a thousand and more."""

    def __init__(
        self,
        raw: IO[bytes],
        compressed: Callable[[], int],
        max_ratio: float,
        where: str,
        total: ExpandedBytes | None = None,
    ):
        self.raw, self.compressed, self.max_ratio, self.where = raw, compressed, max_ratio, where
        self.total = total if total is not None else ExpandedBytes()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.raw.readinto(buffer) if hasattr(self.raw, "readinto") else self._read_into(buffer)
        self.total.bytes += n or 0
        expanded, compressed = self.total.bytes, self.compressed()
        if expanded > RATIO_CHECKED_AFTER and expanded > self.max_ratio * max(compressed, 1):
            raise UserError(
                f"{self.where}: expands more than {self.max_ratio:g} times its compressed size (a zip bomb?); "
                "--max-expansion raises the limit"
            )
        return n

    def _read_into(self, buffer) -> int:
        data = self.raw.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.raw.close()
        super().close()


def decompressed(raw: IO[bytes], name: str) -> IO[bytes]:
    """`raw` (a member of an archive) decompressed as its name's suffix says (.gz, .bz2, .xz, .zst), or as it is."""
    suffix = compression_of(Path(name))
    if suffix == ".gz":
        return gzip.GzipFile(fileobj=raw)
    if suffix == ".bz2":
        return bz2.BZ2File(raw)
    if suffix == ".xz":
        return lzma.LZMAFile(raw)
    if suffix == ".zst":
        return _zstd_reader(raw, optional_module("zstandard", Path(name)))
    return raw


@dataclass
class ReadStats:
    """What reading noticed along the way, reported once at the end."""

    files: list[str] = field(default_factory=list)
    bytes_read: int = 0
    invalid_utf8: int = 0
    skipped_lines: int = 0
    error_handler: str = field(default="", repr=False, compare=False)  # the codec handler that counts invalid_utf8


def compression_of(path: Path) -> str | None:
    suffix = path.suffix.lower()
    return suffix if suffix in COMPRESSIONS else None


def format_of(path: Path) -> str:
    """txt, jsonl, csv, tsv, xlsx, ods, parquet, arrow, html, epub, docx, pptx, odt, pdf, markdown, notebook,
    subtitles or archive, from the name with any compression suffix removed. A name without a suffix (WikiExtractor's
    wiki_00) is JSONL if the file starts with '{' (its --json output), else text. `book.xlsx#sheet` is xlsx. A .zip
    of one file that reads as a stream (train.csv.zip) is that file's format: open_text reads it."""
    path = split_sheet(path)[0]
    name = _uncompressed(path.name)
    if name.endswith(".zip") and (inner := zipped_file(path)) is not None:
        return _named_format(_uncompressed(inner.filename))
    return "jsonl" if "." not in name and _starts_with_brace(path) else _named_format(name)


def format_of_name(name: str) -> str | None:
    """What a file's name alone says of its format (as `format_of`, without opening it); None for a name without
    a suffix (WikiExtractor's wiki_00), whose first bytes decide."""
    bare = _uncompressed(PurePosixPath(name).name)
    return _named_format(bare) if "." in bare else None


def _uncompressed(name: str) -> str:
    """A file's lower-case name without its compression suffix: wiki_00.gz -> wiki_00."""
    name = name.lower()
    suffix = Path(name).suffix
    return name[: -len(suffix)] if suffix in COMPRESSIONS else name


def _named_format(name: str) -> str:
    """What an (uncompressed, lower-case) name says of its file's format; "txt" where it says nothing."""
    return next((kind for suffix, kind in catalog.by_suffix().items() if name.endswith(suffix)), "txt")


def zipped_file(path: Path) -> zipfile.ZipInfo | None:
    """The one file of a .zip that holds one, not compressed again, in a format read as a stream: Kaggle serves
    its tables so (train.csv.zip, train.tsv.zip). None for any other archive, which is a directory's worth of files
    to read one by one (archives.py)."""
    try:
        with zipfile.ZipFile(path) as archive:
            files = [info for info in archive.infolist() if not info.is_dir() and not hidden(info.filename)]
    except (zipfile.BadZipFile, OSError):  # reading it as an archive says what is wrong
        return None
    if len(files) != 1 or compression_of(Path(files[0].filename)):
        return None
    member = files[0].filename.lower()
    named = member.endswith(catalog.suffixes())  # a picture's name is not a text file's
    return files[0] if named and format_named(_named_format(member)).text else None


def hidden(name: str) -> bool:
    """Whether a (POSIX) path has a hidden part: .git/, Jupyter's .ipynb_checkpoints/, macOS's ._ resource forks."""
    return any(part.startswith(".") for part in PurePosixPath(name).parts)


def open_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, name: str) -> IO[bytes]:
    """A zip member's bytes; an encrypted one is refused (`name` is what the message calls it)."""
    if info.flag_bits & 0x1:  # bit 0: encrypted
        raise UserError(f"{name}: encrypted; unpack the archive with its password first")
    return archive.open(info)


def _starts_with_brace(path: Path) -> bool:
    try:
        with COMPRESSIONS.get(compression_of(path) or "", open)(path, "rb") as f:
            return f.read(64).lstrip(codecs.BOM_UTF8 + b" \t\r\n").startswith(b"{")
    except read_errors():  # missing or unreadable: reading it says so, with the path
        return False


# The byte-order marks of the Unicode encodings other than UTF-8 that text tools write: Windows Notepad's and
# Excel's "Unicode text" and PowerShell 5's `>` write UTF-16LE with a mark. UTF-32LE's mark begins with UTF-16LE's,
# so it is tried first. Python's "utf-16"/"utf-32" codecs read the mark for the byte order and drop it.
BYTE_ORDER_MARKS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _counting_errors(stats: ReadStats | None) -> str:
    """The codec error handler that replaces invalid bytes with U+FFFD and counts them in `stats`: one per
    ReadStats, registered once (Python keeps every registered handler for ever, and a handler per file grew
    without bound over an archive of millions of members); plain "replace" where nothing counts."""
    if stats is None:
        return "replace"
    if not stats.error_handler:
        stats.error_handler = f"bertforge-count-{id(stats)}"

        def count(error: UnicodeDecodeError):
            stats.invalid_utf8 += 1
            return "\ufffd", error.end

        codecs.register_error(stats.error_handler, count)
    return stats.error_handler


def open_text(path: str | Path, stats: ReadStats | None = None) -> IO[str]:
    """A text stream over `path`, UTF-8 unless a byte-order mark says UTF-16 or UTF-32; invalid bytes are replaced
    and counted in `stats`."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    if path.name.lower().endswith(".zip") and (inner := zipped_file(path)) is not None:
        name = f"{path}/{inner.filename}"  # the member's stream keeps the archive open until it closes
        member = open_member(zipfile.ZipFile(path), inner, name)
        return text_stream(Bounded(member, lambda: inner.compress_size, MAX_EXPANSION, name), name, stats)
    if format_of(path) == "archive":
        raise UserError(f"{path}: an archive of files, not one text file; unpack it and name the file to read")
    opener = COMPRESSIONS.get(compression_of(path) or "", open)
    return text_stream(opener(path, "rb"), str(path), stats)


def text_stream(raw: IO[bytes], name: str, stats: ReadStats | None = None) -> IO[str]:
    """`raw` decoded as `open_text` decodes a file (also a member of a zip package); `name` is what errors say."""
    try:
        raw = raw if hasattr(raw, "peek") else io.BufferedReader(raw)
        head = raw.peek(8192)[:8192]
    except read_errors() as e:
        raw.close()
        raise UserError(f"{name}: cannot read ({e})") from None
    encoding = next((codec for mark, codec in BYTE_ORDER_MARKS if head.startswith(mark)), "utf-8-sig")
    if encoding == "utf-8-sig" and b"\x00" in head:
        raw.close()
        raise UserError(
            f"{name}: looks like a binary file (NUL bytes), not text; if it is UTF-16 text without a byte-order mark, "
            f"convert it to UTF-8 (iconv -f UTF-16LE -t UTF-8 {Path(name).name} > utf8.txt)"
        )
    if stats is not None:  # the caller counts, and says what was replaced (prepare, tokenizer train)
        return io.TextIOWrapper(raw, encoding=encoding, errors=_counting_errors(stats), newline="")
    return _ReportingText(raw, name, encoding=encoding, errors=_counting_errors(_UNCOUNTED), newline="")


_UNCOUNTED = ReadStats()  # replacements in streams whose caller counts none: one handler for all of them


class _ReportingText(io.TextIOWrapper):
    """A text stream that says, once closed, how many invalid UTF-8 sequences it read as U+FFFD: a labelled file or
    an inference input in Latin-1 is read on, as prepare reads a corpus, but not in silence."""

    def __init__(self, raw, name: str, **kwargs):
        super().__init__(raw, **kwargs)
        self._name, self._replaced_before = name, _UNCOUNTED.invalid_utf8

    def close(self) -> None:
        replaced = _UNCOUNTED.invalid_utf8 - self._replaced_before
        if not self.closed and replaced:
            warnings.warn(f"{self._name}: {replaced} invalid UTF-8 sequences replaced by U+FFFD", stacklevel=2)
        super().close()


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
