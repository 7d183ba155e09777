"""Weight averaging after the fact: does the mean of a run's last checkpoints know more than its last one?

    python experiments/averaging.py l30/runs/modern-30k l30/runs/modern-30k.seed1 --data l30/data30522 --last 3

RUN is a learning.py run (checkpoints every tenth of its budget, the schedule decaying to zero at the end); DATA
the prepared directory it trained on, whose held-out split is scored exactly as learning.py scores a checkpoint
(the same fixed 15% masks, 50 batches). For k = 1..LAST it averages the weights of the last k tenths (the last
checkpoint alone, then it and the one a tenth before, ...) and prints held-out MLM accuracy and loss: averaging
costs nothing at training time, so any gain would be free.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from bertforge.engine.checkpoint import checkpoint_dirs, checkpoint_step
from bertforge.training.evaluate import evaluate_model

WEIGHTS = "model.safetensors"
RUN_STATE = ("optimizer.pt", "trainer_state.json", "checksums.json")  # a checkpoint's; the averaged model has none


def tenths(run: Path) -> list[Path]:
    """The run's checkpoints a tenth apart, oldest first: the final save replaces a periodic one a few steps
    before it (the budget's steps are rarely a multiple of the interval)."""
    checkpoints = checkpoint_dirs(run)
    steps = [checkpoint_step(c) for c in checkpoints]
    interval = steps[0]
    if len(steps) > 1 and steps[-1] - steps[-2] < interval / 2:
        del checkpoints[-2]
    return checkpoints


def averaged(checkpoints: list[Path], out: Path) -> Path:
    """A model directory at `out`: the last checkpoint's files with the mean of every checkpoint's weights."""
    weights = [load_file(c / WEIGHTS) for c in checkpoints]
    mean = {
        name: torch.stack([w[name].double() for w in weights]).mean(0).to(tensor.dtype)
        for name, tensor in weights[0].items()
    }
    shutil.copytree(checkpoints[-1], out, ignore=shutil.ignore_patterns(*RUN_STATE))
    save_file(mean, out / WEIGHTS, metadata={"format": "pt"})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="learning.py run directories")
    parser.add_argument("--data", required=True, help="the prepared data directory the runs trained on")
    parser.add_argument("--last", type=int, default=3, help="average up to this many of the last tenths")
    args = parser.parse_args()
    torch.manual_seed(0)
    print("| run | checkpoints averaged (steps) | held-out MLM acc | held-out MLM loss |\n|---|---|---:|---:|")
    for run in args.runs:
        checkpoints = tenths(run)
        for k in range(1, args.last + 1):
            chosen = checkpoints[-k:]
            with tempfile.TemporaryDirectory() as scratch:
                model = averaged(chosen, Path(scratch) / "model")
                result = evaluate_model(model, [args.data], max_batches=50, layout="none")
            steps = ", ".join(str(checkpoint_step(c)) for c in chosen)
            print(f"| {run.name} | {steps} | {result['mlm_acc']:.4f} | {result['mlm_loss']:.4f} |", flush=True)


if __name__ == "__main__":
    main()
