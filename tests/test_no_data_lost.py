"""No data is lost, whatever the interruption: prepared data and tokenizers are written whole or not at all, a run
directory and a data directory are one process's at a time, a damaged checkpoint is never trained on, weights that
are no longer numbers are never saved, and a run that never took a step restarts with the same command."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from bertforge.engine.checkpoint import checkpoint_dirs, write_checksums
from bertforge.errors import UserError
from bertforge.fileio import directory_lock

from conftest import (
    TINY_MODEL,
    TINY_RUN,
    assert_same_steps,
    bertforge,
    bertforge_ok,
    make_documents,
    one_line_error,
    prepared_data,
    save_random_model,
    tiny_model_config,
    write_corpus,
)

TINY = [*TINY_MODEL, *TINY_RUN, "--batch-size", "8", "--eval-every", "0"]


def tree(directory: Path) -> dict[str, str]:
    """Every file below `directory` by its path, with the sha256 of its bytes: equal trees are byte-identical."""
    return {
        p.relative_to(directory).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def siblings(path: Path) -> list[str]:
    """What lies beside `path` under a name that starts with its own: temporary directories of a writer."""
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(f".{path.name}."))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A corpus, its tokenizer and its prepared data; and a larger corpus, which takes a few seconds to prepare."""
    root = prepared_data(tmp_path_factory.mktemp("no_data_lost"), seed=31)
    write_corpus(root / "big.txt", make_documents(n_docs=1500, sentences=60, seed=32))
    return root


# ---------------------------------------------------------------- prepare


def test_a_failed_or_refused_prepare_leaves_existing_data_byte_identical(workdir, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(workdir / "data", data)
    before = tree(data)
    prepare = ["prepare", "--tokenizer", workdir / "tok", "--out", data]
    one_line_error(bertforge(*prepare, tmp_path / "nope.txt", "--overwrite"), "nope.txt", "no such file")
    (tmp_path / "inputs").mkdir()
    shutil.copy(workdir / "corpus.txt", tmp_path / "inputs" / "good.txt")
    (tmp_path / "inputs" / "bad.txt").write_bytes(bytes(range(256)) * 10)  # binary, inside a directory
    one_line_error(bertforge(*prepare, tmp_path / "inputs", "--overwrite"), "bad.txt", "binary")
    one_line_error(bertforge(*prepare, workdir / "corpus.txt"), "already holds prepared data", "--overwrite")
    assert tree(data) == before and siblings(data) == []
    (tmp_path / "one.txt").write_text("The cat sat.\n")
    bertforge_ok(*prepare, tmp_path / "one.txt", "--overwrite", "--valid-fraction", "0")
    assert json.loads((data / "meta.json").read_text())["splits"]["train"]["tokens"] < 10  # replaced, when asked


def test_prepare_writes_nothing_for_bad_input_and_never_replaces_what_is_not_data(workdir, tmp_path):
    tok = ["--tokenizer", workdir / "tok"]
    one_line_error(bertforge("prepare", tmp_path / "nope.txt", *tok, "--out", tmp_path / "new"), "nope.txt")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no skeleton, no temporary directory
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.md").write_text("my notes\n")
    for flags in ([], ["--overwrite"]):
        done = bertforge("prepare", workdir / "corpus.txt", *tok, "--out", tmp_path / "notes", *flags)
        one_line_error(done, "not prepared data")
    assert (tmp_path / "notes" / "todo.md").read_text() == "my notes\n"
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(workdir / "corpus.txt", corpus / "a.txt")
    one_line_error(bertforge("prepare", corpus, *tok, "--out", tmp_path), "holds CORPUS")


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_prepare_leaves_the_old_data_and_nothing_else(workdir, tmp_path, number):
    data = tmp_path / "data"
    shutil.copytree(workdir / "data", data)
    before = tree(data)
    command = [sys.executable, "-m", "bertforge", "prepare", str(workdir / "big.txt"), "--tokenizer",
               str(workdir / "tok"), "--out", str(data), "--overwrite", "--quiet"]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not siblings(data) and process.poll() is None and time.time() < deadline:
        time.sleep(0.01)  # until it is writing its temporary directory
    assert process.poll() is None, "prepare finished before it could be interrupted: give it more text"
    time.sleep(0.3)
    process.send_signal(number)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + number, stderr
    assert f"interrupted (signal {number})" in stderr and "Traceback" not in stderr
    assert tree(data) == before and siblings(data) == []


def test_a_killed_prepare_leaves_a_named_temporary_that_the_next_one_clears(workdir, tmp_path):
    data = tmp_path / "data"
    command = [sys.executable, "-m", "bertforge", "prepare", str(workdir / "big.txt"), "--tokenizer",
               str(workdir / "tok"), "--out", str(data), "--quiet"]  # fmt: skip
    process = subprocess.Popen(command)
    deadline = time.time() + 60
    while not siblings(data) and process.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    left = siblings(data)
    assert not data.exists() and len(left) == 1 and left[0].startswith(f".data.tmp-{process.pid}-"), left
    bertforge_ok("prepare", workdir / "corpus.txt", "--tokenizer", workdir / "tok", "--out", data)
    assert (data / "meta.json").is_file() and siblings(data) == []


def test_data_a_run_reads_is_not_replaced_under_it(workdir, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(workdir / "data", data)
    with directory_lock(data, shared=True):  # as pretrain holds it
        done = bertforge(
            "prepare", workdir / "corpus.txt", "--tokenizer", workdir / "tok", "--out", data, "--overwrite"
        )
        one_line_error(done, "in use by another bertforge process", f"pid {os.getpid()}")
        with pytest.raises(UserError, match="in use"):  # and a second writer in any process
            with directory_lock(data):
                pass


def test_tokenizer_train_is_written_whole_and_replaced_only_when_asked(workdir, tmp_path):
    bertforge_ok("tokenizer", "train", workdir / "corpus.txt", "--out", tmp_path / "tok", "--vocab-size", "120")
    before = tree(tmp_path / "tok")
    one_line_error(bertforge("tokenizer", "train", workdir / "corpus.txt", "--out", tmp_path / "tok"), "--overwrite")
    one_line_error(bertforge("tokenizer", "train", tmp_path / "nope.txt", "--out", tmp_path / "tok", "--overwrite"))
    assert tree(tmp_path / "tok") == before and siblings(tmp_path / "tok") == []


# ---------------------------------------------------------------- runs


def test_a_run_that_never_took_a_step_restarts_with_the_same_command(workdir, tmp_path):
    run = tmp_path / "run"
    too_big = ["pretrain", "--data", workdir / "data", "--out", run, *TINY, "--max-steps", "2"]
    failed = bertforge(*too_big, "--batch-size", "100000")
    one_line_error(failed, "fewer than one global batch")
    assert sorted(p.name for p in run.iterdir()) == ["config.json"]
    again = bertforge_ok(*too_big, "--recipe", "bert")  # the same command, fixed: no --resume or --overwrite needed
    assert "stopped before its first checkpoint: starting it again" in again.stderr
    assert [p.name for p in checkpoint_dirs(run)] == ["step_000002"]
    # A run that saved resumes with the recipe it started from named again; another recipe is refused.
    bertforge_ok(
        "pretrain", "--data", workdir / "data", "--out", run, "--resume", "--recipe", "bert", "--max-steps", "4"
    )
    other = bertforge("pretrain", "--data", workdir / "data", "--out", run, "--resume", "--recipe", "budget")
    one_line_error(other, "--recipe budget", "started from recipe bert")


def test_a_run_directory_is_one_runs_and_holds_nothing_else(workdir, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    with directory_lock(run):
        done = bertforge("pretrain", "--data", workdir / "data", "--out", run, *TINY, "--max-steps", "2")
        one_line_error(done, "in use by another bertforge process", f"pid {os.getpid()}")
    folder = tmp_path / "folder"
    (folder / "model").mkdir(parents=True)
    (folder / "model" / "mine.bin").write_bytes(b"keep me")
    done = bertforge("pretrain", "--data", workdir / "data", "--out", folder, *TINY, "--max-steps", "2")
    one_line_error(done, "holds files that are not a run")
    assert (folder / "model" / "mine.bin").read_bytes() == b"keep me"


def test_a_damaged_checkpoint_is_set_aside_and_the_run_resumes_from_the_one_before(workdir, tmp_path):
    flags = ["--data", workdir / "data", *TINY, "--max-steps", "6", "--save-every", "2", "--log-every", "2"]
    bertforge_ok("pretrain", "--out", tmp_path / "whole", *flags)
    run = tmp_path / "damaged"
    shutil.copytree(tmp_path / "whole", run)
    shutil.rmtree(run / "model")
    latest = checkpoint_dirs(run)[-1]
    weights = bytearray((latest / "model.safetensors").read_bytes())
    weights[-4096:] = bytes(4096)  # 4 KB of the weights zeroed: still a readable safetensors file
    (latest / "model.safetensors").write_bytes(bytes(weights))
    done = bertforge_ok("pretrain", "--out", run, *flags, "--resume")
    assert "step_000006 is damaged (model.safetensors does not match its checksum)" in done.stderr
    assert "resuming from step_000004" in done.stderr
    assert (run / "checkpoints" / "step_000006.damaged").is_dir()  # kept, under a name never read as a checkpoint
    keys = ("loss", "mlm_loss", "nsp_loss", "mlm_acc", "nsp_acc", "grad_norm", "lr", "tokens")
    assert_same_steps(tmp_path / "whole", run, [2, 4, 6], keys)  # steps 5 and 6 trained again, exactly


def stopped_at_its_checkpoint(workdir, run: Path) -> tuple[list, Path]:
    """A 2-step run as if stopped after its checkpoint at step 2 (its model not written): its flags, the checkpoint."""
    flags = ["--data", workdir / "data", *TINY, "--save-every", "2", "--log-every", "2"]
    bertforge_ok("pretrain", "--out", run, *flags, "--max-steps", "2")
    shutil.rmtree(run / "model")
    return flags, checkpoint_dirs(run)[-1]


def test_weights_that_are_not_numbers_are_never_saved(workdir, tmp_path):
    """A checkpoint that passed its checksums yet holds what is not a number: moments are refused when the resume
    reads them (one line, exit 2); weights train into nan and the run stops at that step (exit 1). Either way
    nothing is saved past the last good checkpoint."""
    from safetensors.torch import load_file, save_file

    run = tmp_path / "run"
    flags, checkpoint = stopped_at_its_checkpoint(workdir, run)
    good = checkpoint / "optimizer.pt"
    tensors = torch.load(good, weights_only=True)
    kept = good.read_bytes()
    for moments in tensors["optimizer"]["state"].values():
        moments["exp_avg"].fill_(float("nan"))  # moments that passed their checksums, yet are not numbers
    torch.save(tensors, good)
    write_checksums(checkpoint)
    done = bertforge("pretrain", "--out", run, *flags, "--max-steps", "4", "--resume")
    assert done.returncode == 2 and "optimizer.pt" in done.stderr and "not numbers" in done.stderr, done.stderr
    good.write_bytes(kept)
    path = checkpoint / "model.safetensors"  # a checkpoint is a model directory
    weights = load_file(path)
    name = next(k for k, v in weights.items() if v.ndim == 2 and "embeddings" in k)
    weights[name].fill_(float("nan"))
    save_file(weights, path, metadata={"format": "pt"})
    write_checksums(checkpoint)
    done = bertforge("pretrain", "--out", run, *flags, "--max-steps", "4", "--resume")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "weights are not finite at step" in done.stderr and "step_000002, is intact" in done.stderr
    assert [p.name for p in checkpoint_dirs(run)] == ["step_000002"] and not (run / "model").exists()


def test_sigterm_to_the_process_group_stops_with_a_checkpoint_and_143(workdir, tmp_path):
    """What `timeout`, systemd and Slurm do: every process of the group gets SIGTERM, loader workers included."""
    run = tmp_path / "run"
    command = [sys.executable, "-m", "bertforge", "pretrain", "--data", str(workdir / "data"), "--out", str(run),
               *map(str, TINY), "--num-workers", "1", "--max-steps", "100000", "--save-every", "0"]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 60
    while not (run / "metrics.jsonl").is_file() and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)  # until it has logged a step
    os.killpg(process.pid, signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143 and "Traceback" not in stderr, stderr
    assert "stopped by signal 15" in stderr and "--resume" in stderr
    assert checkpoint_dirs(run), "no checkpoint saved"


def test_a_piped_log_has_lines_not_bars_and_results_go_to_stdout(workdir, tmp_path):
    flags = ["--data", workdir / "data", *[f for f in TINY if f != "--quiet"], "--max-steps", "6", "--log-every", "2"]
    done = bertforge_ok("pretrain", "--out", tmp_path / "run", *flags)
    assert "\r" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("step ") and " lr " in line]
    assert [line.split()[1] for line in lines] == ["2/6", "4/6", "6/6"] and all(" loss " in line for line in lines)
    assert done.stdout.startswith("done: 6 steps")
    quiet = bertforge_ok("pretrain", "--out", tmp_path / "quiet", *flags, "--quiet")
    assert quiet.stderr == "" and quiet.stdout.startswith("done: 6 steps")  # --quiet keeps the summary


def test_files_follow_the_umask(workdir, tmp_path):
    """As any other tool's files: here umask 002, where a fixed 0644 or the temporary files' 0600 would show."""
    umask = {"preexec_fn": lambda: os.umask(0o002)}
    bertforge_ok("pretrain", "--data", workdir / "data", "--out", tmp_path / "run", *TINY, "--max-steps", "2", **umask)
    bertforge_ok("prepare", workdir / "corpus.txt", "--tokenizer", workdir / "tok", "--out", tmp_path / "data", **umask)
    for top in [tmp_path / "data", tmp_path / "run" / "model", *checkpoint_dirs(tmp_path / "run")]:
        for path in [top, *top.rglob("*")]:
            assert path.stat().st_mode & 0o777 == (0o775 if path.is_dir() else 0o664), path


def test_a_full_disk_in_the_loop_is_one_line_and_one_attempt(workdir, tmp_path, monkeypatch):
    from bertforge.training.config import TrainConfig
    from bertforge.training.trainer import Trainer

    model_config = tiny_model_config(workdir / "data")
    cfg = TrainConfig(seq_len=64, batch_size=8, max_steps=6, save_every=2, eval_every=0, num_workers=0,
                      precision="fp32")  # fmt: skip
    attempts = []

    def disk_full(*args, **kwargs):
        attempts.append(args[1])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("bertforge.training.rundir.torch.save", disk_full)
    trainer = Trainer(workdir / "data", tmp_path / "run", model_config, cfg, progress=False)
    with pytest.raises(UserError, match="could not write a checkpoint .*No space left on device.* intact"):
        trainer.train()
    assert len(attempts) == 1  # the save at step 2, not again on the way out
    checkpoints = tmp_path / "run" / "checkpoints"
    assert checkpoint_dirs(tmp_path / "run") == [] and not list(checkpoints.glob(".*"))  # nothing torn left


class RunsCode:
    """What a hostile pickle holds: an object whose unpickling runs a call, here one that makes a directory."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def test_a_pickle_that_would_run_code_is_refused_in_one_line_and_never_run(workdir, tmp_path, wordpiece_tokenizer):
    """A checkpoint's optimizer.pt (its checksum rewritten to match, as whoever planted it could) and a model's
    pytorch_model.bin read with --trust-pickle: only tensors are ever unpickled."""
    marker, run = tmp_path / "the_pickle_ran", tmp_path / "run"
    flags, checkpoint = stopped_at_its_checkpoint(workdir, run)
    tensors = torch.load(checkpoint / "optimizer.pt", weights_only=True)
    torch.save({**tensors, "optimizer": RunsCode(marker)}, checkpoint / "optimizer.pt")
    write_checksums(checkpoint)
    resumed = bertforge("pretrain", "--out", run, *flags, "--max-steps", "4", "--resume")
    one_line_error(resumed, "optimizer.pt: unreadable checkpoint", "unsupported GLOBAL posix.mkdir")
    assert not marker.exists() and [p.name for p in checkpoint_dirs(run)] == ["step_000002"]

    model = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    (model / "model.safetensors").unlink()
    torch.save({"weights": RunsCode(marker)}, model / "pytorch_model.bin")
    refused = bertforge("fill-mask", model, "the [MASK] sat.", "--trust-pickle")
    one_line_error(refused, "pytorch_model.bin: not loaded", "unsupported GLOBAL posix.mkdir")
    assert not marker.exists()


# A run with two data-loader workers, and one fault planted in it: a worker's collation raising, or the disk
# filling (ENOSPC) or turning read-only (EROFS) when the run writes its checkpoint at step 4.
FAULTY_RUN = """
import errno, sys
import torch.utils.data
import bertforge.data.masking as masking
import bertforge.training.trainer as trainer
from bertforge.cli import main

fault, argv = sys.argv[1], sys.argv[2:]
if fault == "worker":
    collate = masking.MaskingCollator.__call__
    calls = []

    def failing(self, instances):
        if torch.utils.data.get_worker_info() is not None:
            calls.append(1)
            if len(calls) == 3:
                raise RuntimeError("planted: a worker fails")
        return collate(self, instances)

    masking.MaskingCollator.__call__ = failing
else:
    code = {"enospc": errno.ENOSPC, "erofs": errno.EROFS}[fault]

    def failing_save(*args, **kwargs):
        raise OSError(code, "planted")

    trainer.save_checkpoint = failing_save
sys.exit(main(argv))
"""


@pytest.mark.parametrize("fault", ["worker", "enospc", "erofs"])
def test_a_fault_in_a_run_with_loader_workers_ends_the_process(workdir, tmp_path, fault):
    """A worker that raises, a full disk or a read-only one: the process ends (its workers stopped) instead of
    waiting on workers that ignore SIGTERM; a write that fails is one line, exit 2."""
    run = [
        "pretrain", "--data", workdir / "data", "--out", tmp_path / "run", *TINY_MODEL, "--seq-len", "64",
        "--precision", "fp32", "--quiet", "--batch-size", "8", "--eval-every", "0", "--save-every", "4",
        "--max-steps", "40", "--num-workers", "2",
    ]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", FAULTY_RUN, fault, *map(str, run)], capture_output=True, text=True, timeout=120
    )
    if fault == "worker":
        assert done.returncode == 1 and "planted: a worker fails" in done.stderr
    else:
        one_line_error(done, "could not write a checkpoint", "planted")


def test_a_killed_runs_workers_do_not_keep_its_directory_locked(workdir, tmp_path):
    """SIGKILL to the main process of a run with loader workers: the run directory can be locked again at once
    (the workers held the lock they inherited until they noticed, seconds later)."""
    run = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-m", "bertforge", "pretrain", "--data", workdir / "data", "--out", run, *TINY_MODEL,
         "--seq-len", "64", "--precision", "fp32", "--quiet", "--batch-size", "8", "--eval-every", "0",
         "--max-steps", "100000", "--num-workers", "2", "--log-every", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not (run / "metrics.jsonl").is_file() or not (run / "metrics.jsonl").read_text().strip():
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()
        time.sleep(0.2)
    process.kill()
    process.wait()
    with directory_lock(run):  # at once, with the dead run's workers maybe still alive
        pass


def test_a_run_that_diverges_saves_nothing_from_it_and_keeps_the_good_checkpoints(workdir, tmp_path):
    """Resumed at a learning rate that blows it up, a run saves no checkpoint from the steps whose loss is not
    finite (a newest checkpoint of them would be what every later --resume starts from, and --keep-last would prune
    the good ones for it), fails in one line, and resumes at a sane rate from where it was good."""
    run = tmp_path / "run"
    flags = [*TINY, "--save-every", "2", "--keep-last", "2", "--log-every", "1"]
    bertforge_ok("pretrain", "--data", workdir / "data", "--out", run, *flags, "--max-steps", "6")
    good = [p.name for p in checkpoint_dirs(run)]
    resume = ["pretrain", "--data", workdir / "data", "--out", run, "--resume"]
    done = bertforge(*resume, "--lr", "1e9", "--max-steps", "30")
    assert done.returncode == 1 and "diverged" in done.stderr and "step_000006, is intact" in done.stderr
    assert [p.name for p in checkpoint_dirs(run)] == good
    assert not (run / "model").exists() or all_finite_model(run / "model")
    bertforge_ok(*resume, "--lr", "5e-4", "--max-steps", "8")


def all_finite_model(directory: Path) -> bool:
    from safetensors.torch import load_file

    return all(bool(torch.isfinite(t).all()) for t in load_file(directory / "model.safetensors").values())


def test_a_fine_tuning_that_diverges_stops_and_saves_no_model_of_it(workdir, tmp_path, wordpiece_tokenizer):
    model = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    train = tmp_path / "train.tsv"
    train.write_text("text\tlabel\n" + "".join(f"the cat sat {i}\t{i % 2}\n" for i in range(64)), encoding="utf-8")
    done = bertforge(
        "finetune", model, "--task", "classification", "--train", train, "--text-column", "text", "--label-column",
        "label", "--out", tmp_path / "ft", "--lr", "1e9", "--grad-clip", "0", "--epochs", "2", "--device", "cpu",
        "--precision", "fp32",
    )  # fmt: skip
    assert done.returncode == 1 and "diverged" in done.stderr, done.stderr
    assert not (tmp_path / "ft" / "model").exists() or all_finite_model(tmp_path / "ft" / "model")


def test_a_second_fine_tuning_on_the_same_out_is_refused_while_the_first_runs(workdir, tmp_path, wordpiece_tokenizer):
    """Two `finetune` on one --out half a second apart: the second is refused (OUT is checked under the lock the
    first holds), and the first ends with its model; --out onto a pre-training run is refused by what it holds."""
    model = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    train = tmp_path / "train.tsv"
    train.write_text("text\tlabel\n" + "".join(f"the cat sat {i}\t{i % 2}\n" for i in range(400)), encoding="utf-8")
    args = ["finetune", model, "--task", "classification", "--train", train, "--text-column", "text",
            "--label-column", "label", "--out", tmp_path / "ft", "--epochs", "3", "--device", "cpu",
            "--precision", "fp32", "--quiet"]  # fmt: skip
    first = subprocess.Popen([sys.executable, "-m", "bertforge", *map(str, args)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "ft").is_dir():
        assert time.monotonic() < deadline and first.poll() is None
        time.sleep(0.05)
    time.sleep(0.5)
    second = bertforge(*args)
    _, first_err = first.communicate(timeout=300)
    assert first.returncode == 0, first_err
    one_line_error(second, str(tmp_path / "ft"))
    assert (tmp_path / "ft" / "model" / "config.json").is_file()
    pretraining = tmp_path / "pretraining"
    bertforge_ok("pretrain", "--data", workdir / "data", "--out", pretraining, *TINY, "--max-steps", "2")
    one_line_error(bertforge(*args[:-1], "--out", pretraining), "not a fine-tuning's")


def test_a_run_shorter_than_a_log_window_ends_well_with_its_curves(workdir, tmp_path):
    """`--max-steps 3` with --log-every 50, a first smoke test: exit 0, the partial window logged at the end, the
    model and the training curves written."""
    run = tmp_path / "run"
    bertforge_ok("pretrain", "--data", workdir / "data", "--out", run, *TINY, "--max-steps", "3", "--log-every", "50")
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["split"] == "train"] == [3]
    assert (run / "plots" / "training_curves.png").is_file() and (run / "model" / "config.json").is_file()


@pytest.mark.parametrize(
    "verb",
    [
        ["pretrain", "--data", "DATA", "--out", "OUT", "--lr", "nan"],
        ["finetune", "MODEL", "--task", "classification", "--train", "TRAIN", "--out", "OUT", "--warmup", "nan"],
        ["embed", "MODEL", "--input", "TRAIN", "--out", "OUT", "--batch-size", "-1"],
        ["embed", "MODEL", "--input", "TRAIN", "--out", "OUT", "--batch-size", "0"],
        ["embed", "MODEL", "--input", "TRAIN", "--out", "OUT", "--layer", "99"],
        ["tokenizer", "train", "TRAIN", "--out", "OUT", "--vocab-size", "0"],
        ["fill-mask", "MODEL", "a [MASK].", "--top-k", "-1"],
        ["fill-mask", "MODEL", "a [MASK].", "--top-k", "100000"],
        ["evaluate", "MODEL", "--data", "DATA", "--max-batches", "0"],
    ],
    ids=lambda verb: " ".join(verb[:1] + verb[-2:]),
)
def test_a_flag_out_of_its_range_is_one_line_and_writes_nothing(workdir, tmp_path, wordpiece_tokenizer, verb):
    """A count of 0 or -1, a rate of nan, a layer past the model: one line (after the verb's usage, for a flag
    the parser refuses) and exit 2, not an empty result or a traceback."""
    model = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    names = {"DATA": workdir / "data", "OUT": tmp_path / "out", "MODEL": model, "TRAIN": workdir / "corpus.txt"}
    done = bertforge(*[names.get(a, a) for a in verb])
    errors = [line for line in done.stderr.strip().splitlines() if not line.startswith("usage: ")]
    assert done.returncode == 2 and len(errors) == 1 and verb[-2] in errors[0], done.stderr
    assert not (tmp_path / "out").exists()


def test_a_full_disk_while_a_fine_tuning_saves_is_one_line(tmp_path, wordpiece_tokenizer, monkeypatch):
    from bertforge.tasks.classification import Columns
    from bertforge.tasks.finetune import finetune

    from conftest import quick_finetuning

    model = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    train = tmp_path / "train.tsv"
    train.write_text("text\tlabel\n" + "".join(f"the cat sat {i}\t{i % 2}\n" for i in range(64)), encoding="utf-8")
    attempts = []

    def disk_full(*args, **kwargs):
        attempts.append(1)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("bertforge.tasks.finetune.save_fit_state", disk_full)
    with pytest.raises(UserError, match="could not write a checkpoint .*No space left on device.*intact"):
        finetune(model, "classification", train, None, tmp_path / "ft", quick_finetuning(epochs=2),
                 Columns("text", "label"), progress=False)  # fmt: skip
    assert attempts == [1]  # not again on the way out


# A command run with every temporary file or directory refused as on a read-only file system (EROFS): where each
# of its outputs is first written.
READ_ONLY_RUN = """
import errno, sys, tempfile
from bertforge.cli import main

def read_only(*args, dir=None, **kwargs):
    raise OSError(errno.EROFS, "Read-only file system", str(dir))

tempfile.mkdtemp = tempfile.mkstemp = read_only
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize(
    "verb",
    [
        ["prepare", "TRAIN", "--tokenizer", "TOKENIZER", "--out", "OUT"],
        ["tokenizer", "train", "TRAIN", "--out", "OUT", "--vocab-size", "200"],
        ["tokenizer", "extend", "MODEL", "TRAIN", "--add", "5", "--out", "OUT"],
        ["embed", "MODEL", "--input", "TRAIN", "--out", "OUT/vectors.npy"],
        ["pretrain", "--data", "DATA", "--out", "OUT", *TINY, "--max-steps", "2"],
        [
            "finetune",
            "MODEL",
            "--task",
            "classification",
            "--train",
            "LABELLED",
            "--out",
            "OUT",
            "--epochs",
            "1",
            "--text-column",
            "text",
            "--label-column",
            "label",
        ],
    ],
    ids=lambda verb: " ".join(verb[:2]),
)
def test_a_read_only_output_is_one_line_and_exit_2(workdir, tmp_path, wordpiece_tokenizer, verb):
    """An --out on a file system mounted read-only (or not the user's to write): one line naming it, exit 2."""
    model = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    labelled = tmp_path / "train.tsv"
    labelled.write_text("text\tlabel\n" + "".join(f"the cat sat {i}\t{i % 2}\n" for i in range(16)), encoding="utf-8")
    names = {"MODEL": model, "TRAIN": workdir / "corpus.txt", "TOKENIZER": workdir / "tok", "DATA": workdir / "data"}
    names["LABELLED"] = labelled
    argv = [str(names.get(a, a)).replace("OUT", str(tmp_path / "out")) for a in verb]
    done = subprocess.run([sys.executable, "-c", READ_ONLY_RUN, *argv], capture_output=True, text=True, timeout=120)
    one_line_error(done, "Read-only file system")
    assert not [p for p in tmp_path.joinpath("out").rglob("*") if p.is_file()]
