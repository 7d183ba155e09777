"""How a text file lays out its documents and paragraphs, beyond a line per paragraph: hard-wrapped prose, a
Project Gutenberg book's licence, the Wikipedia dumps of BERT-from-scratch material, saved web pages, subtitles.

    text_paragraphs(f, stats, line_breaks)   a .txt stream: a paragraph per line or wrapped lines joined, a
                                             Gutenberg book without its licence, Wikipedia as articles
    wikipedia_articles(paragraphs)           WikiExtractor's and WikiText's markup as article boundaries (also for
                                             the rows of a table or JSONL file)
    html_paragraphs(f, stats)                a saved web page: a paragraph per block element (an e-book's chapter,
                                             documents.py); Project Gutenberg's header and licence left out
    typeset_paragraphs(pages)                a typeset document's lines, page by page (a PDF's, pdf.py):
                                             paragraphs rebuilt, running heads and page numbers left out
    subtitle_paragraphs(f, stats)            subtitles (.srt, .vtt): a film's or a talk's dialogue as one
                                             document, a paragraph per speaker's turn across cues; timings,
                                             tags and sound descriptions left out

Each reads a stream once: a file of any size passes through bounded memory.
"""

from __future__ import annotations

import itertools
import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import IO

from .textfiles import ReadStats

# A longer line is read in pieces (cut at whitespace): `tokenizers` needs ~135 bytes per character of
# one sequence, so a 100 MB line in one piece would need gigabytes.
MAX_LINE_CHARS = 1 << 16


@dataclass
class Paragraph:
    text: str
    new_document: bool


def paragraph_pieces(text: str, limit: int = MAX_LINE_CHARS) -> list[str]:
    """A paragraph in pieces of at most `limit` characters, cut at a space where it has one: a 200 MB field of a
    table or line of JSON would otherwise reach the tokenizer whole (135 bytes a character: gigabytes)."""
    if len(text) <= limit:
        return [text]
    pieces = []
    while len(text) > limit:
        cut = text.rfind(" ", 0, limit + 1)
        cut = cut if cut > 0 else limit
        pieces.append(text[:cut])
        text = text[cut:].lstrip()
    return [*pieces, text] if text else pieces


def html_paragraphs(f: IO[str], stats: ReadStats) -> Iterator[Paragraph]:
    """An HTML page as one document: a paragraph per block element, the text of script, style, the head and
    navigation left out, entities decoded. Read in pieces: a page of any size passes through bounded memory."""
    page = _PageText()
    first = True
    while piece := f.read(1 << 16):
        stats.bytes_read += len(piece)
        page.feed(piece)
        for text in page.take():
            yield Paragraph(text, first)
            first = False
    page.close()
    for text in page.take():
        yield Paragraph(text, first)
        first = False


class _PageText(HTMLParser):
    """Collects an HTML page's text; `take()` returns the paragraphs finished so far."""

    # Elements that start and end a paragraph; and those whose text is not the page's (or not text at all).
    BLOCKS = frozenset(
        "address article aside blockquote body br dd details dialog div dl dt fieldset figcaption figure form h1 h2 "
        "h3 h4 h5 h6 header hr li main ol p pre section summary table td th tr ul".split()
    )
    SKIPPED = frozenset("head script style noscript template svg nav footer iframe object".split())
    # Project Gutenberg's HTML and EPUB books hold their header and licence in the elements with these ids.
    BOILERPLATE_IDS = frozenset({"pg-header", "pg-footer"})

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.pieces: list[str] = []
        self.size = 0
        self.done: list[str] = []
        self.skipping = 0  # how many skipped elements we are inside
        self.boilerplate: tuple[str, int] | None = None  # inside one: its tag, and how deep in that tag we are

    def handle_starttag(self, tag: str, attrs) -> None:
        if self.boilerplate is not None:
            name, depth = self.boilerplate
            self.boilerplate = (name, depth + (tag == name))
        elif dict(attrs).get("id") in self.BOILERPLATE_IDS:
            self._end_paragraph()
            self.boilerplate = (tag, 1)
        elif tag in self.SKIPPED:
            self.skipping += 1
        elif tag in self.BLOCKS:
            self._end_paragraph()

    def handle_endtag(self, tag: str) -> None:
        if self.boilerplate is not None:
            name, depth = self.boilerplate
            depth -= tag == name
            self.boilerplate = (name, depth) if depth else None
        elif tag in self.SKIPPED:
            self.skipping = max(0, self.skipping - 1)
        elif tag in self.BLOCKS:
            self._end_paragraph()

    def handle_data(self, data: str) -> None:
        if not self.skipping and self.boilerplate is None:
            self.pieces.append(data)
            self.size += len(data)
            if self.size >= MAX_LINE_CHARS:
                self._end_paragraph()

    def _end_paragraph(self) -> None:
        text = " ".join("".join(self.pieces).split())
        if text:
            self.done.append(text)
        self.pieces, self.size = [], 0

    def close(self) -> None:
        super().close()
        self._end_paragraph()

    def take(self) -> list[str]:
        done, self.done = self.done, []
        return done


# WikiExtractor writes text/AA/wiki_00, wiki_01, ... (wiki_00.bz2 with --compress); each article is
# <doc id="12" url="..." title="Anarchism">, the title on a line, the text, then </doc>.
WIKIEXTRACTOR_FILE = re.compile(r"wiki_\d+")
WIKIEXTRACTOR_START = re.compile(r'<doc id="[^"]*"[^>]*>')
WIKIEXTRACTOR_END = "</doc>"
# WikiText: "= Valkyria Chronicles III =" before each article, "= = Gameplay = =" (deeper: "= = = ... = = =") before
# each section, and its tokenisation's @-@, @,@ and @.@ inside words and numbers (lines come stripped).
WIKITEXT_TITLE = re.compile(r"= [^=].*[^=] =|= [^=] =")
WIKITEXT_HEADING = re.compile(r"(= ){2,}.*( =){2,}")
WIKITEXT_JOINS = re.compile(r" @([-,.])@ ")


def wikipedia_articles(paragraphs: Iterator[Paragraph]) -> Iterator[Paragraph]:
    """A file's paragraphs with Wikipedia articles as its documents, if its first paragraph says it is WikiExtractor
    or WikiText output; any other file's as they are. In both formats a blank line or a row ends a paragraph,
    never an article, and titles and section headings are markup, not text."""
    first = next(paragraphs, None)
    if first is None:
        return
    paragraphs = itertools.chain([first], paragraphs)
    if WIKIEXTRACTOR_START.fullmatch(first.text):
        yield from _wikiextractor_articles(paragraphs)
    elif WIKITEXT_TITLE.fullmatch(first.text):
        yield from _wikitext_articles(paragraphs)
    else:
        yield from paragraphs


def _wikiextractor_articles(paragraphs: Iterator[Paragraph]) -> Iterator[Paragraph]:
    new_document, title_next = True, False
    for paragraph in paragraphs:
        if WIKIEXTRACTOR_START.fullmatch(paragraph.text) or paragraph.text == WIKIEXTRACTOR_END:
            new_document, title_next = True, paragraph.text != WIKIEXTRACTOR_END
        elif title_next:  # the article's title, repeated from its <doc> line
            title_next = False
        else:
            yield Paragraph(paragraph.text, new_document)
            new_document = False


def _wikitext_articles(paragraphs: Iterator[Paragraph]) -> Iterator[Paragraph]:
    new_document = True
    for paragraph in paragraphs:
        if WIKITEXT_TITLE.fullmatch(paragraph.text):
            new_document = True
        elif not WIKITEXT_HEADING.fullmatch(paragraph.text):
            yield Paragraph(WIKITEXT_JOINS.sub(r"\1", paragraph.text), new_document)
            new_document = False


def text_paragraphs(f: IO[str], stats: ReadStats, line_breaks: str) -> Iterator[Paragraph]:
    """A .txt stream's paragraphs: a line each, or (`line_breaks` "wrapped", or "auto" and its first lines look
    so) the lines between blank lines joined; a Gutenberg book without its licence; Wikipedia as articles."""
    lines = _without_gutenberg_licence(_lines(f, stats))
    if line_breaks == "auto":
        head = list(itertools.islice(lines, WRAP_SAMPLE_LINES))
        line_breaks = "wrapped" if looks_wrapped(head) else "paragraphs"
        lines = itertools.chain(head, lines)
    yield from wikipedia_articles((_wrapped_paragraphs if line_breaks == "wrapped" else _line_paragraphs)(lines))


def _lines(f: IO[str], stats: ReadStats) -> Iterator[str]:
    """The file's lines, an over-long one in pieces cut at whitespace."""
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
        yield line.strip()


# A book as gutenberg.org serves it: a header, "*** START OF THE PROJECT GUTENBERG EBOOK TITLE ***", the book,
# "*** END OF THE PROJECT GUTENBERG EBOOK TITLE ***", then the licence (older files say THIS for THE).
GUTENBERG_START = re.compile(r"\*{3} ?START OF (THE|THIS) PROJECT GUTENBERG E-?BOOK.*", re.IGNORECASE)
GUTENBERG_END = re.compile(r"\*{3} ?END OF (THE|THIS) PROJECT GUTENBERG E-?BOOK.*", re.IGNORECASE)


def _without_gutenberg_licence(lines: Iterator[str]) -> Iterator[str]:
    """A Project Gutenberg book's own text, if a START line is among its first lines; else every line. The header
    and the licence after it are the same in every book: thousands of words of legal text, not the book."""
    head = list(itertools.islice(lines, WRAP_SAMPLE_LINES))
    start = next((i for i, line in enumerate(head) if GUTENBERG_START.fullmatch(line)), None)
    if start is None:
        yield from itertools.chain(head, lines)
        return
    for line in itertools.chain(head[start + 1 :], lines):
        if line.startswith("***") and GUTENBERG_END.fullmatch(line):
            return
        yield line


def _line_paragraphs(lines: Iterable[str]) -> Iterator[Paragraph]:
    """A paragraph (or sentence) per line, a blank line between documents."""
    new_document = True
    for line in lines:
        if not line:
            new_document = True
            continue
        yield Paragraph(line, new_document)
        new_document = False


def _wrapped_paragraphs(lines: Iterable[str]) -> Iterator[Paragraph]:
    """Hard-wrapped text: the lines between blank lines are one paragraph; two or more blank lines in a row (where
    a book's chapters part) or the end of the file end a document."""
    block: list[str] = []
    size, blanks, new_document = 0, 0, True
    for line in itertools.chain(lines, [""]):
        if line:
            block.append(line)
            size += len(line) + 1
            new_document, blanks = new_document or blanks >= 2, 0
        else:
            blanks += 1
        if block and (not line or size >= MAX_LINE_CHARS):
            yield Paragraph(_join_wrapped(block), new_document)
            block, size, new_document = [], 0, False


def _join_wrapped(lines: list[str], typeset: bool = False) -> str:
    """A paragraph's lines joined by spaces; a word hyphenated at a line's end ("well-" "known") stays one, and
    Chinese and Japanese, written without spaces, join without one. Typeset text (a PDF's) hyphenates words to
    fill lines, so there a word cut at a line's end ("manip-" "ulation") loses its hyphen where the next line goes
    on in lower case, and keeps it otherwise ("X-" "Ray")."""
    parts = [lines[0]]
    for line in lines[1:]:
        if is_spaceless(parts[-1][-1:]) and is_spaceless(line[:1]):
            parts.append(line)
            continue
        if not WORD_HYPHEN_AT_END.search(parts[-1]):
            parts.append(" " + line)
            continue
        if typeset and line[:1].islower():
            parts[-1] = parts[-1][:-1]
        parts.append(line)
    return "".join(parts)


# Scripts written without spaces between words: CJK punctuation, kana, Han (with its extensions), full-width forms.
SPACELESS = re.compile(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef\U00020000-\U0003134f]")


def is_spaceless(character: str) -> bool:
    """Whether a character belongs to a script written without spaces (Chinese, Japanese): a line break between
    two such characters is no space."""
    return bool(character) and SPACELESS.match(character) is not None


# Hard-wrapped prose is told from a paragraph or sentence per line by its first lines (WRAP_SAMPLE_LINES).
WRAP_SAMPLE_LINES = 2000
# Sentence ends: Latin, Greek and Cyrillic punctuation and closing quotes; the CJK full stops, question and
# exclamation marks and closing brackets; the Devanagari danda and double danda; the Arabic question mark and the
# Urdu full stop.
SENTENCE_ENDS = (".", "!", "?", "…", '"', "”", "'", "’", ")", "。", "！", "？", "．", "」", "』", "।", "॥", "؟", "۔")
WORD_HYPHEN_AT_END = re.compile(r"[^\W\d_]-$")  # a letter, then the hyphen (not a dash: "--")


def looks_wrapped(lines: list[str]) -> bool:
    """Lines cut at a fixed width with a blank line between paragraphs (raw Project Gutenberg books, manuals,
    mail): most lines have a next line in the same block, nearly all of those fill the width, and most of them
    end mid-sentence. A paragraph or sentence per line fails at least one: blocks of one line, widths that
    vary, or every line ending a sentence."""
    inner = [line for line, after in zip(lines, lines[1:]) if line and after]  # a line of the same block follows
    if len(inner) < 20 or len(inner) < sum(1 for line in lines if line) / 2:
        return False
    width = sorted(map(len, inner))[int(0.9 * len(inner))]
    full = sum(len(line) >= 0.6 * width for line in inner) / len(inner)
    sentence_ends = sum(line.endswith(SENTENCE_ENDS) for line in inner) / len(inner)
    return width <= 120 and full >= 0.8 and sentence_ends < 0.5


# A typeset page (a PDF's) holds lines, not paragraphs. A line this much shorter than the page's full lines ends a
# paragraph (its last line, a heading, a caption); running heads sit within this many lines of a page's edge and
# repeat, page numbers aside, on the pages this near (books alternate the title and the chapter's).
SHORT_LINE = 0.75
EDGE_LINES = 2
HEAD_NEIGHBOURS = 4
BULLETS = ("•", "◦", "▪", "‣", "⁃", "●", "○", "■", "□", "➢", "✓")
ROMAN = r"(?=[ivxlcdm])m{0,3}(cm|cd|d?c{0,3})(xc|xl|l?x{0,3})(ix|iv|v?i{0,3})"
PAGE_NUMBER = re.compile(rf"[-–—\[(\s]*(page\s+)?(\d+|{ROMAN})(\s*(of|/)\s*\d+)?[-–—\])\s.]*", re.IGNORECASE)


def typeset_paragraphs(pages: Iterable[list[str]]) -> Iterator[Paragraph]:
    """A typeset document's pages (each its lines, in reading order) as one document: lines joined into
    paragraphs, a paragraph running on across a page break, running heads and page numbers left out.

    A paragraph ends at a short line, before a bulleted line, and at a page's end where its last line ends a
    sentence (a chapter's last page)."""
    block: list[str] = []
    size, width, first = 0, 0, True

    def paragraph() -> Paragraph:
        nonlocal block, size, first
        done = Paragraph(_join_wrapped(block, typeset=True), first)
        block, size, first = [], 0, False
        return done

    for lines in _without_running_heads(pages):
        width = _full_width(lines, width)
        for line in lines:
            if block and line.startswith(BULLETS):
                yield paragraph()
            block.append(line)
            size += len(line) + 1
            if (len(line) < SHORT_LINE * width and not WORD_HYPHEN_AT_END.search(line)) or size >= MAX_LINE_CHARS:
                yield paragraph()
        if block and block[-1].endswith(SENTENCE_ENDS):
            yield paragraph()
    if block:
        yield paragraph()


def _full_width(lines: list[str], previous: int) -> int:
    """The length of a full line of text: the page's 90th percentile, or the last page's where this one has too
    few lines to say (a title page, a chapter's last lines)."""
    if len(lines) < 5:
        return previous or max(map(len, lines), default=0)
    return sorted(map(len, lines))[int(0.9 * len(lines))]


def _without_running_heads(pages: Iterable[list[str]]) -> Iterator[list[str]]:
    """Each page's lines without the page numbers and running heads (headers and footers) at its edges."""
    cleaned = ([line.strip() for line in page if line.strip()] for page in pages)
    before: deque[list[str]] = deque(maxlen=HEAD_NEIGHBOURS)
    after: deque[list[str]] = deque(itertools.islice(cleaned, HEAD_NEIGHBOURS + 1))
    while after:
        page = after.popleft()
        yield _page_body(page, [*before, *after])
        before.append(page)
        after.extend(itertools.islice(cleaned, 1))


def _page_body(lines: list[str], neighbours: list[list[str]]) -> list[str]:
    """A page's lines less the page numbers at its edges and the lines near its top (bottom) that a nearby page
    repeats near its own top (bottom), page numbers aside: a book's title, a chapter's, a report's footer."""
    tops = {_head_key(line) for page in neighbours for line in page[:EDGE_LINES]}
    bottoms = {_head_key(line) for page in neighbours for line in page[-EDGE_LINES:]}
    start, end = 0, len(lines)
    while start < min(EDGE_LINES, end) and (PAGE_NUMBER.fullmatch(lines[start]) or _head_key(lines[start]) in tops):
        start += 1
    while end > max(start, len(lines) - EDGE_LINES) and (
        PAGE_NUMBER.fullmatch(lines[end - 1]) or _head_key(lines[end - 1]) in bottoms
    ):
        end -= 1
    return lines[start:end]


def _head_key(line: str) -> str:
    """A running head as it repeats: its page number (any digits) and case aside."""
    return re.sub(r"\d+", "#", " ".join(line.lower().split()))


# ---------------------------------------------------------------- subtitles

# SubRip (.srt) and WebVTT (.vtt): blocks between blank lines, each a cue's number or name, its timing line
# ("00:00:01,000 --> 00:00:04,000"), then its text; VTT also has a header and NOTE, STYLE and REGION blocks.
CUE_TIMING = re.compile(r"^(\d+:)?\d+:\d+[.,]\d+\s+-->\s+(\d+:)?\d+:\d+[.,]\d+")
VTT_NON_CUE = re.compile(r"^(WEBVTT|NOTE|STYLE|REGION)\b")
CUE_MARKUP = re.compile(r"<[^>]*>|\{\\[^}]*\}")  # <i>, <font ...>, <c.yellow>, <00:01.000>; {\an8}
SOUND_DESCRIPTION = re.compile(r"\[[^\]]*\]|\([^)]*\)|♪")  # [DOOR SLAMS], (sighs): for the deaf, not dialogue
SPEAKER_LABEL = re.compile(r"^[A-Z][A-Z0-9 .'-]*:\s+")  # "MAN: Hello." in subtitles for the deaf
TURN_ENDS = (".", "!", "?", "…", '"', "”", "’")


def subtitle_paragraphs(f: IO[str], stats: ReadStats) -> Iterator[Paragraph]:
    """Subtitles as one document: the cues' text in order, a paragraph per turn. A line that opens with a dash
    is a new speaker's turn; otherwise a cue that does not end a sentence goes on in the next, as a sentence
    split over two cues does. Read a block at a time: bounded memory."""
    turn: list[str] = []
    first = True
    for block in _blocks(_lines(f, stats)):
        timing = next((i for i, line in enumerate(block) if CUE_TIMING.match(line)), None)
        if timing is None or VTT_NON_CUE.match(block[0]):
            continue  # a header, a note, a style: not dialogue
        for line in block[timing + 1 :]:
            line = SPEAKER_LABEL.sub("", SOUND_DESCRIPTION.sub(" ", CUE_MARKUP.sub("", line))).strip()
            if line.startswith("-") and turn:  # another speaker: the turn before is over
                yield Paragraph(" ".join(turn), first)
                turn, first = [], False
            line = line.lstrip("-– ").strip()
            if line:
                turn.append(line)
        if turn and turn[-1].endswith(TURN_ENDS):
            yield Paragraph(" ".join(turn), first)
            turn, first = [], False
    if turn:
        yield Paragraph(" ".join(turn), first)


def _blocks(lines: Iterable[str]) -> Iterator[list[str]]:
    """Runs of non-blank lines."""
    block: list[str] = []
    for line in lines:
        if line:
            block.append(line)
        elif block:
            yield block
            block = []
    if block:
        yield block
