"""`bertforge data show`: training instances exactly as the model receives them.

Learners see BERT's inputs; tests check statistics from the outside.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer

from ..labels import IGNORE_INDEX, IS_NEXT
from ..objectives import PAIR_OBJECTIVES
from ..tokenizer import load_tokenizer, special_tokens
from .instances import pretraining_dataset
from .masking import MaskingCollator, MaskingConfig


def instance_records(
    data_dir: str | Path,
    n: int,
    seed: int = 0,
    seq_len: int = 128,
    mask_prob: float = 0.15,
    whole_word_mask: bool = False,
    epoch: int = 0,
    pair_objective: str = "nsp",
):
    """The first `n` instances of an epoch, masked, as plain dictionaries."""
    tokenizer = load_tokenizer(data_dir)
    dataset = pretraining_dataset(data_dir, "train", seq_len, pair_objective, seed, short_seq_prob=0.1)
    masking = MaskingConfig(mask_prob=mask_prob, max_predictions=seq_len, whole_word_mask=whole_word_mask)
    collator = MaskingCollator(tokenizer, masking, seed=seed)
    dataset.set_epoch(epoch)
    for index in range(min(n, len(dataset))):
        instance = dataset[index]
        batch = collator([instance])
        length = len(instance.input_ids)
        yield (
            {
                "index": index,
                "tokens": [tokenizer.id_to_token(int(i)) for i in instance.input_ids],
                "input_ids": batch["input_ids"][0, :length].tolist(),
                "token_type_ids": instance.token_type_ids.tolist(),
                "mlm_labels": batch["mlm_labels"][0, :length].tolist(),
                "nsp_label": instance.nsp_label,
                "pair_objective": pair_objective,
                "a_doc": instance.a_doc,
                "b_doc": instance.b_doc,
            },
            tokenizer,
        )


def show_instances(data_dir: str | Path, n: int = 5, seed: int = 0, as_jsonl: bool = False, **options) -> None:
    for record, tokenizer in instance_records(data_dir, n, seed, **options):
        if as_jsonl:
            print(json.dumps(record, ensure_ascii=False))
        else:
            print(render(record, tokenizer))


def render(record: dict, tokenizer: Tokenizer) -> str:
    """A: ... / B: ... with each predicted position as [shown→original]."""
    parts: dict[int, list[str]] = {0: [], 1: []}
    specials = special_tokens(tokenizer)
    for token, shown, segment, label in zip(
        record["tokens"], record["input_ids"], record["token_type_ids"], record["mlm_labels"]
    ):
        if token in (specials["cls"], specials["sep"]):  # [CLS], [SEP]; a RoBERTa's <s>, </s>
            continue
        text = token if label == IGNORE_INDEX else f"[{tokenizer.id_to_token(shown)}→{token}]"
        parts[segment].append(text)
    predicted = sum(1 for x in record["mlm_labels"] if x != IGNORE_INDEX)
    size = f"{len(record['tokens'])} tokens, {predicted} to predict"
    task = PAIR_OBJECTIVES.get(record["pair_objective"])
    if not task.head:
        return (
            f"#{record['index']}  packed window (documents {record['a_doc']} to {record['b_doc']}), {size}\n"
            f"  {' '.join(parts[0])}\n"
        )
    yes, no = task.labels
    label = yes if record["nsp_label"] == IS_NEXT else no
    return (
        f"#{record['index']}  {label} (A from document {record['a_doc']}, B from document {record['b_doc']}), {size}\n"
        f"  A: {' '.join(parts[0])}\n  B: {' '.join(parts[1])}\n"
    )
