"""Build src/bertforge/assets/gutenberg_sample.txt.gz from the shared Gutenberg corpus.

The demo ships a small public-domain corpus: short prose books from the
training split, one paragraph per line, a blank line between books.

    python scripts/make_demo_corpus.py --data ../shared/data/gutenberg
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

SKIP_WORDS = ("poem", "verse", "song", "ballad", "play", "tragedy", "comedy", "sword", "exercise", "salom")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="../shared/data/gutenberg")
    parser.add_argument("--out", default="src/bertforge/assets/gutenberg_sample.txt.gz")
    parser.add_argument("--max-book-bytes", type=int, default=120_000)
    parser.add_argument("--total-bytes", type=int, default=2_000_000)
    args = parser.parse_args()
    data = Path(args.data)
    books = [json.loads(line) for line in (data / "manifest.jsonl").read_text().splitlines()]
    train_books = [b for b in books if b["split"] == "train"]
    lines = iter(line.rstrip("\n") for line in open(data / "train.txt", encoding="utf-8"))
    chosen, total = [], 0
    for book in train_books:
        paragraphs = []
        while len(paragraphs) < book["paragraphs"]:
            line = next(lines)
            if line.strip():
                paragraphs.append(line)
        prose = not any(word in book["title"].lower() for word in SKIP_WORDS)
        if prose and book["bytes"] <= args.max_book_bytes and total < args.total_bytes:
            chosen.append(paragraphs)
            total += book["bytes"]
    with gzip.open(args.out, "wt", encoding="utf-8", compresslevel=9) as f:
        f.write("\n\n".join("\n".join(p) for p in chosen) + "\n")
    print(f"{len(chosen)} books, {total:,} bytes -> {args.out}")


if __name__ == "__main__":
    main()
