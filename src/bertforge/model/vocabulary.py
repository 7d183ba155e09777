"""A model's vocabulary grown by whole words: each new token's rows start as the mean of the pieces it replaces.

A new word's embedding at the mean of its old pieces' (and its output bias and, when untied, its decoder row at
theirs) starts it where the model already placed the word's parts, instead of at random (Hewitt 2021's
"initializing new word embeddings"), so continued pre-training refines it rather than learning it from nothing.
"""

from __future__ import annotations

import dataclasses

import torch

from .bert import BertForPreTraining


def with_new_tokens(model: BertForPreTraining, pieces: dict[int, list[int]]) -> BertForPreTraining:
    """`model` with a row for each new id in `pieces` (new id -> the ids of the pieces it replaces), its table grown
    where the ids run past it (a table padded past its tokenizer, as ModernBERT's, has rows to spare)."""
    config = model.config
    size = max(config.vocab_size, max(pieces) + 1)
    grown = BertForPreTraining(
        dataclasses.replace(config, vocab_size=size),
        pair_head=model.nsp_head is not None,
        pooler=model.bert.pooler is not None,
    )
    grown.untrained_heads = getattr(model, "untrained_heads", frozenset())  # a head it never had is not saved
    state = model.state_dict()
    with torch.no_grad():
        for name in ("bert.embeddings.token.weight", "mlm_head.decoder_weight", "mlm_head.bias"):
            if name not in state or (name == "mlm_head.decoder_weight" and config.tie_word_embeddings):
                continue
            old = state[name][: config.vocab_size]  # (V, E) or (V,)
            new = torch.zeros_like(grown.state_dict()[name])  # (V' padded, E) or (V',): padding rows stay zero
            new[: config.vocab_size] = old
            for token, parts in pieces.items():
                new[token] = old[parts].mean(0)
            state[name] = new
    if config.tie_word_embeddings:
        state["mlm_head.decoder_weight"] = state["bert.embeddings.token.weight"]
    grown.load_state_dict(state)
    return grown.eval()
