"""`prepare` throughput and memory against the raw `tokenizers` ceiling, on Gutenberg.

    python benchmarks/bench_prepare.py --data ../shared/data/gutenberg --sizes 20,80 --workers 2
    python benchmarks/bench_prepare.py --sizes 80 --prepare-flags="--dedupe --min-chars-per-token 2.5"

For each size (MB from the start of train.txt; 80 is the whole file):
- `bertforge prepare` MB/s and peak RSS (of the largest process), in a fresh subprocess;
- the ceiling: `Tokenizer.encode_batch` alone on the same paragraphs, same tokenizer
  (no reading, cleaning, sentence splitting or writing), in its own subprocess.
The tokenizer (30522 WordPiece) is trained once on the first 5 MB and is not timed.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import machine_description

RAW = """
import sys, time
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1] + "/tokenizer.json")
lines = [l for l in open(sys.argv[2], encoding="utf-8").read().splitlines() if l.strip()]
start = time.perf_counter()
for i in range(0, len(lines), 2000):
    tok.encode_batch(lines[i:i + 2000], add_special_tokens=False)
print(time.perf_counter() - start)
"""


def run(command: list[str]) -> tuple[float, float, str]:
    """(seconds, peak RSS in MB, stdout) of a fresh subprocess; GNU time reports the peak of its process tree."""
    start = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "%M", *command], capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - start
    return seconds, int(done.stderr.strip().splitlines()[-1]) / 1024, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="../shared/data/gutenberg")
    parser.add_argument("--sizes", default="20,80", help="MB from the start of train.txt")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--prepare-flags", default="", help="more prepare flags, e.g. the filters: '--dedupe'")
    parser.add_argument("--json")
    args = parser.parse_args()
    print(machine_description(), flush=True)
    if args.prepare_flags:
        print(f"prepare flags: {args.prepare_flags}", flush=True)
    source = Path(args.data) / "train.txt"
    if not source.is_file():
        sys.exit(f"{source} not found: this benchmark needs the shared Gutenberg corpus")
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        text = source.read_bytes()
        (scratch / "sample.txt").write_bytes(text[: 5 * 2**20])
        subprocess.run(
            [
                sys.executable,
                "-m",
                "bertforge",
                "tokenizer",
                "train",
                str(scratch / "sample.txt"),
                "--out",
                str(scratch / "tok"),
                "--vocab-size",
                "30522",
            ],
            check=True,
            capture_output=True,
        )
        print(
            "| corpus | prepare MB/s | raw encode_batch MB/s | share of ceiling | prepare peak RSS |\n"
            "|---|---:|---:|---:|---:|",
            flush=True,
        )
        for size in (int(s) for s in args.sizes.split(",")):
            corpus = scratch / f"corpus_{size}.txt"
            cut = text[: size * 2**20]
            corpus.write_bytes(cut[: cut.rfind(b"\n") + 1])
            megabytes = corpus.stat().st_size / 2**20
            seconds, rss, _ = run(
                [
                    sys.executable,
                    "-m",
                    "bertforge",
                    "prepare",
                    str(corpus),
                    "--tokenizer",
                    str(scratch / "tok"),
                    "--out",
                    str(scratch / f"data_{size}"),
                    "--workers",
                    str(args.workers),
                    *shlex.split(args.prepare_flags),
                ]
            )
            filters = json.loads((scratch / f"data_{size}" / "meta.json").read_text())["filters"]
            _, _, raw_out = run([sys.executable, "-c", RAW, str(scratch / "tok"), str(corpus)])
            raw_seconds = float(raw_out.strip())
            row = {
                "megabytes": megabytes,
                "prepare_mb_per_s": megabytes / seconds,
                "raw_encode_mb_per_s": megabytes / raw_seconds,
                "peak_rss_mb": rss,
                "workers": args.workers,
                "paragraphs_kept": filters["paragraphs_kept"],
                "paragraphs_read": filters["paragraphs_read"],
            }
            row["share_of_ceiling"] = row["prepare_mb_per_s"] / row["raw_encode_mb_per_s"]
            results.append(row)
            print(
                f"| {megabytes:.0f} MB | {row['prepare_mb_per_s']:.2f} | {row['raw_encode_mb_per_s']:.2f} | "
                f"{row['share_of_ceiling']:.0%} | {rss:,.0f} MB |",
                flush=True,
            )
            if filters["dropped"]:
                print(f"  {size} MB: {filters['dropped']}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
