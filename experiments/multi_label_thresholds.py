"""Per-label thresholds against 0.5, on a real multi-label task with rare labels: which entity types a tweet names.

    python experiments/multi_label_thresholds.py MODEL --wnut ../shared/data/ner/wnut17 --seeds 3 --out thresholds

WNUT-17's sentences become a multi-label task: a sentence's labels are the
entity types it contains (person, location, group, corporation, product,
creative-work; none for most). Each seed fine-tunes `--task multi-label
--tune-thresholds` on train, with the thresholds fitted on dev; then the same
model is scored on the test file twice, with every label at 0.5 and with its
saved per-label thresholds. The test file is scored only, never tuned on. The
table gives the median (range) over seeds of test micro- and macro-F1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # common.py: the machine line
from common import machine_description  # noqa: E402

SPLITS = {"train": "wnut17train.conll", "dev": "emerging.dev.conll", "test": "emerging.test.annotated"}


def write_entity_types(conll: Path, out: Path) -> list[tuple[str, tuple[str, ...]]]:
    """A JSONL row per sentence: its words joined, and the sorted entity types its tags name."""
    from bertforge.tasks.tagging import entities, read_conll

    rows = [(" ".join(s.words), tuple(sorted({kind for kind, _, _ in entities(s.tags)}))) for s in read_conll(conll)]
    out.write_text("".join(json.dumps({"text": t, "labels": list(y)}) + "\n" for t, y in rows), encoding="utf-8")
    return rows


def test_scores(model_dir: Path, rows: list[tuple[str, tuple[str, ...]]]) -> dict[str, dict[str, float]]:
    """Test micro/macro-F1 of one model at 0.5 and at its saved per-label thresholds."""
    from bertforge.tasks.classification import Classifier
    from bertforge.tasks.targets import multi_label_metrics

    classifier = Classifier(model_dir)
    truth = np.array([[label in y for label in classifier.labels] for _, y in rows])  # (n, labels)
    scores = {}
    for rule, threshold in (("0.5", 0.5), ("tuned", None)):
        answers = classifier.classify([t for t, _ in rows], threshold=threshold)
        predicted = np.array([[label in a["labels"] for label in classifier.labels] for a in answers])
        scores[rule] = multi_label_metrics(predicted, truth)
    scores["thresholds"] = dict(zip(classifier.labels, classifier.thresholds))
    return scores


def main() -> None:
    from bertforge.tasks.classification import Columns
    from bertforge.tasks.config import FinetuneConfig
    from bertforge.tasks.finetune import finetune

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="pre-trained model (run or model directory)")
    parser.add_argument("--wnut", type=Path, default=Path("../shared/data/ner/wnut17"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=3e-4)
    args = parser.parse_args()
    print(machine_description())
    args.out.mkdir(parents=True, exist_ok=True)
    rows = {split: write_entity_types(args.wnut / name, args.out / f"{split}.jsonl") for split, name in SPLITS.items()}
    for split, split_rows in rows.items():
        counts = {}
        for _, labels in split_rows:
            for label in labels:
                counts[label] = counts.get(label, 0) + 1
        print(f"{split}: {len(split_rows)} sentences, with each type: {dict(sorted(counts.items()))}")
    results = []
    for seed in range(args.seeds):
        run = args.out / f"seed-{seed}"
        cfg = FinetuneConfig(epochs=args.epochs, lr=args.lr, seed=seed, tune_thresholds=True, device="cpu")
        train, dev, columns = args.out / "train.jsonl", args.out / "dev.jsonl", Columns("text", "labels")
        summary = finetune(args.model, "multi-label", train, dev, run, cfg, columns, progress=False, resume=True)
        scores = test_scores(run / "model", rows["test"])
        results.append(scores)
        rounded = {label: round(t, 3) for label, t in scores["thresholds"].items()}
        print(f"seed {seed}: best epoch {summary['best']['epoch']}, thresholds {rounded}")
        for rule in ("0.5", "tuned"):
            print(f"  test at {rule}: " + ", ".join(f"{k} {v:.4f}" for k, v in scores[rule].items()))
    print("\n| rule | test micro-F1 | test macro-F1 | subset accuracy |\n|---|---|---|---|")
    for rule, name in (("0.5", "every label at 0.5"), ("tuned", "per-label thresholds fitted on dev")):
        cells = []
        for metric in ("micro_f1", "macro_f1", "subset_accuracy"):
            values = [r[rule][metric] for r in results]
            cells.append(f"{statistics.median(values):.3f} ({min(values):.3f}–{max(values):.3f})")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
