"""The service: a model's answers over HTTP, on Starlette (an ASGI application that uvicorn runs: server.py).

    POST  each answer kind's endpoints (answers.py): /v1/embeddings, /embed, /rerank, /fill-mask, /classify, /tag,
          /answer, as the model's architecture answers
    GET   /health   200 once the engine has warmed up, 503 before
    GET   /metrics  Prometheus' text format (metrics.py)
    GET   /info     the model: family, class, precision, length, prompts, dimensions, labels, the export's check

Every request is bounded before work is queued: its body's bytes (413), JSON that parses as UTF-8 (400), the
fields its endpoint takes and their types (422), its texts and their characters (413). A full queue answers 503
with Retry-After, a request past --timeout 504, a client that left is dropped with its queued work. Every error
is one JSON object, {"error": {"message", "type", "code"}}, as OpenAI's API answers them; never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ..errors import UserError
from ..families import family_of
from ..modelfiles.directory import read_model_files
from ..modelfiles.exported import export_facts
from ..modelfiles.origin import read_origin
from ..serving.export import what_it_answers
from ..tokenizer import load_tokenizer, max_input_length
from .answers import KINDS
from .batching import Batcher, Full
from .config import ServeConfig
from .metrics import ServiceMetrics
from .schema import Invalid, Limits

log = logging.getLogger("bertforge.serve")
ERROR_TYPES = {400: "invalid_request_error", 404: "not_found", 405: "method_not_allowed", 413: "request_too_large",
               422: "invalid_request_error", 500: "server_error", 503: "overloaded", 504: "timeout"}  # fmt: skip


class Service:
    """A model directory (or an export) loaded once, the answer kinds its architecture answers, and the batcher
    their work goes through."""

    def __init__(self, model: str | Path, config: ServeConfig):
        self.config = config
        files = read_model_files(model)
        self.directory = files.directory
        self.answers = _answers(files)
        limits = Limits(config.max_texts, config.max_characters)
        name = config.model_name or self.directory.name
        engines: dict[type, Any] = {}
        self.kinds = [
            kind(_engine(kind, self.directory, config, engines), name, limits)
            for kind in KINDS
            if self.answers in kind.serves
        ]
        if not self.kinds:
            raise UserError(f"{self.directory}: a {self.answers} model, which no endpoint of the service answers")
        self.routes = {path: handler for kind in self.kinds for path, handler in kind.routes.items()}
        self.facts = _facts(files, self.answers, name)
        self.metrics = ServiceMetrics()
        self.batcher: Batcher | None = None
        self.ready = False

    @contextlib.asynccontextmanager
    async def lifespan(self, app):
        """Start the batcher, warm the engine with one call of each kind (its first call pays for allocations and
        the graph's optimisation), then answer; at shutdown, answer what was accepted first."""
        config = self.config
        self.batcher = Batcher(config.max_batch_tokens, config.max_wait_ms / 1000, config.max_queue_tokens,
                               self.metrics)  # fmt: skip
        self.batcher.start()
        for kind in self.kinds:
            for work_ in kind.warm_up().work[:1]:
                await self.batcher.call(work_.run, [work_.payload])
        self.ready = True
        try:
            yield
        finally:
            self.ready = False
            await self.batcher.stop()

    def info(self) -> dict[str, Any]:
        config = self.config
        batching = {"max_batch_tokens": config.max_batch_tokens, "max_wait_ms": config.max_wait_ms,
                    "max_queue_tokens": config.max_queue_tokens, "timeout": config.timeout}  # fmt: skip
        limits = {"max_body_bytes": config.max_body_bytes, "max_texts": config.max_texts,
                  "max_characters": config.max_characters}  # fmt: skip
        answers = {}
        for kind in self.kinds:
            answers.update(kind.info())
        return {**self.facts, **answers, "endpoints": sorted(self.routes), "batching": batching, "limits": limits}

    async def answer(self, request: Request) -> Response:
        """A POST to one of the kinds' endpoints: parsed, queued, awaited, answered."""
        started = time.perf_counter()
        path, status = request.url.path, 200
        try:
            if not self.ready:
                raise Invalid("the model is still warming up", 503)
            body = _parse(await _body(request, self.config.max_body_bytes))
            job = self.routes[path](body)
            try:
                pending = self.batcher.submit(job.work)
            except Full:
                raise Invalid("the queue is full; retry shortly", 503) from None
            results = await self._wait(pending, request)
            if results is None:
                status = 499  # the client left: nothing to answer
                return Response(status_code=499)
            response: Response = FastJSON(job.respond(results))
        except Invalid as e:
            status = e.status
            response = error(e.status, str(e))
        except UserError as e:  # what the engine found wrong with the model's answer
            status = 500
            response = error(500, str(e))
        finally:
            self.metrics.request(path, status, time.perf_counter() - started)
        return response

    async def _wait(self, pending, request: Request) -> list[Any] | None:
        """The request's results; None where its client left first; 504 past the timeout. Either way its work still
        queued is dropped."""
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            done, _ = await asyncio.wait({pending.future, gone}, timeout=self.config.timeout,
                                         return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        finally:
            gone.cancel()
        if pending.future.done():
            return pending.future.result()
        self.batcher.abandon(pending)
        if gone in done:
            return None
        raise Invalid(f"no answer within {self.config.timeout:g} s", 504)


def create_app(service: Service) -> Starlette:
    async def health(request: Request) -> Response:
        if not service.ready:
            return error(503, "warming up")
        return JSONResponse({"status": "ok"})

    async def metrics(request: Request) -> Response:
        return PlainTextResponse(service.metrics.render(), media_type="text/plain; version=0.0.4")

    async def info(request: Request) -> Response:
        return JSONResponse(service.info())

    routes = [Route(path, service.answer, methods=["POST"]) for path in service.routes]
    routes += [Route("/health", health), Route("/metrics", metrics), Route("/info", info)]
    return Starlette(
        routes=routes,
        lifespan=service.lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
    )


class FastJSON(JSONResponse):
    """JSON by orjson, numpy arrays as they are: a 64-vector answer of all-MiniLM-L6-v2's 384 floats took 27 ms
    with the json module (17 digits a float32) and takes 1.4 ms, in half the bytes (a float32's shortest repr)."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)


def error(status: int, message: str) -> JSONResponse:
    """One JSON error, as OpenAI's API gives them; a 503 says when to come back."""
    headers = {"Retry-After": "1"} if status == 503 else None
    kind = ERROR_TYPES.get(status, "invalid_request_error")
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status, headers=headers)


async def _http_error(request: Request, exc: HTTPException) -> Response:
    return error(exc.status_code, exc.detail if isinstance(exc.detail, str) else "request refused")


async def _server_error(request: Request, exc: Exception) -> Response:
    log.exception("unexpected fault answering %s", request.url.path)
    return error(500, "the service failed on this request; it goes on answering others")


async def _body(request: Request, limit: int) -> bytes:
    """The body's bytes, refused from its Content-Length, or as soon as it passes `limit` while it streams."""
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > limit):
        raise Invalid(f"the body is larger than the service takes ({limit:,} bytes)", 413)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise Invalid(f"the body is larger than the service takes ({limit:,} bytes)", 413)
        chunks.append(chunk)
    return b"".join(chunks)


def _parse(data: bytes) -> Any:
    """JSON in UTF-8, strictly (orjson: no NaN or Infinity, integers within 64 bits, nesting bounded)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise Invalid("the body is not UTF-8", 400) from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise Invalid(f"the body is not JSON ({str(e)[:80]})", 400) from None


async def _disconnected(request: Request) -> None:
    """Returns when the client has gone (its body read already, the server's next message is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _answers(files) -> str:
    """What the directory's model answers: its export's kind, or its class's record's (a masked LM without its
    head, a bare encoder: its encoder's)."""
    if files.exported:
        return str(export_facts(files.raw).get("answers"))
    origin = read_origin(files)
    record, _ = what_it_answers(files.directory, files.raw, files.config, origin)
    return record.answers


def _engine(kind: type, directory: Path, config: ServeConfig, engines: dict[Any, Any]) -> Any:
    """The engine a kind answers with, loaded once (Embeddings and Blanks share a masked LM's)."""
    if kind.engine not in engines:
        engines[kind.engine] = kind.engine(directory, config.precision)
    return engines[kind.engine]


def _facts(files, answers: str, name: str) -> dict[str, Any]:
    """What /info says of the model beside its kinds' own: its family and class, precision, the longest input it
    reads, and an export's check against PyTorch (difference, agreement, cosine)."""
    config = files.config
    export = export_facts(files.raw)
    tokenizer = load_tokenizer(files.directory, files.raw)
    check = {key: export[key] for key in ("max_difference", "agreement", "cosine", "texts") if key in export}
    return {
        "model": name,
        "directory": str(files.directory),
        "family": family_of(config).title,
        "architecture": files.architecture,
        "answers": answers,
        "engine": "onnxruntime" if files.exported else "pytorch",
        **({"precision": export.get("precision", "fp32")} if files.exported else {}),
        "max_input_tokens": max_input_length(tokenizer, config.max_position_embeddings),
        "hidden_size": config.hidden_size,
        **({"export_check": check} if check else {}),
    }
