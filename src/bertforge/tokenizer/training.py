"""Training a tokenizer: WordPiece (BERT's; continuations marked "##") or a whole-word vocabulary (the classic
tutorials'; rare words become [UNK]), deterministic run after run.

Both normalise text to NFC (so that a decomposed "é", as some editors and sources write it, is the same token as a
composed one), then apply BERT's normaliser (clean-up, CJK spacing, optional lowercasing and accent stripping) and
BERT's pre-tokeniser (split on spaces and punctuation). Whether to strip accents is measured from the text when not
given (`accent_choice`): stripping merges distinct words in Vietnamese (bán, bàn, bạn -> ban), French (a, à), German
(schon, schön), Russian (й -> и) or Japanese kana (が -> か), and decomposes Korean syllables, so there it is off;
for English-like text it is BERT uncased's rule.
"""

from __future__ import annotations

import collections
import json
import re
import sys
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from ..errors import UserError
from ..families import BERT_SPECIALS
from .roles import SPECIAL_TOKENS, UNK


def bert_pipeline(tokenizer: Tokenizer, lowercase: bool, strip_accents: bool | None, nfc: bool = True) -> Tokenizer:
    bert = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=strip_accents, lowercase=lowercase
    )
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFC(), bert]) if nfc else bert
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tokenizer


# Accents are kept where stripping them would merge at least this share of the text's frequent words, or break
# at least this share into letters. Measured on the 20,000 most frequent words (wordfreq's lists): merged English
# 0.09% (Gutenberg's books 0.14-0.31%, WikiText's foreign names 0.50%), Dutch 0.69%, Italian 1.3%, German and
# Russian 1.9%, Japanese 4.0%, French 9.6%, Hindi 23%, Vietnamese 42%; Korean merges none, but stripping (NFD)
# takes 91% of its words apart into the letters of their syllables.
MERGED_WORDS_TO_KEEP = 0.01


SPLIT_WORDS_TO_KEEP = 0.05


FREQUENT_WORDS = 20_000


# Words, as measured: kana and Han characters one at a time (those scripts have no spaces between words, and a
# voicing mark tells が from か), other letters and digits in runs.
_WORD = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]|[^\W\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]+")


@dataclass(frozen=True)
class AccentChoice:
    """Whether a tokenizer strips accents, and why: what stripping would do to the text's frequent words."""

    strip: bool
    lowercase: bool
    words: int  # distinct frequent words measured
    merged: int  # of them, those that stripping would make the same as another
    split: int  # of them, those that stripping would take apart into more characters (Hangul syllables)
    examples: tuple[tuple[str, ...], ...] = ()  # a few groups of words stripping would merge

    @property
    def reason(self) -> str:
        if not self.lowercase:
            return "keeping accents, as a cased tokenizer does (BERT cased); --strip-accents strips them"
        examples = "; ".join("/".join(group) + " -> " + strip_accents(group[0]) for group in self.examples[:3])
        share = f"{self.merged:,} of the {self.words:,} most frequent words ({self.merged / max(self.words, 1):.1%}"
        share += f", e.g. {examples})" if examples else ")"
        if self.strip:
            return f"stripping accents, as BERT uncased does: that merges only {share}; --keep-accents keeps them"
        split = f" and take {self.split / max(self.words, 1):.0%} of them apart into letters" if self.split else ""
        return f"keeping accents: stripping them would merge {share}{split}; --strip-accents strips them anyway"


_NFC = normalizers.NFC()


def nfc(text: str) -> str:
    """`text` composed (NFC), in time linear in its length: Python's unicodedata takes time quadratic in a run of
    combining marks (50,000 alternating marks: 26 s), the tokenizers library's normaliser 0.06 s."""
    return text if unicodedata.is_normalized("NFC", text) else _NFC.normalize_str(text)


def strip_accents(text: str) -> str:
    """What BERT's normaliser makes of a word when it strips accents: NFD, then no combining marks."""
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


def accent_choice(texts: Iterable[str], lowercase: bool = True) -> AccentChoice:
    """Strip accents or keep them, measured on `texts` (a sample of the corpus).

    A cased tokenizer keeps them (BERT cased). An uncased one strips them, as BERT uncased, unless stripping
    would merge a real share of the text's frequent words, or take them apart (MERGED_WORDS_TO_KEEP,
    SPLIT_WORDS_TO_KEEP).
    """
    if not lowercase:
        return AccentChoice(False, False, 0, 0, 0)
    counts: collections.Counter[str] = collections.Counter()
    for text in texts:
        counts.update(_WORD.findall(nfc(text).lower()))
    words = [word for word, _ in counts.most_common(FREQUENT_WORDS)]
    groups: dict[str, list[str]] = collections.defaultdict(list)
    for word in words:
        groups[strip_accents(word)].append(word)
    merged_groups = [tuple(group) for group in groups.values() if len(group) > 1]
    merged = sum(map(len, merged_groups))
    split = sum(1 for word in words if len(strip_accents(word)) > len(word))
    keeps = merged >= MERGED_WORDS_TO_KEEP * len(words) or split >= SPLIT_WORDS_TO_KEEP * len(words)
    return AccentChoice(not keeps, True, len(words), merged, split, tuple(merged_groups[:3]))


def add_post_processor(tokenizer: Tokenizer, specials: dict[str, str] = BERT_SPECIALS) -> None:
    """encode(a) -> [CLS] a [SEP];  encode(a, b) -> [CLS] a [SEP] b [SEP] with segment 1 on b."""
    cls, sep = specials["cls"], specials["sep"]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0",
        pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, tokenizer.token_to_id(cls)), (sep, tokenizer.token_to_id(sep))],
    )


def train_tokenizer(
    texts: Iterable[str],
    kind: str = "wordpiece",
    vocab_size: int = 30522,
    min_frequency: int = 2,
    lowercase: bool = True,
    strip_accents: bool | None = None,
) -> Tokenizer:
    """Train on texts; the same texts give the same tokenizer, run after run.

    A wordpiece tokenizer reads the texts twice (`_continuations`): pass a re-iterable (a list, or an object
    whose `__iter__` reads the corpus afresh) to stream a corpus larger than memory; a one-shot iterator (a
    generator) is held in memory. `strip_accents=None` follows BERT: strip accents when lowercasing. Pass
    False to keep diacritics (Vietnamese, French), True to strip them always; `accent_choice` measures which a
    corpus needs.
    """
    if iter(texts) is texts:
        texts = list(texts)
    if kind == "wordpiece":
        tokenizer = bert_pipeline(
            Tokenizer(models.WordPiece(unk_token=UNK, max_input_chars_per_word=100)), lowercase, strip_accents
        )
        continuations = _continuations(tokenizer, texts)
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=SPECIAL_TOKENS + continuations,
            continuing_subword_prefix="##",
            show_progress=sys.stderr.isatty(),
        )
        tokenizer.decoder = decoders.WordPiece(prefix="##")
    elif kind == "word":
        tokenizer = bert_pipeline(Tokenizer(models.WordLevel(unk_token=UNK)), lowercase, strip_accents)
        trainer = trainers.WordLevelTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=SPECIAL_TOKENS,
            show_progress=sys.stderr.isatty(),
        )
    else:
        raise UserError(f"unknown tokenizer kind {kind!r}; choose wordpiece or word")
    tokenizer.train_from_iterator(_non_empty(texts), trainer=trainer)
    if tokenizer.get_vocab_size() <= len(SPECIAL_TOKENS):
        raise UserError("the corpus produced no vocabulary: it has no text, or every word is below --min-frequency")
    tokenizer = _only_special_tokens_added(tokenizer)
    add_post_processor(tokenizer)
    return tokenizer


def _continuations(tokenizer: Tokenizer, texts: Iterable[str]) -> list[str]:
    """The "##c" for each character of `texts` (as normalised) that can continue a word, in code-point order: all
    but spaces, punctuation and CJK characters, which are words of their own.

    Given to the trainer ahead of the text (as special tokens, which are numbered first), they take the same ids
    every run. Otherwise the trainer numbers them as it meets them in a hash map, in an order that changes from
    run to run, and breaks ties between merges of equal count by those numbers: the same corpus gave a different
    vocabulary each time, in one process or in two (huggingface/tokenizers#1794, open in 0.23.3).

    Only NFC joins characters; BERT's normaliser after it maps each on its own (case, accents, CJK spacing). So
    the texts are composed here (Python's NFC, 20x faster than the tokenizer's own normaliser called per text)
    and the distinct characters alone go through the tokenizer's normaliser.
    """
    normalize, pre_tokenize = tokenizer.normalizer.normalize_str, tokenizer.pre_tokenizer.pre_tokenize_str
    composed: set[str] = set()
    for text in texts:
        composed.update(text if text.isascii() else nfc(text))
    # normalising spaces a CJK character off (" 中 "); of the rest, pre-tokenising splits off punctuation
    chars = set("".join(out for out in map(normalize, composed) if out == out.strip()))
    return ["##" + c for c in sorted(chars) if [w for w, _ in pre_tokenize("a" + c)] == ["a" + c]]


def _only_special_tokens_added(tokenizer: Tokenizer) -> Tokenizer:
    """The tokenizer with the trainer's added tokens cut down to SPECIAL_TOKENS: the "##c" given to fix their ids
    stay in the vocabulary as ordinary pieces, neither matched whole in raw text nor skipped when decoding."""
    spec = json.loads(tokenizer.to_str())
    spec["added_tokens"] = [token for token in spec["added_tokens"] if token["content"] in SPECIAL_TOKENS]
    return Tokenizer.from_str(json.dumps(spec))


def _non_empty(texts: Iterable[str]) -> Iterator[str]:
    seen = False
    for text in texts:
        if text.strip():
            seen = True
            yield text
    if not seen:
        raise UserError("the corpus has no text to train a tokenizer on")
