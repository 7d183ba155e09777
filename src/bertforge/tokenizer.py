"""Training and loading tokenizers (Hugging Face `tokenizers`), saved in the HF file layout.

Two kinds:
  wordpiece  BERT's own: words split into pieces, continuations marked "##".
  word       the classic tutorials' whole-word vocabulary; rare words become [UNK].
Both normalise text to NFC (so that a decomposed "é", as some editors and sources write it, is the same
token as a composed one), then apply BERT's normaliser (clean-up, CJK spacing, optional lowercasing and
accent stripping) and BERT's pre-tokeniser (split on spaces and punctuation).

Whether to strip accents is measured from the text when not given (`accent_choice`): stripping merges
distinct words in Vietnamese (bán, bàn, bạn -> ban), French (a, à), German (schon, schön), Russian (й -> и)
or Japanese kana (が -> か), and decomposes Korean syllables, so there it is off; for English-like text it
is BERT's uncased rule.
"""

from __future__ import annotations

import collections
import hashlib
import json
import re
import sys
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from .errors import UserError
from .fileio import write_json

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = [PAD, UNK, CLS, SEP, MASK]  # [PAD] is id 0
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")


@dataclass(frozen=True)
class SpecialIds:
    pad: int
    unk: int
    cls: int
    sep: int
    mask: int

    @property
    def all(self) -> tuple[int, ...]:
        return (self.pad, self.unk, self.cls, self.sep, self.mask)


def special_ids(tokenizer: Tokenizer) -> SpecialIds:
    ids = [tokenizer.token_to_id(t) for t in SPECIAL_TOKENS]
    if any(i is None for i in ids):
        missing = [t for t, i in zip(SPECIAL_TOKENS, ids) if i is None]
        raise UserError(f"tokenizer lacks special tokens {', '.join(missing)}")
    return SpecialIds(*ids)


def _bert_pipeline(tokenizer: Tokenizer, lowercase: bool, strip_accents: bool | None, nfc: bool = True) -> Tokenizer:
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
        counts.update(_WORD.findall(unicodedata.normalize("NFC", text).lower()))
    words = [word for word, _ in counts.most_common(FREQUENT_WORDS)]
    groups: dict[str, list[str]] = collections.defaultdict(list)
    for word in words:
        groups[strip_accents(word)].append(word)
    merged_groups = [tuple(group) for group in groups.values() if len(group) > 1]
    merged = sum(map(len, merged_groups))
    split = sum(1 for word in words if len(strip_accents(word)) > len(word))
    keeps = merged >= MERGED_WORDS_TO_KEEP * len(words) or split >= SPLIT_WORDS_TO_KEEP * len(words)
    return AccentChoice(not keeps, True, len(words), merged, split, tuple(merged_groups[:3]))


def _add_post_processor(tokenizer: Tokenizer) -> None:
    """encode(a) -> [CLS] a [SEP];  encode(a, b) -> [CLS] a [SEP] b [SEP] with segment 1 on b."""
    cls_id, sep_id = tokenizer.token_to_id(CLS), tokenizer.token_to_id(SEP)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{CLS}:0 $A:0 {SEP}:0",
        pair=f"{CLS}:0 $A:0 {SEP}:0 $B:1 {SEP}:1",
        special_tokens=[(CLS, cls_id), (SEP, sep_id)],
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
        tokenizer = _bert_pipeline(
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
        tokenizer = _bert_pipeline(Tokenizer(models.WordLevel(unk_token=UNK)), lowercase, strip_accents)
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
    _add_post_processor(tokenizer)
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
        composed.update(text if text.isascii() else unicodedata.normalize("NFC", text))
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


def _settings(tokenizer: Tokenizer) -> dict:
    """Kind and normaliser options, read back from the tokenizer's own serialisation."""
    spec = json.loads(tokenizer.to_str())
    norm = spec.get("normalizer") or {}
    if norm.get("type") == "Sequence":  # NFC, then BERT's
        norm = next((n for n in norm["normalizers"] if n.get("type") == "BertNormalizer"), {})
    return {
        "kind": "wordpiece" if spec["model"]["type"] == "WordPiece" else "word",
        "lowercase": bool(norm.get("lowercase", False)),
        "strip_accents": norm.get("strip_accents"),
    }


def hf_tokenizer_class(tokenizer: Tokenizer) -> str:
    """The `transformers` class that loads it: PreTrainedTokenizerFast, which runs tokenizer.json as it is (NFC
    included). BertTokenizerFast would build BERT's normaliser again from tokenizer_config.json and drop NFC, so
    that a decomposed accent became [UNK] in transformers alone; a tokenizer without NFC (a directory written by
    an older bertforge or by transformers) keeps it."""
    spec = json.loads(tokenizer.to_str())
    nfc = (spec.get("normalizer") or {}).get("type") == "Sequence"
    return "BertTokenizerFast" if _settings(tokenizer)["kind"] == "wordpiece" and not nfc else "PreTrainedTokenizerFast"


def save_tokenizer(
    tokenizer: Tokenizer, directory: str | Path, model_max_length: int = 512, segments: bool = True
) -> None:
    """Write the four Hugging Face tokenizer files into `directory` (one being written whole: a model's, or a
    tokenizer's own under `atomic_directory`). Without `segments` (a model with no segment embeddings, as
    ModernBERT), `transformers`' tokenizer gives no token_type_ids, which such a model does not take."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    settings = _settings(tokenizer)
    tokenizer.save(str(directory / "tokenizer.json"))
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    (directory / "vocab.txt").write_text("".join(token + "\n" for token, _ in vocab), encoding="utf-8")
    special = {"pad_token": PAD, "unk_token": UNK, "cls_token": CLS, "sep_token": SEP, "mask_token": MASK}
    # BertTokenizerFast re-applies do_lower_case / strip_accents from here, so they must match.
    config = {
        "tokenizer_class": hf_tokenizer_class(tokenizer),
        "do_lower_case": settings["lowercase"],
        "strip_accents": settings["strip_accents"],
        "tokenize_chinese_chars": True,
        "model_max_length": model_max_length,
        "bertforge_kind": settings["kind"],
        "model_input_names": ["input_ids", "token_type_ids", "attention_mask"]
        if segments
        else ["input_ids", "attention_mask"],
        **special,
    }
    write_json(directory / "tokenizer_config.json", config)
    write_json(directory / "special_tokens_map.json", special)


def load_tokenizer(directory: str | Path) -> Tokenizer:
    """Load tokenizer.json, or build a BERT WordPiece tokenizer from a bare vocab.txt. A run directory's is its
    model's (run/model/), so `prepare --tokenizer RUN` reads text for continued pre-training of RUN."""
    directory = Path(directory)
    if not _has_tokenizer(directory) and _has_tokenizer(directory / "model"):
        directory = directory / "model"
    path = directory / "tokenizer.json"
    if path.is_file():
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as e:  # the Rust side raises a bare Exception on a malformed file
            raise UserError(f"{path}: not a valid tokenizer file ({e})") from None
    elif (directory / "vocab.txt").is_file():
        tokenizer = _from_vocab_txt(directory)
    else:
        raise UserError(f"{directory}: no tokenizer (tokenizer.json or vocab.txt)")
    special_ids(tokenizer)  # fail early and clearly if the special tokens are absent
    if tokenizer.post_processor is None:
        _add_post_processor(tokenizer)
    return tokenizer


def _has_tokenizer(directory: Path) -> bool:
    return (directory / "tokenizer.json").is_file() or (directory / "vocab.txt").is_file()


def _from_vocab_txt(directory: Path) -> Tokenizer:
    config_path = directory / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
    lines = (directory / "vocab.txt").read_text(encoding="utf-8").splitlines()
    tokenizer = Tokenizer(models.WordPiece({token: i for i, token in enumerate(lines)}, unk_token=UNK))
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    tokenizer.add_special_tokens(SPECIAL_TOKENS)  # matched before normalisation: "[MASK]" is not lowercased
    # as transformers' BertTokenizer reads a bare vocab.txt: BERT's normaliser alone
    return _bert_pipeline(tokenizer, config.get("do_lower_case", True), config.get("strip_accents"), nfc=False)


def fingerprint(tokenizer: Tokenizer) -> str:
    """A short hash of the tokenizer's full definition: data and models must agree on it."""
    return hashlib.sha256(tokenizer.to_str().encode("utf-8")).hexdigest()[:16]
