"""Reading documents from text corpora: txt, jsonl, csv/tsv (each optionally gzipped).

Everything streams: a reader yields `Paragraph`s one at a time, so a corpus of
any size passes through bounded memory. A paragraph marks whether it starts a
new document, because BERT's next-sentence pairs must know where documents end.

  .txt           one paragraph (or sentence) per line; a blank line between documents
  .jsonl         one JSON object per line; text in --field, optional --doc-field groups rows
  .csv / .tsv    one row per document; text in --column
"""

from __future__ import annotations

import codecs
import csv
import gzip
import html
import io
import json
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterable, Iterator

from .errors import UserError

TEXT_SUFFIXES = (".txt", ".text", ".jsonl", ".csv", ".tsv")
# A longer line is read in pieces (cut at whitespace): `tokenizers` needs ~135 bytes per character of
# one sequence, so a 100 MB line in one piece would need gigabytes.
MAX_LINE_CHARS = 1 << 16


@dataclass
class CorpusOptions:
    """How to find text in the input files."""

    field: str = "text"  # JSONL key holding the text
    doc_field: str | None = None  # JSONL key whose change starts a new document
    column: str | None = None  # CSV/TSV column holding the text (a name, or an index for headerless files)
    clean: str | None = None  # "html": strip tags, entities, URLs and control characters
    split_sentences: bool = True
    on_error: str = "fail"  # broken JSONL lines: fail | skip


@dataclass
class Paragraph:
    text: str
    new_document: bool


@dataclass
class ReadStats:
    """What reading noticed along the way, reported once at the end."""

    files: list[str] = field(default_factory=list)
    bytes_read: int = 0
    invalid_utf8: int = 0
    skipped_lines: int = 0


# ---------------------------------------------------------------- files


def find_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand directories recursively; every named path must exist and yield a text file."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise UserError(f"{path}: no such file or directory")
        if path.is_dir():
            inside = sorted(p for p in path.rglob("*") if p.is_file() and _is_text_name(p))
            if not inside:
                raise UserError(f"{path}: directory holds no text files ({', '.join(TEXT_SUFFIXES)}, optionally .gz)")
            found.extend(inside)
        else:
            found.append(path)
    if not found:
        raise UserError("no input files given")
    return found


def _is_text_name(path: Path) -> bool:
    name = path.name.lower().removesuffix(".gz")
    return name.endswith(TEXT_SUFFIXES)


def _format_of(path: Path) -> str:
    name = path.name.lower().removesuffix(".gz")
    for suffix, kind in ((".jsonl", "jsonl"), (".csv", "csv"), (".tsv", "tsv")):
        if name.endswith(suffix):
            return kind
    return "txt"


class _CountingDecoder:
    """UTF-8 decoding that replaces invalid bytes with U+FFFD and counts them."""

    def __init__(self, stats: ReadStats):
        self.stats = stats
        self.name = f"bertforge-count-{id(self)}"
        codecs.register_error(self.name, self._handle)

    def _handle(self, error: UnicodeDecodeError):
        self.stats.invalid_utf8 += 1
        return "\ufffd", error.end


def _open_text(path: Path, stats: ReadStats, decoder: _CountingDecoder) -> IO[str]:
    raw = gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb")
    try:
        head = raw.peek(8192)[:8192] if hasattr(raw, "peek") else b""
    except (OSError, EOFError) as e:
        raw.close()
        raise UserError(f"{path}: cannot read ({e})") from None
    if b"\x00" in head:
        raw.close()
        raise UserError(f"{path}: looks like a binary file (NUL bytes), not text")
    return io.TextIOWrapper(raw, encoding="utf-8-sig", errors=decoder.name, newline="")


# ---------------------------------------------------------------- readers


def read_paragraphs(paths: Iterable[str | Path], options: CorpusOptions | None = None, stats: ReadStats | None = None) -> Iterator[Paragraph]:
    """Every paragraph of every file, cleaned, in order. Each file starts a new document."""
    options = options or CorpusOptions()
    stats = stats if stats is not None else ReadStats()
    decoder = _CountingDecoder(stats)
    files = find_files(paths)
    seen_text = False
    for path in files:
        stats.files.append(str(path))
        before = stats.invalid_utf8
        reader = {"txt": _read_txt, "jsonl": _read_jsonl, "csv": _read_table, "tsv": _read_table}[_format_of(path)]
        try:
            with _open_text(path, stats, decoder) as f:
                boundary = False  # a document starts at a paragraph that cleaning emptied: pass it on
                for paragraph in reader(f, path, options, stats):
                    text = clean_text(paragraph.text, options.clean)
                    if not text:
                        boundary = boundary or paragraph.new_document
                        continue
                    seen_text = True
                    yield Paragraph(text, paragraph.new_document or boundary)
                    boundary = False
        except OSError as e:  # e.g. a truncated gzip file
            raise UserError(f"{path}: cannot read ({e})") from None
        if stats.invalid_utf8 > before:
            warnings.warn(f"{path}: {stats.invalid_utf8 - before} invalid UTF-8 sequences replaced by U+FFFD", stacklevel=2)
    if not seen_text:
        raise UserError(f"no text found in {', '.join(str(p) for p in files)}")


def _read_txt(f: IO[str], path: Path, options: CorpusOptions, stats: ReadStats) -> Iterator[Paragraph]:
    new_document = True
    carry = ""  # the unfinished last word of a piece of an over-long line
    while True:
        line = carry + f.readline(MAX_LINE_CHARS)
        carry = ""
        if not line:
            return
        stats.bytes_read += len(line)
        if not line.endswith("\n") and len(line) >= MAX_LINE_CHARS:
            cut = max(line.rfind(" "), line.rfind("\t"))
            if cut > 0:
                line, carry = line[:cut], line[cut + 1 :]
                stats.bytes_read -= len(carry) + 1
        if not line.strip():
            new_document = True
            continue
        yield Paragraph(line.strip(), new_document)
        new_document = False


def _read_jsonl(f: IO[str], path: Path, options: CorpusOptions, stats: ReadStats) -> Iterator[Paragraph]:
    previous_doc = object()
    for number, line in enumerate(f, start=1):
        stats.bytes_read += len(line)
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            text = row[options.field]
            if not isinstance(text, str):
                raise TypeError(f"field {options.field!r} is not a string")
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            problem = f"missing field {options.field!r}" if isinstance(e, KeyError) else str(e)
            if options.on_error == "skip":
                stats.skipped_lines += 1
                continue
            raise UserError(f"{path}:{number}: {problem} (use --on-error skip to skip such lines)") from None
        doc = row.get(options.doc_field, number) if options.doc_field else number
        for i, paragraph in enumerate(p for p in text.split("\n") if p.strip()):
            yield Paragraph(paragraph.strip(), i == 0 and doc != previous_doc)
        previous_doc = doc


def _read_table(f: IO[str], path: Path, options: CorpusOptions, stats: ReadStats) -> Iterator[Paragraph]:
    csv.field_size_limit(sys.maxsize)
    delimiter = "\t" if _format_of(path) == "tsv" else ","
    reader = csv.reader(f, delimiter=delimiter, quoting=csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL)
    index = column_index(next(reader, []), options.column, path)
    for number, row in enumerate(reader, start=2):
        stats.bytes_read += sum(len(cell) for cell in row)
        if index >= len(row):
            raise UserError(f"{path}:{number}: row has {len(row)} columns, column {options.column!r} is missing")
        for i, paragraph in enumerate(p for p in row[index].split("\n") if p.strip()):
            yield Paragraph(paragraph.strip(), i == 0)


def column_index(header: list[str], column: str | None, path: Path) -> int:
    """The index of `column` in the header row; a number names a column of a headerless file."""
    if column is None:
        raise UserError(f"{path}: name the text column with --column")
    if column in header:
        return header.index(column)
    if column.isdigit():
        return int(column)
    raise UserError(f"{path}: no column {column!r}; the header has {', '.join(repr(h) for h in header)}")


def read_lines(path: str | Path) -> list[str]:
    """Non-empty lines of a small text file (inputs for embed, nsp --input)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    lines = [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    if not lines:
        raise UserError(f"{path}: empty file")
    return lines


# ---------------------------------------------------------------- cleaning

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b\ufeff]")
_SCRIPT = re.compile(r"<(script|style)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]{0,2000}>")
_URL = re.compile(r"\b(?:https?://|www\.)\S+", re.IGNORECASE)
_SPACES = re.compile(r"\s+")


def clean_text(text: str, mode: str | None = None) -> str:
    """Control characters always go; with mode "html", also tags, entities and URLs."""
    if mode == "html":
        text = _SCRIPT.sub(" ", text)
        text = _TAG.sub(" ", text)
        text = html.unescape(text)
        text = _URL.sub(" ", text)
    elif mode not in (None, "none"):
        raise UserError(f"unknown --clean mode {mode!r}; choose html")
    text = _CONTROL.sub(" ", text)
    return _SPACES.sub(" ", text).strip()


# ---------------------------------------------------------------- sentences

ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof sr jr st mt ft vs etc e.g i.e cf al fig figs no nos vol vols pp ed eds
    gen col capt lt sgt rev hon gov sen rep jan feb mar apr jun jul aug sep sept oct nov dec
    inc ltd co corp dept est approx u.s u.k u.n a.m p.m ph.d b.a m.a""".split()
)
# A boundary candidate: terminal punctuation, optional closing quotes or brackets, then space.
_BOUNDARY = re.compile(r"([.!?…]+)([\"'”’»)\]]*)\s+(?=[\"'“‘«(\[]?[^\s\"'“‘«(\[])")
_CJK_BOUNDARY = re.compile(r"([。！？]+[」』”’）]*)")


def split_sentences(paragraph: str) -> list[str]:
    """Rule-based splitting: fast, and right on abbreviations, initials, decimals, ellipses and quotes.

    A boundary is terminal punctuation followed by whitespace and then a capital
    letter or digit (optionally behind an opening quote), unless the word before
    the punctuation is a known abbreviation or a single initial ("J. Smith").
    Decimals ("3.14") have no space after the dot, so they never split.
    """
    sentences: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(paragraph):
        next_char = paragraph[match.end() : match.end() + 2].lstrip("\"'“‘«([")[:1]
        if not (next_char.isupper() or next_char.isdigit()):
            continue
        if match.group(1) == "." and _ends_with_abbreviation(paragraph[start : match.start()]):
            continue
        sentences.append(paragraph[start : match.start(2) + len(match.group(2))].strip())
        start = match.end()
    sentences.append(paragraph[start:].strip())
    out: list[str] = []
    for sentence in sentences:
        out.extend(part for part in _split_cjk(sentence) if part)
    return out


def _ends_with_abbreviation(text: str) -> bool:
    word = text.rsplit(None, 1)[-1] if text.strip() else ""
    word = word.lstrip("\"'“‘«([").lower()
    if not word:
        return False
    if word in ABBREVIATIONS:
        return True
    # Single initials ("J") and dotted acronyms ("U.S", "e.g") stay with what follows.
    return len(word) == 1 and word.isalpha() or bool(re.fullmatch(r"(?:\w\.)+\w", word))


def _split_cjk(sentence: str) -> list[str]:
    if not _CJK_BOUNDARY.search(sentence):
        return [sentence]
    parts = _CJK_BOUNDARY.split(sentence)
    # split() alternates text and captured punctuation: glue each mark back onto its sentence.
    joined = ["".join(parts[i : i + 2]).strip() for i in range(0, len(parts), 2)]
    return [p for p in joined if p]
