"""MPNet (`mpnet`, Song et al. 2020): BERT's post-LN encoder with RoBERTa's positions (the table starts
pad_token_id + 1 rows in) and no segments, and a relative attention bias: one learned value per head for each
bucket of relative distance, a table shared by every layer, added to every layer's scores (model/mpnet.py, the
`relative` attention bias). Its masked-LM head and sequence classifier are named as RoBERTa's; its WordPiece
tokenizer plays <s> </s> <pad> <mask> and [UNK]. The backbone of all-mpnet-base-v2, which sentence-transformers
runs with mean pooling and Normalize."""

from __future__ import annotations

from typing import Any

from ..config import COUNT
from ..errors import UserError
from .bert import BERT_KEYS, bert_style_config, bert_style_modules, bert_style_values
from .family import Family, ModelConfig

MPNET_SPECIALS = {"pad": "<pad>", "unk": "[UNK]", "cls": "<s>", "sep": "</s>", "mask": "<mask>"}

# MPNet's shape, whatever its sizes: what `transformers`' MPNet classes compute, so a model of this shape is saved as
# one (`Family.has_shape`), and one read back has it. Its buckets are fixed: MPNetEncoder buckets relative positions
# into 32 whatever relative_attention_num_buckets says (it sizes the table only).
MPNET_SHAPE = {
    "norm_style": "post",
    "position_embedding": "learned",
    "attention_bias": "relative",
    "feed_forward": "mlp",
    "type_vocab_size": 0,
}
BUCKETS = 32
PADDING_ROW = 1  # MPNetEmbeddings counts positions from padding_idx 1 + 1, whatever pad_token_id says


def _read(hf: dict[str, Any], source: str) -> dict[str, Any]:
    buckets = hf.get("relative_attention_num_buckets", BUCKETS)
    if buckets != BUCKETS:
        raise UserError(
            f"{source}: relative_attention_num_buckets {buckets}: MPNet buckets relative positions into {BUCKETS}, "
            "which bertforge computes; a table of another size is not what transformers computes either"
        )
    if (hf.get("pad_token_id") or PADDING_ROW) != PADDING_ROW:
        raise UserError(
            f"{source}: pad_token_id {hf['pad_token_id']}: MPNet's position ids start after row {PADDING_ROW}, "
            "whatever the padding id; bertforge reads MPNet with its padding at 1"
        )
    hf = {**hf, "pad_token_id": PADDING_ROW}
    return bert_style_values(hf, source, "post", PADDING_ROW + 1) | MPNET_SHAPE


def _write(config: ModelConfig, architecture: str) -> dict[str, Any]:
    hf = bert_style_config(config, "mpnet", architecture, config.pad_token_id + 1)
    for key in ("type_vocab_size", "position_embedding_type"):
        del hf[key]  # MPNetConfig has neither: no segments, and positions as its own
    return hf | {"relative_attention_num_buckets": BUCKETS}


LAYER = "mpnet.encoder.layer.{i}"

MPNET = Family(
    shape=MPNET_SHAPE,
    model_type="mpnet",
    title="MPNet",
    tokenizer_class="MPNet",
    specials=MPNET_SPECIALS,
    body="mpnet",
    modules={
        **bert_style_modules("mpnet"),
        "bert.layers.{i}.attention.out": f"{LAYER}.attention.attn.o",
        "bert.layers.{i}.attention_norm": f"{LAYER}.attention.LayerNorm",
        "bert.sight.relative_attention_bias": "mpnet.encoder.relative_attention_bias",  # one table, every layer's
        "mlm_head.transform": "lm_head.dense",
        "mlm_head.norm": "lm_head.layer_norm",
    },
    # MPNetClassificationHead: dense + tanh on <s> (our pooler), then out_proj (our classifier), as RoBERTa's.
    head_modules={
        "BertForSequenceClassification": {"bert.pooler": "classifier.dense", "classifier": "classifier.out_proj"}
    },
    params={"mlm_head.bias": "lm_head.bias", "mlm_head.decoder_weight": "lm_head.decoder.weight"},
    decoder_bias="lm_head.decoder.bias",
    config_class="MPNetConfig",
    config_keys={**BERT_KEYS, "relative_attention_num_buckets": COUNT},
    read_config=_read,
    write_config=_write,
    qkv=LAYER.replace("mpnet", "{body}", 1) + ".attention.attn.{part}",
    qkv_parts=("q", "k", "v"),
    positions_after_pad=True,
    special_token_ids={"pad_token_id": "pad", "bos_token_id": "cls", "eos_token_id": "sep"},
)
