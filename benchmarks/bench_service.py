"""`bertforge serve` under load on loopback, against infinity-emb serving the same model, in one run on one CPU.

    python benchmarks/bench_service.py --model MINILM --int8 MINILM-int8 --infinity-python .inf-env/bin/python
    python benchmarks/bench_service.py --model MINILM --int8 MINILM-int8 --soak 600     # the 10-minute soak

Each contender is a server in its own process, warmed up, then driven by wrk (one thread, so the load generator
takes little of the cores the servers share with it) at each --concurrency for --duration seconds: every request
one SST-2 dev sentence (the clients a dynamic batcher is for), bodies rotated. For each point: requests a second,
sentences a second, latency p50 / p99 (wrk's), and non-2xx answers. Before the load, 200 sentences are embedded
through the server and compared with sentence-transformers' fp32 vectors (median and least cosine), so no speed is
bought with a wrong answer.

    bertforge            bertforge serve MODEL (PyTorch, fp32)
    bertforge int8       bertforge serve on `bertforge export --quantize int8`'s directory (ONNX Runtime)
    infinity             infinity-emb v2 (its torch engine, dynamic batching), in the environment --infinity-python
                         names (its pins clash with ours: a venv of its own)

--soak S runs `bertforge int8` (or `bertforge`) at concurrency 64 for S seconds while a second client sends
hostile requests (bodies past the limit, malformed JSON, non-UTF-8, unknown fields, slow bodies, clients that
vanish mid-request, floods past the queue); it samples the server's resident memory every 10 s, reads its
/metrics for every status it answered, then sends SIGTERM with requests in flight and reports the exit code.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine_description  # noqa: E402

WRK_SCRIPT = """
bodies = {}
for line in io.lines(os.getenv("BODIES")) do bodies[#bodies + 1] = line end
counter = 0
request = function()
  counter = counter + 1
  return wrk.format("POST", os.getenv("ENDPOINT"), {["Content-Type"] = "application/json"},
                    bodies[(counter % #bodies) + 1])
end
"""


def sentences(data: Path) -> list[str]:
    with open(data / "glue" / "SST-2" / "dev.tsv", encoding="utf-8", newline="") as f:
        return [row["sentence"] for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Contender:
    def __init__(self, name: str, command: list[str], port: int, endpoint: str, env: dict | None = None):
        self.name, self.command, self.port, self.endpoint, self.env = name, command, port, endpoint, env
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, log: Path) -> None:
        self.process = subprocess.Popen(self.command, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                                        env={**os.environ, **(self.env or {})})  # fmt: skip
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"{self.name} exited: see {log}")
            try:
                self.embed(["warm up"] * 4)
                return
            except OSError:
                time.sleep(0.5)
        raise SystemExit(f"{self.name} did not answer in 300 s: see {log}")

    def embed(self, texts: list[str]) -> np.ndarray:
        body = json.dumps({"input": texts, "model": "model", "encoding_format": "float"}).encode()
        request = urllib.request.Request(self.url + self.endpoint, body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            return np.array([row["embedding"] for row in json.loads(response.read())["data"]])

    def stop(self) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return None


def load(contender: Contender, bodies: Path, concurrency: int, duration: int) -> dict:
    """wrk at `concurrency` connections for `duration` seconds: its requests a second, p50/p99, non-2xx."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(WRK_SCRIPT)
    command = ["wrk", "-t1", f"-c{concurrency}", f"-d{duration}s", "--latency", "--timeout", "30s", "-s",
               script.name, contender.url]  # fmt: skip
    env = {**os.environ, "BODIES": str(bodies), "ENDPOINT": contender.endpoint}
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout
    os.unlink(script.name)

    def latency(percent: str) -> float:
        value, unit = re.search(rf"^\s+{percent}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M).groups()
        return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]

    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    return {"contender": contender.name, "concurrency": concurrency, "requests_per_s": rate,
            "p50_ms": latency("50"), "p99_ms": latency("99"), "non_2xx": int(bad.group(1)) if bad else 0,
            "socket_errors": errors.group(1) if errors else ""}  # fmt: skip


def cosines(contender: Contender, texts: list[str], reference: np.ndarray) -> tuple[float, float]:
    got = np.concatenate([contender.embed(texts[i : i + 32]) for i in range(0, len(texts), 32)])
    got /= np.linalg.norm(got, axis=1, keepdims=True)
    values = (got * reference).sum(1)
    return float(np.median(values)), float(values.min())


def contenders(args) -> list[Contender]:
    serve = [sys.executable, "-m", "bertforge", "serve"]
    found = [Contender("bertforge", [*serve, args.model, "--port", str(port := free_port())], port, "/v1/embeddings")]
    if args.int8:
        port = free_port()
        found.append(Contender("bertforge int8", [*serve, args.int8, "--port", str(port)], port, "/v1/embeddings"))
    if args.infinity_python:
        port = free_port()
        command = [args.infinity_python, "-m", "infinity_emb.cli", "v2", "--model-id", str(args.model), "--port",
                   str(port), "--engine", "torch", "--device", "cpu", "--batch-size", "32"]  # fmt: skip
        found.append(
            Contender(
                "infinity", command, port, "/embeddings", {"HF_HUB_OFFLINE": "1", "INFINITY_ANONYMOUS_USAGE_STATS": "0"}
            )
        )  # noqa: E501
    return [c for c in found if not args.only or c.name in args.only.split(",")]


def race(args, texts: list[str], scratch: Path) -> None:
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(args.model), device="cpu").encode(texts[:200], normalize_embeddings=True)
    bodies = scratch / "bodies.jsonl"
    bodies.write_text("".join(json.dumps({"input": t, "model": "model"}) + "\n" for t in texts))
    rows = []
    for contender in contenders(args):
        contender.start(scratch / f"{contender.name}.log")
        try:
            median, least = cosines(contender, texts[:200], reference)
            for concurrency in map(int, args.concurrency.split(",")):
                row = {**load(contender, bodies, concurrency, args.duration), "cosine": [median, least]}
                rows.append(row)
                print(json.dumps(row), flush=True)
        finally:
            contender.stop()
    print(machine_description())
    print("| contender | concurrency | requests/s | p50 ms | p99 ms | non-2xx | cosine median / least |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['contender']} | {r['concurrency']} | {r['requests_per_s']:.0f} | {r['p50_ms']:.1f} | "
              f"{r['p99_ms']:.1f} | {r['non_2xx']} | {r['cosine'][0]:.4f} / {r['cosine'][1]:.4f} |")  # fmt: skip


def hostile(url: str, stop: threading.Event, counts: dict) -> None:
    """Requests no well-behaved client sends, over and over until `stop`: each kind's answers counted by status."""
    host, port = url.removeprefix("http://").split(":")
    port = int(port)

    def raw(payload: bytes, trickle: bool = False, vanish: bool = False) -> str:
        try:
            with socket.create_connection((host, port), timeout=20) as connection:
                if trickle:  # a slow client: its body a byte at a time
                    for byte in payload:
                        connection.sendall(bytes([byte]))
                        time.sleep(0.002)
                else:
                    connection.sendall(payload)
                if vanish:
                    return "vanished"
                answer = connection.recv(64)
                return answer.split(b" ", 2)[1].decode() if answer.startswith(b"HTTP/") else "closed"
        except OSError:
            return "refused"

    def post(body: bytes, length: int | None = None) -> bytes:
        n = len(body) if length is None else length
        return (
            b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (n, body)
        )  # noqa: E501

    cases = {
        "oversized": lambda: raw(post(b"x", length=50_000_000)),
        "malformed": lambda: raw(post(b'{"input": ')),
        "non-utf8": lambda: raw(post(b'\xff\xfe{"input": "a"}')),
        "unknown field": lambda: raw(post(b'{"input": "a", "imput": 1}')),
        "many texts": lambda: raw(post(json.dumps({"input": ["a"] * 5000}).encode())),
        "slow body": lambda: raw(post(json.dumps({"input": "a slow client"}).encode()), trickle=True),
        "vanishing": lambda: raw(post(json.dumps({"input": ["gone"] * 64}).encode()), vanish=True),
    }
    while not stop.is_set():
        for name, case in cases.items():
            status = case()
            counts.setdefault(name, {}).setdefault(status, 0)
            counts[name][status] += 1


def soak(args, texts: list[str], scratch: Path) -> None:
    """The chosen contender at concurrency 64 for --soak seconds beside the hostile client; memory sampled; then
    SIGTERM with a flood in flight."""
    contender = contenders(args)[-1 if args.int8 else 0]
    bodies = scratch / "bodies.jsonl"
    bodies.write_text("".join(json.dumps({"input": t, "model": "model"}) + "\n" for t in texts))
    contender.start(scratch / "soak.log")
    memory, stop, counts = [], threading.Event(), {}
    sampler = threading.Thread(target=_sample, args=(contender.process.pid, stop, memory))
    attacker = threading.Thread(target=hostile, args=(contender.url, stop, counts))
    sampler.start()
    attacker.start()
    row = load(contender, bodies, 64, args.soak)
    stop.set()
    attacker.join()
    sampler.join()
    with urllib.request.urlopen(contender.url + "/metrics", timeout=10) as response:
        statuses = re.findall(r'bertforge_requests_total\{endpoint="([^"]+)",status="(\d+)"\} (\d+)',
                              response.read().decode())  # fmt: skip
    flood = threading.Thread(target=lambda: in_flight.append(load(contender, bodies, 64, 6)))
    in_flight: list[dict] = []
    flood.start()
    time.sleep(2)
    code = contender.stop()  # SIGTERM with 64 connections' requests in flight
    flood.join()
    print(machine_description())
    report = {"soak": row, "rss_mb": memory, "hostile": counts, "statuses": statuses, "exit": code,
              "sigterm_flood": in_flight}  # fmt: skip
    print(json.dumps(report, indent=1))


def _sample(pid: int, stop: threading.Event, memory: list[int]) -> None:
    while not stop.is_set():
        memory.append(_rss(pid))
        stop.wait(10)


def _rss(pid: int) -> int:
    return int(Path(f"/proc/{pid}/status").read_text().split("VmRSS:")[1].split()[0]) // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="a sentence-embedding model directory")
    parser.add_argument("--int8", type=Path, help="its `bertforge export --quantize int8` directory")
    parser.add_argument("--infinity-python", help="the python of an environment with infinity-emb installed")
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--concurrency", default="1,8,64")
    parser.add_argument("--duration", type=int, default=20, help="seconds of load per point")
    parser.add_argument("--only", help="contenders to run, by name, comma-separated")
    parser.add_argument("--soak", type=int, default=0, help="seconds of soak instead of the race")
    args = parser.parse_args()
    texts = sentences(args.data)
    random.Random(0).shuffle(texts)
    with tempfile.TemporaryDirectory() as scratch:
        (soak if args.soak else race)(args, texts, Path(scratch))


if __name__ == "__main__":
    main()
