"""Dynamic batching: many requests' texts run as one engine call, formed by a token budget and a short wait.

A request's work (one `Work` per text) joins one queue. The engine thread takes the oldest work's group (texts
an engine runs together) and as much more of that group as the token budget holds, once the budget is full or
the oldest has waited `max_wait` seconds; the engine batches those texts by length (no padding past each length
bucket's longest). A request's future is answered when its last text is. So a text waits at most `max_wait` for
company, and the engine sees batches as large as the budget allows under load.

Bounded: the queue holds at most `max_queue_tokens`; a request that would pass it is refused at once (`Full`, a
503 with Retry-After) rather than waiting past any deadline. A request past its deadline, or whose client left,
is `abandon`ed: its texts still queued never run.

One engine thread owns the cores (torch's or ONNX Runtime's threads); the event loop only parses, queues and
answers.
"""

from __future__ import annotations

import asyncio
import collections
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .answers import Work
from .metrics import ServiceMetrics


class Full(Exception):
    """The queue cannot take a request's work: the service answers 503 with Retry-After."""


@dataclass(eq=False)
class Pending:
    """A request's work in flight: its results as they come, and the future its handler awaits."""

    work: list[Work]
    future: asyncio.Future
    results: list[Any] = field(default_factory=list)
    left: int = 0
    abandoned: bool = False
    since: float = field(default_factory=time.monotonic)  # when it was queued

    def __post_init__(self):
        self.results = [None] * len(self.work)
        self.left = len(self.work)


class Batcher:
    def __init__(self, max_batch_tokens: int, max_wait: float, max_queue_tokens: int, metrics: ServiceMetrics):
        self.max_batch_tokens, self.max_wait, self.max_queue_tokens = max_batch_tokens, max_wait, max_queue_tokens
        self.metrics = metrics
        self.queue: collections.deque[tuple[Pending, int]] = collections.deque()  # (request, its work's index)
        self.queued_tokens = 0
        self.arrived = asyncio.Event()
        self.engine = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine")
        self.task: asyncio.Task | None = None
        self.running = 0  # texts in the engine now

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._serve())

    async def stop(self) -> None:
        """After the server stopped taking requests: what was accepted is answered, then the loop ends."""
        while self.queue or self.running:
            await asyncio.sleep(0.01)
        if self.task is not None:
            self.task.cancel()
        self.engine.shutdown(wait=True)

    async def call(self, fn, *args):
        """`fn(*args)` in the engine thread (the warm-up, a probe): nothing else runs there meanwhile."""
        return await asyncio.get_running_loop().run_in_executor(self.engine, fn, *args)

    def submit(self, work: list[Work]) -> Pending:
        """Queue a request's work; `Full` where the queue cannot hold it (it holds any one request when empty)."""
        tokens = sum(w.tokens for w in work)
        if self.queue and self.queued_tokens + tokens > self.max_queue_tokens:
            raise Full()
        pending = Pending(work, asyncio.get_running_loop().create_future())
        self.queue.extend((pending, i) for i in range(len(work)))
        self.queued_tokens += tokens
        self.metrics.queue_depth.set(len(self.queue))
        self.arrived.set()
        return pending

    def abandon(self, pending: Pending) -> None:
        """A request past its deadline or left by its client: its queued texts never run."""
        pending.abandoned = True

    async def _serve(self) -> None:
        while True:
            await self.arrived.wait()
            self.arrived.clear()
            while self.queue:
                await self._fill()
                batch = self._take()
                if batch:
                    await self._run(batch)

    async def _fill(self) -> None:
        """Wait until the budget is full or the oldest text has waited `max_wait`."""
        deadline = self.queue[0][0].since + self.max_wait
        while self.queued_tokens < self.max_batch_tokens and (left := deadline - time.monotonic()) > 0:
            self.arrived.clear()
            try:
                await asyncio.wait_for(self.arrived.wait(), left)
            except TimeoutError:
                break

    def _take(self) -> list[tuple[Pending, int]]:
        """The oldest live work's group, oldest first, up to the token budget (the first text always: one longer
        than the budget runs alone)."""
        batch, tokens, kept = [], 0, collections.deque()
        group = None
        while self.queue:
            pending, index = self.queue.popleft()
            work = pending.work[index]
            if pending.abandoned:
                self.queued_tokens -= work.tokens
                continue
            group = group or work.group
            if work.group != group or (batch and tokens + work.tokens > self.max_batch_tokens):
                kept.append((pending, index))
                continue
            batch.append((pending, index))
            tokens += work.tokens
            self.queued_tokens -= work.tokens
        self.queue.extendleft(reversed(kept))
        self.metrics.queue_depth.set(len(self.queue))
        return batch

    async def _run(self, batch: list[tuple[Pending, int]]) -> None:
        works = [pending.work[index] for pending, index in batch]
        self.running = len(batch)
        started = time.perf_counter()
        try:
            results = await self.call(works[0].run, [w.payload for w in works])
        except Exception as error:  # an engine fault: every request in the batch gets it, the service goes on
            for pending, _ in batch:
                if not pending.future.done():
                    pending.future.set_exception(error)
            return
        finally:
            self.running = 0
        self.metrics.batch(len(works), sum(w.tokens for w in works), time.perf_counter() - started)
        for (pending, index), result in zip(batch, results):
            pending.results[index] = result
            pending.left -= 1
            if pending.left == 0 and not pending.future.done():
                pending.future.set_result(pending.results)
