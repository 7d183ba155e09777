"""A tokenizer checked against the model it is read with: the one check every loader and every verb that pairs a
tokenizer with a model asks (a directory's own files, a data directory's tokenizer and a starting model, a fine-tuned
model's), so that no id indexes past a table and no table is paired with another model's words.

    check_vocab(tokenizer, vocab_size, where)     its ids and segments against a model's tables
    model_tokenizer(files, model)                 a model directory's tokenizer, checked against its model
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from tokenizers import Tokenizer

from ..errors import UserError
from ..model.bert import BertForPreTraining
from ..tokenizer import LoadedTokenizer, has_tokenizer, highest_segment, load_tokenizer

if TYPE_CHECKING:
    from .directory import ModelFiles

VOCAB_PADDING = 128  # a table padded for speed has fewer than this many rows beyond its tokenizer's ids


def check_vocab(
    tokenizer: Tokenizer, vocab_size: int, where: str, type_vocab_size: int = 0, predicts: bool = False
) -> None:
    """A tokenizer with more ids than the model's table would index out of range, and one with far fewer was not
    trained with the model (its ids mean other words): both are refused, and so is one that gives a segment id past
    the model's segment table (of two rows or more: one row, RoBERTa's, and none take every id as the first). A
    table padded to a round size for speed (fewer than VOCAB_PADDING spare rows) is only said, and only where the
    model `predicts` tokens (pre-training, fill-mask, evaluate, a masked LM's export): those ids are never
    predicted, which a classifier's or an encoder's user has no reason to hear."""
    segment = highest_segment(tokenizer)
    if type_vocab_size > 1 and segment >= type_vocab_size:
        raise UserError(
            f"{where}: the tokenizer gives segment id {segment}, but the model has {type_vocab_size} segments; "
            "they were not made together"
        )
    size = tokenizer.get_vocab_size()
    if size > vocab_size or size <= vocab_size - VOCAB_PADDING:
        raise UserError(
            f"{where}: tokenizer has {size} tokens but the model's vocabulary has {vocab_size}; "
            "they were not trained together"
        )
    if size < vocab_size and predicts:
        warnings.warn(
            f"{where}: tokenizer has {size} tokens, the model's vocabulary {vocab_size}; "
            f"ids {size}..{vocab_size - 1} have no token and are never predicted",
            stacklevel=3,
        )


def model_tokenizer(files: ModelFiles, model, cls=BertForPreTraining) -> LoadedTokenizer:
    """The directory's tokenizer, checked against the `model` (of `cls`) it was read with: one with more ids than
    the model's table, or a segment past its segment table, is refused (`check_vocab`)."""
    if not has_tokenizer(files.directory):
        raise UserError(
            f"{files.directory}: no tokenizer (tokenizer.json, vocab.txt, ...); the model was saved without one: "
            "save it with its tokenizer, or copy the tokenizer's files into the directory"
        )
    tokenizer = load_tokenizer(files.directory, files.raw)
    predicts = cls is BertForPreTraining and "mlm_head" not in getattr(model, "untrained_heads", {"mlm_head"})
    check_vocab(tokenizer, model.config.vocab_size, str(files.directory), model.config.type_vocab_size, predicts)
    return tokenizer
