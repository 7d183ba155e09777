"""The task heads that sit on the encoder for fine-tuning: sequence classification (and regression, multi-label),
multiple choice, sentence embeddings, token classification and extractive QA. Each keeps `transformers`' module
names (`classifier`, `qa_outputs`; ModernBERT's `head`), so the weights map to and from its classes (hf.py).

BERT's sequence heads read the pooler's tanh(dense([CLS])); ModernBERT's (task_head "transform") a dense ->
activation -> LayerNorm over [CLS] (or the mean of the tokens) or over every token.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..families import encoder_has_pooler
from ..labels import IGNORE_INDEX
from .bert import BertModel, EncoderOutput, activation, init_weights
from .config import ModelConfig
from .dropout import Dropout
from .variants import blocks_of


class PoolerReads(nn.Module):
    """BERT's heads read the encoder as it is: a sequence by the pooler's tanh(dense([CLS])), tagging and QA by the
    hidden states."""

    reads_pooler = True

    def sequence(self, encoded: EncoderOutput, attention_mask: torch.Tensor | None) -> torch.Tensor:
        return encoded.pooled_output  # (B, H)

    def tokens(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden  # (B, T, H)


class HeadTransform(nn.Module):
    """ModernBERT's task head before each classifier (task_head "transform"): dense -> activation -> LayerNorm,
    on [CLS] for a sequence, on every token for tagging and QA."""

    reads_pooler = False

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=config.linear_bias)
        self.act = activation(config)
        self.norm = blocks_of(config).norm(config, config.hidden_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.norm(self.act(self.dense(hidden)))  # (..., H)

    def sequence(self, encoded: EncoderOutput, attention_mask: torch.Tensor | None) -> torch.Tensor:
        return self(encoded.sequence_output[:, 0])  # (B, H)

    def tokens(self, hidden: torch.Tensor) -> torch.Tensor:
        return self(hidden)  # (B, T, H)


class MeanHeadTransform(HeadTransform):
    """The head transform of the mean of a text's tokens (classifier_pooling "mean")."""

    def sequence(self, encoded: EncoderOutput, attention_mask: torch.Tensor | None) -> torch.Tensor:
        return self(pool(encoded.sequence_output, attention_mask, ("mean",)))  # (B, H)


def task_head(config: ModelConfig) -> nn.Module:
    """What a task's classifier reads the encoder through, chosen once: BERT's pooler, or ModernBERT's transform of
    [CLS] or of the tokens' mean."""
    if config.task_head != "transform":
        return PoolerReads()
    return MeanHeadTransform(config) if config.classifier_pooling == "mean" else HeadTransform(config)


# The kinds of sequence classification, by the names `transformers` keeps in config.json's problem_type.
SINGLE_LABEL, MULTI_LABEL, REGRESSION = "single_label_classification", "multi_label_classification", "regression"


class BertForSequenceClassification(nn.Module):
    """Fine-tuning head: pooled [CLS] -> dropout -> linear over the labels (or, for regression, one number).

    One label per text is a softmax over the labels (cross-entropy); any number of labels per text
    (multi-label) is a yes/no per label (binary cross-entropy on each logit); regression is one number (MSE).
    These are `transformers`' three problem types, with the same losses."""

    hf_architecture = "BertForSequenceClassification"

    def __init__(self, config: ModelConfig, num_labels: int = 2, problem_type: str = SINGLE_LABEL):
        super().__init__()
        if problem_type not in (SINGLE_LABEL, MULTI_LABEL, REGRESSION):
            raise ValueError(f"unknown problem_type {problem_type!r}")
        self.config = config
        self.problem_type = problem_type
        self.num_labels = 1 if problem_type == REGRESSION else num_labels
        self.head = task_head(config)
        self.bert = BertModel(config, pooler=self.head.reads_pooler)
        self.dropout = Dropout(config.hidden_dropout)
        self.classifier = nn.Linear(config.hidden_size, self.num_labels)
        self.apply(lambda module: init_weights(module, config))

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None):
        """labels: class ids (B,); for multi-label 0/1 per label (B, num_labels); for regression values (B,).
        Returns (logits (B, num_labels), loss or None)."""
        encoded = self.bert(input_ids, token_type_ids, attention_mask)
        pooled = self.head.sequence(encoded, attention_mask)  # (B, H)
        logits = self.classifier(self.dropout(pooled))  # (B, num_labels)
        if labels is None:
            return logits, None
        if self.problem_type == REGRESSION:
            return logits, F.mse_loss(logits.squeeze(-1).float(), labels.float())
        if self.problem_type == MULTI_LABEL:
            return logits, F.binary_cross_entropy_with_logits(logits.float(), labels.float())
        return logits, F.cross_entropy(logits.float(), labels)

    def probabilities(self, logits: torch.Tensor) -> torch.Tensor:
        """(B, num_labels) logits -> what a user reads: a distribution over the labels, each label's own
        probability (multi-label), or the value itself (regression)."""
        if self.problem_type == REGRESSION:
            return logits
        return logits.sigmoid() if self.problem_type == MULTI_LABEL else logits.softmax(-1)


class BertForMultipleChoice(nn.Module):
    """Fine-tuning head for multiple choice (SWAG): each (context, choice) pair's pooled [CLS] -> dropout -> one
    score; a softmax over a question's choices picks one."""

    hf_architecture = "BertForMultipleChoice"

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.head = task_head(config)
        self.bert = BertModel(config, pooler=self.head.reads_pooler)
        self.dropout = Dropout(config.hidden_dropout)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.apply(lambda module: init_weights(module, config))

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None):
        """input_ids etc. (B, C, T): C choices per question; labels (B,): the right choice. Returns (logits (B, C),
        loss or None)."""
        choices = input_ids.shape[1]
        flat = [x.flatten(0, 1) if x is not None else None for x in (input_ids, token_type_ids, attention_mask)]
        pooled = self.head.sequence(self.bert(*flat), flat[2])  # (B·C, H)
        logits = self.classifier(self.dropout(pooled)).view(-1, choices)  # (B, C)
        return logits, F.cross_entropy(logits.float(), labels) if labels is not None else None


def unit_length(vectors: torch.Tensor) -> torch.Tensor:
    """(..., D) -> each vector scaled to length 1, as sentence-transformers' Normalize module does (a zero vector
    stays zero). The one place vectors are normalised: the sentence-embedding head, its export, serving and search."""
    return F.normalize(vectors, dim=-1)


def sentence_vectors(
    hidden: torch.Tensor, attention_mask: torch.Tensor | None, modes: tuple[str, ...], normalize: bool
) -> torch.Tensor:
    """hidden (B, T, H) -> (B, D): each text's vector as a sentence-transformers pipeline makes it: its pooling modes
    (`pool`), then unit length where it has a Normalize module."""
    vectors = pool(hidden, attention_mask, modes)  # (B, D)
    return unit_length(vectors) if normalize else vectors


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor | None, modes: tuple[str, ...] = ("mean",)) -> torch.Tensor:
    """hidden (B, T, H) -> (B, H · len(modes)): each text's vector by each of sentence-transformers' pooling modes
    (sentence.py), concatenated in order. Padding (attention_mask 0, on the right) is left out of each."""
    if attention_mask is None:
        attention_mask = hidden.new_ones(hidden.shape[:2])
    real = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
    lengths = real.sum(1).clamp(min=1)  # (B, 1)
    vectors = []
    for mode in modes:
        if mode == "cls":
            vectors.append(hidden[:, 0])  # (B, H)
        elif mode in ("mean", "mean_sqrt_len_tokens"):
            total = (hidden * real).sum(1)  # (B, H)
            vectors.append(total / (lengths if mode == "mean" else lengths.sqrt()))
        elif mode == "max":
            vectors.append(hidden.masked_fill(real == 0, float("-inf")).max(1).values)
        elif mode == "weightedmean":  # the t-th token weighs t
            weights = real * torch.arange(1, hidden.shape[1] + 1, device=hidden.device, dtype=hidden.dtype)[:, None]
            vectors.append((hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9))
        elif mode == "lasttoken":
            last = (attention_mask.sum(1) - 1).clamp(min=0).long()  # (B,)
            vectors.append(hidden[torch.arange(len(hidden), device=hidden.device), last])
        else:
            raise ValueError(f"unknown pooling mode {mode!r}")
    return torch.cat(vectors, dim=-1)


class BertForSentenceEmbedding(nn.Module):
    """Sentence embeddings (Sentence-BERT, Reimers & Gurevych 2019): a text's token vectors pooled into one (their
    mean, or the model's own pooling where it was read from a sentence-transformers model), trained so that texts
    which mean the same lie close by cosine. It has no head: what it saves is the encoder.

    Trained on pairs. Pairs that match (question and answer, paraphrases, title and body) learn from in-batch
    negatives: every other pair's second text is a non-match (the multiple-negatives ranking loss). Pairs with a
    similarity score (STS's 0-5, or 0/1) learn CoSENT's ranking of the scores (Su 2022): a pair scored higher
    must come out more alike than one scored lower."""

    hf_architecture = "BertForSentenceEmbedding"
    scale = 20.0  # cosines lie in [-1, 1]; both losses sharpen them by this factor (Sentence-Transformers' default)

    def __init__(self, config: ModelConfig, pooling: tuple[str, ...] = ("mean",)):
        super().__init__()
        self.config = config
        self.pooling = pooling
        # Its pooler is unused, kept so that `transformers`' BertModel finds one; ModernBertModel has none.
        self.bert = BertModel(config, pooler=encoder_has_pooler(config))
        self.apply(lambda module: init_weights(module, config))

    def embed(self, input_ids, token_type_ids=None, attention_mask=None) -> torch.Tensor:
        """(B, T) -> (B, D): each text's token vectors pooled, padding left out."""
        return pool(self.bert(input_ids, token_type_ids, attention_mask).sequence_output, attention_mask, self.pooling)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None):
        """input_ids etc. (2B, T): B first texts, then their B partners in the same order. labels (B,): each pair's
        score, or None for pairs that all match. Returns (each pair's cosine similarity (B,), loss)."""
        vectors = unit_length(self.embed(input_ids, token_type_ids, attention_mask).float())  # (2B, H)
        first, second = vectors.chunk(2)  # (B, H) each
        cosine = (first * second).sum(-1)  # (B,)
        if labels is None:  # row i's match is column i; the rest of the row are its negatives
            similarities = self.scale * first @ second.T  # (B, B)
            loss = F.cross_entropy(similarities, torch.arange(len(first), device=similarities.device))
        else:  # log(1 + sum over pairs (i, j) scored y_i > y_j of exp(scale · (cos_j - cos_i)))
            differences = self.scale * (cosine[None, :] - cosine[:, None])  # (B, B): [i, j] = s · (cos_j - cos_i)
            ordered = labels.float()[:, None] > labels.float()[None, :]  # (B, B): pair i should be more alike than j
            loss = torch.logsumexp(torch.cat([differences.new_zeros(1), differences[ordered]]), dim=0)
        return cosine, loss


class BertForTokenClassification(nn.Module):
    """Fine-tuning head for tagging (NER): every token's hidden state -> dropout -> linear over the tags."""

    hf_architecture = "BertForTokenClassification"

    def __init__(self, config: ModelConfig, num_labels: int = 2):
        super().__init__()
        self.config = config
        self.num_labels = num_labels
        self.bert = BertModel(config, pooler=False)
        self.head = task_head(config)
        self.dropout = Dropout(config.hidden_dropout)
        self.classifier = nn.Linear(config.hidden_size, num_labels)
        self.apply(lambda module: init_weights(module, config))

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None):
        """labels (B, T): a tag id on each word's first piece, -100 elsewhere. Returns (logits (B, T, tags), loss)."""
        hidden = self.head.tokens(self.bert(input_ids, token_type_ids, attention_mask).sequence_output)  # (B, T, H)
        logits = self.classifier(self.dropout(hidden))  # (B, T, num_labels)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX)
        return logits, loss


class BertForQuestionAnswering(nn.Module):
    """Extractive QA head (SQuAD): each token's hidden state -> two logits, "the answer starts here" and "ends here"."""

    hf_architecture = "BertForQuestionAnswering"

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config, pooler=False)
        self.head = task_head(config)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.apply(lambda module: init_weights(module, config))

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None):
        """labels (B, 2): the answer's first and last token ([CLS], 0, when the window holds no answer).

        Returns (logits (B, T, 2): start and end, loss or None); the loss averages the two cross-entropies, as BERT's.
        """
        hidden = self.head.tokens(self.bert(input_ids, token_type_ids, attention_mask).sequence_output)  # (B, T, H)
        logits = self.qa_outputs(hidden)  # (B, T, 2); span decoding keeps answers inside the context
        loss = None
        if labels is not None:
            start, end = logits.float().unbind(-1)  # 2 × (B, T)
            loss = (F.cross_entropy(start, labels[:, 0]) + F.cross_entropy(end, labels[:, 1])) / 2
        return logits, loss
