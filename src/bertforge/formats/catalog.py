"""The formats bertforge reads: one row each, in one table that the readers, the CLI's help and docs/formats.md
all take from.

    format_named(name)   a row by its name ("jsonl")
    suffix_help()        the suffixes as the CLI's help lists them
    reference()          the table of docs/formats.md

A row says how a format's text is laid out (its `shape`, which picks the reader), which suffixes name it, whether it
is a text file (decoded, optionally compressed, streamed from an archive with no copy), the optional package it
needs, and, for a page-like format, the function that turns it into paragraphs, named "module:function" and
imported on first use (so this table sits below every reader). Adding a format is its reader and its row.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..display import markdown_table
from ..errors import UserError
from ..registry import Registry, resolve

# How a format lays out its text, which decides how corpus.py reads it:
LINES = "lines"  # a paragraph or sentence per line (or hard-wrapped prose): layouts.text_paragraphs
LAYOUT = "layout"  # a text stream laid out as pages or cues: read(f, stats) -> paragraphs
DOCUMENT = "document"  # a file read from its path: read(path, stats) -> paragraphs
RECORDS = "records"  # JSON objects, a field per column
COLUMNS = "columns"  # binary column stores read with pyarrow, a record batch at a time
TABLE = "table"  # delimited rows under a header (or numbered without one)
SHEET = "sheet"  # a spreadsheet's sheet of rows (spreadsheets.py)
ARCHIVE = "archive"  # files packed together, each read as a directory's would be (archives.py)
SHAPES = (LINES, LAYOUT, DOCUMENT, RECORDS, COLUMNS, TABLE, SHEET, ARCHIVE)


@dataclass(frozen=True)
class Format:
    """One format.

    name      what the code calls it (format_of's answer)
    suffixes  the file names it goes by, without a compression suffix
    shape     one of the shapes above
    what      what a message calls such a file
    summary   one line for docs/formats.md
    text      a text file: decoded by open_text (any encoding with a BOM, binary refused), optionally .gz, .bz2,
              .xz or .zst, and read as it comes out of an archive
    needs     the optional module (the `formats` extra) it is read with
    read      LAYOUT and DOCUMENT: "module:function" in bertforge.formats (imported on first use), or the function
    """

    name: str
    suffixes: tuple[str, ...]
    shape: str
    what: str
    summary: str
    text: bool = False
    needs: str = ""
    read: str | Callable[..., Iterator] = ""

    def reader(self) -> Callable[..., Iterator]:
        return resolve(self.read if callable(self.read) else f".{self.read}", __package__)

    @property
    def has_rows(self) -> bool:
        """Rows of named or numbered fields, which read_rows reads."""
        return self.shape in (RECORDS, COLUMNS, TABLE, SHEET)

    @property
    def has_records(self) -> bool:
        """Rows of named fields (JSON objects, column stores), never lines of plain text."""
        return self.shape in (RECORDS, COLUMNS)

    @property
    def laid_out(self) -> bool:
        """Laid out as pages, chapters, slides, cells or cues, never as rows; or files of those (an archive)."""
        return self.shape in (LAYOUT, DOCUMENT, ARCHIVE)

    @property
    def streams(self) -> bool:
        """Read from a text stream as it comes (an archive's member needs no copy on disk)."""
        return self.text and self.shape != DOCUMENT


BUILT_IN = [
    Format(
        "txt",
        (".txt", ".text"),
        LINES,
        "a text file",
        "a paragraph or sentence per line, a blank line between documents; or hard-wrapped prose",
        text=True,
    ),
    Format(
        "jsonl",
        (".jsonl", ".json"),
        RECORDS,
        "a JSON lines file",
        "a JSON object per line, or one array of them; the text in --text-column",
        text=True,
    ),
    Format("csv", (".csv",), TABLE, "a CSV file", "a row per document, --text-column by name or index", text=True),
    Format("tsv", (".tsv",), TABLE, "a TSV file", "the same, tab-separated, quotes left as they are", text=True),
    Format("xlsx", (".xlsx",), SHEET, "an Excel workbook", "the first sheet, or book.xlsx#name's, read as CSV is"),
    Format("ods", (".ods",), SHEET, "an OpenDocument spreadsheet", "the same, LibreOffice Calc's"),
    Format(
        "parquet",
        (".parquet",),
        COLUMNS,
        "a Parquet file",
        "a file or a directory of shards, a record batch at a time",
        needs="pyarrow",
    ),
    Format(
        "arrow",
        (".arrow",),
        COLUMNS,
        "an Arrow file",
        "a `datasets.save_to_disk` directory's shards, its JSON metadata skipped",
        needs="pyarrow",
    ),
    Format(
        "html",
        (".html", ".htm"),
        LAYOUT,
        "an HTML page",
        "a page per document, a paragraph per block element",
        text=True,
        read="layouts:html_paragraphs",
    ),
    Format(
        "epub",
        (".epub",),
        DOCUMENT,
        "an e-book",
        "a chapter per document, in reading order",
        read="documents:epub_paragraphs",
    ),
    Format(
        "docx",
        (".docx",),
        DOCUMENT,
        "a Word document",
        "one document, a paragraph per paragraph",
        read="documents:docx_paragraphs",
    ),
    Format(
        "odt",
        (".odt", ".odp"),
        DOCUMENT,
        "an OpenDocument file",
        "a text, or a presentation's pages: one document of paragraphs",
        read="documents:odt_paragraphs",
    ),
    Format(
        "pptx",
        (".pptx",),
        DOCUMENT,
        "a PowerPoint presentation",
        "one document, slide by slide, speaker notes too",
        read="documents:pptx_paragraphs",
    ),
    Format(
        "pdf",
        (".pdf",),
        DOCUMENT,
        "a PDF",
        "one document, its lines joined into paragraphs",
        needs="pypdf",
        read="pdf:pdf_paragraphs",
    ),
    Format(
        "markdown",
        (".md", ".markdown"),
        DOCUMENT,
        "a Markdown text",
        "one document, a paragraph per block, code and markup left out",
        text=True,
        read="markdown:markdown_paragraphs",
    ),
    Format(
        "notebook",
        (".ipynb",),
        DOCUMENT,
        "a Jupyter notebook",
        "one document of its Markdown cells",
        text=True,
        read="markdown:notebook_paragraphs",
    ),
    Format(
        "subtitles",
        (".srt", ".vtt"),
        LAYOUT,
        "a subtitle file",
        "a film's dialogue as one document, a paragraph per turn",
        text=True,
        read="layouts:subtitle_paragraphs",
    ),
    Format(
        "archive",
        (".zip", ".tar", ".tgz"),  # .tar.gz and the rest: the compression suffix comes off first
        ARCHIVE,
        "an archive of files (unpack it, and name the one to read)",
        "the files inside, each read as a directory's would be",
    ),
]


def check_format(fmt: Format, formats: Registry) -> None:
    """A row that would not read (a suffix taken, a reader that names nothing, a shape unknown) is refused when it
    is registered."""
    if not isinstance(fmt.name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,31}", fmt.name):
        raise UserError(f"a format's name is lowercase letters, digits and dashes, not {fmt.name!r}")
    if not fmt.suffixes or not all(isinstance(s, str) and re.fullmatch(r"\.[a-z0-9]{1,10}", s) for s in fmt.suffixes):
        raise UserError(f"format {fmt.name!r}: its suffixes are like .txt, not {fmt.suffixes!r}")
    taken = {suffix: f.name for f in formats.records() for suffix in f.suffixes}
    if any(s in taken for s in fmt.suffixes):
        suffix = next(s for s in fmt.suffixes if s in taken)
        raise UserError(f"format {fmt.name!r}: {suffix} already names the {taken[suffix]} format")
    if fmt.shape not in SHAPES:
        raise UserError(f"format {fmt.name!r}: shape {fmt.shape!r} is not one of {', '.join(SHAPES)}")
    if fmt.shape in (LAYOUT, DOCUMENT) and not fmt.read:
        raise UserError(f"format {fmt.name!r}: a {fmt.shape} format names its reader, 'module:function'")
    if isinstance(fmt.read, str) and fmt.read:
        module, _, function = fmt.read.partition(":")
        if not function or not module.isidentifier() or importlib.util.find_spec(f"{__package__}.{module}") is None:
            raise UserError(f"format {fmt.name!r}: {fmt.read!r} names no module of bertforge.formats")
    elif fmt.read and not callable(fmt.read):
        raise UserError(f"format {fmt.name!r}: its reader is a function or 'module:function', not {fmt.read!r}")


FORMATS: Registry[Format] = Registry("format", Format, check_format)
for built_in in BUILT_IN:
    FORMATS.register(built_in)


def register_format(fmt: Format) -> Format:
    """Add a row: every reader, the help and the table of docs/formats.md know the format from then on. The same
    as `FORMATS.register(fmt)`."""
    return FORMATS.register(fmt)


def format_named(name: str) -> Format:
    return FORMATS.get(name)


def by_suffix() -> dict[str, str]:
    """Each suffix and the name of the format it names."""
    return {suffix: f.name for f in FORMATS.records() for suffix in f.suffixes}


def suffixes() -> tuple[str, ...]:
    """The names the files of a corpus directory go by (without a compression suffix)."""
    return tuple(by_suffix())


def suffix_help() -> str:
    """The suffixes as the CLI's help lists them: the text files (which may be compressed) first."""
    text = ", ".join(s for f in FORMATS.records() if f.text for s in f.suffixes)
    other = ", ".join(s for f in FORMATS.records() if not f.text and f.shape != ARCHIVE for s in f.suffixes)
    packed = ", ".join(FORMATS.get("archive").suffixes)
    return (
        f"text files or directories ({text}, each optionally .gz, .bz2, .xz, .zst; {other}; datasets.save_to_disk "
        f"directories), or archives of them ({packed}, .tar.gz, ...)"
    )


def reference() -> str:
    """docs/formats.md's table of formats, generated from this one."""
    rows = [
        {
            "suffixes": ", ".join(f"`{s}`" for s in f.suffixes),
            "read as": f.summary,
            "compressed": "yes" if f.text else "",
            "needs": f"`{f.needs}`" if f.needs else "",
        }
        for f in FORMATS.records()
    ]
    return markdown_table(rows, list(rows[0]))
