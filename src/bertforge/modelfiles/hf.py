"""Hugging Face interop: our state dict and config to and from a `transformers` family's (families/).

A model read from a directory goes back out in its own family: BERT, RoBERTa, XLM-RoBERTa, CamemBERT,
DistilBERT, ELECTRA or ModernBERT. One bertforge builds is saved in the family of its shape:
  post-LN (BERT's)  -> `bert`: BertForPreTraining (BertForMaskedLM without a pair head), ...
  pre-LN            -> `roberta-prelayernorm`: the same architecture (LayerNorm on the embeddings,
                       before each sub-layer and at the top), RobertaPreLayerNormForMaskedLM, ...
  ModernBERT's      -> `modernbert`: ModernBertForMaskedLM, ModernBertForSequenceClassification, ...
Sinusoidal positions are a fixed table (bert.py keeps them in the learned slot, frozen), so
they travel as an ordinary position table. An ALiBi attention bias and a gated feed-forward
have no `transformers` class: such a directory keeps the family's weight names (a gated unit's
`intermediate.dense` is twice as tall: gate rows, then value rows), says model_type "bertforge"
(which plain `transformers` refuses rather than computing a different model) and maps each Auto
class to the family's class with the variant added, in the modeling_bertforge.py written beside
the weights (`from_pretrained(directory, trust_remote_code=True)`).

Pure mappings between dictionaries, with no file access (that is `directory.py`)
and no model classes: a model passes in its config and the architecture name it
declares. Structural differences handled here: we keep one fused QKV matrix
(most families split it), the vocabulary padding is cut, RoBERTa's position
table starts pad_token_id + 1 rows in, and the names `transformers` still
accepts from older files (LayerNorm `gamma` and `beta`) are read as theirs now.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import torch

from ..errors import UserError
from ..families import VARIANT_DEFAULTS, Family, family_computes, family_named, family_of
from ..model.config import ModelConfig

VOCAB_ROWS = ("bert.embeddings.token.weight", "mlm_head.decoder_weight")
POSITIONS = "bert.embeddings.position.weight"
HF_IGNORED = re.compile(r".*(position_ids|token_type_ids)$")  # buffers, not parameters
# What `transformers` renames in an older file before loading it (bert-base-uncased's LayerNorms, from TF 1).
LEGACY_NAMES = (("LayerNorm.gamma", "LayerNorm.weight"), ("LayerNorm.beta", "LayerNorm.bias"))
OWN_MODEL_TYPE = "bertforge"  # config.json's model_type for variants no `transformers` class expresses
REMOTE_CODE = "modeling_bertforge"  # the module (in assets/) a directory of such a variant carries for `transformers`


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


def their_name(name: str, config: ModelConfig, architecture: str) -> str:
    """Our parameter `name` as the family's file names it (for messages about a file's weights)."""
    family = family_of(config)
    qkv = QKV.match(name)
    if qkv and family.qkv is not None:
        return family.qkv_name(qkv.group(1), "{" + "/".join(family.qkv_parts) + "}", qkv.group(2))
    return family.params.get(name) or _rename(name, _rules(family.modules_for(architecture).items())) or name


def to_hf_state_dict(
    state_dict: dict[str, torch.Tensor], config: ModelConfig, architecture: str
) -> dict[str, torch.Tensor]:
    """Our parameter names -> the `transformers` names of `architecture` in the model's family; QKV split, padding
    cut."""
    family = family_of(config)
    modules = family.modules_for(architecture)
    rules = _rules(modules.items())
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state_dict.items():
        if name == "mlm_head.decoder_weight" and config.tie_word_embeddings:
            continue  # the same tensor as the word embeddings; `transformers` re-ties it
        if name in VOCAB_ROWS:
            tensor = tensor[: config.vocab_size]
        if name == POSITIONS:
            if "bert.embeddings.position" not in modules:
                continue  # ModernBERT has no table: its rotary positions' slot here is frozen at zero
            offset = family.position_offset(config)
            tensor = torch.cat([tensor.new_zeros(offset, tensor.shape[1]), tensor])  # rows before position 0 unused
        qkv = QKV.match(name)
        if qkv and family.qkv is not None:
            layer, param = qkv.groups()
            for part, chunk in zip(family.qkv_parts, tensor.chunk(3, dim=0)):
                out[family.qkv_name(layer, part, param)] = chunk
            continue
        hf_name = family.params.get(name) or _rename(name, rules)
        if hf_name is None:
            raise KeyError(f"no Hugging Face name for parameter {name}")
        out[hf_name] = tensor
        if name == "mlm_head.bias" and family.decoder_bias:
            out[family.decoder_bias] = tensor.clone()
    return {k: v.detach().contiguous().cpu() for k, v in out.items()}


def from_hf_state_dict(hf: dict[str, torch.Tensor], config: ModelConfig) -> tuple[dict[str, torch.Tensor], list[str]]:
    """`transformers` names -> ours. Returns the state dict and the keys it did not understand."""
    family = family_of(config)
    hf = {_current_name(k): v for k, v in hf.items()}
    if not any(k.startswith(family.body + ".") for k in hf) and any(k.startswith("embeddings.") for k in hf):
        hf = {f"{family.body}.{k}": v for k, v in hf.items()}  # a bare encoder's file (BertModel, DistilBertModel)
    # Every class's names at once: a directory holds one kind. A name of theirs may be several of ours
    # (ModernBERT's `head` is its masked LM's and each task's): each is given, and a model takes its own.
    pairs = [*family.modules.items(), *(pair for heads in family.head_modules.values() for pair in heads.items())]
    rules = _rules([(theirs, ours) for ours, theirs in pairs])
    hf_to_param = {v: k for k, v in family.params.items()}
    qkv = None
    if family.qkv is not None:
        template = re.escape(family.qkv.format(body=family.body, i="{i}", part="{part}"))
        parts = "|".join(map(re.escape, family.qkv_parts))
        template = template.replace(re.escape("{i}"), r"(\d+)").replace(re.escape("{part}"), f"({parts})")
        qkv = re.compile(template + r"\.(weight|bias)$")
    ours: dict[str, torch.Tensor] = {}
    unknown: list[str] = []
    qkv_parts: dict[tuple[str, str], dict[str, torch.Tensor]] = {}
    for name, tensor in hf.items():
        if HF_IGNORED.match(name) or name == family.decoder_bias:
            continue  # the decoder's bias is taken after the loop, so that it wins over the head's bias
        match = qkv.match(name) if qkv else None
        if match:
            layer, part, param = match.groups()
            qkv_parts.setdefault((layer, param), {})[part] = tensor
            continue
        our_names = [hf_to_param[name]] if name in hf_to_param else _renames(name, rules)
        if not our_names:
            unknown.append(name)
        for our_name in our_names:
            ours[our_name] = tensor
    if family.decoder_bias in hf:
        ours["mlm_head.bias"] = hf[family.decoder_bias]
    for (layer, param), parts in qkv_parts.items():
        if set(parts) != set(family.qkv_parts):
            raise UserError(f"layer {layer} lacks one of {'/'.join(family.qkv_parts)} {param}")
        ours[f"bert.layers.{layer}.attention.qkv.{param}"] = torch.cat([parts[p] for p in family.qkv_parts], dim=0)
    for name in VOCAB_ROWS:
        if name in ours:
            ours[name] = _pad_rows(ours[name], config)
    if POSITIONS in ours:
        offset = family.position_offset(config)
        ours[POSITIONS] = ours[POSITIONS][offset : offset + config.max_position_embeddings]
    elif "bert.embeddings.position" not in family.modules and "bert.embeddings.token.weight" in ours:
        ours[POSITIONS] = torch.zeros(config.max_position_embeddings, config.embedding_width)  # the rotary slot
    if config.tie_word_embeddings and "bert.embeddings.token.weight" in ours:
        ours["mlm_head.decoder_weight"] = ours["bert.embeddings.token.weight"]
    return ours, unknown


def _current_name(name: str) -> str:
    """A parameter's name as `transformers` reads it today: the old `gamma`/`beta` are `weight`/`bias`."""
    for old, new in LEGACY_NAMES:
        if name.endswith(old):
            return name[: -len(old)] + new
    return name


def _pad_rows(table: torch.Tensor, config: ModelConfig) -> torch.Tensor:
    if table.shape[0] != config.vocab_size:
        raise UserError(
            f"embedding table has {table.shape[0]} rows but config.json says vocab_size {config.vocab_size}"
        )
    padding = table.new_zeros(config.padded_vocab_size - config.vocab_size, table.shape[1])
    return torch.cat([table, padding], dim=0)


def transformers_support(config: ModelConfig) -> str:
    """How `transformers` computes this model: "native" (one of its classes: its own family's, or BERT,
    RoBERTa-PreLayerNorm or ModernBERT), "remote" (the BERT or RoBERTa class with our modeling_bertforge.py,
    trust_remote_code=True), or "none" (bertforge alone)."""
    if family_computes(config):
        return "native"
    if config.type_vocab_size == 0 or any(getattr(config, k) != v for k, v in VARIANT_DEFAULTS.items()):
        return "none"
    return "remote" if unloadable_parts(config) else "native"


def unloadable_parts(config: ModelConfig) -> list[tuple[str, str]]:
    """(what no `transformers` class computes, the flag that trains a model without it), for each such part."""
    if family_computes(config):
        return []
    parts = []
    if not config.bias_variant.native:
        parts.append((f"the {config.attention_bias} attention bias", "--attention-bias none"))
    if not config.feed_forward_kind.native:
        parts.append((f"the {config.feed_forward} feed-forward", "--feed-forward mlp"))
    if not config.position_scheme.native:
        parts.append((f"the {config.position_embedding} position encoding", "--position-embedding learned"))
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


def remote_classes(family: Family) -> dict[str, str]:
    """config.json's auto_map: each Auto class (and AutoConfig) -> REMOTE_CODE's "Bertforge" + the family's class."""
    return {
        auto: f"{REMOTE_CODE}.Bertforge{family_class}"
        for auto, family_class in {"AutoConfig": family.config_class, **family.auto_classes()}.items()
    }


def config_to_hf(
    config: ModelConfig,
    architecture: str,
    extra: dict[str, Any] | None = None,
    special_ids: dict[str, int] | None = None,
) -> dict[str, Any]:
    """config.json for `architecture` (one of ours) in the model's family, the ids of the special tokens the
    family's config names (`special_ids`: role -> id, from the tokenizer saved beside it); ours in "bertforge".

    A variant no `transformers` class computes gets a model_type it does not know, so that loading without our
    code fails loudly instead of quietly dropping the variant; the weights keep the family's names, and where our
    modeling_bertforge.py computes it, auto_map points there."""
    family = family_of(config)
    hf = family.write_config(config, family.hf_architecture(architecture))
    support = transformers_support(config)
    if support != "native":
        hf["architectures"] = [f"Bertforge{hf['architectures'][0]}"]
        hf["model_type"] = OWN_MODEL_TYPE
        if support == "remote":
            hf["auto_map"] = remote_classes(family)
    for key, role in family.special_token_ids.items():
        if special_ids and role in special_ids:
            hf[key] = special_ids[role]
    hf["bertforge"] = {
        "norm_style": config.norm_style,
        "position_embedding": config.position_embedding,
        "attention_bias": config.attention_bias,
        "feed_forward": config.feed_forward,
        "weight_layout": family.model_type,
        "pad_vocab_multiple": config.pad_vocab_multiple,
        **{k: getattr(config, k) for k in VARIANT_DEFAULTS},
        "global_attention_every": config.global_attention_every,
        "local_rope_theta": config.local_rope_theta,
    }
    hf.update(extra or {})
    return hf


def config_from_hf(hf: Any, source: str = "config.json") -> ModelConfig:
    """A ModelConfig from a family's config.json (families/); other families, missing keys and settings
    bertforge does not build: user errors naming the key. The model keeps its family, to be saved in it again
    (ModelConfig.family, where its shape would choose another); a bertforge variant (model_type "bertforge")
    takes the family of its shape."""
    if not isinstance(hf, dict):
        raise UserError(f"{source}: not a JSON object")
    model_type = hf.get("model_type", "bert")
    own = model_type == OWN_MODEL_TYPE
    if own:
        model_type = (hf.get("bertforge") or {}).get("weight_layout")
        if model_type is None:
            raise UserError(
                f"{source}: model_type {OWN_MODEL_TYPE!r} keeps its weights in a family's layout, which "
                "bertforge.weight_layout names; this file names none"
            )
    family = family_named(model_type, source)
    config = _model_config(source, **family.read_config(hf, source))
    # The family is recorded where the shape alone would not choose it (a RoBERTa is a post-LN BERT by its shape).
    return config if own or family_of(config) is family else dataclasses.replace(config, family=family.model_type)


def _model_config(source: str, **values: Any) -> ModelConfig:
    """A ModelConfig from a directory's values, whose types are checked first: a config.json is user input."""
    for name, value in values.items():
        expected = type(ModelConfig.__dataclass_fields__[name].default)
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            continue
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise UserError(f"{source}: {name} is {value!r}, not a{'n' if expected is int else ''} {expected.__name__}")
    try:
        return ModelConfig(**values)
    except UserError as e:  # a value out of range: name the file it came from
        raise UserError(f"{source}: {e}") from None
