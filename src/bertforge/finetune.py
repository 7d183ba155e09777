"""Fine-tuning for sequence and sentence-pair classification, and its metrics.

    bertforge finetune runs/mini --train train.tsv --dev dev.tsv --text-column sentence --label-column label --out sst2
    bertforge finetune runs/mini --train train.tsv --dev dev.tsv --text-column "#1 String" --pair-column "#2 String" \
        --label-column Quality --out mrpc

Single sentences are encoded as [CLS] text [SEP], pairs as [CLS] a [SEP] b [SEP]
with segment ids 0 and 1. The output directory is a Hugging Face
BertForSequenceClassification directory: `transformers.pipeline("text-classification")`
loads it as it is.
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer
from tqdm import tqdm

from .batching import Encoded, TextBatcher, length_buckets, shuffled_buckets
from .config import FinetuneConfig
from .errors import UserError
from .fileio import write_json
from .hf import config_from_hf
from .model import BertForSequenceClassification, set_dropout
from .modeldir import check_vocab, load_model, load_model_and_tokenizer, read_config, resolve_model_dir, save_model
from .optim import build_optimizer, lr_factor, set_lr, warmup_fraction
from .runtime import MixedPrecision, resolve_device, resolve_precision
from .textfiles import read_rows
from .tokenizer import load_tokenizer


@dataclass
class Example:
    text: str
    pair: str | None
    label: str


# ---------------------------------------------------------------- reading labelled files


def read_examples(
    path: str | Path, text_column: str, label_column: str, pair_column: str | None = None
) -> list[Example]:
    """Rows of a TSV, CSV or JSONL file. Numeric column names index a headerless table."""
    columns = [text_column, label_column] + ([pair_column] if pair_column else [])
    examples = [
        Example(str(row[text_column]), str(row[pair_column]) if pair_column else None, str(row[label_column]).strip())
        for _, row in read_rows(path, columns)
    ]
    if not examples:
        raise UserError(f"{path}: no examples (empty file)")
    return examples


def label_mapping(train: list[Example], dev: list[Example], dev_path: str) -> list[str]:
    """Labels sorted (numbers numerically), so the mapping is stable; dev may not add labels."""
    labels = sorted({e.label for e in train}, key=lambda x: (not _is_number(x), float(x) if _is_number(x) else 0.0, x))
    if len(labels) < 2:
        raise UserError(f"the training file has {len(labels)} distinct label(s); classification needs at least 2")
    unknown = sorted({e.label for e in dev} - set(labels))
    if unknown:
        raise UserError(f"{dev_path}: label {unknown[0]!r} does not occur in the training file")
    return labels


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def encode_examples(batcher: TextBatcher, examples: list[Example]) -> Encoded:
    """Single sentences, or pairs when any example has one (a missing second text is empty)."""
    pairs = None if all(e.pair is None for e in examples) else [e.pair or "" for e in examples]
    return batcher.encode([e.text for e in examples], pairs)


# ---------------------------------------------------------------- metrics


def classification_metrics(predictions: np.ndarray, labels: np.ndarray, num_labels: int) -> dict[str, float]:
    """Accuracy and macro-F1; Matthews correlation too for binary tasks."""
    result = {"accuracy": float((predictions == labels).mean())}
    f1s = []
    for c in range(num_labels):
        tp = float(((predictions == c) & (labels == c)).sum())
        fp = float(((predictions == c) & (labels != c)).sum())
        fn = float(((predictions != c) & (labels == c)).sum())
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    result["macro_f1"] = float(np.mean(f1s))
    if num_labels == 2:
        tp = float(((predictions == 1) & (labels == 1)).sum())
        tn = float(((predictions == 0) & (labels == 0)).sum())
        fp = float(((predictions == 1) & (labels == 0)).sum())
        fn = float(((predictions == 0) & (labels == 1)).sum())
        denominator = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
        result["mcc"] = (tp * tn - fp * fn) / denominator if denominator else 0.0
        result["f1"] = f1s[1]  # F1 of the positive class (label id 1), as GLUE reports it
    return result


@torch.no_grad()
def predict(
    model: BertForSequenceClassification,
    batcher: TextBatcher,
    encoded: Encoded,
    precision: MixedPrecision,
    batch_size: int = 64,
) -> np.ndarray:
    """Class probabilities (n, num_labels), in input order."""
    model.eval()
    out = np.zeros((len(encoded), model.num_labels), dtype=np.float32)
    for indices in length_buckets(encoded, batch_size):
        batch = {k: v.to(precision.device) for k, v in batcher.batch(encoded, indices).items()}
        with precision.autocast():
            logits, _ = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        out[indices] = logits.float().softmax(-1).cpu().numpy()
    return out


# ---------------------------------------------------------------- fine-tuning


def load_classifier(model_path: str | Path, num_labels: int, from_scratch: bool):
    """A classifier on top of a pre-trained encoder (its head new), or the same architecture freshly initialised."""
    directory = resolve_model_dir(model_path)
    tokenizer = load_tokenizer(directory)
    if from_scratch:
        model = BertForSequenceClassification(
            config_from_hf(read_config(directory), str(directory / "config.json")), num_labels
        )
    else:
        model = load_model(BertForSequenceClassification, directory, keep_heads=False, num_labels=num_labels)
    check_vocab(tokenizer, model.config.vocab_size, str(directory))
    return model, tokenizer


def finetune(
    model_path: str | Path,
    train_path: str,
    dev_path: str,
    text_column: str,
    label_column: str,
    out: str | Path,
    pair_column: str | None = None,
    cfg: FinetuneConfig | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Fine-tune, evaluate on dev after every epoch, keep the best epoch in `out`."""
    cfg = cfg or FinetuneConfig()
    train = read_examples(train_path, text_column, label_column, pair_column)
    dev = read_examples(dev_path, text_column, label_column, pair_column)
    labels = label_mapping(train, dev, dev_path)
    label_id = {label: i for i, label in enumerate(labels)}
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    model, tokenizer = load_classifier(model_path, len(labels), cfg.from_scratch)
    if cfg.dropout is not None:
        set_dropout(model, cfg.dropout, cfg.dropout)
    device = resolve_device(cfg.device)
    precision = MixedPrecision(device, resolve_precision(cfg.precision, device))
    model.to(device)
    batcher = TextBatcher(tokenizer, min(cfg.seq_len, model.config.max_position_embeddings))
    train_encoded, dev_encoded = encode_examples(batcher, train), encode_examples(batcher, dev)
    train_labels = torch.tensor([label_id[e.label] for e in train])
    dev_labels = np.array([label_id[e.label] for e in dev])
    optimizer = build_optimizer(model, device, cfg.lr, cfg.weight_decay)
    steps_per_epoch = math.ceil(len(train) / cfg.batch_size)
    total_steps = steps_per_epoch * cfg.epochs
    warmup = warmup_fraction(cfg.warmup, total_steps)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    metrics_path = out / "metrics.jsonl"
    metrics_path.write_text("", encoding="utf-8")
    best: dict[str, Any] = {}
    rng = np.random.default_rng(cfg.seed)
    step = 0
    started = time.perf_counter()
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        batches = shuffled_buckets(train_encoded, cfg.batch_size, rng)
        bar = tqdm(batches, desc=f"epoch {epoch}/{cfg.epochs}", disable=not progress, file=sys.stderr, mininterval=1.0)
        train_loss = 0.0
        for b, indices in enumerate(bar):
            batch = {k: v.to(device) for k, v in batcher.batch(train_encoded, indices).items()}
            set_lr(optimizer, cfg.lr * lr_factor((step + 1) / total_steps, warmup, "linear"))
            with precision.autocast():
                _, loss = model(
                    batch["input_ids"],
                    batch["token_type_ids"],
                    batch["attention_mask"],
                    train_labels[indices].to(device),
                )
            precision.backward(loss)
            precision.step(optimizer, model.parameters(), cfg.grad_clip)
            step += 1
            train_loss += float(loss.detach())
            bar.set_postfix(loss=f"{train_loss / (b + 1):.4f}", refresh=False)
        probabilities = predict(model, batcher, dev_encoded, precision)
        record = {
            "epoch": epoch,
            "step": step,
            "train_loss": train_loss / steps_per_epoch,
            "elapsed": time.perf_counter() - started,
            **{
                f"dev_{k}": v
                for k, v in classification_metrics(probabilities.argmax(-1), dev_labels, len(labels)).items()
            },
        }
        with open(metrics_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        tqdm.write(
            f"epoch {epoch}: dev accuracy {record['dev_accuracy']:.4f}, macro-F1 {record['dev_macro_f1']:.4f}"
            + (f", MCC {record['dev_mcc']:.4f}" if "dev_mcc" in record else ""),
            file=sys.stderr,
        )
        if not best or record["dev_accuracy"] > best["dev_accuracy"]:
            best = record
            save_classifier(model, tokenizer, labels, out / "model", {"finetune": cfg.to_dict(), "best_epoch": epoch})
    summary = {"labels": labels, "best": best, "train_examples": len(train), "dev_examples": len(dev)}
    write_json(out / "summary.json", summary)
    return summary


def save_classifier(
    model: BertForSequenceClassification,
    tokenizer: Tokenizer,
    labels: list[str],
    directory: Path,
    extra: dict[str, Any],
) -> None:
    """A transformers BertForSequenceClassification directory, with the label mapping."""
    extra_config = {
        "id2label": {str(i): label for i, label in enumerate(labels)},
        "label2id": {label: i for i, label in enumerate(labels)},
        "problem_type": "single_label_classification",
        "bertforge_finetune": extra,
    }
    save_model(model, directory, tokenizer, extra_config)


class Classifier:
    """A fine-tuned model with its tokenizer and label names."""

    def __init__(self, path: str | Path, device: str = "cpu", trust_pickle: bool = False):
        directory = resolve_model_dir(path)
        config = read_config(directory)
        if "id2label" not in config:
            raise UserError(f"{directory}: not a classification model (no id2label in config.json)")
        self.labels = [config["id2label"][str(i)] for i in range(len(config["id2label"]))]
        _, self.model, tokenizer = load_model_and_tokenizer(
            directory, BertForSequenceClassification, trust_pickle, num_labels=len(self.labels)
        )
        self.precision = MixedPrecision(resolve_device(device), "fp32")
        self.model.to(self.precision.device)
        self.batcher = TextBatcher(tokenizer, self.model.config.max_position_embeddings)

    def classify(self, texts: list[str], pairs: list[str] | None = None) -> list[dict[str, Any]]:
        examples = [Example(t, pairs[i] if pairs else None, "") for i, t in enumerate(texts)]
        probabilities = predict(self.model, self.batcher, encode_examples(self.batcher, examples), self.precision)
        return [
            {
                "text": e.text,
                **({"pair": e.pair} if e.pair is not None else {}),
                "label": self.labels[int(p.argmax())],
                "probabilities": {label: float(q) for label, q in zip(self.labels, p)},
            }
            for e, p in zip(examples, probabilities)
        ]
