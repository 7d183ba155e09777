"""DistilBERT (`distilbert`, Sanh et al. 2019): BERT's post-LN encoder with half the layers, no segments and no
pooler; its own names for every module, and config keys of its own (dim, n_layers, hidden_dim, ...). Its sequence
and multiple-choice heads read [CLS] through `pre_classifier` and a ReLU (our pooler with relu)."""

from __future__ import annotations

from typing import Any

from ..config import COUNT, FLAG, NAME, POSITIVE, RATE
from ..errors import UserError
from .bert import BERT_SPECIALS
from .family import Family, ModelConfig, require_keys

LAYER = "distilbert.transformer.layer.{i}"


def _read(hf: dict[str, Any], source: str) -> dict[str, Any]:
    require_keys(hf, ("vocab_size", "dim", "n_layers", "n_heads", "hidden_dim"), source)
    if hf.get("activation", "gelu") not in ("gelu", "relu"):
        raise UserError(f"{source}: activation {hf['activation']!r}; bertforge builds gelu or relu")
    return dict(
        vocab_size=hf["vocab_size"],
        hidden_size=hf["dim"],
        num_layers=hf["n_layers"],
        num_heads=hf["n_heads"],
        intermediate_size=hf["hidden_dim"],
        max_position_embeddings=hf.get("max_position_embeddings", 512),
        type_vocab_size=0,
        hidden_dropout=hf.get("dropout", 0.1),
        attention_dropout=hf.get("attention_dropout", 0.1),
        layer_norm_eps=1e-12,  # DistilBERT's LayerNorms are built with it, whatever the config says
        hidden_act=hf.get("activation", "gelu"),
        # a fixed table in the learned slot, its values read from the weights as they are
        position_embedding="sinusoidal" if hf.get("sinusoidal_pos_embds") else "learned",
        tie_word_embeddings=hf.get("tie_word_embeddings", True),
        pad_token_id=hf.get("pad_token_id") or 0,
        initializer_range=hf.get("initializer_range", 0.02),
        pooler_activation="relu",
    )


def _write(config: ModelConfig, architecture: str) -> dict[str, Any]:
    return {
        "architectures": [architecture],
        "model_type": "distilbert",
        "vocab_size": config.vocab_size,
        "dim": config.hidden_size,
        "n_layers": config.num_layers,
        "n_heads": config.num_heads,
        "hidden_dim": config.intermediate_size,
        "activation": config.hidden_act,
        "dropout": config.hidden_dropout,
        "attention_dropout": config.attention_dropout,
        "max_position_embeddings": config.max_position_embeddings,
        "sinusoidal_pos_embds": config.position_embedding == "sinusoidal",
        "initializer_range": config.initializer_range,
        "pad_token_id": config.pad_token_id,
        "tie_word_embeddings": config.tie_word_embeddings,
    }


DISTILBERT = Family(
    model_type="distilbert",
    title="DistilBERT",
    tokenizer_class="DistilBert",
    specials=BERT_SPECIALS,
    body="distilbert",
    modules={
        "bert.embeddings.token": "distilbert.embeddings.word_embeddings",
        "bert.embeddings.position": "distilbert.embeddings.position_embeddings",
        "bert.embeddings.norm": "distilbert.embeddings.LayerNorm",
        "bert.layers.{i}.attention.out": f"{LAYER}.attention.out_lin",
        "bert.layers.{i}.attention_norm": f"{LAYER}.sa_layer_norm",
        "bert.layers.{i}.ffn.up": f"{LAYER}.ffn.lin1",
        "bert.layers.{i}.ffn.down": f"{LAYER}.ffn.lin2",
        "bert.layers.{i}.ffn_norm": f"{LAYER}.output_layer_norm",
        "bert.pooler": "pre_classifier",  # dense + ReLU on [CLS], for sequences and multiple choice
        "mlm_head.transform": "vocab_transform",
        "mlm_head.norm": "vocab_layer_norm",
        "classifier": "classifier",
        "qa_outputs": "qa_outputs",
        "rtd_head.dense": "discriminator_predictions.dense",
        "rtd_head.prediction": "discriminator_predictions.dense_prediction",
        "nsp_head": "cls.seq_relationship",
    },
    params={"mlm_head.bias": "vocab_projector.bias", "mlm_head.decoder_weight": "vocab_projector.weight"},
    config_class="DistilBertConfig",
    config_keys={
        **dict.fromkeys(("vocab_size", "dim", "n_layers", "n_heads", "hidden_dim", "max_position_embeddings"), COUNT),
        **dict.fromkeys(("dropout", "attention_dropout"), RATE),
        "initializer_range": POSITIVE,
        "activation": NAME,
        **dict.fromkeys(("sinusoidal_pos_embds", "tie_word_embeddings"), FLAG),
    },
    read_config=_read,
    write_config=_write,
    qkv=LAYER + ".attention.{part}",
    qkv_parts=("q_lin", "k_lin", "v_lin"),
    base_pooler=False,
)
