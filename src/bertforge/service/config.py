"""How `bertforge serve` runs: where it listens, how it batches, and what one request may ask for."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import Configurable, check_choices, documented, require


@dataclass
class ServeConfig(Configurable):
    """The service's settings: each a flag of `bertforge serve`."""

    host: str = documented("127.0.0.1", "address to listen on (0.0.0.0: every interface)")
    port: int = documented(
        8080, "port to listen on (0: any free one, printed when listening)", at_least=0, at_most=65535
    )
    workers: int = documented(
        1, "processes sharing the port, each with the model loaded and the cores shared out", at_least=1, at_most=64
    )
    threads: int = documented(0, "threads each worker's engine computes with (0: the cores / workers)", at_least=0)
    precision: str = documented(
        "fp32",
        "a PyTorch model's precision: fp32, bf16, or auto (bf16 where the CPU is measured fast at it)",
        ("fp32", "bf16", "auto"),
    )
    max_batch_tokens: int = documented(
        8192, "tokens one engine call may hold: requests' texts are batched up to it", at_least=1
    )
    max_wait_ms: float = documented(
        2.0, "longest a text waits for company before its batch runs, in milliseconds", at_least=0.0, at_most=10000.0
    )
    max_queue_tokens: int = documented(
        262144, "tokens waiting at most: a request past it is answered 503 with Retry-After", at_least=1
    )
    timeout: float = documented(30.0, "seconds a request may take before it is answered 504", at_least=0.001)
    max_body_bytes: int = documented(4 << 20, "largest request body, in bytes (413 past it)", at_least=64)
    max_texts: int = documented(2048, "texts (or pairs, documents) one request may hold (413 past it)", at_least=1)
    max_characters: int = documented(
        100_000,
        "characters one text may hold (413 past it); a text longer than the model reads is cut to it",
        at_least=1,
    )
    model_name: str = documented("", "the model's name in answers (OpenAI's `model`; default: its directory's name)")

    def __post_init__(self) -> None:
        require(check_choices(self), "serve")
