"""Where a pre-training step's time goes, as `pretrain` runs it, and what torch.compile and the blockwise MLM loss
make of it.

    python benchmarks/profile_step.py --data data8192 --recipe budget --preset mini
    python benchmarks/profile_step.py --data data8192 --recipe budget --set vocab_size=8192 --compile --top 25
    python benchmarks/profile_step.py --data data30522 --recipe budget --kept-logits

The step is the trainer's own (`Trainer._step`: forward, backward, clip and AdamW, under the precision
`--precision auto` picks) on batches of a prepared data directory, so the profile is of the settings a run
has: recipe, preset, vocabulary, position scheme. With `--compile` a second trainer, the same model, seed and
batches, runs compiled; with `--kept-logits` one computes the masked-LM loss from the (N, V) logits written out, as
a GPU does, instead of blockwise (model/vocabulary_loss.py). After the warm-up (compiling happens there) the
contenders alternate step by step, so drift in the machine's speed hits all alike. Prints the machine, the median
seconds per step of each, and the ops that took the most time under torch.profiler.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bertforge.config import parse_field
from bertforge.data.directory import read_meta  # noqa: E402
from bertforge.model.config import ModelConfig  # noqa: E402
from bertforge.training.config import TrainConfig, recipe_configs
from bertforge.training.loader import BatchPlan, make_loader  # noqa: E402
from bertforge.training.trainer import Trainer  # noqa: E402

from common import machine_description  # noqa: E402


def overrides(pairs: list[str]) -> tuple[dict, dict]:
    """`name=value` pairs split into ModelConfig and TrainConfig values, each parsed as its flag would be."""
    model, train = {}, {}
    for pair in pairs:
        name, _, text = pair.partition("=")
        cls, values = (ModelConfig, model) if name in ModelConfig.__dataclass_fields__ else (TrainConfig, train)
        values[name] = parse_field(cls, name, text)
    return model, train


def step_seconds(trainer: Trainer, batch: dict) -> float:
    started = time.perf_counter()
    trainer._step([batch])
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="a prepared data directory (bertforge prepare)")
    parser.add_argument("--recipe", default="budget")
    parser.add_argument("--preset", default="mini")
    parser.add_argument("--set", nargs="*", default=[], metavar="NAME=VALUE", help="any config field, as its flag")
    parser.add_argument("--warmup", type=int, default=12, help="steps before timing (compiling happens here)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps of each contender")
    parser.add_argument("--profiled", type=int, default=5, help="steps of each contender under torch.profiler")
    parser.add_argument("--top", type=int, default=20, help="ops shown, by their own time")
    parser.add_argument("--compile", action="store_true", help="race a compiled trainer against the eager one")
    parser.add_argument("--kept-logits", action="store_true", help="race the loss from written-out logits")
    args = parser.parse_args()

    model_values, train_values = overrides(args.set)
    model_values.setdefault("vocab_size", read_meta(args.data)["vocab_size"])
    fixed = {"max_steps": 1_000_000, "eval_every": 0, "save_every": 0}
    model_config, cfg = recipe_configs(args.recipe, args.preset, model_values, {**train_values, **fixed})
    print(machine_description())
    with tempfile.TemporaryDirectory() as scratch:
        contenders = {"eager": Trainer(args.data, Path(scratch) / "eager", model_config, cfg, progress=False)}
        if args.compile:
            compiled = TrainConfig.from_dict({**cfg.to_dict(), "compile": True})
            contenders["compiled"] = Trainer(
                args.data, Path(scratch) / "compiled", model_config, compiled, progress=False
            )
        if args.kept_logits:
            kept = Trainer(args.data, Path(scratch) / "kept", model_config, cfg, progress=False)
            kept.model.forward = functools.partial(kept.model.forward, keep_logits=True)
            contenders["kept logits"] = kept
        first = next(iter(contenders.values()))
        print(f"{args.recipe}, {args.preset}, vocabulary {model_config.vocab_size}, {first.precision.precision}")
        plan = BatchPlan(first.train_data, cfg.batch_size, first.processes, cfg.seed, cfg.batch_size_at, cfg.grad_accum)
        batches = iter(make_loader(plan, first.collator, (0, 0, 0), cfg, first.device))
        for name, trainer in contenders.items():
            trainer.model.train()
            started = time.perf_counter()
            for _ in range(args.warmup):
                trainer._step([next(batches)])
            print(f"{name}: {args.warmup} warm-up steps in {time.perf_counter() - started:.1f} s")
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for _ in range(args.steps):
            batch = next(batches)
            for name, trainer in contenders.items():  # the same batch for each, in turn
                times[name].append(step_seconds(trainer, batch))
        eager = statistics.median(times["eager"])
        for name, seconds in times.items():
            median = statistics.median(seconds)
            print(
                f"{name}: {median:.4f} s/step (median of {args.steps}; {min(seconds):.4f}-{max(seconds):.4f}), "
                f"{eager / median:.2f}x eager"
            )
        for name, trainer in contenders.items():
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
                for _ in range(args.profiled):
                    trainer._step([next(batches)])
            print(f"\n{name}, {args.profiled} steps:")
            print(profile.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.top))


if __name__ == "__main__":
    main()
