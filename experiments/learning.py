"""Learning per hour: recipes and levers pre-trained for the same time on the same text, scored on held-out text.

    python experiments/learning.py --out learning --budget 30m --arms bert,budget,budget-mask40-8k
    python experiments/learning.py --out learning --budget 30m --arms budget,budget-tiny --parallel 2
    python experiments/learning.py --out learning --budget 15m --arms alibi-tiny,alibi-tiny-8k --seeds 3
    python experiments/learning.py --out ropehour --budget 60m --arms rope-8k-mask25 --relative-to rope-8k
    python experiments/learning.py --out learning --report            # tables and figure from what has finished
    python experiments/learning.py --out learning --report --arms budget --downstream ../shared/data/glue

Equal time, robustly. Each arm first runs a short calibration on a quiet machine
(its own settings, 40 steps) to measure its seconds per step; it then trains for
the number of steps that fills the budget at that speed, with the learning-rate
schedule laid over those steps. A machine shared with other work while an arm
trains therefore changes how long the arm takes, not how much it learns, and
`--parallel 2` trains two arms at once, one torch thread each. With `--relative-to
BASE` an arm's seconds per step are instead BASE's calibrated ones times the two
arms' step-cost ratio, measured alternating three times: a new arm then gets the
hour BASE's earlier runs had.

Scored the same way for every arm, at every checkpoint (a tenth of the budget apart):
- held-out MLM accuracy on ../shared/data/gutenberg/valid.txt (books by authors absent
  from the training text), full-length 128-token windows, BERT's 15% masking with fixed
  seeds: one layout for all arms, whatever their pair objective;
- whole-word cloze: 1,000 held-out sentences with one frequent word masked, top-1 and
  top-5, comparable across vocabularies: the report counts only the sentences whose
  word is one token in every reported arm's vocabulary (held-out MLM accuracy is not
  comparable across vocabularies: a smaller one masks shorter, easier pieces);
- 20 hand-written probes with an obvious answer ("The old man shook his [MASK] slowly."),
  top-1 and top-3;
- for arms with a pair objective, its held-out accuracy (NSP or SOP) on sentence pairs.

With `--seeds N` every arm trains N times (`--seed` 0..N-1: other initial weights, batches and masks) for the
steps of its one calibration, and the tables give each figure's median and range over the seeds.

Everything is resumable: a finished run is skipped, an interrupted one resumes.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # common.py: the machine line
from arms import ARMS, steady_flags, whole_run  # noqa: E402

from bertforge.engine.checkpoint import checkpoint_dirs, checkpoint_step  # noqa: E402
from bertforge.engine.metrics import read_metrics  # noqa: E402
from bertforge.formats.corpus import read_paragraphs  # noqa: E402
from bertforge.formats.text import split_sentences
from bertforge.inference import load  # noqa: E402
from bertforge.model.electra import GENERATOR_DIR  # noqa: E402
from bertforge.modelfiles.directory import read_model_files  # noqa: E402
from bertforge.plots import save_figure, subplots  # noqa: E402
from bertforge.studies.replicates import aligned, median_range  # noqa: E402
from bertforge.studies.sweep import draw_band  # noqa: E402
from bertforge.training.evaluate import evaluate_model  # noqa: E402

from common import machine_description  # noqa: E402

PROBES = [
    ("The old man shook his [MASK] slowly.", {"head"}),
    ("She closed the [MASK] behind her.", {"door"}),
    ("He opened the [MASK] and went out into the street.", {"door"}),
    ("It was a dark and stormy [MASK].", {"night"}),
    ("She put her hand on his [MASK].", {"arm", "shoulder", "head"}),
    ("The sun rose over the [MASK].", {"hills", "sea", "mountains", "horizon", "city", "trees", "water", "river"}),
    ("He took off his [MASK] and sat down.", {"hat", "coat"}),
    ("They sat down to [MASK] at seven o'clock.", {"dinner", "supper", "breakfast", "tea"}),
    ("The king and the [MASK] lived in a great castle.", {"queen"}),
    ("She wrote a long [MASK] to her sister.", {"letter"}),
    ("He drank a glass of [MASK].", {"water", "wine", "milk", "beer"}),
    (
        "The children ran across the [MASK] to the river.",
        {"field", "fields", "meadow", "road", "garden", "grass", "bridge", "street"},
    ),
    ("He looked at his [MASK] and saw that it was late.", {"watch"}),
    ("The ship sailed across the [MASK].", {"sea", "ocean", "bay", "water", "river"}),
    ("I have not seen him for many [MASK].", {"years", "days", "months", "weeks"}),
    ("She smiled and took his [MASK].", {"hand", "arm"}),
    ("The dog began to [MASK] loudly.", {"bark"}),
    ("He lit a [MASK] and read the letter.", {"candle", "lamp", "pipe", "match", "cigarette", "fire"}),
    ("Snow fell all through the [MASK].", {"night", "day", "winter"}),
    ("He put the key in the [MASK] and turned it.", {"lock", "door"}),
]


def bertforge(*args: str, log: Path | None = None, threads: int = 0) -> None:
    """Run a bertforge command; `threads` > 0 caps its torch threads (arms trained side by side)."""
    command = [sys.executable, "-m", "bertforge", *map(str, args)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)} if threads else None
    with open(log, "a") if log else open(os.devnull, "w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(command)}" + (f"; see {log}" if log else ""))


def data_dir(out: Path, corpus: Path, vocab: int) -> Path:
    """A tokenizer of `vocab` tokens trained on train.txt, and the data prepared with it; valid.txt held out."""
    data = out / f"data{vocab}"
    if not (data / "meta.json").is_file():
        bertforge(
            "tokenizer", "train", corpus / "train.txt", "--out", out / f"tok{vocab}", "--vocab-size", vocab, "--quiet"
        )
        bertforge(
            "prepare",
            corpus / "train.txt",
            "--valid",
            corpus / "valid.txt",
            "--tokenizer",
            out / f"tok{vocab}",
            "--out",
            data,
            "--workers",
            "2",
            "--quiet",
        )
    return data


def step_cost(arm: str, out: Path, data: Path, flags: list[str]) -> dict:
    """Seconds and tokens per step of this arm's settings, from steps 10..40 of a throwaway run."""
    scratch = out / "calibration" / arm
    bertforge(
        "pretrain",
        "--data",
        data,
        "--out",
        scratch,
        "--overwrite",
        *steady_flags(flags),
        "--max-steps",
        "40",
        "--log-every",
        "10",
        "--eval-every",
        "0",
        "--save-every",
        "0",
        "--quiet",
    )
    train, _ = read_metrics(scratch / "metrics.jsonl")
    by_step = {r["step"]: r for r in train}
    return {
        "seconds_per_step": (by_step[40]["elapsed"] - by_step[10]["elapsed"]) / 30,
        "tokens_per_step": (by_step[40]["tokens"] - by_step[10]["tokens"]) / 30,
    }


def calibrate(arm: str, out: Path, data: dict[str, Path], base: str | None = None) -> dict:
    """The arm's seconds per step, measured once and kept in its calibration.json: its own step's cost, or with
    `base` that arm's calibration scaled by the two arms' step-cost ratio (`relative_cost`)."""
    path = calibration_path(out, arm)
    if path.is_file():
        return json.loads(path.read_text())
    measured = relative_cost(arm, base, out, data) if base else step_cost(arm, out, data[arm], ARMS[arm][1])
    result = {**measured, "load_average": os.getloadavg()[0], "machine": machine_description()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2))
    return result


def relative_cost(arm: str, base: str, out: Path, data: dict[str, Path], rounds: int = 3) -> dict:
    """The arm's seconds per step as `base`'s calibrated seconds times the ratio of the two arms' step costs,
    measured alternating `rounds` times. A ratio holds from one day to the next on a machine type where a
    single speed drifts by more than the levers we compare, so an arm added later trains for the hour that
    `base`'s runs had (the same steps, where the lever does not change a step's cost)."""
    costs: dict[str, list[dict]] = {base: [], arm: []}
    for _ in range(rounds):
        for name in (base, arm):
            costs[name].append(step_cost(name, out, data[name], ARMS[name][1]))
    ratio = sum(c["seconds_per_step"] for c in costs[arm]) / sum(c["seconds_per_step"] for c in costs[base])
    return {
        "seconds_per_step": calibration_of(out, base)["seconds_per_step"] * ratio,
        "tokens_per_step": statistics.median(c["tokens_per_step"] for c in costs[arm]),
        "relative_to": base,
        "ratio": ratio,
        "measured_seconds_per_step": {name: [c["seconds_per_step"] for c in runs] for name, runs in costs.items()},
    }


def run_dir(out: Path, arm: str, seed: int) -> Path:
    """Seed 0's run is runs/ARM (beside the arm's calibration), seed k's runs/ARM.seedk."""
    return out / "runs" / (arm if seed == 0 else f"{arm}.seed{seed}")


def calibration_path(out: Path, arm: str) -> Path:
    """out/calibration/ARM.json, beside the calibration's throwaway run: a run directory holds a run alone (pretrain
    refuses one holding other files). Kept where earlier versions wrote it, runs/ARM/calibration.json, if there."""
    earlier = out / "runs" / arm / "calibration.json"
    return earlier if earlier.is_file() else out / "calibration" / f"{arm}.json"


def calibration_of(out: Path, arm: str) -> dict:
    return json.loads(calibration_path(out, arm).read_text())


def train_arm(arm: str, seed: int, out: Path, data: Path, flags: list[str], budget: float, threads: int = 0) -> None:
    run = run_dir(out, arm, seed)
    if (run / "model" / "config.json").is_file():
        return
    calibration = calibration_of(out, arm)
    steps = max(10, int(budget / calibration["seconds_per_step"]))
    every = max(1, steps // 10)
    print(f"{run.name}: {calibration['seconds_per_step']:.3f} s/step -> {steps} steps for {budget:.0f} s", flush=True)
    common = [
        "--max-steps",
        steps,
        "--eval-every",
        every,
        "--save-every",
        every,
        "--keep-last",
        20,
        "--log-every",
        10,
        "--quiet",
    ]
    if (run / "config.json").is_file():
        bertforge("pretrain", "--data", data, "--out", run, "--resume", *common, log=run / "train.log", threads=threads)
    else:
        log = out / "runs" / f"{run.name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        seeded = [*whole_run(flags, steps), "--seed", seed]
        bertforge("pretrain", "--data", data, "--out", run, *seeded, *common, log=log, threads=threads)


# ---------------------------------------------------------------- scoring


def cloze_sentences(
    out: Path, corpus: Path, n: int = 1000, frequent: int = 1000, seed: int = 0
) -> list[tuple[str, str]]:
    """(sentence with [MASK], the word) from valid.txt: one of the `frequent` most common training words masked."""
    path = out / "cloze.json"
    if path.is_file():
        return [tuple(x) for x in json.loads(path.read_text())]
    counts: collections.Counter = collections.Counter()
    with open(corpus / "train.txt", encoding="utf-8") as f:
        for line in f:
            counts.update(re.findall(r"[a-z]+", line.lower()))
    common = {w for w, _ in counts.most_common(frequent)}
    rng = random.Random(seed)
    chosen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        paragraphs = [p.text for p in read_paragraphs([corpus / "valid.txt"])]
    rng.shuffle(paragraphs)
    for paragraph in paragraphs:
        for sentence in split_sentences(paragraph):
            words = sentence.split()
            if not 8 <= len(words) <= 30:
                continue
            candidates = [i for i, w in enumerate(words) if w.lower() in common and w.isalpha()]
            if candidates:
                i = rng.choice(candidates)
                chosen.append((" ".join(words[:i] + ["[MASK]"] + words[i + 1 :]), words[i].lower()))
                break  # one sentence per paragraph: spread over the held-out books
        if len(chosen) == n:
            break
    path.write_text(json.dumps(chosen, ensure_ascii=False, indent=0))
    return chosen


def cloze_scores(model_dir: Path, cloze: list[tuple[str, str]]) -> dict:
    """Cloze and probe answers of one checkpoint. `cloze_ranks[i]` is where sentence i's word came among the
    top 5 (1-5; 0 outside them), None where the word is more than one token in this vocabulary: arms on other
    vocabularies answer other subsets, and the report scores only the sentences every arm can answer."""
    bert = load(model_dir)
    ranks: list[int | None] = []
    for text, word in cloze:
        if len(bert.tokenizer.encode(word, add_special_tokens=False).ids) != 1:
            ranks.append(None)
            continue
        tokens = [p["token"] for p in bert.fill_mask(text, top_k=5)["masks"][0]["predictions"]]
        ranks.append(tokens.index(word) + 1 if word in tokens else 0)
    probes1 = probes3 = 0
    answers = []
    for text, right in PROBES:
        tokens = [p["token"] for p in bert.fill_mask(text, top_k=3)["masks"][0]["predictions"]]
        probes1 += tokens[0] in right
        probes3 += bool(set(tokens) & right)
        answers.append(tokens[0])
    return {
        **cloze_accuracy(ranks),
        "cloze_ranks": ranks,
        "probes_top1": probes1,
        "probes_top3": probes3,
        "probe_answers": answers,
    }


def cloze_accuracy(ranks: list[int | None], among: list[int] | None = None) -> dict:
    """Top-1 and top-5 over the sentences numbered in `among`, by default every one this vocabulary can answer."""
    chosen = [ranks[i] for i in among] if among is not None else [r for r in ranks if r is not None]
    return {
        "cloze_top1": sum(r == 1 for r in chosen) / len(chosen),
        "cloze_top5": sum(r >= 1 for r in chosen) / len(chosen),
        "cloze_sentences": len(chosen),
    }


def score_run(
    arm: str, seed: int, out: Path, data: Path, cloze: list[tuple[str, str]], last_only: bool = False
) -> list[dict]:
    """Every checkpoint of a finished run (or its last alone), scored the same way; cached in its scores.json
    (scores.last.json)."""
    run = run_dir(out, arm, seed)
    path = run / ("scores.last.json" if last_only else "scores.json")
    if path.is_file():
        rows = json.loads(path.read_text())
        if all("cloze_ranks" in row for row in rows):  # a cache from before the ranks were kept is scored again
            return rows
    seconds = calibration_of(out, arm)["seconds_per_step"]
    rows = []
    checkpoints = checkpoint_dirs(run)
    for checkpoint in checkpoints[-1:] if last_only else checkpoints:
        step = checkpoint_step(checkpoint)
        if (checkpoint / GENERATOR_DIR).is_dir():  # ELECTRA: only its generator fills in blanks
            checkpoint = checkpoint / GENERATOR_DIR
        evaluation = evaluate_model(checkpoint, [str(data)], max_batches=50, layout="none")
        rows.append(
            {
                "step": step,
                "seconds": step * seconds,
                "mlm_acc": evaluation["mlm_acc"],
                "mlm_loss": evaluation["mlm_loss"],
                "unigram_acc": evaluation["unigram_baseline_acc"],
                **cloze_scores(checkpoint, cloze),
            }
        )
        pair = read_model_files(checkpoint).pretraining.get("pair_objective", "none")
        if pair != "none":  # the pair head, judged on held-out pairs laid out as it was trained
            rows[-1]["pair_acc"] = evaluate_model(checkpoint, [str(data)], max_batches=50)[f"{pair}_acc"]
        print(
            f"  {run.name} step {step}: held-out MLM accuracy {rows[-1]['mlm_acc']:.3f}, "
            f"cloze top-1 {rows[-1]['cloze_top1']:.3f}, probes {rows[-1]['probes_top1']}/20",
            flush=True,
        )
    path.write_text(json.dumps(rows, indent=2))
    return rows


def spread(values: list[float], digits: int = 3) -> str:
    """One seed's value, or the median (min–max) over seeds."""
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    m = median_range(values)
    return f"{m['median']:.{digits}f} ({m['min']:.{digits}f}–{m['max']:.{digits}f})"


def report(out: Path, arms: list[str], scores: dict[str, list[list[dict]]]) -> None:
    """The table (each figure at the last checkpoint, median and range over seeds), the curves and the figure.
    Cloze figures count only the sentences whose word is one token in every reported arm's vocabulary."""
    every_run = [rows for runs in scores.values() for rows in runs]
    if not every_run:
        raise SystemExit(f"no finished run to report in {out / 'runs'}")
    answerable = sorted(
        set.intersection(*({i for i, r in enumerate(rows[0]["cloze_ranks"]) if r is not None} for rows in every_run))
    )
    for row in (row for rows in every_run for row in rows):
        row.update(cloze_accuracy(row["cloze_ranks"], answerable))
    lines = [
        f"| arm | seeds | steps | s/step | tokens | held-out MLM acc | cloze top-1 ({len(answerable):,}) "
        f"| cloze top-5 | probes top-1 / top-3 (of 20) | held-out NSP/SOP acc |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    curves = {
        key: [f"| arm | median {name} at each checkpoint (calibrated minutes: value) |", "|---|---|"]
        for key, name in (("mlm_acc", "held-out MLM accuracy"), ("cloze_top1", "cloze top-1"))
    }
    fig, (ax_acc, ax_cloze) = subplots(1, 2, figsize=(13, 4.5))
    for arm in arms:
        runs = scores.get(arm)
        if not runs:
            continue
        calibration = calibration_of(out, arm)
        lasts = [rows[-1] for rows in runs]
        tokens = lasts[0]["step"] * calibration["tokens_per_step"]
        figure = {key: [last[key] for last in lasts] for key in ("mlm_acc", "cloze_top1", "cloze_top5")}
        probes = f"{spread([r['probes_top1'] for r in lasts], 0)} / {spread([r['probes_top3'] for r in lasts], 0)}"
        pair = spread([r["pair_acc"] for r in lasts]) if "pair_acc" in lasts[0] else "–"
        lines.append(
            f"| {arm} | {len(runs)} | {lasts[0]['step']:,} | {calibration['seconds_per_step']:.3f} | "
            f"{tokens / 1e6:.1f}M | {spread(figure['mlm_acc'])} | {spread(figure['cloze_top1'])} | "
            f"{spread(figure['cloze_top5'])} | {probes} | {pair} |"
        )
        minutes = [{r["step"]: r["seconds"] / 60 for r in rows} for rows in runs]
        label = arm if len(runs) == 1 else f"{arm} ({len(runs)} seeds)"
        color = None
        for key, ax in (("mlm_acc", ax_acc), ("cloze_top1", ax_cloze)):
            curve = [{r["step"]: r[key] for r in rows} for rows in runs]
            color = draw_band(ax, curve, label, minutes, color=color, marker="o")
            steps, by_step = aligned(curve)
            by_minute = [
                (step * calibration["seconds_per_step"] / 60, statistics.median(v)) for step, v in zip(steps, by_step)
            ]
            curves[key].append(f"| {arm} | " + ", ".join(f"{m:.1f}: {v:.3f}" for m, v in by_minute) + " |")
    ax_acc.set(
        title="Held-out MLM accuracy (valid.txt, 15% masked)", xlabel="training minutes (calibrated)", ylabel="accuracy"
    )
    ax_cloze.set(
        title=f"Whole-word cloze, top-1 ({len(answerable):,} held-out sentences)",
        xlabel="training minutes (calibrated)",
        ylabel="accuracy",
    )
    for ax in (ax_acc, ax_cloze):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, out / "learning.png")
    lines += ["", *curves["mlm_acc"], "", *curves["cloze_top1"]]
    (out / "results.md").write_text(machine_description() + "\n\n" + "\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="../shared/data/gutenberg", help="directory with train.txt and valid.txt")
    parser.add_argument("--out", default="learning")
    parser.add_argument("--budget", default="30m", help="training time per arm: 90s, 30m, 1.5h")
    parser.add_argument("--arms", default="bert,budget", help=f"comma-separated, of: {', '.join(ARMS)}")
    parser.add_argument(
        "--downstream",
        metavar="GLUE_DIR",
        help="then fine-tune each arm's model on SST-2, MRPC and RTE dev against random weights (bertforge score)",
    )
    parser.add_argument(
        "--parallel",
        type=int,
        default=1,
        help="arms trained side by side, one torch thread each (2 on 2 cores: more arms per hour than one at a time "
        "with both threads; calibration stays quiet and 2-threaded, so each arm's step count is unchanged)",
    )
    parser.add_argument(
        "--seeds", type=int, default=1, help="runs per arm, seeds 0..N-1, all for the steps of the arm's calibration"
    )
    parser.add_argument(
        "--relative-to",
        metavar="BASE",
        help="calibrate each new arm as BASE's calibration (calibration/BASE.json, e.g. from an earlier "
        "day) times the two arms' step-cost ratio, measured alternating three times: equal time to BASE's runs",
    )
    parser.add_argument(
        "--report", action="store_true", help="only score finished runs and write the tables and figure"
    )
    parser.add_argument(
        "--last-only",
        action="store_true",
        help="score each run's last checkpoint alone: a screen's table without curves (on 2 cores a checkpoint's "
        "scoring takes about 40 s, ten a run)",
    )
    args = parser.parse_args()
    from bertforge.config import parse_duration

    out, corpus, budget = Path(args.out), Path(args.corpus), parse_duration(args.budget)
    arms = args.arms.split(",")
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise SystemExit(f"unknown arm {unknown[0]!r}; choose from {', '.join(ARMS)}")
    out.mkdir(parents=True, exist_ok=True)
    print(machine_description(), flush=True)
    cloze = cloze_sentences(out, corpus)
    data = {arm: data_dir(out, corpus, ARMS[arm][0]) for arm in [*arms, *filter(None, [args.relative_to])]}
    if not args.report:
        for arm in arms:  # all calibrations first, back to back, while the machine is as quiet as it will be
            calibrate(arm, out, data, base=args.relative_to if arm != args.relative_to else None)

        def train(run: tuple[str, int]) -> None:
            arm, seed = run
            started = time.perf_counter()
            train_arm(arm, seed, out, data[arm], ARMS[arm][1], budget, threads=1 if args.parallel > 1 else 0)
            print(f"{run_dir(out, arm, seed).name}: trained ({(time.perf_counter() - started) / 60:.0f} min wall)")

        runs = [(arm, seed) for seed in range(args.seeds) for arm in arms]  # seed by seed: arms alternate
        with concurrent.futures.ThreadPoolExecutor(args.parallel) as pool:
            list(pool.map(train, runs))  # list(): a run's failure is raised here
    scores = {
        arm: [
            score_run(arm, seed, out, data[arm], cloze, args.last_only)
            for seed in range(args.seeds)
            if (run_dir(out, arm, seed) / "model" / "config.json").is_file()
        ]
        for arm in arms
    }
    report(out, arms, scores)
    print(f"{sum(map(len, scores.values()))} runs scored; {out / 'results.md'}, {out / 'learning.png'}")
    if args.downstream:
        for arm in (arm for arm, runs in scores.items() if runs):
            downstream(out, arm, Path(args.downstream))


def downstream(out: Path, arm: str, glue: Path) -> None:
    """SST-2, MRPC and RTE dev for the arm's model (seed 0's) and from random weights: 3 fine-tuning seeds, the lr
    chosen on dev from {1e-4, 3e-4} (seed 0), dropout 0.1; SST-2 capped at 600 steps (19,200 of its 67k examples)
    to fit a CPU budget. `bertforge score` writes the table to runs/ARM/downstream and resumes like the arms do."""
    tasks = [f"sst2={glue / 'SST-2'}", f"mrpc={glue / 'MRPC'}", f"rte={glue / 'RTE'}"]
    common = ["--seeds", 3, "--from-scratch", "--lrs", "1e-4,3e-4", "--dropout", 0.1, "--quiet"]
    score_dir = out / "runs" / arm / "downstream"
    log = out / "runs" / f"{arm}.downstream.log"
    model = out / "runs" / arm / "model"
    bertforge("score", model, "--tasks", tasks[0], "--max-steps", 600, "--out", score_dir / "sst2", *common, log=log)
    bertforge("score", model, "--tasks", *tasks[1:], "--epochs", 3, "--out", score_dir / "pairs", *common, log=log)
    for table in ("sst2", "pairs"):
        print(f"{arm} downstream:\n" + (score_dir / table / "results.md").read_text(), flush=True)


if __name__ == "__main__":
    main()
