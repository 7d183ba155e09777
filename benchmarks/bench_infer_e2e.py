"""`classify --input` and `embed --input` on 10,000 sentences, whole processes, against `transformers`' pipelines.

    python benchmarks/bench_infer_e2e.py --rounds 2

Both sides start from the same directory (a mini sequence classifier with random weights, its WordPiece
tokenizer trained on the sentences; speed does not depend on the weights) and do the same work: read a file of
sentences, run the model, write the answers. `transformers` runs the pipeline its documentation teaches for each
job, batch 64: `pipeline("text-classification")` writing a CSV of labels and scores, and
`pipeline("feature-extraction")` keeping each sentence's [CLS] vector (what `embed` returns by default) in a
.npy. bertforge runs its commands as a user types them; `embed` also with `--precision auto` (bf16 on a CPU
measured fast at it). The contenders alternate, round after round, each a fresh process: import, load, read,
compute and write are all in the time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_infer import sentences  # noqa: E402

from common import machine_description  # noqa: E402

# What a `transformers` user writes for each job: the pipeline over the file's lines, the answers saved.
PIPELINE = r"""
import csv, sys
import numpy as np
from transformers import pipeline
job, model_dir, texts_path, out = sys.argv[1:5]
texts = open(texts_path, encoding="utf-8").read().splitlines()
if job == "classify":
    run = pipeline("text-classification", model=model_dir, device=-1)
    with open(out, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label", "score"])
        for text, answer in zip(texts, run(texts, batch_size=64, truncation=True)):
            writer.writerow([text, answer["label"], answer["score"]])
else:
    run = pipeline("feature-extraction", model=model_dir, device=-1)
    vectors = [np.asarray(states)[0, 0] for states in run(texts, batch_size=64, truncation=True)]
    np.save(out, np.stack(vectors))
"""


def make_model(texts: list[str], where: Path) -> Path:
    """A mini sequence classifier (two labels) with random weights and a tokenizer trained on `texts`."""
    import torch

    from bertforge import ModelConfig
    from bertforge.model.heads import BertForSequenceClassification
    from bertforge.modelfiles.directory import save_model
    from bertforge.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(texts, vocab_size=8192)
    torch.manual_seed(0)
    model = BertForSequenceClassification(ModelConfig.preset("mini", vocab_size=tokenizer.get_vocab_size()), 2)
    labels = {"id2label": {"0": "negative", "1": "positive"}, "label2id": {"negative": 0, "positive": 1}}
    save_model(model, where, tokenizer, {**labels, "problem_type": "single_label_classification"})
    return where


def run(command: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{command[:4]} failed:\n{done.stderr[-2000:]}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", help="also write results here")
    args = parser.parse_args()
    texts = sentences(args.sentences)
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        model = make_model(texts, scratch / "model")
        source = scratch / "texts.txt"
        source.write_text("\n".join(t.replace("\n", " ") for t in texts) + "\n", encoding="utf-8")
        bertforge = [sys.executable, "-m", "bertforge"]
        pipeline = [sys.executable, "-c", PIPELINE]
        jobs = {
            "classify": {
                "bertforge classify": [*bertforge, "classify", model, "--input", source, "--out", scratch / "a.csv"],
                "transformers pipeline": [*pipeline, "classify", model, source, scratch / "b.csv"],
            },
            "embed": {
                "bertforge embed --precision fp32": [
                    *bertforge, "embed", model, "--input", source, "--out", scratch / "a.npy", "--precision", "fp32"
                ],
                "bertforge embed --precision auto": [*bertforge, "embed", model, "--input", source, "--out",
                                                     scratch / "c.npy", "--precision", "auto"],
                "transformers pipeline": [*pipeline, "embed", model, source, scratch / "b.npy"],
            },
        }  # fmt: skip
        times = {job: {name: [] for name in contenders} for job, contenders in jobs.items()}
        for round_ in range(args.rounds):
            for job, contenders in jobs.items():
                for name, command in contenders.items():
                    times[job][name].append(run([str(part) for part in command]))
                    print(f"round {round_ + 1}: {job}: {name} {times[job][name][-1]:.1f} s", file=sys.stderr)
    print(machine_description())
    print(f"{len(texts):,} sentences of the bundled book sample, mini with random weights, {args.rounds} rounds")
    print("\n| job | contender | seconds (median) | sentences/s | vs the pipeline |\n|---|---|---:|---:|---:|")
    rows = []
    for job, contenders in times.items():
        reference = statistics.median(contenders["transformers pipeline"])
        for name, seconds in contenders.items():
            median = statistics.median(seconds)
            rows.append({"job": job, "contender": name, "seconds": seconds, "speedup": reference / median})
            print(f"| {job} | {name} | {median:.1f} | {len(texts) / median:,.0f} | {reference / median:.2f}× |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
