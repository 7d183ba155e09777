"""What a `transformers` model family is to bertforge, all in one record (`Family`), each in the module of its
family: its names as people and `transformers` write them, its names for our modules and parameters, its config.json
keys both ways, its classes, its tokenizer's class and special tokens, and where their ids go. modelfiles/hf.py maps
state dicts and configs through whichever record a model's family names; the tokenizer loader, the model card and
the command line's help read the same record."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..config import Key
from ..errors import UserError
from .architectures import ARCHITECTURES

# model/config.py's ModelConfig, whose fields the families read by name. The families sit below the model layer
# (the tokenizer loader, below it too, reads their special tokens), so they name the type without importing it.
ModelConfig = Any

# The roles special tokens play, as tokenizer_config.json names them (`pad_token`, `cls_token`, ...).
ROLES = ("pad", "unk", "cls", "sep", "mask")


@dataclass(frozen=True)
class Family:
    """One `transformers` model family.

    Its class for each of ours (families/architectures.py) is `{prefix}{suffix}`, the prefix its config class's
    (BertConfig: BertForMaskedLM, BertModel, ...), except where `classes` names another (BERT saves a next-sentence
    head as BertForPreTraining, ELECTRA its discriminator as ElectraForPreTraining). `modules` maps our module
    paths ("{i}" a layer index) to theirs; `head_modules` overrides them for one of our
    classes (RoBERTa's sequence classifier names our pooler `classifier.dense`). `params` names our single
    parameters: the MLM bias and the untied decoder weight. `read_config` turns config.json into ModelConfig
    values; `write_config` a ModelConfig into config.json for one of the family's classes.
    """

    model_type: str
    title: str  # as people write it: "RoBERTa", "XLM-RoBERTa"
    tokenizer_class: str  # its `transformers` tokenizer class, less "Tokenizer" and "Fast": "Roberta"
    specials: dict[str, str]  # role (ROLES) -> the token its tokenizer class plays it with, where files name none
    body: str  # the encoder's prefix in the family's task classes: "bert", "roberta", "distilbert", "model", ...
    modules: dict[str, str]
    params: dict[str, str]
    config_class: str
    read_config: Callable[[dict[str, Any], str], dict[str, Any]]
    write_config: Callable[[ModelConfig, str], dict[str, Any]]
    decoder_bias: str | None = None  # a second copy of the MLM bias that `transformers` applies (BERT's decoder's)
    head_modules: dict[str, dict[str, str]] = field(default_factory=dict)
    classes: dict[str, str] = field(default_factory=dict)  # our architecture -> the family's, where not the rule's
    # The config.json keys `read_config` reads, each with what it must hold: checked (modelfiles/schema.py) before
    # any value is used. Keys every family shares (model_type, the special tokens' ids, labels) are the schema's.
    config_keys: dict[str, Key] = field(default_factory=dict)
    # Queries, keys and values as three matrices (ours are one): the name of each, or None where the family fuses
    # them as we do (ModernBERT's Wqkv).
    qkv: str | None = "{body}.encoder.layer.{i}.attention.self.{part}"
    qkv_parts: tuple[str, str, str] = ("query", "key", "value")
    positions_after_pad: bool = False  # RoBERTa's position table starts pad_token_id + 1 rows in
    base_pooler: bool = True  # the family's bare encoder class (BertModel, RobertaModel) has a pooler
    special_token_ids: dict[str, str] = field(default_factory=lambda: {"pad_token_id": "pad"})  # key -> role
    # The family's classes that tell how a model saved as one was pre-trained (modelfiles/directory.py, `ModelFiles`):
    # BertForPreTraining had a next-sentence head, ElectraForPreTraining is a discriminator. Any other: MLM alone.
    pretraining_classes: dict[str, dict[str, str]] = field(default_factory=dict)
    # The settings of the computation its own classes hold, whatever the sizes (ModernBERT's, DeBERTa's, ...): a
    # model bertforge builds with them is saved in this family, and one read from it has them. Empty for a family
    # whose computation is BERT's (RoBERTa, ELECTRA, ...), which only a model read from it is saved in.
    shape: dict[str, Any] = field(default_factory=dict)
    # The activation its masked-LM head applies whatever hidden_act says (RobertaLMHead's and ELECTRA's generator's
    # gelu); None: hidden_act's, as BERT's own head. A model whose hidden_act differs is refused, read or built.
    head_activation: str | None = None

    def has_shape(self, config: ModelConfig) -> bool:
        """Whether the family's own classes compute `config`'s model: it has the family's shape."""
        return bool(self.shape) and all(getattr(config, name) == value for name, value in self.shape.items())

    def position_offset(self, config: ModelConfig) -> int:
        """Rows of their position table before our position 0."""
        return config.pad_token_id + 1 if self.positions_after_pad else 0

    def qkv_name(self, layer: str, part: str, param: str) -> str:
        return self.qkv.format(body=self.body, i=layer, part=part) + f".{param}"

    def modules_for(self, architecture: str) -> dict[str, str]:
        """Our module paths -> theirs in the family's class for `architecture`."""
        return {**self.modules, **self.head_modules.get(architecture, {})}

    @property
    def class_prefix(self) -> str:
        """What the family's class names start with: its config class's, "Bert" of BertConfig."""
        return self.config_class.removesuffix("Config")

    def hf_architecture(self, architecture: str) -> str:
        """The family's class for our `architecture` (a registered one: families/architectures.py)."""
        if architecture not in ARCHITECTURES:
            raise UserError(f"a {self.model_type} model cannot be saved as {architecture}")
        return self.classes.get(architecture) or self.class_prefix + ARCHITECTURES.get(architecture).suffix

    def auto_classes(self) -> dict[str, str]:
        """Auto class -> the family's class it loads (config.json's auto_map, where our modelling code computes it)."""
        return {
            auto: self.hf_architecture(record.name)
            for record in ARCHITECTURES.records()
            for auto in record.auto_classes
        }


def require_keys(hf: dict[str, Any], keys: tuple[str, ...], source: str) -> None:
    missing = [k for k in keys if k not in hf]
    if missing:
        raise UserError(f"{source}: missing keys {', '.join(missing)}")
