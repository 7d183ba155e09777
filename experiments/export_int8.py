"""What an int8 export costs: the dev scores of fine-tuned models in PyTorch, exported fp32 and exported int8
(experiments/export.md).

    python experiments/export_int8.py --model MINILM --data ../shared/data --out export --seeds 3

From one pre-trained model (all-MiniLM-L6-v2's directory), each task fine-tuned over --seeds seeds (`finetune`,
the same settings for every seed): GLUE SST-2 (sentence sentiment; --sst2-steps steps of its training file) and
WNUT-17 (entity tags in tweets; 3 epochs). Each fine-tuned model is exported twice (`bertforge export`, fp32 and
--quantize int8), and the three are scored on the task's dev set by the task's own evaluation, the exports served
by ONNX Runtime in the PyTorch model's place (serving/served.py). Resumable: what has finished is kept.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from continued_arms import bertforge  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from common import machine_description  # noqa: E402

TASKS = {  # name -> (task, train, dev, flags)
    "sst2": ("classification", "glue/SST-2/train.tsv", "glue/SST-2/dev.tsv",
             ["--text-column", "sentence", "--label-column", "label", "--epochs", "1"]),
    "wnut17": ("token-classification", "ner/wnut17/wnut17train.conll", "ner/wnut17/emerging.dev.conll",
               ["--epochs", "3"]),
}  # fmt: skip
FINETUNE = ["--lr", "1e-4", "--batch-size", "32", "--device", "cpu", "--precision", "fp32", "--quiet"]


def dev_scores(model: Path, task: str, train: Path, dev: Path, flags: list[str]) -> dict[str, float]:
    """The task's dev scores of the model in `model` (a PyTorch directory or an export), by the task's own
    evaluation: what `finetune` reports."""
    from bertforge.engine.runtime import MixedPrecision
    from bertforge.serving.served import load_served
    from bertforge.tasks.config import FinetuneConfig
    from bertforge.tasks.registry import ColumnNames, task_record
    from bertforge.tokenizer import load_tokenizer

    record = task_record(task)
    names = ColumnNames(text="sentence", label="label") if task == "classification" else ColumnNames()
    built = record.build(load_tokenizer(model), train, dev, 128, FinetuneConfig(), record.columns(names))
    _, loaded, _ = load_served(model, built.model_class, **built.model_kwargs())
    return built.evaluate(loaded, MixedPrecision("cpu", "fp32"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--out", default="export")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--sst2-steps", type=int, default=600)
    args = parser.parse_args()
    data, out = Path(args.data).resolve(), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    header = "| task | metric | PyTorch | export fp32 | export int8 | int8 - PyTorch |"
    lines = [machine_description(), "", f"model: {args.model}", "", header, "|---|---|---|---|---|---|"]
    for name, (task, train, dev, flags) in TASKS.items():
        steps = ["--max-steps", str(args.sst2_steps)] if name == "sst2" else []
        scores: dict[str, list[float]] = {"torch": [], "fp32": [], "int8": []}
        for seed in range(args.seeds):
            tuned = out / f"{name}_s{seed}"
            if not (tuned / "summary.json").is_file():
                files = ["--train", data / train, "--dev", data / dev]
                bertforge("finetune", args.model, "--task", task, *files, *flags, *FINETUNE, *steps, "--seed", seed,
                          "--out", tuned, "--resume", log=out / "log.txt")  # fmt: skip
            record = out / f"{name}_s{seed}.json"
            if not record.is_file():
                found = {}
                for arm, extra in (("fp32", []), ("int8", ["--quantize", "int8"])):
                    exported = out / f"{name}_s{seed}_{arm}"
                    if not (exported / "config.json").is_file():
                        bertforge("export", tuned / "model", "--out", exported, *extra, log=out / "log.txt")
                found["torch"] = dev_scores(tuned / "model", task, data / train, data / dev, flags)
                for arm in ("fp32", "int8"):
                    found[arm] = dev_scores(out / f"{name}_s{seed}_{arm}", task, data / train, data / dev, flags)
                record.write_text(json.dumps(found))
            found = json.loads(record.read_text())
            metric = "accuracy" if task == "classification" else "f1"
            for arm in scores:
                scores[arm].append(found[arm][metric])
        gap = [b - a for a, b in zip(scores["torch"], scores["int8"])]

        def cell(values):
            return f"{statistics.median(values):.4f} ({min(values):.4f}–{max(values):.4f})"

        lines.append(f"| {name} | {metric} | {cell(scores['torch'])} | {cell(scores['fp32'])} | {cell(scores['int8'])} "
                     f"| {statistics.median(gap):+.4f} ({min(gap):+.4f} to {max(gap):+.4f}) |")  # fmt: skip
        (out / "results.md").write_text("\n".join(lines) + "\n")
        print(lines[-1], flush=True)


if __name__ == "__main__":
    main()
