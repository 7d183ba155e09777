"""ELECTRA (`electra`, Clark et al. 2020): BERT's encoder, its embedding tables narrower than the hidden states in
the small models (`embedding_size`, projected up by `embeddings_project`), and no pooler. Two released halves:
the generator, a masked LM (ElectraForMaskedLM, its head from H down to E), and the discriminator, which judges
every token original or replaced (ElectraForPreTraining: our BertForReplacedTokenDetection). Their task heads
read [CLS] through a dense layer and a GELU (our pooler with gelu)."""

from __future__ import annotations

from typing import Any

from ..config import COUNT
from .bert import BERT_KEYS, BERT_SPECIALS, bert_style_config, bert_style_modules, bert_style_values
from .family import Family, ModelConfig


def _read(hf: dict[str, Any], source: str) -> dict[str, Any]:
    values = bert_style_values(hf, source)
    embedding = hf.get("embedding_size", values["hidden_size"])
    narrower = embedding if embedding != values["hidden_size"] else 0
    return values | {"embedding_size": narrower, "pooler_activation": "gelu"}


def _write(config: ModelConfig, architecture: str) -> dict[str, Any]:
    return bert_style_config(config, "electra", architecture) | {"embedding_size": config.embedding_width}


ELECTRA = Family(
    model_type="electra",
    title="ELECTRA",
    tokenizer_class="Electra",
    specials=BERT_SPECIALS,
    body="electra",
    modules={
        **bert_style_modules("electra"),
        "bert.embeddings.project": "electra.embeddings_project",
        "bert.pooler": "classifier.dense",
        "mlm_head.transform": "generator_predictions.dense",
        "mlm_head.norm": "generator_predictions.LayerNorm",
    },
    head_modules={
        "BertForSequenceClassification": {"classifier": "classifier.out_proj"},
        "BertForMultipleChoice": {"bert.pooler": "sequence_summary.summary"},
    },
    params={"mlm_head.bias": "generator_lm_head.bias", "mlm_head.decoder_weight": "generator_lm_head.weight"},
    classes={"BertForReplacedTokenDetection": "ElectraForPreTraining"},
    config_class="ElectraConfig",
    head_activation="gelu",  # ElectraGeneratorPredictions applies gelu whatever hidden_act says
    config_keys={**BERT_KEYS, "embedding_size": COUNT},
    pretraining_classes={"ElectraForPreTraining": {"objective": "electra", "pair_objective": "none"}},
    read_config=_read,
    write_config=_write,
    base_pooler=False,
)
