"""PDF files: reports, papers, manuals and books as people keep them, read with pypdf (the `formats` extra).

    pdf_paragraphs(path, stats)   a PDF as one document: its pages' lines, in the order the file draws them (for
                                  most PDFs the reading order, a column at a time), joined into paragraphs by
                                  `layouts.typeset_paragraphs`; running heads and page numbers left out

A PDF holds glyphs placed on pages, not paragraphs: what comes back is the text a PDF viewer lets one copy. A
scanned PDF holds pictures of pages and no text: it is skipped with a warning (run OCR on it first). Pages are
read one at a time, but pypdf keeps what it has parsed of a file until the file is done: about 13 KB a page
(measured: 53 MB more for a 4,000-page PDF of 7.9M characters), let go before the next file.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from pathlib import Path

from ..errors import UserError
from .layouts import Paragraph, typeset_paragraphs
from .textfiles import ReadStats, compression_of, optional_module

# Typesetting's ligatures as single characters ("ﬁ" in "ﬁnd"): a tokenizer would see an unknown symbol.
LIGATURES = str.maketrans({"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "st", "ﬆ": "st"})


def pdf_paragraphs(path: Path, stats: ReadStats) -> Iterator[Paragraph]:
    """The PDF's text as one document, a paragraph at a time."""
    if compression_of(path):
        raise UserError(f"{path}: a PDF is read as it is; decompress it first")
    pages = _page_lines(path, stats)
    found = False
    for paragraph in typeset_paragraphs(pages):
        found = True
        yield paragraph
    if not found:
        warnings.warn(f"{path}: no text on its pages (a scan? its pages are pictures: run OCR first)", stacklevel=2)


def _page_lines(path: Path, stats: ReadStats) -> Iterator[list[str]]:
    """Each page's lines of text, ligatures spelled out."""
    pypdf = optional_module("pypdf", path)
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # what it works around is noise; what stops it, our error
    try:
        reader = pypdf.PdfReader(path)
        _unlock(reader, path)
        count = len(reader.pages)
        size = path.stat().st_size
        for number, page in enumerate(reader.pages, 1):
            text = page.extract_text()
            stats.bytes_read += size * number // count - size * (number - 1) // count  # the file's bytes, by page
            yield text.translate(LIGATURES).splitlines()
    except pypdf.errors.DependencyError as e:  # AES encryption, without the cryptography package
        raise UserError(f"{path}: cannot read this encrypted PDF ({e})") from None
    except UserError:
        raise
    except Exception as e:  # a truncated or broken file fails deep in the parser, with any of its errors
        raise UserError(f"{path}: not a readable PDF ({type(e).__name__}: {e})") from None


def _unlock(reader, path: Path) -> None:
    """Open an encrypted PDF that asks no password to read it (only to edit or print); refuse one that does."""
    if reader.is_encrypted and not reader.decrypt(""):
        raise UserError(f"{path}: the PDF is protected by a password; save a copy without one to read it")
