"""Extractive question answering (SQuAD v1.1): the answer is a span of the context.

The question and the context are encoded as a pair, [CLS] question [SEP] context
[SEP]; a context too long for one sequence is read in overlapping windows
(`seq_len` tokens, consecutive windows sharing `stride` context tokens). The
model gives every token a start and an end logit. Decoding follows the
`transformers` question-answering pipeline: only context tokens may answer,
start and end probabilities are softmaxes within a window, a span scores
start × end probability, spans are at most `max_answer_length` tokens, the best
span over all windows wins, and it is widened to whole words. Exact match and
F1 are SQuAD v1.1's official ones: normalised text, best over the gold answers.
"""

from __future__ import annotations

import collections
import json
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Encoding, Tokenizer

from .errors import UserError
from .model import BertForQuestionAnswering
from .modeldir import load_model_and_tokenizer
from .runtime import MixedPrecision, release_freed_memory, resolve_device
from .tokenizer import special_ids


@dataclass
class Question:
    id: str
    question: str
    context: str
    answers: list[str] = field(default_factory=list)
    answer_start: int | None = None  # of the first answer: where training finds it


def read_squad(path: str | Path, training: bool) -> list[Question]:
    """Questions of a SQuAD v1.1 JSON file; in a training file every answer_start must point at its answer."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    try:
        articles = json.loads(path.read_text(encoding="utf-8-sig"))["data"]
    except json.JSONDecodeError as e:
        raise UserError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    except (KeyError, TypeError):
        raise UserError(f"{path}: not SQuAD JSON (no top-level 'data' list)") from None
    questions = []
    for article in articles:
        for paragraph in article.get("paragraphs", []):
            context = paragraph.get("context")
            for qa in paragraph.get("qas", []):
                try:
                    question = Question(str(qa["id"]), qa["question"], context, [a["text"] for a in qa["answers"]])
                    starts = [int(a["answer_start"]) for a in qa["answers"]]
                except (KeyError, TypeError, ValueError):
                    raise UserError(
                        f"{path}: question {qa.get('id', '?')!r} lacks id, question, answers or answer_start"
                    ) from None
                if not isinstance(context, str) or not question.answers:
                    raise UserError(f"{path}: question {question.id!r} has no context or no answers")
                if training:
                    text, start = question.answers[0], starts[0]
                    if context[start : start + len(text)] != text:
                        raise UserError(
                            f"{path}: question {question.id!r}: answer_start {start} does not point at its "
                            f"answer {text!r} (the context there reads {context[start : start + len(text)]!r})"
                        )
                    question.answer_start = start
                questions.append(question)
    if not questions:
        raise UserError(f"{path}: no questions")
    return questions


# ---------------------------------------------------------------- windows and labels


def windows(tokenizer: Tokenizer, question: str, context: str) -> list[Encoding]:
    """[CLS] question [SEP] context-window [SEP] encodings covering the whole context (`tokenizer` truncates)."""
    first = tokenizer.encode(question, context)
    return [first, *first.overflowing]


def windowing_tokenizer(tokenizer: Tokenizer, seq_len: int, stride: int) -> Tokenizer:
    """A copy that cuts the context into overlapping windows of `seq_len` tokens (question kept whole).

    The overlap is kept under half a window, so that short windows (a model with a
    small position table) still advance.
    """
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.enable_truncation(seq_len, stride=min(stride, seq_len // 2), strategy="only_second")
    copy.no_padding()
    return copy


def answer_tokens(encoding: Encoding, start_char: int, end_char: int) -> tuple[int, int]:
    """The first and last token of the answer characters [start_char, end_char) in this window, or (0, 0) ([CLS])
    when the window does not hold the whole answer."""
    context = [i for i, s in enumerate(encoding.sequence_ids) if s == 1]
    offsets = encoding.offsets
    if not context or offsets[context[0]][0] > start_char or offsets[context[-1]][1] < end_char:
        return 0, 0
    first = next(i for i in context if offsets[i][1] > start_char)
    last = next(i for i in reversed(context) if offsets[i][0] < end_char)
    return first, last


def pad_batch(encodings: list[Encoding], pad: int) -> dict[str, torch.Tensor]:
    width = max(len(e.ids) for e in encodings)
    input_ids = torch.full((len(encodings), width), pad, dtype=torch.long)
    token_type_ids = torch.zeros((len(encodings), width), dtype=torch.long)
    for row, e in enumerate(encodings):
        input_ids[row, : len(e.ids)] = torch.tensor(e.ids)
        token_type_ids[row, : len(e.type_ids)] = torch.tensor(e.type_ids)
    return {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": (input_ids != pad).long()}


# ---------------------------------------------------------------- decoding


def best_span(
    start_logits: np.ndarray, end_logits: np.ndarray, encoding: Encoding, max_answer_length: int
) -> tuple[int, int, float] | None:
    """(first token, last token, score) of the best span in one window, as the `transformers` QA pipeline decodes.

    Only context tokens may answer (their softmax is taken within the window,
    [CLS] then zeroed); score = start probability × end probability.
    """
    allowed = np.array([s == 1 for s in encoding.sequence_ids])  # (T,)
    cls_allowed = allowed.copy()
    cls_allowed[0] = True  # [CLS] takes part in the softmax, as in the pipeline, then is zeroed
    probabilities = []
    for logits in (start_logits, end_logits):
        masked = np.where(cls_allowed, logits, -10000.0)
        p = np.exp(masked - masked.max())
        p = p / p.sum()
        p[0] = 0.0
        probabilities.append(p)
    start, end = probabilities
    candidates = np.tril(np.triu(np.outer(start, end)), max_answer_length - 1)  # end >= start, short enough
    first, last = np.unravel_index(int(np.argmax(candidates)), candidates.shape)
    if not (allowed[first] and allowed[last]):
        return None
    return int(first), int(last), float(candidates[first, last])


def span_text(encoding: Encoding, context: str, first: int, last: int) -> tuple[int, int]:
    """Character offsets of the span, widened to whole words (the pipeline's align_to_words)."""
    start_word, end_word = encoding.token_to_word(first), encoding.token_to_word(last)
    return encoding.word_to_chars(start_word, 1)[0], encoding.word_to_chars(end_word, 1)[1]


@torch.no_grad()
def answer_questions(
    model: BertForQuestionAnswering,
    tokenizer: Tokenizer,
    items: list[tuple[str, str]],
    precision: MixedPrecision,
    max_answer_length: int,
    batch_size: int = 32,
) -> list[dict[str, Any]]:
    """{answer, score, start, end} for each (question, context); windows of many questions share batches."""
    model.eval()
    pad = special_ids(tokenizer).pad
    owners, encodings = [], []
    for i, (question, context) in enumerate(items):
        for encoding in windows(tokenizer, question, context):
            owners.append(i)
            encodings.append(encoding)
    best: list[dict[str, Any]] = [{"answer": "", "score": 0.0, "start": 0, "end": 0} for _ in items]
    order = sorted(range(len(encodings)), key=lambda k: len(encodings[k].ids))  # little padding
    for s in range(0, len(order), batch_size):
        chunk = order[s : s + batch_size]
        batch = {k: v.to(precision.device) for k, v in pad_batch([encodings[k] for k in chunk], pad).items()}
        with precision.autocast():
            logits, _ = model(**batch)
        logits = logits.float().cpu().numpy()  # (b, T, 2)
        for row, k in enumerate(chunk):
            n = len(encodings[k].ids)
            span = best_span(logits[row, :n, 0], logits[row, :n, 1], encodings[k], max_answer_length)
            if span is not None and span[2] > best[owners[k]]["score"]:
                start, end = span_text(encodings[k], items[owners[k]][1], span[0], span[1])
                best[owners[k]] = {
                    "answer": items[owners[k]][1][start:end],
                    "score": span[2],
                    "start": start,
                    "end": end,
                }
        release_freed_memory()
    return best


# ---------------------------------------------------------------- SQuAD's metric


def normalize_answer(text: str) -> str:
    """SQuAD v1.1's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str) -> float:
    predicted, expected = normalize_answer(prediction).split(), normalize_answer(gold).split()
    common = sum((collections.Counter(predicted) & collections.Counter(expected)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def squad_scores(predictions: list[str], golds: list[list[str]]) -> dict[str, float]:
    """Exact match and F1 in percent, each the best over a question's gold answers, averaged over questions."""
    em = [max(exact_match(p, g) for g in gold) for p, gold in zip(predictions, golds)]
    f1 = [max(f1_score(p, g) for g in gold) for p, gold in zip(predictions, golds)]
    return {"exact_match": 100 * float(np.mean(em)), "f1": 100 * float(np.mean(f1))}


# ---------------------------------------------------------------- the task


class QuestionAnsweringTask:
    """SQuAD v1.1 files for `finetune`: training windows with their answer tokens, dev scored by EM/F1."""

    model_class = BertForQuestionAnswering
    main_metric = "f1"

    def __init__(
        self,
        tokenizer: Tokenizer,
        train_path: str | Path,
        dev_path: str | Path,
        seq_len: int,
        stride: int,
        max_answer_length: int = 30,
    ):
        self.max_answer_length = max_answer_length
        self.pad = special_ids(tokenizer).pad
        self.tokenizer = windowing_tokenizer(tokenizer, seq_len, stride)
        train, self.dev = read_squad(train_path, training=True), read_squad(dev_path, training=False)
        self.train_windows, labels = [], []
        for q in train:
            end = q.answer_start + len(q.answers[0])
            for encoding in windows(self.tokenizer, q.question, q.context):
                self.train_windows.append(encoding)
                labels.append(answer_tokens(encoding, q.answer_start, end))
        self.train_labels = torch.tensor(labels, dtype=torch.long)  # (windows, 2)
        self.sizes = {
            "train_questions": len(train),
            "train_windows": len(self.train_windows),
            "dev_questions": len(self.dev),
        }

    def model_kwargs(self) -> dict[str, Any]:
        return {}

    def train_batches(self, batch_size: int, rng: np.random.Generator) -> list[dict[str, torch.Tensor]]:
        order = rng.permutation(len(self.train_windows))
        return [
            {
                **pad_batch([self.train_windows[i] for i in order[s : s + batch_size]], self.pad),
                "labels": self.train_labels[order[s : s + batch_size]],
            }
            for s in range(0, len(order), batch_size)
        ]

    def evaluate(self, model, precision: MixedPrecision) -> dict[str, float]:
        answers = answer_questions(
            model, self.tokenizer, [(q.question, q.context) for q in self.dev], precision, self.max_answer_length
        )
        return squad_scores([a["answer"] for a in answers], [q.answers for q in self.dev])

    def saved_config(self) -> dict[str, Any]:
        return {}

    def summary(self) -> dict[str, Any]:
        return dict(self.sizes)


class Answerer:
    """A fine-tuned QA model: the answer to a question in a context, as the `transformers` pipeline gives it."""

    def __init__(
        self, path: str | Path, device: str = "cpu", trust_pickle: bool = False, seq_len: int = 384, stride: int = 128
    ):
        _, self.model, tokenizer = load_model_and_tokenizer(path, BertForQuestionAnswering, trust_pickle)
        self.precision = MixedPrecision(resolve_device(device), "fp32")
        self.model.to(self.precision.device).eval()
        self.tokenizer = windowing_tokenizer(tokenizer, min(seq_len, self.model.config.max_position_embeddings), stride)

    def answer(self, question: str, context: str, max_answer_length: int = 15) -> dict[str, Any]:
        """{answer, score, start, end}: the answer text and its character offsets in `context`."""
        if not question.strip() or not context.strip():
            raise UserError("give a question and a context")
        return {
            "question": question,
            **answer_questions(self.model, self.tokenizer, [(question, context)], self.precision, max_answer_length)[0],
        }
