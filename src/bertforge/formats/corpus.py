"""Reading documents from corpora: every file of every format in catalog.py's table, each by the one dispatcher
(`_read_format`) that the table's row steers, whether the file is on disk or comes out of an archive.

Everything streams: a reader yields `Paragraph`s one at a time, so a corpus of
any size passes through bounded memory. A paragraph marks whether it starts a
new document, because BERT's next-sentence pairs must know where documents end.
A table's or JSON line's row is a document, or --doc-column groups rows; a directory of Parquet or Arrow shards
(a `datasets.save_to_disk` directory, its JSON metadata skipped) is read in name order.

`read_texts` gives an inference command its inputs: a line, a row or (from a document) a paragraph each;
`read_passages` gives `search` a directory's too, with the file each came from; `read_document` reads a file as
one text, and `read_documents` every file of a directory so, for document classification.

How a file lays its text out beyond that (wrapped lines, a Gutenberg book's licence, Wikipedia dumps, web pages)
is layouts.py's. Tokenizer, data, model and run directories inside a corpus directory are skipped.

Paragraphs can be filtered on the way (`filters.py`): exact duplicates, short
paragraphs, and, with a tokenizer, paragraphs it compresses badly.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import IO

from ..errors import UserError
from .archives import MAX_DEPTH, members
from .catalog import ARCHIVE, DOCUMENT, LAYOUT, LINES, format_named, suffixes
from .filters import ParagraphFilter
from .layouts import WIKIEXTRACTOR_FILE, Paragraph, paragraph_pieces, text_paragraphs, wikipedia_articles
from .options import CorpusOptions
from .rows import read_rows, text_rows
from .spreadsheets import split_sheet
from .text import clean_text
from .textfiles import (
    COMPRESSIONS,
    ReadStats,
    decompressed,
    format_of,
    format_of_name,
    hidden,
    open_text,
    read_errors,
    text_stream,
)

# What `datasets.save_to_disk` writes beside its .arrow shards: metadata, not text.
DATASET_METADATA = ("state.json", "dataset_info.json", "dataset_dict.json")


# ---------------------------------------------------------------- files


def find_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand directories recursively; every named path must exist and yield a text file."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not split_sheet(path)[0].exists():  # reviews.xlsx#test is a sheet of reviews.xlsx
            raise UserError(f"{path}: no such file or directory")
        if path.is_dir():
            inside = sorted(p for p in _files_below(path) if _is_text_name(p) and not _is_metadata(p))
            if not inside:
                raise _no_text_files(path, "directory")
            found.extend(inside)
        else:
            found.append(path)
    if not found:
        raise UserError("no input files given")
    return found


def readable_files(paths: Iterable[str | Path]) -> list[Path]:
    """`find_files`, each checked to be readable and, where it is read as a text stream, to be text: what a
    command that writes a directory checks before it creates anything."""
    files = find_files(paths)
    for file in files:
        path = split_sheet(file)[0]
        if not os.access(path, os.R_OK):
            raise UserError(f"{file}: cannot read (permission denied)")
        if format_named(format_of(path)).text:
            with open_text(path):  # refuses a binary file (NUL bytes) and a compressed file it cannot open
                pass
    return files


def _no_text_files(path: Path | str, what: str) -> UserError:
    return UserError(
        f"{path}: {what} holds no text files ({', '.join(suffixes())}, optionally {', '.join(COMPRESSIONS)})"
    )


def describe_files(files: Iterable[str | Path]) -> str:
    """ "3 files (2 .pdf, 1 .md.gz)", or "1 .txt file": what a corpus was read from, by kind, so that a user sees
    which of a folder's files were taken (and that the PDFs were among them)."""
    kinds: dict[str, int] = {}
    for file in (split_sheet(Path(f))[0] for f in files):
        suffixes = file.suffixes[-2:] if file.suffix.lower() in COMPRESSIONS else file.suffixes[-1:]
        kind = "".join(suffixes).lower() or "no suffix"
        kinds[kind] = kinds.get(kind, 0) + 1
    count = sum(kinds.values())
    plural = "s" if count != 1 else ""
    if len(kinds) == 1:
        return f"{count} {next(iter(kinds))} file{plural}"
    listed = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda item: (-item[1], item[0])))
    return f"{count} file{plural} ({listed})"


def _files_below(directory: Path) -> Iterator[Path]:
    """Every file below `directory`, but not in the tokenizer, data, model and run directories below it: a
    tokenizer trained into the corpus directory would otherwise be read as text (its vocab.txt, its JSON). Hidden
    files and directories are not the corpus either (.git, Jupyter's .ipynb_checkpoints copies)."""
    for root, subdirectories, files in os.walk(directory):
        for name in list(subdirectories):
            if name.startswith("."):
                subdirectories.remove(name)
            elif _is_output_directory(Path(root) / name):
                subdirectories.remove(name)
                warnings.warn(f"{Path(root) / name}: skipped, a tokenizer, data, model or run directory", stacklevel=2)
        yield from (Path(root) / name for name in files if not name.startswith("."))


def _is_output_directory(directory: Path) -> bool:
    """What `tokenizer train`, `prepare`, `pretrain` and `finetune` write (and `transformers` saves): a
    tokenizer.json is in every one but a run's directory, which has its metrics.jsonl beside its config.json."""
    return (directory / "tokenizer.json").is_file() or (
        (directory / "metrics.jsonl").is_file() and (directory / "config.json").is_file()
    )


def _is_metadata(path: Path) -> bool:
    """A `datasets` metadata file: one of its names, in a directory that `datasets` wrote."""
    written_by_datasets = any((path.parent / name).is_file() for name in ("state.json", "dataset_dict.json"))
    return path.name in DATASET_METADATA and written_by_datasets


def _is_corpus_member(name: str) -> bool:
    """An archive member a directory would read: a text file's name, nothing hidden on its path (macOS's
    resource forks, __MACOSX/._a.txt, which Finder's "Compress" adds to a .zip, among them)."""
    return _is_text_name(Path(PurePosixPath(name).name)) and not hidden(name)


def _is_text_name(path: Path) -> bool:
    name = path.name.lower()
    for suffix in COMPRESSIONS:
        name = name.removesuffix(suffix)
    return name.endswith(suffixes()) or WIKIEXTRACTOR_FILE.fullmatch(name) is not None


# ---------------------------------------------------------------- readers


def read_paragraphs(
    paths: Iterable[str | Path],
    options: CorpusOptions | None = None,
    stats: ReadStats | None = None,
    paragraph_filter: ParagraphFilter | None = None,
) -> Iterator[Paragraph]:
    """Every paragraph of every file, cleaned and filtered, in order. Each file starts a new document.

    Pass one `paragraph_filter` to several calls to deduplicate across them.
    """
    options = options or CorpusOptions()
    stats = stats if stats is not None else ReadStats()
    if paragraph_filter is None:
        paragraph_filter = options.paragraph_filter()
    files = find_files(paths)
    seen_text = False
    for path in files:
        before = stats.invalid_utf8
        boundary = False  # a document starts at a paragraph that cleaning or a filter dropped: pass it on
        for paragraph in _read_file(path, options, stats, paragraph_filter):
            text = clean_text(paragraph.text, options.clean)
            if not text or (not options.pair_column and not paragraph_filter.keep(text)):
                boundary = boundary or paragraph.new_document
                continue
            seen_text = True
            for i, piece in enumerate(paragraph_pieces(text)):  # every reader's paragraphs bounded here
                yield Paragraph(piece, (paragraph.new_document or boundary) and i == 0)
            boundary = False
        if stats.invalid_utf8 > before:
            warnings.warn(
                f"{path}: {stats.invalid_utf8 - before} invalid UTF-8 sequences replaced by U+FFFD", stacklevel=2
            )
    if not seen_text:
        filtered = f" ({paragraph_filter.report})" if paragraph_filter.report.dropped else ""
        raise UserError(f"no text found in {', '.join(str(p) for p in files)}{filtered}")


def _read_file(
    path: Path,
    options: CorpusOptions,
    stats: ReadStats,
    paragraph_filter: ParagraphFilter,
    name: str | None = None,
    depth: int = 0,
) -> Iterator[Paragraph]:
    """A file's paragraphs by its format, and an archive's files' in turn. `name` is what `stats.files` and error
    messages call the file: an archive member's local copy is called by the archive's path and its own. `depth`
    counts the archives around it."""
    kind = format_of(path)
    try:
        if format_named(kind).shape == ARCHIVE:
            yield from _read_archive(path, options, stats, paragraph_filter, name or str(path), depth)
        else:
            stats.files.append(name or str(path))
            yield from _read_format(kind, _PathSource(path, options.on_error, stats), options, stats, paragraph_filter)
    except UserError as e:
        if name is None:
            raise
        raise UserError(str(e).replace(str(path), name)) from None


def _read_archive(
    path: Path, options: CorpusOptions, stats: ReadStats, paragraph_filter: ParagraphFilter, name: str, depth: int
) -> Iterator[Paragraph]:
    """An archive's members in order: text streams read as they come out, anything else (documents, archives
    inside) from a scratch copy."""
    if depth >= MAX_DEPTH:
        raise UserError(f"{name}: archives nested more than {MAX_DEPTH} deep; unpack them first")
    read = 0
    for member in members(path, _is_corpus_member, options.archive_limits()):
        member_name = f"{name}/{member.name}"
        kind = format_of_name(member.name)
        if kind is not None and format_named(kind).streams:
            stats.files.append(member_name)
            source = _StreamSource(member.stream, member_name, kind, options.on_error, stats)
            yield from _read_format(kind, source, options, stats, paragraph_filter)
        else:
            with member.copy() as copy:
                yield from _read_file(copy, options, stats, paragraph_filter, member_name, depth + 1)
        read += 1
    if not read:
        raise _no_text_files(name, "archive")


class _PathSource:
    """A file to read by its path: its text stream, or its rows (whatever their format)."""

    def __init__(self, path: Path, on_error: str, stats: ReadStats):
        self.path, self.name, self.on_error, self.stats = path, str(path), on_error, stats

    def text(self) -> IO[str]:
        return open_text(self.path, self.stats)

    def rows(self, columns: list[str]) -> Iterator:
        return read_rows(self.path, columns, self.stats, self.on_error)


class _StreamSource:
    """An archive's member read as it comes out, decompressed as its name says: a text stream, or rows of it."""

    def __init__(self, raw: IO[bytes], name: str, kind: str, on_error: str, stats: ReadStats):
        self.raw, self.name, self.kind, self.on_error, self.stats = raw, name, kind, on_error, stats

    def text(self) -> IO[str]:
        return text_stream(decompressed(self.raw, self.name), self.name, self.stats)

    def rows(self, columns: list[str]) -> Iterator:
        with self.text() as f:
            yield from text_rows(f, self.name, self.kind, columns, self.stats, self.on_error)


def _read_format(
    kind: str,
    source: _PathSource | _StreamSource,
    options: CorpusOptions,
    stats: ReadStats,
    paragraph_filter: ParagraphFilter,
) -> Iterator[Paragraph]:
    """A file's paragraphs as its format's row in catalog.py says to read them: the one dispatcher for a file on
    disk and an archive's member alike."""
    fmt = format_named(kind)
    try:
        if fmt.shape == DOCUMENT:
            yield from fmt.reader()(source.path, stats)
        elif fmt.shape in (LINES, LAYOUT):
            with source.text() as f:
                if fmt.shape == LINES:
                    yield from text_paragraphs(f, stats, options.line_breaks)
                else:
                    yield from fmt.reader()(f, stats)
        elif options.pair_column:
            rows = source.rows([options.text_column, options.pair_column])
            yield from _pairs(rows, options, paragraph_filter)
        else:
            rows = source.rows(_record_columns(options))
            yield from wikipedia_articles(_records(rows, source.name, options, stats))
    except read_errors() as e:  # e.g. a truncated compressed file or member
        raise UserError(f"{source.name}: cannot read ({e})") from None


def _record_columns(options: CorpusOptions) -> list[str]:
    return [options.text_column] + ([options.doc_column] if options.doc_column else [])


def _records(rows, name: str, options: CorpusOptions, stats: ReadStats) -> Iterator[Paragraph]:
    """JSONL objects or table rows: one document each, or grouped by --doc-column; a text may hold several lines."""
    previous_doc = object()
    for number, row in rows:
        text = row[options.text_column]
        if not isinstance(text, str):
            if options.on_error == "skip":
                stats.skipped_lines += 1
                continue
            raise UserError(
                f"{name}:{number}: field {options.text_column!r} is not a string "
                "(use --on-error skip to skip such lines)"
            )
        doc = row[options.doc_column] if options.doc_column else number
        for i, paragraph in enumerate(p for p in text.split("\n") if p.strip()):
            yield Paragraph(paragraph.strip(), i == 0 and doc != previous_doc)
        previous_doc = doc


def _pairs(rows, options: CorpusOptions, paragraph_filter: ParagraphFilter) -> Iterator[Paragraph]:
    """Explicit pairs: each row is a document of two paragraphs, A then B (newlines inside each become spaces).

    The filters judge a pair as a whole, so a pair is kept or dropped together.
    """
    for _, row in rows:
        a, b = (" ".join(str(row[c]).split()) for c in (options.text_column, options.pair_column))
        if a and b and paragraph_filter.keep(f"{a}\t{b}"):
            yield Paragraph(a, True)
            yield Paragraph(b, False)


# The longest text a model is run on from a file (a line, a cell): a model reads a few thousand tokens of it at
# most, and tokenising a 20 MB line cost gigabytes (a million characters is a short book).
MAX_TEXT_CHARS = 1 << 20


def read_lines(path: str | Path) -> list[str]:
    """Non-empty lines of a small text file, each of at most MAX_TEXT_CHARS (a longer one is refused, naming
    its line, before it is read whole)."""
    lines = []
    with open_text(path) as f:
        for number, line in enumerate(iter(lambda: f.readline(MAX_TEXT_CHARS + 1), ""), start=1):
            if len(line.rstrip("\n")) > MAX_TEXT_CHARS:
                raise UserError(f"{path}:{number}: a line of more than {MAX_TEXT_CHARS:,} characters; split it")
            if line.strip():
                lines.append(line.strip())
    if not lines:
        raise UserError(f"{path}: empty file")
    return lines


def _bounded(texts: list[str], path: Path) -> list[str]:
    """`texts`, each of at most MAX_TEXT_CHARS."""
    longest = max(range(len(texts)), key=lambda i: len(texts[i]), default=None)
    if longest is not None and len(texts[longest]) > MAX_TEXT_CHARS:
        size = len(texts[longest])
        raise UserError(f"{path}: text {longest + 1} has {size:,} characters, more than {MAX_TEXT_CHARS:,}; split it")
    return texts


def read_texts(
    path: str | Path, text_column: str = "0", pair_column: str | None = None
) -> tuple[list[str], list[str] | None]:
    """Texts (and second texts) to run a model on: a line each of a .txt file (TEXT<TAB>PAIR where pairs are
    asked for), a row each of a table or JSONL file (its columns named), a paragraph each of a document (a PDF,
    Word, OpenDocument or e-book file, a web page) or of every file below a directory, so a model can search or
    tag the documents people keep."""
    path = Path(path)
    kind = None if path.is_dir() else format_of(path)  # format_of may open the file to look: once
    if kind is None or format_named(kind).laid_out:
        if pair_column is not None:
            raise UserError(f"{path}: a document's paragraphs are single texts; give pairs as TEXT<TAB>PAIR lines")
        return [text for text, _ in _paragraphs_and_files(path, text_column)], None
    if kind == "txt" and pair_column is None:
        return read_lines(path), None
    if kind == "txt":
        text_column, pair_column = "0", "1"
    columns = [text_column] + ([pair_column] if pair_column else [])
    rows = [row for _, row in read_rows(path, columns)]
    if not rows:
        raise UserError(f"{path}: empty file")
    texts = _bounded([str(row[text_column]).strip() for row in rows], path)
    return texts, _bounded([str(row[pair_column]).strip() for row in rows], path) if pair_column else None


def read_document(path: str | Path) -> str:
    """A whole file as one text: a text file as it is (decoded, decompressed); a document (a PDF, Word,
    OpenDocument or e-book file, a web page) its paragraphs, a line each. What a question is asked of, and what
    a document classifier reads."""
    path = Path(path)
    if not format_named(format_of(path)).laid_out:
        with open_text(path) as f:
            return f.read()
    options = CorpusOptions()
    paragraphs = _read_file(path, options, ReadStats(), options.paragraph_filter())
    return "\n".join(text for text in (clean_text(p.text) for p in paragraphs) if text)


def read_documents(path: str | Path) -> tuple[list[str], list[str]]:
    """(texts, names): each file as one text, its whitespace made single spaces, and its name: `path` itself, or
    every file below a directory (hidden ones, and tokenizer, data and model directories, aside), named relative to
    it. A file without text (empty, or a scanned PDF) is left out, with one warning naming them. Both sides of
    document classification read files so: a folder of classes to train on, and `classify --per-file`."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such file or directory")
    directory = path.is_dir()
    files = sorted(_files_below(path)) if directory else [path]
    texts, names, empty = [], [], []
    for file in files:
        name = file.relative_to(path).as_posix() if directory else file.name
        text = " ".join(read_document(file).split())
        if text:
            texts.append(text)
            names.append(name)
        else:
            empty.append(name)
    if empty:
        listed = ", ".join(empty[:3]) + (f" and {len(empty) - 3} more" if len(empty) > 3 else "")
        warnings.warn(f"{path}: {len(empty)} file(s) without text left out: {listed}", stacklevel=2)
    if not texts:
        raise UserError(f"{path}: no file with text in it")
    return texts, names


def read_passages(path: str | Path, text_column: str = "0") -> tuple[list[str], list[str] | None]:
    """The texts of a corpus to search (`read_texts`') and, for a directory, the file each came from, relative to
    the directory (None for a file)."""
    path = Path(path)
    if not path.is_dir() and format_of(path) != "archive":
        return read_texts(path, text_column)[0], None
    texts, files = zip(*_paragraphs_and_files(path, text_column))
    return list(texts), list(files)


def _paragraphs_and_files(path: Path, text_column: str) -> Iterator[tuple[str, str]]:
    """Each paragraph of a document or of the files below a directory or inside an archive, as `read_paragraphs`
    reads them (a document's paragraphs, a .txt file's lines, a table's `text_column`), and its file relative to
    `path`."""
    stats = ReadStats()  # its last file is the one being read
    for paragraph in read_paragraphs([path], CorpusOptions(text_column=text_column), stats):
        file = Path(stats.files[-1])
        yield paragraph.text, path.name if file == path else file.relative_to(path).as_posix()
