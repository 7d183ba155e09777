"""Fine-tuning batches grouped by length (finetune's default) against plain shuffled ones: dev scores over seeds.

    python experiments/length_groups.py MODEL --glue ../shared/data/glue --trec ../shared/data/classification/qc \
        --seeds 3 --out groups

`finetune` draws each training batch from a pool of 50 batches' worth of
examples sorted by length (transformers' group_by_length), so batches carry
little padding; the other arm draws them shuffled, padded to the longest (a
pool of one batch). Both arms are `bertforge score` on the same tasks, seeds and
settings; the table gives each task's dev score, median (range) over seeds, and
the minutes a run took.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # common.py: the machine line
from bertforge.data import batching  # noqa: E402
from bertforge.studies.score import parse_task, score  # noqa: E402
from bertforge.tasks import classification  # noqa: E402
from bertforge.tasks.config import FinetuneConfig  # noqa: E402

from common import machine_description  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--glue", required=True, help="GLUE's directory (MRPC is read)")
    parser.add_argument("--trec", required=True, help="TREC's directory (train.txt; dev held out of it)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--out", default="length_groups")
    args = parser.parse_args()
    tasks = [parse_task(f"mrpc={args.glue}/MRPC"), parse_task(f"trec={args.trec}")]
    cfg = FinetuneConfig(epochs=args.epochs, lr=args.lr, dropout=0.1, precision="fp32")
    rows = {}
    for arm, pool in (("grouped", 50), ("shuffled", 1)):
        classification.shuffled_buckets = functools.partial(batching.shuffled_buckets, pool=pool)
        rows[arm] = score(args.model, tasks, Path(args.out) / arm, cfg, seeds=args.seeds, progress=False)
    print(machine_description())
    print("\n| task | arm | dev accuracy, median (min–max) | by seed | minutes per run |\n|---|---|---:|---|---:|")
    for task in ("mrpc", "trec"):
        for arm, found in rows.items():
            r = next(r for r in found if r["task"] == task and r["main"])
            seeds = ", ".join(f"{v:.3f}" for v in r["by_seed"])
            spread = f"{r['median']:.3f} ({r['min']:.3f}–{r['max']:.3f})"
            print(f"| {task} | {arm} | {spread} | {seeds} | {r['minutes']:.1f} |")


if __name__ == "__main__":
    main()
