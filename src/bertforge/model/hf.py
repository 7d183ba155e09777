"""Hugging Face interop: our state dict and config to and from `transformers` layouts.

Three families cover the variants we train:
  post-LN (BERT's)  -> `bert`: BertForPreTraining, BertForSequenceClassification, ...
  pre-LN            -> `roberta-prelayernorm`: the same architecture (LayerNorm on the embeddings,
                       before each sub-layer and at the top), RobertaPreLayerNormForMaskedLM, ...
  ModernBERT's      -> `modernbert`: pre-LN without the first attention norm, rotary positions, a gated
                       feed-forward, no segments, optional biases and sliding windows, task heads that
                       transform first: ModernBertForMaskedLM, ModernBertForSequenceClassification, ...
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

from ..errors import UserError
from .config import MODERNBERT_SHAPE, ModelConfig

HEAD_PREFIXES = ("nsp_head.", "mlm_head.", "rtd_head.", "classifier.", "qa_outputs.", "head.", "bert.pooler.")
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
    fused_qkv: bool = False  # keeps queries, keys and values in one matrix, as we do (ModernBERT's Wqkv)

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
        "head.dense": "head.dense",  # a task head that transforms first (ModernBERT's), in a bertforge-only variant
        "head.norm": "head.norm",
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
        "head.dense": "head.dense",
        "head.norm": "head.norm",
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
MODERNBERT = Layout(
    model_type="modernbert",
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
    classifier_modules={},
    params={"mlm_head.bias": "decoder.bias", "mlm_head.decoder_weight": "decoder.weight"},
    decoder_bias="decoder.bias",
    architectures={
        "BertForPreTraining": "ModernBertForMaskedLM",
        "BertForSequenceClassification": "ModernBertForSequenceClassification",
        "BertForTokenClassification": "ModernBertForTokenClassification",
        "BertForQuestionAnswering": "ModernBertForQuestionAnswering",
        "BertForMultipleChoice": "ModernBertForMultipleChoice",
        "BertForReplacedTokenDetection": "ModernBertModel",
        "BertForSentenceEmbedding": "ModernBertModel",
    },
    config_class="ModernBertConfig",
    auto_classes={},
    fused_qkv=True,
)
LAYOUTS = {layout.model_type: layout for layout in (BERT, ROBERTA_PRE_LN, MODERNBERT)}
OWN_MODEL_TYPE = "bertforge"  # config.json's model_type for variants no `transformers` class expresses
REMOTE_CODE = "modeling_bertforge"  # the module (in assets/) a directory of such a variant carries for `transformers`


def is_modernbert(config: ModelConfig) -> bool:
    """Whether `transformers`' ModernBERT computes this model: its shape, whatever its sizes, biases and windows."""
    return all(getattr(config, name) == value for name, value in MODERNBERT_SHAPE.items())


def layout_for(config: ModelConfig) -> Layout:
    if is_modernbert(config):
        return MODERNBERT
    return ROBERTA_PRE_LN if config.norm_style == "pre" else BERT


def _pattern(template: str) -> re.Pattern:
    return re.compile(re.escape(template).replace(re.escape("{i}"), r"(\d+)") + r"\.(weight|bias)$")


def _rules(pairs) -> list[tuple[re.Pattern, str]]:
    return [(_pattern(source), target) for source, target in pairs]


def _renames(name: str, rules: list[tuple[re.Pattern, str]]) -> list[str]:
    """Every name the rules give `name`, in order."""
    names = []
    for pattern, template in rules:
        match = pattern.match(name)
        if match:
            *index, param = match.groups()
            names.append((template.replace("{i}", index[0]) if index else template) + "." + param)
    return names


def _rename(name: str, rules: list[tuple[re.Pattern, str]]) -> str | None:
    names = _renames(name, rules)
    return names[0] if names else None


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
            if layout.fused_qkv:
                continue  # ModernBERT has no table: its rotary positions' slot here is frozen at zero
            offset = layout.position_offset(config)
            tensor = torch.cat([tensor.new_zeros(offset, tensor.shape[1]), tensor])  # rows before position 0 unused
        qkv = QKV.match(name)
        if qkv and not layout.fused_qkv:
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
    # Both a classifier's names and the others': a directory holds one kind. A name of theirs may be several of
    # ours (ModernBERT's `head` is its masked LM's and each task's): each is given, and a model takes its own.
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
        our_names = [hf_to_param[name]] if name in hf_to_param else _renames(name, rules)
        if not our_names:
            unknown.append(name)
        for our_name in our_names:
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
    elif layout.fused_qkv and "bert.embeddings.token.weight" in ours:  # ModernBERT: the rotary slot, at zero
        ours[POSITIONS] = torch.zeros(config.max_position_embeddings, config.hidden_size)
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


# What our modeling_bertforge.py adds to the BERT and RoBERTa families is ALiBi, a gated feed-forward and rotary
# positions; with any of these fields away from its default (ModernBERT's settings outside ModernBERT's shape) no
# code of transformers' or ours computes the model: its directory is bertforge's alone, and transformers refuses it.
FAMILY_DEFAULTS = {
    "norm_bias": True,
    "linear_bias": True,
    "first_attention_norm": True,
    "rope_theta": 10000.0,
    "local_attention": 0,
    "task_head": "pooler",
    "classifier_pooling": "cls",
}


def transformers_support(config: ModelConfig) -> str:
    """How `transformers` computes this model: "native" (one of its classes: BERT, RoBERTa-PreLayerNorm or
    ModernBERT), "remote" (the BERT or RoBERTa class with our modeling_bertforge.py, trust_remote_code=True), or
    "none" (bertforge alone)."""
    if is_modernbert(config):
        return "native"
    if config.type_vocab_size == 0 or any(getattr(config, k) != v for k, v in FAMILY_DEFAULTS.items()):
        return "none"
    return "remote" if unloadable_parts(config) else "native"


def unloadable_parts(config: ModelConfig) -> list[tuple[str, str]]:
    """(what no `transformers` class computes, the flag that trains a model without it), for each such part."""
    if is_modernbert(config):
        return []
    parts = []
    if config.attention_bias != "none":
        parts.append((f"the {config.attention_bias} attention bias", "--attention-bias none"))
    if config.feed_forward != "mlp":
        parts.append(("the gated feed-forward", "--feed-forward mlp"))
    if config.position_embedding == "rotary":
        parts.append(("the rotary position encoding", "--position-embedding learned"))
    return parts


def needs_remote_code(config: ModelConfig) -> bool:
    """Whether the directory carries REMOTE_CODE for `transformers` to compute the model with."""
    return transformers_support(config) == "remote"


def remote_code_note(config: ModelConfig) -> str | None:
    """What a user is told of a model directory that plain transformers does not load, or None for one it does."""
    support = transformers_support(config)
    if support == "none":
        return (
            "note: this combination of settings is neither BERT's, RoBERTa's nor ModernBERT's (--recipe budget is "
            "ModernBERT's): transformers refuses the model directory, and bertforge reads it"
        )
    parts = unloadable_parts(config)
    if support == "native" or not parts:
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
    """config.json for `architecture`'s family (BertConfig, RobertaPreLayerNormConfig or ModernBertConfig keys);
    ours in "bertforge"."""
    layout = layout_for(config)
    ours = {
        "norm_style": config.norm_style,
        "position_embedding": config.position_embedding,
        "attention_bias": config.attention_bias,
        "feed_forward": config.feed_forward,
        "weight_layout": layout.model_type,
        "pad_vocab_multiple": config.pad_vocab_multiple,
        **{k: getattr(config, k) for k in FAMILY_DEFAULTS},
        "global_attention_every": config.global_attention_every,
        "local_rope_theta": config.local_rope_theta,
    }
    if layout is MODERNBERT:
        hf = _modernbert_config(config, layout.architectures[architecture])
    else:
        hf = _bert_family_config(config, layout, architecture)
    hf["bertforge"] = ours
    hf.update(extra or {})
    return hf


def _bert_family_config(config: ModelConfig, layout: Layout, architecture: str) -> dict[str, Any]:
    """BertConfig or RobertaPreLayerNormConfig keys. A variant no `transformers` class computes gets a model_type
    it does not know, so that loading without our code fails loudly instead of quietly dropping the variant; the
    weights keep the family's names, and where our modeling_bertforge.py computes it, auto_map points there."""
    support = transformers_support(config)
    family_architecture = layout.architectures[architecture]
    hf = {
        "architectures": [f"Bertforge{family_architecture}" if support != "native" else family_architecture],
        "model_type": OWN_MODEL_TYPE if support != "native" else layout.model_type,
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
    }
    if support == "remote":
        hf["auto_map"] = remote_classes(layout)
    return hf


# Our special tokens' ids ([PAD] [UNK] [CLS] [SEP] [MASK]), which ModernBertConfig keeps as its own fields.
CLS_ID, SEP_ID = 2, 3


def _modernbert_config(config: ModelConfig, architecture: str) -> dict[str, Any]:
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


def config_from_hf(hf: dict[str, Any], source: str = "config.json") -> ModelConfig:
    """A ModelConfig from BertConfig, RobertaPreLayerNormConfig or ModernBertConfig keys; other families, missing
    keys and settings bertforge does not build: user errors naming the key."""
    ours = hf.get("bertforge", {})
    model_type = hf.get("model_type", "bert")
    if model_type == OWN_MODEL_TYPE:
        model_type = ours.get("weight_layout")
    if model_type not in LAYOUTS:
        raise UserError(
            f"{source}: model_type {model_type!r} is not a BERT model (bert, roberta-prelayernorm or modernbert)"
        )
    if model_type == "modernbert":
        return _config_from_modernbert(hf, source)
    missing = [k for k in HF_REQUIRED_KEYS if k not in hf]
    if missing:
        raise UserError(f"{source}: missing keys {', '.join(missing)}")
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise UserError(
            f"{source}: position_embedding_type {hf['position_embedding_type']!r} is not supported (only absolute)"
        )
    pad = hf.get("pad_token_id") or 0
    offset = pad + 1 if model_type == "roberta-prelayernorm" else 0
    return _model_config(
        source,
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
        **{k: ours.get(k, default) for k, default in FAMILY_DEFAULTS.items()},
        global_attention_every=ours.get("global_attention_every", 1),
        local_rope_theta=ours.get("local_rope_theta", 10000.0),
    )


def _config_from_modernbert(hf: dict[str, Any], source: str) -> ModelConfig:
    """ModernBertConfig keys (transformers 5's or 4.x's) as a ModelConfig; what bertforge does not build (a
    layer pattern other than every Nth layer global, biases that differ between parts, rope scaling, an
    activation of its own for the heads) is refused, naming the key."""
    required = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
    missing = [k for k in required if k not in hf]
    if missing:
        raise UserError(f"{source}: missing keys {', '.join(missing)}")
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
    return _model_config(
        source,
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


def _model_config(source: str, **values: Any) -> ModelConfig:
    """A ModelConfig from a directory's values, whose types are checked first: a config.json is user input."""
    for name, value in values.items():
        expected = type(ModelConfig.__dataclass_fields__[name].default)
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            continue
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise UserError(f"{source}: {name} is {value!r}, not a{'n' if expected is int else ''} {expected.__name__}")
    return ModelConfig(**values)
