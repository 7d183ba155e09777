"""Dropping junk before anything is trained on it, and saying what was dropped.

Raw corpora repeat boilerplate thousands of times and carry tables, navigation
text and encoding debris. Three filters, each deterministic:

- `dedupe`: exact duplicate paragraphs, across the whole corpus (train and held-out
  files together, so the held-out text never repeats the training text). A
  paragraph is already whitespace-normalised when it gets here; its 64-bit
  BLAKE2b digest goes into a set.
- `min_chars`: paragraphs shorter than N characters.
- characters per token (Cramming, Geiping & Goldstein 2022): a paragraph the
  tokenizer splits into far more pieces than its length warrants is junk (tables
  of numbers, debris, text in a script the vocabulary does not cover). This one
  needs the tokenizer, so only `prepare` applies it, where paragraphs are tokenised.

`FilterReport` counts paragraphs and characters per filter, with a reservoir
sample of examples, for meta.json, `data stats` and `--filter-report`.
"""

from __future__ import annotations

import hashlib
import random
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from ..fileio import write_json

EXAMPLES = 20
EXAMPLE_CHARS = 300


@dataclass
class Dropped:
    """What one filter dropped: counts, and a uniform sample of examples."""

    paragraphs: int = 0
    chars: int = 0
    examples: list[str] = field(default_factory=list)


class FilterReport:
    def __init__(self) -> None:
        self.read = 0  # paragraphs that reached the filters
        self.read_chars = 0
        self.dropped: dict[str, Dropped] = {}
        self._rngs: dict[str, random.Random] = {}

    def saw(self, text: str) -> None:
        self.read += 1
        self.read_chars += len(text)

    def drop(self, name: str, text: str) -> None:
        dropped = self.dropped.setdefault(name, Dropped())
        rng = self._rngs.setdefault(name, random.Random(zlib.crc32(name.encode())))
        dropped.paragraphs += 1
        dropped.chars += len(text)
        example = text[:EXAMPLE_CHARS]
        if len(dropped.examples) < EXAMPLES:  # reservoir sampling: every dropped paragraph equally likely
            dropped.examples.append(example)
        elif (slot := rng.randrange(dropped.paragraphs)) < EXAMPLES:
            dropped.examples[slot] = example

    def summary(self) -> dict:
        """Counts only (no examples): what meta.json and `data stats` show."""
        kept = self.read - sum(d.paragraphs for d in self.dropped.values())
        kept_chars = self.read_chars - sum(d.chars for d in self.dropped.values())
        return {
            "paragraphs_read": self.read,
            "paragraphs_kept": kept,
            "chars_read": self.read_chars,
            "chars_kept": kept_chars,
            "dropped": {name: {"paragraphs": d.paragraphs, "chars": d.chars} for name, d in self.dropped.items()},
        }

    def write(self, path: str | Path) -> None:
        report = self.summary()
        for name, d in self.dropped.items():
            report["dropped"][name]["examples"] = d.examples
        write_json(Path(path), report)

    def __str__(self) -> str:
        return describe_filters(self.summary())


def describe_filters(summary: dict) -> str:
    """One line from `FilterReport.summary()` (as meta.json keeps it)."""
    dropped = ", ".join(
        f"{name} {d['paragraphs']:,} ({d['chars'] / max(summary['chars_read'], 1):.1%} of the text)"
        for name, d in summary["dropped"].items()
    )
    return (
        f"filters kept {summary['paragraphs_kept']:,} of {summary['paragraphs_read']:,} paragraphs; "
        f"dropped {dropped or 'nothing'}"
    )


class ParagraphFilter:
    """The filters that need only the text: applied where paragraphs are read."""

    def __init__(self, dedupe: bool = False, min_chars: int = 0, report: FilterReport | None = None):
        self.dedupe, self.min_chars = dedupe, min_chars
        self.report = report if report is not None else FilterReport()
        self._seen: set[int] = set()

    def keep(self, text: str) -> bool:
        self.report.saw(text)
        if len(text) < self.min_chars:
            self.report.drop("min_chars", text)
            return False
        if self.dedupe:
            digest = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            if digest in self._seen:
                self.report.drop("dedupe", text)
                return False
            self._seen.add(digest)
        return True


def compression_verdict(chars: int, tokens: int, min_chars_per_token: float, max_chars_per_token: float) -> str | None:
    """The name of the characters-per-token bound a paragraph breaks, or None (0 turns a bound off)."""
    ratio = chars / max(tokens, 1)
    if min_chars_per_token and ratio < min_chars_per_token:
        return "min_chars_per_token"
    if max_chars_per_token and ratio > max_chars_per_token:
        return "max_chars_per_token"
    return None
