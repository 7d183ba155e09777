"""One boundary: every model directory file read bounded and checked before use, no output written over an input,
every fault one line and exit 2 with the last good state kept, and the Python API held to what the command line
is. Each case below was a traceback, a silent loss or an unbounded read before (issue: one boundary)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import struct
import time

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

from bertforge.errors import UserError
from bertforge.model.bert import BertForPreTraining
from bertforge.modelfiles.directory import load_model
from bertforge.studies.sweep import MAX_GRID_POINTS, parse_grid, run_name
from bertforge.tasks import registry

from conftest import (
    TINY_MODEL,
    TINY_RUN,
    bertforge,
    bertforge_ok,
    one_line_error,
    prepared_data,
    save_random_model,
    train_metrics,
)
from released import build, sentences


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A corpus, a tokenizer and prepared data (prepared_data), and a small model of that tokenizer."""
    root = prepared_data(tmp_path_factory.mktemp("boundary"), seed=5)
    from bertforge.tokenizer import load_tokenizer

    save_random_model(root / "model", load_tokenizer(root / "tok"))
    return root


def copy(source, target):
    shutil.copytree(source, target)
    return target


def rows(path, header, lines):
    path.write_text(header + "\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- no output over an input


def test_no_verb_writes_over_its_input(workdir, tmp_path):
    """classify, tag and embed with --out naming their --input (the same path, a link to it, or a hard link),
    extend and prepare writing over or into what they read: one line, exit 2, the input's bytes unchanged."""
    model = workdir / "model"
    table = rows(tmp_path / "in.tsv", "text\tlabel", [f"{s}\t{i % 2}" for i, s in enumerate(sentences(20))])
    before = table.read_bytes()
    os.symlink(table, tmp_path / "link.tsv")
    os.link(table, tmp_path / "hard.tsv")
    for out in (table, tmp_path / "link.tsv", tmp_path / "hard.tsv"):
        for verb in ("classify", "tag"):
            one_line_error(bertforge(verb, model, "--input", table, "--out", out), "--out", "which this command reads")
    one_line_error(bertforge("embed", model, "--input", table, "--out", model / "v.npy"), "is inside MODEL")
    one_line_error(
        bertforge("tokenizer", "extend", model, workdir / "corpus.txt", "--add", "2", "--out", model, "--overwrite"),
        "--out",
        "is MODEL",
    )
    one_line_error(
        bertforge("prepare", tmp_path, "--tokenizer", workdir / "tok", "--out", tmp_path / "data"), "is inside CORPUS"
    )
    assert table.read_bytes() == before and not (model / "v.npy").exists() and not (tmp_path / "data").exists()


def test_answer_never_writes_over_its_questions(workdir, tmp_path):
    squad = {"data": [{"paragraphs": [{"context": "Alice flew to Paris.", "qas": [
        {"id": "q1", "question": "Who flew?", "answers": [{"text": "Alice", "answer_start": 0}]}]}]}]}  # fmt: skip
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(squad))
    one_line_error(bertforge("answer", workdir / "model", "--input", path, "--out", path), "which this command reads")
    assert json.loads(path.read_text()) == squad


def test_a_sweeps_runs_lie_under_its_out_and_its_grid_is_checked_before_any_run(workdir, tmp_path):
    """Grid values holding `/` or `..` name no path; the grid's size, duplicates and every value are refused
    before a run starts; two points that would share a directory are refused."""
    for value in ("../../outside", "/etc/passwd", "a/b"):
        name = run_name({"init_from": value})
        assert "/" not in name and ".." not in name
        assert (tmp_path / "runs" / name).resolve().parent == (tmp_path / "runs").resolve()
    started = time.perf_counter()
    with pytest.raises(UserError, match=f"more than {MAX_GRID_POINTS:,} runs"):
        parse_grid(["lr=" + ",".join(f"{i}e-5" for i in range(1, 1001)), "seed=" + ",".join(map(str, range(1000)))])
    assert time.perf_counter() - started < 2  # the 1,000,000 points are never built
    with pytest.raises(UserError, match="given twice"):
        parse_grid(["lr=1e-4,1e-4"])
    out = tmp_path / "sweep"
    done = bertforge("sweep", "--data", workdir / "data", "--out", out, *TINY_MODEL, "--grid", "lr=1e-4,-1",
                     "--max-steps", "1", *TINY_RUN)  # fmt: skip
    one_line_error(done, "lr must be at least 0")
    assert not (out / "runs").exists()
    done = bertforge("sweep", "--data", workdir / "data", "--out", out, *TINY_MODEL, "--grid",
                     "init_from=a/b,a_b", "--max-steps", "1", *TINY_RUN)  # fmt: skip
    one_line_error(done, "would share the run directory")
    inside = workdir / "model" / "sweep"  # a sweep's log written into a model its grid reads
    done = bertforge("sweep", "--data", workdir / "data", "--out", inside, "--grid",
                     f"init_from={workdir / 'model'},{workdir / 'model'}2", "--max-steps", "1", *TINY_RUN)  # fmt: skip
    one_line_error(done, "is inside --init-from")
    assert not inside.exists()


def test_modules_json_that_is_not_a_file_is_one_line(tmp_path):
    """A FIFO (or a folder) where modules.json belongs is refused, not read as 'no modules', nor waited on."""
    model = copy(build("sentence_embedding", tmp_path / "st"), tmp_path / "fifo")
    (model / "modules.json").unlink()
    os.mkfifo(model / "modules.json")
    (tmp_path / "texts.txt").write_text("a text\n")
    done = bertforge("embed", model, "--input", tmp_path / "texts.txt", "--out", tmp_path / "v.npy")
    one_line_error(done, "modules.json: not a regular file")


# ----------------------------------------------------------------------------- faults end in one line


def test_fine_tuning_that_diverges_in_its_first_epoch_ends_as_later_divergence_does(workdir, tmp_path):
    """A regression label of 1e39: the loss is infinite at step 1. One line, no traceback, exit 1, and the run
    that saved nothing leaves nothing."""
    data = rows(tmp_path / "reg.tsv", "text\tlabel", [f"{s}\t{1e39 if i == 0 else 1.0}" for i, s in
                                                      enumerate(sentences(24))])  # fmt: skip
    done = bertforge("finetune", workdir / "model", "--task", "regression", "--train", data, "--text-column", "text",
                     "--label-column", "label", "--out", tmp_path / "out", "--epochs", "1", "--quiet")  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr and "diverged" in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("writer", ["torch.save", "safetensors"])
def test_a_full_disk_in_any_writer_is_one_line_and_the_last_checkpoint_stays(workdir, tmp_path, monkeypatch, writer):
    """torch.save says a full disk as "unexpected pos" in a RuntimeError, safetensors as "os error 28" in a
    SafetensorError: either, at the second checkpoint, is one line and exit 2; the first checkpoint is intact."""
    from safetensors import SafetensorError

    import bertforge.modelfiles.directory as directory
    import bertforge.training.rundir as rundir

    run = tmp_path / "run"
    args = ["pretrain", "--data", workdir / "data", "--out", run, *TINY_MODEL, *TINY_RUN, "--batch-size", "4",
            "--eval-every", "0", "--save-every", "2", "--max-steps", "4"]  # fmt: skip
    calls = []
    real_save, real_file = torch.save, directory.save_file

    def full_torch(*a, **k):
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("[enforce fail at inline_container.cc:626] . unexpected pos 6912 vs 6800")
        return real_save(*a, **k)

    def full_safetensors(*a, **k):
        calls.append(1)
        if len(calls) > 1:
            raise SafetensorError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: '
                                  '"No space left on device" })')  # fmt: skip
        return real_file(*a, **k)

    if writer == "torch.save":
        monkeypatch.setattr(rundir.torch, "save", full_torch)
        monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(1, 1, 0))  # the disk full
    else:
        monkeypatch.setattr(directory, "save_file", full_safetensors)
    done = bertforge(*args)
    one_line_error(done, "could not write a checkpoint")
    assert (run / "checkpoints" / "step_000002" / "model.safetensors").is_file()
    assert not (run / "checkpoints" / "step_000004").exists()
    assert load_file(run / "checkpoints" / "step_000002" / "model.safetensors")


def test_a_failed_attempt_changes_no_setting_or_metric_of_the_run(workdir, tmp_path):
    """`--resume --lr 1e9` diverges: the run's settings keep its own rate and its metrics no row of the failed
    attempt, so a plain --resume goes on as the run was."""
    run = tmp_path / "run"
    args = ["pretrain", "--data", workdir / "data", "--out", run, *TINY_MODEL, *TINY_RUN, "--batch-size", "4",
            "--eval-every", "0", "--save-every", "2", "--log-every", "1"]  # fmt: skip
    bertforge_ok(*args, "--max-steps", "2", "--lr", "1e-3")
    saved = (run / "config.json").read_text()
    rows_before = (run / "metrics.jsonl").read_text()
    done = bertforge(*args, "--max-steps", "8", "--lr", "1e9", "--max-bad-steps", "1", "--grad-clip", "0", "--resume")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert (run / "config.json").read_text() == saved
    assert (run / "metrics.jsonl").read_text() == rows_before
    bertforge_ok(*args, "--max-steps", "4", "--resume")
    assert json.loads((run / "config.json").read_text())["train"]["lr"] == 1e-3
    assert [r["step"] for r in train_metrics(run)] == [1, 2, 3, 4]


# ----------------------------------------------------------------------------- model directories, bounded


def test_config_json_faults_are_one_line(workdir, tmp_path):
    """Types, nesting, numbers, size and relations of config.json: each one line naming the field."""
    model = workdir / "model"
    config = json.loads((model / "config.json").read_text())
    cases = [
        ({**config, "architectures": 5}, "architectures is 5"),
        ({**config, "bertforge_pretrain": "x"}, "bertforge_pretrain is 'x'"),
        ({**config, "bertforge_pretrain": {"pair_objective": 3}}, "pair_objective is 3"),
        ({**config, "pad_token_id": 99999}, "pad_token_id 99,999 is not an id"),
        ({**config, "problem_type": "evil"}, "problem_type is 'evil'"),
        ({**config, "model_type": "bertforge", "bertforge": {}}, "bertforge.weight_layout names; this file names none"),
    ]
    for i, (value, fragment) in enumerate(cases):
        bad = copy(model, tmp_path / f"bad{i}")
        (bad / "config.json").write_text(json.dumps(value))
        one_line_error(bertforge("fill-mask", bad, "the [MASK] sat."), fragment)
    for name, text, fragment in [
        ("nested", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ("digits", '{"vocab_size": ' + "9" * 5000 + "}", "5,000 digits"),
    ]:
        bad = copy(model, tmp_path / name)
        (bad / "config.json").write_text(text)
        one_line_error(bertforge("fill-mask", bad, "the [MASK] sat."), fragment)


@pytest.mark.parametrize("name", ["config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json"])
def test_a_huge_file_is_refused_unread(workdir, tmp_path, name):
    """A 1 GB file (sparse: nothing is written) is refused by its size, in a fraction of a second."""
    bad = copy(workdir / "model", tmp_path / "bad")
    if name == "vocab.txt":
        (bad / "tokenizer.json").unlink()
    with open(bad / name, "wb") as f:
        f.truncate(1 << 30)
    started = time.perf_counter()
    one_line_error(bertforge("fill-mask", bad, "the [MASK] sat."), name, "bytes, more than")
    assert time.perf_counter() - started < 5


def test_a_tensor_outside_the_family_is_refused_before_any_tensor_is_read(workdir, tmp_path, monkeypatch):
    """A safetensors file with an extra 64 MB tensor, or a weight stored as integers, or a weight of another shape:
    refused from the header, without reading a tensor."""
    import bertforge.modelfiles.directory as directory

    model = workdir / "model"
    weights = load_file(model / "model.safetensors")
    cases = [
        ({**weights, "extra.huge": torch.zeros(1 << 24)}, "not in its family's layout: extra.huge"),
        ({**weights, "bert.pooler.dense.bias": torch.zeros(32, dtype=torch.int64)}, "stored as I64"),
        ({**weights, "bert.pooler.dense.bias": torch.zeros(31)}, "bert.pooler.dense.bias is 31"),
    ]
    monkeypatch.setattr(directory, "load_file", lambda *a, **k: pytest.fail("a tensor was read"))
    for i, (tensors, fragment) in enumerate(cases):
        bad = copy(model, tmp_path / f"bad{i}")
        save_file(tensors, bad / "model.safetensors")
        with pytest.raises(UserError, match=fragment):
            load_model(BertForPreTraining, bad)


def test_a_tokenizer_id_past_the_embedding_table_is_one_line(workdir, tmp_path):
    """One id moved to 5000 in a tokenizer.json of a 120-row model: the vocabulary's size still fits, the id does
    not; fill-mask and embed say so in one line instead of a 50-line IndexError."""
    bad = copy(workdir / "model", tmp_path / "bad")
    spec = json.loads((bad / "tokenizer.json").read_text())
    word = next(token for token, i in spec["model"]["vocab"].items() if i > 10)
    spec["model"]["vocab"][word] = 5000
    (bad / "tokenizer.json").write_text(json.dumps(spec))
    (tmp_path / "texts.txt").write_text(f"{word} sat\n")
    one_line_error(bertforge("fill-mask", bad, f"{word} [MASK]."), "id 5,000")
    one_line_error(bertforge("embed", bad, "--input", tmp_path / "texts.txt", "--out", tmp_path / "v.npy"), "id 5,000")


def test_text_rules_are_bounded_as_a_chain(workdir, tmp_path):
    """Eight Replace rules, each writing two characters for one (each within bounds), multiply a text by 256:
    refused as a chain; one such rule is read."""
    model = workdir / "model"
    for count, refused in ((1, False), (8, True)):
        bad = copy(model, tmp_path / f"chain{count}")
        spec = json.loads((bad / "tokenizer.json").read_text())
        rules = [{"type": "Replace", "pattern": {"String": "a"}, "content": "aa"}] * count
        spec["normalizer"] = {"type": "Sequence", "normalizers": [spec["normalizer"], *rules]}
        (bad / "tokenizer.json").write_text(json.dumps(spec))
        done = bertforge("fill-mask", bad, "a cat [MASK].")
        if refused:
            one_line_error(done, "write up to 256 characters for each one they read")
        else:
            assert done.returncode == 0, done.stderr


def test_special_token_roles_are_distinct(workdir, tmp_path):
    for field, value, fragment in [("mask_token", "[PAD]", "both the pad token and the mask token"),
                                   ("cls_token", "[SEP]", "both the cls token and the sep token")]:  # fmt: skip
        bad = copy(workdir / "model", tmp_path / field)
        for name in ("tokenizer_config.json", "special_tokens_map.json"):  # the second names them last
            config = json.loads((bad / name).read_text())
            (bad / name).write_text(json.dumps({**config, field: value}))
        one_line_error(bertforge("fill-mask", bad, "the [MASK] sat."), fragment)


def test_extending_a_sentencepiece_model_takes_unknown_characters_and_skips_special_text(tmp_path):
    """XLM-R's SentencePiece: a frequent word with a character the vocabulary lacks, and `<mask>` inside words,
    were IndexErrors; the first becomes a token (its row from [UNK]'s), the second is never one."""
    model = build("xlm_roberta", tmp_path)
    text = tmp_path / "text.txt"
    text.write_text(("Zürich ★★★ foo<mask>bar the cat sat on the mat\n") * 20)
    done = json.loads(
        bertforge_ok("tokenizer", "extend", model, text, "--add", "5", "--out", tmp_path / "x", "--json").stdout
    )
    words = [added["word"] for added in done["added"]]
    assert "Zürich" in words and not any("<mask>" in word for word in words)


# ----------------------------------------------------------------------------- labelled files, the Python API


def test_empty_labels_and_fractional_offsets_are_refused_with_their_lines(workdir, tmp_path):
    table = rows(tmp_path / "t.tsv", "text\tlabel", ["the cat sat.\tyes", "the dog sat.\t", "a bird.\tno"])
    done = bertforge("finetune", workdir / "model", "--task", "classification", "--train", table, "--text-column",
                     "text", "--label-column", "label", "--out", tmp_path / "out")  # fmt: skip
    one_line_error(done, "t.tsv:3: the label is empty")
    squad = {"data": [{"paragraphs": [{"context": "Alice flew to Paris.", "qas": [
        {"id": "q1", "question": "Who flew?", "answers": [{"text": "flew", "answer_start": 6.5}]}]}]}]}  # fmt: skip
    (tmp_path / "squad.json").write_text(json.dumps(squad))
    done = bertforge("finetune", workdir / "model", "--task", "question-answering", "--train", tmp_path / "squad.json",
                     "--dev", tmp_path / "squad.json", "--out", tmp_path / "qa")  # fmt: skip
    one_line_error(done, "answer_start 6.5 is not a character offset")


def test_labels_of_one_example_each_are_said_as_such(workdir, tmp_path):
    table = rows(tmp_path / "t.tsv", "text\tlabel", [f"{s}\tclass{i}" for i, s in enumerate(sentences(300))])
    done = bertforge("finetune", workdir / "model", "--task", "classification", "--train", table, "--text-column",
                     "text", "--label-column", "label", "--out", tmp_path / "out")  # fmt: skip
    one_line_error(done, "300 labels for 300 examples")


def test_register_task_checks_what_the_command_line_checks(monkeypatch):
    monkeypatch.setattr(registry, "TASKS", registry.TASKS.copy())
    task = lambda *args: None  # noqa: E731
    for args, facts, fragment in [
        ((5, task), {}, "lowercase letters"),
        (("mine", None), {}, "make is a function"),
        (("mine", "nomodule:Nope"), {}, "names no module"),
        (("mine", task), {"seq_len": "long"}, "seq_len is 'long'"),
        (("mine", task), {"seq_len": -5}, "seq_len -5 is not a length"),
        (("mine", task), {"colour": "red"}, "'colour' is not a fact"),
        (("classification", task), {}, "a task named 'classification' is registered already"),
    ]:
        with pytest.raises(UserError, match=fragment):
            registry.register_task(*args, **facts)
    registry.register_task("mine", task)
    with pytest.raises(UserError, match="registered already"):
        registry.register_task("mine", task)
    with pytest.raises(UserError, match="unknown task 'nope'; choose one of classification"):
        registry.task_record("nope")


def test_a_variant_record_naming_code_outside_bertforge_is_refused_when_registered():
    """A record names its block as 'bertforge.module:name', or holds the object itself: `os:system` is refused at
    registration, in one line, before any model would import it."""
    from bertforge.model.variants import FEED_FORWARDS, POSITION_SCHEMES, FeedForwardKind, PositionScheme

    with pytest.raises(UserError, match="block 'os:system' names no bertforge code"):
        FEED_FORWARDS.copy().register(FeedForwardKind("evil", "runs a shell", "os:system"))
    with pytest.raises(UserError, match="attention 'subprocess:run' names no bertforge code"):
        POSITION_SCHEMES.copy().register(PositionScheme("evil", "x", attention="subprocess:run"))
    FEED_FORWARDS.copy().register(FeedForwardKind("mine", "my own block", object))  # an object of one's own


def sentence_model_with(tmp_path, name, change):
    """all-MiniLM-L6-v2's layout (SentenceTransformer.save), copied and changed by `change(directory)`."""
    model = copy(build("sentence_embedding", tmp_path / name), tmp_path / f"{name}-changed")
    change(model)
    return model


def test_a_module_folder_linked_outside_the_model_is_refused_and_nothing_is_copied(tmp_path):
    """A module folder that is a link to a folder elsewhere (another directory's files, a pseudo-filesystem) is
    refused in one line by every verb that reads the modules, and nothing of it reaches an output."""
    secret = tmp_path / "elsewhere"
    secret.mkdir()
    (secret / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True, "secret": "not yours"}))

    def link_pooling(model):
        shutil.rmtree(model / "1_Pooling")
        os.symlink(secret, model / "1_Pooling")

    model = sentence_model_with(tmp_path, "linked", link_pooling)
    (tmp_path / "texts.txt").write_text("a text\n")
    for args in (
        ["embed", model, "--input", tmp_path / "texts.txt", "--out", tmp_path / "v.npy"],
        ["export", model, "--out", tmp_path / "onnx"],
    ):
        one_line_error(bertforge(*args), "lies outside the model directory")
    assert not (tmp_path / "v.npy").exists() and not (tmp_path / "onnx").exists()
    proc = sentence_model_with(
        tmp_path, "proc", lambda m: (shutil.rmtree(m / "1_Pooling"), os.symlink("/proc/self", m / "1_Pooling"))
    )
    one_line_error(bertforge("embed", proc, "--input", tmp_path / "texts.txt", "--out", tmp_path / "v.npy"), "outside")


def test_a_pooling_mode_named_many_times_is_refused(tmp_path):
    """One mode named 100,000 times made vectors 3.2 million wide: each mode once."""

    def repeat_mean(model):
        (model / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode": ["mean"] * 100_000}))

    model = sentence_model_with(tmp_path, "repeated", repeat_mean)
    (tmp_path / "texts.txt").write_text("a text\n")
    done = bertforge("embed", model, "--input", tmp_path / "texts.txt", "--out", tmp_path / "v.npy")
    one_line_error(done, "names a mode more than once")


# ----------------------------------------------------------------------------- fuzzing model directories

JSON_VALUES = st.recursive(
    # no subnormal floats: ONNX Runtime, once imported into a worker, flushes them to zero for the whole process
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**40)
    | st.floats(allow_nan=False, allow_subnormal=False)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=8,
)


def _mutate(spec, path, value):
    """`spec` with the value at `path` (keys and indices into its nested objects) replaced, or deleted (None)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(spec, dict) and spec:
        key = head if head in spec else list(spec)[hash(head) % len(spec)]  # a key by name, or by position
        changed = dict(spec)
        if value is None and not rest:
            del changed[key]
        else:
            changed[key] = _mutate(spec[key], rest, value)
        return changed
    if isinstance(spec, list) and spec:
        changed = list(spec)
        index = hash(head) % len(spec)
        changed[index] = _mutate(spec[index], rest, value)
        return changed
    return value


def _safetensors_with_header(path, mutate):
    """model.safetensors with its JSON header changed by `mutate` (the tensors' bytes as they were)."""
    data = path.read_bytes()
    size = struct.unpack("<Q", data[:8])[0]
    header = mutate(json.loads(data[8 : 8 + size]))
    encoded = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + data[8 + size :])


@pytest.fixture(scope="module")
def fuzz_model(tmp_path_factory, wordpiece_tokenizer):
    return save_random_model(tmp_path_factory.mktemp("fuzz") / "model", wordpiece_tokenizer, max_position_embeddings=32)


@settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(file="config.json", path=["max_position_embeddings"], value=None, truncate=1)  # null: the family's default
@example(file="config.json", path=["architectures"], value=5, truncate=1)
@example(file="config.json", path=["bertforge_pretrain"], value="x", truncate=1)
@given(
    file=st.sampled_from(["config.json", "tokenizer_config.json", "tokenizer.json", "model.safetensors"]),
    path=st.lists(st.integers(0, 50), min_size=1, max_size=4),
    value=JSON_VALUES,
    truncate=st.integers(0, 3),
)
def test_fuzzed_model_directories_end_in_exit_0_or_2(fuzz_model, tmp_path_factory, file, path, value, truncate):
    """A value anywhere in config.json, tokenizer_config.json, tokenizer.json or the safetensors header replaced
    by any JSON (or deleted), or the file cut short: fill-mask and embed end with exit 0 or 2, never a traceback,
    each in a few seconds."""
    model = copy(fuzz_model, tmp_path_factory.mktemp("case") / "model")
    target = model / file
    if truncate == 0:  # cut short
        data = target.read_bytes()
        target.write_bytes(data[: len(data) * path[0] // 51])
    elif file == "model.safetensors":
        _safetensors_with_header(target, lambda header: _mutate(header, path, value))
    else:
        target.write_text(json.dumps(_mutate(json.loads(target.read_text()), path, value)))
    (model.parent / "texts.txt").write_text("the cat sat on the mat\n")
    for args in (("fill-mask", model, "the [MASK] sat."),
                 ("embed", model, "--input", model.parent / "texts.txt", "--out", model.parent / "v.npy")):  # fmt: skip
        started = time.perf_counter()
        done = bertforge(*args)
        assert done.returncode in (0, 2) and "Traceback" not in done.stderr, (file, path, value, done.stderr[-2000:])
        assert time.perf_counter() - started < 10


@pytest.fixture(scope="module")
def fuzz_export(tmp_path_factory):
    """all-MiniLM-L6-v2's layout (SentenceTransformer.save) and its fp32 export: the two kinds of directory whose
    module folders and graph serving reads."""
    if importlib.util.find_spec("onnxruntime") is None:  # not imported here: the export runs in its own process
        pytest.skip("needs onnxruntime")
    root = tmp_path_factory.mktemp("fuzz-export")
    model = build("sentence_embedding", root)
    bertforge_ok("export", model, "--out", root / "onnx")
    return model, root / "onnx"


EXPORT_FILES = ["modules.json", "1_Pooling/config.json", "config.json", "onnx/model.onnx"]


@settings(max_examples=20, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(file="modules.json", path=[1, 3], value="sentence_transformers.models.Dense", truncate=1)  # not computed
@example(file="1_Pooling/config.json", path=[0], value=["mean"] * 1000, truncate=1)  # a mode many times
@example(file="config.json", path=["bertforge_export", "answers"], value="question-answering", truncate=1)
@example(file="onnx/model.onnx", path=[25], value=None, truncate=0)  # a graph cut short
@given(file=st.sampled_from(EXPORT_FILES), path=st.lists(st.integers(0, 50), min_size=1, max_size=3),
       value=JSON_VALUES, truncate=st.integers(0, 3))  # fmt: skip
def test_fuzzed_exports_and_module_folders_end_in_exit_0_or_2(
    fuzz_export, tmp_path_factory, file, path, value, truncate
):
    """A value anywhere in an export's modules.json, pooling config or config.json replaced by any JSON (or
    deleted), or a file cut short (the graph's bytes too): embed on the export and on the model it came from ends
    with exit 0 or 2, never a traceback, each in a few seconds."""
    model, export = fuzz_export
    root = tmp_path_factory.mktemp("export-case")
    changed = [copy(model, root / "model"), copy(export, root / "onnx")]
    for directory in changed:
        target = directory / file
        if not target.is_file():
            continue
        if truncate == 0 or file.endswith(".onnx"):
            data = target.read_bytes()
            target.write_bytes(data[: len(data) * path[0] // 51])
        else:
            target.write_text(json.dumps(_mutate(json.loads(target.read_text()), path, value)))
    (root / "texts.txt").write_text("the cat sat on the mat\n")
    for directory in changed:
        started = time.perf_counter()
        done = bertforge("embed", directory, "--input", root / "texts.txt", "--out", root / "v.npy")
        assert done.returncode in (0, 2) and "Traceback" not in done.stderr, (file, path, value, done.stderr[-2000:])
        assert time.perf_counter() - started < 15


def test_a_weights_file_far_larger_than_what_the_model_reads_is_refused_unmapped(workdir, tmp_path, monkeypatch):
    """A tensor the model never reads (here a next-sentence head a classifier drops, made large) is refused before
    the file is mapped: memory and address space stay bounded by the model, not the file."""
    from bertforge.model.heads import BertForSequenceClassification
    from bertforge.modelfiles import directory as model_files

    model = copy(workdir / "model", tmp_path / "padded")
    weights = load_file(model / "model.safetensors")
    weights["cls.seq_relationship.weight"] = torch.zeros(2, 2_000_000)  # 16 MB the classifier never reads
    save_file(weights, model / "model.safetensors", metadata={"format": "pt"})
    monkeypatch.setattr(model_files, "UNREAD_SLACK", 1 << 20)
    with pytest.raises(UserError, match="far more than the .* MB of tensors this model reads"):
        load_model(BertForSequenceClassification, model, keep_heads=False, num_labels=2)


def test_a_segment_id_past_the_models_table_is_one_line(workdir, tmp_path):
    """A tokenizer.json whose pair template gives B segment 5, beside a model of two segments, was an index error
    in the embeddings: refused when the two are loaded together."""
    model = copy(workdir / "model", tmp_path / "segments")
    spec = json.loads((model / "tokenizer.json").read_text())
    spec["post_processor"]["pair"] = [
        {**item, next(iter(item)): {**item[next(iter(item))], "type_id": 5}} for item in spec["post_processor"]["pair"]
    ]
    (model / "tokenizer.json").write_text(json.dumps(spec))
    one_line_error(bertforge("nsp", model, "The cat sat.", "--pair", "It purred."), "segment id 5", "2 segments")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_an_output_on_a_pseudo_file_system_is_one_line(workdir, tmp_path):
    """--out under /proc takes no new files: one line naming it, exit 2 (was a FileNotFoundError traceback)."""
    one_line_error(
        bertforge("tokenizer", "train", workdir / "corpus.txt", "--out", "/proc/self/tok", "--vocab-size", "100"),
        "/proc/self/tok: bertforge cannot write there",
    )
