"""What the verbs ask of a tokenizer beside encoding: which ids start a word (whole-word masking), a token as text
to show, a fingerprint that data and models must agree on, and a vocabulary grown by whole words."""

from __future__ import annotations

import collections
import hashlib
import json
from collections.abc import Iterable

from tokenizers import Tokenizer

from ..errors import UserError
from .released import FAST_CLASS
from .roles import LoadedTokenizer, all_special_ids


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


def highest_segment(tokenizer) -> int:
    """The largest segment (token type) id the tokenizer's post-processor gives a pair's tokens: a template's
    `type_id`s (within a Sequence of processors too), 1 for BERT's processor, 0 for one that gives none."""
    post = tokenizer.post_processor
    if post is None:
        return 0
    found: list[int] = []

    def walk(spec) -> None:
        if isinstance(spec, dict):
            found.extend(v for k, v in spec.items() if k == "type_id" and isinstance(v, int))
            if spec.get("type") == "BertProcessing":
                found.append(1)
            for value in spec.values():
                walk(value)
        elif isinstance(spec, list):
            for value in spec:
                walk(value)

    walk(json.loads(post.__getstate__()))
    return max(found, default=0)
