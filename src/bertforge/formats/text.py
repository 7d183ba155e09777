"""Text as every reader hands it on: cleaned (NFC, no control characters; optionally no HTML), and split into
sentences by rules that know abbreviations, initials, decimals, quotes and the sentence ends of scripts
without capital letters.
"""

from __future__ import annotations

import html
import re

from ..errors import UserError
from ..tokenizer import nfc

# ---------------------------------------------------------------- cleaning

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b\ufeff]")
_SCRIPT = re.compile(r"<(script|style)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]{0,2000}>")
_URL = re.compile(r"\b(?:https?://|www\.)\S+", re.IGNORECASE)
_SPACES = re.compile(r"\s+")


def clean_text(text: str, mode: str = "none") -> str:
    """Text in Unicode's composed form (NFC: a decomposed "é", as some editors and sources write it, is the same
    word as a composed one), without control characters; with mode "html", also without tags, entities and URLs."""
    text = nfc(text)
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
# A boundary candidate: terminal punctuation, optional closing quotes or brackets, then space. The run of
# punctuation is matched from its first character only, and never given back: otherwise a line of 65,000 "!"
# was tried from each of its characters to its end (quadratic: 38 s).
_BOUNDARY = re.compile(r"(?<![.!?…])([.!?…]++)([\"'”’»)\]]*+)\s+(?=[\"'“‘«(\[]?[^\s\"'“‘«(\[])")
# Ends of sentences in scripts without case, where no capital letter confirms them: the CJK full stops, question
# and exclamation marks (with closing brackets and quotes), the Devanagari danda, the Arabic question mark and the
# Urdu full stop.
_CJK_BOUNDARY = re.compile(r"([。！？．]+[」』”’）]*|[।॥؟۔]+)")


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
