"""The service's metrics in Prometheus' text format (GET /metrics): requests by endpoint and status, their
latency, the batches the engine ran (texts and tokens each, and how long), the queue's depth and the tokens served.

Counters and histograms are updated in the event loop alone (the batcher records a batch when the engine hands it
back), so they need no lock. Each worker process (`serve --workers N`) keeps its own.
"""

from __future__ import annotations

import bisect
import collections
import time

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
TOKEN_BUCKETS = (16, 64, 256, 1024, 4096, 16384, 65536)


class Histogram:
    def __init__(self, buckets: tuple[float, ...]):
        self.buckets = buckets
        self.counts: dict[tuple[tuple[str, str], ...], list[int]] = collections.defaultdict(
            lambda: [0] * (len(buckets) + 1)
        )
        self.sums: dict[tuple[tuple[str, str], ...], float] = collections.defaultdict(float)

    def observe(self, value: float, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        self.counts[key][bisect.bisect_left(self.buckets, value)] += 1
        self.sums[key] += value

    def lines(self, name: str) -> list[str]:
        out = []
        for key, counts in self.counts.items():
            cumulative = 0
            for bound, count in zip((*self.buckets, "+Inf"), counts):
                cumulative += count
                out.append(f"{name}_bucket{_labels(key, le=str(bound))} {cumulative}")
            out += [f"{name}_sum{_labels(key)} {self.sums[key]}", f"{name}_count{_labels(key)} {cumulative}"]
        return out


class Gauge:
    def __init__(self):
        self.value = 0.0

    def set(self, value: float) -> None:
        self.value = value


class ServiceMetrics:
    def __init__(self):
        self.started = time.time()
        self.requests: collections.Counter[tuple[tuple[str, str], ...]] = collections.Counter()
        self.latency = Histogram(LATENCY_BUCKETS)
        self.batch_texts = Histogram(SIZE_BUCKETS)
        self.batch_tokens = Histogram(TOKEN_BUCKETS)
        self.batch_seconds = Histogram(LATENCY_BUCKETS)
        self.queue_depth = Gauge()
        self.tokens = 0
        self.engine_seconds = 0.0

    def request(self, endpoint: str, status: int, seconds: float) -> None:
        self.requests[(("endpoint", endpoint), ("status", str(status)))] += 1
        self.latency.observe(seconds, endpoint=endpoint)

    def batch(self, texts: int, tokens: int, seconds: float) -> None:
        self.batch_texts.observe(texts)
        self.batch_tokens.observe(tokens)
        self.batch_seconds.observe(seconds)
        self.tokens += tokens
        self.engine_seconds += seconds

    def render(self) -> str:
        """The exposition text, each metric with its HELP and TYPE lines."""
        rate = self.tokens / self.engine_seconds if self.engine_seconds else 0.0
        parts = [
            ("bertforge_requests_total", "counter", "requests answered, by endpoint and status",
             [f"bertforge_requests_total{_labels(key)} {count}" for key, count in self.requests.items()]),
            ("bertforge_request_seconds", "histogram", "time from a request's arrival to its answer",
             self.latency.lines("bertforge_request_seconds")),
            ("bertforge_batch_texts", "histogram", "texts in each engine call",
             self.batch_texts.lines("bertforge_batch_texts")),
            ("bertforge_batch_tokens", "histogram", "tokens in each engine call",
             self.batch_tokens.lines("bertforge_batch_tokens")),
            ("bertforge_batch_seconds", "histogram", "engine time of each call",
             self.batch_seconds.lines("bertforge_batch_seconds")),
            ("bertforge_queue_depth", "gauge", "texts waiting for the engine",
             [f"bertforge_queue_depth {self.queue_depth.value:g}"]),
            ("bertforge_tokens_total", "counter", "tokens the engine has run",
             [f"bertforge_tokens_total {self.tokens}"]),
            ("bertforge_engine_tokens_per_second", "gauge", "tokens a second of engine time, since the start",
             [f"bertforge_engine_tokens_per_second {rate:.1f}"]),
            ("bertforge_uptime_seconds", "gauge", "seconds since the worker started",
             [f"bertforge_uptime_seconds {time.time() - self.started:.1f}"]),
        ]  # fmt: skip
        lines = []
        for name, kind, help_text, samples in parts:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples]
        return "\n".join(lines) + "\n"


def _labels(key: tuple[tuple[str, str], ...], **more: str) -> str:
    pairs = [*key, *more.items()]
    return "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}" if pairs else ""
