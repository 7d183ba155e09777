"""What a served model answers: one object per answer kind, owning its engine, its endpoints' request and response
schemas, and the batched call the service's one engine thread makes.

    Embeddings        an encoder, a sentence-embedding model, a masked LM's encoder:
                      POST /v1/embeddings (OpenAI's), /embed (text-embeddings-inference's), /rerank (by cosine)
    Blanks            a masked LM: POST /fill-mask
    Classifications   a classifier: POST /classify (texts or pairs), /rerank (a cross-encoder's scores)
    Tags              a tagger: POST /tag
    Spans             a question-answering model: POST /answer

A kind serves the models whose architecture record answers one of its `serves` (families/architectures.py), so a
masked LM gets Embeddings and Blanks, a classifier Classifications. Parsing a request (`Job`) runs in the event
loop: it checks the body (schema.py), applies the model's prompt, and tokenizes, so that the batcher knows each
text's tokens; the engine's work (`Work.run`) runs in the engine thread on a batch of many requests' texts; the
response is built from the results back in the event loop. A fault of one text (a fill-mask text without a mask)
is that request's 422, never its batch's.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError
from ..families.architectures import ENCODER, MASKED_LM, SEQUENCE, SPANS, TOKENS
from ..inference import Bert, shaped
from ..tasks.classification import Classifier
from ..tasks.qa import Answerer
from ..tasks.tagging import Tagger
from ..tokenizer import MASK, special_tokens
from .schema import Invalid, Limits, choice, fields, flag, integer, text, texts

# Texts per forward pass inside one engine call: all-MiniLM-L6-v2's int8 export embedded 591 SST-2 sentences a
# second in passes of 32 and 445 in passes of 256 (more padding, past the caches), 2-core Xeon with VNNI, 2026-12-06.
ENGINE_BATCH = 32


@dataclass
class Work:
    """One text's (or pair's) share of an engine call: works of one `group` run together, `run(payloads)` giving
    one result per payload in order; `tokens` is what it costs the batch's token budget."""

    group: tuple[str, ...]
    tokens: int
    payload: Any
    run: Callable[[list[Any]], list[Any]] = field(repr=False)


@dataclass
class Job:
    """A parsed request: the work it needs, and how its results (one per work, in order) become the response."""

    work: list[Work]
    respond: Callable[[list[Any]], Any]


class Failed:
    """One text's fault, found in the engine thread: its request answers 422 with the line."""

    def __init__(self, message: str):
        self.message = message


def each(answer: Callable[[Any], Any]) -> Callable[[list[Any]], list[Any]]:
    """A call of one input made a batch's call, one input's UserError kept as its result, not the batch's."""

    def run(payloads: list[Any]) -> list[Any]:
        results = []
        for payload in payloads:
            try:
                results.append(answer(payload))
            except UserError as e:
                results.append(Failed(str(e)))
        return results

    return run


def unfailed(results: list[Any]) -> list[Any]:
    failed = next((r for r in results if isinstance(r, Failed)), None)
    if failed is not None:
        raise Invalid(failed.message)
    return results


def load_bert(directory: Path, precision: str) -> Bert:
    return Bert.load(directory, precision=precision)


class Embeddings:
    """Vectors: OpenAI's embeddings endpoint and TEI's, and re-ranking by cosine. Each text gets the model's prompt
    as sentence-transformers' encode gives it (the default, or `prompt_name`); texts longer than the model reads are
    cut to it, as sentence-transformers cuts them. `dimensions` cuts vectors Matryoshka-style, unit length again
    where the model's are."""

    serves = (ENCODER, MASKED_LM)
    engine = staticmethod(load_bert)  # the kinds that share it load it once

    def __init__(self, bert: Bert, model_name: str, limits: Limits):
        self.bert, self.model_name, self.limits = bert, model_name, limits
        self.width = bert.model.config.hidden_size * len(bert.pooling_modes)

    def warm_up(self) -> Job:
        return self.openai({"input": "The first call pays for what every later one reuses."})

    @property
    def routes(self) -> dict[str, Callable[[Any], Job]]:
        return {"/v1/embeddings": self.openai, "/embed": self.tei, "/rerank": self.rerank}

    def info(self) -> dict[str, Any]:
        sentence = self.bert.sentence
        return {
            "dimensions": self.width,
            "pooling": list(self.bert.pooling_modes),
            "normalized": self.bert.unit_vectors,
            "prompts": dict(sentence.prompts) if sentence is not None else {},
            "default_prompt_name": sentence.default_prompt if sentence is not None else None,
            "precision": self.bert.precision,
        }

    def _work(self, values: list[str], prompt: str | None = None, role: str | None = None) -> list[Work]:
        try:
            prompted = self.bert.prompted(values, prompt, role)
        except UserError as e:
            raise Invalid(str(e)) from None
        encoded = self.bert.batcher.encode(prompted)
        return [Work(("vectors",), len(ids), (ids, types), self._vectors) for ids, types in encoded]

    def _vectors(self, payloads: list[Any]) -> list[np.ndarray]:
        """A batch's vectors, run ENGINE_BATCH texts of like length at a time."""
        return list(self.bert.vectors(payloads, batch_size=ENGINE_BATCH))

    def _dimensions(self, value: Any) -> int | None:
        return None if value is None else integer(value, "dimensions", 1, self.width)

    def openai(self, body: Any) -> Job:
        """OpenAI's /v1/embeddings: {input, model, encoding_format, dimensions, user}, and `prompt_name` beside
        them (the openai client's extra_body)."""
        body = fields(body, ("input",), ("model", "encoding_format", "dimensions", "user", "prompt_name"))
        if isinstance(body["input"], list) and body["input"] and not isinstance(body["input"][0], str):
            raise Invalid("input must be text: token ids are not taken (the service tokenizes with the model's own)")
        values = texts(body["input"], "input", self.limits)
        encoding = choice(body.get("encoding_format", "float"), "encoding_format", ("float", "base64"))
        dimensions = self._dimensions(body.get("dimensions"))
        work = self._work(values, body.get("prompt_name"))

        def respond(vectors: list[np.ndarray]) -> dict[str, Any]:
            rows = shaped(np.stack(vectors), dimensions, self.bert.unit_vectors)  # (n, D)
            data = [
                {"object": "embedding", "index": i, "embedding": _encoded(row, encoding)} for i, row in enumerate(rows)
            ]
            tokens = sum(w.tokens for w in work)
            return {
                "object": "list",
                "data": data,
                "model": body.get("model") or self.model_name,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }

        return Job(work, respond)

    def tei(self, body: Any) -> Job:
        """text-embeddings-inference's /embed: {inputs, normalize (true), truncate, prompt_name, dimensions} ->
        a list of vectors. Texts are always cut to the model's length (truncate is accepted, not required)."""
        body = fields(body, ("inputs",), ("normalize", "truncate", "prompt_name", "dimensions", "truncation_direction"))
        values = texts(body["inputs"], "inputs", self.limits)
        normalize = flag(body.get("normalize", True), "normalize")
        if "truncate" in body:
            flag(body["truncate"], "truncate")
        if body.get("truncation_direction", "Right") != "Right":
            raise Invalid("truncation_direction must be Right: texts are cut at their end")
        dimensions = self._dimensions(body.get("dimensions"))
        work = self._work(values, body.get("prompt_name"))
        return Job(work, lambda vectors: shaped(np.stack(vectors), dimensions, normalize))

    def rerank(self, body: Any) -> Job:
        """TEI's /rerank by cosine: {query, texts, return_text, raw_scores, truncate} -> [{index, score, text?}],
        best first; the query read with the model's query prompt, the texts with its document prompt."""
        query, documents, ranking = Ranking.read(body, self.limits)
        work = self._work([query], role="query") + self._work(documents, role="document")

        def respond(vectors: list[np.ndarray]) -> list[dict[str, Any]]:
            rows = shaped(np.stack(vectors), unit=True)  # (1 + n, D): cosines as dot products
            return ranking.ranked((rows[1:] @ rows[0]).tolist(), documents)

        return Job(work, respond)


class Blanks:
    """A masked LM's answers: POST /fill-mask {inputs, top_k} -> per text, per [MASK] (or the model's own mask
    token), the top_k tokens with their scores, as `bertforge fill-mask --json` gives them."""

    serves = (MASKED_LM,)
    engine = staticmethod(load_bert)

    def __init__(self, bert: Bert, model_name: str, limits: Limits):
        self.bert, self.limits = bert, limits
        self.mask = special_tokens(bert.tokenizer)["mask"]

    def warm_up(self) -> Job:
        return self.fill_mask({"inputs": f"The first call pays for {MASK} every later one reuses."})

    @property
    def routes(self) -> dict[str, Callable[[Any], Job]]:
        return {"/fill-mask": self.fill_mask}

    def info(self) -> dict[str, Any]:
        return {"mask_token": self.mask}

    def fill_mask(self, body: Any) -> Job:
        body = fields(body, ("inputs",), ("top_k",))
        values = texts(body["inputs"], "inputs", self.limits)
        top_k = integer(body.get("top_k", 5), "top_k", 1, 100)
        for i, value in enumerate(values):
            if MASK not in value and self.mask not in value:
                raise Invalid(f"inputs[{i}] has no {MASK} to fill")
        run = each(lambda value: dict(self.bert.fill_mask(value, top_k)))
        work = [Work(("fill-mask", str(top_k)), len(v.split()) + 2, v, run) for v in values]
        return Job(work, lambda results: [r["masks"] for r in unfailed(results)])


class Classifications:
    """A classifier's answers: POST /classify {inputs: texts, or [text, pair] pairs} -> per input every label and
    its probability, best first (a regression model's value); POST /rerank {query, texts} -> the texts by the
    probability of the relevant label (its `label`, "1" by default) read as (query, text) pairs: a cross-encoder."""

    serves = (SEQUENCE,)

    def __init__(self, classifier: Classifier, model_name: str, limits: Limits):
        self.classifier, self.limits = classifier, limits

    @staticmethod
    def engine(directory: Path, precision: str) -> Classifier:
        return Classifier(directory)

    def warm_up(self) -> Job:
        return self.classify({"inputs": "The first call pays for what every later one reuses."})

    @property
    def routes(self) -> dict[str, Callable[[Any], Job]]:
        return {"/classify": self.classify, "/rerank": self.rerank}

    def info(self) -> dict[str, Any]:
        return {"labels": self.classifier.labels, "problem_type": self.classifier.problem_type}

    def _work(self, first: list[str], second: list[str] | None) -> list[Work]:
        encoded = self.classifier.batcher.encode(first, second)
        group = ("classify", "pairs" if second is not None else "texts")
        payloads = zip(first, second) if second is not None else ((value, None) for value in first)
        return [Work(group, len(ids), payload, self._classify) for (ids, _), payload in zip(encoded, payloads)]

    def _classify(self, payloads: list[tuple[str, str | None]]) -> list[dict[str, Any]]:
        first = [a for a, _ in payloads]
        second = [b for _, b in payloads] if payloads[0][1] is not None else None
        return self.classifier.classify(first, second)

    def classify(self, body: Any) -> Job:
        body = fields(body, ("inputs",), ("raw_scores", "truncate"))
        inputs = body["inputs"]
        if isinstance(inputs, list) and inputs and all(isinstance(pair, list) for pair in inputs):
            if len(inputs) > self.limits.max_texts or not all(len(pair) == 2 for pair in inputs):
                raise Invalid(f"inputs must be at most {self.limits.max_texts:,} [text, pair] pairs")
            first = [text(a, f"inputs[{i}][0]", self.limits) for i, (a, _) in enumerate(inputs)]
            second = [text(b, f"inputs[{i}][1]", self.limits) for i, (_, b) in enumerate(inputs)]
        else:
            first, second = texts(inputs, "inputs", self.limits), None
        return Job(self._work(first, second), lambda results: [_labelled(r) for r in results])

    def rerank(self, body: Any) -> Job:
        query, documents, ranking = Ranking.read(body, self.limits, ("label",))
        try:
            label = self.classifier.relevant_label(body.get("label"))
        except UserError as e:
            raise Invalid(str(e)) from None

        def respond(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
            scores = [r["value"] if label is None else r["probabilities"][label] for r in results]
            return ranking.ranked(scores, documents)

        return Job(self._work([query] * len(documents), documents), respond)


class Tags:
    """A tagger's answers: POST /tag {inputs} -> per text its entities (or words) with their tags, scores and
    character spans, as `bertforge tag --json` gives them."""

    serves = (TOKENS,)

    def __init__(self, tagger: Tagger, model_name: str, limits: Limits):
        self.tagger, self.limits = tagger, limits

    @staticmethod
    def engine(directory: Path, precision: str) -> Tagger:
        return Tagger(directory)

    def warm_up(self) -> Job:
        return self.tag({"inputs": "The first call pays for what every later one reuses."})

    @property
    def routes(self) -> dict[str, Callable[[Any], Job]]:
        return {"/tag": self.tag}

    def info(self) -> dict[str, Any]:
        return {"tags": self.tagger.tags}

    def tag(self, body: Any) -> Job:
        body = fields(body, ("inputs",))
        values = texts(body["inputs"], "inputs", self.limits)
        lengths = [len(encoding.ids) for encoding in self.tagger.tokenizer.encode_batch(values)]
        run = each(self.tagger.tag)
        work = [Work(("tag",), n, value, run) for n, value in zip(lengths, values)]
        return Job(work, unfailed)


class Spans:
    """A reader's answers: POST /answer {question, context} or {inputs: [{question, context}, ...]} -> the answer
    text, its score and character span in the context ("" where a SQuAD 2.0 model finds none)."""

    serves = (SPANS,)

    def __init__(self, answerer: Answerer, model_name: str, limits: Limits):
        self.answerer, self.limits = answerer, limits

    @staticmethod
    def engine(directory: Path, precision: str) -> Answerer:
        return Answerer(directory)

    def warm_up(self) -> Job:
        return self.answer({"question": "What does the first call pay for?", "context": "What later calls reuse."})

    @property
    def routes(self) -> dict[str, Callable[[Any], Job]]:
        return {"/answer": self.answer}

    def info(self) -> dict[str, Any]:
        return {"no_answer": self.answerer.allow_no_answer}

    def answer(self, body: Any) -> Job:
        body = fields(body, (), ("question", "context", "inputs", "max_answer_length"))
        single = "inputs" not in body
        items = [{"question": body.get("question"), "context": body.get("context")}] if single else body["inputs"]
        if not isinstance(items, list) or not items or len(items) > self.limits.max_texts:
            raise Invalid(f"inputs must be a list of 1 to {self.limits.max_texts:,} {{question, context}} objects")
        pairs = []
        for i, item in enumerate(items):
            item = fields(item, ("question", "context"))
            pairs.append((text(item["question"], f"inputs[{i}].question", self.limits),
                          text(item["context"], f"inputs[{i}].context", self.limits)))  # fmt: skip
        longest = integer(body.get("max_answer_length", 15), "max_answer_length", 1, 512)
        run = each(lambda pair: self.answerer.answer_all([pair], longest)[0])
        work = [Work(("answer", str(longest)), len(q.split()) + len(c.split()), (q, c), run) for q, c in pairs]
        return Job(work, lambda results: unfailed(results)[0] if single else unfailed(results))


KINDS = (Embeddings, Blanks, Classifications, Tags, Spans)


def _encoded(row: np.ndarray, encoding: str) -> np.ndarray | str:
    """A vector as OpenAI's API gives it: floats, or base64 of its float32 bytes (little-endian)."""
    if encoding == "base64":
        return base64.b64encode(row.astype("<f4").tobytes()).decode("ascii")
    return row  # (D,), serialised as it is (app.FastJSON)


@dataclass(frozen=True)
class Ranking:
    """A /rerank request's answer settings, TEI's: the best `top_n` texts, with their text where `keep`."""

    keep: bool
    top_n: int

    @classmethod
    def read(cls, body: Any, limits: Limits, more: tuple[str, ...] = ()) -> tuple[str, list[str], Ranking]:
        """(the query, the texts, how to answer) from a /rerank body taking `more` fields beside TEI's."""
        body = fields(body, ("query", "texts"), ("return_text", "raw_scores", "truncate", "top_n", *more))
        query, documents = text(body["query"], "query", limits), texts(body["texts"], "texts", limits)
        keep = flag(body.get("return_text", False), "return_text")
        return query, documents, cls(keep, integer(body.get("top_n", len(documents)), "top_n", 1, len(documents)))

    def ranked(self, scores: list[float], documents: list[str]) -> list[dict[str, Any]]:
        order = sorted(range(len(scores)), key=lambda i: -scores[i])[: self.top_n]
        return [{"index": i, "score": float(scores[i]), **({"text": documents[i]} if self.keep else {})} for i in order]


def _labelled(result: dict[str, Any]) -> list[dict[str, Any]] | dict[str, Any]:
    """A classification as TEI's /predict gives it: every label with its score, best first; a value alone for
    regression."""
    if "value" in result:
        return {"value": result["value"]}
    probabilities = result["probabilities"]
    return [{"label": label, "score": p} for label, p in sorted(probabilities.items(), key=lambda item: -item[1])]
