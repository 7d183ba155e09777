"""Reading documents from corpora: txt, jsonl, csv/tsv (each optionally .gz, .bz2, .xz or .zst), Parquet
shards, and `datasets.save_to_disk` directories.

Everything streams: a reader yields `Paragraph`s one at a time, so a corpus of
any size passes through bounded memory. A paragraph marks whether it starts a
new document, because BERT's next-sentence pairs must know where documents end.

  .txt           one paragraph (or sentence) per line; a blank line between documents
  .jsonl         one JSON object per line; text in --text-column, optional --doc-column groups rows
  .csv / .tsv    one row per document (or --doc-column groups rows); text in --text-column
  .parquet       the same, read in record batches; a directory of shards is read in name order
  .arrow         the same: the shards of a `datasets.save_to_disk` directory, whose JSON metadata is skipped
  .html / .htm   a page per document, a paragraph per block element; script, style, head and navigation dropped

The two Wikipedia formats of BERT-from-scratch material are read as articles, their markup dropped: WikiExtractor's
output (the BERT repository's advice: `<doc ...>` title, text, `</doc>`, in files named wiki_00, or JSON lines from
its --json) and WikiText's (` = Title = ` before each article, ` = = Section = = ` headings, @-@ for a hyphen),
as raw files or as the `datasets` rows of a line each.

Paragraphs can be filtered on the way (`filters.py`): exact duplicates, short
paragraphs, and, with a tokenizer, paragraphs it compresses badly.
"""

from __future__ import annotations

import html
import itertools
import os
import re
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import IO

from .config import documented
from .errors import UserError
from .filters import ParagraphFilter
from .textfiles import COMPRESSIONS, FORMATS, ReadStats, format_of, open_text, read_errors, read_rows

TEXT_SUFFIXES = (".txt", ".text", *FORMATS)
# What `datasets.save_to_disk` writes beside its .arrow shards: metadata, not text.
DATASET_METADATA = ("state.json", "dataset_info.json", "dataset_dict.json")
# A longer line is read in pieces (cut at whitespace): `tokenizers` needs ~135 bytes per character of
# one sequence, so a 100 MB line in one piece would need gigabytes.
MAX_LINE_CHARS = 1 << 16


@dataclass
class CorpusOptions:
    """Where the text is in the input files, and how to clean and split it."""

    text_column: str = documented(
        "text", "JSONL key or CSV/TSV column holding the text (an index like 0 for headerless files)"
    )
    pair_column: str | None = documented(
        None,
        "with prepare: the second text of explicit pairs (Q/A, dialogue turns); "
        "each row becomes a two-segment document",
    )
    doc_column: str | None = documented(
        None, "JSONL key or column whose change starts a new document (default: each row is one)"
    )
    clean: str = documented("none", "html strips tags, entities, URLs and control characters", ("none", "html"))
    line_breaks: str = documented(
        "auto",
        "in .txt files: paragraphs (a paragraph or sentence per line, a blank line between documents), wrapped "
        "(lines cut at a width: a blank line between paragraphs, two between documents, as between chapters), or "
        "auto: wrapped where a file's first lines look so",
        ("auto", "paragraphs", "wrapped"),
    )
    split_sentences: bool = documented(
        True, "split paragraphs into sentences (--no-split-sentences if lines are sentences already)"
    )
    on_error: str = documented("fail", "broken JSONL lines: stop with the line number, or skip them", ("fail", "skip"))
    dedupe: bool = documented(False, "drop exact duplicate paragraphs (whitespace-normalised) across the whole corpus")
    min_chars: int = documented(0, "drop paragraphs shorter than this many characters")
    min_chars_per_token: float = documented(
        0.0,
        "prepare: drop paragraphs with fewer characters per token than this: text the tokenizer shreds "
        "(tables, debris, scripts it does not know); English prose is ~4, try 2.5; 0 = off",
    )
    max_chars_per_token: float = documented(
        0.0, "prepare: drop paragraphs with more characters per token than this (runs of [UNK]); 0 = off"
    )

    def paragraph_filter(self) -> ParagraphFilter:
        """The text-only filters these options ask for; one instance deduplicates across every file it sees."""
        return ParagraphFilter(self.dedupe, self.min_chars)


@dataclass
class Paragraph:
    text: str
    new_document: bool


# ---------------------------------------------------------------- files


def find_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand directories recursively; every named path must exist and yield a text file."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise UserError(f"{path}: no such file or directory")
        if path.is_dir():
            inside = sorted(p for p in _files_below(path) if _is_text_name(p) and not _is_metadata(p))
            if not inside:
                raise UserError(
                    f"{path}: directory holds no text files ({', '.join(TEXT_SUFFIXES)}, optionally "
                    f"{', '.join(COMPRESSIONS)})"
                )
            found.extend(inside)
        else:
            found.append(path)
    if not found:
        raise UserError("no input files given")
    return found


def _files_below(directory: Path) -> Iterator[Path]:
    """Every file below `directory`, but not in the tokenizer, data, model and run directories below it: a
    tokenizer trained into the corpus directory would otherwise be read as text (its vocab.txt, its JSON)."""
    for root, subdirectories, files in os.walk(directory):
        for name in list(subdirectories):
            if _is_output_directory(Path(root) / name):
                subdirectories.remove(name)
                warnings.warn(f"{Path(root) / name}: skipped, a tokenizer, data, model or run directory", stacklevel=2)
        yield from (Path(root) / name for name in files)


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


def _is_text_name(path: Path) -> bool:
    name = path.name.lower()
    for suffix in COMPRESSIONS:
        name = name.removesuffix(suffix)
    return name.endswith(TEXT_SUFFIXES) or WIKIEXTRACTOR_FILE.fullmatch(name) is not None


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
        stats.files.append(str(path))
        before = stats.invalid_utf8
        boundary = False  # a document starts at a paragraph that cleaning or a filter dropped: pass it on
        for paragraph in _read_file(path, options, stats, paragraph_filter):
            text = clean_text(paragraph.text, options.clean)
            if not text or (not options.pair_column and not paragraph_filter.keep(text)):
                boundary = boundary or paragraph.new_document
                continue
            seen_text = True
            yield Paragraph(text, paragraph.new_document or boundary)
            boundary = False
        if stats.invalid_utf8 > before:
            warnings.warn(
                f"{path}: {stats.invalid_utf8 - before} invalid UTF-8 sequences replaced by U+FFFD", stacklevel=2
            )
    if not seen_text:
        filtered = f" ({paragraph_filter.report})" if paragraph_filter.report.dropped else ""
        raise UserError(f"no text found in {', '.join(str(p) for p in files)}{filtered}")


def _read_file(
    path: Path, options: CorpusOptions, stats: ReadStats, paragraph_filter: ParagraphFilter
) -> Iterator[Paragraph]:
    kind = format_of(path)
    if kind in ("txt", "html"):
        try:
            with open_text(path, stats) as f:
                if kind == "html":
                    yield from _read_html(f, stats)
                else:
                    yield from _wikipedia_articles(_read_txt(f, stats, options.line_breaks))
        except read_errors() as e:  # e.g. a truncated compressed file
            raise UserError(f"{path}: cannot read ({e})") from None
    elif options.pair_column:
        yield from _read_pairs(path, options, stats, paragraph_filter)
    else:
        yield from _wikipedia_articles(_read_records(path, options, stats))


def _read_html(f: IO[str], stats: ReadStats) -> Iterator[Paragraph]:
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

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.pieces: list[str] = []
        self.size = 0
        self.done: list[str] = []
        self.skipping = 0  # how many skipped elements we are inside

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in self.SKIPPED:
            self.skipping += 1
        elif tag in self.BLOCKS:
            self._end_paragraph()

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIPPED:
            self.skipping = max(0, self.skipping - 1)
        elif tag in self.BLOCKS:
            self._end_paragraph()

    def handle_data(self, data: str) -> None:
        if not self.skipping:
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


def _wikipedia_articles(paragraphs: Iterator[Paragraph]) -> Iterator[Paragraph]:
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


def _read_txt(f: IO[str], stats: ReadStats, line_breaks: str) -> Iterator[Paragraph]:
    lines = _without_gutenberg_licence(_lines(f, stats))
    if line_breaks == "auto":
        head = list(itertools.islice(lines, WRAP_SAMPLE_LINES))
        line_breaks = "wrapped" if looks_wrapped(head) else "paragraphs"
        lines = itertools.chain(head, lines)
    yield from (_wrapped_paragraphs if line_breaks == "wrapped" else _line_paragraphs)(lines)


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


def _join_wrapped(lines: list[str]) -> str:
    """A paragraph's lines joined by spaces; a word hyphenated at a line's end ("well-" "known") stays one."""
    parts = [lines[0]]
    for line in lines[1:]:
        parts.append(line if WORD_HYPHEN_AT_END.search(parts[-1]) else " " + line)
    return "".join(parts)


# Hard-wrapped prose is told from a paragraph or sentence per line by its first lines (WRAP_SAMPLE_LINES).
WRAP_SAMPLE_LINES = 2000
SENTENCE_ENDS = (".", "!", "?", "…", '"', "”", "'", "’", ")")
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


def _read_records(path: Path, options: CorpusOptions, stats: ReadStats) -> Iterator[Paragraph]:
    """JSONL objects or table rows: one document each, or grouped by --doc-column; a text may hold several lines."""
    columns = [options.text_column] + ([options.doc_column] if options.doc_column else [])
    previous_doc = object()
    for number, row in read_rows(path, columns, stats, options.on_error):
        text = row[options.text_column]
        if not isinstance(text, str):
            if options.on_error == "skip":
                stats.skipped_lines += 1
                continue
            raise UserError(
                f"{path}:{number}: field {options.text_column!r} is not a string "
                "(use --on-error skip to skip such lines)"
            )
        doc = row[options.doc_column] if options.doc_column else number
        for i, paragraph in enumerate(p for p in text.split("\n") if p.strip()):
            yield Paragraph(paragraph.strip(), i == 0 and doc != previous_doc)
        previous_doc = doc


def _read_pairs(
    path: Path, options: CorpusOptions, stats: ReadStats, paragraph_filter: ParagraphFilter
) -> Iterator[Paragraph]:
    """Explicit pairs: each row is a document of two paragraphs, A then B (newlines inside each become spaces).

    The filters judge a pair as a whole, so a pair is kept or dropped together.
    """
    for _, row in read_rows(path, [options.text_column, options.pair_column], stats, options.on_error):
        a, b = (" ".join(str(row[c]).split()) for c in (options.text_column, options.pair_column))
        if a and b and paragraph_filter.keep(f"{a}\t{b}"):
            yield Paragraph(a, True)
            yield Paragraph(b, False)


def read_lines(path: str | Path) -> list[str]:
    """Non-empty lines of a small text file."""
    with open_text(path) as f:
        lines = [line.strip() for line in f if line.strip()]
    if not lines:
        raise UserError(f"{path}: empty file")
    return lines


# ---------------------------------------------------------------- cleaning

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b\ufeff]")
_SCRIPT = re.compile(r"<(script|style)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]{0,2000}>")
_URL = re.compile(r"\b(?:https?://|www\.)\S+", re.IGNORECASE)
_SPACES = re.compile(r"\s+")


def clean_text(text: str, mode: str = "none") -> str:
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
