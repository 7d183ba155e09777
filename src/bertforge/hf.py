"""Hugging Face interop: our state dict and config to and from the `transformers` BERT layout.

Pure mappings between dictionaries, with no file access (that is `modeldir.py`)
and no model classes: a model passes in its config and the architecture name
it declares. The only structural difference is the attention projection: we
keep one fused QKV matrix, `transformers` keeps query, key and value apart, so
they are split on save and joined on load.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from .config import ModelConfig
from .errors import UserError

# Our module path -> the `transformers` module path; "{i}" is a layer index.
MODULE_NAMES = {
    "bert.embeddings.token": "bert.embeddings.word_embeddings",
    "bert.embeddings.segment": "bert.embeddings.token_type_embeddings",
    "bert.embeddings.position": "bert.embeddings.position_embeddings",
    "bert.embeddings.norm": "bert.embeddings.LayerNorm",
    "bert.layers.{i}.attention.out": "bert.encoder.layer.{i}.attention.output.dense",
    "bert.layers.{i}.attention_norm": "bert.encoder.layer.{i}.attention.output.LayerNorm",
    "bert.layers.{i}.ffn.up": "bert.encoder.layer.{i}.intermediate.dense",
    "bert.layers.{i}.ffn.down": "bert.encoder.layer.{i}.output.dense",
    "bert.layers.{i}.ffn_norm": "bert.encoder.layer.{i}.output.LayerNorm",
    "bert.final_norm": "bertforge.final_norm",  # pre-LN only: `transformers` has no such module
    "bert.pooler": "bert.pooler.dense",
    "mlm_head.transform": "cls.predictions.transform.dense",
    "mlm_head.norm": "cls.predictions.transform.LayerNorm",
    "nsp_head": "cls.seq_relationship",
    "classifier": "classifier",
    "qa_outputs": "qa_outputs",
}
PARAM_NAMES = {"mlm_head.bias": "cls.predictions.bias", "mlm_head.decoder_weight": "cls.predictions.decoder.weight"}
QKV = re.compile(r"bert\.layers\.(\d+)\.attention\.qkv\.(weight|bias)")
HF_QKV = "bert.encoder.layer.{i}.attention.self.{part}.{param}"
VOCAB_ROWS = ("bert.embeddings.token.weight", "mlm_head.decoder_weight")
# The decoder's own bias is the one `transformers` applies; it equals cls.predictions.bias when tied.
HF_DECODER_BIAS = "cls.predictions.decoder.bias"
HF_IGNORED = re.compile(r".*position_ids$")  # buffers, not parameters

HEAD_PREFIXES = ("nsp_head.", "mlm_head.", "classifier.", "qa_outputs.", "bert.pooler.")
HF_REQUIRED_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")


def _pattern(template: str) -> re.Pattern:
    return re.compile(re.escape(template).replace(re.escape("{i}"), r"(\d+)") + r"\.(weight|bias)$")


_OURS_TO_HF = [(_pattern(ours), hf) for ours, hf in MODULE_NAMES.items()]
_HF_TO_OURS = [(_pattern(hf), ours) for ours, hf in MODULE_NAMES.items()]


def _rename(name: str, rules: list[tuple[re.Pattern, str]]) -> str | None:
    for pattern, template in rules:
        match = pattern.match(name)
        if match:
            *index, param = match.groups()
            return template.replace("{i}", index[0]) + "." + param if index else template + "." + param
    return None


def to_hf_state_dict(state_dict: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """Our parameter names -> `transformers` BertForPreTraining names, QKV split, vocab padding cut."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state_dict.items():
        if name == "mlm_head.decoder_weight" and config.tie_word_embeddings:
            continue  # the same tensor as the word embeddings; `transformers` re-ties it
        if name in VOCAB_ROWS:
            tensor = tensor[: config.vocab_size]
        qkv = QKV.match(name)
        if qkv:
            layer, param = qkv.groups()
            for part, chunk in zip(("query", "key", "value"), tensor.chunk(3, dim=0)):
                out[HF_QKV.format(i=layer, part=part, param=param)] = chunk
            continue
        hf_name = PARAM_NAMES.get(name) or _rename(name, _OURS_TO_HF)
        if hf_name is None:
            raise KeyError(f"no Hugging Face name for parameter {name}")
        out[hf_name] = tensor
        if name == "mlm_head.bias":
            out[HF_DECODER_BIAS] = tensor.clone()
    return {k: v.detach().contiguous().cpu() for k, v in out.items()}


def from_hf_state_dict(hf: dict[str, torch.Tensor], config: ModelConfig) -> tuple[dict[str, torch.Tensor], list[str]]:
    """`transformers` names -> ours. Returns the state dict and the HF keys it did not understand."""
    if not any(k.startswith("bert.") for k in hf) and any(k.startswith("embeddings.") for k in hf):
        hf = {"bert." + k: v for k, v in hf.items()}  # a bare BertModel directory
    ours: dict[str, torch.Tensor] = {}
    unknown: list[str] = []
    qkv_parts: dict[tuple[str, str], dict[str, torch.Tensor]] = {}
    hf_to_param = {v: k for k, v in PARAM_NAMES.items()}
    for name, tensor in hf.items():
        if HF_IGNORED.match(name):
            continue
        if name == HF_DECODER_BIAS:
            continue  # taken after the loop, so that it wins over cls.predictions.bias
        match = re.match(r"bert\.encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.(weight|bias)$", name)
        if match:
            layer, part, param = match.groups()
            qkv_parts.setdefault((layer, param), {})[part] = tensor
            continue
        our_name = hf_to_param.get(name) or _rename(name, _HF_TO_OURS)
        if our_name is None:
            unknown.append(name)
            continue
        ours[our_name] = tensor
    if HF_DECODER_BIAS in hf:
        ours["mlm_head.bias"] = hf[HF_DECODER_BIAS]
    for (layer, param), parts in qkv_parts.items():
        if set(parts) != {"query", "key", "value"}:
            raise UserError(f"layer {layer} lacks one of query/key/value {param}")
        ours[f"bert.layers.{layer}.attention.qkv.{param}"] = torch.cat(
            [parts["query"], parts["key"], parts["value"]], dim=0
        )
    for name in VOCAB_ROWS:
        if name in ours:
            ours[name] = _pad_rows(ours[name], config)
    if config.tie_word_embeddings and "bert.embeddings.token.weight" in ours:
        ours["mlm_head.decoder_weight"] = ours["bert.embeddings.token.weight"]
    return ours, unknown


def _pad_rows(table: torch.Tensor, config: ModelConfig) -> torch.Tensor:
    if table.shape[0] != config.vocab_size:
        raise UserError(
            f"embedding table has {table.shape[0]} rows but config.json says vocab_size {config.vocab_size}"
        )
    padding = table.new_zeros(config.padded_vocab_size - config.vocab_size, table.shape[1])
    return torch.cat([table, padding], dim=0)


def bert_can_express(config: ModelConfig) -> bool:
    """True when `transformers.BertModel` computes exactly what this config does."""
    return config.norm_style == "post" and config.position_embedding == "learned"


def config_to_hf(config: ModelConfig, architecture: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """BertConfig keys, plus our own under "bertforge".

    A variant `transformers` cannot express (pre-LN, sinusoidal positions)
    gets model_type "bertforge", so that `transformers` refuses it loudly
    instead of loading it silently wrong.
    """
    hf = {
        "architectures": [architecture],
        "model_type": "bert" if bert_can_express(config) else "bertforge",
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads,
        "intermediate_size": config.intermediate_size,
        "hidden_act": config.hidden_act,
        "hidden_dropout_prob": config.hidden_dropout,
        "attention_probs_dropout_prob": config.attention_dropout,
        "max_position_embeddings": config.max_position_embeddings,
        "type_vocab_size": config.type_vocab_size,
        "initializer_range": config.initializer_range,
        "layer_norm_eps": config.layer_norm_eps,
        "pad_token_id": config.pad_token_id,
        "position_embedding_type": "absolute",
        "tie_word_embeddings": config.tie_word_embeddings,
        "bertforge": {
            "norm_style": config.norm_style,
            "position_embedding": config.position_embedding,
            "pad_vocab_multiple": config.pad_vocab_multiple,
        },
    }
    hf.update(extra or {})
    return hf


def config_from_hf(hf: dict[str, Any], source: str = "config.json") -> ModelConfig:
    """A ModelConfig from BertConfig keys; unknown architectures and missing keys are user errors."""
    model_type = hf.get("model_type", "bert")
    if model_type not in ("bert", "bertforge"):
        raise UserError(f"{source}: model_type {model_type!r} is not a BERT model")
    missing = [k for k in HF_REQUIRED_KEYS if k not in hf]
    if missing:
        raise UserError(f"{source}: missing keys {', '.join(missing)}")
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise UserError(
            f"{source}: position_embedding_type {hf['position_embedding_type']!r} is not supported (only absolute)"
        )
    ours = hf.get("bertforge", {})
    return ModelConfig(
        vocab_size=hf["vocab_size"],
        hidden_size=hf["hidden_size"],
        num_layers=hf["num_hidden_layers"],
        num_heads=hf["num_attention_heads"],
        intermediate_size=hf["intermediate_size"],
        max_position_embeddings=hf.get("max_position_embeddings", 512),
        type_vocab_size=hf.get("type_vocab_size", 2),
        hidden_dropout=hf.get("hidden_dropout_prob", 0.1),
        attention_dropout=hf.get("attention_probs_dropout_prob", 0.1),
        layer_norm_eps=hf.get("layer_norm_eps", 1e-12),
        hidden_act=hf.get("hidden_act", "gelu"),
        norm_style=ours.get("norm_style", "post"),
        position_embedding=ours.get("position_embedding", "learned"),
        tie_word_embeddings=hf.get("tie_word_embeddings", True),
        pad_token_id=hf.get("pad_token_id") or 0,
        initializer_range=hf.get("initializer_range", 0.02),
        pad_vocab_multiple=ours.get("pad_vocab_multiple", 64),
    )
