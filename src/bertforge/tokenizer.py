"""Training and loading tokenizers (Hugging Face `tokenizers`), saved in the HF file layout.

Two kinds are trained here:
  wordpiece  BERT's own: words split into pieces, continuations marked "##".
  word       the classic tutorials' whole-word vocabulary; rare words become [UNK].
Any kind is read from a model directory: a released model's byte-level BPE (RoBERTa, ModernBERT; "Ġ" starts a
word) or SentencePiece, unigram or BPE (XLM-R, CamemBERT; "▁" starts a word), with its special tokens found by
their role (`load_tokenizer`, `LoadedTokenizer`), never by their text or id.
Both normalise text to NFC (so that a decomposed "é", as some editors and sources write it, is the same
token as a composed one), then apply BERT's normaliser (clean-up, CJK spacing, optional lowercasing and
accent stripping) and BERT's pre-tokeniser (split on spaces and punctuation).

Whether to strip accents is measured from the text when not given (`accent_choice`): stripping merges
distinct words in Vietnamese (bán, bàn, bạn -> ban), French (a, à), German (schon, schön), Russian (й -> и)
or Japanese kana (が -> か), and decomposes Korean syllables, so there it is off; for English-like text it
is BERT's uncased rule.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import io
import json
import re
import sys
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from .config import FLAG, Key, check_keys, strings
from .errors import UserError, one_line
from .families import BERT_SPECIALS, ROLES, tokenizer_specials
from .fileio import check_size, read_bounded, read_json, write_json

PAD, UNK, CLS, SEP, MASK = (BERT_SPECIALS[role] for role in ROLES)  # the tokenizers bertforge trains carry BERT's
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


class LoadedTokenizer:
    """A `tokenizers.Tokenizer` as a directory defines it: which token plays each special role, and the Hugging
    Face settings (tokenizer_config.json) to write back as they were. Everything else is the Tokenizer's own
    (`encode`, `decode`, `token_to_id`, ...): the `tokenizers` class cannot be subclassed, so this wraps it.

    A released tokenizer.json may pad and truncate every text (sentence-transformers' files pad to 128): those
    settings are taken off the Tokenizer when it is read, so that no verb encodes with them (each sets its own),
    and kept in `released_limits` to be written back as they were."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        specials: dict[str, str],
        hf_config: dict | None = None,
        released_limits: dict[str, dict] | None = None,
    ):
        self.backend = tokenizer
        self.specials = specials  # role ("pad", "unk", "cls", "sep", "mask") -> the token's text
        self.hf_config = hf_config  # tokenizer_config.json as read, or None for one bertforge trained
        self.released_limits = released_limits or {}  # {"padding": ..., "truncation": ...} as tokenizer.json had them

    def __getattr__(self, name: str):
        if name.startswith("__") or name == "backend":  # pickle and copy look for these before __dict__ is set
            raise AttributeError(name)
        return getattr(self.backend, name)

    def copy(self) -> LoadedTokenizer:
        """An independent copy (truncation and padding set on it leave this one as it is)."""
        backend = Tokenizer.from_str(self.backend.to_str())
        return LoadedTokenizer(backend, dict(self.specials), self.hf_config, self.released_limits)

    @property
    def model_max_length(self) -> int | None:
        """tokenizer_config.json's `model_max_length`: the longest input the model was made for, which every verb
        keeps to; None where it names none (or `transformers`' placeholder for none, 1e30)."""
        value = (self.hf_config or {}).get("model_max_length")
        usable = isinstance(value, int) and not isinstance(value, bool) and 0 < value < NO_MAX_LENGTH
        return value if usable else None


# `transformers` writes int(1e30) as model_max_length where a tokenizer names no limit.
NO_MAX_LENGTH = 10**12


def max_input_length(tokenizer, positions: int) -> int:
    """The most tokens a verb gives the model at once: its position table's length, or less where its tokenizer
    says so (tokenizer_config.json's model_max_length)."""
    limit = tokenizer.model_max_length if isinstance(tokenizer, LoadedTokenizer) else None
    return min(positions, limit) if limit else positions


def _released_limits(tokenizer: Tokenizer) -> dict[str, dict]:
    """The padding and truncation a tokenizer.json sets, taken off `tokenizer` (which no longer applies them)."""
    limits = {name: getattr(tokenizer, name) for name in ("padding", "truncation")}
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return {name: value for name, value in limits.items() if value}


def copy_tokenizer(tokenizer):
    """An independent copy of a Tokenizer or LoadedTokenizer, its special roles kept."""
    return tokenizer.copy() if isinstance(tokenizer, LoadedTokenizer) else Tokenizer.from_str(tokenizer.to_str())


def special_tokens(tokenizer) -> dict[str, str]:
    """role -> token text: a loaded tokenizer's own, else BERT's names (the tokenizers bertforge trains)."""
    return tokenizer.specials if isinstance(tokenizer, LoadedTokenizer) else BERT_SPECIALS


def special_ids(tokenizer) -> SpecialIds:
    specials = special_tokens(tokenizer)
    ids = [tokenizer.token_to_id(specials[role]) for role in ROLES]
    if any(i is None for i in ids):
        missing = [f"{role} {specials[role]}" for role, i in zip(ROLES, ids) if i is None]
        raise UserError(f"tokenizer lacks special tokens {', '.join(missing)}")
    return SpecialIds(*ids)


def all_special_ids(tokenizer, spec: dict | None = None) -> list[int]:
    """Every token the tokenizer treats as special (its added tokens marked special, ModernBERT's [unused...]
    and <|endoftext|> too): never a masking target, never a random replacement, never a prediction shown. `spec`:
    the tokenizer's JSON, if parsed already (XLM-R's is 17 MB)."""
    spec = spec if spec is not None else json.loads(tokenizer.to_str())
    marked = [token["id"] for token in spec.get("added_tokens", []) if token.get("special")]
    return sorted({*special_ids(tokenizer).all, *marked})


def word_starts(tokenizer) -> list[bool] | None:
    """For every id, whether its token begins a word, as the tokenizer itself marks words: WordPiece's "##"
    continuations (a word is what BERT's pre-tokenizer cut out: no spaces, punctuation alone), byte-level BPE's
    "Ġ" and SentencePiece's "▁" starts (a word is what spaces separate), a word-level vocabulary's every token.
    Special tokens begin one. None for a tokenizer that marks none of these: its words cannot be known."""
    spec = json.loads(tokenizer.to_str())
    model = spec["model"]
    prefix = model.get("continuing_subword_prefix")
    start = _word_start_mark(spec.get("pre_tokenizer"))
    vocab = tokenizer.get_vocab()
    table = [True] * tokenizer.get_vocab_size()
    if model["type"] == "WordLevel":
        return table
    if model["type"] == "WordPiece" or prefix:
        prefix = prefix or "##"
        for token, i in vocab.items():
            table[i] = not token.startswith(prefix)
    elif start:
        for token, i in vocab.items():
            table[i] = token.startswith(start)
    else:
        return None
    for i in all_special_ids(tokenizer, spec):
        table[i] = True
    return table


def _word_start_mark(pre_tokenizer: dict | None) -> str | None:
    """The character a pre-tokenizer puts at the start of a word: "Ġ" (byte-level), the Metaspace's replacement
    ("▁"), or None."""
    if not pre_tokenizer:
        return None
    if pre_tokenizer.get("type") == "Sequence":
        marks = [_word_start_mark(p) for p in pre_tokenizer.get("pretokenizers", [])]
        return next((m for m in marks if m), None)
    if pre_tokenizer.get("type") == "ByteLevel":
        return "Ġ"  # the byte-level alphabet's space
    if pre_tokenizer.get("type") == "Metaspace":
        return pre_tokenizer.get("replacement", "▁")
    return None


def token_text(tokenizer, token_id: int) -> str:
    """A token as text to show (`the`, not byte-level's `Ġthe` nor SentencePiece's `▁the`): what the tokenizer's
    decoder makes of it alone, as `transformers`' fill-mask pipeline shows it, without the space a word start
    decodes to."""
    return tokenizer.decode([token_id], skip_special_tokens=False).strip() or tokenizer.id_to_token(token_id)


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


def _add_post_processor(tokenizer: Tokenizer, specials: dict[str, str] = BERT_SPECIALS) -> None:
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


FAST_CLASS = "PreTrainedTokenizerFast"  # transformers' class that runs a tokenizer.json exactly as it is
# A tokenizer model's kind: wordpiece, word (the kinds bertforge trains), bpe (byte-level as RoBERTa's, or
# SentencePiece's) or unigram (SentencePiece's, as XLM-R's).
MODEL_KINDS = {"WordPiece": "wordpiece", "WordLevel": "word", "BPE": "bpe", "Unigram": "unigram"}


def _settings(tokenizer: Tokenizer) -> dict:
    """Kind and normaliser options, read back from the tokenizer's own serialisation."""
    spec = json.loads(tokenizer.to_str())
    norm = spec.get("normalizer") or {}
    if norm.get("type") == "Sequence":  # NFC, then BERT's
        norm = next((n for n in norm["normalizers"] if n.get("type") == "BertNormalizer"), {})
    return {
        "kind": MODEL_KINDS.get(spec["model"]["type"], "other"),
        "lowercase": bool(norm.get("lowercase", False)),
        "strip_accents": norm.get("strip_accents"),
    }


def hf_tokenizer_class(tokenizer) -> str:
    """The `transformers` class that loads it: a handed tokenizer's own; for one bertforge trained,
    PreTrainedTokenizerFast, which runs tokenizer.json as it is (NFC included). BertTokenizerFast would build
    BERT's normaliser again from tokenizer_config.json and drop NFC, so that a decomposed accent became [UNK] in
    transformers alone; a tokenizer without NFC (a directory written by an older bertforge or by transformers)
    keeps it."""
    handed = tokenizer.hf_config if isinstance(tokenizer, LoadedTokenizer) else None
    if handed and handed.get("tokenizer_class"):
        return handed["tokenizer_class"]
    spec = json.loads(tokenizer.to_str())
    nfc = (spec.get("normalizer") or {}).get("type") == "Sequence"
    return "BertTokenizerFast" if _settings(tokenizer)["kind"] == "wordpiece" and not nfc else FAST_CLASS


def save_tokenizer(tokenizer, directory: str | Path, model_max_length: int = 512, segments: bool = True) -> None:
    """Write the Hugging Face tokenizer files into `directory` (one being written whole: a model's, a data
    directory's, or a tokenizer's own under `atomic_directory`). Without `segments` (a model with no segment
    embeddings, as ModernBERT), `transformers`' tokenizer gives no token_type_ids, which such a model does not take.

    A tokenizer handed to bertforge (a released model's) keeps its tokenizer_config.json as it was, its special
    tokens named in it; one bertforge trained gets BERT's. vocab.txt is written for WordPiece and word-level
    vocabularies, which `transformers`' BERT tokenizer can read alone."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    settings = _settings(tokenizer)
    _as_released(tokenizer).save(str(directory / "tokenizer.json"))
    if settings["kind"] in ("wordpiece", "word"):
        vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
        (directory / "vocab.txt").write_text("".join(token + "\n" for token, _ in vocab), encoding="utf-8")
    special = {f"{role}_token": text for role, text in special_tokens(tokenizer).items()}
    input_names = ["input_ids", "token_type_ids", "attention_mask"] if segments else ["input_ids", "attention_mask"]
    handed = tokenizer.hf_config if isinstance(tokenizer, LoadedTokenizer) else None
    if handed is not None:
        config = {"model_max_length": model_max_length, "model_input_names": input_names, **handed, **special}
        special |= {key: config[key] for key in ("bos_token", "eos_token") if key in config}
    else:  # BertTokenizerFast re-applies do_lower_case / strip_accents from here, so they must match.
        config = {
            "tokenizer_class": hf_tokenizer_class(tokenizer),
            "do_lower_case": settings["lowercase"],
            "strip_accents": settings["strip_accents"],
            "tokenize_chinese_chars": True,
            "model_max_length": model_max_length,
            "bertforge_kind": settings["kind"],
            "model_input_names": input_names,
            **special,
        }
    write_json(directory / "tokenizer_config.json", config)
    write_json(directory / "special_tokens_map.json", special)


def _as_released(tokenizer):
    """The tokenizer to write: a released one with the padding and truncation its file had (other tools read them;
    bertforge never does), any other as it is."""
    limits = tokenizer.released_limits if isinstance(tokenizer, LoadedTokenizer) else {}
    if not limits:
        return tokenizer
    copy = Tokenizer.from_str(tokenizer.to_str())
    if "padding" in limits:
        copy.enable_padding(**limits["padding"])
    if "truncation" in limits:
        copy.enable_truncation(**limits["truncation"])
    return copy


def load_tokenizer(directory: str | Path, model_config: dict | None = None) -> LoadedTokenizer:
    """Load a directory's tokenizer with its special tokens found by their role (`special_roles`; `model_config`:
    the directory's config.json where the caller has read it, else read here for its model type): tokenizer.json;
    else the files released models still ship without one: a bare vocab.txt (BERT's WordPiece), vocab.json and
    merges.txt (RoBERTa's byte-level BPE), or a SentencePiece model (XLM-R's, converted by `transformers` where it
    is installed). A run directory's is its model's (run/model/), so `prepare --tokenizer RUN` reads text for
    continued pre-training of RUN. The file's own padding and truncation are taken off (`LoadedTokenizer`)."""
    directory = Path(directory)
    if not has_tokenizer(directory) and has_tokenizer(directory / "model"):
        directory = directory / "model"
    hf_config = _read_json(directory / "tokenizer_config.json", "tokenizer_config")
    if model_config is None:
        model_config = _read_json(directory / "config.json") or {}
    specials = special_roles(directory, hf_config, model_config.get("model_type"))
    path, sentencepiece = directory / "tokenizer.json", _sentencepiece_file(directory)
    if path.is_file():
        check_size(path, "tokenizer")
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as e:  # the Rust side raises a bare Exception on a malformed file
            raise UserError(f"{path}: not a valid tokenizer file ({one_line(e)})") from None
    elif (directory / "vocab.txt").is_file():
        path, tokenizer = directory / "vocab.txt", _from_vocab_txt(directory, hf_config or {}, specials)
    elif (directory / "vocab.json").is_file() and (directory / "merges.txt").is_file():
        path, tokenizer = directory / "vocab.json", _from_byte_level_bpe(directory, hf_config or {}, specials)
    elif sentencepiece is not None:
        path, tokenizer = sentencepiece, _from_sentencepiece(directory, sentencepiece)
    else:
        raise UserError(
            f"{directory}: no tokenizer (tokenizer.json, vocab.txt, vocab.json with merges.txt, or a SentencePiece "
            "model)"
        )
    # The parts that run on text, each as its own JSON: not the whole file again (XLM-R's is 17 MB).
    parts = (tokenizer.normalizer, tokenizer.pre_tokenizer, tokenizer.decoder)
    _check_text_rules([json.loads(part.__getstate__()) for part in parts if part is not None], path)
    for part in (tokenizer.normalizer, tokenizer.decoder):  # what reads the text, and what writes it back
        _check_expansion(json.loads(part.__getstate__()) if part is not None else None, path)
    released_limits = _released_limits(tokenizer)
    top, token = highest_id(tokenizer)
    if top >= tokenizer.get_vocab_size():
        raise UserError(
            f"{path}: {token!r} has id {top:,} but the tokenizer has {tokenizer.get_vocab_size():,} tokens: its ids "
            "have gaps, and would index past the model's embedding table"
        )
    missing = [role for role in ROLES if tokenizer.token_to_id(specials[role]) is None]
    if missing:
        what = {"mask": "a mask token: it cannot be asked to fill in blanks or be pre-trained"}.get(missing[0], "")
        raise UserError(
            f"{directory}: the tokenizer has no {what or missing[0] + ' token'} ({specials[missing[0]]!r} is not in "
            f"its vocabulary); name the token of that role in tokenizer_config.json, as {missing[0]}_token"
        )
    _check_roles(specials, path)
    if tokenizer.post_processor is None:
        _add_post_processor(tokenizer, specials)
    # One bertforge wrote (or a bare tokenizer.json) gets bertforge's settings again when saved; a released
    # model's keeps its own, even none (roberta-base's: transformers then picks the class by the model type).
    ours = "bertforge_kind" in hf_config if hf_config is not None else not (directory / "config.json").is_file()
    return LoadedTokenizer(tokenizer, specials, None if ours else hf_config or {}, released_limits)


# The names a SentencePiece model has in released repositories: XLM-R's and CamemBERT's, ALBERT's and T5's, DeBERTa-v3's
SENTENCEPIECE_FILES = ("sentencepiece.bpe.model", "spiece.model", "spm.model", "sentencepiece.model")


def _sentencepiece_file(directory: Path) -> Path | None:
    return next((directory / name for name in SENTENCEPIECE_FILES if (directory / name).is_file()), None)


def _from_byte_level_bpe(directory: Path, config: dict, specials: dict[str, str]) -> Tokenizer:
    """As `transformers`' RoBERTa tokenizer builds one from vocab.json and merges.txt (roberta-base's older files):
    byte-level BPE with no normaliser, <s> A </s></s> B </s>, and the mask token taking the space before it."""
    for name in ("vocab.json", "merges.txt"):
        check_size(directory / name, "vocabulary")
    try:
        model = models.BPE.from_file(
            str(directory / "vocab.json"),
            str(directory / "merges.txt"),
            continuing_subword_prefix="",
            end_of_word_suffix="",
            fuse_unk=False,
        )
    except Exception as e:  # the Rust side's bare Exception on a malformed file
        raise UserError(f"{directory}: vocab.json and merges.txt are not a BPE vocabulary ({one_line(e)})") from None
    tokenizer = Tokenizer(model)
    prefix_space = bool(config.get("add_prefix_space", False))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=prefix_space)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(
        [AddedToken(token, special=True, lstrip=role == "mask") for role, token in specials.items()]
    )
    cls, sep = specials["cls"], specials["sep"]
    if tokenizer.token_to_id(cls) is not None and tokenizer.token_to_id(sep) is not None:
        tokenizer.post_processor = processors.RobertaProcessing(
            (sep, tokenizer.token_to_id(sep)), (cls, tokenizer.token_to_id(cls)), True, prefix_space
        )
    return tokenizer


SENTENCEPIECE_CONVERTER = "transformers sentencepiece protobuf"  # what converts a SentencePiece model, as pip names it


def _from_sentencepiece(directory: Path, model_file: Path) -> Tokenizer:
    """A SentencePiece model converted as `transformers` converts it for the model's family (XLM-R's ids shifted
    by its fairseq specials, its <mask> last): that needs `transformers`, `sentencepiece` and `protobuf`, which
    bertforge does not (pip install 'bertforge[sentencepiece]'); without them, one line names them."""
    try:
        import google.protobuf  # noqa: F401  (the converter reads the model file's protocol buffer with it)
        import sentencepiece  # noqa: F401
        import transformers
    except ImportError:
        raise UserError(
            f"{model_file}: a SentencePiece model without tokenizer.json; bertforge reads it through the converter "
            f"of {SENTENCEPIECE_CONVERTER.replace(' ', ', ')}: pip install 'bertforge[sentencepiece]' (or save the "
            "tokenizer as tokenizer.json)"
        ) from None
    check_size(model_file, "vocabulary")
    try:
        converted = transformers.AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
        return Tokenizer.from_str(converted.backend_tokenizer.to_str())
    except Exception as e:  # transformers raises many types for a directory it cannot read
        raise UserError(f"{model_file}: not converted to a tokenizer ({one_line(e)})") from None


def _check_roles(specials: dict[str, str], path: Path) -> None:
    """Each special role played by a token of its own: a mask token that is also the padding would be masked out
    of attention, and [CLS] as [SEP] would make a pair one segment."""
    for i, role in enumerate(ROLES):
        other = next((o for o in ROLES[:i] if specials[o] == specials[role]), None)
        if other is not None:
            raise UserError(
                f"{path}: {specials[role]!r} is both the {other} token and the {role} token; each role needs a token "
                "of its own (name them in tokenizer_config.json)"
            )


def special_roles(directory: Path, hf_config: dict | None, model_type: Any) -> dict[str, str]:
    """role -> token text for the tokenizer in `directory`, as `transformers` finds them: tokenizer_config.json's
    `pad_token`, `cls_token`, ..., overridden by special_tokens_map.json's; a role neither names is the default
    of the tokenizer class tokenizer_config.json names, or that the model type (config.json's) uses (roberta-base's
    `<s> </s> <mask>` has no tokenizer_config.json); with neither, BERT's."""
    named = {**(hf_config or {}), **(_read_json(directory / "special_tokens_map.json") or {})}
    defaults = tokenizer_specials(named.get("tokenizer_class"), model_type)  # the family's (families/)
    specials = {}
    for role in ROLES:
        value = named.get(f"{role}_token")
        value = value.get("content") if isinstance(value, dict) else value
        specials[role] = value if isinstance(value, str) and value else defaults[role]
    return specials


# Characters the normalizers together may write for one they read. Released tokenizers' Replace rules write one or
# two a match; the NFKC tables SentencePiece precompiles (XLM-R's, T5's) write at most 18, for U+FDFA (measured:
# nmt_nfkc, nfkc_cf); XLM-R's chain, that table then a Replace that shrinks runs of spaces, 18.
MAX_EXPANSION = 32


def _check_text_rules(spec: object, path: Path) -> None:
    """Refuse a tokenizer.json whose rules make a short text cost without bound: a regex (a Split pre-tokenizer's,
    a Replace normalizer's) with a repeating group that holds a repetition, `((a+)+)+b`, whose matching backtracks
    exponentially until Oniguruma gives up and the Rust side panics mid-run. (What the normalizers write, as a
    chain, is `_check_expansion`'s.)"""
    if isinstance(spec, list):
        for item in spec:
            _check_text_rules(item, path)
    if not isinstance(spec, dict):
        return
    regex = spec["pattern"].get("Regex") if isinstance(spec.get("pattern"), dict) else None
    if isinstance(regex, str) and _nested_repetition(regex):
        raise UserError(f"{path}: the regex {regex[:60]!r} repeats a repetition, which can take exponential time")
    for value in spec.values():
        _check_text_rules(value, path)


def _check_expansion(rules: dict | None, path: Path) -> None:
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


def _read_json(path: Path, kind: str = "config") -> dict | None:
    """A JSON object from `path` (read bounded, fileio.read_json) checked against TOKENIZER_CONFIG, None if there
    is no such file; anything else in it is a user error."""
    if not path.is_file():
        return None
    value = read_json(path, kind)
    if not isinstance(value, dict):
        raise UserError(f"{path}: not a JSON object")
    check_keys(value, TOKENIZER_CONFIG, str(path))
    return value


def _token(value: Any) -> bool:
    """A special token as tokenizer_config.json names it: its text, or an AddedToken's {"content": text, ...}."""
    content = value.get("content") if isinstance(value, dict) else value
    return isinstance(content, str) and 0 < len(content) <= 100


# What bertforge reads of tokenizer_config.json and special_tokens_map.json (the model's config.json is schema.py's)
TOKENIZER_CONFIG = {
    "model_max_length": Key((int, float), "a positive number", lambda v: v > 0),
    **dict.fromkeys(("do_lower_case", "tokenize_chinese_chars", "add_prefix_space"), FLAG),
    "strip_accents": Key((bool,), "true, false or null"),
    "tokenizer_class": Key((str,), "a class name", lambda v: 0 < len(v) <= 100),
    "model_input_names": Key((list,), "a list of names", lambda v: len(v) <= 8 and strings(v)),
    "model_type": Key((str,), "a model type", lambda v: len(v) <= 100),
    **{f"{role}_token": Key((str, dict), "a token's text", _token) for role in (*ROLES, "bos", "eos")},
}


def has_tokenizer(directory: Path) -> bool:
    """Whether `directory` holds a tokenizer's files, of any layout `load_tokenizer` reads."""
    files = ("tokenizer.json", "vocab.txt", "vocab.json", *SENTENCEPIECE_FILES)
    return any((directory / name).is_file() for name in files)


def _from_vocab_txt(directory: Path, config: dict, specials: dict[str, str]) -> Tokenizer:
    """As `transformers`' BertTokenizer reads a bare vocab.txt: a token a line, lines ended as Python's text mode
    ends them (a U+2028 inside a token is part of it), BERT's normaliser alone."""
    try:
        text = read_bounded(directory / "vocab.txt", "vocabulary").decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{directory / 'vocab.txt'}: not UTF-8 text (byte {e.start}); it is not a vocabulary") from None
    lines = [line.rstrip("\n") for line in io.StringIO(text)]  # ended as Python's text mode ends lines
    tokenizer = Tokenizer(models.WordPiece({token: i for i, token in enumerate(lines)}, unk_token=specials["unk"]))
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    tokenizer.add_special_tokens(list(specials.values()))  # matched before normalisation: "[MASK]" is not lowercased
    return _bert_pipeline(tokenizer, config.get("do_lower_case", True), config.get("strip_accents"), nfc=False)


def highest_id(tokenizer) -> tuple[int, str]:
    """The largest id the tokenizer can give, with its token: of its vocabulary, its added tokens, and the special
    tokens its post-processor inserts (each of which indexes the model's embedding table)."""
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    token, top = max(vocab.items(), key=lambda item: item[1], default=("", -1))
    post = tokenizer.post_processor
    spec = json.loads(post.__getstate__()) if post is not None else {}
    inserted = [(entry["id"], i) for entry in (spec.get("special_tokens") or {}).values() for i in entry.get("ids", [])]
    inserted += [tuple(spec[key]) for key in ("sep", "cls") if isinstance(spec.get(key), list)]
    for name, i in inserted:
        if isinstance(i, int) and i > top:
            token, top = str(name), i
    return top, token


def fingerprint(tokenizer: Tokenizer) -> str:
    """A short hash of the tokenizer's full definition: data and models must agree on it."""
    return hashlib.sha256(tokenizer.to_str().encode("utf-8")).hexdigest()[:16]


def word_pieces(tokenizer, word: str) -> list[str]:
    """The pieces the tokenizer's model cuts one pre-tokenized word into (`covid` -> `co`, `##vid`)."""
    return [token.value for token in tokenizer.model.tokenize(word)]


def count_words(tokenizer, texts: Iterable[str]) -> collections.Counter[str]:
    """How often each word occurs in `texts`, words as the tokenizer's model sees them: normalised and cut by its
    pre-tokenizer (byte-level BPE's `Ġcovid`, SentencePiece's `▁covid`, WordPiece's `covid`)."""
    normalize = tokenizer.normalizer.normalize_str if tokenizer.normalizer is not None else (lambda text: text)
    pre_tokenize = tokenizer.pre_tokenizer.pre_tokenize_str if tokenizer.pre_tokenizer is not None else None
    counts: collections.Counter[str] = collections.Counter()
    for text in texts:
        text = normalize(text)
        counts.update([word for word, _ in pre_tokenize(text)] if pre_tokenize else text.split())
    return counts


def with_words(tokenizer, words: list[str]):
    """The tokenizer with each of `words` (pre-tokenized, as `count_words` gives them) a token of its own, after
    every id it has: (the new tokenizer, the new ids in the order of `words`).

    Each kind takes a whole word its own way: WordPiece and a word-level vocabulary match a word in their
    vocabulary whole before cutting it; byte-level and SentencePiece BPE are told to take a word found whole in
    their vocabulary before merging (`ignore_merges`, as Llama 3's tokenizer: a trained BPE's merges rebuild each
    of its words, so no other word is cut differently: none of 45,258 held-out Gutenberg words for an 8k BPE);
    unigram gets each word as a piece scored above every way of cutting it, so that the best segmentation is the
    whole word. WordPiece matches the longest piece first, so a new word also cuts the longer words it begins
    (`tuesdays`: `tuesday ##s`); `extend_vocabulary` counts them."""
    spec = json.loads(tokenizer.to_str())
    model = spec["model"]
    first = tokenizer.get_vocab_size()
    if max(tokenizer.get_vocab().values()) != first - 1:
        raise UserError("the tokenizer's ids have gaps: bertforge extends only a vocabulary numbered 0..N-1")
    ids = list(range(first, first + len(words)))
    added = {token["id"]: token["content"] for token in spec.get("added_tokens", [])}
    if model["type"] in ("WordPiece", "WordLevel", "BPE"):
        # Added tokens past the model's vocabulary are numbered after it when a file is read: each is written into
        # the vocabulary at its id, or the words would push them along (ModernBERT's [MASK] would move).
        model["vocab"].update({content: i for i, content in added.items() if content not in model["vocab"]})
        model["vocab"].update(dict(zip(words, ids)))
        if model["type"] == "BPE":
            model["ignore_merges"] = True
    elif model["type"] == "Unigram":
        pieces = model["vocab"]  # [[piece, log-probability], ...], the id its position
        floor = min(score for _, score in pieces) - 10.0
        # ids past the model's own (special tokens added after it, XLM-R's <mask> in some files) keep their place
        pieces += [[added.get(i, f"<unused{i}>"), floor] for i in range(len(pieces), first)]
        scores = dict(map(tuple, pieces))
        for word in words:
            best = sum(scores.get(piece, floor) for piece in word_pieces(tokenizer, word))
            pieces.append([word, best + 1.0])  # e^1 likelier than the segmentation it replaces
    else:
        raise UserError(f"cannot add words to a {model['type']} tokenizer")
    extended = Tokenizer.from_str(json.dumps(spec))
    moved = [content for i, content in added.items() if extended.token_to_id(content) != i]
    if moved or [extended.token_to_id(word) for word in words] != ids:
        raise UserError(f"extending the tokenizer would renumber {', '.join(moved) or 'its new words'}")
    if isinstance(tokenizer, LoadedTokenizer):
        # transformers reads the new rules from tokenizer.json as it is: a family's own class (RoBERTa's) builds its
        # BPE again from the vocabulary and merges, and would cut the new words as before
        hf_config = None if tokenizer.hf_config is None else {**tokenizer.hf_config, "tokenizer_class": FAST_CLASS}
        extended = LoadedTokenizer(extended, dict(tokenizer.specials), hf_config, tokenizer.released_limits)
    return extended, ids
