"""Can the NSP head learn under each position scheme? A corpus where the answer is plain to see.

Every document is written from one of 20 topics, each a vocabulary of 40 made-up words that no other topic uses,
so IsNext (B from A's document) and NotNext (B from another document, another topic but for 1 in 20) differ in
every word. A model whose [CLS] reads both segments learns NSP here within a few hundred steps; one whose [CLS]
cannot see B stays at chance. `budget` with NSP on tiny, 128 tokens, 400 steps, fp32, per scheme and seed:

    python experiments/nsp_reach.py --out nsp_reach --seeds 2

prints held-out NSP and MLM accuracy (documents held out, their topics seen in training) and the training NSP
accuracy at each 100 steps.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # common.py: the machine line
from common import machine_description  # noqa: E402

SCHEMES = {
    "alibi": ["--attention-bias", "alibi", "--position-embedding", "learned"],
    "learned": ["--attention-bias", "none", "--position-embedding", "learned"],
    "rotary": ["--attention-bias", "none", "--position-embedding", "rotary"],
}


def write_corpus(path: Path, documents: int = 120, topics: int = 20, words_per_topic: int = 40) -> None:
    """Documents of 40 sentences of 6-14 words, each document's words from its topic's vocabulary alone."""
    rng = random.Random(0)
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    words = sorted({"".join(rng.choice(syllables) for _ in range(3)) for _ in range(topics * words_per_topic * 2)})
    rng.shuffle(words)
    vocabularies = [words[t * words_per_topic : (t + 1) * words_per_topic] for t in range(topics)]
    with path.open("w") as f:
        for d in range(documents):
            vocabulary = vocabularies[d % topics]
            for _ in range(40):
                f.write(" ".join(rng.choice(vocabulary) for _ in range(rng.randint(6, 14))) + ".\n")
            f.write("\n")


def bertforge(*args) -> str:
    done = subprocess.run([sys.executable, "-m", "bertforge", *map(str, args)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bertforge {' '.join(map(str, args[:2]))} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="nsp_reach")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--schemes", default=",".join(SCHEMES))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(machine_description(), flush=True)
    if not (out / "data" / "meta.json").is_file():
        write_corpus(out / "corpus.txt")
        bertforge(
            "tokenizer", "train", out / "corpus.txt", "--out", out / "tok", "--kind", "word", "--vocab-size", 1000
        )
        bertforge(
            "prepare", out / "corpus.txt", "--tokenizer", out / "tok", "--out", out / "data", "--valid-fraction", 0.1
        )
    for seed in range(args.seeds):
        for scheme in args.schemes.split(","):
            run = out / f"{scheme}.seed{seed}"
            if not (run / "model" / "config.json").is_file():
                bertforge(
                    "pretrain", "--data", out / "data", "--out", run, "--overwrite", "--recipe", "budget",
                    "--preset", "tiny", "--pair-objective", "nsp", "--seq-len", 128, "--batch-size", 32,
                    "--max-steps", args.steps, "--precision", "fp32", "--eval-every", 0, "--save-every", 0,
                    "--log-every", 10, "--seed", seed, "--quiet", *SCHEMES[scheme],
                )  # fmt: skip
            held_out = json.loads(bertforge("evaluate", run, "--data", out / "data", "--max-batches", 20, "--json"))
            train = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
            train = [r for r in train if r["split"] == "train"]
            by_hundred = [
                statistics.mean(r["nsp_acc"] for r in train if s - 100 < r["step"] <= s)
                for s in range(100, args.steps + 1, 100)
            ]
            print(
                f"{scheme} seed {seed}: held-out NSP accuracy {held_out['nsp_acc']:.3f}, MLM accuracy "
                f"{held_out['mlm_acc']:.3f}; training NSP accuracy per 100 steps "
                + " ".join(f"{a:.2f}" for a in by_hundred),
                flush=True,
            )


if __name__ == "__main__":
    main()
