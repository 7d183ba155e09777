"""`bertforge serve` tested as its clients use it: a real server on loopback in its own process, real clients (curl,
the `openai` client, raw sockets), bounded load. Each endpoint answers what its CLI verb answers; a batch of many
requests answers what each alone does; every limit answers its status in one JSON error; a client that leaves, a
flood past the queue and SIGTERM with requests in flight leave the service answering, or exiting 0 with every
accepted request answered."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from bertforge import ModelConfig, save_model
from bertforge.model.bert import BertForPreTraining
from bertforge.model.heads import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification

from conftest import bertforge_ok, needs, randomised
from released import build, sentences

ROOT = Path(__file__).resolve().parents[1]
SERVING = re.compile(r"serving .* on (http://[\d.]+:\d+)")


@pytest.fixture(autouse=True)
def service_installed():
    needs("uvicorn")
    needs("starlette")


class Served:
    """A `bertforge serve` process: its address, and what it printed."""

    def __init__(self, process: subprocess.Popen, url: str, said: list[str]):
        self.process, self.url, self.said = process, url, said

    def post(self, path: str, body, raw: bool = False, timeout: float = 30) -> tuple[int, object]:
        data = body if raw else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as e:
            return e.code, {**json.loads(e.read()), "headers": {k.lower(): v for k, v in e.headers.items()}}

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()


@contextlib.contextmanager
def served(model, *flags):
    """The service on a free loopback port, ready (warmed up); stopped (SIGTERM) on the way out."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bertforge", "serve", str(model), "--port", "0", *map(str, flags)],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    said: list[str] = []
    url = []

    def drain():  # the pipe read to its end, so the server never blocks on a full one
        for line in process.stderr:
            said.append(line)
            if not url and (found := SERVING.search(line)):
                url.append(found.group(1))

    threading.Thread(target=drain, daemon=True).start()
    try:
        deadline = time.monotonic() + 90
        while not url and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert url, "".join(said)
        server = Served(process, url[0], said)
        while server.get("/health")[0] != 200:
            assert process.poll() is None and time.monotonic() < deadline, "".join(said)
            time.sleep(0.05)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.fixture(scope="module")
def models(tmp_path_factory, wordpiece_tokenizer):
    """A masked LM, a classifier, a tagger and a reader over one tokenizer (random weights: answers are compared
    with the CLI's, not judged), and all-MiniLM-L6-v2's layout with prompts, as SentenceTransformer.save writes it."""
    root = tmp_path_factory.mktemp("served")
    shape = dict(vocab_size=wordpiece_tokenizer.get_vocab_size(), hidden_size=32, num_layers=2, num_heads=2,
                 intermediate_size=64, max_position_embeddings=64)  # fmt: skip
    config = ModelConfig(**shape)
    labels = ["neg", "neu", "pos"]
    tags = ["O", "B-ANIMAL", "I-ANIMAL", "B-PLACE"]
    named = {
        "masked": (BertForPreTraining(config), {}),
        "classifier": (BertForSequenceClassification(config, num_labels=3),
                       {"id2label": dict(enumerate(labels)), "label2id": {v: i for i, v in enumerate(labels)}}),
        "tagger": (BertForTokenClassification(config, num_labels=4),
                   {"id2label": dict(enumerate(tags)), "label2id": {v: i for i, v in enumerate(tags)}}),
        "reader": (BertForQuestionAnswering(config), {}),
    }  # fmt: skip
    paths = {}
    for name, (model, extra) in named.items():
        paths[name] = save_model(randomised(model), root / name, wordpiece_tokenizer, extra)
    sentence = build("sentence_embedding", root)
    settings = json.loads((sentence / "config_sentence_transformers.json").read_text())
    settings.update(prompts={"query": "query: ", "document": "passage: "}, default_prompt_name="document")
    (sentence / "config_sentence_transformers.json").write_text(json.dumps(settings))
    paths["sentence"] = sentence
    return paths


TEXTS = ["The cat sat on the mat.", "my friend painted the red house by the river bank", "a bird sang", "covid"]


def test_a_masked_lm_answers_embeddings_and_blanks_as_its_verbs_do(models, tmp_path):
    """/v1/embeddings and /embed give `bertforge embed`'s vectors, /fill-mask `bertforge fill-mask --json`'s
    predictions; /info and /metrics describe the model and what was served."""
    model = models["masked"]
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n")
    bertforge_ok("embed", model, "--input", tmp_path / "texts.txt", "--out", tmp_path / "v.npy", "--precision", "fp32")
    expected = np.load(tmp_path / "v.npy")
    blanks = json.loads(bertforge_ok("fill-mask", model, "the [MASK] sat on the mat.", "--json").stdout)["masks"]
    with served(model) as server:
        status, answer = server.post("/v1/embeddings", {"input": TEXTS, "model": "m"})
        assert status == 200 and answer["object"] == "list" and answer["model"] == "m"
        np.testing.assert_allclose([row["embedding"] for row in answer["data"]], expected, atol=1e-5)
        assert answer["usage"]["prompt_tokens"] == answer["usage"]["total_tokens"] > len(TEXTS)
        status, vectors = server.post("/embed", {"inputs": TEXTS, "normalize": False})
        np.testing.assert_allclose(vectors, expected, atol=1e-5)
        status, filled = server.post("/fill-mask", {"inputs": ["the [MASK] sat on the mat."], "top_k": 5})
        assert status == 200
        assert [p["token_id"] for p in filled[0][0]["predictions"]] == [p["token_id"] for p in blanks[0]["predictions"]]
        assert [p["score"] for p in filled[0][0]["predictions"]] == pytest.approx(
            [p["score"] for p in blanks[0]["predictions"]], abs=1e-5
        )
        assert server.post("/fill-mask", {"inputs": "no blank here"})[0] == 422
        info = json.loads(server.get("/info")[1])
        assert info["answers"] == "masked-lm" and info["endpoints"] == ["/embed", "/fill-mask", "/rerank",
                                                                         "/v1/embeddings"]  # fmt: skip
        metrics = server.get("/metrics")[1]
        assert 'bertforge_requests_total{endpoint="/v1/embeddings",status="200"} 1' in metrics
        assert "bertforge_batch_tokens_bucket" in metrics and "bertforge_queue_depth 0" in metrics


def test_the_openai_client_and_curl_work_unchanged_as_the_guide_shows(models):
    """The guide's curl lines and its openai snippet, run as written against the server (its port put in): the
    client's base64 vectors (its default) equal the float ones and sentence-transformers' own, with the model's
    default prompt."""
    needs("openai")
    sentence_transformers = needs("sentence_transformers")
    guide = (ROOT / "docs" / "serving.md").read_text()
    shell = next(b for b in re.findall(r"```bash\n(.*?)```", guide, re.S) if "curl" in b)
    snippet = next(b for b in re.findall(r"```python\n(.*?)```", guide, re.S) if "openai" in b)
    with served(models["sentence"]) as server:
        port = server.url.rsplit(":", 1)[1]
        for command in shell.replace("\\\n", " ").strip().splitlines():
            done = subprocess.run(command.replace("8080", port), shell=True, capture_output=True, text=True, check=True)
            assert "error" not in json.loads(done.stdout), done.stdout
        done = subprocess.run([sys.executable, "-c", snippet.replace("8080", port)], capture_output=True, text=True)
        assert done.returncode == 0 and done.stdout.split()[:2] == ["2", "32"], done.stderr
        from openai import OpenAI

        client = OpenAI(base_url=server.url + "/v1", api_key="unused")
        encoded = client.embeddings.create(model="minilm", input=TEXTS)  # base64 on the wire
        floats = client.embeddings.create(model="minilm", input=TEXTS, encoding_format="float")
        ours = np.array([row.embedding for row in encoded.data])
        np.testing.assert_allclose(ours, [row.embedding for row in floats.data], atol=1e-6)
        st_model = sentence_transformers.SentenceTransformer(str(models["sentence"]), device="cpu")
        np.testing.assert_allclose(ours, st_model.encode(TEXTS), atol=1e-5)  # with its default prompt
        cut = client.embeddings.create(model="minilm", input=TEXTS, dimensions=8, extra_body={"prompt_name": "query"})
        expected = st_model.encode(TEXTS, prompt_name="query", truncate_dim=8)
        expected /= np.linalg.norm(expected, axis=1, keepdims=True)
        np.testing.assert_allclose([row.embedding for row in cut.data], expected, atol=1e-5)


def test_a_batch_of_many_requests_answers_what_each_alone_does(models):
    """64 requests at once, of texts of many lengths, batched by the service (a 50 ms wait lets them meet): each
    answer equals the one-by-one answer to 1e-5, and the engine ran batches of more than one text."""
    texts = sentences(64, seed=9)
    with served(models["masked"], "--max-wait-ms", "50") as server:
        alone = [server.post("/embed", {"inputs": text, "normalize": False})[1][0] for text in texts]
        with concurrent.futures.ThreadPoolExecutor(32) as pool:
            together = list(pool.map(lambda t: server.post("/embed", {"inputs": t, "normalize": False}), texts))
        assert all(status == 200 for status, _ in together)
        np.testing.assert_allclose([vector[0] for _, vector in together], alone, atol=1e-5)
        metrics = server.get("/metrics")[1]
        singles = int(re.search(r'bertforge_batch_texts_bucket\{le="1"\} (\d+)', metrics).group(1))
        batches = int(re.search(r"bertforge_batch_texts_count (\d+)", metrics).group(1))
        assert batches < 64 + 64 + 1 and singles < batches  # some batch held several requests' texts


def test_a_classifier_tagger_and_reader_answer_as_their_verbs_do(models):
    """/classify (texts and pairs) and /rerank as a cross-encoder give `classify --json`'s probabilities; /tag and
    /answer give `tag --json`'s and `answer --json`'s answers."""
    classified = json.loads(bertforge_ok("classify", models["classifier"], TEXTS[0], "--json").stdout)
    paired = json.loads(bertforge_ok("classify", models["classifier"], TEXTS[0], "--pair", TEXTS[1], "--json").stdout)
    with served(models["classifier"]) as server:
        status, answer = server.post("/classify", {"inputs": [TEXTS[0]]})
        assert status == 200 and {d["label"]: d["score"] for d in answer[0]} == pytest.approx(
            classified["probabilities"], abs=1e-5
        )
        assert [d["score"] for d in answer[0]] == sorted((d["score"] for d in answer[0]), reverse=True)
        status, answer = server.post("/classify", {"inputs": [[TEXTS[0], TEXTS[1]]]})
        assert {d["label"]: d["score"] for d in answer[0]} == pytest.approx(paired["probabilities"], abs=1e-5)
        status, ranked = server.post("/rerank", {"query": TEXTS[0], "texts": [TEXTS[1], TEXTS[2]], "label": "pos"})
        assert status == 200 and {r["index"] for r in ranked} == {0, 1}
        assert ranked[0]["score"] >= ranked[1]["score"]
        assert server.post("/rerank", {"query": "x", "texts": ["y"], "label": "nope"})[0] == 422
        assert server.get("/info")[1].count('"labels":["neg","neu","pos"]') == 1
    tagged = json.loads(bertforge_ok("tag", models["tagger"], TEXTS[1], "--json").stdout)
    with served(models["tagger"]) as server:
        status, answer = server.post("/tag", {"inputs": [TEXTS[1]]})
        expected = tagged["entities"] if isinstance(tagged, dict) else tagged
        assert status == 200 and [{**e, "score": 0} for e in answer[0]] == [{**e, "score": 0} for e in expected]
        assert [e["score"] for e in answer[0]] == pytest.approx([e["score"] for e in expected], abs=1e-5)
    read = json.loads(bertforge_ok("answer", models["reader"], "--question", "who sat?", "--context", TEXTS[0],
                                   "--json").stdout)  # fmt: skip
    with served(models["reader"]) as server:
        status, answer = server.post("/answer", {"question": "who sat?", "context": TEXTS[0]})
        assert status == 200 and answer["answer"] == read["answer"]
        assert answer["score"] == pytest.approx(read["score"], abs=1e-5)


def raw(server: Served, payload: bytes) -> tuple[int, bytes]:
    """A request as bytes on a socket (what no well-behaved client sends), and the status it is answered with."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(payload)
        data = b""
        while chunk := connection.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[1]


def test_every_limit_and_malformed_request_is_one_json_error_and_the_service_goes_on(models):
    """Bodies too large (by Content-Length and streamed), too many texts, too long a text, JSON that is not,
    bytes that are not UTF-8, NaN, wrong types, unknown fields, empty input, token ids, a wrong method, an
    unknown path: each one JSON error of its status; then a client that leaves mid-request; and the service
    still answers, no worker lost."""
    flags = ("--max-body-bytes", 4096, "--max-texts", 4, "--max-characters", 200, "--max-wait-ms", 300)
    with served(models["masked"], *flags) as server:
        cases = [
            (b"x" * 5000, 413, "larger than"),
            (json.dumps({"inputs": ["a"] * 5}).encode(), 413, "at most 4"),
            (json.dumps({"inputs": "a" * 201}).encode(), 413, "characters"),
            (b'{"inputs": ', 400, "not JSON"),
            (b'\xff\xfe{"inputs": "a"}', 400, "not UTF-8"),
            (b'{"inputs": NaN}', 400, "not JSON"),
            (b"[1, 2]", 422, "not a JSON object"),
            (json.dumps({"inputs": 5}).encode(), 422, "a string or a non-empty list"),
            (json.dumps({"inputs": []}).encode(), 422, "non-empty"),
            (json.dumps({"inputs": "  "}).encode(), 422, "empty"),
            (json.dumps({"inputs": "a", "dimension": 3}).encode(), 422, "unknown field 'dimension'"),
            (json.dumps({"inputs": "a", "dimensions": 10**6}).encode(), 422, "dimensions"),
            (json.dumps({}).encode(), 422, "missing field 'inputs'"),
        ]
        for body, status, said in cases:
            got, answer = server.post("/embed", body, raw=True)
            assert got == status and said in answer["error"]["message"], (body[:40], got, answer)
        assert server.post("/v1/embeddings", {"input": [[1, 2, 3]]})[0] == 422  # token ids
        request = b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Length: 9999999\r\n\r\n{"
        status, body = raw(server, request)
        assert status == 413 and b'"error"' in body
        assert server.get("/embed")[0] == 405 and server.get("/nothing")[0] == 404
        host, port = server.url.removeprefix("http://").split(":")
        body = json.dumps({"inputs": TEXTS}).encode()
        with socket.create_connection((host, int(port))) as leaving:  # sent, then gone while its text waits
            leaving.sendall(b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        time.sleep(0.5)
        assert server.post("/embed", {"inputs": TEXTS})[0] == 200
        assert server.process.poll() is None
        assert 'bertforge_requests_total{endpoint="/embed",status="499"} 1' in server.get("/metrics")[1]


def test_a_flood_past_the_queue_is_503_and_a_request_past_its_deadline_504(models):
    """A queue of 64 tokens held 400 ms for company: of 16 requests at once, the ones past it are refused at once
    with 503 and Retry-After; with a 50 ms timeout, a request still waiting is 504. Memory stays where it was."""
    with served(models["masked"], "--max-queue-tokens", 64, "--max-wait-ms", 400) as server:
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(lambda t: server.post("/embed", {"inputs": t}), sentences(16, seed=2)))
        statuses = [status for status, _ in answers]
        assert 200 in statuses and 503 in statuses and set(statuses) <= {200, 503}
        refused = next(answer for status, answer in answers if status == 503)
        assert refused["headers"]["retry-after"] == "1" and refused["error"]["type"] == "overloaded"
    with served(models["masked"], "--timeout", 0.05, "--max-wait-ms", 2000) as server:
        status, answer = server.post("/embed", {"inputs": "the cat sat"})
        assert status == 504 and "within" in answer["error"]["message"]
        assert server.get("/health")[0] == 200


def test_sigterm_answers_every_accepted_request_then_exits_0(models):
    """SIGTERM while 8 requests wait in the queue (a 1 s wait for company): each is answered 200, new connections
    are refused, and the process exits 0."""
    with served(models["masked"], "--max-wait-ms", 1000) as server:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            waiting = [pool.submit(server.post, "/embed", {"inputs": text}) for text in sentences(8, seed=4)]
            time.sleep(0.3)
            server.process.send_signal(signal.SIGTERM)
            statuses = [future.result()[0] for future in waiting]
        assert statuses == [200] * 8
        assert server.process.wait(30) == 0, "".join(server.said)


def test_workers_share_the_port(models):
    """--workers 2: two processes, each with the model, answer on one port."""
    with served(models["sentence"], "--workers", 2) as server:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda t: server.post("/embed", {"inputs": t}), sentences(24, seed=5)))
        assert all(status == 200 for status, _ in answers)
        assert "2 workers" in "".join(server.said)


def test_a_bad_model_directory_is_one_line_before_the_port_opens(tmp_path):
    (tmp_path / "empty").mkdir()
    done = subprocess.run([sys.executable, "-m", "bertforge", "serve", str(tmp_path / "empty"), "--port", "0"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
