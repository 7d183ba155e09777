"""The trainer's MLM accuracy count: argmax against max(-1).indices over the gathered (N, V) bf16 logits.

    python benchmarks/bench_mlm_accuracy.py

Both give the first maximum's index (documented for each), so the count is the same; on CPU argmax took
28 ms of a 120 ms step of the demo's tiny model. Shapes: the demo's books stage (32 x 128 at 30% masking,
rows rounded up to 64, 8,000-token vocabulary padded to 64) and mini (15% masking, 30,522 tokens).
Calls alternate, after 3 warm-up rounds; medians of 30.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine_description  # noqa: E402

SHAPES = {"demo books stage (tiny)": (1216, 8064), "mini": (640, 30528)}


def main() -> None:
    print(machine_description())
    print("\n| shape | rows x columns | argmax ms | max(-1).indices ms | speed-up |\n|---|---|---:|---:|---:|")
    torch.manual_seed(0)
    for name, (rows, columns) in SHAPES.items():
        logits = (3 * torch.randn(rows, columns)).to(torch.bfloat16)  # (N, V)
        targets = torch.randint(0, columns, (rows,))  # (N,)
        ways = {
            "argmax": lambda x=logits, t=targets: (x.argmax(-1) == t).sum(),
            "max": lambda x=logits, t=targets: (x.max(-1).indices == t).sum(),
        }
        assert int(ways["argmax"]()) == int(ways["max"]())
        times: dict[str, list[float]] = {k: [] for k in ways}
        for round_ in range(33):
            for key, way in ways.items():
                start = time.perf_counter()
                way()
                if round_ >= 3:
                    times[key].append(time.perf_counter() - start)
        argmax, fast = (1000 * statistics.median(times[k]) for k in ways)
        print(f"| {name} | {rows} x {columns} | {argmax:.1f} | {fast:.1f} | {argmax / fast:.2f}× |", flush=True)


if __name__ == "__main__":
    main()
