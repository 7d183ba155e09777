"""The MLM head's rows in a few shapes: memory and speed of training steps whose number of masked tokens changes.

    python benchmarks/bench_gather_shapes.py --preset tiny --vocab 8000 --steps 200

bertforge runs the MLM head on the masked positions only, so its row count N
changes with every batch, and a mask-rate schedule (30% -> 15%) moves it
across hundreds of values. Each new N can cost a kernel build (oneDNN) and
leave freed blocks glibc keeps. `BertForPreTraining` rounds N up to a multiple
of `GATHERED_ROWS_MULTIPLE` (64); this compares that with the exact N
(multiple 1) and with `transformers` (the head at every position, one shape).

Batches are random tokens, 32 x 128, masked at a rate falling linearly from
30% to 15% over the run, as `--mask-prob 0.3 --mask-prob-final 0.15` does;
the same batches for every arm. Each arm runs in its own process (resident
memory is per process), arms alternating over `--rounds`. Reported: growth of
VmRSS from the end of the warm-up (10 steps) to the last step, and mean
seconds per step over all steps after the warm-up (kernel builds included, as
a run pays them).
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

ARMS = ("bertforge", "bertforge exact N", "transformers")
WARMUP = 10


def batch(step: int, steps: int, vocab: int, generator):
    import torch

    from bertforge.labels import IGNORE_INDEX

    rate = 0.3 - 0.15 * step / max(steps - 1, 1)
    ids = torch.randint(5, vocab, (32, 128), generator=generator)
    chosen = torch.rand(ids.shape, generator=generator) < rate
    labels = torch.where(chosen, ids, IGNORE_INDEX)
    return ids, labels, torch.randint(0, 2, (32,), generator=generator)


def one_arm(arm: str, preset: str, vocab: int, steps: int, precision: str) -> dict:
    """Train `steps` steps of one arm in this process; its memory growth and seconds per step."""
    import torch
    from bench_train import autocast, hf_model

    import bertforge.model.bert as bertforge_model
    from bertforge import BertForPreTraining, ModelConfig
    from bertforge.model.bert import use_fast_paths

    config = ModelConfig.preset(preset, vocab_size=vocab, hidden_dropout=0.0, attention_dropout=0.0)
    torch.manual_seed(0)
    if arm == "transformers":
        model = hf_model(config)
    else:
        if arm == "bertforge exact N":
            bertforge_model.GATHERED_ROWS_MULTIPLE = 1
        model = BertForPreTraining(config)
        use_fast_paths(model, "cpu", precision)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    generator = torch.Generator().manual_seed(0)
    before = started = 0.0
    for step in range(steps):
        if step == WARMUP:
            before, started = resident_mb(), time.perf_counter()
        ids, labels, pair = batch(step, steps, vocab, generator)
        with autocast(precision):
            if arm == "transformers":
                loss = model(input_ids=ids, labels=labels, next_sentence_label=pair).loss
            else:
                loss = model(ids, torch.zeros_like(ids), None, labels, pair).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return {"growth_mb": resident_mb() - before, "s_per_step": (time.perf_counter() - started) / (steps - WARMUP)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--precisions", default="bf16,fp32")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)  # one arm, in a child process
    parser.add_argument("--precision", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        print(json.dumps(one_arm(args.arm, args.preset, args.vocab, args.steps, args.precision)))
        return
    print(machine_description())
    print(f"{args.preset}, vocabulary {args.vocab}, 32 x 128, masking 30% -> 15% over {args.steps} steps")
    print("\n| precision | arm | RSS growth (MB) | s/step | vs bertforge |\n|---|---|---:|---:|---:|")
    for precision in args.precisions.split(","):
        results: dict[str, list[dict]] = {arm: [] for arm in ARMS}
        for _ in range(args.rounds):
            for arm in ARMS:
                command = [sys.executable, __file__, "--arm", arm, "--precision", precision]
                command += ["--preset", args.preset, "--vocab", str(args.vocab), "--steps", str(args.steps)]
                done = subprocess.run(command, capture_output=True, text=True, check=True)
                results[arm].append(json.loads(done.stdout.strip().splitlines()[-1]))
        ours = sum(r["s_per_step"] for r in results["bertforge"])
        for arm, runs in results.items():
            growth = ", ".join(str(r["growth_mb"]) for r in runs)
            seconds = sum(r["s_per_step"] for r in runs)
            print(f"| {precision} | {arm} | {growth} | {seconds / len(runs):.3f} | {ours / seconds:.2f}× |", flush=True)


if __name__ == "__main__":
    main()
