"""A tokenizer file's rules bounded before any text meets them: no regex that backtracks without end, no chain of
normalizers that writes far more characters than it reads. A tokenizer.json is user input."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

from ..errors import UserError

# Characters the normalizers together may write for one they read. Released tokenizers' Replace rules write one or
# two a match; the NFKC tables SentencePiece precompiles (XLM-R's, T5's) write at most 18, for U+FDFA (measured:
# nmt_nfkc, nfkc_cf); XLM-R's chain, that table then a Replace that shrinks runs of spaces, 18.
MAX_EXPANSION = 32


def check_text_rules(spec: object, path: Path) -> None:
    """Refuse a tokenizer.json whose rules make a short text cost without bound: a regex (a Split pre-tokenizer's,
    a Replace normalizer's) with a repeating group that holds a repetition, `((a+)+)+b`, whose matching backtracks
    exponentially until Oniguruma gives up and the Rust side panics mid-run. (What the normalizers write, as a
    chain, is `check_expansion`'s.)"""
    if isinstance(spec, list):
        for item in spec:
            check_text_rules(item, path)
    if not isinstance(spec, dict):
        return
    regex = spec["pattern"].get("Regex") if isinstance(spec.get("pattern"), dict) else None
    if isinstance(regex, str) and _nested_repetition(regex):
        raise UserError(f"{path}: the regex {regex[:60]!r} repeats a repetition, which can take exponential time")
    for value in spec.values():
        check_text_rules(value, path)


def check_expansion(rules: dict | None, path: Path) -> None:
    """Refuse normalizers (or decoders) that together write more than MAX_EXPANSION characters for each one they
    read: one Replace that makes a letter 500 (a 2 KB text, 750,000 tokens), or eight that each double it (one
    within bounds, their product 256 times the text: fill-mask reached 5 GB), or a SentencePiece table that
    does."""
    factor, rule = _expansion(rules)
    if factor > MAX_EXPANSION:
        raise UserError(
            f"{path}: its normalizers write up to {factor:,.0f} characters for each one they read ({rule}; at most "
            f"{MAX_EXPANSION})"
        )


def _expansion(spec: Any) -> tuple[float, str]:
    """(the most characters a normalizer writes for each it reads, the rule that says so): a Sequence multiplies
    its parts'; a Replace writes its content for each match (a match of at least one character, or of none, where
    its regex matches the empty text: then at every position); a Precompiled table its longest output."""
    if not isinstance(spec, dict):
        return 1.0, ""
    kind = spec.get("type")
    if kind == "Sequence":
        factor, rules = 1.0, []
        for part in spec.get("normalizers") or spec.get("decoders") or []:
            f, rule = _expansion(part)
            factor, rules = factor * f, rules + ([rule] if f > 1 else [])
        return factor, ", then ".join(rules) or "a Sequence"
    if kind == "Replace" and isinstance(spec.get("content"), str):
        pattern = spec.get("pattern") or {}
        written = len(spec["content"])
        if isinstance(pattern.get("String"), str):
            return written / max(len(pattern["String"]), 1), f"a Replace writing {written:,} for {pattern['String']!r}"
        empty = _matches_empty(pattern.get("Regex"))
        return written + empty, f"a Replace writing {written:,} characters a match"
    if kind == "Precompiled" and isinstance(spec.get("precompiled_charsmap"), str):
        longest = _longest_precompiled_output(spec["precompiled_charsmap"])
        return float(longest), f"a Precompiled table writing up to {longest:,} characters a match"
    return 1.0, ""


def _matches_empty(regex: Any) -> bool:
    """Whether a regex can match the empty text (then a Replace writes at every position): Python's reading of it,
    and yes where Python cannot read it (Oniguruma's syntax is wider)."""
    try:
        return re.fullmatch(str(regex), "") is not None
    except re.error:
        return True


def _longest_precompiled_output(charsmap: str) -> int:
    """The longest text a SentencePiece charsmap writes for one match, in characters. Its bytes are a 4-byte
    little-endian size, a double-array trie of that size, then the outputs as NUL-terminated UTF-8 strings, which
    the trie's leaves point into (`tokenizers` parsed it already: a blob it accepted has this layout)."""
    blob = base64.b64decode(charsmap)
    trie_size = int.from_bytes(blob[:4], "little")
    outputs = blob[4 + trie_size :].split(b"\0")
    return max((len(text.decode("utf-8", "replace")) for text in outputs), default=0)


_REPEAT = re.compile(r"[*+]|\{\d*,\d*\}|\{\d+\}")  # a quantifier that may repeat what it follows (not `?`)


def _nested_repetition(regex: str) -> bool:
    """Whether a group of `regex` that repeats holds something that repeats: `(a+)+`, `(?:a*b){2,}`. Escapes
    and character classes are read as one atom; `{n}` repeats when n > 1, `?` never does."""
    holds_repetition = [False]  # for each open group, innermost last
    i = 0
    while i < len(regex):
        if regex[i] == "(":
            holds_repetition.append(False)
            i += 1
        elif regex[i] == ")" and len(holds_repetition) > 1:
            inner = holds_repetition.pop()
            repeats, i = _quantifier(regex, i + 1)
            if repeats and inner:
                return True
            holds_repetition[-1] |= repeats or inner
        else:
            repeats, i = _quantifier(regex, _atom_end(regex, i))
            holds_repetition[-1] |= repeats
    return False


def _atom_end(regex: str, i: int) -> int:
    """Where the atom starting at `i` ends: an escape (`\\p{L}` whole), a character class, or one character."""
    if regex[i] == "\\":
        if regex[i + 1 : i + 3] in ("p{", "P{") and "}" in regex[i:]:
            return regex.index("}", i) + 1
        return i + 2
    if regex[i] == "[":
        return _class_end(regex, i)
    return i + 1


def _quantifier(regex: str, i: int) -> tuple[bool, int]:
    """Whether a quantifier that repeats starts at `i`, and where what follows it starts."""
    match = _REPEAT.match(regex, i)
    if match is None:
        return False, i + (regex[i : i + 1] == "?")
    numbers = [int(n) for n in re.findall(r"\d+", match.group())]
    end = match.end() + (regex[match.end() : match.end() + 1] in ("?", "+"))  # lazy or possessive
    return match.group() in ("*", "+") or "," in match.group() or max(numbers, default=0) > 1, end


def _class_end(regex: str, i: int) -> int:
    """Where the character class opening at `i` ends (classes nest in Oniguruma, escapes are skipped)."""
    depth = 0
    while i < len(regex):
        if regex[i] == "\\":
            i += 2
            continue
        depth += {"[": 1, "]": -1}.get(regex[i], 0)
        i += 1
        if depth == 0:
            return i
    return i
