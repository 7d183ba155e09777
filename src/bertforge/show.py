"""`bertforge data show`: training instances exactly as the model receives them.

Learners see BERT's inputs; tests and reviewers check statistics from the outside.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer

from .data import IS_NEXT, MaskingCollator, MaskingConfig, PretrainingDataset
from .model import IGNORE_INDEX
from .tokenizer import load_tokenizer, special_ids


def make_dataset_and_collator(data_dir: str | Path, seq_len: int = 128, seed: int = 0, mask_prob: float = 0.15,
                              whole_word_mask: bool = False, split: str = "train"):
    tokenizer = load_tokenizer(data_dir)
    ids = special_ids(tokenizer)
    dataset = PretrainingDataset(data_dir, split, max_seq_len=seq_len, seed=seed, cls_id=ids.cls, sep_id=ids.sep)
    collator = MaskingCollator(tokenizer, MaskingConfig(mask_prob=mask_prob, whole_word_mask=whole_word_mask), seed=seed)
    return tokenizer, dataset, collator


def instance_records(data_dir: str | Path, n: int, seed: int = 0, seq_len: int = 128, mask_prob: float = 0.15,
                     whole_word_mask: bool = False, epoch: int = 0):
    """The first `n` instances of an epoch, masked, as plain dictionaries."""
    tokenizer, dataset, collator = make_dataset_and_collator(data_dir, seq_len, seed, mask_prob, whole_word_mask)
    dataset.set_epoch(epoch)
    for index in range(min(n, len(dataset))):
        instance = dataset[index]
        batch = collator([instance])
        length = len(instance.input_ids)
        yield {
            "index": index,
            "tokens": [tokenizer.id_to_token(int(i)) for i in instance.input_ids],
            "input_ids": batch["input_ids"][0, :length].tolist(),
            "token_type_ids": instance.token_type_ids.tolist(),
            "mlm_labels": batch["mlm_labels"][0, :length].tolist(),
            "nsp_label": instance.nsp_label,
            "a_doc": instance.a_doc,
            "b_doc": instance.b_doc,
        }, tokenizer


def show_instances(data_dir: str | Path, n: int = 5, seed: int = 0, as_jsonl: bool = False, **options) -> None:
    for record, tokenizer in instance_records(data_dir, n, seed, **options):
        if as_jsonl:
            print(json.dumps(record, ensure_ascii=False))
        else:
            print(render(record, tokenizer))


def render(record: dict, tokenizer: Tokenizer) -> str:
    """A: ... / B: ... with each predicted position as [shown→original]."""
    parts: dict[int, list[str]] = {0: [], 1: []}
    for token, shown, segment, label in zip(record["tokens"], record["input_ids"], record["token_type_ids"], record["mlm_labels"]):
        if token in ("[CLS]", "[SEP]"):
            continue
        text = token if label == IGNORE_INDEX else f"[{tokenizer.id_to_token(shown)}→{token}]"
        parts[segment].append(text)
    label = "IsNext" if record["nsp_label"] == IS_NEXT else "NotNext"
    predicted = sum(1 for x in record["mlm_labels"] if x != IGNORE_INDEX)
    return (f"#{record['index']}  {label} (A from document {record['a_doc']}, B from document {record['b_doc']}), "
            f"{len(record['tokens'])} tokens, {predicted} to predict\n"
            f"  A: {' '.join(parts[0])}\n  B: {' '.join(parts[1])}\n")
