"""Figures and sweeps: valid images of the expected size, that change with their input, backed by checked data."""

from __future__ import annotations

import csv
import json
import shutil

import numpy as np
import pytest
import torch
from matplotlib.colors import to_hex
from matplotlib.image import imread

from bertforge import load
from bertforge.cli import main
from bertforge.plots import embedding_parts, subplots, word_map_points
from bertforge.studies.sweep import draw_band

from conftest import bertforge, bertforge_ok, make_documents, one_line_error, save_random_model, write_corpus


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, wordpiece_tokenizer):
    directory = tmp_path_factory.mktemp("plots") / "model"
    save_random_model(directory, wordpiece_tokenizer, num_layers=2, num_heads=4, max_position_embeddings=64)
    return directory


def png(path):
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return imread(path)


def test_embedding_parts_sum_to_the_input_representation(model_dir):
    bert = load(model_dir)
    parts = embedding_parts(bert, "the cat sat on the mat.", "the dog found the money.")
    T = len(parts["tokens"])
    for key in ("token", "segment", "position", "sum"):
        assert parts[key].shape == (T, 32)
    np.testing.assert_allclose(parts["sum"], parts["token"] + parts["segment"] + parts["position"], rtol=1e-6)
    # ... and the sum is what the model normalises: LayerNorm(sum) == the embedding layer's output.
    _, ids, types = bert.encode("the cat sat on the mat.", "the dog found the money.")
    with torch.no_grad():
        expected = bert.model.bert.embeddings.norm(torch.from_numpy(parts["sum"]))
        actual = bert.model.bert.embeddings(ids, types)[0]
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)
    segments = np.unique(parts["segment"], axis=0)
    assert len(segments) == 2  # segment A and segment B rows differ


def cli_ok(*args) -> None:
    assert main([str(a) for a in args]) == 0


def test_figure_commands_write_images_that_depend_on_their_input(model_dir, tmp_path, capsys):
    """The figure verbs, run in-process through the CLI's own entry point (subprocesses would only add imports)."""
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    cli_ok("plot-embeddings", model_dir, "the cat sat on the mat.", "the dog ran.", "--out", a)
    cli_ok("plot-embeddings", model_dir, "a bird looked at the red house by the river bank.", "--out", b)
    image_a, image_b = png(a), png(b)
    assert image_a.shape[0] > 300 and image_a.shape[1] > 1000
    assert image_a.shape != image_b.shape or not np.array_equal(image_a, image_b)

    cli_ok(
        "attention", model_dir, "the cat sat on the mat.", "--layer", "0", "--head", "1", "--out", tmp_path / "one.png"
    )
    cli_ok("attention", model_dir, "the cat sat on the mat.", "--layer", "1", "--out", tmp_path / "grid.png")
    cli_ok(
        "attention",
        model_dir,
        "a much longer sentence about the teacher and the window and the garden.",
        "--layer",
        "1",
        "--out",
        tmp_path / "grid2.png",
    )
    one, grid, grid2 = png(tmp_path / "one.png"), png(tmp_path / "grid.png"), png(tmp_path / "grid2.png")
    assert grid.shape[1] > 2.5 * one.shape[1]  # four heads side by side
    assert grid.shape != grid2.shape or not np.array_equal(grid, grid2)

    cli_ok("fill-mask", model_dir, "the cat sat on the [MASK].", "--plot", tmp_path / "fill.png", "--answer", "mat")
    cli_ok("nsp", model_dir, "the cat sat.", "the dog ran.", "--plot", tmp_path / "nsp.png")
    assert png(tmp_path / "fill.png").shape[1] > 400 and png(tmp_path / "nsp.png").shape[1] > 400
    cli_ok("attention", model_dir, "the cat sat.", "--out", tmp_path / "vector.png", "--format", "svg")
    assert (tmp_path / "vector.svg").read_text().lstrip().startswith("<?xml")
    assert main(["attention", str(model_dir), "the cat sat.", "--layer", "7", "--out", str(tmp_path / "x.png")]) == 2
    assert "out of range" in capsys.readouterr().err


def planted(model_dir, rows: dict[str, torch.Tensor]):
    """The model loaded, with these words' rows of its token embedding table set."""
    bert = load(model_dir)
    with torch.no_grad():
        for word, row in rows.items():
            bert.model.bert.embeddings.token.weight[bert.tokenizer.token_to_id(word)] = row
    return bert


def test_neighbours_are_the_nearest_whole_words_by_cosine_and_a_split_word_is_its_pieces_mean(model_dir, tmp_path):
    cat = torch.randn(32, generator=torch.Generator().manual_seed(1))
    bert = planted(model_dir, {"cat": cat, "dog": 3 * cat + 0.01, "mat": -cat})
    [result] = bert.neighbours(["cat"], top_k=1000)
    found = [n["token"] for n in result["neighbours"]]
    assert found[0] == "dog" and result["neighbours"][0]["score"] == pytest.approx(1.0, abs=1e-3)
    assert found[-1] == "mat" and result["neighbours"][-1]["score"] == pytest.approx(-1.0, abs=1e-6)
    scores = [n["score"] for n in result["neighbours"]]
    assert scores == sorted(scores, reverse=True)
    excluded = {"cat", "[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]"}
    assert not excluded & set(found) and not any(t.startswith("##") for t in found)
    assert len(found) == sum(1 for t in bert.tokenizer.get_vocab() if not t.startswith("##")) - len(excluded)
    table = bert.model.bert.embeddings.token.weight.detach().numpy()
    pieces = bert.tokenizer.encode("cats", add_special_tokens=False).ids
    assert len(pieces) == 2  # cat + ##s
    np.testing.assert_allclose(bert.word_vectors(["cats"])[0], table[pieces].mean(0), rtol=1e-6)
    assert [n["token"] for n in bert.neighbours(["cats"], top_k=3)[0]["neighbours"]][0] != "cat"  # its own piece

    done = bertforge_ok("neighbours", model_dir, "cat", "money", "--top-k", "3", "--json")
    answers = json.loads(done.stdout)
    assert [a["word"] for a in answers] == ["cat", "money"] and all(len(a["neighbours"]) == 3 for a in answers)
    assert answers == load(model_dir).neighbours(["cat", "money"], top_k=3)  # JSON keeps a float exactly
    one_line_error(bertforge("neighbours", model_dir, "cat", "☃"), "'☃' is not a word this tokenizer can write")


def test_the_word_map_puts_planted_groups_apart_on_its_first_direction(model_dir, tmp_path):
    generator = torch.Generator().manual_seed(2)
    a, b = torch.randn(32, generator=generator), torch.randn(32, generator=generator)
    groups = [["cat", "dog", "mat"], ["money", "river", "bank", "sat"]]
    rows = {
        w: base + 0.05 * torch.randn(32, generator=generator) for base, g in ((a, groups[0]), (b, groups[1])) for w in g
    }
    points = word_map_points(planted(model_dir, rows), groups)
    x = points["xy"][:, 0]
    assert points["xy"].shape == (7, 2) and points["variance"][0] > 0.9 > points["variance"][1]
    assert max(x[:3]) < min(x[3:]) or min(x[:3]) > max(x[3:])  # the groups do not mix along it
    cli_ok("plot-words", model_dir, "cat,dog,mat", "money,river", "--out", tmp_path / "words.png")
    assert png(tmp_path / "words.png").shape[0] > 300
    one_line_error(bertforge("plot-words", model_dir, "cat,dog", "--out", tmp_path / "two.png"), "at least 3 words")


def test_attention_grid_has_one_panel_per_head(model_dir, tmp_path):
    from bertforge.plots import attention_maps

    bert = load(model_dir)
    tokens, attention = bert.attention("the cat sat on the mat.")
    assert attention.shape == (2, 4, len(tokens), len(tokens))
    figure = attention_maps(tokens, attention, layer=0)
    panels = [ax for ax in figure.axes if ax.images]
    assert len(panels) == 4
    assert [ax.get_title() for ax in panels] == [f"layer 0, head {h}" for h in range(4)]
    for h, ax in enumerate(panels):
        np.testing.assert_allclose(ax.images[0].get_array(), attention[0, h].numpy())


def test_sweep_runs_every_grid_point_and_skips_finished_ones(tmp_path):
    write_corpus(tmp_path / "corpus.txt", make_documents(n_docs=30, sentences=8, seed=7))
    bertforge_ok(
        "tokenizer",
        "train",
        tmp_path / "corpus.txt",
        "--out",
        tmp_path / "tok",
        "--vocab-size",
        "100",
        "--min-frequency",
        "1",
    )
    bertforge_ok(
        "prepare",
        tmp_path / "corpus.txt",
        "--tokenizer",
        tmp_path / "tok",
        "--out",
        tmp_path / "data",
        "--valid-fraction",
        "0.1",
    )
    flags = [
        "sweep",
        "--data",
        tmp_path / "data",
        "--out",
        tmp_path / "sweep",
        "--preset",
        "tiny",
        "--hidden-size",
        "32",
        "--num-heads",
        "2",
        "--intermediate-size",
        "64",
        "--seq-len",
        "48",
        "--batch-size",
        "8",
        "--max-steps",
        "6",
        "--precision",
        "fp32",
        "--num-workers",
        "0",
        "--eval-every",
        "3",
        "--eval-batches",
        "1",
        "--log-every",
        "2",
        "--grid",
        "mask_prob=0.3",
        "--grid",
        "num_layers=1,2",
    ]
    bertforge_ok(*flags)
    rows = list(csv.DictReader(open(tmp_path / "sweep" / "results.csv")))
    assert len(rows) == 2
    assert {(r["mask_prob"], r["num_layers"]) for r in rows} == {("0.3", "1"), ("0.3", "2")}
    for r in rows:
        config = json.loads((tmp_path / "sweep" / "runs" / r["run"] / "config.json").read_text())
        assert config["train"]["mask_prob"] == float(r["mask_prob"]) and config["model"]["num_layers"] == int(
            r["num_layers"]
        )
        assert float(r["final_train_loss"]) > 0 and 0 <= float(r["valid_mlm_acc"]) <= 1
    assert int(rows[0]["parameters"]) != int(rows[1]["parameters"])  # 1 layer vs 2 layers
    assert "| mask_prob | num_layers |" in (tmp_path / "sweep" / "results.md").read_text()
    png(tmp_path / "sweep" / "curves.png")
    again = bertforge_ok(*flags)
    assert again.stderr.count("skip (finished)") == 2
    # An interrupted run (checkpoint, no final model) resumes instead of starting over.
    interrupted = tmp_path / "sweep" / "runs" / rows[0]["run"]
    before = (interrupted / "metrics.jsonl").read_text()
    shutil.rmtree(interrupted / "model")
    resumed = bertforge_ok(*flags)
    assert resumed.stderr.count("skip (finished)") == 1 and f"run: {rows[0]['run']}" in resumed.stderr
    log = (interrupted / "sweep.log").read_text()
    assert "resumed from" in log
    train_steps = [
        json.loads(line)["step"]
        for line in (interrupted / "metrics.jsonl").read_text().splitlines()
        if json.loads(line)["split"] == "train"
    ]
    assert train_steps == [
        json.loads(line)["step"] for line in before.splitlines() if json.loads(line)["split"] == "train"
    ]


def test_a_sweep_curve_by_time_puts_each_step_at_its_seeds_median_minute():
    fig, ax = subplots()
    curves = [{10: 0.1, 20: 0.2}, {10: 0.3, 20: 0.4, 30: 0.5}]  # step 30: one seed only, not drawn
    minutes = [{10: 1.0, 20: 2.0}, {10: 3.0, 20: 5.0, 30: 6.0}]
    draw_band(ax, curves, "two seeds", x_by_step=minutes)
    assert list(ax.lines[0].get_xdata()) == [2.0, 3.5]
    assert list(ax.lines[0].get_ydata()) == pytest.approx([0.2, 0.3])
    draw_band(ax, curves, "by step")
    assert list(ax.lines[1].get_xdata()) == [10, 20]


# ---------------------------------------------------------------- what the figures show


@pytest.fixture
def figures(monkeypatch):
    """Every figure the commands save, kept for reading its data back (the images are still written)."""
    import bertforge.plots
    import bertforge.studies.score

    kept, save = [], bertforge.plots.save_figure

    def keep(fig, out):
        kept.append(fig)
        return save(fig, out)

    monkeypatch.setattr(bertforge.plots, "save_figure", keep)
    monkeypatch.setattr(bertforge.studies.score, "save_figure", keep)
    return kept


def series(fig) -> dict[str, tuple[list, list]]:
    """Each labelled line of a figure: its label -> (x values, y values)."""
    return {
        line.get_label(): (list(line.get_xdata()), list(line.get_ydata()))
        for ax in fig.axes
        for line in ax.lines
        if not line.get_label().startswith("_")
    }


def test_the_plot_verb_draws_each_series_of_the_metrics_file_as_logged(tmp_path, figures, capsys):
    """Every curve is its metrics.jsonl column at its logged steps, the held-out points too; a line torn by a run
    still writing is left out, as `plot` reads a log while the run goes on."""
    rng = np.random.default_rng(0)
    keys = ("loss", "mlm_loss", "nsp_loss", "mlm_acc", "nsp_acc", "lr")
    train = [{"step": s, "split": "train", **dict(zip(keys, rng.random(6)))} for s in range(10, 110, 10)]
    valid = [{"step": s, "split": "valid", **dict(zip(keys[1:5], rng.random(4)))} for s in (50, 100)]
    run = tmp_path / "run"
    run.mkdir()
    lines = [json.dumps(r) for r in train[:5] + valid[:1] + train[5:] + valid[1:]]
    (run / "metrics.jsonl").write_text("\n".join(lines) + '\n{"step": 110, "split": "tr')
    cli_ok("plot", run)
    assert png(run / "plots" / "training_curves.png").shape[1] > 1000
    cli_ok("plot", run, "--format", "svg")
    assert (run / "plots" / "training_curves.svg").read_text().lstrip().startswith("<?xml")
    (fig, _) = figures

    def column(records, key):
        return [r["step"] for r in records], [r[key] for r in records]

    assert series(fig) == {
        "train loss": column(train, "loss"),
        "train MLM loss": column(train, "mlm_loss"),
        "held-out MLM loss": column(valid, "mlm_loss"),
        "train NSP loss": column(train, "nsp_loss"),
        "held-out NSP loss": column(valid, "nsp_loss"),
        "train MLM accuracy": column(train, "mlm_acc"),
        "held-out MLM accuracy": column(valid, "mlm_acc"),
        "train NSP accuracy": column(train, "nsp_acc"),
        "held-out NSP accuracy": column(valid, "nsp_acc"),
        "learning rate": column(train, "lr"),
    }


def test_fill_mask_bars_are_the_predictions_with_the_answer_in_its_own_colour(model_dir, tmp_path, figures, capsys):
    text = "the cat sat on the [MASK]."
    answer = load(model_dir).fill_mask(text, top_k=5)["masks"][0]["predictions"][2]["token"]
    cli_ok("fill-mask", model_dir, text, "--plot", tmp_path / "fill.png", "--answer", answer, "--json")
    predictions = json.loads(capsys.readouterr().out)["masks"][0]["predictions"][::-1]  # drawn best on top
    (ax,) = figures[0].axes
    assert [label.get_text() for label in ax.get_yticklabels()] == [p["token"] for p in predictions]
    assert [bar.get_width() for bar in ax.patches] == pytest.approx([p["score"] for p in predictions])
    colours = [to_hex(bar.get_facecolor()) for bar in ax.patches]
    assert colours == [to_hex("tab:green" if p["token"] == answer else "tab:blue") for p in predictions]
    assert colours.count(to_hex("tab:green")) == 1
    assert [text.get_text() for text in ax.get_legend().get_texts()] == [f"answer: {answer}", "other"]


def test_the_score_figure_draws_each_rows_median_and_range(tmp_path, figures):
    from bertforge.studies.score import plot_scores

    rows = [
        {"task": task, "arm": arm, "metric": "accuracy", "median": median, "min": low, "max": high}
        for task, arm, low, median, high in [
            ("mrpc", "pre-trained", 0.70, 0.74, 0.75),
            ("mrpc", "from scratch", 0.60, 0.66, 0.69),
            ("sst2", "pre-trained", 0.80, 0.81, 0.83),
            ("sst2", "from scratch", 0.71, 0.72, 0.78),
        ]
    ]
    plot_scores(tmp_path / "results.png", rows)
    (ax,) = figures[0].axes
    bars = sorted(ax.patches, key=lambda bar: bar.get_x())
    drawn = [row for task in ("mrpc", "sst2") for row in rows if row["task"] == task]  # each task's arms, in order
    assert [bar.get_height() for bar in bars] == pytest.approx([r["median"] for r in drawn])
    whiskers = sorted((s for c in ax.collections for s in c.get_segments()), key=lambda s: s[0][0])  # (x, min)-(x, max)
    ranges = [y for r in drawn for y in (r["min"], r["max"])]
    assert [float(y) for whisker in whiskers for y in whisker[:, 1]] == pytest.approx(ranges)


def test_plot_never_writes_over_the_run_it_reads(tmp_path):
    """`plot --out` aimed at the run's metrics.jsonl, at the run directory (which holds it) or at another
    directory: one line, exit 2, and the log as it was."""
    run = tmp_path / "run"
    run.mkdir()
    log = '{"step": 10, "split": "train", "loss": 1.0, "mlm_loss": 1.0, "mlm_acc": 0.1, "lr": 0.001}\n'
    (run / "metrics.jsonl").write_text(log)
    (tmp_path / "elsewhere").mkdir()
    for out, said in (
        (run / "metrics.jsonl", "is RUN_DIR"),
        (run, "holds RUN_DIR"),
        (tmp_path / "elsewhere", "is a directory"),
    ):
        one_line_error(bertforge("plot", run, "--out", out), said)
    assert (run / "metrics.jsonl").read_text() == log
