"""`bertforge evaluate`: held-out MLM loss, accuracy and perplexity (and the pair head's accuracy) of a model.

The batches are built once, with a fixed masking seed and BERT's standard 15%
masking, so evaluations of different runs on the same data compare like with like.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import torch

from .data import MaskingCollator, MaskingConfig, fixed_batches, pretraining_dataset
from .datadir import read_meta
from .display import Record
from .errors import UserError
from .labels import IGNORE_INDEX
from .metrics import evaluate_batches
from .modeldir import load_model_and_tokenizer, pretraining_info
from .prepare import prepare
from .runtime import MixedPrecision, resolve_device, resolve_precision
from .tokenizer import fingerprint, save_tokenizer

EVAL_SEED = 1234


def evaluate_model(
    model_path: str | Path,
    data: list[str],
    batch_size: int = 32,
    seq_len: int = 128,
    max_batches: int = 50,
    device: str = "cpu",
    precision: str = "fp32",
    seed: int = EVAL_SEED,
    trust_pickle: bool = False,
    layout: str | None = None,
) -> dict:
    """Evaluate a model on a prepared data directory (its held-out split) or on raw text files.

    The instances are laid out for the model's own pair objective (sentence pairs
    for nsp/sop, full-length windows for none), or as `layout` says: one layout for
    every model makes the MLM accuracies of different recipes comparable.
    """
    directory, model, tokenizer = load_model_and_tokenizer(model_path, trust_pickle=trust_pickle)
    device = resolve_device(device)
    model.to(device)
    seq_len = min(seq_len, model.config.max_position_embeddings)
    pair_objective = layout or pretraining_info(directory).get("pair_objective", "nsp")
    with tempfile.TemporaryDirectory() as scratch:
        if len(data) == 1 and (Path(data[0]) / "meta.json").is_file():
            data_dir = Path(data[0])
            meta = read_meta(data_dir)
            if meta["tokenizer_fingerprint"] != fingerprint(tokenizer):
                raise UserError(f"{data_dir} was prepared with a different tokenizer than {directory}'s")
            split = "valid" if meta["splits"]["valid"]["documents"] else "train"
        else:
            save_tokenizer(tokenizer, scratch)
            data_dir = Path(scratch) / "data"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # one-document text is fine here
                prepare(data, scratch, data_dir, valid_fraction=0.0, progress=False)
            split = "train"
        dataset = pretraining_dataset(data_dir, split, seq_len, pair_objective, seed)
        if dataset.num_instances(0) == 0:
            raise UserError(f"{', '.join(data)}: too little text to build a single instance")
        collator = MaskingCollator(tokenizer, MaskingConfig.for_evaluation(seq_len), seed=seed)
        batches = fixed_batches(dataset, collator, batch_size, max_batches)
        result = evaluate_batches(
            model, batches, MixedPrecision(device, resolve_precision(precision, device)), pair_objective
        )
    result["unigram_baseline_acc"] = unigram_baseline(batches)
    result["pair_objective"] = pair_objective
    return Record(result)


def unigram_baseline(batches: list[dict]) -> float:
    """Accuracy of always predicting the most frequent token: what MLM accuracy must beat to mean anything."""
    labels = torch.cat([b["mlm_labels"][b["mlm_labels"] != IGNORE_INDEX] for b in batches])
    if labels.numel() == 0:
        return 0.0
    return float(torch.bincount(labels).max()) / labels.numel()
