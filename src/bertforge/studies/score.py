"""`bertforge score`: how good is a pre-trained model downstream? Fine-tune it on tasks, over seeds, against
the same architecture from random weights, and tabulate median and range.

    bertforge score runs/mini --tasks sst2=glue/SST-2 mrpc=glue/MRPC ner=ner/wnut17 squad=squad --seeds 3 --from-scratch

A task is NAME=PATH. Known names find their files and columns in a directory:
GLUE's sst2, mrpc, rte, cola, stsb; ner (CoNLL files, or `datasets` tables, whose
names hold "train" and "dev" or "validation"); squad (SQuAD v1.1 or v2.0 JSON files,
or `datasets` tables, named the same way); swag (its
train.csv and val.csv); and three tasks without a dev file, which hold out a
share of the training examples as dev: mr and subj (a directory with a file per
class) and trec (TREC-6: train.txt's coarse labels). Any other name describes
its own files:
NAME=TRAIN[,DEV]:task=KIND[,text=COL,label=COL,pair=COL,label_until=SEP,choices=COL+COL,labels=COL+COL,
separator=SEP,names=NAME+NAME,tune=yes]; without DEV, a classification, multi-label, regression or
sentence-similarity task holds dev out of TRAIN, and without text and label, TRAIN is a directory of classes or a
file of label-first lines. A sentence-similarity task names text=COL and pair=COL, and label=COL for scores. A
multi-label task's label=COL holds the labels split at separator (default ","), or labels=COL+COL names a 0/1
column per label. A tagging table's text=COL and label=COL are its lists of words and tags. names=NAME+NAME says
what labels stored as numbers stand for (--label-names). metric=NAME is the score that picks the lr and leads
the table (metric=accuracy for part-of-speech tags, whose chunk F1 means nothing). tune=yes fits decision
thresholds on dev (--tune-thresholds) for a multi-label task, or for squad with unanswerable questions
(squad=DIR:tune=yes), and scores by the tuned metric: at 0.5 a weak model names no rare label, so both arms
would score 0.
Each fine-tuning run is a directory OUT/TASK/ARM/lr_LR/seed_S with its summary;
a finished one is skipped, so an interrupted score resumes. With several --lrs,
seed 0 of each picks the lr (on dev) that the other seeds then use.
"""

from __future__ import annotations

import csv
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..display import markdown_table
from ..errors import UserError
from ..fileio import check_not_inputs, write_json
from ..formats.spreadsheets import split_sheet
from ..plots import save_figure, subplots
from ..tasks.classification import Columns
from ..tasks.config import FinetuneConfig
from ..tasks.finetune import finetune
from ..tasks.multiple_choice import ChoiceColumns
from ..tasks.registry import (
    CLASSIFICATION,
    MULTIPLE_CHOICE,
    QUESTION_ANSWERING,
    REGRESSION,
    TAGGING,
    TASKS,
    ColumnNames,
    MissingColumns,
    TaskRecord,
    held_out_tasks,
    listed,
    threshold_tasks,
)
from .replicates import median_range, paired, separated

# name: (task, train file, dev file, columns), the files inside the task's directory. Without a dev file, dev is held
# out of the training data, which may be the directory itself (".": a directory of classes).
IN_A_DIRECTORY = {
    "sst2": (CLASSIFICATION, "train.tsv", "dev.tsv", Columns("sentence", "label")),
    "mrpc": (CLASSIFICATION, "train.tsv", "dev.tsv", Columns("#1 String", "Quality", "#2 String")),
    "rte": (CLASSIFICATION, "train.tsv", "dev.tsv", Columns("sentence1", "label", "sentence2")),
    # CoLA is headerless: source, label, original label, sentence; judged by Matthews' correlation, as GLUE does
    "cola": (CLASSIFICATION, "train.tsv", "dev.tsv", Columns("3", "1")),
    "stsb": (REGRESSION, "train.tsv", "dev.tsv", Columns("sentence1", "score", "sentence2")),
    # SWAG's own files: the first sentence, then sent2 + each of four endings
    "swag": (
        MULTIPLE_CHOICE,
        "train.csv",
        "val.csv",
        ChoiceColumns("sent1", [f"ending{i}" for i in range(4)], "label", "sent2"),
    ),
    "mr": (CLASSIFICATION, ".", None, Columns()),  # sentence polarity: rt-polarity.pos, .neg
    "subj": (CLASSIFICATION, ".", None, Columns()),  # subjectivity: plot.tok.gt9.5000, quote...
    # question type: "NUM:dist How far ..." -> NUM (TREC-6)
    "trec": (CLASSIFICATION, "train.txt", None, Columns(label_until=":")),
}
METRIC_OF = {"cola": "mcc"}  # where GLUE leads with another score than the task's own
# Known names whose files are found by their names in a directory: "train" and "dev" (or "validation")
FOUND_BY_NAME = {"ner": TAGGING, "squad": QUESTION_ANSWERING}
SPEC_OPTIONS = {"text": "text=COL", "label": "label=COL", "pair": "pair=COL", "choices": "choices=COL+COL+..."}
ARMS = ("pre-trained", "from scratch")


@dataclass
class TaskSpec:
    name: str
    kind: str
    train: Path
    dev: Path | None  # None: held out of train
    columns: Any  # what the task reads, built by its record from the names given
    metric: str
    tune_thresholds: bool = False


def parse_task(spec: str) -> TaskSpec:
    """NAME=PATH for a known task, or NAME=TRAIN[,DEV][:task=...,text=...,label=...,pair=...,label_until=...]."""
    name, _, rest = spec.partition("=")
    if not rest:
        raise UserError(f"--tasks {spec!r}: give NAME=PATH, like sst2=glue/SST-2")
    paths, _, options = rest.partition(":")
    values = dict(option.split("=", 1) for option in options.split(",") if "=" in option)
    tune = _tune_option(spec, values)
    known = name in IN_A_DIRECTORY or (name in FOUND_BY_NAME and "task" not in values)
    if known and set(values) - {"tune"}:
        raise UserError(f"--tasks {spec!r}: {name} is a known task, whose files and columns are known: give {name}=DIR")
    if name in IN_A_DIRECTORY:
        record, train, dev, columns = IN_A_DIRECTORY[name]
        _check_tunable(spec, record, tune)
        metric = METRIC_OF.get(name) or record.metric(columns, tune)
        directory = Path(paths)
        if dev is None:  # the training data may be a directory of classes
            return TaskSpec(name, record.name, _present(directory / train), None, columns, metric)
        return TaskSpec(name, record.name, _existing(directory / train), _existing(directory / dev), columns, metric)
    if known:
        record = FOUND_BY_NAME[name]
        _check_tunable(spec, record, tune)
        train, dev = _find_split_files(Path(paths)) if "," not in paths else map(Path, paths.split(",", 1))
        return TaskSpec(name, record.name, _existing(train), _existing(dev), None, record.metric(None, tune), tune)
    kind = values.get("task", CLASSIFICATION.name)
    record = TASKS.get(kind) if kind in TASKS else None
    train, _, dev = paths.partition(",")
    if record is None or (record.dev_required and not dev):
        raise UserError(
            f"--tasks {spec!r}: a task of your own is NAME=TRAIN[,DEV]:task=KIND[,text=COL,label=COL,pair=COL] "
            f"with KIND one of {', '.join(TASKS)}; only {listed(held_out_tasks())} hold out dev from TRAIN"
        )
    _check_tunable(spec, record, tune)
    names = ColumnNames(
        values.get("text"),
        values.get("label"),
        values.get("pair"),
        tuple(values["choices"].split("+")) if "choices" in values else (),
        values.get("label_until"),
        values.get("separator", ","),
        tuple(values["labels"].split("+")) if "labels" in values else (),
        tuple(values["names"].split("+")) if "names" in values else (),
    )
    try:
        columns = record.columns(names)
    except MissingColumns as e:
        raise UserError(
            f"--tasks {spec!r}: {record.name} needs {', '.join(SPEC_OPTIONS[n] for n in e.needed)}"
        ) from None
    except UserError as e:
        raise UserError(f"--tasks {spec!r}: {e}") from None
    metric = values.get("metric") or record.metric(columns, tune)
    if not metric:  # a task of your own registered without its main metric
        raise UserError(f"--tasks {spec!r}: name the dev score that picks the best epoch: metric=NAME")
    return TaskSpec(
        name, record.name, _present(Path(train)), _existing(Path(dev)) if dev else None, columns, metric, tune
    )


def _tune_option(spec: str, values: dict[str, str]) -> bool:
    answer = values.get("tune", "no")
    if answer not in ("yes", "no"):
        raise UserError(f"--tasks {spec!r}: tune is yes or no, not {answer!r}")
    return answer == "yes"


def _check_tunable(spec: str, record: TaskRecord, tune: bool) -> None:
    """Refused here, before any task has run, rather than when this task's turn comes."""
    if tune and not record.thresholds:
        raise UserError(
            f"--tasks {spec!r}: tune=yes fits thresholds of {' or '.join(threshold_tasks())}, not {record.name}"
        )


def _existing(path: Path) -> Path:
    """A file, or a workbook's sheet (reviews.xlsx#test)."""
    if not split_sheet(path)[0].is_file():
        raise UserError(f"{path}: no such file")
    return path


def _present(path: Path) -> Path:
    """A file, a workbook's sheet, or a directory of classes."""
    if not split_sheet(path)[0].exists():
        raise UserError(f"{path}: no such file or directory")
    return path


def _find_split_files(directory: Path) -> tuple[Path, Path]:
    """The files in `directory` whose names hold "train" and "dev" (WNUT-17: wnut17train.conll, emerging.dev.conll),
    or "validation" for dev (`datasets`' split names: train-00000-of-00001.parquet, validation-...)."""
    if not directory.is_dir():
        raise UserError(f"{directory}: no such directory")
    files = sorted(p for p in directory.iterdir() if p.is_file())
    found = [
        next((p for p in files if any(name in p.name.lower() for name in split)), None)
        for split in (("train",), ("dev", "validation"))
    ]
    if None in found:
        raise UserError(f"{directory}: need one file with 'train' and one with 'dev' (or 'validation') in its name")
    return found[0], found[1]


def score(
    model: str | Path,
    tasks: list[TaskSpec],
    out: str | Path,
    cfg: FinetuneConfig,
    seeds: int = 3,
    lrs: list[float] | None = None,
    from_scratch: bool = False,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Fine-tune every task, arm and seed (resumably); returns one row per task, arm and metric."""
    out = Path(out)
    check_not_inputs({"--out": out}, {"MODEL": model, "--tasks": [path for t in tasks for path in (t.train, t.dev)]})
    arms = ARMS if from_scratch else ARMS[:1]
    lrs = lrs or [cfg.lr]
    rows = []
    glue_main: dict[str, list[list[float]]] = {arm: [] for arm in arms}  # arm -> per task, the main metric by seed
    for task in tasks:
        for arm in arms:
            runs = _run_arm(model, task, arm, out / task.name / arm.replace(" ", "_"), cfg, seeds, lrs, progress)
            minutes = statistics.median(r["seconds"] for r in runs) / 60
            for metric in runs[0]["best"]:
                if metric.startswith("dev_"):
                    values = [r["best"][metric] for r in runs]
                    main = metric == f"dev_{task.metric}"
                    rows.append(_row(task.name, arm, metric.removeprefix("dev_"), values, runs[0]["lr"], minutes, main))
            if task.kind in (CLASSIFICATION.name, REGRESSION.name):
                glue_main[arm].append([r["best"][f"dev_{task.metric}"] for r in runs])
    for arm, per_task in glue_main.items():
        if len(per_task) > 1:  # GLUE's summary: per seed, the mean over tasks of their main metrics
            by_seed = [statistics.mean(values) for values in zip(*per_task)]
            rows.append(_row("average", arm, "mean of main metrics", by_seed, None, None, True))
    _add_gains(rows)
    write_results(out, rows)
    return rows


def _row(task: str, arm: str, metric: str, values: list[float], lr, minutes, main: bool) -> dict[str, Any]:
    """One table row: the median and range over seeds, and each seed's value (seed 0 first)."""
    return {
        "task": task,
        "arm": arm,
        "metric": metric,
        "lr": lr,
        **median_range(values),
        "by_seed": list(values),
        "minutes": minutes,
        "main": main,
    }


def _run_arm(
    model, task: TaskSpec, arm: str, directory: Path, cfg: FinetuneConfig, seeds: int, lrs: list[float], progress: bool
) -> list[dict[str, Any]]:
    """Seed 0 at every lr, the best lr (dev main metric) for the remaining seeds."""

    def run(lr: float, seed: int) -> dict[str, Any]:
        run_dir = directory / f"lr_{lr:g}" / f"seed_{seed}"
        if not (run_dir / "summary.json").is_file():
            run_cfg = FinetuneConfig.from_dict(
                {
                    **cfg.to_dict(),
                    "lr": lr,
                    "seed": seed,
                    "from_scratch": arm == "from scratch",
                    "tune_thresholds": task.tune_thresholds,
                }
            )
            # resume: a score run stopped mid-seed goes on from that seed's latest checkpoint
            finetune(model, task.kind, task.train, task.dev, run_dir, run_cfg, task.columns, progress, resume=True)
        last_epoch = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()[-1]
        return {
            **json.loads((run_dir / "summary.json").read_text(encoding="utf-8")),
            "lr": lr,
            "seconds": json.loads(last_epoch)["elapsed"],  # training and dev evaluation, all epochs
        }

    first = [run(lr, 0) for lr in lrs]
    known = [name.removeprefix("dev_") for name in first[0]["best"] if name.startswith("dev_")]
    if task.metric not in known:
        raise UserError(f"--tasks {task.name}: metric={task.metric} is not one of its scores: {', '.join(known)}")
    best = max(first, key=lambda r: r["best"][f"dev_{task.metric}"])
    return [best] + [run(best["lr"], seed) for seed in range(1, seeds)]


def _add_gains(rows: list[dict[str, Any]]) -> None:
    """Each pre-trained row's median minus the from-scratch median of the same task and metric, whether the two
    arms' seed ranges are apart (a gain inside the seeds' spread is not a result), and in how many seeds it is
    higher than the from-scratch run of the same seed (the same head's start and batches)."""
    scratch = {(r["task"], r["metric"]): r for r in rows if r["arm"] == "from scratch"}
    for r in rows:
        if r["arm"] == "pre-trained" and (r["task"], r["metric"]) in scratch:
            baseline = scratch[(r["task"], r["metric"])]
            r["gain"] = r["median"] - baseline["median"]
            r["apart"] = separated([baseline["min"], baseline["max"]], [r["min"], r["max"]])
            pairs = paired(dict(enumerate(baseline["by_seed"])), dict(enumerate(r["by_seed"])))
            r["higher_in"] = f"{pairs['higher']} of {pairs['pairs']}" if pairs else None


def write_results(out: Path, rows: list[dict[str, Any]]) -> None:
    """results.json, results.csv, results.md (main metrics first) and results.png."""
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "results.json", rows)
    columns = ["task", "arm", "metric", "lr", "median", "min", "max", "seeds", "gain", "apart", "higher_in", "minutes"]
    with open(out / "results.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    shown = [
        {
            "task": r["task"],
            "arm": r["arm"],
            "metric": r["metric"] + (" (main)" if r["main"] else ""),
            "median (min–max)": f"{r['median']:.4f} ({r['min']:.4f}–{r['max']:.4f})",
            "seeds": r["seeds"],
            "lr": r["lr"],
            "gain over from scratch": f"{r['gain']:+.4f}" if "gain" in r else None,
            "seed ranges apart": r.get("apart"),
            "higher, seed for seed": r.get("higher_in"),
            "minutes per run": None if r["minutes"] is None else f"{r['minutes']:.1f}",
        }
        for r in sorted(rows, key=lambda r: (not r["main"], r["task"] == "average", r["task"], r["metric"], r["arm"]))
    ]
    (out / "results.md").write_text(markdown_table(shown, list(shown[0])) + "\n", encoding="utf-8")
    plot_scores(out / "results.png", [r for r in rows if r["main"]])


def plot_scores(path: Path, rows: list[dict[str, Any]]):
    """The main metric per task: a bar per arm at the median, the whiskers spanning min to max over seeds."""
    tasks = sorted({r["task"] for r in rows})
    arms = [a for a in ARMS if any(r["arm"] == a for r in rows)]
    fig, ax = subplots(figsize=(max(5, 1.8 * len(tasks)), 4))
    width = 0.8 / len(arms)
    for k, arm in enumerate(arms):
        for i, task in enumerate(tasks):
            r = next((r for r in rows if r["task"] == task and r["arm"] == arm), None)
            if r is None:
                continue
            x = i + (k - (len(arms) - 1) / 2) * width
            ax.bar(x, r["median"], width, color=f"C{k}", label=arm if i == 0 else None)
            ax.errorbar(
                x, r["median"], yerr=[[r["median"] - r["min"]], [r["max"] - r["median"]]], color="black", capsize=3
            )
    ax.set_xticks(range(len(tasks)))
    ax.set_xticklabels([f"{t}\n({next(r['metric'] for r in rows if r['task'] == t)})" for t in tasks])
    ax.set(ylabel="dev score (median, min–max over seeds)", title="Downstream: pre-trained against from scratch")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)
