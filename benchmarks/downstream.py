"""What pre-training buys: GLUE SST-2 and MRPC dev scores, pre-trained against from-scratch.

    # 1. pre-train the mini preset on Gutenberg for a fixed CPU budget
    bertforge tokenizer train ../shared/data/gutenberg/train.txt --out tok --vocab-size 30522
    bertforge prepare ../shared/data/gutenberg/train.txt --tokenizer tok --out data \\
        --valid ../shared/data/gutenberg/valid.txt --workers 2
    bertforge pretrain --data data --out run --preset mini --time-budget 40m --batch-size 32 --lr 5e-4
    # 2. fine-tune it and the same architecture from random weights
    python benchmarks/downstream.py --model run --glue ../shared/data/glue --out downstream

Both arms use the same fine-tuning recipe (epochs, lr, batch, seed); the dev
split is the one reported, as GLUE's test labels are not public. SST-2 dev has
872 sentences, so one accuracy carries about ±1.3 points of sampling error; the
two arms are compared on the same sentences with an exact McNemar test, which
looks only at the sentences where they disagree.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from bertforge.finetune import Classifier, FinetuneConfig, finetune, read_examples

TASKS = {
    # name: (directory, text column, pair column, label column)
    "sst2": ("SST-2", "sentence", None, "label"),
    "mrpc": ("MRPC", "#1 String", "#2 String", "Quality"),
    "rte": ("RTE", "sentence1", "sentence2", "label"),
}


def mcnemar_p(only_first: int, only_second: int) -> float:
    """Two-sided exact McNemar p-value: under 'no difference', each disagreement is a fair coin."""
    n = only_first + only_second
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(only_first, only_second) + 1)) / 2**n
    return min(1.0, 2 * tail)


def dev_correct(model_dir: Path, examples) -> list[bool]:
    texts, pairs = [e.text for e in examples], [e.pair for e in examples]
    results = Classifier(model_dir).classify(texts, pairs if pairs[0] is not None else None)
    return [r["label"] == e.label for r, e in zip(results, examples)]


def paired_comparison(pretrained: Path, scratch: Path, examples) -> dict:
    ours, theirs = dev_correct(pretrained, examples), dev_correct(scratch, examples)
    only_pretrained = sum(a and not b for a, b in zip(ours, theirs))
    only_scratch = sum(b and not a for a, b in zip(ours, theirs))
    return {
        "only_pretrained_right": only_pretrained,
        "only_scratch_right": only_scratch,
        "mcnemar_p": mcnemar_p(only_pretrained, only_scratch),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="pre-trained run or model directory")
    parser.add_argument("--glue", default="../shared/data/glue")
    parser.add_argument("--tasks", default="sst2,mrpc")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--precision", default="auto", help="auto picks bf16 on CPUs measured to be fast at it")
    parser.add_argument("--dropout", type=float, help="fine-tuning dropout for both arms (default: the model's own)")
    parser.add_argument("--out", default="downstream")
    args = parser.parse_args()
    rows = []
    for task in args.tasks.split(","):
        directory, text, pair, label = TASKS[task]
        glue = Path(args.glue) / directory
        for arm in ("pre-trained", "from scratch"):
            cfg = FinetuneConfig(
                epochs=args.epochs,
                lr=args.lr,
                batch_size=args.batch_size,
                seed=args.seed,
                from_scratch=arm == "from scratch",
                precision=args.precision,
                dropout=args.dropout,
            )
            out = Path(args.out) / task / arm.replace(" ", "_")
            summary = finetune(args.model, str(glue / "train.tsv"), str(glue / "dev.tsv"), text, label, out, pair, cfg)
            best = summary["best"]
            rows.append(
                {
                    "task": task,
                    "arm": arm,
                    "dev_accuracy": best["dev_accuracy"],
                    "dev_f1": best.get("dev_f1"),
                    "dev_mcc": best.get("dev_mcc"),
                    "best_epoch": best["epoch"],
                    "minutes": best["elapsed"] / 60,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
        task_dir = Path(args.out) / task
        dev = read_examples(glue / "dev.tsv", text, label, pair)
        rows[-2]["paired"] = paired_comparison(
            task_dir / "pre-trained" / "model", task_dir / "from_scratch" / "model", dev
        )
        print(json.dumps({"task": task, **rows[-2]["paired"]}), flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "results.json").write_text(json.dumps(rows, indent=2))
    print(
        "\n| task | model | dev accuracy | dev F1 | dev MCC | best epoch | McNemar p |"
        "\n|---|---|---:|---:|---:|---:|---:|"
    )
    for r in rows:
        p = f"{r['paired']['mcnemar_p']:.3f}" if "paired" in r else ""
        print(
            f"| {r['task']} | {r['arm']} | {100 * r['dev_accuracy']:.1f} | {100 * (r['dev_f1'] or 0):.1f} | "
            f"{r['dev_mcc'] or 0:.3f} | {r['best_epoch']} | {p} |"
        )


if __name__ == "__main__":
    main()
