"""Markdown files: documentation, READMEs, wikis and notes as people keep them, read with markdown-it-py as
CommonMark with GitHub's tables and strikethrough; and Jupyter notebooks' Markdown cells.

    markdown_paragraphs(path, stats)   a Markdown file as one document: a paragraph per paragraph, heading, list
                                       item, block quote's paragraph and table cell, its text without the markup
    notebook_paragraphs(path, stats)   a Jupyter notebook (.ipynb) as one document: its Markdown cells read so, in
                                       order; code, its outputs and raw cells left out

What is not prose is left out: code blocks (fenced and indented), YAML or TOML front matter, images (a badge's
alt text is not the document's), bare links (<https://...>; a link's own text stays, its target goes), inline
HTML tags, footnote marks and a task list's boxes; an HTML block is read as a web page is. markdown-it parses a
file whole, so a Markdown file takes memory in proportion to its size (documentation pages are small).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import UserError
from .layouts import Paragraph, html_paragraphs
from .textfiles import ReadStats, open_text, read_errors

# Jekyll's, Hugo's and Obsidian's metadata block at a file's very start: --- YAML --- or +++ TOML +++.
FRONT_MATTER = re.compile(r"\A(---|\+\+\+)[ \t]*\r?\n.*?^\1[ \t]*\r?$\n?", re.DOTALL | re.MULTILINE)
FOOTNOTE_MARK = re.compile(r"\[\^[^\]\s]+\]:?")  # "text[^1]" and the note's own "[^1]: ..."
TASK_BOX = re.compile(r"\[[ xX]\]\s+")  # "- [x] done": GitHub's task list item


def markdown_paragraphs(path: Path, stats: ReadStats) -> Iterator[Paragraph]:
    """The file's text as one document, a paragraph at a time."""
    try:
        with open_text(path, stats) as f:
            source = f.read()
    except read_errors() as e:  # e.g. a truncated compressed file
        raise UserError(f"{path}: cannot read ({e})") from None
    stats.bytes_read += len(source)
    tokens = _parser().parse(FRONT_MATTER.sub("", source))
    for i, text in enumerate(_block_texts(tokens)):
        yield Paragraph(text, i == 0)


def notebook_paragraphs(path: Path, stats: ReadStats) -> Iterator[Paragraph]:
    """The notebook's Markdown cells as one document, a paragraph at a time."""
    try:
        with open_text(path, stats) as f:
            source = f.read()
        notebook = json.loads(source)
    except read_errors() as e:
        raise UserError(f"{path}: cannot read ({e})") from None
    except json.JSONDecodeError as e:
        raise UserError(f"{path}:{e.lineno}: not a Jupyter notebook (not JSON: {e.msg})") from None
    stats.bytes_read += len(source)
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise UserError(f"{path}: not a Jupyter notebook (no list of cells; nbformat 4 keeps one)")
    parser = _parser()
    texts = (
        text
        for cell in cells
        if isinstance(cell, dict) and cell.get("cell_type") == "markdown"
        for text in _block_texts(parser.parse(_cell_source(cell.get("source", ""))))
    )
    for i, text in enumerate(texts):
        yield Paragraph(text, i == 0)


def _cell_source(source: str | list) -> str:
    """A cell's text: nbformat keeps it as a string, or as its lines."""
    return "".join(source) if isinstance(source, list) else str(source)


def _parser():
    """CommonMark with GitHub's tables and strikethrough. Imported here, where a Markdown file is read: the
    package's import stays light."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _block_texts(tokens: Iterable) -> Iterator[str]:
    """The text of each block that holds inline text, in order; code blocks are not prose and give nothing."""
    item_starts = False  # the next inline text opens a list item, where a task box may stand
    for token in tokens:
        if token.type == "inline":
            text = _inline_text(token.children or [])
            if item_starts:
                text = TASK_BOX.sub("", text, count=1) if TASK_BOX.match(text) else text
            text = " ".join(FOOTNOTE_MARK.sub("", text).split())
            if text:
                yield text
        elif token.type == "html_block":
            yield from (p.text for p in html_paragraphs(io.StringIO(token.content), ReadStats()))
        item_starts = token.type == "list_item_open" or (item_starts and token.type == "paragraph_open")


def _inline_text(children: list) -> str:
    """What a reader reads of a line of inline markup: text and code spans, not images, tags or bare links."""
    parts = []
    bare_link = False
    for child in children:
        if child.type in ("link_open", "link_close"):
            bare_link = child.type == "link_open" and child.markup == "autolink"
        elif child.type in ("text", "code_inline") and not bare_link:
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return "".join(parts)
