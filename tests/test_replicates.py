"""Statistics over seeds: median and range, ranges apart, and curve gaps against seed spread; `sweep --seeds`."""

from __future__ import annotations

import csv
import json
import shutil
import statistics

import pytest

from bertforge.errors import UserError
from bertforge.studies.replicates import curve_gap, median_range, paired, separated, smooth
from bertforge.studies.sweep import parse_grid, with_seeds

from conftest import TINY_MODEL, TINY_RUN, bertforge, bertforge_ok, one_line_error, prepared_data, train_metrics


def test_median_range_and_separated():
    assert median_range([0.3, 0.1, 0.2, 0.5]) == {"median": 0.25, "min": 0.1, "max": 0.5, "seeds": 4}
    assert separated([0.1, 0.2], [0.3, 0.4]) and separated([0.3, 0.4], [0.1, 0.2])
    assert not separated([0.1, 0.3], [0.2, 0.4])  # the ranges overlap
    assert not separated([0.1, 0.2], [0.2, 0.4])  # they touch


def test_paired_differences_seed_for_seed():
    base, other = {0: 0.20, 1: 0.16, 2: 0.19}, {0: 0.21, 1: 0.20, 2: 0.18, 3: 0.5}
    assert paired(base, other) == pytest.approx({"median": 0.01, "higher": 2, "pairs": 3})  # seed 3: no pair
    assert paired(other, base) == pytest.approx({"median": -0.01, "higher": 1, "pairs": 3})
    assert paired(base, base) == {"median": 0.0, "higher": 0, "pairs": 3}  # a tie is not higher
    assert paired({0: 0.1}, {1: 0.2}) is None


def test_smooth_is_a_trailing_moving_average():
    assert smooth([1.0, 2.0, 3.0, 4.0], 2) == [1.0, 1.5, 2.5, 3.5]
    assert smooth([1.0, 2.0, 3.0], 1) == [1.0, 2.0, 3.0]
    assert smooth([4.0, 2.0], 10) == [4.0, 3.0]


def test_curve_gap_against_the_baselines_seed_spread():
    base = [{s: 1.0 for s in range(10)}, {s: 1.2 for s in range(10)}, {s: 1.1 for s in range(10)}]
    near = [{s: 1.15 for s in range(10)}, {s: 1.1 for s in range(10)}, {s: 1.2 for s in range(10)}]
    far = [{s: 2.0 for s in range(10)}, {s: 2.1 for s in range(10)}, {s: 1.9 for s in range(10)}]
    assert curve_gap(base, near) == pytest.approx({"gap": 0.05, "spread": 0.2, "steps": 10})  # within seed noise
    assert curve_gap(base, far) == pytest.approx({"gap": 0.9, "spread": 0.2, "steps": 10})
    assert curve_gap(base, base)["gap"] == 0.0
    # Only the steps every curve logged count; a curve logged at other steps as well changes nothing.
    denser = [{**c, **{s + 0.5: 9.0 for s in range(10)}} for c in far]
    assert curve_gap(base, denser) == pytest.approx(curve_gap(base, far))
    # The gap is between median curves, per step: a median that swaps seeds is still the median.
    crossing = [
        {s: 1.0 + 0.1 * s for s in range(10)},
        {s: 1.9 - 0.1 * s for s in range(10)},
        {s: 1.45 for s in range(10)},
    ]
    assert curve_gap(crossing, [{s: 1.45 for s in range(10)}] * 3, window=1)["gap"] == pytest.approx(0.0)


def test_with_seeds_adds_a_last_axis_from_the_given_seed():
    axes = {"mask_prob": [0.15, 0.3]}
    assert with_seeds(axes, {"lr": 1e-3}, 3) == ({"mask_prob": [0.15, 0.3], "seed": [0, 1, 2]}, {"lr": 1e-3})
    assert with_seeds(axes, {"seed": 5}, 2) == ({"mask_prob": [0.15, 0.3], "seed": [5, 6]}, {})
    assert with_seeds(axes, {"seed": 5}, 1) == (axes, {"seed": 5})
    with pytest.raises(UserError, match="--seeds N or --grid seed"):
        with_seeds({"seed": [0, 1]}, {}, 2)
    with pytest.raises(UserError, match="--seeds 0"):
        with_seeds(axes, {}, 0)


def test_sweep_with_seeds_summarises_each_setting_over_its_seeds(tmp_path):
    data = prepared_data(tmp_path, seed=3) / "data"
    flags = ["sweep", "--data", data, *TINY_MODEL, *TINY_RUN, "--max-steps", "4", "--log-every", "1"]
    flags += ["--eval-every", "2", "--eval-batches", "1", "--batch-size", "8"]
    sweep = tmp_path / "sweep"
    done = bertforge_ok(*flags, "--out", sweep, "--grid", "mask_prob=0.15,0.4", "--seeds", "2", "--seed", "4")
    runs = {r["run"]: r for r in csv.DictReader(open(sweep / "results.csv"))}
    assert set(runs) == {f"mask_prob-{p}__seed-{s}" for p in (0.15, 0.4) for s in (4, 5)}
    for name, row in runs.items():
        config = json.loads((sweep / "runs" / name / "config.json").read_text())
        assert config["train"]["seed"] == int(row["seed"]) and config["train"]["mask_prob"] == float(row["mask_prob"])
    settings = list(csv.DictReader(open(sweep / "summary.csv")))
    assert [(s["mask_prob"], s["seeds"]) for s in settings] == [("0.15", "2"), ("0.4", "2")]
    curves = {}
    for setting in settings:
        mine = [name for name, r in runs.items() if r["mask_prob"] == setting["mask_prob"]]
        accuracies = [float(runs[name]["valid_mlm_acc"]) for name in mine]
        assert float(setting["valid_mlm_acc"]) == pytest.approx(statistics.median(accuracies))
        assert float(setting["valid_mlm_acc_min"]) == pytest.approx(min(accuracies))
        assert float(setting["valid_mlm_acc_max"]) == pytest.approx(max(accuracies))
        curves[setting["mask_prob"]] = [
            {r["step"]: r["loss"] for r in train_metrics(sweep / "runs" / name)} for name in mine
        ]
        assert all(len(curve) == 4 for curve in curves[setting["mask_prob"]])
        # Two seeds start from other weights and see other batches, so their curves differ.
        assert float(setting["loss_seed_spread"]) == pytest.approx(
            curve_gap(*[curves[setting["mask_prob"]]] * 2)["spread"]
        )
        assert float(setting["loss_seed_spread"]) > 0
    first, second = settings
    assert float(first["loss_curve_gap_to_first"]) == 0.0 and float(first["speed_vs_first"]) == 1.0
    assert first["acc_apart_from_first"] == first["acc_paired_median"] == ""  # not compared with itself
    assert second["acc_apart_from_first"] in ("True", "False")
    accuracy = {(float(r["mask_prob"]), int(r["seed"])): float(r["valid_mlm_acc"]) for r in runs.values()}
    differences = [accuracy[(0.4, s)] - accuracy[(0.15, s)] for s in (4, 5)]
    assert float(second["acc_paired_median"]) == pytest.approx(statistics.median(differences))
    assert (int(second["acc_paired_higher"]), int(second["acc_paired_pairs"])) == (sum(d > 0 for d in differences), 2)
    # The gap lies between the two settings' median training-loss curves.
    gap = curve_gap(curves["0.15"], curves["0.4"])["gap"]
    assert gap > 0 and float(second["loss_curve_gap_to_first"]) == pytest.approx(gap)
    assert "| mask_prob | seeds |" in done.stdout  # the summary is what the command prints
    assert (sweep / "summary.md").read_text().startswith("| mask_prob | seeds |")
    # Seeds given twice are refused before anything runs.
    twice = bertforge(*flags, "--out", tmp_path / "twice", "--grid", "seed=0,1", "--seeds", "2")
    one_line_error(twice, "--seeds N or --grid seed")
    assert not (tmp_path / "twice").exists()


def test_sweep_over_presets_trains_each_size(tmp_path):
    data = prepared_data(tmp_path, seed=5) / "data"
    flags = ["sweep", "--data", data, "--recipe", "budget", *TINY_RUN, "--max-steps", "2", "--eval-every", "2"]
    flags += ["--eval-batches", "1", "--batch-size", "4", "--seq-len", "32"]
    sweep = tmp_path / "sweep"
    bertforge_ok(*flags, "--out", sweep, "--grid", "preset=tiny,mini")
    shutil.rmtree(sweep / "runs" / "preset-mini" / "model")  # unfinished: the next sweep resumes it, --preset mini
    bertforge_ok(*flags, "--out", sweep, "--grid", "preset=tiny,mini")  # given again, with the recipe's settings kept
    runs = {r["run"]: r for r in csv.DictReader(open(sweep / "results.csv"))}
    assert set(runs) == {"preset-tiny", "preset-mini"}
    for name, shape in (("preset-tiny", (2, 128, 2)), ("preset-mini", (4, 256, 4))):
        model = json.loads((sweep / "runs" / name / "config.json").read_text())["model"]
        assert (model["num_layers"], model["hidden_size"], model["num_heads"]) == shape
        assert (model["norm_style"], model["position_embedding"]) == ("pre", "rotary")  # the recipe's
    assert int(runs["preset-mini"]["parameters"]) > int(runs["preset-tiny"]["parameters"])
    with pytest.raises(UserError, match="--grid unknown preset 'huge'; choose one of tiny, mini"):
        parse_grid(["preset=tiny,huge"])
    clash = bertforge(*flags, "--out", tmp_path / "x", "--grid", "preset=tiny,mini", "--preset", "tiny")
    one_line_error(clash, "preset is both a --grid axis and a fixed flag")
    assert not (tmp_path / "x").exists()
