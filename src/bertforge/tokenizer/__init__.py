"""Tokenizers (Hugging Face `tokenizers`), trained here or read from any directory a released model ships, saved in
the Hugging Face layout. A module a job:

    roles       the special tokens by their role ([CLS] is RoBERTa's <s>), carried by `LoadedTokenizer`
    training    WordPiece and word-level training, NFC, and the measured choice to strip accents or keep them
    bounds      a tokenizer file's rules bounded before any text meets them
    released    reading every released layout (tokenizer.json, vocab.txt, vocab.json + merges.txt, SentencePiece)
                and writing the Hugging Face files back
    encoding    word starts, tokens as text, fingerprints, a vocabulary grown by whole words

The names below are the package's face: every other layer imports them from here.
"""

from .encoding import count_words, fingerprint, highest_segment, token_text, with_words, word_pieces, word_starts
from .released import (
    TOKENIZER_FILES,
    has_tokenizer,
    hf_tokenizer_class,
    load_tokenizer,
    save_tokenizer,
)
from .roles import (
    MASK,
    ROLES,
    SPECIAL_TOKENS,
    LoadedTokenizer,
    SpecialIds,
    all_special_ids,
    copy_tokenizer,
    max_input_length,
    special_ids,
    special_tokens,
)
from .training import AccentChoice, accent_choice, nfc, strip_accents, train_tokenizer

__all__ = [
    "MASK",
    "ROLES",
    "SPECIAL_TOKENS",
    "TOKENIZER_FILES",
    "AccentChoice",
    "LoadedTokenizer",
    "SpecialIds",
    "accent_choice",
    "all_special_ids",
    "copy_tokenizer",
    "count_words",
    "fingerprint",
    "has_tokenizer",
    "highest_segment",
    "hf_tokenizer_class",
    "load_tokenizer",
    "max_input_length",
    "nfc",
    "save_tokenizer",
    "special_ids",
    "special_tokens",
    "strip_accents",
    "token_text",
    "train_tokenizer",
    "with_words",
    "word_pieces",
    "word_starts",
]
