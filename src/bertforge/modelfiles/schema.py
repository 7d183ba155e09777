"""What a model directory's config.json may hold, checked once when the file is read (directory.read_config), before
any value is used: the keys every family shares (model_type, the special tokens' ids, labels, bertforge's records)
here, and each family's own keys as its record types them (`Family.config_keys`). A family's reader then maps the
values; ModelConfig checks the architecture they make.

A key bertforge does not read is left alone: `transformers` writes many (`transformers_version`, `use_cache`, ...).
"""

from __future__ import annotations

from typing import Any

from ..config import COUNT, FLAG, INDEX, MAX_ID, NAME, TABLE, Key, check_keys, strings
from ..errors import UserError
from ..families import FAMILIES
from ..model.heads import MULTI_LABEL, REGRESSION, SINGLE_LABEL
from ..objectives import OBJECTIVES, PAIR_OBJECTIVES
from .hf import OWN_MODEL_TYPE

PROBLEM_TYPES = (SINGLE_LABEL, MULTI_LABEL, REGRESSION)  # a sequence classifier's, as `transformers` names them
CONFIG: dict[str, Key] = {
    "model_type": NAME,
    "architectures": Key((list,), "a list of class names", lambda v: 0 < len(v) <= 8 and strings(v)),
    "num_labels": COUNT,
    **dict.fromkeys(("pad_token_id", "bos_token_id", "eos_token_id", "cls_token_id", "sep_token_id"), INDEX),
    "problem_type": Key((str,), " or ".join(PROBLEM_TYPES), lambda v: v in PROBLEM_TYPES),
    **dict.fromkeys(("id2label", "label2id", "auto_map"), TABLE),
    **dict.fromkeys(("bertforge", "bertforge_pretrain", "bertforge_finetune"), TABLE),
}

# What pre-training recorded (directory.PRETRAINING_KEY), as it is read back
PRETRAINING: dict[str, Key] = {
    "pair_objective": Key((str,), " or ".join(PAIR_OBJECTIVES), lambda v: v in PAIR_OBJECTIVES),
    "objective": Key((str,), " or ".join(OBJECTIVES), lambda v: v in OBJECTIVES),
    "generator": Key((str,), "a folder inside the model directory", lambda v: v.isidentifier()),
    "head_warmup": Key((int,), "a number of steps", lambda v: 0 <= v < MAX_ID),
    "document_mask": FLAG,
    **dict.fromkeys(("recipe", "init_from"), Key((str,), "a name or a path", lambda v: len(v) <= 4096)),
    "vocabulary_extended": TABLE,
    "subcloned": TABLE,
}


def check_config(raw: Any, source: str) -> dict[str, Any]:
    """config.json's values checked against CONFIG and PRETRAINING, and against each other: the padding id inside
    the vocabulary (the other special tokens' ids are the tokenizer's to give: `transformers` writes ModernBERT's
    defaults, 50281, beside a 100-token test vocabulary). A key written as null is as if absent
    (`transformers` writes `"bos_token_id": null` for "none"): the family's default then holds."""
    if not isinstance(raw, dict):
        raise UserError(f"{source}: not a JSON object")
    raw = {key: value for key, value in raw.items() if value is not None}
    check_keys(raw, CONFIG, source)
    family = _family_of(raw)
    if family is not None:
        check_keys(raw, family.config_keys, source)
    for table in ("bertforge_pretrain", "bertforge_finetune", "bertforge"):
        if table in raw:
            check_keys(raw[table], PRETRAINING if table == "bertforge_pretrain" else {}, f"{source}: {table}")
    vocab, pad = raw.get("vocab_size"), raw.get("pad_token_id")
    if vocab is not None and pad is not None and pad >= vocab:  # the embedding's padding row, RoBERTa's offset
        raise UserError(f"{source}: pad_token_id {pad:,} is not an id of the {vocab:,}-token vocabulary")
    return raw


def _family_of(raw: dict[str, Any]):
    """The family whose keys a config.json holds, where it names one bertforge reads (else its reader refuses it):
    its model_type, or for a bertforge variant the layout its weights keep."""
    model_type = raw.get("model_type", "bert")
    if model_type == OWN_MODEL_TYPE:
        model_type = (raw.get("bertforge") or {}).get("weight_layout")
    return FAMILIES.get(model_type) if isinstance(model_type, str) and model_type in FAMILIES else None
