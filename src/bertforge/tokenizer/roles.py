"""The special tokens by their role, never by their text or id: BERT's in the tokenizers bertforge trains, a released
tokenizer's own ([CLS] is RoBERTa's <s>) in one read from a directory, which `LoadedTokenizer` carries with it."""

from __future__ import annotations

import json
from dataclasses import dataclass

from tokenizers import Tokenizer

from ..errors import UserError
from ..families import BERT_SPECIALS, ROLES

PAD, UNK, CLS, SEP, MASK = (BERT_SPECIALS[role] for role in ROLES)  # the tokenizers bertforge trains carry BERT's


SPECIAL_TOKENS = [PAD, UNK, CLS, SEP, MASK]  # [PAD] is id 0


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


def take_released_limits(tokenizer: Tokenizer) -> dict[str, dict]:
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
