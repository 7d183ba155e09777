"""ModernBERT (`modernbert`, Warner et al. 2024): pre-LN without the first layer's attention norm, rotary positions,
a gated feed-forward, no segments, optional biases and sliding-window layers, and task heads that transform
(dense, activation, LayerNorm) before each classifier. Its queries, keys and values are one matrix, as ours.

Its config keeps the special tokens' ids (cls, sep, bos, eos, pad): the released tokenizer has them at the end
of its vocabulary, and they are written from the tokenizer saved with the model."""

from __future__ import annotations

from typing import Any

from ..config import COUNT, FLAG, NAME, POSITIVE, RATE, TABLE, Key, strings
from ..errors import UserError
from .bert import BERT_SPECIALS
from .family import Family, ModelConfig, require_keys

# ModernBERT's shape (Warner et al. 2024), whatever its sizes, biases and windows: what `transformers`' own
# ModernBERT classes compute, so a model of this shape is saved as one (`Family.has_shape`) and one read back has it.
MODERNBERT_SHAPE = {
    "norm_style": "pre",
    "position_embedding": "rotary",
    "attention_bias": "none",
    "feed_forward": "glu",
    "type_vocab_size": 0,
    "first_attention_norm": False,
    "task_head": "transform",
}

# Our special tokens' ids ([PAD] [UNK] [CLS] [SEP] [MASK]): what a model saved without a tokenizer says.
CLS_ID, SEP_ID = 2, 3


def _write(config: ModelConfig, architecture: str) -> dict[str, Any]:
    """ModernBertConfig keys: both transformers 5's (layer_types, rope_parameters) and 4.x's
    (global_attn_every_n_layers, global_rope_theta, local_rope_theta), which each reads."""
    layer_types = [
        "full_attention" if config.is_global_layer(i) else "sliding_attention" for i in range(config.num_layers)
    ]
    return {
        "architectures": [architecture],
        "model_type": "modernbert",
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads,
        "intermediate_size": config.intermediate_size,
        "hidden_activation": config.hidden_act,
        "classifier_activation": config.hidden_act,
        "max_position_embeddings": config.max_position_embeddings,
        "initializer_range": config.initializer_range,
        "norm_eps": config.layer_norm_eps,
        "norm_bias": config.norm_bias,
        "attention_bias": config.linear_bias,
        "mlp_bias": config.linear_bias,
        "classifier_bias": config.linear_bias,
        "decoder_bias": True,
        "embedding_dropout": config.hidden_dropout,
        "mlp_dropout": config.hidden_dropout,
        "attention_dropout": config.attention_dropout,
        "classifier_dropout": config.hidden_dropout,
        "classifier_pooling": config.classifier_pooling,
        "pad_token_id": config.pad_token_id,
        "cls_token_id": CLS_ID,
        "bos_token_id": CLS_ID,
        "sep_token_id": SEP_ID,
        "eos_token_id": SEP_ID,
        "local_attention": config.local_attention or config.max_position_embeddings,
        "layer_types": layer_types,
        "global_attn_every_n_layers": config.global_attention_every if config.local_attention else 1,
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": config.rope_theta},
            "sliding_attention": {"rope_type": "default", "rope_theta": config.local_rope_theta},
        },
        "global_rope_theta": config.rope_theta,
        "local_rope_theta": config.local_rope_theta,
        "tie_word_embeddings": config.tie_word_embeddings,
        "sparse_prediction": False,
    }


def _read(hf: dict[str, Any], source: str) -> dict[str, Any]:
    """ModernBertConfig keys (transformers 5's or 4.x's) as a ModelConfig; what bertforge does not build (a
    layer pattern other than every Nth layer global, biases that differ between parts, rope scaling, an
    activation of its own for the heads) is refused, naming the key."""
    require_keys(
        hf, ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"), source
    )
    layers = hf["num_hidden_layers"]
    every = hf.get("global_attn_every_n_layers", 3)
    layer_types = hf.get("layer_types") or [
        "sliding_attention" if i % every else "full_attention" for i in range(layers)
    ]
    local = [i for i, kind in enumerate(layer_types) if kind == "sliding_attention"]
    if local:
        every = next(i for i in range(1, layers + 1) if i >= layers or layer_types[i] == "full_attention")
    if layer_types != ["sliding_attention" if local and i % every else "full_attention" for i in range(layers)]:
        raise UserError(f"{source}: layer_types {layer_types} is not every Nth layer global, which bertforge builds")
    biases = {key: hf.get(key, False) for key in ("attention_bias", "mlp_bias", "classifier_bias")}
    if len(set(biases.values())) > 1:
        raise UserError(f"{source}: {biases} differ; bertforge gives the three projections a bias or none")
    if not hf.get("decoder_bias", True):
        raise UserError(f"{source}: decoder_bias false; bertforge's masked-LM head has its bias")
    activation = hf.get("hidden_activation", "gelu")
    if activation not in ("gelu", "relu") or hf.get("classifier_activation", "gelu") != activation:
        raise UserError(
            f"{source}: hidden_activation {activation!r} and classifier_activation "
            f"{hf.get('classifier_activation', 'gelu')!r}; bertforge builds gelu or relu, the same for both"
        )
    rope = hf.get("rope_parameters") or {}
    full, sliding = rope.get("full_attention") or {}, rope.get("sliding_attention") or {}
    if any(part.get("rope_type", "default") != "default" for part in (full, sliding)) or hf.get("rope_scaling"):
        raise UserError(f"{source}: rope_parameters {rope}: bertforge turns positions by the default RoPE only")
    return dict(
        vocab_size=hf["vocab_size"],
        hidden_size=hf["hidden_size"],
        num_layers=layers,
        num_heads=hf["num_attention_heads"],
        intermediate_size=hf["intermediate_size"],
        max_position_embeddings=hf.get("max_position_embeddings", 8192),
        hidden_dropout=hf.get("mlp_dropout", 0.0),
        attention_dropout=hf.get("attention_dropout", 0.0),
        layer_norm_eps=hf.get("norm_eps", 1e-5),
        hidden_act=activation,
        **MODERNBERT_SHAPE,
        tie_word_embeddings=hf.get("tie_word_embeddings", True),
        pad_token_id=hf.get("pad_token_id") or 0,
        initializer_range=hf.get("initializer_range", 0.02),
        pad_vocab_multiple=hf.get("bertforge", {}).get("pad_vocab_multiple", 64),
        norm_bias=hf.get("norm_bias", False),
        linear_bias=biases["attention_bias"],
        rope_theta=full.get("rope_theta", hf.get("global_rope_theta", 160000.0)),
        local_rope_theta=sliding.get("rope_theta", hf.get("local_rope_theta", 10000.0)),
        local_attention=hf.get("local_attention", 128) if local else 0,
        global_attention_every=every if local else 1,
        classifier_pooling=hf.get("classifier_pooling", "cls"),
    )


MODERNBERT = Family(
    shape=MODERNBERT_SHAPE,
    model_type="modernbert",
    title="ModernBERT",
    tokenizer_class="PreTrained",  # PreTrainedTokenizerFast: its files name every special token
    specials=BERT_SPECIALS,
    body="model",
    modules={
        "bert.embeddings.token": "model.embeddings.tok_embeddings",
        "bert.embeddings.norm": "model.embeddings.norm",
        "bert.layers.{i}.attention.qkv": "model.layers.{i}.attn.Wqkv",  # [q; k; v], as ours
        "bert.layers.{i}.attention.out": "model.layers.{i}.attn.Wo",
        "bert.layers.{i}.attention_norm": "model.layers.{i}.attn_norm",  # none in layer 0
        "bert.layers.{i}.ffn.up": "model.layers.{i}.mlp.Wi",  # its "input" rows (activated), then "gate": ours
        "bert.layers.{i}.ffn.down": "model.layers.{i}.mlp.Wo",
        "bert.layers.{i}.ffn_norm": "model.layers.{i}.mlp_norm",
        "bert.final_norm": "model.final_norm",
        # One `head` serves its masked LM and each task: a directory holds one kind, and a model takes its own.
        "mlm_head.transform": "head.dense",
        "mlm_head.norm": "head.norm",
        "head.dense": "head.dense",
        "head.norm": "head.norm",
        "classifier": "classifier",
        "qa_outputs": "classifier",  # ModernBertForQuestionAnswering's two outputs: start and end
        "rtd_head.dense": "discriminator_predictions.dense",  # ELECTRA's; ModernBertModel skips them
        "rtd_head.prediction": "discriminator_predictions.dense_prediction",
    },
    params={"mlm_head.bias": "decoder.bias", "mlm_head.decoder_weight": "decoder.weight"},
    config_class="ModernBertConfig",
    config_keys={
        **dict.fromkeys(
            (
                "vocab_size",
                "hidden_size",
                "num_hidden_layers",
                "num_attention_heads",
                "intermediate_size",
                "max_position_embeddings",
                "local_attention",
                "global_attn_every_n_layers",
            ),
            COUNT,
        ),
        **dict.fromkeys(("attention_dropout", "mlp_dropout", "embedding_dropout", "classifier_dropout"), RATE),
        **dict.fromkeys(("norm_eps", "initializer_range", "global_rope_theta", "local_rope_theta"), POSITIVE),
        **dict.fromkeys(("hidden_activation", "classifier_activation", "classifier_pooling"), NAME),
        **dict.fromkeys(
            ("norm_bias", "attention_bias", "mlp_bias", "classifier_bias", "decoder_bias", "tie_word_embeddings"), FLAG
        ),
        "layer_types": Key((list,), "a list of layer kinds", lambda v: len(v) <= 1024 and strings(v)),
        **dict.fromkeys(("rope_parameters", "rope_scaling"), TABLE),
    },  # fmt: skip
    read_config=_read,
    write_config=_write,
    qkv=None,
    base_pooler=False,
    special_token_ids={
        "pad_token_id": "pad",
        "cls_token_id": "cls",
        "bos_token_id": "cls",
        "sep_token_id": "sep",
        "eos_token_id": "sep",
    },
)
