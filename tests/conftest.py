"""Shared fixtures and helpers: a small corpus written here, tokenizers trained on it (no downloads),
the command line run as a user runs it, and the flags of a tiny, fast model."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import traceback
import warnings
from pathlib import Path

import pytest
import torch

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs two workers on two cores: one thread each (and in every process a test starts), so
    # neither oversubscribes the cores the other is using.
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)

from bertforge import BertForPreTraining, ModelConfig
from bertforge.engine.checkpoint import checkpoint_dirs
from bertforge.families import MODERNBERT_SHAPE
from bertforge.modelfiles.directory import save_model
from bertforge.tokenizer import train_tokenizer

# The only reasons a test may skip: hardware this machine lacks. A skip for any other reason (a package
# missing, a condition a test forgot) fails the session, so a test cannot stop running unnoticed.
EXPECTED_SKIPS = ("needs a CUDA GPU", "the setting is glibc's")
_unexpected_skips: list[str] = []


def needs(module: str):
    """`module`, or a skip for the test that needs it: only a missing package skips, a broken one fails."""
    return pytest.importorskip(module, exc_type=ModuleNotFoundError)


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if not any(expected in reason for expected in EXPECTED_SKIPS):
            _unexpected_skips.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session, exitstatus):
    is_worker = hasattr(session.config, "workerinput")  # xdist's controller collects every worker's reports
    if _unexpected_skips and exitstatus == 0 and not is_worker:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter):
    if _unexpected_skips:
        terminalreporter.write_line("unexpected skips (the suite fails on them):", red=True)
        for line in _unexpected_skips:
            terminalreporter.write_line(f"  {line}", red=True)


SUBJECTS = ["the cat", "the dog", "a bird", "my friend", "the teacher", "an old man", "the child", "her brother"]
VERBS = ["sat on", "looked at", "walked to", "painted", "found", "cleaned", "watched", "carried"]
OBJECTS = [
    "the mat",
    "the river bank",
    "the red house",
    "a small boat",
    "the garden",
    "the money",
    "a green chair",
    "the window",
]


# Subjects of the fine-tuning tests' generated sentences: the label is which list a sentence's subject came from.
ANIMALS = ["the cat", "the dog", "a bird"]
PEOPLE = ["my friend", "the teacher", "the child"]


def randomised(model):
    """Every trainable parameter random (biases and LayerNorms too), so that nothing matches by accident; a frozen
    table (sinusoidal positions, rotary's zero slot) keeps its values. In eval mode."""
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.normal_(0.0, 0.2)
    return model.eval()


def make_documents(n_docs: int = 40, sentences: int = 8, seed: int = 0) -> list[list[str]]:
    """Documents of simple generated sentences: enough structure to learn, small enough to be fast."""
    rng = random.Random(seed)
    return [
        [f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}." for _ in range(sentences)]
        for _ in range(n_docs)
    ]


def documents_of(paragraphs) -> list[list[str]]:
    """Paragraphs as read (`corpus.Paragraph`s) grouped into their documents' texts."""
    docs = []
    for p in paragraphs:
        if p.new_document:
            docs.append([])
        docs[-1].append(p.text)
    return docs


def write_corpus(path, documents) -> None:
    """One sentence per line, a blank line between documents."""
    path.write_text("\n\n".join("\n".join(doc) for doc in documents) + "\n", encoding="utf-8")


@pytest.fixture(scope="module", autouse=True)
def cpu_only(request):
    """Every module but test_cuda.py sees no GPU, in-process and in the commands it starts: on any machine the
    suite checks what CI checks (where `--device auto` picked a GPU, outputs compared with CPU tensors, and
    two torchrun processes on a one-GPU machine, failed). test_cuda.py checks the GPU paths where there is one."""
    if request.module.__name__ == "test_cuda":
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CUDA_VISIBLE_DEVICES", "")
        patch.setattr(torch.cuda, "is_available", lambda: False)
        yield


@pytest.fixture(autouse=True)
def auto_precision_is_fp32(monkeypatch):
    """`--precision auto` is fp32 in every test run in this process, whatever the CPU: on one with fast bf16 (AMX)
    it would pick bf16, so that a learning threshold met on one CI machine was tested in another precision on the
    next, after a timing of both (0.4 s per command). test_devices.py checks the choice itself."""
    monkeypatch.setattr("bertforge.engine.runtime.cpu_has_fast_bf16", lambda: False)


@pytest.fixture(scope="session")
def documents():
    return make_documents()


@pytest.fixture(scope="session")
def wordpiece_tokenizer(documents):
    return train_tokenizer((s for doc in documents for s in doc), kind="wordpiece", vocab_size=120, min_frequency=1)


@pytest.fixture(scope="session")
def word_tokenizer(documents):
    return train_tokenizer((s for doc in documents for s in doc), kind="word", vocab_size=200, min_frequency=1)


# ModernBERT's shape without biases, as ModernBERT's own defaults have it.
MODERN = {**MODERNBERT_SHAPE, "norm_bias": False, "linear_bias": False}

# A model small enough to train for dozens of steps in seconds, and the run flags that go with it.
TINY_MODEL = [
    "--preset",
    "tiny",
    "--hidden-size",
    "32",
    "--num-heads",
    "2",
    "--intermediate-size",
    "64",
    "--num-layers",
    "2",
    "--max-position-embeddings",
    "64",
]
TINY_RUN = ["--seq-len", "64", "--precision", "fp32", "--num-workers", "0", "--quiet"]


def tiny_model_config(data_dir: Path) -> ModelConfig:
    """TINY_MODEL's sizes over a prepared data directory's vocabulary, for tests that drive the Trainer directly."""
    vocab_size = json.loads((data_dir / "meta.json").read_text())["vocab_size"]
    return ModelConfig.preset(
        "tiny", vocab_size=vocab_size, hidden_size=32, num_heads=2, intermediate_size=64, max_position_embeddings=64
    )


def quick_finetuning(**settings):
    """Fine-tuning settings that learn the tests' small generated tasks in seconds (given `epochs`), on the CPU in
    fp32; `settings` override these."""
    from bertforge.tasks.config import FinetuneConfig

    return FinetuneConfig(
        **{"lr": 3e-3, "batch_size": 16, "warmup": 0.05, "device": "cpu", "precision": "fp32", **settings}
    )


def within_binomial(count: float, n: int, p: float, sigmas: float = 4.0) -> bool:
    """Whether `count` successes of `n` draws lie within `sigmas` standard deviations of a binomial's mean n·p."""
    return abs(count - n * p) <= sigmas * math.sqrt(n * p * (1 - p))


def save_random_model(directory: Path, tokenizer, **shape) -> Path:
    """A model directory with seeded random weights over `tokenizer`: one layer of width 32 unless `shape` says
    otherwise. For tests of loading, commands and plots, which need a model but not a trained one."""
    torch.manual_seed(0)
    shape = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64, **shape}
    save_model(BertForPreTraining(ModelConfig(vocab_size=tokenizer.get_vocab_size(), **shape)), directory, tokenizer)
    return directory


def bertforge(*args, **kwargs) -> subprocess.CompletedProcess:
    """`bertforge ARGS` as a user runs it: its exit code, stdout and stderr; the caller checks the outcome.

    Given subprocess options (env, cwd, timeout, input), it is `python -m bertforge` in a new process. Otherwise it
    runs here, through the entry point that process would run (`cli.main`), with a fresh process's view of what
    the command reads and leaves: its own stdout and stderr, every warning shown, its signal handlers and settings
    undone after. A new process costs 4-9 s before the command starts (importing torch, and torch's compiler, which
    an optimizer's construction imports), most of the suite's time when every call paid it."""
    if kwargs:
        return subprocess.run(
            [sys.executable, "-m", "bertforge", *map(str, args)], capture_output=True, text=True, **kwargs
        )
    return _in_this_process([str(a) for a in args])


def _in_this_process(argv: list[str]) -> subprocess.CompletedProcess:
    from bertforge.cli import main
    from bertforge.model.unpadding import set_unpadding, unpadding

    out, err = io.StringIO(), io.StringIO()
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    formatwarning, mode = warnings.formatwarning, unpadding()

    def show(message, category, filename, lineno, file=None, line=None):  # Python's own, to the command's stderr
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            warnings.resetwarnings()  # a new process's filters: each warning once per place, whatever came before,
            warnings.simplefilter("default")  # with Python's defaults for the kinds it hides from users
            for hidden in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
                warnings.simplefilter("ignore", hidden)
            warnings.showwarning = show
            try:
                code = main(argv)
            except SystemExit as e:  # argparse's errors and --version
                code = e.code if isinstance(e.code, int) else int(e.code is not None)
            except Exception:  # a bug: the traceback and exit 1 a process would give
                traceback.print_exc()
                code = 1
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
        warnings.formatwarning = formatwarning
        set_unpadding(mode)
    return subprocess.CompletedProcess([sys.executable, "-m", "bertforge", *argv], code, out.getvalue(), err.getvalue())


def bertforge_ok(*args, **kwargs) -> subprocess.CompletedProcess:
    """`bertforge(...)` that must succeed; a failure shows its stderr."""
    done = bertforge(*args, **kwargs)
    if done.returncode != 0:
        raise AssertionError(f"bertforge {' '.join(map(str, args))} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done


def assert_fill_mask_is_the_pipeline(
    model_dir: Path, text: str, abs_tolerance: float = 1e-5, targets: list[str] | None = None, **pipeline_kwargs
):
    """`bertforge fill-mask --json` and transformers' fill-mask pipeline on the same directory: the same top 5
    tokens (of `targets` alone, if given), in order, with the same scores, at every [MASK] of `text`."""
    transformers = needs("transformers")
    chosen = ["--targets", ",".join(targets)] if targets else []
    ours = json.loads(bertforge_ok("fill-mask", model_dir, text, "--top-k", "5", *chosen, "--json").stdout)["masks"]
    pipeline = transformers.pipeline("fill-mask", model=str(model_dir), top_k=5, **pipeline_kwargs)
    reference = pipeline(text, targets=targets) if targets else pipeline(text)
    if len(ours) == 1:  # the pipeline nests its answers per mask only when there are several
        reference = [reference]
    assert len(ours) == len(reference)
    for mask, expected in zip(ours, reference):
        assert [p["token_id"] for p in mask["predictions"]] == [e["token"] for e in expected]
        assert [p["score"] for p in mask["predictions"]] == pytest.approx(
            [e["score"] for e in expected], abs=abs_tolerance
        )


def prepared_data(root: Path, seed: int, n_docs: int = 40) -> Path:
    """A generated corpus of `n_docs` documents in `root`, a 120-token WordPiece trained on it and the prepared data
    directory (10% held out): `root`, now holding corpus.txt, tok/ and data/."""
    write_corpus(root / "corpus.txt", make_documents(n_docs=n_docs, sentences=8, seed=seed))
    bertforge_ok(
        "tokenizer", "train", root / "corpus.txt", "--out", root / "tok", "--vocab-size", "120", "--min-frequency", "1"
    )
    bertforge_ok(
        "prepare", root / "corpus.txt", "--tokenizer", root / "tok", "--out", root / "data", "--valid-fraction", "0.1"
    )
    return root


def _is_warning(line: str) -> bool:
    """Ours (`bertforge VERB: warning: ...`) or another library's, in Python's format (two lines: where, and its
    source)."""
    return ": warning: " in line or "Warning" in line or "warn(" in line


def one_line_error(done: subprocess.CompletedProcess, *fragments: str) -> None:
    """Exit code 2, no traceback, and one line on stderr (warnings aside) holding every fragment."""
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = [line for line in done.stderr.strip().splitlines() if not _is_warning(line)]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def train_metrics(run_dir: Path, split: str = "train") -> list[dict]:
    """The records of one split in a run's metrics.jsonl."""
    return [
        r for r in map(json.loads, (Path(run_dir) / "metrics.jsonl").read_text().splitlines()) if r["split"] == split
    ]


def resumed_twin(full: Path, data: Path) -> Path:
    """A copy of the finished run `full` as if it had stopped at its last-but-one checkpoint, resumed to the end:
    exact resume means it logs what `full` logged."""
    resumed = full.with_name(full.name + "_resumed")
    shutil.copytree(full, resumed)
    shutil.rmtree(checkpoint_dirs(resumed)[-1])
    shutil.rmtree(resumed / "model")
    bertforge_ok("pretrain", "--data", data, "--out", resumed, "--resume", "--quiet")
    return resumed


def whole_and_resumed(data: Path, full: Path, *flags) -> Path:
    """Pre-train `full` for 24 steps with `flags` (logging every 2, a checkpoint at 12) and return its twin resumed
    from step 12: exact resume means `assert_same_steps(full, twin, list(range(2, 25, 2)), ...)` holds."""
    bertforge_ok(
        "pretrain", "--data", data, "--out", full, *flags, "--max-steps", "24", "--log-every", "2",
        "--save-every", "12", "--keep-last", "5", "--eval-every", "0",
    )  # fmt: skip
    return resumed_twin(full, data)


def assert_same_steps(a_run: Path, b_run: Path, steps: list[int], keys: tuple[str, ...]) -> None:
    """Both runs logged exactly `steps`, with the same value of every key in `keys` at each."""
    a, b = train_metrics(a_run), train_metrics(b_run)
    assert [r["step"] for r in a] == [r["step"] for r in b] == steps
    for x, y in zip(a, b):
        for key in keys:
            assert x[key] == pytest.approx(y[key], rel=1e-6, abs=1e-7), (x["step"], key)


def padded_batch(directory, texts, length=None):
    """(input_ids, attention_mask) of `texts`, padded on the right with the padding id, as the model's own tokenizer
    in `directory` encodes them; `length`, where given, the (lowest, highest) the longest may be (a long text meant
    to reach a family's far relative positions)."""
    from bertforge.tokenizer import load_tokenizer, special_ids

    tokenizer = load_tokenizer(directory)
    encodings = [tokenizer.encode(text) for text in texts]
    width = max(len(e.ids) for e in encodings)
    if length is not None:
        assert length[0] < width <= length[1], width
    pad = special_ids(tokenizer).pad
    input_ids = torch.tensor([e.ids + [pad] * (width - len(e.ids)) for e in encodings])
    attention_mask = torch.tensor([[1] * len(e.ids) + [0] * (width - len(e.ids)) for e in encodings])
    return input_ids, attention_mask
