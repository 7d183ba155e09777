"""What activation checkpointing (`--activation-checkpointing`) buys and costs a training step, against `transformers`'
own (`gradient_checkpointing_enable`), at a length where activations are most of a step's memory.

    python benchmarks/bench_activation_memory.py --preset small --seq-len 512 --batch-size 8 --rounds 2

Each arm runs in its own process (peak RSS is a process's high-water mark), the arms alternating round by round:
bertforge and `transformers`, each keeping every layer's activations or recomputing them in the backward pass.
A step is bench_train.py's: forward + backward + clip + AdamW on the same batches, fp32, glibc's default allocator
for both libraries (so a freed block goes back to the OS, and the high-water mark is what was live at once).
"Step MB" is the peak less the high-water mark before the first step (torch, the weights and the batches): what
the steps added, mostly activations, gradients and AdamW's two moments.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import VOCAB, Contender, hf_loss, hf_model, ours, race  # noqa: E402

from bertforge import ModelConfig  # noqa: E402
from bertforge.model.bert import set_activation_checkpointing  # noqa: E402

from common import gutenberg_batches, machine_description, synthetic_batches  # noqa: E402

LIBRARIES, ACTIVATIONS = ("bertforge", "transformers"), ("kept", "recomputed")


def run_arm(args) -> None:
    """One arm in this process: print its tokens/s and peak RSS as JSON."""
    with tempfile.TemporaryDirectory() as scratch:
        batches = gutenberg_batches(Path(args.data), Path(scratch), args.batch_size, args.seq_len, n_batches=4)
    if batches is None:
        batches = synthetic_batches(args.batch_size, args.seq_len, VOCAB, n_batches=4)
    dropout = {"hidden_dropout": args.dropout, "attention_dropout": args.dropout}
    config = ModelConfig.preset(args.preset, vocab_size=VOCAB, max_position_embeddings=args.seq_len, **dropout)
    recompute = args.activations == "recomputed"
    if args.library == "bertforge":
        contender = ours(config, "fp32", "cpu")
        set_activation_checkpointing(contender.model, recompute)
    else:
        model = hf_model(config)
        if recompute:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        contender = Contender("transformers", model, hf_loss, "fp32", "cpu")
    before_mb = peak_rss_mb()
    race([contender], batches, args.warmup, args.steps)
    peak_mb = peak_rss_mb()
    print(
        json.dumps(
            {"tokens_per_s": contender.tokens_per_second(), "peak_rss_mb": peak_mb, "step_mb": peak_mb - before_mb}
        )
    )


def peak_rss_mb() -> float:
    """This process's high-water mark of resident memory so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="small")
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--data", default="../shared/data/gutenberg", help="Gutenberg directory (synthetic if absent)")
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2, help="each arm runs once per round, in alternating order")
    parser.add_argument("--library", choices=LIBRARIES, help=argparse.SUPPRESS)  # one arm, in its own process
    parser.add_argument("--activations", choices=ACTIVATIONS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.library:
        run_arm(args)
        return
    print(machine_description())
    arms = [(library, activations) for activations in ACTIVATIONS for library in LIBRARIES]
    results: dict[tuple[str, str], list[dict]] = {arm: [] for arm in arms}
    for round_ in range(args.rounds):
        for library, activations in arms if round_ % 2 == 0 else arms[::-1]:
            command = [sys.executable, __file__, "--library", library, "--activations", activations]
            command += ["--preset", args.preset, "--seq-len", str(args.seq_len), "--batch-size", str(args.batch_size)]
            command += ["--data", args.data, "--dropout", str(args.dropout)]
            command += ["--warmup", str(args.warmup), "--steps", str(args.steps)]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            results[library, activations].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"round {round_ + 1}: {library}, {activations}: {results[library, activations][-1]}", flush=True)
    speed = {arm: statistics.median(r["tokens_per_s"] for r in runs) for arm, runs in results.items()}
    peak = {arm: max(r["peak_rss_mb"] for r in runs) for arm, runs in results.items()}
    step = {arm: max(r["step_mb"] for r in runs) for arm, runs in results.items()}
    print(
        f"\n{args.preset}, {args.batch_size} × {args.seq_len} tokens, dropout {args.dropout}, fp32; tokens/s the "
        f"median of {args.rounds} processes per arm, peak RSS the highest\n"
    )
    print(
        "| library | activations | tokens/s | vs own kept | vs transformers kept | peak RSS MB | step MB "
        "| step MB vs own kept |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for library, activations in arms:
        arm, kept = (library, activations), (library, "kept")
        print(
            f"| {library} | {activations} | {speed[arm]:,.0f} | {speed[arm] / speed[kept]:.2f}× "
            f"| {speed[arm] / speed['transformers', 'kept']:.2f}× | {peak[arm]:,.0f} | {step[arm]:,.0f} "
            f"| {step[arm] / step[kept]:.2f}× |"
        )
    print(f"(torch {torch.__version__})")


if __name__ == "__main__":
    main()
