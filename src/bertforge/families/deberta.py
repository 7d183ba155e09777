"""DeBERTa-v2 and v3 (`deberta-v2`, He et al. 2021, 2023): BERT's post-LN encoder whose attention is disentangled
(model/deberta.py, the `disentangled` position scheme): no positions added to the tokens; content-to-position and
position-to-content terms over log-bucketed relative positions, from one LayerNorm'd table the layers share,
projected by each layer's own query and key matrices. Its sequence and multiple-choice heads read [CLS] through a
dense layer and a GELU (`pooler`, our pooler), outside the encoder's prefix; its masked-LM head is named as BERT's
(`legacy`, transformers' default). Its tokenizer is SentencePiece's, with BERT's special tokens.

The settings every released DeBERTa-v3 (and v2 but the xlarge's convolution) uses are computed; any other value of
the keys that choose the computation is refused, naming the key.
"""

from __future__ import annotations

from typing import Any

from ..config import COUNT, FLAG, NAME, RATE, Key, strings
from ..errors import UserError
from .bert import BERT_KEYS, BERT_SPECIALS, bert_style_config, bert_style_modules, bert_style_values
from .family import Family, ModelConfig

# DeBERTa's shape, whatever its sizes: what `transformers`' DeBERTa-v2 classes compute with the settings below, so a
# model of this shape is saved as one (`Family.has_shape`), and one read back has it.
DEBERTA_SHAPE = {
    "norm_style": "post",
    "position_embedding": "disentangled",
    "attention_bias": "none",
    "feed_forward": "mlp",
}
BUCKETS = 256  # model/deberta.py's table: 256 a direction
ATTENTION_TERMS = ["p2c", "c2p"]
# The keys that choose what the attention computes: the value bertforge computes, and what else it would mean.
# A key absent from config.json means what `transformers` takes it to mean (ABSENT), not what bertforge computes.
COMPUTED = {
    "relative_attention": (True, "attention without relative positions"),
    "position_buckets": (BUCKETS, f"a table other than {BUCKETS} buckets a direction"),
    "share_att_key": (True, "separate projections of the position table"),
    "norm_rel_ebd": ("layer_norm", "a position table without its LayerNorm"),
    "position_biased_input": (False, "absolute positions added to the tokens"),
    "conv_kernel_size": (0, "a convolution beside the first layer (DeBERTa-v2-xlarge's)"),
    "legacy": (True, "the masked-LM head named as lm_predictions"),
}
# `transformers`' values for those keys where config.json has none: DebertaV2Config's defaults, and the modelling
# code's getattr defaults for the keys the config class does not declare (position_buckets, share_att_key, ...).
ABSENT = {
    "relative_attention": False,
    "position_buckets": -1,
    "share_att_key": False,
    "norm_rel_ebd": "none",
    "position_biased_input": True,
    "conv_kernel_size": 0,
    "legacy": True,
}
LAYER_NORM_EPS = 1e-7  # DebertaV2Config's default, where BertConfig's is 1e-12
POOLER_ACTIVATIONS = ("gelu", "relu", "tanh")  # pooler_hidden_act's values our pooler computes, by the same names


def _read(hf: dict[str, Any], source: str) -> dict[str, Any]:
    for key, (value, meaning) in COMPUTED.items():
        if key not in hf and ABSENT[key] != value:
            raise UserError(
                f"{source}: no {key}, which transformers then takes as {ABSENT[key]!r}: {meaning}, which bertforge "
                f"does not compute (DeBERTa-v3 writes {key}: {value!r})"
            )
        if hf.get(key, value) != value:
            raise UserError(f"{source}: {key} {hf[key]!r}: {meaning}, which bertforge does not compute")
    terms = hf.get("pos_att_type") or []
    terms = terms.split("|") if isinstance(terms, str) else terms
    if sorted(terms) != sorted(ATTENTION_TERMS):
        raise UserError(f"{source}: pos_att_type {terms!r}: bertforge computes both p2c and c2p (DeBERTa-v3's)")
    positions = hf.get("max_position_embeddings", 512)
    if hf.get("max_relative_positions", -1) not in (-1, positions):
        raise UserError(
            f"{source}: max_relative_positions {hf['max_relative_positions']} differs from max_position_embeddings "
            f"{positions}; bertforge buckets relative positions up to the latter"
        )
    hidden = hf.get("hidden_size")
    heads = hf.get("num_attention_heads") or 1
    for key, expected in (
        ("attention_head_size", (hidden or 0) // heads),
        ("embedding_size", hidden),
        ("pooler_hidden_size", hidden),
    ):
        if hf.get(key, expected) != expected:
            raise UserError(f"{source}: {key} {hf[key]} is not {expected}, the only size bertforge computes")
    activation = hf.get("pooler_hidden_act", "gelu")
    if activation not in POOLER_ACTIVATIONS:
        raise UserError(f"{source}: pooler_hidden_act {activation!r}; bertforge builds gelu, relu or tanh")
    defaults = {"type_vocab_size": 0, "layer_norm_eps": LAYER_NORM_EPS}  # DebertaV2Config's, not BertConfig's
    values = bert_style_values({**defaults, **hf}, source)
    return values | DEBERTA_SHAPE | {"pooler_activation": activation}


def _write(config: ModelConfig, architecture: str) -> dict[str, Any]:
    hf = bert_style_config(config, "deberta-v2", architecture)
    del hf["position_embedding_type"]
    return hf | {
        "relative_attention": True,
        "max_relative_positions": -1,
        "position_buckets": BUCKETS,
        "pos_att_type": ATTENTION_TERMS,
        "share_att_key": True,
        "norm_rel_ebd": "layer_norm",
        "position_biased_input": False,
        "pooler_hidden_size": config.hidden_size,
        "pooler_hidden_act": config.pooler_activation,
        "pooler_dropout": 0.0,
        "legacy": True,
    }


def _deberta_modules() -> dict[str, str]:
    modules = bert_style_modules("deberta")
    del modules["bert.embeddings.position"]  # no positions added to the tokens: the slot stays at zero
    return modules | {
        "bert.sight.relative": "deberta.encoder.rel_embeddings",  # the table every layer shares
        "bert.sight.norm": "deberta.encoder.LayerNorm",
        "bert.pooler": "pooler.dense",  # ContextPooler: dense + GELU on [CLS], beside the encoder
        "mlm_head.transform": "cls.predictions.transform.dense",
        "mlm_head.norm": "cls.predictions.transform.LayerNorm",
    }


DEBERTA = Family(
    shape=DEBERTA_SHAPE,
    model_type="deberta-v2",
    title="DeBERTa-v2",
    tokenizer_class="DebertaV2",
    specials=BERT_SPECIALS,
    body="deberta",
    modules=_deberta_modules(),
    params={"mlm_head.bias": "cls.predictions.bias", "mlm_head.decoder_weight": "cls.predictions.decoder.weight"},
    decoder_bias="cls.predictions.decoder.bias",
    config_class="DebertaV2Config",
    config_keys={
        **BERT_KEYS,
        **dict.fromkeys(("relative_attention", "share_att_key", "position_biased_input", "legacy"), FLAG),
        **dict.fromkeys(("position_buckets", "attention_head_size", "embedding_size", "pooler_hidden_size"), COUNT),
        "max_relative_positions": Key((int,), "a whole number (-1: the position table's length)", lambda v: v >= -1),
        "conv_kernel_size": Key((int,), "a whole number, 0 or more", lambda v: v >= 0),
        "pos_att_type": Key(
            (list, str), "p2c and c2p, as a list or 'p2c|c2p'", lambda v: len(v) <= 16 and strings(list(v))
        ),
        **dict.fromkeys(("norm_rel_ebd", "pooler_hidden_act"), NAME),
        "pooler_dropout": RATE,
    },
    read_config=_read,
    write_config=_write,
    qkv="{body}.encoder.layer.{i}.attention.self.{part}",
    qkv_parts=("query_proj", "key_proj", "value_proj"),
    base_pooler=False,
)
