"""RoBERTa (`roberta`) and the families laid out as it is: XLM-RoBERTa (`xlm-roberta`), CamemBERT (`camembert`),
and RoBERTa-PreLayerNorm (`roberta-prelayernorm`, which bertforge's pre-LN BERTs are saved as).

BERT's encoder (post-LN, or pre-LN for the last) with RoBERTa's differences: the position table starts
pad_token_id + 1 rows in (position ids count from there), one segment row (`type_vocab_size` 1) or two for
bertforge's pre-LN BERTs, a masked-LM head named `lm_head`, and a sequence classifier of its own, dense + tanh on
<s> (our pooler) then `out_proj`. No next-sentence head: a model continued from one trains MLM alone."""

from __future__ import annotations

from typing import Any

from ..errors import UserError
from .bert import BERT_KEYS, bert_style_config, bert_style_modules, bert_style_values
from .family import Family, ModelConfig

ROBERTA_SPECIALS = {"pad": "<pad>", "unk": "<unk>", "cls": "<s>", "sep": "</s>", "mask": "<mask>"}


def _roberta(model_type: str, title: str, body: str, prefix: str, tokenizer: str, pre_ln: bool = False) -> Family:
    modules = {
        **bert_style_modules(body),
        "mlm_head.transform": "lm_head.dense",
        "mlm_head.norm": "lm_head.layer_norm",
    }
    if pre_ln:  # LayerNorm before each sub-layer, and one at the top
        modules |= {
            "bert.layers.{i}.attention_norm": f"{body}.encoder.layer.{{i}}.attention.LayerNorm",
            "bert.layers.{i}.ffn_norm": f"{body}.encoder.layer.{{i}}.intermediate.LayerNorm",
            "bert.final_norm": f"{body}.LayerNorm",
        }

    def read(hf: dict[str, Any], source: str) -> dict[str, Any]:
        offset = (hf.get("pad_token_id") or 0) + 1
        if hf.get("max_position_embeddings", 512) <= offset:
            raise UserError(
                f"{source}: max_position_embeddings {hf.get('max_position_embeddings', 512)} leaves no position: the "
                f"table starts at pad_token_id + 1 = {offset}"
            )
        return bert_style_values(hf, source, "pre" if pre_ln else "post", offset)

    def write(config: ModelConfig, architecture: str) -> dict[str, Any]:
        return bert_style_config(config, model_type, architecture, config.pad_token_id + 1)

    return Family(
        model_type=model_type,
        title=title,
        tokenizer_class=tokenizer,
        specials=ROBERTA_SPECIALS,
        body=body,
        modules=modules,
        # RobertaClassificationHead: dense + tanh on <s> (our pooler), then out_proj (our classifier).
        head_modules={
            "BertForSequenceClassification": {"bert.pooler": "classifier.dense", "classifier": "classifier.out_proj"}
        },
        params={"mlm_head.bias": "lm_head.bias", "mlm_head.decoder_weight": "lm_head.decoder.weight"},
        decoder_bias="lm_head.decoder.bias",
        config_class=f"{prefix}Config",
        config_keys=BERT_KEYS,
        read_config=read,
        write_config=write,
        positions_after_pad=True,
        special_token_ids={"pad_token_id": "pad", "bos_token_id": "cls", "eos_token_id": "sep"},
        head_activation="gelu",  # RobertaLMHead applies gelu itself
    )


ROBERTA = _roberta("roberta", "RoBERTa", "roberta", "Roberta", "Roberta")
XLM_ROBERTA = _roberta("xlm-roberta", "XLM-RoBERTa", "roberta", "XLMRoberta", "XLMRoberta")
CAMEMBERT = _roberta("camembert", "CamemBERT", "roberta", "Camembert", "Camembert")
ROBERTA_PRE_LN = _roberta(
    "roberta-prelayernorm",
    "RoBERTa-PreLayerNorm",
    "roberta_prelayernorm",
    "RobertaPreLayerNorm",
    "Roberta",
    pre_ln=True,
)
