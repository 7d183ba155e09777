"""BERT (`bert`): post-LN, learned positions, two segments, a pooler on [CLS]; BertForPreTraining's masked-LM and
next-sentence heads. Also the config keys the families built like it share (RoBERTa, ELECTRA)."""

from __future__ import annotations

from typing import Any

from ..config import COUNT, FLAG, INDEX, NAME, POSITIVE, RATE
from ..errors import UserError
from .family import Family, ModelConfig, require_keys

# BERT's special tokens, which the tokenizers bertforge trains carry too ([PAD] id 0 in those).
BERT_SPECIALS = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}

REQUIRED_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
# BertConfig's keys that bert_style_values reads, with what each must hold (RoBERTa's and ELECTRA's too).
BERT_KEYS = {
    **dict.fromkeys((*REQUIRED_KEYS, "max_position_embeddings"), COUNT),
    "type_vocab_size": INDEX,
    **dict.fromkeys(("hidden_dropout_prob", "attention_probs_dropout_prob"), RATE),
    **dict.fromkeys(("layer_norm_eps", "initializer_range"), POSITIVE),
    **dict.fromkeys(("hidden_act", "position_embedding_type"), NAME),
    "tie_word_embeddings": FLAG,
}

# The settings bertforge records under config.json's "bertforge" key for a model of a BERT-built family that no
# `transformers` class computes (ALiBi, a gated feed-forward, rotary positions, ModernBERT's settings outside its
# shape), with the value each takes when not recorded: BERT's.
VARIANT_DEFAULTS = {
    "norm_bias": True,
    "linear_bias": True,
    "first_attention_norm": True,
    "rope_theta": 10000.0,
    "local_attention": 0,
    "task_head": "pooler",
    "classifier_pooling": "cls",
}


def bert_style_values(hf: dict[str, Any], source: str, norm_style: str = "post", offset: int = 0) -> dict[str, Any]:
    """ModelConfig values from BertConfig's keys, which RoBERTa's and ELECTRA's configs share; `offset` rows of
    the position table come before position 0 (RoBERTa's)."""
    require_keys(hf, REQUIRED_KEYS, source)
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise UserError(
            f"{source}: position_embedding_type {hf['position_embedding_type']!r} is not supported (only absolute)"
        )
    ours = hf.get("bertforge", {})
    return dict(
        vocab_size=hf["vocab_size"],
        hidden_size=hf["hidden_size"],
        num_layers=hf["num_hidden_layers"],
        num_heads=hf["num_attention_heads"],
        intermediate_size=hf["intermediate_size"],
        max_position_embeddings=hf.get("max_position_embeddings", 512) - offset,
        type_vocab_size=hf.get("type_vocab_size", 2),
        hidden_dropout=hf.get("hidden_dropout_prob", 0.1),
        attention_dropout=hf.get("attention_probs_dropout_prob", 0.1),
        layer_norm_eps=hf.get("layer_norm_eps", 1e-12),
        hidden_act=hf.get("hidden_act", "gelu"),
        norm_style=norm_style,
        position_embedding=ours.get("position_embedding", "learned"),
        attention_bias=ours.get("attention_bias", "none"),
        feed_forward=ours.get("feed_forward", "mlp"),
        tie_word_embeddings=hf.get("tie_word_embeddings", True),
        pad_token_id=hf.get("pad_token_id") or 0,
        initializer_range=hf.get("initializer_range", 0.02),
        pad_vocab_multiple=ours.get("pad_vocab_multiple", 64),
        **{k: ours.get(k, default) for k, default in VARIANT_DEFAULTS.items()},
        global_attention_every=ours.get("global_attention_every", 1),
        local_rope_theta=ours.get("local_rope_theta", 10000.0),
    )


def bert_style_config(config: ModelConfig, model_type: str, architecture: str, offset: int = 0) -> dict[str, Any]:
    """BertConfig's keys for `config`, which RoBERTa's and ELECTRA's configs share."""
    return {
        "architectures": [architecture],
        "model_type": model_type,
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads,
        "intermediate_size": config.intermediate_size,
        "hidden_act": config.hidden_act,
        "hidden_dropout_prob": config.hidden_dropout,
        "attention_probs_dropout_prob": config.attention_dropout,
        "max_position_embeddings": config.max_position_embeddings + offset,
        "type_vocab_size": config.type_vocab_size,
        "initializer_range": config.initializer_range,
        "layer_norm_eps": config.layer_norm_eps,
        "pad_token_id": config.pad_token_id,
        "position_embedding_type": "absolute",
        "tie_word_embeddings": config.tie_word_embeddings,
    }


# Our encoder's modules in BERT-built families, under the family's encoder prefix.
def bert_style_modules(body: str) -> dict[str, str]:
    return {
        "bert.embeddings.token": f"{body}.embeddings.word_embeddings",
        "bert.embeddings.segment": f"{body}.embeddings.token_type_embeddings",
        "bert.embeddings.position": f"{body}.embeddings.position_embeddings",
        "bert.embeddings.norm": f"{body}.embeddings.LayerNorm",
        "bert.layers.{i}.attention.out": f"{body}.encoder.layer.{{i}}.attention.output.dense",
        "bert.layers.{i}.attention_norm": f"{body}.encoder.layer.{{i}}.attention.output.LayerNorm",
        "bert.layers.{i}.ffn.up": f"{body}.encoder.layer.{{i}}.intermediate.dense",
        "bert.layers.{i}.ffn.down": f"{body}.encoder.layer.{{i}}.output.dense",
        "bert.layers.{i}.ffn_norm": f"{body}.encoder.layer.{{i}}.output.LayerNorm",
        "bert.pooler": f"{body}.pooler.dense",
        "classifier": "classifier",
        "qa_outputs": "qa_outputs",
        "head.dense": "head.dense",  # a task head that transforms first (ModernBERT's), in a bertforge-only variant
        "head.norm": "head.norm",
        "rtd_head.dense": "discriminator_predictions.dense",  # ELECTRA's names; transformers' BertModel skips them
        "rtd_head.prediction": "discriminator_predictions.dense_prediction",
        "nsp_head": "cls.seq_relationship",  # BertForPreTraining's; kept under this name where a class has none
    }


BERT = Family(
    model_type="bert",
    title="BERT",
    tokenizer_class="Bert",
    specials=BERT_SPECIALS,
    body="bert",
    modules={
        **bert_style_modules("bert"),
        "mlm_head.transform": "cls.predictions.transform.dense",
        "mlm_head.norm": "cls.predictions.transform.LayerNorm",
    },
    params={"mlm_head.bias": "cls.predictions.bias", "mlm_head.decoder_weight": "cls.predictions.decoder.weight"},
    decoder_bias="cls.predictions.decoder.bias",
    # BertForPreTraining keeps its next-sentence head (their class for ours of that name).
    classes={"BertForPreTraining": "BertForPreTraining"},
    config_class="BertConfig",
    config_keys=BERT_KEYS,
    pretraining_classes={"BertForPreTraining": {"pair_objective": "nsp"}},
    read_config=lambda hf, source: bert_style_values(hf, source),
    write_config=lambda config, architecture: bert_style_config(config, "bert", architecture),
)
