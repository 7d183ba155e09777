"""Continued pre-training (`pretrain --init-from`): the run starts from the named model's weights and architecture,
resumes without it, and refuses data, sizes or objectives that do not fit it."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
import torch

from bertforge import BertForPreTraining, load_model
from bertforge.errors import UserError
from bertforge.training.config import TrainConfig
from bertforge.training.continued import continued_configs
from bertforge.training.trainer import Trainer

from conftest import (
    TINY_MODEL,
    TINY_RUN,
    assert_same_steps,
    bertforge,
    bertforge_ok,
    one_line_error,
    prepared_data,
    resumed_twin,
)

RUN = [*TINY_RUN, "--batch-size", "8", "--eval-batches", "2"]  # no size flags: the size is the starting model's


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """Prepared data and `start`, a tiny BERT (BERT's recipe: post-LN, dropout 0.1) trained on it for 10 steps."""
    root = prepared_data(tmp_path_factory.mktemp("continued"), seed=7)
    bertforge_ok("pretrain", "--data", root / "data", "--out", root / "start", *TINY_MODEL, *RUN, "--max-steps", "10")
    return root


def test_a_continued_run_has_the_starting_models_architecture_weights_and_the_recipes_training(workdir, tmp_path):
    start = load_model(BertForPreTraining, workdir / "start" / "model")
    model_config, cfg = continued_configs(
        "budget", str(workdir / "start"), {}, {"seq_len": 64, "precision": "fp32", "num_workers": 0}
    )
    assert model_config.architecture() == start.config.architecture()
    assert model_config.norm_style == "post"  # the starting model's, though the budget recipe trains pre-LN models
    # the starting model's dropout (BERT's 0.1, where budget's is 0), and the recipe's training settings
    assert (model_config.hidden_dropout, cfg.lr, cfg.init_from) == (0.1, 1e-3, str(workdir / "start"))
    given, _ = continued_configs("budget", str(workdir / "start"), {"hidden_dropout": 0.0}, {"seq_len": 64})
    assert given.hidden_dropout == 0.0  # unless a flag asks for another

    trainer = Trainer(workdir / "data", tmp_path / "run", model_config, cfg, progress=False)
    starting = start.state_dict()
    for name, value in trainer.model.state_dict().items():
        assert torch.equal(starting[name], value), name
    # budget trains the masked LM alone: the start's next-sentence head (and pooler) are not carried untrained
    assert trainer.model.nsp_head is None and start.nsp_head is not None


def test_longer_sequences_than_the_starting_table_grow_it_keeping_the_learned_rows(workdir, tmp_path):
    """BERT's second phase: a run on longer sequences than the starting model's 64 positions gets a table of its
    length, the first 64 rows the starting model's and the rest new, and it says so."""
    start = load_model(BertForPreTraining, workdir / "start" / "model")
    run = tmp_path / "longer"
    done = bertforge_ok(
        "pretrain", "--data", workdir / "data", "--out", run, "--init-from", workdir / "start",
        *[flag if flag != "64" else "96" for flag in RUN], "--max-steps", "2", "--eval-every", "0",
        "--save-every", "0", "--lr", "0",
    )  # fmt: skip
    assert "positions 64 to 95 are new to the model: it learns them here, on 96-token sequences" in done.stderr
    grown = load_model(BertForPreTraining, run / "model")
    assert grown.config.max_position_embeddings == 96
    table, started = grown.bert.embeddings.position.weight, start.bert.embeddings.position.weight
    assert table.shape == (96, 32)
    torch.testing.assert_close(table[:64], started)  # lr 0: the learned rows are kept as they were
    assert table[64:].std() > 0.01  # the new rows start random, at the init's scale
    config, _ = continued_configs("bert", str(workdir / "start"), {}, {"seq_len": 32})
    assert config.max_position_embeddings == 64  # shorter sequences keep the table


def test_a_continued_run_resumes_exactly_without_its_starting_model(workdir, tmp_path):
    start = tmp_path / "start"
    shutil.copytree(workdir / "start", start)
    full = tmp_path / "full"
    bertforge_ok(
        "pretrain",
        "--data",
        workdir / "data",
        "--out",
        full,
        "--init-from",
        start,
        *RUN,
        "--max-steps",
        "6",
        "--log-every",
        "1",
        "--save-every",
        "3",
        "--keep-last",
        "5",
        "--eval-every",
        "0",
    )
    pretraining = json.loads((full / "model" / "config.json").read_text())["bertforge_pretrain"]
    assert pretraining["init_from"] == str(start)

    shutil.rmtree(start)  # the step-3 checkpoint holds the weights the resumed run needs
    resumed = resumed_twin(full, workdir / "data")
    assert_same_steps(full, resumed, list(range(1, 7)), ("loss", "mlm_loss", "nsp_loss", "lr", "grad_norm", "tokens"))


def test_a_continued_run_refuses_what_does_not_fit_its_starting_model(workdir, tmp_path):
    start = workdir / "start"
    bertforge_ok("tokenizer", "train", workdir / "corpus.txt", "--out", tmp_path / "tok", "--kind", "word")
    bertforge_ok("prepare", workdir / "corpus.txt", "--tokenizer", tmp_path / "tok", "--out", tmp_path / "data")
    run = tmp_path / "run"

    def pretrain(data, *flags):
        return bertforge("pretrain", "--data", data, "--out", run, *RUN, "--max-steps", "2", *flags)

    one_line_error(
        pretrain(tmp_path / "data", "--init-from", start),
        "--init-from",
        "another tokenizer",
        f"bertforge prepare TEXT --tokenizer {start / 'model'}",
    )
    one_line_error(
        pretrain(workdir / "data", "--init-from", start, "--num-layers", "3"), "--num-layers 3", "(num_layers 2)"
    )
    one_line_error(pretrain(workdir / "data", "--init-from", start, "--preset", "mini"), "--preset mini")
    one_line_error(pretrain(workdir / "data", "--init-from", tmp_path / "nowhere"), "--init-from", "no such file")
    one_line_error(
        pretrain(workdir / "data", "--init-from", start, "--objective", "electra", "--pair-objective", "none"),
        "electra",
    )
    assert not run.exists()  # nothing written for a run that could not start

    # The Python API checks too: a model config that is not the starting model's architecture.
    model_config, cfg = continued_configs("bert", str(start), {}, {"seq_len": 64, "num_workers": 0})
    with pytest.raises(UserError, match="keeps the starting model's architecture, this one changes num_layers"):
        Trainer(workdir / "data", run, dataclasses.replace(model_config, num_layers=3), cfg, progress=False)
    assert not run.exists()
    assert TrainConfig().init_from == ""  # a new model unless asked
