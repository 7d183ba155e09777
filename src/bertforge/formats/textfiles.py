"""Opening text files: one place for compression, bounds on what a compressed file expands to, and encodings.

    open_text(path)             a text stream: .gz/.bz2/.xz/.zst decompressed (and a .zip's one file, as Kaggle
                                serves tables: train.csv.zip), UTF-8 (a byte-order mark dropped)
                                or UTF-16/32 with one, invalid bytes replaced (and counted), binary files refused

Rows of tables and JSON lines are read from these streams by rows.py.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import importlib
import io
import lzma
import sys
import warnings
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

from ..errors import UserError
from . import catalog
from .catalog import format_named
from .spreadsheets import split_sheet

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
