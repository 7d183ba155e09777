"""Held-out evaluation: MLM loss, accuracy and perplexity, and NSP accuracy, on fixed masks.

The batches are built once, with a fixed masking seed, so evaluations during
a run (and across runs on the same data) compare like with like.
"""

from __future__ import annotations

import math
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch

from .data import MaskingCollator, MaskingConfig, PretrainingDataset, mix_seed
from .prepare import prepare, read_meta
from .errors import UserError
from .inference import load_model_and_tokenizer
from .model import BertForPreTraining
from .tokenizer import fingerprint, save_tokenizer, special_ids

EVAL_SEED = 1234


def fixed_eval_batches(dataset: PretrainingDataset, collator: MaskingCollator, batch_size: int, max_batches: int) -> list[dict]:
    """Up to `max_batches` batches from epoch 0, in a fixed shuffled order (not just the first documents)."""
    n = dataset.num_instances(0)
    order = np.random.default_rng(mix_seed(dataset.seed, 0, 4)).permutation(n)[: batch_size * max_batches]
    return [collator([dataset[(0, int(i))] for i in order[s : s + batch_size]]) for s in range(0, len(order), batch_size)]


@torch.no_grad()
def evaluate_batches(model: BertForPreTraining, batches: list[dict], device: str, precision: str = "fp32", nsp: bool = True) -> dict:
    from .train import autocast

    model.eval()
    mlm_sum = mlm_correct = masked = nsp_sum = nsp_correct = sequences = 0.0
    for batch in batches:
        batch = {k: v.to(device) for k, v in batch.items()}
        with autocast(device, precision):
            out = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], batch["mlm_labels"],
                        batch["nsp_labels"] if nsp else None)
        n = out.mlm_targets.numel()
        mlm_sum += float(out.mlm_loss) * n
        mlm_correct += float(out.mlm_correct())
        masked += n
        if nsp:
            nsp_sum += float(out.nsp_loss) * len(batch["input_ids"])
            nsp_correct += float((out.nsp_logits.argmax(-1) == batch["nsp_labels"]).sum())
            sequences += len(batch["input_ids"])
    mlm_loss = mlm_sum / max(masked, 1)
    result = {"mlm_loss": mlm_loss, "mlm_acc": mlm_correct / max(masked, 1), "perplexity": math.exp(min(mlm_loss, 50)),
              "masked_tokens": int(masked)}
    if nsp:
        result.update(nsp_loss=nsp_sum / max(sequences, 1), nsp_acc=nsp_correct / max(sequences, 1), loss=mlm_loss + nsp_sum / max(sequences, 1))
    return result


def evaluate_model(model_path: str | Path, data: list[str], batch_size: int = 32, seq_len: int = 128, max_batches: int = 50,
                   device: str = "cpu", seed: int = EVAL_SEED) -> dict:
    """Evaluate a model on a prepared data directory (its held-out split) or on raw text files."""
    directory, model, tokenizer = load_model_and_tokenizer(model_path)
    model.to(device)
    seq_len = min(seq_len, model.config.max_position_embeddings)
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
        ids = special_ids(tokenizer)
        dataset = PretrainingDataset(data_dir, split, seq_len, 0.0, True, seed, ids.cls, ids.sep)
        if dataset.num_instances(0) == 0:
            raise UserError(f"{', '.join(data)}: too little text to build a single sentence pair")
        collator = MaskingCollator(tokenizer, MaskingConfig(), seed=seed)
        batches = fixed_eval_batches(dataset, collator, batch_size, max_batches)
        result = evaluate_batches(model, batches, device)
    result["unigram_baseline_acc"] = unigram_baseline(tokenizer, batches)
    return result


def unigram_baseline(tokenizer, batches: list[dict]) -> float:
    """Accuracy of always predicting the most frequent token: what MLM accuracy must beat to mean anything."""
    labels = torch.cat([b["mlm_labels"][b["mlm_labels"] != -100] for b in batches])
    if labels.numel() == 0:
        return 0.0
    return float(torch.bincount(labels).max()) / labels.numel()
