"""The demo's toy world must give right answers, not just run."""

from __future__ import annotations

from bertforge.studies.demo import run_workload, workloads


def test_toy_world_answers_are_right(tmp_path, capsys):
    toy = next(w for w in workloads(fast=False) if w.name == "toy")
    result = run_workload(toy, tmp_path)
    assert result["probes_correct"] >= 5, capsys.readouterr().out  # of 6 held-in probes ("the [MASK] sat on the mat.")
    assert result["mlm_acc"] > 2 * result["unigram_baseline_acc"]
    assert result["nsp_acc"] > 0.75
    assert result["pairs_correct"] == 4, capsys.readouterr().out  # each pair IsNext or NotNext as labelled
    out = capsys.readouterr().out
    assert "top-1 correct on" in out and "NSP is_next_prob" in out
    assert (tmp_path / "toy" / "run" / "plots" / "training_curves.png").is_file()
