"""Continuing a sentence-embedding model's pre-training: how far its vectors drift, what a head warm-up changes,
and what the domain's text buys on WNUT-17 (experiments/continued.md).

    python experiments/headless.py --model MINILM --out headless --data ../shared/data --seeds 3

MINILM is a released sentence-embedding model without a masked-LM head (all-MiniLM-L6-v2's directory: a BertModel
with its pooler, mean pooling, Normalize). Its domain text is WNUT-17's training tweets, unlabelled (5% held out).
  probe   the new head alone (the encoder frozen) for --probe-steps at each --probe-lrs: held-out MLM accuracy at
          every 25th step, which sets --head-warmup-steps and --head-warmup-lr's defaults;
  drift   continued pre-training at --lr, 300 encoder steps, after a head warm-up of each of --warmups steps (0:
          none): at encoder steps 30, 100 and 300, the median cosine of each SST-2 dev sentence's vector to the
          original model's, and the Spearman correlation of all pairwise similarities with the original's;
  wnut    entity F1 on WNUT-17 dev (`bertforge score`, --seeds seeds): the model as released, and after each arm.
Everything is resumable: what has finished is kept and skipped; results.md is written from what has finished.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from continued_arms import bertforge, task_text  # noqa: E402

from bertforge.engine.checkpoint import checkpoint_dirs, checkpoint_step  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from common import machine_description  # noqa: E402

ENCODER_STEPS = (30, 100, 300)
CONTINUE = ["--recipe", "budget", "--seq-len", "128", "--batch-size", "32", "--eval-batches", "20", "--quiet"]
FINETUNE = ["--epochs", "3", "--lr", "1e-4", "--batch-size", "32", "--device", "cpu", "--precision", "fp32"]


def prepared(model: Path, data: Path, out: Path) -> Path:
    (out / "text").mkdir(parents=True, exist_ok=True)
    text = task_text(data, "ner", out / "text")
    prepared_dir = out / "data"
    if not (prepared_dir / "meta.json").is_file():
        bertforge("prepare", text, "--tokenizer", model, "--out", prepared_dir, "--valid-fraction", "0.05",
                  log=out / "log.txt")  # fmt: skip
    return prepared_dir


def pretrain(model: Path, data: Path, run: Path, *flags) -> Path:
    if not (run / "model" / "config.json").is_file():
        bertforge("pretrain", "--data", data, "--out", run, "--init-from", model, *CONTINUE, *map(str, flags),
                  "--resume", threads=2, log=run.parent / f"{run.name}.log")  # fmt: skip
    return run


def held_out(run: Path) -> dict[int, float]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["mlm_acc"] for r in rows if r["split"] == "valid"}


def probe(model: Path, data: Path, out: Path, lrs: list[str], steps: int) -> list[str]:
    lines = ["| head lr | held-out MLM accuracy, head alone (step: accuracy) |", "|---|---|"]
    for lr in lrs:
        run = pretrain(model, data, out / f"probe_{lr}", "--head-warmup-steps", steps, "--max-steps", steps,
                       "--head-warmup-lr", lr, "--eval-every", 25, "--save-every", 0)  # fmt: skip
        lines.append(f"| {lr} | " + ", ".join(f"{s}: {a:.3f}" for s, a in held_out(run).items()) + " |")
    return lines


def sst_sentences(data: Path) -> list[str]:
    with open(data / "glue" / "SST-2" / "dev.tsv", encoding="utf-8", newline="") as f:
        return [row["sentence"] for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]


def vectors(model: Path, texts: Path, out: Path) -> np.ndarray:
    if not out.is_file():
        bertforge("embed", model, "--input", texts, "--out", out, "--precision", "fp32", threads=2,
                  log=out.with_suffix(".log"))  # fmt: skip
    return np.load(out)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ranks = [np.argsort(np.argsort(x)).astype(np.float64) for x in (a, b)]
    return float(np.corrcoef(*ranks)[0, 1])


def drift(original: np.ndarray, changed: np.ndarray) -> tuple[float, float]:
    """(median cosine of each text's vectors, Spearman correlation of the pairwise cosine similarities)."""
    unit = [v / np.linalg.norm(v, axis=1, keepdims=True) for v in (original, changed)]
    cosine = float(np.median((unit[0] * unit[1]).sum(1)))
    upper = np.triu_indices(len(original), 1)
    return cosine, spearman((unit[0] @ unit[0].T)[upper], (unit[1] @ unit[1].T)[upper])


def drift_arm(model: Path, data: Path, out: Path, warmup: int, lr: str, texts: Path, base: np.ndarray) -> list[str]:
    """Continued for 300 encoder steps after `warmup` head steps; the drift and held-out accuracy at each of
    ENCODER_STEPS, from the checkpoints."""
    name = f"warmup_{warmup}"
    run = out / name
    if not (run / "model" / "config.json").is_file():
        pretrain(model, data, run, "--head-warmup-steps", warmup, "--max-steps", warmup + ENCODER_STEPS[-1], "--lr",
                 lr, "--eval-every", 10, "--save-every", 10, "--keep-last", 0)  # fmt: skip
    accuracy = held_out(run)
    rows = []
    for steps in ENCODER_STEPS:
        step = warmup + steps
        folder = run / "checkpoints" / f"step_{step:06d}"
        cosine, rank = drift(base, vectors(folder, texts, out / f"{name}_{steps}.npy"))
        rows.append(f"| {warmup} | {steps} | {cosine:.3f} | {rank:.3f} | {accuracy.get(step, float('nan')):.3f} |")
    for checkpoint in checkpoint_dirs(run):  # 90 MB each: the vectors are what is kept
        if checkpoint_step(checkpoint) not in (warmup + s for s in ENCODER_STEPS):
            shutil.rmtree(checkpoint)
    if warmup:  # the encoder as released, read through its warmed-up head
        rows.append(f"| {warmup} | 0 | 1.000 | 1.000 | {accuracy.get(warmup, float('nan')):.3f} |")
    return rows


def score(model: Path, data: Path, out: Path, seeds: int) -> dict | None:
    if not (out / "results.json").is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        bertforge("score", model, "--tasks", f"ner={data / 'ner' / 'wnut17'}", "--seeds", seeds, *FINETUNE, "--out",
                  out, threads=2, log=out.with_suffix(".log"))  # fmt: skip
    return next(r for r in json.loads((out / "results.json").read_text()) if r["main"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a released sentence-embedding model (all-MiniLM-L6-v2)")
    parser.add_argument("--data", default="../shared/data", help="the shared data sets")
    parser.add_argument("--out", default="headless")
    parser.add_argument("--lr", default="1e-4", help="the continued runs' peak learning rate")
    parser.add_argument("--warmups", default="0,100", help="the arms' head warm-ups (steps), 0 for none")
    parser.add_argument("--probe-lrs", default="1e-3,1e-4")
    parser.add_argument("--probe-steps", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    model, data, out = Path(args.model).resolve(), Path(args.data).resolve(), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = [machine_description(), "", f"model: {model}; continued at lr {args.lr}", ""]

    def write(more: list[str]) -> None:
        lines.extend(more)
        (out / "results.md").write_text("\n".join(lines) + "\n")
        print("\n".join(more), flush=True)

    text_data = prepared(model, data, out)
    texts = out / "sst2_dev.txt"
    texts.write_text("\n".join(sst_sentences(data)) + "\n", encoding="utf-8")
    base = vectors(model, texts, out / "original.npy")
    write(["## Drift", "", "| head warm-up steps | encoder steps | median cosine to the original | Spearman of "
           "pairwise similarities | held-out MLM accuracy |", "|---:|---:|---:|---:|---:|"])  # fmt: skip
    warmups = [int(w) for w in args.warmups.split(",")]
    for warmup in warmups:
        write(drift_arm(model, text_data, out, warmup, args.lr, texts, base))
    write(["", "## Head alone", "", *probe(model, text_data, out, args.probe_lrs.split(","), args.probe_steps)])
    write(["", "## WNUT-17 entity F1 (dev)", "", "| model | median (min–max) | seeds |", "|---|---|---:|"])
    arms = {"as released": model, **{f"continued, head warm-up {w}": out / f"warmup_{w}" / "model" for w in warmups}}
    for name, arm in arms.items():
        row = score(arm, data, out / "scores" / name.replace(" ", "_").replace(",", ""), args.seeds)
        write([f"| {name} | {row['median']:.4f} ({row['min']:.4f}–{row['max']:.4f}) | {row['seeds']} |"])


if __name__ == "__main__":
    main()
