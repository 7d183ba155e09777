"""What `runtime.keep_freed_memory` buys a training step: glibc's default allocator against the trainer's setting.

    python benchmarks/bench_allocator.py --preset mini --rounds 2

glibc maps every block above 32 MB fresh from the OS and unmaps it when freed,
so by default each step page-faults its largest tensors back in. The trainer
asks glibc (mallopt) to serve big blocks from its heap and keep what is freed.
That is a per-process setting, so each arm runs in its own process, the arms
alternating round by round: bertforge and `transformers` (which a user of it
would run with glibc's default), each with and without the setting.
A step is bench_train.py's: forward + backward + clip + AdamW, the same
batches, in each precision of --precision (fp32,bf16 races bf16 autocast arms
beside the fp32 ones: "bertforge, kept, bf16" against "bertforge, kept, fp32" is
the trainer's bf16 speed-up as it runs). Peak RSS is each process's high-water
mark. MFU is bench_train.py's (PaLM count over the matmul speed of the arm's
precision sampled between the steps, in each arm's own process), so
"bertforge, kept" is the trainer's MFU as it runs.
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
from bench_train import VOCAB, Contender, MatmulProbe, hf_loss, hf_model, mask_fraction, ours, race  # noqa: E402

from bertforge import ModelConfig  # noqa: E402
from bertforge.engine.runtime import keep_freed_memory  # noqa: E402
from bertforge.training.flops import training_flops_per_token  # noqa: E402

from common import gutenberg_batches, machine_description, synthetic_batches  # noqa: E402

BATCH_SIZE, SEQ_LEN = 32, 128  # the race's batches; the FLOP count per token needs the length
LIBRARIES, ALLOCATORS = ("bertforge", "transformers"), ("glibc default", "kept")


def run_arm(args) -> None:
    """One arm in this process: print its tokens/s, MFU and peak RSS as JSON."""
    if args.allocator == "kept":
        keep_freed_memory()
    with tempfile.TemporaryDirectory() as scratch:
        batches = gutenberg_batches(Path(args.data), Path(scratch), BATCH_SIZE, SEQ_LEN, n_batches=8)
    if batches is None:
        batches = synthetic_batches(BATCH_SIZE, SEQ_LEN, VOCAB, n_batches=8)
    dropout = {"hidden_dropout": args.dropout, "attention_dropout": args.dropout}
    config = ModelConfig.preset(args.preset, vocab_size=VOCAB, **dropout)
    if args.library == "bertforge":
        contender = ours(config, args.precision, "cpu")
    else:
        contender = Contender("transformers", hf_model(config), hf_loss, args.precision, "cpu")
    probe = MatmulProbe("cpu", args.precision)
    race([contender], batches, args.warmup, args.steps, (probe,))
    tokens_per_s, matmul = contender.tokens_per_second(), probe.flops_per_second()
    mfu = training_flops_per_token(config, SEQ_LEN, mask_fraction(batches)) * tokens_per_s / matmul
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"tokens_per_s": tokens_per_s, "mfu": mfu, "matmul_gflops": matmul / 1e9, "peak_rss_mb": peak_mb}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="mini")
    parser.add_argument("--data", default="../shared/data/gutenberg", help="Gutenberg directory (synthetic if absent)")
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2, help="each arm runs once per round, in alternating order")
    parser.add_argument("--precision", default="fp32", help="fp32, bf16, or both: fp32,bf16 (autocast, as pretrain)")
    parser.add_argument("--library", choices=["bertforge", "transformers"], help=argparse.SUPPRESS)  # one arm
    parser.add_argument("--allocator", choices=["glibc default", "kept"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.library:
        run_arm(args)
        return
    print(machine_description())
    precisions = args.precision.split(",")
    arms = [(lib, alloc, prec) for prec in precisions for alloc in ALLOCATORS for lib in LIBRARIES]
    results: dict[tuple[str, str, str], list[dict]] = {arm: [] for arm in arms}
    for round_ in range(args.rounds):
        for library, allocator, precision in arms if round_ % 2 == 0 else arms[::-1]:
            command = [sys.executable, __file__, "--library", library, "--allocator", allocator]
            command += ["--preset", args.preset, "--data", args.data, "--dropout", str(args.dropout)]
            command += ["--warmup", str(args.warmup), "--steps", str(args.steps), "--precision", precision]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            arm = library, allocator, precision
            results[arm].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"round {round_ + 1}: {', '.join(arm)}: {results[arm][-1]}", flush=True)
    speed = {arm: statistics.median(r["tokens_per_s"] for r in runs) for arm, runs in results.items()}
    reference = speed["transformers", "glibc default", precisions[0]]
    print(f"\n{args.preset}, dropout {args.dropout}, median of {args.rounds} processes per arm\n")
    print(
        f"| library | allocator | precision | tokens/s | vs transformers, glibc default, {precisions[0]} "
        f"| vs own default | vs own {precisions[0]} | MFU | peak RSS MB |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for library, allocator, precision in arms:
        runs = results[library, allocator, precision]
        tokens = speed[library, allocator, precision]
        own_default = speed[library, "glibc default", precision]
        own_first = speed[library, allocator, precisions[0]]
        rss = max(r["peak_rss_mb"] for r in runs)
        mfu = statistics.median(r["mfu"] for r in runs)
        print(
            f"| {library} | {allocator} | {precision} | {tokens:,.0f} | {tokens / reference:.2f}× "
            f"| {tokens / own_default:.2f}× | {tokens / own_first:.2f}× | {mfu:.1%} | {rss:,.0f} |"
        )
    for precision in precisions:
        speeds = [r["matmul_gflops"] for (*_, p), runs in results.items() if p == precision for r in runs]
        print(f"({precision} matmul during each process's steps: {min(speeds):,.0f} to {max(speeds):,.0f} GFLOP/s)")
    print(f"(torch {torch.__version__})")


if __name__ == "__main__":
    main()
