"""Where the text is in a corpus's files, and how to clean, filter and split it: CorpusOptions, whose fields are
the flags of `tokenizer train` and `prepare`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import documented, parse_size
from .archives import ArchiveLimits
from .filters import ParagraphFilter
from .textfiles import (
    MAX_EXPANSION,
)


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
    max_expansion: float = documented(
        MAX_EXPANSION,
        "archives: refuse a member that expands more than this many times its compressed size (text expands 3 to "
        "10 times, a zip bomb a thousand)",
    )
    max_member_size: int = documented(
        1 << 30,
        "archives: the largest member copied to scratch disk to be read (documents, spreadsheets, archives "
        "inside): 1G, 512M or bytes; text members stream and need none",
        parse=parse_size,
    )

    def archive_limits(self) -> ArchiveLimits:
        return ArchiveLimits(self.max_expansion, self.max_member_size)

    def paragraph_filter(self) -> ParagraphFilter:
        """The text-only filters these options ask for; one instance deduplicates across every file it sees."""
        return ParagraphFilter(self.dedupe, self.min_chars)
