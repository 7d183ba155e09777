"""Memory of a SQuAD dev pass: how much a process grows while `answer_questions` reads N dev questions, with the
freed heap handed back to the system after each batch (what bertforge does) and without.

    python benchmarks/bench_qa_memory.py --model MODEL_DIR --dev ../shared/data/squad/dev.json --questions 1000

MODEL_DIR is any bertforge or transformers model directory with its tokenizer (a pre-trained one gets a fresh QA
head). Each arm runs in its own process, alternating, because resident memory is per process; the figure is the
growth of VmRSS across the pass, and its time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine_description, resident_mb  # noqa: E402


def one_pass(model_dir: str, dev: str, questions: int, precision: str, release: bool) -> dict:
    import bertforge.tasks.qa as qa
    from bertforge.engine.runtime import MixedPrecision
    from bertforge.model.heads import BertForQuestionAnswering
    from bertforge.modelfiles.directory import load_model_and_tokenizer

    if not release:
        qa.release_freed_memory = lambda: None
    _, model, tokenizer = load_model_and_tokenizer(model_dir, BertForQuestionAnswering, False)
    items = [(q.question, q.context) for q in qa.read_squad(dev, training=False)[:questions]]
    windowing = qa.windowing_tokenizer(tokenizer, 256, 96)
    before, started = resident_mb(), time.perf_counter()
    qa.answer_questions(model, windowing, items, MixedPrecision("cpu", precision), 30)
    return {"growth_mb": resident_mb() - before, "seconds": time.perf_counter() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--dev", default="../shared/data/squad/dev.json")
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--precision", default="bf16", choices=["fp32", "bf16"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--arm", choices=["release", "keep"], help=argparse.SUPPRESS)  # one pass, in a child
    args = parser.parse_args()
    if args.arm:
        print(json.dumps(one_pass(args.model, args.dev, args.questions, args.precision, args.arm == "release")))
        return
    print(machine_description())
    print(f"{args.questions} SQuAD dev questions, windows of 256 (stride 96), batches of 32, {args.precision}")
    results: dict[str, list[dict]] = {"release": [], "keep": []}
    for _ in range(args.rounds):
        for arm in results:
            child = [sys.executable, __file__, "--arm", arm, "--model", args.model, "--dev", args.dev]
            child += ["--questions", str(args.questions), "--precision", args.precision]
            done = subprocess.run(child, capture_output=True, text=True, check=True)
            results[arm].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print("| heap after each batch | RSS growth over the pass, MB | seconds |")
    print("|---|---:|---:|")
    for arm, label in (("release", "handed back (bertforge)"), ("keep", "kept by glibc")):
        growth = max(r["growth_mb"] for r in results[arm])
        seconds = min(r["seconds"] for r in results[arm])
        print(f"| {label} | {growth:,} | {seconds:.1f} |")


if __name__ == "__main__":
    main()
