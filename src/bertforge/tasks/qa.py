"""Extractive question answering (SQuAD v1.1 and v2.0): the answer is a span of the context, or in v2.0 none.

    bertforge finetune MODEL --task question-answering --train train.json --dev dev.json --out squad

The question and the context are encoded as a pair, [CLS] question [SEP] context
[SEP]; a context too long for one sequence is read in overlapping windows
(`seq_len` tokens, consecutive windows sharing `stride` context tokens). The
model gives every token a start and an end logit. Decoding follows the
`transformers` question-answering pipeline: only context tokens may answer,
start and end probabilities are softmaxes within a window, a span scores
start × end probability, spans are at most `max_answer_length` tokens, the best
span over all windows wins, and it is widened to whole words. Exact match and
F1 are SQuAD's official ones: normalised text, best over the gold answers.

SQuAD v2.0 adds questions the context does not answer. Such a question is
trained to point start and end at [CLS] in every window (as BERT's paper and
`transformers`' examples do), and a model trained with any answers "no answer"
when [CLS]'s start × end probability (the lowest over the windows) beats the
best span: the pipeline's `handle_impossible_answer`. BERT's paper instead
abstains when the no-answer score beats the best span's by a margin fitted on
dev; `finetune --tune-thresholds` fits it (on the log of the two
probabilities) and saves it with the model. Files are SQuAD JSON, or tables
with a question per row as `datasets` keeps squad and squad_v2.
"""

from __future__ import annotations

import collections
import json
import math
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Encoding, Tokenizer

from ..data.batching import windowing_tokenizer, windows
from ..engine.runtime import MixedPrecision, release_freed_memory, resolve_device
from ..errors import UserError
from ..formats.rows import read_rows
from ..formats.textfiles import format_of
from ..model.heads import BertForQuestionAnswering
from ..modelfiles.directory import read_model_files
from ..serving.served import load_served
from ..tokenizer import max_input_length, special_ids
from .cuts import best_cut

NO_ANSWER_KEY = "handle_impossible_answer"  # config.json: trained on SQuAD v2.0, so it may answer "no answer"
# config.json: abstain when log(no-answer probability) - log(best span's) exceeds this (BERT's threshold tau);
# without it, PIPELINE_NULL_THRESHOLD
NULL_THRESHOLD_KEY = "null_score_diff_threshold"
PIPELINE_NULL_THRESHOLD = 0.0  # handle_impossible_answer: abstain when the no-answer score beats the best span


@dataclass
class Question:
    id: str
    question: str
    context: str
    answers: list[str] = field(default_factory=list)  # none: the context does not answer it (SQuAD v2.0)
    answer_start: int | None = None  # of the first answer: where training finds it


def read_squad(path: str | Path, training: bool) -> list[Question]:
    """Questions of a SQuAD JSON file (v1.1, or v2.0 with unanswerable ones), or of a table with a question per
    row (JSONL or a JSON array, Parquet, Arrow), as `datasets` keeps squad and squad_v2. A question without
    answers (none given, or none at all) is one the context does not answer. In a training file every
    answer_start must point at its answer."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    document = _squad_document(path)
    questions = list(_document_questions(document, path) if document is not None else _table_questions(path))
    if not questions:
        raise UserError(f"{path}: no questions")
    if training:
        if not any(q.answers for q in questions):
            raise UserError(f"{path}: no question has an answer; a training file needs them")
        for question in questions:
            _check_answer_start(question, path)
    return questions


def _squad_document(path: Path) -> dict | None:
    """The parsed SQuAD JSON document, or None for a table (Parquet, Arrow, JSON lines)."""
    if format_of(path) != "jsonl" or ".jsonl" in path.name.lower():
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text (byte {e.start}); SQuAD files are UTF-8 JSON") from None
    except json.JSONDecodeError as e:
        if e.msg == "Extra data":  # a .json file of JSON lines, as `datasets`' to_json writes it
            return None
        raise UserError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    if isinstance(document, list) or (isinstance(document, dict) and "question" in document):
        return None  # a JSON array of rows, or one line of JSON lines: a table
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise UserError(f"{path}: not SQuAD JSON (no top-level 'data' list)")
    return document


def _document_questions(document: dict, path: Path) -> Iterator[Question]:
    for article in document["data"]:
        for paragraph in article.get("paragraphs", []):
            context = paragraph.get("context")
            for qa in paragraph.get("qas", []):
                try:
                    answers = [] if qa.get("is_impossible") else qa.get("answers", [])
                    yield _question(
                        str(qa["id"]),
                        qa["question"],
                        context,
                        [a["text"] for a in answers],
                        [offset(a["answer_start"], f"{path}: question {qa.get('id', '?')!r}") for a in answers],
                        f"{path}: question {qa.get('id', '?')!r}",
                    )
                except (KeyError, TypeError, ValueError):
                    raise UserError(
                        f"{path}: question {qa.get('id', '?')!r} lacks its id or question, or an answer its text or "
                        "answer_start"
                    ) from None


def _table_questions(path: Path) -> Iterator[Question]:
    """`datasets`' layout: question, context and answers {text: [...], answer_start: [...]} per row."""
    for number, row in read_rows(path, ["question", "context"], optional=("id", "answers")):
        where = f"{path}:{number}"
        answers = row.get("answers") or {"text": [], "answer_start": []}
        try:
            texts, starts = list(answers["text"]), [offset(s, where) for s in answers["answer_start"]]
        except (KeyError, TypeError, ValueError):
            raise UserError(f"{where}: answers must be {{'text': [...], 'answer_start': [...]}}") from None
        yield _question(str(row.get("id", number)), row["question"], row["context"], texts, starts, where)


def offset(value: Any, where: str) -> int:
    """An answer_start: a character offset, a whole number (15.5 is no offset, and truncated would point one
    character early)."""
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and value.isdigit())):
        raise UserError(f"{where}: answer_start {value!r} is not a character offset (a whole number)")
    return int(value)


def _question(id: str, question: Any, context: Any, texts: list[str], starts: list[int], where: str) -> Question:
    if not isinstance(context, str) or not context.strip() or not isinstance(question, str):
        raise UserError(f"{where}: no context or no question")
    if len(texts) != len(starts):
        raise UserError(f"{where}: {len(texts)} answers but {len(starts)} answer_starts")
    if not all(isinstance(text, str) for text in texts):
        raise UserError(f"{where}: an answer's text is not a string")
    return Question(id, question, context, list(texts), starts[0] if starts else None)


def _check_answer_start(question: Question, path: Path) -> None:
    """Check that a training question's first answer_start points at its answer."""
    if not question.answers:
        return
    text, start = question.answers[0], question.answer_start
    if not text.strip():
        raise UserError(f"{path}: question {question.id!r}: its answer is empty; give its text, or none at all")
    if start < 0 or question.context[start : start + len(text)] != text:  # -20 would slice from the end
        raise UserError(
            f"{path}: question {question.id!r}: answer_start {start} does not point at its answer {text!r} "
            f"(the context there reads {question.context[start : start + len(text)]!r})"
        )


# ---------------------------------------------------------------- windows and labels


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


def span_probabilities(start_logits: np.ndarray, end_logits: np.ndarray, encoding: Encoding) -> list[np.ndarray]:
    """Start and end probabilities (T,) in one window, as the `transformers` QA pipeline takes them: a softmax over
    the context tokens and [CLS]. [CLS]'s pair of probabilities scores "no answer" (SQuAD v2.0)."""
    allowed = np.array([s == 1 for s in encoding.sequence_ids])  # (T,)
    allowed[0] = True
    probabilities = []
    for logits in (start_logits, end_logits):
        masked = np.where(allowed, logits, -10000.0)
        p = np.exp(masked - masked.max())
        probabilities.append(p / p.sum())
    return probabilities


def best_span(
    start: np.ndarray, end: np.ndarray, encoding: Encoding, max_answer_length: int
) -> tuple[int, int, float] | None:
    """(first token, last token, score) of the best span of context tokens in one window, from its
    `span_probabilities`: score = start probability × end probability, the pipeline's decoding."""
    context = np.array([s == 1 for s in encoding.sequence_ids])  # (T,)
    start, end = np.where(context, start, 0.0), np.where(context, end, 0.0)
    candidates = np.tril(np.triu(np.outer(start, end)), max_answer_length - 1)  # end >= start, short enough
    first, last = np.unravel_index(int(np.argmax(candidates)), candidates.shape)
    if not (context[first] and context[last]):
        return None
    return int(first), int(last), float(candidates[first, last])


def span_text(encoding: Encoding, context: str, first: int, last: int) -> tuple[int, int]:
    """Character offsets of the span, widened to whole words (the pipeline's align_to_words)."""
    start_word, end_word = encoding.token_to_word(first), encoding.token_to_word(last)
    return encoding.word_to_chars(start_word, 1)[0], encoding.word_to_chars(end_word, 1)[1]


def answer_questions(
    model: BertForQuestionAnswering,
    tokenizer: Tokenizer,
    items: list[tuple[str, str]],
    precision: MixedPrecision,
    max_answer_length: int,
    null_threshold: float | None = None,
    batch_size: int = 32,
) -> list[dict[str, Any]]:
    """{answer, score, start, end} for each (question, context); windows of many questions share batches.

    With a `null_threshold` (a model trained on SQuAD v2.0), the answer is "" where the question's `null_score_diff`
    exceeds it; at 0 that is the pipeline's `handle_impossible_answer`: the no-answer score beats the best span.
    """
    spans, no_answer = answer_candidates(model, tokenizer, items, precision, max_answer_length, batch_size)
    return decide(spans, no_answer, null_threshold)


@torch.no_grad()
def answer_candidates(
    model: BertForQuestionAnswering,
    tokenizer: Tokenizer,
    items: list[tuple[str, str]],
    precision: MixedPrecision,
    max_answer_length: int,
    batch_size: int = 32,
) -> tuple[list[dict[str, Any]], list[float]]:
    """For each (question, context): its best span over the windows, {answer, score, start, end} ("" if no window
    has one), and its no-answer score, the lowest [CLS] start × end probability over its windows."""
    model.eval()
    pad = special_ids(tokenizer).pad
    owners, encodings = [], []
    for i, (question, context) in enumerate(items):
        for encoding in windows(tokenizer, question, context):
            owners.append(i)
            encodings.append(encoding)
    best: list[dict[str, Any]] = [{"answer": "", "score": 0.0, "start": 0, "end": 0} for _ in items]
    no_answer = [1.0] * len(items)
    order = sorted(range(len(encodings)), key=lambda k: len(encodings[k].ids))  # little padding
    for s in range(0, len(order), batch_size):
        chunk = order[s : s + batch_size]
        batch = {k: v.to(precision.device) for k, v in pad_batch([encodings[k] for k in chunk], pad).items()}
        with precision.autocast():
            logits, _ = model(**batch)
        logits = logits.float().cpu().numpy()  # (b, T, 2)
        for row, k in enumerate(chunk):
            n, owner = len(encodings[k].ids), owners[k]
            start, end = span_probabilities(logits[row, :n, 0], logits[row, :n, 1], encodings[k])
            no_answer[owner] = min(no_answer[owner], float(start[0] * end[0]))
            span = best_span(start, end, encodings[k], max_answer_length)
            if span is not None and span[2] > best[owner]["score"]:
                first, last = span_text(encodings[k], items[owner][1], span[0], span[1])
                best[owner] = {"answer": items[owner][1][first:last], "score": span[2], "start": first, "end": last}
        release_freed_memory()
    return best, no_answer


def null_score_diff(no_answer: float, span_score: float) -> float:
    """log(no-answer probability) - log(best span's): above 0, "no answer" is the likelier (a question without
    a span gets a very large value)."""
    return math.log(max(no_answer, 1e-300)) - math.log(max(span_score, 1e-300))


def decide(spans: list[dict[str, Any]], no_answer: list[float], null_threshold: float | None) -> list[dict[str, Any]]:
    """Each question's answer: its span, or "" (scored by its no-answer probability) where its `null_score_diff`
    exceeds `null_threshold`; None never abstains (a SQuAD v1.1 model)."""
    if null_threshold is None:
        return spans
    return [
        {"answer": "", "score": none, "start": 0, "end": 0}
        if null_score_diff(none, span["score"]) > null_threshold
        else span
        for span, none in zip(spans, no_answer)
    ]


def best_null_threshold(diffs: np.ndarray, span_f1: np.ndarray, no_answer_f1: np.ndarray) -> float:
    """The threshold on `null_score_diff` with the best mean F1 over these questions (BERT's tau, chosen on dev):
    a question abstains when its difference exceeds it. diffs, span_f1 (F1 of its span), no_answer_f1 (1 where it
    has no answer): (n,)."""

    def f1(order: np.ndarray) -> np.ndarray:  # (n + 1,) abstaining on the first k: the F1 it gains
        return np.concatenate([[0.0], np.cumsum(no_answer_f1[order] - span_f1[order])])

    return best_cut(diffs, f1, low=float(diffs.min()) - 2.0, high=float(diffs.max()) + 2.0)


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
    if not predicted or not expected:  # SQuAD v2.0: "no answer" is right only against no answer
        return float(predicted == expected)
    common = sum((collections.Counter(predicted) & collections.Counter(expected)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def squad_scores(predictions: list[str], golds: list[list[str]]) -> dict[str, float]:
    """Exact match and F1 in percent, each the best over a question's gold answers, averaged over questions.

    A question without answers (SQuAD v2.0) has the one gold answer "", so only "" is right for it; then F1 is
    also reported over the questions with and without answers apart, as v2.0's script reports HasAns and NoAns.
    """
    golds = [gold or [""] for gold in golds]
    em = [max(exact_match(p, g) for g in gold) for p, gold in zip(predictions, golds)]
    f1 = question_f1(predictions, golds)
    scores = {"exact_match": 100 * float(np.mean(em)), "f1": 100 * float(np.mean(f1))}
    answerable = np.array([gold != [""] for gold in golds])
    if not answerable.all():
        for name, kept in (("has_answer_f1", answerable), ("no_answer_f1", ~answerable)):
            if kept.any():
                scores[name] = 100 * float(np.mean(f1[kept]))
    return scores


def question_f1(predictions: list[str], golds: list[list[str]]) -> np.ndarray:
    """(n,) each prediction's F1, the best over its gold answers (none: the one gold answer "")."""
    return np.array([max(f1_score(p, g) for g in gold or [""]) for p, gold in zip(predictions, golds)])


# ---------------------------------------------------------------- the task


class QuestionAnsweringTask:
    """SQuAD files for `finetune`: training windows with their answer tokens ([CLS] for none), dev scored by EM/F1.
    With `tune_threshold` (SQuAD v2.0), each dev pass also fits the no-answer threshold, scored as `tuned_`: it
    picks the best epoch and is saved with its model."""

    model_class = BertForQuestionAnswering
    main_metric = "f1"

    @classmethod
    def from_files(cls, record, tokenizer, train, dev, seq_len, cfg, columns: None) -> QuestionAnsweringTask:
        return cls(tokenizer, train, dev, seq_len, cfg.stride, cfg.max_answer_length, cfg.tune_thresholds)

    @staticmethod
    def columns_from(names) -> None:
        """SQuAD's files and `datasets`' tables name their own fields."""
        return None

    @classmethod
    def main_metric_for(cls, record, columns: None, tuned: bool) -> str:
        return f"tuned_{cls.main_metric}" if tuned else cls.main_metric

    def __init__(
        self,
        tokenizer: Tokenizer,
        train_path: str | Path,
        dev_path: str | Path,
        seq_len: int,
        stride: int,
        max_answer_length: int = 30,
        tune_threshold: bool = False,
    ):
        self.max_answer_length = max_answer_length
        self.pad = special_ids(tokenizer).pad
        self.tokenizer = windowing_tokenizer(tokenizer, seq_len, stride, "only_second")
        train, self.dev = read_squad(train_path, training=True), read_squad(dev_path, training=False)
        self.allow_no_answer = any(not q.answers for q in train)
        if not self.allow_no_answer and any(not q.answers for q in self.dev):
            raise UserError(
                f"{dev_path}: has questions without answers (SQuAD v2.0) but {train_path} has none, so the model "
                "would never learn to answer 'no answer'"
            )
        if tune_threshold and not self.allow_no_answer:
            raise UserError(
                f"{train_path}: every question has an answer; --tune-thresholds fits when to answer 'no answer' "
                "(SQuAD v2.0)"
            )
        self.tune_threshold = tune_threshold
        self.main_metric = self.main_metric_for(None, None, tune_threshold)
        for q in self.dev:  # a question too long for a window, told now rather than after an epoch has trained
            windows(self.tokenizer, q.question, q.context[:1])
        self.train_windows, labels = [], []
        for q in train:
            answer = (q.answer_start, q.answer_start + len(q.answers[0])) if q.answers else None
            for encoding in windows(self.tokenizer, q.question, q.context):
                self.train_windows.append(encoding)
                labels.append(answer_tokens(encoding, *answer) if answer else (0, 0))  # no answer: [CLS]
        self.train_labels = torch.tensor(labels, dtype=torch.long)  # (windows, 2)
        self.sizes = {
            "train_questions": len(train),
            "train_questions_without_answer": sum(not q.answers for q in train),
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
        """SQuAD's scores at the pipeline's rule; when tuning, also at the threshold fitted on this pass, which
        it keeps for `saved_config`."""
        items = [(q.question, q.context) for q in self.dev]
        golds = [q.answers for q in self.dev]
        spans, no_answer = answer_candidates(model, self.tokenizer, items, precision, self.max_answer_length)
        default = PIPELINE_NULL_THRESHOLD if self.allow_no_answer else None
        scores = squad_scores([a["answer"] for a in decide(spans, no_answer, default)], golds)
        if self.tune_threshold:
            diffs = np.array([null_score_diff(none, span["score"]) for span, none in zip(spans, no_answer)])
            span_f1 = question_f1([span["answer"] for span in spans], golds)
            self.null_threshold = best_null_threshold(diffs, span_f1, np.array([float(not g) for g in golds]))
            tuned = squad_scores([a["answer"] for a in decide(spans, no_answer, self.null_threshold)], golds)
            scores.update({f"tuned_{k}": v for k, v in tuned.items()})
        return scores

    def saved_config(self) -> dict[str, Any]:
        tuned = {NULL_THRESHOLD_KEY: self.null_threshold} if self.tune_threshold else {}
        return {NO_ANSWER_KEY: self.allow_no_answer, **tuned}

    def summary(self) -> dict[str, Any]:
        return dict(self.sizes)


class Answerer:
    """A fine-tuned QA model: the answer to a question in a context, as the `transformers` pipeline gives it
    (with `handle_impossible_answer` for a model trained on SQuAD v2.0)."""

    def __init__(
        self, path: str | Path, device: str = "cpu", trust_pickle: bool = False, seq_len: int = 384, stride: int = 128
    ):
        files = read_model_files(path)
        directory, config = files.directory, files.raw
        self.allow_no_answer = bool(config.get(NO_ANSWER_KEY, False))
        threshold = config.get(NULL_THRESHOLD_KEY, PIPELINE_NULL_THRESHOLD)
        if not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
            raise UserError(f"{directory / 'config.json'}: {NULL_THRESHOLD_KEY} is {threshold!r}, not a number")
        self.null_threshold = float(threshold) if self.allow_no_answer else None
        _, self.model, tokenizer = load_served(files, BertForQuestionAnswering, trust_pickle)
        self.precision = MixedPrecision(resolve_device(device), "fp32")
        self.model.to(self.precision.device).eval()
        self.tokenizer = windowing_tokenizer(
            tokenizer,
            min(seq_len, max_input_length(tokenizer, self.model.config.max_position_embeddings)),
            stride,
            "only_second",
        )

    def answer(self, question: str, context: str, max_answer_length: int = 15) -> dict[str, Any]:
        """{answer, score, start, end}: the answer text and its character offsets in `context`; "" for none."""
        if not question.strip() or not context.strip():
            raise UserError("give a question and a context")
        return {"question": question, **self.answer_all([(question, context)], max_answer_length)[0]}

    def answer_all(self, items: list[tuple[str, str]], max_answer_length: int = 15) -> list[dict[str, Any]]:
        """`answer` for many (question, context) pairs, their windows sharing batches."""
        return answer_questions(
            self.model, self.tokenizer, items, self.precision, max_answer_length, self.null_threshold
        )
