"""Sentence similarity: a model whose sentence vectors lie close for texts that mean the same (Sentence-BERT).

    bertforge finetune MODEL --task sentence-similarity --train pairs.tsv --text-column question \\
        --pair-column answer --out search          # sentence vectors for `bertforge embed`; dev held out

What semantic search, clustering and deduplication need: `bertforge embed` on the fine-tuned model gives the
vectors, and a cosine compares them. Training data is a table of pairs: a text column and a pair column, and
optionally a label column holding how alike the two are (STS's 0-5, or 0/1).

- Without scores, every row is a matching pair (question and answer, title and body, two paraphrases), and the
  other rows of a batch are its non-matches. Dev is scored by retrieval: for each first text, is its own partner
  the most similar of all dev partners (recall@1), and the mean reciprocal rank of it.
- With scores, the model learns their order (CoSENT), and dev is scored by the Spearman correlation between the
  cosine and the score, as STS benchmarks are.

The model directory is the encoder (`transformers`' BertModel) with mean pooling recorded in config.json, and
the files Sentence-Transformers reads (modules.json, 1_Pooling/), so `SentenceTransformer(path)` loads it too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer

from ..data.batching import Encoded, TextBatcher, length_buckets, shuffled_buckets
from ..engine.runtime import MixedPrecision
from ..errors import UserError
from ..formats.rows import read_rows
from ..model.heads import BertForSentenceEmbedding, unit_length
from .registry import SENTENCE_SIMILARITY, ColumnNames, MissingColumns
from .targets import regression_metrics


@dataclass
class PairColumns:
    """Where a table keeps a pair's two texts, and (optionally) the score of how alike they are."""

    text: str
    pair: str
    score: str | None = None


@dataclass
class TextPair:
    text: str
    pair: str
    score: float | None  # how alike the two are; None when every pair is a match


def read_pairs(path: str | Path, columns: PairColumns) -> list[TextPair]:
    """Every row's two texts, and its score when the columns name one."""
    names = [columns.text, columns.pair] + ([columns.score] if columns.score else [])
    pairs = []
    for number, row in read_rows(path, names):
        score = None
        if columns.score:
            try:
                score = float(row[columns.score])
            except (TypeError, ValueError):
                score = math.nan
            if not math.isfinite(score):
                raise UserError(f"{path}:{number}: score {row[columns.score]!r} is not a number")
        pairs.append(TextPair(str(row[columns.text]), str(row[columns.pair]), score))
    if not pairs:
        raise UserError(f"{path}: no pairs (empty file)")
    return pairs


@torch.no_grad()
def embed_texts(model, batcher: TextBatcher, encoded: Encoded, precision: MixedPrecision) -> np.ndarray:
    """(N, H) unit-length sentence vectors, in input order."""
    model.eval()
    out = np.zeros((len(encoded), model.config.hidden_size), dtype=np.float32)
    for indices in length_buckets(encoded, 64):
        batch = {k: v.to(precision.device) for k, v in batcher.batch(encoded, indices).items()}
        with precision.autocast():
            vectors = model.embed(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        out[indices] = unit_length(vectors.float()).cpu().numpy()
    return out


def nearest(queries: np.ndarray, corpus: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """For each query vector (Q, H), the k corpus vectors (N, H) nearest by cosine, best first: their indices and
    cosines, each (Q, min(k, N)). Queries go 256 at a time, so a large corpus needs (256, N) floats at once."""
    queries, corpus = (unit_length(torch.from_numpy(np.ascontiguousarray(x))).numpy() for x in (queries, corpus))
    k = min(k, len(corpus))
    indices, cosines = [], []
    for start in range(0, len(queries), 256):
        similarities = queries[start : start + 256] @ corpus.T  # (q, N)
        top = np.argpartition(-similarities, k - 1, axis=1)[:, :k]  # (q, k), in no order
        order = np.argsort(-np.take_along_axis(similarities, top, 1), axis=1, kind="stable")
        top = np.take_along_axis(top, order, 1)
        indices.append(top)
        cosines.append(np.take_along_axis(similarities, top, 1))
    return np.concatenate(indices), np.concatenate(cosines)


def retrieval_metrics(first: np.ndarray, second: np.ndarray) -> dict[str, float]:
    """For each first vector (N, H), where its own partner ranks among all second vectors (N, H) by cosine."""
    similarities = first @ second.T  # (N, N); the vectors are unit length
    own = np.diag(similarities)[:, None]  # (N, 1)
    rank = 1 + (similarities > own).sum(1)  # (N,): 1 = the partner is the most similar
    return {"recall_at_1": float(np.mean(rank == 1)), "mrr": float(np.mean(1.0 / rank))}


class SimilarityTask:
    """Text pairs, matching or scored, for `finetune`."""

    model_class = BertForSentenceEmbedding
    needs = ("text", "pair")  # the columns a user must name (ColumnNames' fields); label: a score
    how_alike = " (and --label-column for a score of how alike each pair is)"

    @classmethod
    def from_files(cls, record, tokenizer, train, dev, seq_len, cfg, columns) -> SimilarityTask:
        if not isinstance(columns, PairColumns):
            raise MissingColumns(record.name, cls.needs, cls.how_alike)
        return cls(tokenizer, train, dev, seq_len, columns, cfg.dev_fraction)

    @classmethod
    def columns_from(cls, names: ColumnNames) -> PairColumns:
        if not (names.text and names.pair):
            raise MissingColumns(SENTENCE_SIMILARITY.name, cls.needs, cls.how_alike)
        return PairColumns(names.text, names.pair, names.label)

    @staticmethod
    def main_metric_for(record, columns: PairColumns | None, tuned: bool) -> str:
        """What picks the best epoch: how well the cosine orders the scores, or how often the partner is nearest."""
        return "spearman" if columns is not None and columns.score else "recall_at_1"

    def __init__(
        self,
        tokenizer: Tokenizer,
        train_path: str | Path,
        dev_path: str | Path | None,
        seq_len: int,
        columns: PairColumns,
        dev_fraction: float,
    ):
        self.batcher = TextBatcher(tokenizer, seq_len)
        train = read_pairs(train_path, columns)
        if dev_path is None:
            train, dev = _hold_out(train, dev_fraction, train_path)
        else:
            dev = read_pairs(dev_path, columns)
        self.scored = columns.score is not None
        self.main_metric = self.main_metric_for(None, columns, False)
        self.train = self.batcher.encode([p.text for p in train] + [p.pair for p in train])  # firsts, then partners
        self.dev = self.batcher.encode([p.text for p in dev] + [p.pair for p in dev])
        self.train_scores = torch.tensor([p.score for p in train]) if self.scored else None
        self.dev_scores = np.array([p.score for p in dev]) if self.scored else None
        self.sizes = {"train_pairs": len(train), "dev_pairs": len(dev), "scored": self.scored}

    def model_kwargs(self) -> dict[str, Any]:
        return {}

    def train_batches(self, batch_size: int, rng: np.random.Generator) -> list[dict[str, torch.Tensor]]:
        n = len(self.train) // 2
        longer = [max(self.train[i], self.train[n + i], key=lambda e: len(e[0])) for i in range(n)]
        batches = []
        for pairs in shuffled_buckets(longer, batch_size, rng):
            batch = self.batcher.batch(self.train, pairs + [n + i for i in pairs])  # (2b, T)
            if self.scored:
                batch["labels"] = self.train_scores[pairs]
            batches.append(batch)
        return batches

    def evaluate(self, model, precision: MixedPrecision) -> dict[str, float]:
        vectors = embed_texts(model, self.batcher, self.dev, precision)
        first, second = np.split(vectors, 2)
        scores = retrieval_metrics(first, second)
        if self.scored:
            correlations = regression_metrics((first * second).sum(-1), self.dev_scores)
            scores.update(spearman=correlations["spearman"], pearson=correlations["pearson"])
        return scores

    def saved_config(self) -> dict[str, Any]:
        return {}  # the model directory records its pooling itself (modelfiles/directory.py)

    def summary(self) -> dict[str, Any]:
        return dict(self.sizes)


def _hold_out(pairs: list[TextPair], fraction: float, path: str | Path) -> tuple[list[TextPair], list[TextPair]]:
    """A fixed random `fraction` of the pairs as dev (seed 0: the same split for every run on the file)."""
    count = round(len(pairs) * fraction)
    if count < 2 or count == len(pairs):
        raise UserError(f"{path}: holding out {fraction:g} of {len(pairs)} pairs leaves too few on a side: give --dev")
    order = np.random.default_rng(0).permutation(len(pairs))
    return [pairs[i] for i in sorted(order[count:])], [pairs[i] for i in sorted(order[:count])]
