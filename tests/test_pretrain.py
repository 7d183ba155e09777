"""The main job end to end: pretrain, resume exactly, save atomically, stop cleanly, answer questions."""

from __future__ import annotations

import itertools
import json
import math
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from bertforge.engine.checkpoint import checkpoint_dirs
from bertforge.engine.optim import lr_factor, warmup_fraction
from bertforge.engine.runtime import Distributed
from bertforge.errors import UserError
from bertforge.progress import TrainingProgress
from bertforge.training.config import RECIPES, TrainConfig, recipe_configs
from bertforge.training.loader import BatchPlan
from bertforge.training.trainer import Trainer

from conftest import (
    TINY_MODEL,
    TINY_RUN,
    assert_fill_mask_is_the_pipeline,
    assert_same_steps,
    bertforge,
    bertforge_ok,
    needs,
    one_line_error,
    prepared_data,
    tiny_model_config,
    train_metrics,
    whole_and_resumed,
    write_corpus,
)

TINY = [*TINY_MODEL, *TINY_RUN, "--batch-size", "8", "--eval-batches", "2"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return prepared_data(tmp_path_factory.mktemp("pretrain"), seed=5)


@pytest.fixture(scope="module")
def e2e_run(workdir) -> Path:
    """One tiny 30-step run from the command line, which several tests read."""
    run = workdir / "e2e"
    bertforge_ok(
        "pretrain",
        "--data",
        workdir / "data",
        "--out",
        run,
        *TINY,
        "--max-steps",
        "30",
        "--log-every",
        "5",
        "--eval-every",
        "15",
        "--save-every",
        "15",
        "--keep-last",
        "1",
    )
    return run


def front_matter(card: str) -> dict:
    """A model card's YAML front matter, which bertforge writes a key per line with JSON values."""
    assert card.startswith("---\n")
    block = card.split("---\n")[1]
    return {key: json.loads(value) for key, value in (line.split(": ", 1) for line in block.splitlines())}


def test_every_model_directory_of_a_run_has_a_model_card_with_what_the_run_did(workdir, e2e_run):
    """The final model's card names the recipe, the corpus, the steps and the held-out scores of its last step;
    a checkpoint's card is its own step's."""
    state = json.loads((checkpoint_dirs(e2e_run)[-1] / "trainer_state.json").read_text())["state"]
    final_eval = train_metrics(e2e_run, "valid")[-1]
    card = (e2e_run / "model" / "README.md").read_text()
    assert front_matter(card) == {
        "library_name": "transformers",
        "pipeline_tag": "fill-mask",
        "tags": ["bertforge", "bert", "recipe-bert"],
    }
    assert "- recipe: `bert`; objective: mlm + nsp" in card
    assert str(workdir / "corpus.txt") in card
    meta = json.loads((workdir / "data" / "meta.json").read_text())
    assert f"{meta['splits']['train']['tokens']:,} training tokens" in card
    assert f"- {state['step']:,} steps, {state['tokens_seen']:,} tokens" in card
    assert f"masked-LM accuracy {final_eval['mlm_acc']:.3f}, loss {final_eval['mlm_loss']:.3f}" in card
    assert "AutoModelForMaskedLM.from_pretrained" in card and "trust_remote_code" not in card
    for checkpoint in checkpoint_dirs(e2e_run):
        step = int(checkpoint.name.split("_")[1])
        assert f"- {step:,} steps" in (checkpoint / "README.md").read_text()


def test_tiny_run_end_to_end(workdir, e2e_run):
    run = e2e_run
    train = train_metrics(run)
    assert [r["step"] for r in train] == [5, 10, 15, 20, 25, 30]
    for key in (
        "tokens",
        "loss",
        "mlm_loss",
        "nsp_loss",
        "mlm_acc",
        "nsp_acc",
        "lr",
        "grad_norm",
        "tokens_per_s",
        "mfu",
    ):
        assert all(key in r for r in train), key
    assert train[-1]["loss"] < train[0]["loss"]
    assert [r["step"] for r in train_metrics(run, "valid")] == [15, 30]
    assert [p.name for p in checkpoint_dirs(run)] == ["step_000030"]  # keep-last 1
    for name in (
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "vocab.txt",
        "tokenizer_config.json",
        "special_tokens_map.json",
    ):
        assert (run / "model" / name).is_file(), name
    assert (run / "plots" / "training_curves.png").stat().st_size > 10_000

    evaluation = json.loads(bertforge_ok("evaluate", run, "--data", workdir / "data", "--json").stdout)
    assert 0 <= evaluation["mlm_acc"] <= 1 and evaluation["perplexity"] > 1 and "nsp_acc" in evaluation
    assert evaluation["perplexity"] == pytest.approx(math.exp(evaluation["mlm_loss"]), rel=1e-9)
    # On its own data a run's model is evaluated as the run evaluated itself: its last held-out line's figures.
    last = train_metrics(run, "valid")[-1]
    for key in ("mlm_loss", "mlm_acc", "nsp_loss", "nsp_acc", "masked_tokens"):
        assert evaluation[key] == pytest.approx(last[key], rel=1e-6), key
    acc, n = evaluation["mlm_acc"], evaluation["masked_tokens"]  # the spread a binomial draw of n masks implies
    assert evaluation["mlm_acc_stderr"] == pytest.approx(math.sqrt(acc * (1 - acc) / n), rel=1e-9)
    said = bertforge_ok("evaluate", run, "--data", workdir / "data")
    assert f"± {evaluation['mlm_acc_stderr']:.4f}" in said.stdout
    assert (f"only {n:,} masked tokens were scored" in said.stderr) == (n < 2000)
    raw = json.loads(bertforge_ok("evaluate", run, "--data", workdir / "corpus.txt", "--json").stdout)
    assert raw["masked_tokens"] > 0
    # The same text, raw or prepared, gives the same figures.
    bertforge_ok("prepare", workdir / "corpus.txt", "--tokenizer", workdir / "tok", "--out", workdir / "whole",
                 "--valid-fraction", "0")  # fmt: skip
    prepared = json.loads(bertforge_ok("evaluate", run, "--data", workdir / "whole", "--json").stdout)
    assert prepared == raw
    filled = json.loads(bertforge_ok("fill-mask", run, "the cat sat on the [MASK].", "--json").stdout)
    assert len(filled["masks"][0]["predictions"]) == 5
    # a checkpoint is a complete model directory too: an intermediate step can be queried and fine-tuned
    step = checkpoint_dirs(run)[-1]
    from_checkpoint = json.loads(bertforge_ok("fill-mask", step, "the cat sat on the [MASK].", "--json").stdout)
    assert from_checkpoint == filled  # step 30 is the final model
    nsp = json.loads(bertforge_ok("nsp", run, "the cat sat on the mat.", "the dog found the money.", "--json").stdout)
    assert 0.0 <= nsp["is_next_prob"] <= 1.0 and nsp["label"] in ("IsNext", "NotNext")


def test_resume_continues_exactly(workdir):
    """2N steps in one go == N steps, then a resumed run for the other N (dropout on, so RNG state matters;
    a batch ramp that is still growing at the resume point, so the batches must follow the step)."""
    full = workdir / "full"
    resumed = whole_and_resumed(workdir / "data", full, *TINY, "--batch-ramp-steps", "16", "--batch-size-start", "4")
    keys = ("loss", "mlm_loss", "nsp_loss", "mlm_acc", "nsp_acc", "lr", "grad_norm", "tokens")
    assert_same_steps(full, resumed, list(range(2, 25, 2)), keys)
    a = train_metrics(full)
    assert a[0]["tokens"] < a[-1]["tokens"] - a[-2]["tokens"]  # 4 + 4 instances in two steps, then 8 + 8


def test_activation_checkpointing_trains_step_for_step_as_without_it(workdir):
    """Recomputing the layers in the backward pass (dropout on: the masks must be drawn again the same) changes
    the memory a step keeps, and nothing a run logs."""
    runs = {}
    for name, flags in (("kept", ()), ("recomputed", ("--activation-checkpointing",))):
        runs[name] = workdir / f"activations_{name}"
        bertforge_ok(
            "pretrain", "--data", workdir / "data", "--out", runs[name], *TINY, *flags,
            "--max-steps", "8", "--log-every", "2", "--eval-every", "0", "--save-every", "0",
        )  # fmt: skip
    keys = ("loss", "mlm_loss", "nsp_loss", "mlm_acc", "nsp_acc", "grad_norm")
    assert_same_steps(runs["kept"], runs["recomputed"], [2, 4, 6, 8], keys)
    assert json.loads((runs["recomputed"] / "config.json").read_text())["train"]["activation_checkpointing"]


def test_interrupted_save_leaves_the_previous_checkpoint_loadable(workdir, monkeypatch):
    run = workdir / "atomic"
    model_config = tiny_model_config(workdir / "data")
    cfg = TrainConfig(
        seq_len=64, batch_size=8, max_steps=2, precision="fp32", num_workers=0, eval_every=0, save_every=0
    )
    trainer = Trainer(workdir / "data", run, model_config, cfg, progress=False)
    trainer.train()
    assert [p.name for p in checkpoint_dirs(run)] == ["step_000002"]

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    trainer.state.step = 3
    monkeypatch.setattr("bertforge.training.rundir.torch.save", disk_full)
    with pytest.raises(UserError, match="No space left"):
        trainer.save()
    monkeypatch.undo()
    assert [p.name for p in checkpoint_dirs(run)] == ["step_000002"]
    assert not [p for p in (run / "checkpoints").iterdir() if p.name.startswith(".")]  # no torn leftovers
    fresh = Trainer(workdir / "data", run, model_config, cfg, resume=True, progress=False)
    assert fresh.state.step == 2
    torch.testing.assert_close(
        fresh.model.state_dict()["nsp_head.weight"], trainer.model.state_dict()["nsp_head.weight"]
    )


def run_until_signal(workdir, run, number: int, after_steps: int, resume: bool = False) -> str:
    """A pretrain that would run for ever, stopped by signal `number` once it has logged `after_steps` more steps;
    its stderr."""
    before = len(train_metrics(run)) if resume else 0
    command = [sys.executable, "-m", "bertforge", "pretrain", "--data", str(workdir / "data"), "--out", str(run),
               *TINY, "--max-steps", "100000", "--log-every", "1", "--eval-every", "0", "--save-every", "0",
               *(["--resume"] if resume else [])]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and process.poll() is None:
        if (run / "metrics.jsonl").is_file() and len(train_metrics(run)) >= before + after_steps:
            break
        time.sleep(0.05)
    process.send_signal(number)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 128 + number, stderr
    return stderr


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_saves_the_last_logged_step_and_the_resumed_run_is_the_uninterrupted_one(workdir, tmp_path, number):
    """Ctrl-C or SIGTERM mid-run: a checkpoint of exactly the last step logged, and a message saying how to resume.
    Resumed, and stopped again, the run's every logged loss equals an uninterrupted run's at the same step."""
    run = tmp_path / "stopped"
    stderr = run_until_signal(workdir, run, number, after_steps=3)
    assert "--resume" in stderr
    saved = checkpoint_dirs(run)
    assert len(saved) == 1 and int(saved[0].name.split("_")[1]) == train_metrics(run)[-1]["step"] >= 3
    run_until_signal(workdir, run, number, after_steps=4, resume=True)
    resumed = {r["step"]: r["loss"] for r in train_metrics(run)}
    assert list(resumed) == list(range(1, len(resumed) + 1))  # each step logged once: none lost, none twice
    run_until_signal(workdir, tmp_path / "whole", number, after_steps=len(resumed))
    whole = {r["step"]: r["loss"] for r in train_metrics(tmp_path / "whole")}
    assert [whole[step] for step in resumed] == pytest.approx(list(resumed.values()), rel=1e-6)


def test_transformers_pipeline_gives_the_same_fill_mask_answers(e2e_run):
    assert_fill_mask_is_the_pipeline(e2e_run / "model", "the dog [MASK] at the window.")
    # --targets: the named words' own probabilities, ranked among themselves, as the pipeline's targets=
    assert_fill_mask_is_the_pipeline(e2e_run / "model", "the [MASK] sat.", targets=["bird", "cat", "teacher"])


def test_cli_error_paths(workdir, e2e_run, tmp_path):
    one_line_error(
        bertforge("prepare", tmp_path / "missing.txt", "--tokenizer", workdir / "tok", "--out", tmp_path / "d"),
        "missing.txt",
        "no such file",
    )
    (tmp_path / "empty.txt").write_text("")
    one_line_error(bertforge("tokenizer", "train", tmp_path / "empty.txt", "--out", tmp_path / "t"), "empty.txt")
    run = e2e_run
    one_line_error(bertforge("fill-mask", run, "no blank here"), "[MASK]")
    # A tokenizer with a bigger vocabulary than the model's embedding table.
    mismatched = tmp_path / "mismatched"
    shutil.copytree(run / "model", mismatched)
    write_corpus(tmp_path / "other.txt", [["completely different words appear here now"] * 3, ["zebra yak quokka"] * 3])
    bertforge_ok(
        "tokenizer",
        "train",
        workdir / "corpus.txt",
        tmp_path / "other.txt",
        "--out",
        tmp_path / "bigtok",
        "--vocab-size",
        "400",
        "--min-frequency",
        "1",
    )
    for name in ("tokenizer.json", "vocab.txt"):
        shutil.copy(tmp_path / "bigtok" / name, mismatched / name)
    one_line_error(bertforge("fill-mask", mismatched, "the [MASK] sat."), "tokenizer", "vocabulary")
    # A run directory is never silently overwritten, and a resumed run keeps its architecture.
    one_line_error(
        bertforge("pretrain", "--data", workdir / "data", "--out", run, *TINY, "--max-steps", "2"), "--overwrite"
    )
    one_line_error(
        bertforge("pretrain", "--data", workdir / "data", "--out", run, "--resume", "--num-layers", "3", "--quiet"),
        "num_layers: 2 -> 3",
    )
    one_line_error(
        bertforge("pretrain", "--data", workdir / "data", "--out", tmp_path / "long", *TINY, "--seq-len", "128"),
        "position table",
    )


def test_learning_rate_schedules():
    linear = (0.1, "linear")
    assert lr_factor(0.05, *linear) == pytest.approx(0.5)
    assert lr_factor(0.1, *linear) == pytest.approx(1.0)
    assert lr_factor(0.55, *linear) == pytest.approx(0.5)
    assert lr_factor(1.0, *linear) == pytest.approx(0.0)
    cosine = (0.0, "cosine")
    assert lr_factor(0.5, *cosine) == pytest.approx(0.5)
    assert lr_factor(0.5, 0.0, "constant") == 1.0
    steps = (warmup_fraction(10, 100), "linear")  # a warm-up of 10 steps in a run of 100
    assert lr_factor(0.05, *steps) == pytest.approx(0.5)


def test_time_budget_stops_the_run(workdir):
    run = workdir / "budget"
    started = time.perf_counter()
    bertforge_ok(
        "pretrain",
        "--data",
        workdir / "data",
        "--out",
        run,
        *TINY,
        "--time-budget",
        "3s",
        "--log-every",
        "1",
        "--eval-every",
        "0",
    )
    train = train_metrics(run)
    assert train and train[-1]["elapsed"] >= 3.0 - 0.5
    assert train[0]["lr"] > train[-1]["lr"] * 1.5 or train[-1]["lr"] < 1e-4  # decays with elapsed time
    assert time.perf_counter() - started < 40


def test_a_time_limit_ends_a_run_of_steps_on_a_slow_machine_with_its_schedule_run_out(workdir, monkeypatch):
    """--time-limit caps --max-steps: steps slowed to 0.25 s end the 1,000-step run at its 2 s ceiling, its
    learning rate decayed to the schedule's end by the clock (not a tenth of the way by its steps), the notice
    said and the model written; the demo's books stage runs on it."""
    run = workdir / "ceiling"
    model_config = tiny_model_config(workdir / "data")
    cfg = TrainConfig(seq_len=64, batch_size=8, max_steps=1000, time_limit=2.0, warmup=0.0, precision="fp32",
                      num_workers=0, eval_every=0, save_every=0, log_every=1)  # fmt: skip
    said = []
    trainer = Trainer(workdir / "data", run, model_config, cfg, progress=False)
    step, trainer._say = trainer._step, said.append

    def slow_step(micro_batches):
        time.sleep(0.25)
        return step(micro_batches)

    monkeypatch.setattr(trainer, "_step", slow_step)
    result = trainer.train()
    assert 2 <= result.state.step < 20 and (run / "model" / "model.safetensors").is_file()
    lrs = [row["lr"] for row in train_metrics(run)]
    assert lrs[-1] < 0.5 * cfg.lr  # by its steps alone it would still be above 0.98 of the peak
    assert any("--time-limit 2s reached at step" in line for line in said), said
    with pytest.raises(UserError, match="time_limit caps a run of --max-steps"):
        TrainConfig(time_budget=60.0, time_limit=30.0)


def test_a_time_budget_run_whose_last_step_overshoots_ends_with_its_model(workdir, monkeypatch):
    """Steps longer than half a second overshoot the budget at the end: the bar must not crash, the model is written."""
    run = workdir / "overshoot"
    model_config = tiny_model_config(workdir / "data")
    cfg = TrainConfig(
        seq_len=64,
        batch_size=8,
        time_budget=1.0,
        precision="fp32",
        num_workers=0,
        eval_every=0,
        save_every=0,
        log_every=1,
    )
    trainer = Trainer(workdir / "data", run, model_config, cfg, progress=True)
    step = trainer._step

    def slow_step(micro_batches):
        time.sleep(0.7)
        return step(micro_batches)

    monkeypatch.setattr(trainer, "_step", slow_step)
    result = trainer.train()
    assert result.state.elapsed > cfg.time_budget  # the last step did overshoot
    assert (run / "model" / "model.safetensors").is_file()
    assert [p.name for p in checkpoint_dirs(run)] == [f"step_{result.state.step:06d}"]


@pytest.mark.parametrize("failing", ["metrics log", "evaluation", "progress display"])
def test_an_error_inside_the_loop_keeps_the_work_done(workdir, monkeypatch, failing):
    """Whatever fails inside the loop at step 3 (the metrics log, a held-out evaluation, the progress display), a
    checkpoint of that step survives and the run resumes from it to the end."""
    run = workdir / f"crash_{failing.replace(' ', '_')}"
    model_config = tiny_model_config(workdir / "data")
    cfg = TrainConfig(
        seq_len=64, batch_size=8, max_steps=10, precision="fp32", num_workers=0, eval_every=1, eval_batches=1,
        save_every=0, log_every=1,
    )  # fmt: skip
    trainer = Trainer(workdir / "data", run, model_config, cfg, progress=False)

    def failing_at_step_3(call):
        def call_or_fail(*args, **kwargs):
            if trainer.state.step == 3:
                raise RuntimeError(f"the {failing} failed")
            return call(*args, **kwargs)

        return call_or_fail

    if failing == "metrics log":
        monkeypatch.setattr(trainer.log, "write", failing_at_step_3(trainer.log.write))
    elif failing == "evaluation":
        monkeypatch.setattr(trainer, "evaluate", failing_at_step_3(trainer.evaluate))
    else:
        monkeypatch.setattr(TrainingProgress, "show", failing_at_step_3(TrainingProgress.show))
    with pytest.raises(RuntimeError, match=f"the {failing} failed"):
        trainer.train()
    assert [p.name for p in checkpoint_dirs(run)] == ["step_000003"]
    monkeypatch.undo()
    resumed = Trainer(workdir / "data", run, model_config, cfg, resume=True, progress=False)
    assert resumed.state.step == 3 and resumed.train().state.step == 10


def test_resume_keeps_the_saved_configs_and_allows_new_dropout(workdir):
    run = workdir / "keep"
    bertforge_ok(
        "pretrain",
        "--data",
        workdir / "data",
        "--out",
        run,
        "--recipe",
        "budget",
        *TINY,
        "--max-steps",
        "4",
        "--lr",
        "1e-3",
        "--save-every",
        "2",
        "--log-every",
        "2",
        "--eval-every",
        "0",
    )
    shutil.rmtree(run / "model")
    shutil.rmtree(run / "checkpoints" / "step_000004")
    # The original command line again (its --preset included), with more steps and dropout switched on.
    bertforge_ok(
        "pretrain",
        "--data",
        workdir / "data",
        "--out",
        run,
        "--resume",
        *TINY,
        "--max-steps",
        "6",
        "--hidden-dropout",
        "0.2",
    )
    saved = json.loads((run / "config.json").read_text())
    assert (
        saved["train"]["lr"] == 1e-3 and saved["train"]["max_steps"] == 6
    )  # the preset did not reset the training config
    assert saved["model"]["hidden_dropout"] == 0.2 and saved["model"]["hidden_size"] == 32
    # --preset gives the size only: the recipe's other model settings stay as they were saved
    assert (saved["model"]["norm_style"], saved["model"]["position_embedding"]) == ("pre", "rotary")
    assert saved["model"]["attention_dropout"] == 0.0
    assert [r["step"] for r in train_metrics(run)][-1] == 6


def test_pretraining_without_a_pair_objective_reports_none(workdir):
    run = workdir / "mlm_only"
    bertforge_ok(
        "pretrain", "--data", workdir / "data", "--out", run, *TINY, "--max-steps", "4", "--pair-objective", "none",
        "--eval-every", "2",
    )  # fmt: skip
    assert json.loads((run / "config.json").read_text())["train"]["pair_objective"] == "none"
    assert not any("nsp_acc" in r for r in train_metrics(run) + train_metrics(run, "valid"))
    evaluation = json.loads(bertforge_ok("evaluate", run, "--data", workdir / "data", "--json").stdout)
    assert evaluation["pair_objective"] == "none" and "nsp_acc" not in evaluation
    one_line_error(bertforge("nsp", run, "the cat sat.", "--pair", "the dog ran."), "without a pair objective")


def test_a_sentence_order_model_answers_nsp_as_the_probability_of_the_written_order(workdir):
    """SOP's class 0 is "A then B as written"; `nsp` names it so, and it is transformers' class 0 too."""
    transformers = needs("transformers")
    run = workdir / "sop"
    bertforge_ok("pretrain", "--data", workdir / "data", "--out", run, *TINY, "--max-steps", "4",
                 "--pair-objective", "sop", "--eval-every", "2")  # fmt: skip
    assert "sop_acc" in train_metrics(run, "valid")[-1]
    a, b = "the cat sat on the mat.", "the dog found the money."
    answers = [json.loads(bertforge_ok("nsp", run, *pair, "--json").stdout) for pair in ((a, b), (b, a))]
    reference = transformers.BertForPreTraining.from_pretrained(run / "model").eval()
    their_tokenizer = transformers.AutoTokenizer.from_pretrained(run / "model")
    for answer, pair in zip(answers, ((a, b), (b, a))):
        with torch.no_grad():
            logits = reference(**their_tokenizer(*pair, return_tensors="pt")).seq_relationship_logits[0]
        in_order = logits.softmax(-1)[0].item()
        assert set(answer) == {"a", "b", "in_order_prob", "label"}
        assert answer["in_order_prob"] == pytest.approx(in_order, abs=1e-5)
        assert answer["label"] == ("InOrder" if in_order >= 0.5 else "Swapped")
        assert abs(in_order - 0.5) > 2e-5  # the classes swapped would differ by more than the tolerance


def test_a_mask_rate_schedule_lowers_the_masked_fraction_as_the_run_goes(workdir):
    run = workdir / "mask_schedule"
    bertforge_ok(
        "pretrain", "--data", workdir / "data", "--out", run, *TINY, "--pair-objective", "none", "--max-steps", "30",
        "--log-every", "10", "--eval-every", "0", "--save-every", "0", "--mask-prob", "0.4", "--mask-prob-final", "0.1",
    )  # fmt: skip
    fractions = [r["masked_fraction"] for r in train_metrics(run)]
    # Windows centred near 1/6, 1/2 and 5/6 of the run: rates 0.35, 0.25, 0.15 of the real tokens.
    assert len(fractions) == 3 and fractions[0] > 0.3 and 0.2 < fractions[1] < 0.3 and fractions[2] < 0.2
    one_line_error(
        bertforge("pretrain", "--data", workdir / "data", "--out", run, "--mask-prob-final", "1.5", "--overwrite"),
        "mask_prob_final must be in (0, 1)",
    )


class _Instances:
    """A stand-in dataset: BatchPlan reads only the number of instances per epoch."""

    def num_instances(self, epoch: int) -> int:
        return 100


def test_a_batch_ramp_grows_by_optimizer_step_and_resumes_on_the_same_batches():
    cfg = TrainConfig(batch_size=8, batch_size_start=2, batch_ramp_steps=4, grad_accum=2)
    assert [cfg.batch_size_at(s) for s in range(6)] == [2, 4, 5, 6, 8, 8]
    plan = BatchPlan(_Instances(), 8, Distributed(), 0, cfg.batch_size_at, cfg.grad_accum)
    batches = list(itertools.islice(plan.batches(0, 0), 30))
    assert [len(b) for b in batches[:12]] == [2, 2, 4, 4, 5, 5, 6, 6, 8, 8, 8, 8]  # two micro-batches per step
    positions = list(plan.positions)
    # Epoch 0: 34 instances in the ramp, then 8 batches of 8 = 98 different ones; 2 left over, then epoch 1.
    assert len({i for b in batches[:16] for _, i in b}) == 98 and {e for b in batches[:16] for e, _ in b} == {0}
    assert batches[16][0][0] == 1
    # Resume after step 3 (6 micro-batches): the same batches follow.
    again = BatchPlan(_Instances(), 8, Distributed(), 0, cfg.batch_size_at, cfg.grad_accum)
    assert list(itertools.islice(again.batches(*positions[5], step=3), 24)) == batches[6:]
    # Two processes read the two halves of the same global batch, half the size each.
    halves = [
        list(itertools.islice(BatchPlan(_Instances(), 4, Distributed(r, 2), 0, lambda s: 4).batches(0, 0), 3))
        for r in (0, 1)
    ]
    whole = list(itertools.islice(BatchPlan(_Instances(), 8, Distributed(), 0).batches(0, 0), 3))
    assert [a + b for a, b in zip(*halves)] == whole


def test_a_recipe_sets_the_defaults_and_explicit_flags_override_it(workdir):
    run = workdir / "recipe"
    done = bertforge_ok(
        "pretrain", "--data", workdir / "data", "--out", run, "--recipe", "budget", *TINY,
        "--max-steps", "4", "--lr", "5e-4", "--eval-every", "0", "--save-every", "0",
    )  # fmt: skip
    assert "trust_remote_code" not in done.stderr  # ModernBERT's shape: transformers' own class
    assert json.loads((run / "model" / "config.json").read_text())["model_type"] == "modernbert"
    config = json.loads((run / "config.json").read_text())
    budget = RECIPES["budget"]
    assert config["model"]["norm_style"] == budget.model["norm_style"] == "pre"
    assert (config["model"]["position_embedding"], config["model"]["attention_bias"]) == ("rotary", "none")
    assert (config["model"]["feed_forward"], config["model"]["type_vocab_size"]) == ("glu", 0)
    assert config["model"]["hidden_size"] == 32  # --preset tiny and --hidden-size, over the recipe's mini
    for key, value in budget.train.items():
        assert config["train"][key] == (5e-4 if key == "lr" else value), key
    assert config["train"]["optimizer"] == "adamw"  # Muon's models fine-tuned worse (experiments/budget.md)
    assert all("nsp_loss" not in r for r in train_metrics(run))  # MLM only
    alibi = ("--attention-bias", "alibi", "--position-embedding", "learned", "--pair-objective", "nsp")
    near = bertforge_ok(*done.args[3:], "--overwrite", *alibi)  # the same run with ALiBi and NSP
    assert "[CLS] may not read the second text" in near.stderr and "[CLS]" not in done.stderr
    paired = json.loads((run / "config.json").read_text())  # NSP's pairs need segments and may cross documents
    assert (paired["model"]["type_vocab_size"], paired["train"]["document_mask"]) == (2, False)
    bert_model, bert_train = recipe_configs("bert", None, {}, {"mask_prob": 0.2})
    assert (bert_model.norm_style, bert_train.pair_objective, bert_train.mask_prob) == ("post", "nsp", 0.2)
    unknown = bertforge("pretrain", "--data", workdir / "data", "--out", run, "--recipe", "fast")
    assert unknown.returncode == 2 and "invalid choice: 'fast'" in unknown.stderr


def test_the_position_table_is_as_long_as_the_training_sequences_unless_given():
    """Rows past the training length would keep their random start for inference to reach; a longer table is
    asked for (BERT's second phase at 512 tokens)."""
    for recipe in RECIPES:
        model, train = recipe_configs(recipe, "tiny", {}, {"seq_len": 96})
        assert model.max_position_embeddings == train.seq_len == 96
    model, train = recipe_configs("bert", None, {"max_position_embeddings": 512}, {"seq_len": 128})
    assert (model.max_position_embeddings, train.seq_len) == (512, 128)


def test_a_gated_feed_forward_with_rotary_positions_trains_and_says_how_transformers_loads_it(workdir):
    run = workdir / "glu"
    done = bertforge_ok(
        "pretrain", "--data", workdir / "data", "--out", run, *TINY, "--feed-forward", "glu",
        "--position-embedding", "rotary", "--max-steps", "3", "--eval-every", "0", "--save-every", "0",
    )  # fmt: skip
    assert "note: the glu feed-forward and the rotary position encoding have no transformers class" in done.stderr
    assert "train with --feed-forward mlp --position-embedding learned for a model plain transformers loads" in (
        done.stderr
    )
    with safe_open(run / "model" / "model.safetensors", "pt") as weights:
        assert weights.get_slice("bert.encoder.layer.0.intermediate.dense.weight").get_shape() == [2 * 64, 32]
        assert not weights.get_tensor("bert.embeddings.position_embeddings.weight").any()  # the slot, all zeros
    answer = json.loads(bertforge_ok("fill-mask", run / "model", "the cat [MASK] on the mat.", "--json").stdout)
    assert len(answer["masks"][0]["predictions"]) == 5


def test_a_muon_run_resumes_exactly(workdir):
    """Muon's momentum sits beside AdamW's moments in the checkpoint: a resumed run takes the same steps."""
    full = workdir / "muon_full"
    resumed = whole_and_resumed(workdir / "data", full, *TINY, "--optimizer", "muon", "--lr", "1e-3")
    assert_same_steps(full, resumed, list(range(2, 25, 2)), ("loss", "mlm_loss", "lr", "grad_norm"))
    assert json.loads((full / "config.json").read_text())["train"]["optimizer"] == "muon"


def test_our_muon_steps_as_torchs_and_reads_its_checkpoints():
    """Our Muon only lays the Newton-Schulz input out contiguously (torch's bf16 addmm on a transposed view is 5x
    slower on a Zen 4): three steps on tall, wide and square matrices land where torch.optim.Muon's do, to bf16's
    rounding, and each reads the other's state, so runs saved before it resume."""
    from bertforge.engine.optim import Muon

    torch.manual_seed(0)
    start = [torch.randn(shape) for shape in ((96, 32), (32, 80), (48, 48))]
    ours, theirs = ([torch.nn.Parameter(w.clone()) for w in start] for _ in range(2))
    optimizers = (
        Muon(ours, lr=0.02, weight_decay=0.1),
        torch.optim.Muon(theirs, lr=0.02, weight_decay=0.1, adjust_lr_fn="match_rms_adamw"),
    )

    def step_alike(optimizers, steps: int, least_move: float) -> None:
        """Step each optimizer on the same random gradients; the first's matrices must land within 2% of the
        second's move from `start`, which is at least `least_move`."""
        for _ in range(steps):
            grads = [torch.randn_like(w) for w in start]
            for optimizer in optimizers:
                for p, g in zip(optimizer.param_groups[0]["params"], grads):
                    p.grad = g.clone()
                optimizer.step()
        mine, reference = (optimizer.param_groups[0]["params"] for optimizer in optimizers)
        for a, b, w in zip(mine, reference, start):
            moved = (b - w).norm()
            assert moved > least_move and (a - b).norm() < 0.02 * moved, (a - b).norm() / moved

    step_alike(optimizers, steps=3, least_move=0.1)
    # a fresh optimizer of each kind reads the other's checkpoint: the same hyperparameters and momentum buffers
    for source, fresh in (
        (optimizers[1], Muon([torch.nn.Parameter(w.clone()) for w in start], lr=1.0, weight_decay=0.0)),
        (optimizers[0], torch.optim.Muon([torch.nn.Parameter(w.clone()) for w in start], lr=1.0)),
    ):
        fresh.load_state_dict(source.state_dict())
        assert fresh.param_groups[0]["lr"] == 0.02 and fresh.param_groups[0]["weight_decay"] == 0.1
        assert fresh.param_groups[0]["adjust_lr_fn"] == "match_rms_adamw"
        for p, q in zip(source.param_groups[0]["params"], fresh.param_groups[0]["params"]):
            assert torch.equal(source.state[p]["momentum_buffer"], fresh.state[q]["momentum_buffer"])
    # torch's own rule, read from its state dict, steps ours as it steps torch's
    original = torch.optim.Muon([torch.nn.Parameter(w.clone()) for w in start], lr=0.02, adjust_lr_fn="original")
    ours = Muon([torch.nn.Parameter(w.clone()) for w in start], lr=1.0, weight_decay=0.0)
    ours.load_state_dict(original.state_dict())
    step_alike((ours, original), steps=1, least_move=0.01)


def test_residual_init_scales_or_zeroes_what_each_layer_writes_to_the_residual_stream(workdir, tmp_path):
    """scaled: the output projections' std is 0.02 / sqrt(2 x the stack's layers) (ELECTRA's one-layer generator
    its own), every other matrix keeps 0.02; zero: they start at zero, and two steps later every matrix of every
    layer has moved (the layers grow in from the first gradient) and the loss is finite."""
    from bertforge.model.config import ModelConfig
    from bertforge.training.objectives import pretraining_model

    config = ModelConfig.preset("mini", vocab_size=500)
    electra = TrainConfig(objective="electra", pair_objective="none", generator_layers=1, residual_init="scaled")
    model = pretraining_model(config, electra)
    for stack, layers in ((model.discriminator.bert, 4), (model.generator.bert, 1)):
        for layer in stack.layers:
            for projection in (layer.attention.out, layer.ffn.down):
                assert projection.weight.std().item() == pytest.approx(0.02 / math.sqrt(2 * layers), rel=0.05)
            assert layer.attention.qkv.weight.std().item() == pytest.approx(0.02, rel=0.05)

    cfg = TrainConfig(
        seq_len=64, batch_size=8, max_steps=2, precision="fp32", num_workers=0, eval_every=0, save_every=0,
        residual_init="zero", lr=1e-3, warmup=0.0, schedule="constant",
    )  # fmt: skip
    trainer = Trainer(workdir / "data", tmp_path / "zero", tiny_model_config(workdir / "data"), cfg, progress=False)
    layers = trainer.model.bert.layers
    outputs = [p for layer in layers for p in (layer.attention.out.weight, layer.ffn.down.weight)]
    assert all(torch.all(p == 0) for p in outputs)
    matrices = [p for layer in layers for p in layer.parameters() if p.ndim == 2]
    before = [p.detach().clone() for p in matrices]
    assert sum(bool(torch.any(p != 0)) for p in before) == len(matrices) - len(outputs)
    trainer.train()
    assert all(not torch.equal(old, new.detach()) for old, new in zip(before, matrices))
    assert trainer.state.step == 2 and trainer.state.bad_steps == 0  # no step had a non-finite loss
    with pytest.raises(UserError, match="residual_init zero starts a new model"):
        TrainConfig(init_from="released", residual_init="zero")


def test_muon_orthogonalises_the_encoder_matrices_and_adamw_steps_the_rest(workdir, tmp_path):
    """After one step from rest, each encoder matrix moved by lr x 0.2 sqrt(max side) times a near-orthogonal
    matrix (singular values near 1, in Newton-Schulz's band, where the gradient's spread far wider); the
    embedding table moved as AdamW's first step does (each touched entry by about lr)."""
    from bertforge.model.bert import hidden_matrices

    lr = 1e-3
    cfg = TrainConfig(
        seq_len=64, batch_size=8, max_steps=1, precision="fp32", num_workers=0, eval_every=0, save_every=0,
        optimizer="muon", lr=lr, warmup=0.0, schedule="constant", weight_decay=0.0,
    )  # fmt: skip
    trainer = Trainer(workdir / "data", tmp_path / "muon", tiny_model_config(workdir / "data"), cfg, progress=False)
    matrices = hidden_matrices(trainer.model)
    muon, adamw = trainer.optimizer.optimizers
    assert {id(p) for g in muon.param_groups for p in g["params"]} == {id(p) for p in matrices}
    assert not {id(p) for g in adamw.param_groups for p in g["params"]} & {id(p) for p in matrices}
    embedding = trainer.model.bert.embeddings.token.weight
    before = [p.detach().clone() for p in matrices], embedding.detach().clone()
    trainer.train()
    for old, new in zip(before[0], matrices):
        step = (old - new.detach()) / (lr * 0.2 * math.sqrt(max(old.shape)))
        singular = torch.linalg.svdvals(step.double())
        assert 0.7 < singular.median() < 1.3 and singular.max() < 1.6, singular
    moved = (before[1] - embedding.detach()).abs()
    touched = moved[moved > 0]
    assert touched.numel() > 0 and touched.median() == pytest.approx(lr, rel=0.2)
