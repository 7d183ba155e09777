"""`bertforge serve`: the service (app.py) on uvicorn, in one process or in several sharing the port.

The model is loaded, and a bad directory refused in one line, before the port is opened; with `--port 0` the
socket is bound first and its port printed, so scripts and tests learn where to connect. On SIGTERM or Ctrl-C
uvicorn stops taking connections, the requests accepted are answered (the batcher drains its queue), and the
process exits 0: a service stopping is its normal end, not a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import threading
from pathlib import Path

import uvicorn
from uvicorn.supervisors import Multiprocess

from ..errors import UserError
from .config import ServeConfig

WORKER_SETTINGS = "BERTFORGE_SERVE"  # the environment variable that hands each worker its model and settings


def serve(model: str | Path, config: ServeConfig) -> None:
    """Serve `model` until stopped."""
    threads = config.threads or max(1, _cores() // config.workers)
    listener = _bind(config.host, config.port)
    host, port = listener.getsockname()[:2]
    if config.workers == 1:
        app = _app(model, config, threads)  # loaded (or refused) before the first connection is taken
        print(f"serving {model} on http://{host}:{port} ({threads} threads)", file=sys.stderr, flush=True)
        server = QuietServer(_uvicorn_config(app, config))
        server.run(sockets=[listener])
        return
    from ..modelfiles.directory import read_model_files

    read_model_files(model)  # a bad directory is one line here, not one in each worker
    os.environ[WORKER_SETTINGS] = json.dumps({"model": str(model), "config": config.to_dict(), "threads": threads})
    uvicorn_config = _uvicorn_config("bertforge.service.server:worker_app", config, workers=config.workers)
    print(f"serving {model} on http://{host}:{port} ({config.workers} workers of {threads} threads)",
          file=sys.stderr, flush=True)  # fmt: skip
    Multiprocess(uvicorn_config, sockets=[listener]).run()


def worker_app():
    """A worker process's application (uvicorn's factory): the model and settings the parent handed it."""
    settings = json.loads(os.environ[WORKER_SETTINGS])
    return _app(settings["model"], ServeConfig.from_dict(settings["config"]), settings["threads"])


class QuietServer(uvicorn.Server):
    """uvicorn's server, whose graceful stop on a signal is the process's normal end (exit 0): uvicorn re-raises the
    signal once it has stopped, which would end the process as killed by it."""

    @contextlib.contextmanager
    def capture_signals(self):
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {number: signal.signal(number, self.handle_exit) for number in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for number, handler in original.items():
                signal.signal(number, handler)


def _app(model, config: ServeConfig, threads: int):
    import torch

    from .app import Service, create_app

    torch.set_num_threads(threads)
    return create_app(Service(model, config))


def _uvicorn_config(app, config: ServeConfig, workers: int | None = None) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        workers=workers,
        factory=isinstance(app, str),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=int(config.timeout) + 5,  # an accepted request has its timeout to be answered
        timeout_keep_alive=5,
    )


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: h11 writes a response's head and body apart, and Nagle's algorithm held the
    # body for the client's delayed ACK, 40 ms a request on a kept-alive connection.
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        listener.bind((host, port))
    except OSError as e:
        listener.close()
        raise UserError(f"cannot listen on {host}:{port} ({e.strerror or e})") from None
    listener.listen(2048)
    listener.set_inheritable(True)
    return listener


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
