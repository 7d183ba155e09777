"""Runs get killed and inputs are messy: nothing is lost, and every bad input gets one clear line and exit 2."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

from bertforge import BertForPreTraining, ModelConfig
from bertforge.engine.checkpoint import checkpoint_dirs
from bertforge.engine.optim import build_optimizer
from bertforge.errors import UserError
from bertforge.modelfiles.directory import resolve_model_dir
from bertforge.tokenizer import load_tokenizer
from bertforge.training.rundir import load_checkpoint

from conftest import (
    TINY_MODEL,
    TINY_RUN,
    bertforge,
    one_line_error,
    prepared_data,
    save_random_model,
    train_metrics,
)

TINY = [*TINY_MODEL, *TINY_RUN, "--batch-size", "8", "--eval-every", "0"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return prepared_data(tmp_path_factory.mktemp("reliability"), seed=21)


def test_sigkill_at_random_moments_loses_nothing(workdir):
    """Killed three times, saving every step (so kills land mid-save too): each time the latest checkpoint
    loads, and resuming to the end gives the uninterrupted run's metrics exactly."""
    flags = [
        "--data",
        workdir / "data",
        *TINY,
        "--max-steps",
        "30",
        "--save-every",
        "1",
        "--keep-last",
        "2",
        "--log-every",
        "3",
    ]
    reference = workdir / "uninterrupted"
    assert bertforge("pretrain", "--out", reference, *flags).returncode == 0
    run = workdir / "killed"
    rng = random.Random(0)
    kills = 0
    for attempt in range(3):
        command = [sys.executable, "-m", "bertforge", "pretrain", "--out", str(run), *map(str, flags)] + (
            ["--resume"] if attempt else []
        )
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        start_steps = len(checkpoint_dirs(run)) and int(checkpoint_dirs(run)[-1].name.split("_")[1])
        deadline = time.time() + 60
        while time.time() < deadline and process.poll() is None:  # wait until it is training, then kill at random
            latest = checkpoint_dirs(run)
            if latest and int(latest[-1].name.split("_")[1]) > start_steps:
                break
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.15))
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            kills += 1
        process.wait()
        saved = checkpoint_dirs(run)
        assert saved, "no checkpoint survived"
        model = BertForPreTraining(ModelConfig.from_dict(json.loads((run / "config.json").read_text())["model"]))
        optimizer = build_optimizer(model, "cpu", lr=5e-4, weight_decay=0.01)
        state = load_checkpoint(saved[-1], model, optimizer)  # loads: never torn
        assert state.step == int(saved[-1].name.split("_")[1])
    assert kills >= 2
    done = bertforge("pretrain", "--out", run, *flags, "--resume")
    assert done.returncode == 0, done.stderr
    assert not list((run / "checkpoints").glob(".step_*"))  # leftovers of killed saves are gone
    a, b = train_metrics(reference), train_metrics(run)
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for x, y in zip(a, b):
        for key in ("loss", "mlm_loss", "nsp_loss", "mlm_acc", "nsp_acc", "grad_norm", "lr", "tokens"):
            assert x[key] == pytest.approx(y[key], rel=1e-6, abs=1e-7), (x["step"], key)


def test_bad_corpus_inputs(workdir, tmp_path):
    """Each bad input is one line and exit 2, and leaves nothing behind: its own --out is never created (nor a
    temporary sibling of it)."""
    tok = workdir / "tok"
    (tmp_path / "empty_dir").mkdir()
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "binary.txt").write_bytes(bytes(range(256)) * 10)
    (tmp_path / "rows.csv").write_text("id,body\n1,hello\n")
    (tmp_path / "broken.jsonl").write_text('{"text": "fine"}\n{"text": \n{"text": "also fine"}\n')
    outs = tmp_path / "outs"
    outs.mkdir()

    def prepare(name, *inputs):
        return bertforge("prepare", "--tokenizer", tok, "--out", outs / name, *inputs)

    one_line_error(prepare("missing", tmp_path / "missing.txt"), "missing.txt")
    one_line_error(prepare("empty_dir", tmp_path / "empty_dir"), "empty_dir", "no text files")
    one_line_error(prepare("empty", tmp_path / "empty.txt"), "empty.txt", "no text")
    one_line_error(prepare("binary", tmp_path / "binary.txt"), "binary.txt", "binary")
    one_line_error(prepare("rows", tmp_path / "rows.csv", "--column", "text"), "rows.csv", "no column 'text'")
    one_line_error(prepare("broken", tmp_path / "broken.jsonl"), "broken.jsonl:2")
    assert sorted(outs.iterdir()) == []  # neither an output nor a temporary directory
    skipped = prepare("skipped", tmp_path / "broken.jsonl", "--on-error", "skip")
    assert skipped.returncode == 0 and json.loads((outs / "skipped" / "meta.json").read_text())["skipped_lines"] == 1
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait. na\xefve.\n".encode("latin-1") * 20)
    replaced = prepare("replaced", tmp_path / "latin1.txt", "--valid-fraction", "0")
    assert replaced.returncode == 0 and "40 invalid UTF-8" in replaced.stderr
    assert sorted(p.name for p in outs.iterdir()) == ["replaced", "skipped"]


def test_a_huge_line_without_newline_keeps_memory_bounded(workdir, tmp_path):
    """4 MB on one line is read in 64k-character pieces cut at spaces: it prepares in the memory of the same words
    as paragraphs of 20 (260 MB each here). Read whole (MAX_LINE_CHARS planted at 1 GiB) the line took 929 MB."""
    words = ["the", "cat", "sat", "on", "mat", "dog", "river", "bank"]
    rng = random.Random(0)
    counts = dict.fromkeys(words, 0)
    chosen = [rng.choice(words) for _ in range(4 * 262_144)]  # ~4 MB
    for w in chosen:
        counts[w] += 1
    (tmp_path / "huge.txt").write_text(" ".join(chosen) + " ")
    (tmp_path / "lines.txt").write_text("\n\n".join(" ".join(chosen[i : i + 20]) for i in range(0, len(chosen), 20)))
    probe = (
        "import resource, sys; from bertforge.data.prepare import prepare; "
        "prepare([sys.argv[1]], sys.argv[2], sys.argv[3], valid_fraction=0, progress=False); "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)"
    )
    peak_mb = {}
    for name in ("huge", "lines"):
        done = subprocess.run(
            [sys.executable, "-W", "ignore", "-c", probe, tmp_path / f"{name}.txt", workdir / "tok", tmp_path / name],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        peak_mb[name] = int(done.stdout.strip().splitlines()[-1])
    meta = json.loads((tmp_path / "huge" / "meta.json").read_text())
    # Pieces are cut at spaces, so no word is split in two: exactly each word's own pieces.
    tokenizer = load_tokenizer(workdir / "tok")
    expected = sum(n * len(tokenizer.encode(w, add_special_tokens=False).ids) for w, n in counts.items())
    assert meta["splits"]["train"]["tokens"] == expected
    assert peak_mb["huge"] - peak_mb["lines"] < 100, peak_mb


def test_bad_model_directories(workdir, tmp_path, wordpiece_tokenizer):
    good = save_random_model(tmp_path / "good", wordpiece_tokenizer)
    fill = ["fill-mask", None, "the [MASK] sat."]

    def with_dir(directory):
        return [directory if a is None else a for a in fill]

    truncated = tmp_path / "truncated"
    shutil.copytree(good, truncated)
    data = (truncated / "model.safetensors").read_bytes()
    (truncated / "model.safetensors").write_bytes(data[: len(data) // 2])
    one_line_error(bertforge(*with_dir(truncated)), "model.safetensors", "corrupted or truncated")

    garbage = tmp_path / "garbage"
    shutil.copytree(good, garbage)
    (garbage / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00not json")
    one_line_error(bertforge(*with_dir(garbage)), "corrupted or truncated")

    unknown = tmp_path / "unknown"
    shutil.copytree(good, unknown)
    config = json.loads((unknown / "config.json").read_text())
    (unknown / "config.json").write_text(json.dumps({**config, "model_type": "gpt2"}))
    one_line_error(bertforge(*with_dir(unknown)), "model_type 'gpt2' is not one bertforge reads", "roberta")

    missing = tmp_path / "missing"
    shutil.copytree(good, missing)
    (missing / "config.json").write_text(json.dumps({k: v for k, v in config.items() if k != "num_hidden_layers"}))
    one_line_error(bertforge(*with_dir(missing)), "missing keys num_hidden_layers")

    pickled = tmp_path / "pickled"
    shutil.copytree(good, pickled)
    from safetensors.torch import load_file

    torch.save(load_file(pickled / "model.safetensors"), pickled / "pytorch_model.bin")
    (pickled / "model.safetensors").unlink()
    one_line_error(bertforge(*with_dir(pickled)), "pytorch_model.bin", "--trust-pickle")
    trusted = bertforge(*with_dir(pickled), "--trust-pickle", "--json")
    assert trusted.returncode == 0 and "--trust-pickle" in trusted.stderr  # a warning says what was allowed
    assert json.loads(trusted.stdout) == json.loads(bertforge(*with_dir(good), "--json").stdout)


def test_a_directory_that_is_no_model_names_the_runs_and_models_inside_it(tmp_path, wordpiece_tokenizer):
    """The demo's stage directory (books/, its run in books/run) and a run killed before writing model/ are
    what users pass by mistake: the error names what they meant, the latest checkpoint first."""
    good = save_random_model(tmp_path / "good", wordpiece_tokenizer)
    stage = tmp_path / "stage"
    shutil.copytree(good, stage / "run" / "model")
    shutil.copytree(good, stage / "run" / "checkpoints" / "step_000008")  # inside a usable run: not listed
    killed = stage / "killed"
    for step in ("step_000002", "step_000004"):
        shutil.copytree(good, killed / "checkpoints" / step)
    (killed / "config.json").write_text("{}")  # a run's own config, not a model's
    with pytest.raises(UserError, match="inside it: ") as error:
        resolve_model_dir(stage)
    assert str(error.value).split("inside it: ")[1] == ", ".join(
        str(p) for p in (stage / "run", killed / "checkpoints" / "step_000004", killed / "checkpoints" / "step_000002")
    )
    with pytest.raises(UserError, match="inside it: " + re.escape(f"{killed / 'checkpoints' / 'step_000004'},")):
        resolve_model_dir(killed)
    assert resolve_model_dir(stage / "run") == stage / "run" / "model"
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"nor a run directory with model/$"):
        resolve_model_dir(tmp_path / "empty")


OPENS_PROBE = """
import json, os, sys
opened = []
def record(event, args):
    if event == "open" and isinstance(args[0], (str, os.PathLike)):
        opened.append(os.path.realpath(args[0]))
sys.addaudithook(record)
from bertforge.cli import main
code = main(["fill-mask", sys.argv[1], "the [MASK] sat.", "--json"])
with open(sys.argv[2], "w") as f:
    json.dump(opened, f)
sys.exit(code)
"""


def test_paths_named_in_configs_are_never_followed(tmp_path, wordpiece_tokenizer):
    """A model directory is read from its own files only: paths that tokenizer_config.json and config.json name
    (as transformers' files may) are not followed. With tokenizer.json gone, the tokenizer is built from vocab.txt
    and tokenizer_config.json, so the planted config is read; every file Python opens is checked."""
    clean = save_random_model(tmp_path / "clean", wordpiece_tokenizer)
    (clean / "tokenizer.json").unlink()
    planted = tmp_path / "planted"
    shutil.copytree(clean, planted)
    (tmp_path / "outside.json").write_text("{ not a tokenizer")
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n")  # a vocabulary that would change every answer
    traversal = {"tokenizer_file": "../outside.json", "vocab_file": "../vocab.txt", "name_or_path": "../../etc"}
    for name in ("tokenizer_config.json", "config.json"):
        config = json.loads((planted / name).read_text())
        (planted / name).write_text(json.dumps({**config, **traversal, "_name_or_path": "../"}))
    answers = {}
    for model in (clean, planted):
        opened_log = tmp_path / f"{model.name}.opened.json"
        done = subprocess.run(
            [sys.executable, "-c", OPENS_PROBE, str(model), str(opened_log)], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        answers[model.name] = json.loads(done.stdout)
        inside_tmp = [p for p in json.loads(opened_log.read_text()) if p.startswith(str(tmp_path.resolve()))]
        assert any(p.endswith("tokenizer_config.json") for p in inside_tmp)  # the planted file was read
        assert all(p.startswith(str(model.resolve()) + os.sep) for p in inside_tmp if p != str(opened_log)), inside_tmp
    assert answers["planted"] == answers["clean"]


def test_resume_compares_architecture_fields_a_saved_run_predates_as_their_defaults():
    """A run saved before a field existed resumes with the default; asking for another value is refused."""
    from bertforge.training.rundir import architecture_changes

    wanted = ModelConfig().to_dict()
    saved = {k: v for k, v in wanted.items() if k != "attention_bias"}  # as written by an older bertforge
    assert architecture_changes(saved, wanted) == []
    assert architecture_changes(saved, {**wanted, "attention_bias": "alibi"}) == ["attention_bias: 'none' -> 'alibi'"]
