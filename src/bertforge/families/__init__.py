"""The `transformers` model families bertforge reads and writes, one module each, each one `Family` record:

    architectures.py  the classes a model is saved as: one record each (what it answers, its class suffix, Auto
                    class, pipeline, head modules, graph outputs, card line)
    family.py       what a record holds: names, weight names, config keys, classes, tokenizer, special tokens
    bert.py         BERT: BertForPreTraining, BertForMaskedLM, BertModel, ...; the keys BERT-built families share
    roberta.py      RoBERTa, XLM-RoBERTa, CamemBERT, and RoBERTa-PreLayerNorm (bertforge's pre-LN BERTs)
    distilbert.py   DistilBERT
    electra.py      ELECTRA: the generator (a masked LM) and the discriminator (replaced-token detection)
    modernbert.py   ModernBERT (bertforge's `budget` recipe)
    mpnet.py        MPNet: RoBERTa's positions, no segments, a relative attention bias shared by every layer
    deberta.py      DeBERTa-v2 and v3: disentangled attention over log-bucketed relative positions

A record is data and torch-free, so every layer reads the same one: the tokenizer loader its special tokens,
modelfiles/hf.py its weight names and config keys, the model card its names, the command line's help its titles.
A model read from a directory keeps its family (ModelConfig.family) and goes back out in it; a model bertforge
builds takes the family of its shape (`family_of`). Adding a family is its module and `FAMILIES.register(record)`.
"""

from __future__ import annotations

from typing import Any

from ..errors import UserError
from ..registry import Registry
from .architectures import ARCHITECTURES, Architecture
from .bert import BERT, BERT_SPECIALS, VARIANT_DEFAULTS
from .deberta import DEBERTA, DEBERTA_SHAPE
from .distilbert import DISTILBERT
from .electra import ELECTRA
from .family import ROLES, Family, ModelConfig
from .modernbert import MODERNBERT, MODERNBERT_SHAPE
from .mpnet import MPNET, MPNET_SHAPE
from .roberta import CAMEMBERT, ROBERTA, ROBERTA_PRE_LN, XLM_ROBERTA

FAMILIES: Registry[Family] = Registry("model family", Family, name_of=lambda family: family.model_type)
for built_in in (
    BERT, ROBERTA, XLM_ROBERTA, CAMEMBERT, ROBERTA_PRE_LN, DISTILBERT, ELECTRA, MODERNBERT, MPNET, DEBERTA
):  # fmt: skip
    FAMILIES.register(built_in)

__all__ = [
    "ARCHITECTURES",
    "Architecture",
    "BERT_SPECIALS",
    "DEBERTA_SHAPE",
    "FAMILIES",
    "MODERNBERT_SHAPE",
    "MPNET_SHAPE",
    "ROLES",
    "VARIANT_DEFAULTS",
    "Family",
    "encoder_has_pooler",
    "family_of",
    "family_computes",
    "family_named",
    "shaped_family",
    "titles",
    "tokenizer_specials",
]


def shaped_family(config: ModelConfig) -> Family | None:
    """The family whose own classes compute a model of this shape (`Family.shape`: ModernBERT's, MPNet's,
    DeBERTa's), the first registered; None for BERT's computation and its variants."""
    return next((family for family in FAMILIES.records() if family.has_shape(config)), None)


def family_of(config: ModelConfig) -> Family:
    """The family a model is saved in: its own, if it was read from one; else the family of its shape; else
    RoBERTa-PreLayerNorm for a pre-LN BERT, BERT."""
    if config.family:
        return family_named(config.family)
    return shaped_family(config) or (ROBERTA_PRE_LN if config.norm_style == "pre" else BERT)


def family_computes(config: ModelConfig) -> bool:
    """Whether the family's own `transformers` class computes the model, whatever its variant settings: one of a
    family's shape, or one read from a family other than the two bertforge's own BERTs are saved in (BERT's and
    RoBERTa-PreLayerNorm's, whose classes compute the paper's settings only)."""
    return shaped_family(config) is not None or family_of(config) not in (BERT, ROBERTA_PRE_LN)


def family_named(model_type: Any, source: str = "config.json") -> Family:
    if model_type not in FAMILIES:
        raise UserError(
            f"{source}: model_type {model_type!r} is not one bertforge reads; it reads {', '.join(sorted(FAMILIES))}"
        )
    return FAMILIES.get(model_type)


def encoder_has_pooler(config: ModelConfig) -> bool:
    """Whether the family's bare encoder class has a pooler (BertModel and RobertaModel do; ELECTRA's, DistilBERT's
    and ModernBERT's do not), so that a model saved as that class (a discriminator, a sentence encoder) has what
    its class loads, and no more."""
    return family_of(config).base_pooler and config.task_head != "transform"


def tokenizer_specials(tokenizer_class: Any, model_type: Any) -> dict[str, str]:
    """The special tokens `transformers` gives a tokenizer whose files name none (roberta-base has no
    tokenizer_config.json): those of the family whose tokenizer class tokenizer_config.json names
    ("RobertaTokenizerFast"), else of the family config.json's model type names, as AutoTokenizer picks the class;
    BERT's where neither is known."""
    if isinstance(tokenizer_class, str) and tokenizer_class:
        kind = tokenizer_class.removesuffix("Fast").removesuffix("Tokenizer")
        return next((f.specials for f in FAMILIES.records() if f.tokenizer_class == kind), BERT_SPECIALS)
    return FAMILIES.get(model_type).specials if model_type in FAMILIES else BERT_SPECIALS


def titles() -> str:
    """The families as people write them, for help and messages: "BERT, RoBERTa, ... or ModernBERT"."""
    names = [f.title for f in FAMILIES.records()]
    return ", ".join(names[:-1]) + " or " + names[-1]
