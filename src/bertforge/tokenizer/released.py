"""Tokenizers on disk, in the Hugging Face layout: read from any directory a released model ships (tokenizer.json;
a bare vocab.txt; vocab.json with merges.txt; a SentencePiece model), checked (`bounds`), with their special tokens
found by their role; and written back, a released one's settings as they were.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

from ..config import FLAG, Key, check_keys, strings
from ..errors import UserError, native_logs_silenced, one_line
from ..families import ROLES, tokenizer_specials
from ..fileio import check_size, read_bounded, read_json, write_json
from .bounds import check_expansion, check_text_rules
from .roles import LoadedTokenizer, special_tokens, take_released_limits
from .training import add_post_processor, bert_pipeline

TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")


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
    check_text_rules([json.loads(part.__getstate__()) for part in parts if part is not None], path)
    for part in (tokenizer.normalizer, tokenizer.decoder):  # what reads the text, and what writes it back
        check_expansion(json.loads(part.__getstate__()) if part is not None else None, path)
    released_limits = take_released_limits(tokenizer)
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
        add_post_processor(tokenizer, specials)
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


MIN_PIECES = 16  # a SentencePiece model with fewer is empty or damaged: no released vocabulary is this small
SENTENCEPIECE_CONVERTER = "transformers sentencepiece protobuf"  # what converts a SentencePiece model, as pip names it


def _from_sentencepiece(directory: Path, model_file: Path) -> Tokenizer:
    """A SentencePiece model converted as `transformers` converts it for the model's family (XLM-R's ids shifted
    by its fairseq specials, its <mask> last): that needs `transformers`, `sentencepiece` and `protobuf`, which
    bertforge does not (pip install 'bertforge[sentencepiece]'); without them, one line names them."""
    try:
        import google.protobuf  # noqa: F401  (the converter reads the model file's protocol buffer with it)
        import sentencepiece
        import transformers
    except ImportError:
        raise UserError(
            f"{model_file}: a SentencePiece model without tokenizer.json; bertforge reads it through the converter "
            f"of {SENTENCEPIECE_CONVERTER.replace(' ', ', ')}: pip install 'bertforge[sentencepiece]' (or save the "
            "tokenizer as tokenizer.json)"
        ) from None
    check_size(model_file, "vocabulary")
    proto = read_bounded(model_file, "vocabulary")
    try:  # read by SentencePiece itself first: the converter's own message for a damaged file is about tiktoken
        with native_logs_silenced():
            pieces = sentencepiece.SentencePieceProcessor(model_proto=proto).get_piece_size()
    except Exception as e:  # sentencepiece raises RuntimeError and others for a file it cannot parse
        raise UserError(f"{model_file}: not a SentencePiece model ({one_line(e)})") from None
    if pieces < MIN_PIECES:
        raise UserError(f"{model_file}: a SentencePiece model of {pieces} pieces, too few to be a model's vocabulary")
    try:
        converted = transformers.AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
        return Tokenizer.from_str(converted.backend_tokenizer.to_str())
    except Exception as e:  # transformers raises many types for a directory it cannot read
        raise UserError(f"{model_file}: not converted to a tokenizer ({one_line(e)})") from None


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
    return bert_pipeline(tokenizer, config.get("do_lower_case", True), config.get("strip_accents"), nfc=False)


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
