"""The demo's toy world must give right answers, not just run: through the `demo` verb, as `make demo` runs it."""

from __future__ import annotations

import bertforge.studies.demo as demo
from bertforge.cli import main


def test_the_demo_verb_trains_the_toy_world_to_right_answers(tmp_path, capsys, monkeypatch):
    """The verb with its stages cut to the toy world (the books stage is the same code on a bigger corpus, minutes
    of it); each stage's result is kept as the verb hands it on."""
    all_workloads, run_workload, results = demo.workloads, demo.run_workload, []
    monkeypatch.setattr(demo, "workloads", lambda fast: [w for w in all_workloads(fast) if w.name == "toy"])
    monkeypatch.setattr(demo, "run_workload", lambda *args: results.append(run_workload(*args)) or results[-1])
    assert main(["demo", "--out", str(tmp_path)]) == 0
    (result,) = results
    out = capsys.readouterr().out
    assert result["probes_correct"] >= 5, out  # of 6 held-in probes ("the [MASK] sat on the mat.")
    assert result["mlm_acc"] > 2 * result["unigram_baseline_acc"]
    assert result["nsp_acc"] > 0.75
    assert result["pairs_correct"] == 4, out  # each pair IsNext or NotNext as labelled
    assert "top-1 correct on" in out and "NSP is_next_prob" in out and f"everything is under {tmp_path}/" in out
    assert (tmp_path / "toy" / "run" / "plots" / "training_curves.png").is_file()
