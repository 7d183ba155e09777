"""What adapting a pre-trained model to a task's own text buys downstream (experiments/continued.md).

    python experiments/continued_arms.py --start ROPEHOUR/runs/modern-8k/model --out adapt --minutes 10 --seeds 5

From one start (the `budget` hour model, pre-trained on books), for each task (WNUT-17: tweets, far from books;
GLUE MRPC: news sentence pairs), three arms fine-tuned the same way over seeds (`bertforge score`):
  direct     fine-tune the start as it is;
  continued  continue its masked-LM pre-training on the task's own training text (unlabelled, train split only)
             for --minutes calibrated CPU minutes, then fine-tune (Gururangan et al. 2020's task-adaptive
             pre-training);
  extended   as continued, after `bertforge tokenizer extend` added --add of the text's words to the vocabulary.
With --probe-lrs, first the continued run's peak learning rate: the start continued on WNUT-17's tweets for
--probe-minutes at each rate, scored on held-out tweets (5% of the training tweets, never trained on) at every
tenth; results in probe.md.
Equal time, robustly: each continued run's seconds per step are measured alone on both cores (30 steps), and the
run trains for the steps that fill --minutes at that speed, so work running beside it changes how long it takes,
not how much it learns. Everything is resumable: a finished step is skipped; results.md is written from what has
finished.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from common import machine_description  # noqa: E402

TASKS = {
    "ner": ("ner/wnut17", "wnut17train.conll"),
    "mrpc": ("glue/MRPC", "train.tsv"),
}
CONTINUE = ["--recipe", "budget", "--seq-len", "128", "--batch-size", "32", "--eval-batches", "20"]
FINETUNE = ["--epochs", "3", "--lr", "3e-4", "--dropout", "0.1", "--batch-size", "32"]


def bertforge(*args, threads: int = 1, log: Path, stdout: Path | None = None) -> None:
    """The command with `threads` torch threads, its output appended to `log` (its stdout to `stdout` if given)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    with open(log, "a") as err, open(stdout or log, "a") as out:
        subprocess.run([sys.executable, "-m", "bertforge", *map(str, args)], check=True, env=env, stdout=out,
                       stderr=err)  # fmt: skip


def task_text(data: Path, task: str, out: Path) -> Path:
    """The task's training text, unlabelled: WNUT-17's tweets (one document each), MRPC's two sentences of each
    pair (one document per pair). Dev and test are never read."""
    folder, train = TASKS[task]
    path = out / f"{task}.txt"
    if path.is_file():
        return path
    source = data / folder / train
    documents: list[list[str]] = []
    if task == "ner":
        words: list[str] = []
        for line in source.read_text(encoding="utf-8").splitlines() + [""]:
            if line.strip():
                words.append(line.split("\t")[0])
            elif words:
                documents.append([" ".join(words)])
                words = []
    else:
        with open(source, encoding="utf-8-sig", newline="") as f:
            for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                documents.append([row["#1 String"], row["#2 String"]])
    path.write_text("\n\n".join("\n".join(doc) for doc in documents) + "\n", encoding="utf-8")
    return path


def ready(start: Path, text: Path, out: Path, minutes: float, extend: int) -> tuple[Path, Path, int]:
    """(the model to continue, its prepared text, the steps that fill `minutes`): the start (after adding `extend`
    words, if any), and its step cost measured alone on both cores, the median of 30 steps after 10 of warm-up.
    Run while nothing else is."""
    out.mkdir(parents=True, exist_ok=True)
    log = out / "log.txt"
    base = start
    if extend:
        base = out / "extended"
        if not (base / "config.json").is_file():
            began = time.perf_counter()
            bertforge("tokenizer", "extend", start, text, "--add", extend, "--out", base, "--json", threads=2,
                      log=log, stdout=out / "extension.json")  # fmt: skip
            (out / "extension_seconds.json").write_text(json.dumps(time.perf_counter() - began))
    data = out / "data"
    if not (data / "meta.json").is_file():
        bertforge("prepare", text, "--tokenizer", base, "--out", data, "--valid-fraction", "0.05", log=log)
    record = out / "calibration.json"
    if not record.is_file():
        run = out / "calibration_run"
        bertforge("pretrain", "--data", data, "--out", run, "--init-from", base, *CONTINUE, "--lr", "5e-4",
                  "--max-steps", "40", "--log-every", "1", "--eval-every", "0", "--save-every", "0", "--overwrite",
                  "--quiet", threads=2, log=log)  # fmt: skip
        records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        elapsed = [r["elapsed"] for r in records if r["split"] == "train"]
        per_step = sorted(b - a for a, b in zip(elapsed[10:], elapsed[11:]))[len(elapsed[11:]) // 2]
        record.write_text(json.dumps({"seconds_per_step": per_step}))
    per_step = json.loads(record.read_text())["seconds_per_step"]
    return base, data, max(10, int(minutes * 60 / per_step))


def continued(base: Path, data: Path, steps: int, out: Path, lr: str = "5e-4") -> Path:
    """`base` pre-trained on `data` for `steps` more steps, a held-out evaluation every tenth (step 0: `base`)."""
    model = out / "run" / "model"
    if not (model / "config.json").is_file():
        out.mkdir(parents=True, exist_ok=True)
        began = time.perf_counter()
        bertforge("pretrain", "--data", data, "--out", out / "run", "--init-from", base, *CONTINUE, "--lr", lr,
                  "--max-steps", steps, "--eval-every", max(1, steps // 10), "--resume", "--quiet",
                  log=out / "log.txt")  # fmt: skip
        (out / "cost.json").write_text(json.dumps({"steps": steps, "wall_seconds": time.perf_counter() - began}))
    return model


def held_out_curve(run: Path) -> list[tuple[int, float]]:
    """(step, held-out MLM accuracy) at each evaluation of a run, step 0 (the start) first."""
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["mlm_acc"]) for r in records if r["split"] == "valid"]


def probe(start: Path, text: Path, out: Path, lrs: list[str], minutes: float) -> None:
    """The continued run's held-out MLM accuracy on the task's text for each peak learning rate."""
    base, data, steps = ready(start, text, out, minutes, 0)  # the continued arm's data and step cost
    jobs = {lr: out / f"lr_{lr}" for lr in lrs}
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda lr: continued(base, data, steps, jobs[lr], lr), lrs))
    lines = [machine_description(), "", f"{steps:,} steps ({minutes:g} calibrated minutes) from {start}", ""]
    lines += ["| peak lr | held-out MLM accuracy at each tenth (step: accuracy) |", "|---|---|"]
    for lr, folder in jobs.items():
        lines.append(f"| {lr} | " + ", ".join(f"{s}: {a:.3f}" for s, a in held_out_curve(folder / "run")) + " |")
    (out / "probe.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


def score(model: Path, task: str, data: Path, out: Path, seeds: int) -> None:
    if (out / "results.json").is_file():
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    folder, _ = TASKS[task]
    bertforge("score", model, "--tasks", f"{task}={data / folder}", "--seeds", seeds, *FINETUNE, "--out", out,
              "--device", "cpu", "--precision", "fp32", log=out.with_suffix(".log"))  # fmt: skip


def report(out: Path) -> None:
    rows = []
    for task in TASKS:
        for arm in ("direct", "continued", "extended"):
            results = out / "scores" / task / arm / "results.json"
            if not results.is_file():
                continue
            row = next(r for r in json.loads(results.read_text()) if r["main"])  # entity F1, accuracy
            cost = out / "arms" / task / arm / "cost.json"
            spent = json.loads(cost.read_text()) if cost.is_file() else {}
            added = out / "arms" / task / arm / "extension.json"
            words = ""
            if added.is_file():
                extension = json.loads(added.read_text())
                words = f"{len(extension['added'])} words, {extension['pieces_per_word_before']:.3f} -> "
                words += f"{extension['pieces_per_word_after']:.3f} pieces per word"
            rows.append(
                f"| {task} | {arm} | {row['metric']} | {row['median']:.4f} ({row['min']:.4f}–{row['max']:.4f}) | "
                f"{row['seeds']} | {spent.get('steps', 0):,} | {row['minutes']:.1f} | {words} |"
            )
    lines = [
        machine_description(),
        "",
        "| task | arm | metric | dev median (min–max) | seeds | continued steps | minutes per fine-tuning "
        "| vocabulary |",
        "|---|---|---|---|---|---:|---:|---|",
        *rows,
    ]
    (out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--start", required=True, help="the pre-trained model to adapt")
    parser.add_argument("--data", default="../shared/data", help="the shared data sets")
    parser.add_argument("--out", default="adapt")
    parser.add_argument("--minutes", type=float, default=10.0, help="calibrated CPU minutes of continued pre-training")
    parser.add_argument("--add", type=int, default=1000, help="words the extended arm adds to the vocabulary")
    parser.add_argument("--lr", default="5e-4", help="the continued runs' peak learning rate")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--report", action="store_true", help="only write results.md from what has finished")
    parser.add_argument("--probe-lrs", help="first, continued runs on the tweets at these peak rates, e.g. 1e-4,1e-3")
    parser.add_argument("--probe-minutes", type=float, default=5.0, help="calibrated minutes of each probe run")
    args = parser.parse_args()
    out, data, start = Path(args.out), Path(args.data), Path(args.start)
    (out / "text").mkdir(parents=True, exist_ok=True)
    print(machine_description(), flush=True)
    if args.probe_lrs:
        tweets = task_text(data, "ner", out / "text")
        probe(start, tweets, out / "probe", args.probe_lrs.split(","), args.probe_minutes)
    if not args.report:
        prepared = {}  # first, alone: the extensions, the data and each continued run's calibration
        for task in TASKS:
            text = task_text(data, task, out / "text")
            for name, extend in (("continued", 0), ("extended", args.add)):
                prepared[task, name] = ready(start, text, out / "arms" / task / name, args.minutes, extend)

        def arm(job: tuple[str, str]) -> None:
            task, name = job
            model = start
            if name != "direct":
                model = continued(*prepared[task, name], out / "arms" / task / name, args.lr)
            score(model, task, data, out / "scores" / task / name, args.seeds)
            print(f"{task} {name}: done", flush=True)
            report(out)

        jobs = [(task, name) for name in ("direct", "continued", "extended") for task in TASKS]
        with ThreadPoolExecutor(2) as pool:  # two jobs at once, one thread each
            list(pool.map(arm, jobs))
    report(out)


if __name__ == "__main__":
    main()
