"""What a model directory's config.json may hold: every key bertforge reads, of any family, its type and range, and
how keys relate, checked once when the file is read (directory.read_config), before any value is used. A family's
reader (families/) then maps the values; ModelConfig checks the architecture they make.

A key bertforge does not read is left alone: `transformers` writes many (`transformers_version`, `use_cache`, ...).
"""

from __future__ import annotations

from typing import Any

from ..config import FLAG, Key, check_keys, strings
from ..errors import UserError
from ..objectives import OBJECTIVES, PAIR_OBJECTIVES

# Types, and the ranges no setting of any model leaves; how large a model may be is ModelConfig's to say.
MAX_ID = 1 << 40
COUNT = Key((int,), "a positive whole number", lambda v: 1 <= v < MAX_ID)
INDEX = Key((int,), "a whole number, 0 or more", lambda v: 0 <= v < MAX_ID)
RATE = Key((int, float), "a number from 0 to 1", lambda v: 0 <= v <= 1)
POSITIVE = Key((int, float), "a positive number", lambda v: 0 < v < 1e30)
NAME = Key((str,), "a name", lambda v: 0 < len(v) <= 200)
TABLE = Key((dict,), "a JSON object")

CONFIG: dict[str, Key] = {
    "model_type": NAME,
    "architectures": Key((list,), "a list of class names", lambda v: 0 < len(v) <= 8 and strings(v)),
    **dict.fromkeys(
        (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "embedding_size",
            "dim",
            "n_layers",
            "n_heads",
            "hidden_dim",
            "num_labels",
            "local_attention",
            "global_attn_every_n_layers",
        ),
        COUNT,
    ),  # fmt: skip
    "type_vocab_size": INDEX,
    **dict.fromkeys(("pad_token_id", "bos_token_id", "eos_token_id", "cls_token_id", "sep_token_id"), INDEX),
    **dict.fromkeys(
        (
            "hidden_dropout_prob",
            "attention_probs_dropout_prob",
            "dropout",
            "attention_dropout",
            "mlp_dropout",
            "embedding_dropout",
            "classifier_dropout",
        ),
        RATE,
    ),  # fmt: skip
    **dict.fromkeys(
        ("layer_norm_eps", "norm_eps", "initializer_range", "global_rope_theta", "local_rope_theta"), POSITIVE
    ),
    **dict.fromkeys(
        (
            "hidden_act",
            "activation",
            "hidden_activation",
            "classifier_activation",
            "classifier_pooling",
            "position_embedding_type",
            "problem_type",
        ),
        NAME,
    ),  # fmt: skip
    **dict.fromkeys(
        (
            "tie_word_embeddings",
            "sinusoidal_pos_embds",
            "norm_bias",
            "attention_bias",
            "mlp_bias",
            "classifier_bias",
            "decoder_bias",
        ),
        FLAG,
    ),  # fmt: skip
    "layer_types": Key((list,), "a list of layer kinds", lambda v: len(v) <= 1024 and strings(v)),
    **dict.fromkeys(("rope_parameters", "rope_scaling", "id2label", "label2id", "auto_map"), TABLE),
    **dict.fromkeys(("bertforge", "bertforge_pretrain", "bertforge_finetune"), TABLE),
}

# What pre-training recorded (directory.PRETRAINING_KEY), as it is read back
PRETRAINING: dict[str, Key] = {
    "pair_objective": Key((str,), " or ".join(PAIR_OBJECTIVES), lambda v: v in PAIR_OBJECTIVES),
    "objective": Key((str,), " or ".join(OBJECTIVES), lambda v: v in OBJECTIVES),
    "generator": Key((str,), "a folder inside the model directory", lambda v: v.isidentifier()),
    "head_warmup": Key((int,), "a number of steps", lambda v: 0 <= v < MAX_ID),
    "document_mask": FLAG,
    **dict.fromkeys(("recipe", "init_from"), Key((str,), "a name or a path", lambda v: len(v) <= 4096)),
    "vocabulary_extended": TABLE,
}


def check_config(raw: Any, source: str) -> dict[str, Any]:
    """config.json's values checked against CONFIG and PRETRAINING, and against each other: the padding id inside
    the vocabulary (the other special tokens' ids are the tokenizer's to give: `transformers` writes ModernBERT's
    defaults, 50281, beside a 100-token test vocabulary). A key written as null is as if absent
    (`transformers` writes `"bos_token_id": null` for "none"): the family's default then holds."""
    if not isinstance(raw, dict):
        raise UserError(f"{source}: not a JSON object")
    raw = {key: value for key, value in raw.items() if value is not None}
    check_keys(raw, CONFIG, source)
    for table in ("bertforge_pretrain", "bertforge_finetune", "bertforge"):
        if table in raw:
            check_keys(raw[table], PRETRAINING if table == "bertforge_pretrain" else {}, f"{source}: {table}")
    vocab, pad = raw.get("vocab_size"), raw.get("pad_token_id")
    if vocab is not None and pad is not None and pad >= vocab:  # the embedding's padding row, RoBERTa's offset
        raise UserError(f"{source}: pad_token_id {pad:,} is not an id of the {vocab:,}-token vocabulary")
    return raw
