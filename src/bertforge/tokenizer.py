"""Training and loading tokenizers (Hugging Face `tokenizers`), saved in the HF file layout.

Two kinds:
  wordpiece  BERT's own: words split into pieces, continuations marked "##".
  word       the classic tutorials' whole-word vocabulary; rare words become [UNK].
Both use BERT's normaliser (clean-up, CJK spacing, optional lowercasing and
accent stripping) and BERT's pre-tokeniser (split on spaces and punctuation).
"""

from __future__ import annotations

import hashlib
import json
import sys
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


def _bert_pipeline(tokenizer: Tokenizer, lowercase: bool, strip_accents: bool | None) -> Tokenizer:
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=strip_accents, lowercase=lowercase
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tokenizer


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
    """Train on an iterator of texts; it is consumed once, in a stream.

    `strip_accents=None` follows BERT: strip accents when lowercasing. Pass
    False to keep diacritics (Vietnamese, French), True to strip them always.
    """
    if kind == "wordpiece":
        tokenizer = Tokenizer(models.WordPiece(unk_token=UNK, max_input_chars_per_word=100))
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=SPECIAL_TOKENS,
            continuing_subword_prefix="##",
            show_progress=sys.stderr.isatty(),
        )
        tokenizer.decoder = decoders.WordPiece(prefix="##")
    elif kind == "word":
        tokenizer = Tokenizer(models.WordLevel(unk_token=UNK))
        trainer = trainers.WordLevelTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=SPECIAL_TOKENS,
            show_progress=sys.stderr.isatty(),
        )
    else:
        raise UserError(f"unknown tokenizer kind {kind!r}; choose wordpiece or word")
    _bert_pipeline(tokenizer, lowercase, strip_accents)
    tokenizer.train_from_iterator(_non_empty(texts), trainer=trainer)
    if tokenizer.get_vocab_size() <= len(SPECIAL_TOKENS):
        raise UserError("the corpus produced no vocabulary: it has no text, or every word is below --min-frequency")
    _add_post_processor(tokenizer)
    return tokenizer


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
    return {
        "kind": "wordpiece" if spec["model"]["type"] == "WordPiece" else "word",
        "lowercase": bool(norm.get("lowercase", False)),
        "strip_accents": norm.get("strip_accents"),
    }


def hf_tokenizer_class(tokenizer: Tokenizer) -> str:
    """The `transformers` class that loads it: BertTokenizerFast for WordPiece (it re-applies BERT's normalisation
    from tokenizer_config.json), PreTrainedTokenizerFast for whole words."""
    return "BertTokenizerFast" if _settings(tokenizer)["kind"] == "wordpiece" else "PreTrainedTokenizerFast"


def save_tokenizer(tokenizer: Tokenizer, directory: str | Path, model_max_length: int = 512) -> None:
    """Write the four Hugging Face tokenizer files into `directory`."""
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
        "model_input_names": ["input_ids", "token_type_ids", "attention_mask"],
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
    return _bert_pipeline(tokenizer, config.get("do_lower_case", True), config.get("strip_accents"))


def fingerprint(tokenizer: Tokenizer) -> str:
    """A short hash of the tokenizer's full definition: data and models must agree on it."""
    return hashlib.sha256(tokenizer.to_str().encode("utf-8")).hexdigest()[:16]
