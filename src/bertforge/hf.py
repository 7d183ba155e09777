"""Hugging Face interop: our state dict and config to and from `transformers` layouts.

Two families cover every variant we train:
  post-LN (BERT's)  -> `bert`: BertForPreTraining, BertForSequenceClassification, ...
  pre-LN            -> `roberta-prelayernorm`: the same architecture (LayerNorm on the embeddings,
                       before each sub-layer and at the top), RobertaPreLayerNormForMaskedLM, ...
Sinusoidal positions are a fixed table (model.py keeps them in the learned slot, frozen), so
they travel as an ordinary position table. An ALiBi attention bias and a gated feed-forward
have no `transformers` class: such a directory keeps the family's weight names (a gated unit's
`intermediate.dense` is twice as tall: gate rows, then value rows), says model_type "bertforge"
(which plain `transformers` refuses rather than computing a different model) and maps each Auto
class to the family's class with the variant added, in the modeling_bertforge.py written beside
the weights (`from_pretrained(directory, trust_remote_code=True)`).

Pure mappings between dictionaries, with no file access (that is `modeldir.py`)
and no model classes: a model passes in its config and the architecture name it
declares. Structural differences handled here: we keep one fused QKV matrix
(`transformers` splits it), the vocabulary padding is cut, and RoBERTa's
position table starts pad_token_id + 1 rows in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch

from .config import ModelConfig
from .errors import UserError

HEAD_PREFIXES = ("nsp_head.", "mlm_head.", "rtd_head.", "classifier.", "qa_outputs.", "bert.pooler.")
HF_REQUIRED_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
VOCAB_ROWS = ("bert.embeddings.token.weight", "mlm_head.decoder_weight")
POSITIONS = "bert.embeddings.position.weight"
HF_IGNORED = re.compile(r".*(position_ids|token_type_ids)$")  # buffers, not parameters


@dataclass(frozen=True)
class Layout:
    """How one `transformers` family names our modules and parameters."""

    model_type: str
    body: str  # the encoder's prefix: "bert" or "roberta_prelayernorm"
    modules: dict[str, str]  # our module path -> theirs; "{i}" is a layer index
    classifier_modules: dict[str, str]  # overrides for a sequence classifier (RoBERTa's head has its own names)
    params: dict[str, str]  # single parameters: the MLM bias and the (untied) decoder weight
    decoder_bias: str  # the decoder's own bias, which `transformers` applies; it equals the MLM bias
    architectures: dict[str, str]  # our class's architecture name -> theirs
    config_class: str  # the family's config class
    auto_classes: dict[str, str]  # a `transformers` Auto class -> the family's class it builds

    def position_offset(self, config: ModelConfig) -> int:
        """Rows of their position table before our position 0 (RoBERTa counts from pad_token_id + 1)."""
        return config.pad_token_id + 1 if self.model_type == "roberta-prelayernorm" else 0

    def qkv(self, layer: str, part: str, param: str) -> str:
        return f"{self.body}.encoder.layer.{layer}.attention.self.{part}.{param}"


BERT = Layout(
    model_type="bert",
    body="bert",
    modules={
        "bert.embeddings.token": "bert.embeddings.word_embeddings",
        "bert.embeddings.segment": "bert.embeddings.token_type_embeddings",
        "bert.embeddings.position": "bert.embeddings.position_embeddings",
        "bert.embeddings.norm": "bert.embeddings.LayerNorm",
        "bert.layers.{i}.attention.out": "bert.encoder.layer.{i}.attention.output.dense",
        "bert.layers.{i}.attention_norm": "bert.encoder.layer.{i}.attention.output.LayerNorm",
        "bert.layers.{i}.ffn.up": "bert.encoder.layer.{i}.intermediate.dense",
        "bert.layers.{i}.ffn.down": "bert.encoder.layer.{i}.output.dense",
        "bert.layers.{i}.ffn_norm": "bert.encoder.layer.{i}.output.LayerNorm",
        "bert.pooler": "bert.pooler.dense",
        "mlm_head.transform": "cls.predictions.transform.dense",
        "mlm_head.norm": "cls.predictions.transform.LayerNorm",
        "nsp_head": "cls.seq_relationship",
        "classifier": "classifier",
        "qa_outputs": "qa_outputs",
        "rtd_head.dense": "discriminator_predictions.dense",  # ELECTRA's names; transformers' BertModel skips them
        "rtd_head.prediction": "discriminator_predictions.dense_prediction",
    },
    classifier_modules={},
    params={"mlm_head.bias": "cls.predictions.bias", "mlm_head.decoder_weight": "cls.predictions.decoder.weight"},
    decoder_bias="cls.predictions.decoder.bias",
    architectures={
        **{
            name: name
            for name in (
                "BertForPreTraining",
                "BertForSequenceClassification",
                "BertForTokenClassification",
                "BertForQuestionAnswering",
                "BertForMultipleChoice",
            )
        },
        # An ELECTRA discriminator loads in transformers as its encoder, the part fine-tuning keeps.
        "BertForReplacedTokenDetection": "BertModel",
        "BertForSentenceEmbedding": "BertModel",  # no head: the encoder, mean-pooled (1_Pooling/ says so)
    },
    config_class="BertConfig",
    auto_classes={
        "AutoModel": "BertModel",
        "AutoModelForPreTraining": "BertForPreTraining",
        "AutoModelForMaskedLM": "BertForMaskedLM",
        "AutoModelForSequenceClassification": "BertForSequenceClassification",
        "AutoModelForTokenClassification": "BertForTokenClassification",
        "AutoModelForQuestionAnswering": "BertForQuestionAnswering",
        "AutoModelForMultipleChoice": "BertForMultipleChoice",
    },
)

ROBERTA_PRE_LN = Layout(
    model_type="roberta-prelayernorm",
    body="roberta_prelayernorm",
    modules={
        "bert.embeddings.token": "roberta_prelayernorm.embeddings.word_embeddings",
        "bert.embeddings.segment": "roberta_prelayernorm.embeddings.token_type_embeddings",
        "bert.embeddings.position": "roberta_prelayernorm.embeddings.position_embeddings",
        "bert.embeddings.norm": "roberta_prelayernorm.embeddings.LayerNorm",
        "bert.layers.{i}.attention.out": "roberta_prelayernorm.encoder.layer.{i}.attention.output.dense",
        "bert.layers.{i}.attention_norm": "roberta_prelayernorm.encoder.layer.{i}.attention.LayerNorm",
        "bert.layers.{i}.ffn.up": "roberta_prelayernorm.encoder.layer.{i}.intermediate.dense",
        "bert.layers.{i}.ffn.down": "roberta_prelayernorm.encoder.layer.{i}.output.dense",
        "bert.layers.{i}.ffn_norm": "roberta_prelayernorm.encoder.layer.{i}.intermediate.LayerNorm",
        "bert.final_norm": "roberta_prelayernorm.LayerNorm",
        "bert.pooler": "roberta_prelayernorm.pooler.dense",  # MaskedLM has no pooler: kept for bertforge, ignored there
        "mlm_head.transform": "lm_head.dense",
        "mlm_head.norm": "lm_head.layer_norm",
        "nsp_head": "cls.seq_relationship",  # no RoBERTa class has one: kept for bertforge, ignored there
        "classifier": "classifier",
        "qa_outputs": "qa_outputs",
        "rtd_head.dense": "discriminator_predictions.dense",
        "rtd_head.prediction": "discriminator_predictions.dense_prediction",
    },
    # RobertaClassificationHead: dense + tanh on [CLS] (our pooler), then out_proj (our classifier).
    classifier_modules={"bert.pooler": "classifier.dense", "classifier": "classifier.out_proj"},
    params={"mlm_head.bias": "lm_head.bias", "mlm_head.decoder_weight": "lm_head.decoder.weight"},
    decoder_bias="lm_head.decoder.bias",
    architectures={
        "BertForPreTraining": "RobertaPreLayerNormForMaskedLM",
        "BertForSequenceClassification": "RobertaPreLayerNormForSequenceClassification",
        "BertForTokenClassification": "RobertaPreLayerNormForTokenClassification",
        "BertForQuestionAnswering": "RobertaPreLayerNormForQuestionAnswering",
        "BertForMultipleChoice": "RobertaPreLayerNormForMultipleChoice",  # unlike its classifier, on the pooler
        "BertForReplacedTokenDetection": "RobertaPreLayerNormModel",
        "BertForSentenceEmbedding": "RobertaPreLayerNormModel",
    },
    config_class="RobertaPreLayerNormConfig",
    auto_classes={
        "AutoModel": "RobertaPreLayerNormModel",
        "AutoModelForPreTraining": "RobertaPreLayerNormForMaskedLM",
        "AutoModelForMaskedLM": "RobertaPreLayerNormForMaskedLM",
        "AutoModelForSequenceClassification": "RobertaPreLayerNormForSequenceClassification",
        "AutoModelForTokenClassification": "RobertaPreLayerNormForTokenClassification",
        "AutoModelForQuestionAnswering": "RobertaPreLayerNormForQuestionAnswering",
        "AutoModelForMultipleChoice": "RobertaPreLayerNormForMultipleChoice",
    },
)
LAYOUTS = {layout.model_type: layout for layout in (BERT, ROBERTA_PRE_LN)}
OWN_MODEL_TYPE = "bertforge"  # config.json's model_type for variants no `transformers` class expresses
REMOTE_CODE = "modeling_bertforge"  # the module (in assets/) a directory of such a variant carries for `transformers`


def layout_for(config: ModelConfig) -> Layout:
    return ROBERTA_PRE_LN if config.norm_style == "pre" else BERT


def _pattern(template: str) -> re.Pattern:
    return re.compile(re.escape(template).replace(re.escape("{i}"), r"(\d+)") + r"\.(weight|bias)$")


def _rules(pairs) -> list[tuple[re.Pattern, str]]:
    return [(_pattern(source), target) for source, target in pairs]


def _rename(name: str, rules: list[tuple[re.Pattern, str]]) -> str | None:
    for pattern, template in rules:
        match = pattern.match(name)
        if match:
            *index, param = match.groups()
            return (template.replace("{i}", index[0]) if index else template) + "." + param
    return None


QKV = re.compile(r"bert\.layers\.(\d+)\.attention\.qkv\.(weight|bias)")


def to_hf_state_dict(
    state_dict: dict[str, torch.Tensor], config: ModelConfig, architecture: str
) -> dict[str, torch.Tensor]:
    """Our parameter names -> the `transformers` names of `architecture`'s family; QKV split, padding cut."""
    layout = layout_for(config)
    modules = {
        **layout.modules,
        **(layout.classifier_modules if architecture == "BertForSequenceClassification" else {}),
    }
    rules = _rules(modules.items())
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state_dict.items():
        if name == "mlm_head.decoder_weight" and config.tie_word_embeddings:
            continue  # the same tensor as the word embeddings; `transformers` re-ties it
        if name in VOCAB_ROWS:
            tensor = tensor[: config.vocab_size]
        if name == POSITIONS:
            offset = layout.position_offset(config)
            tensor = torch.cat([tensor.new_zeros(offset, tensor.shape[1]), tensor])  # rows before position 0 unused
        qkv = QKV.match(name)
        if qkv:
            layer, param = qkv.groups()
            for part, chunk in zip(("query", "key", "value"), tensor.chunk(3, dim=0)):
                out[layout.qkv(layer, part, param)] = chunk
            continue
        hf_name = layout.params.get(name) or _rename(name, rules)
        if hf_name is None:
            raise KeyError(f"no Hugging Face name for parameter {name}")
        out[hf_name] = tensor
        if name == "mlm_head.bias":
            out[layout.decoder_bias] = tensor.clone()
    return {k: v.detach().contiguous().cpu() for k, v in out.items()}


def from_hf_state_dict(hf: dict[str, torch.Tensor], config: ModelConfig) -> tuple[dict[str, torch.Tensor], list[str]]:
    """`transformers` names -> ours. Returns the state dict and the keys it did not understand."""
    layout = layout_for(config)
    if not any(k.startswith(layout.body + ".") for k in hf) and any(k.startswith("embeddings.") for k in hf):
        hf = {f"{layout.body}.{k}": v for k, v in hf.items()}  # a bare encoder directory (BertModel)
    # Both a classifier's names and the others': they never collide, and a directory holds one kind.
    rules = _rules([(theirs, ours) for ours, theirs in [*layout.modules.items(), *layout.classifier_modules.items()]])
    hf_to_param = {v: k for k, v in layout.params.items()}
    qkv = re.compile(
        re.escape(layout.body) + r"\.encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.(weight|bias)$"
    )
    ours: dict[str, torch.Tensor] = {}
    unknown: list[str] = []
    qkv_parts: dict[tuple[str, str], dict[str, torch.Tensor]] = {}
    for name, tensor in hf.items():
        if HF_IGNORED.match(name) or name == layout.decoder_bias:
            continue  # the decoder's bias is taken after the loop, so that it wins over the head's bias
        match = qkv.match(name)
        if match:
            layer, part, param = match.groups()
            qkv_parts.setdefault((layer, param), {})[part] = tensor
            continue
        our_name = hf_to_param.get(name) or _rename(name, rules)
        if our_name is None:
            unknown.append(name)
            continue
        ours[our_name] = tensor
    if layout.decoder_bias in hf:
        ours["mlm_head.bias"] = hf[layout.decoder_bias]
    for (layer, param), parts in qkv_parts.items():
        if set(parts) != {"query", "key", "value"}:
            raise UserError(f"layer {layer} lacks one of query/key/value {param}")
        ours[f"bert.layers.{layer}.attention.qkv.{param}"] = torch.cat(
            [parts["query"], parts["key"], parts["value"]], dim=0
        )
    for name in VOCAB_ROWS:
        if name in ours:
            ours[name] = _pad_rows(ours[name], config)
    if POSITIONS in ours:
        offset = layout.position_offset(config)
        ours[POSITIONS] = ours[POSITIONS][offset : offset + config.max_position_embeddings]
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


def unloadable_parts(config: ModelConfig) -> list[tuple[str, str]]:
    """(what no `transformers` class computes, the flag that trains a model without it), for each such part."""
    parts = []
    if config.attention_bias != "none":
        parts.append((f"the {config.attention_bias} attention bias", "--attention-bias none"))
    if config.feed_forward != "mlp":
        parts.append(("the gated feed-forward", "--feed-forward mlp"))
    if config.position_embedding == "rotary":
        parts.append(("the rotary position encoding", "--position-embedding learned"))
    return parts


def needs_remote_code(config: ModelConfig) -> bool:
    """Whether no `transformers` class computes this model, so that its directory carries REMOTE_CODE."""
    return bool(unloadable_parts(config))


def remote_code_note(config: ModelConfig) -> str | None:
    """What a user is told of a model directory that carries its own code, or None for one plain transformers
    loads."""
    parts = unloadable_parts(config)
    if not parts:
        return None
    names, flags = zip(*parts)
    return (
        f"note: {' and '.join(names)} {'have' if len(names) > 1 else 'has'} no transformers class: the model "
        "directory carries its own (modeling_bertforge.py), which transformers runs only with "
        f"trust_remote_code=True (train with {' '.join(flags)} for a model plain transformers loads)"
    )


def remote_classes(layout: Layout) -> dict[str, str]:
    """config.json's auto_map: each Auto class (and AutoConfig) -> REMOTE_CODE's "Bertforge" + the family's class."""
    return {
        auto: f"{REMOTE_CODE}.Bertforge{family_class}"
        for auto, family_class in {"AutoConfig": layout.config_class, **layout.auto_classes}.items()
    }


def config_to_hf(config: ModelConfig, architecture: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """config.json for `architecture`'s family (BertConfig or RobertaPreLayerNormConfig keys); ours in "bertforge"."""
    layout = layout_for(config)
    # A variant no `transformers` class computes gets a model_type it does not know, so that loading without our
    # code fails loudly instead of quietly dropping the variant; the weights keep the family's names.
    remote = needs_remote_code(config)
    family_architecture = layout.architectures[architecture]
    hf = {
        "architectures": [f"Bertforge{family_architecture}" if remote else family_architecture],
        "model_type": OWN_MODEL_TYPE if remote else layout.model_type,
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads,
        "intermediate_size": config.intermediate_size,
        "hidden_act": config.hidden_act,
        "hidden_dropout_prob": config.hidden_dropout,
        "attention_probs_dropout_prob": config.attention_dropout,
        "max_position_embeddings": config.max_position_embeddings + layout.position_offset(config),
        "type_vocab_size": config.type_vocab_size,
        "initializer_range": config.initializer_range,
        "layer_norm_eps": config.layer_norm_eps,
        "pad_token_id": config.pad_token_id,
        "position_embedding_type": "absolute",
        "tie_word_embeddings": config.tie_word_embeddings,
        "bertforge": {
            "norm_style": config.norm_style,
            "position_embedding": config.position_embedding,
            "attention_bias": config.attention_bias,
            "feed_forward": config.feed_forward,
            "weight_layout": layout.model_type,
            "pad_vocab_multiple": config.pad_vocab_multiple,
        },
    }
    if remote:
        hf["auto_map"] = remote_classes(layout)
    hf.update(extra or {})
    return hf


def config_from_hf(hf: dict[str, Any], source: str = "config.json") -> ModelConfig:
    """A ModelConfig from BertConfig or RobertaPreLayerNormConfig keys; other families, missing keys: user errors."""
    ours = hf.get("bertforge", {})
    model_type = hf.get("model_type", "bert")
    if model_type == OWN_MODEL_TYPE:
        model_type = ours.get("weight_layout")
    if model_type not in LAYOUTS:
        raise UserError(f"{source}: model_type {model_type!r} is not a BERT model (bert or roberta-prelayernorm)")
    missing = [k for k in HF_REQUIRED_KEYS if k not in hf]
    if missing:
        raise UserError(f"{source}: missing keys {', '.join(missing)}")
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise UserError(
            f"{source}: position_embedding_type {hf['position_embedding_type']!r} is not supported (only absolute)"
        )
    pad = hf.get("pad_token_id") or 0
    offset = pad + 1 if model_type == "roberta-prelayernorm" else 0
    return ModelConfig(
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
        norm_style="pre" if model_type == "roberta-prelayernorm" else "post",
        position_embedding=ours.get("position_embedding", "learned"),
        attention_bias=ours.get("attention_bias", "none"),
        feed_forward=ours.get("feed_forward", "mlp"),
        tie_word_embeddings=hf.get("tie_word_embeddings", True),
        pad_token_id=pad,
        initializer_range=hf.get("initializer_range", 0.02),
        pad_vocab_multiple=ours.get("pad_vocab_multiple", 64),
    )
