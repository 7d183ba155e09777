"""Text inside zip packages: EPUB e-books, Word documents, PowerPoint presentations and OpenDocument files.

    epub_paragraphs(path, stats)   an e-book: a document per chapter, in its reading order (the spine), a
                                   paragraph per block element; the table of contents, Project Gutenberg's
                                   header and licence, and the pages outside the reading order left out
    docx_paragraphs(path, stats)   a Word (.docx) document as one document, a paragraph per Word paragraph;
                                   deleted text (tracked changes), headers, footers and comments left out
    pptx_paragraphs(path, stats)   a PowerPoint (.pptx) presentation as one document: each slide's paragraphs in
                                   slide order, then its speaker notes'; slide numbers and dates left out
    odt_paragraphs(path, stats)    an OpenDocument text (.odt: LibreOffice, Google Docs' export) the same way as
                                   Word's, and an OpenDocument presentation (.odp), whose pages hold the same
                                   paragraphs

BookCorpus, half of BERT's pre-training text, was e-books; people keep their own writing in Word, and much of
what an organisation knows in slides. Each member is read as a stream: a chapter or document of any size passes
through bounded memory.
"""

from __future__ import annotations

import contextlib
import posixpath
import zipfile
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

from ..errors import UserError
from .layouts import Paragraph, html_paragraphs
from .textfiles import ReadStats, compression_of, read_errors, text_stream
from .zipparts import (
    ODF_ASIDE,
    ODF_BODY,
    ODF_PARAGRAPHS,
    RELATIONSHIP_ID,
    member_info,
    member_xml,
    odf_text,
    part_name,
    relationships,
)

EPUB_CONTAINER = "META-INF/container.xml"  # names the package file (.opf): the manifest and the spine
CHAPTER_TYPES = frozenset({"application/xhtml+xml", "text/html"})
WORD_BODY = "word/document.xml"
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"  # WordprocessingML's namespace
SLIDE_LIST = "ppt/presentation.xml"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"  # DrawingML: the text of shapes, on slides and notes
P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"


def epub_paragraphs(path: Path, stats: ReadStats) -> Iterator[Paragraph]:
    """An EPUB's chapters in spine order, each a document (`html_paragraphs` starts one per page)."""
    with _package(path, "an EPUB e-book") as package:
        for name in _reading_order(package, path):
            stats.bytes_read += member_info(
                package, name, path, f"its spine lists {name}, which it does not hold"
            ).compress_size
            with text_stream(_member(package, name, path), f"{path}:{name}", stats) as f:
                yield from html_paragraphs(f, ReadStats())  # counted above, in the file's own (compressed) bytes


def docx_paragraphs(path: Path, stats: ReadStats) -> Iterator[Paragraph]:
    """A Word document's body: its paragraphs (table cells' too), runs joined, in order; one document."""
    with _package(path, "a Word document") as package:
        body_size = member_info(package, WORD_BODY, path, f"it holds no {WORD_BODY}: not a Word .docx").compress_size
        stats.bytes_read += body_size  # the file's own (compressed) bytes, as the progress bar counts them
        open_paragraphs: list[list[str]] = []  # a text box's paragraphs sit inside a paragraph
        first = True
        with _member(package, WORD_BODY, path) as body:
            try:
                for event, element in ElementTree.iterparse(body, events=("start", "end")):
                    if element.tag == f"{W}p":
                        if event == "start":
                            open_paragraphs.append([])
                            continue
                        text = " ".join("".join(open_paragraphs.pop()).split())
                        element.clear()  # what is read is let go: bounded memory
                        if text:
                            yield Paragraph(text, first)
                            first = False
                    elif event == "end" and open_paragraphs:
                        if element.tag == f"{W}t":
                            open_paragraphs[-1].append(element.text or "")
                        elif element.tag in (f"{W}tab", f"{W}br", f"{W}cr"):
                            open_paragraphs[-1].append(" ")
            except ElementTree.ParseError as e:
                raise UserError(f"{path}: {WORD_BODY} is not well-formed XML ({e})") from None


def pptx_paragraphs(path: Path, stats: ReadStats) -> Iterator[Paragraph]:
    """A presentation's slides in the order it shows them, each slide's shapes' paragraphs (tables' cells too),
    then its speaker notes' paragraphs; one document. Fields (slide numbers, dates) are left out."""
    with _package(path, "a PowerPoint presentation") as package:
        first = True
        for slide in _slide_order(package, path):
            for name in (slide, *relationships(package, slide, path, "/notesSlide").values()):
                stats.bytes_read += member_info(
                    package, name, path, f"it lists {name}, which it does not hold"
                ).compress_size
                for text in _drawing_paragraphs(package, name, path):
                    yield Paragraph(text, first)
                    first = False


def _slide_order(package: zipfile.ZipFile, path: Path) -> list[str]:
    """The slide members in the order the presentation lists them (their names' numbers need not be that order)."""
    listed = [e.get(RELATIONSHIP_ID) for e in member_xml(package, SLIDE_LIST, path, "a .pptx").iter(f"{P}sldId")]
    targets = relationships(package, SLIDE_LIST, path)
    return [targets[r] for r in listed if r in targets]


def _drawing_paragraphs(package: zipfile.ZipFile, name: str, path: Path) -> Iterator[str]:
    """The text of each DrawingML paragraph of a slide or notes page, runs joined, line breaks as spaces."""
    parts: list[str] = []
    in_field = 0  # inside a field (a slide number, a date): its text is the program's, not the author's
    with _member(package, name, path) as part:
        try:
            for event, element in ElementTree.iterparse(part, events=("start", "end")):
                if element.tag == f"{A}fld":
                    in_field += 1 if event == "start" else -1
                elif event == "end" and element.tag == f"{A}t" and not in_field:
                    parts.append(element.text or "")
                elif event == "end" and element.tag == f"{A}br":
                    parts.append(" ")
                elif event == "end" and element.tag == f"{A}p":
                    text = " ".join("".join(parts).split())
                    parts = []
                    element.clear()  # what is read is let go: bounded memory
                    if text:
                        yield text
        except ElementTree.ParseError as e:
            raise UserError(f"{path}: {name} is not well-formed XML ({e})") from None


def odt_paragraphs(path: Path, stats: ReadStats) -> Iterator[Paragraph]:
    """An OpenDocument text's body (LibreOffice's .odt): its paragraphs and headings (lists' and table cells'
    too), in order; one document. Footnotes and the deleted text of tracked changes are left out. A presentation
    (.odp) keeps its pages' and speaker notes' text in the same paragraphs, page by page."""
    with _package(path, "an OpenDocument file") as package:
        stats.bytes_read += member_info(package, ODF_BODY, path, f"it holds no {ODF_BODY}: not an .odt").compress_size
        aside = 0  # how many notes or change records we are inside
        first = True
        with _member(package, ODF_BODY, path) as body:
            try:
                for event, element in ElementTree.iterparse(body, events=("start", "end")):
                    if element.tag in ODF_ASIDE:
                        aside += 1 if event == "start" else -1
                    elif event == "end" and element.tag in ODF_PARAGRAPHS:
                        text = "" if aside else " ".join(odf_text(element, str(path)).split())
                        element.clear()  # what is read is let go: bounded memory
                        if text:
                            yield Paragraph(text, first)
                            first = False
            except ElementTree.ParseError as e:
                raise UserError(f"{path}: {ODF_BODY} is not well-formed XML ({e})") from None


@contextlib.contextmanager
def _package(path: Path, what: str) -> Iterator[zipfile.ZipFile]:
    if compression_of(path):
        raise UserError(f"{path}: {what} is already a zip file; give it uncompressed")
    try:
        with zipfile.ZipFile(path) as package:
            yield package
    except zipfile.BadZipFile:
        raise UserError(f"{path}: not {what} (not a zip file, or a truncated one)") from None
    except read_errors() as e:
        raise UserError(f"{path}: cannot read ({e})") from None


def _reading_order(package: zipfile.ZipFile, path: Path) -> list[str]:
    """The members of the spine, in order: the chapters a reader pages through (the `nav` table of contents and
    items marked linear="no", such as a cover, are not among them)."""
    rootfile = next(
        (
            e.get("full-path")
            for e in member_xml(package, EPUB_CONTAINER, path, "an EPUB").iter()
            if _local(e.tag) == "rootfile"
        ),
        None,
    )
    if not rootfile:
        raise UserError(f"{path}: its {EPUB_CONTAINER} names no package file (.opf): not an EPUB")
    opf = member_xml(package, rootfile, path, "an EPUB")
    items = {e.get("id"): e for e in opf.iter() if _local(e.tag) == "item"}
    order = []
    for ref in (e for e in opf.iter() if _local(e.tag) == "itemref"):
        item = items.get(ref.get("idref"))
        if item is None or ref.get("linear") == "no" or item.get("media-type") not in CHAPTER_TYPES:
            continue
        if "nav" not in (item.get("properties") or "").split():
            order.append(part_name(posixpath.dirname(rootfile), item.get("href", "")))
    if not order:
        raise UserError(f"{path}: its spine ({rootfile}) lists no chapters")
    return order


def _member(package: zipfile.ZipFile, name: str, path: Path):
    try:
        return package.open(name)
    except (zipfile.BadZipFile, NotImplementedError) as e:  # a corrupt entry, or an unsupported compression
        raise UserError(f"{path}: cannot read {name} ({e})") from None


def _local(tag: str) -> str:
    """An XML tag without its namespace: EPUB 2 and 3 name theirs differently."""
    return tag.rsplit("}", 1)[-1]
