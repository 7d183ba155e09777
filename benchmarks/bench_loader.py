"""Does the data loader keep up? Batches/s it produces against batches/s training consumes.

    python benchmarks/bench_loader.py --preset mini

Both on the same prepared data (the first MB of ../shared/data/gutenberg, or the
book sample bundled with bertforge): the loader is our DataLoader (NSP instances
+ dynamic masking) with 0 and 1 worker processes; the consumer is one full
training step of the preset at the trainer's automatic precision.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bertforge import BertForPreTraining, ModelConfig  # noqa: E402
from bertforge.data.instances import PretrainingDataset
from bertforge.data.masking import MaskingCollator  # noqa: E402
from bertforge.data.prepare import prepare  # noqa: E402
from bertforge.engine.runtime import Distributed, autocast, resolve_precision  # noqa: E402
from bertforge.fileio import asset_path  # noqa: E402
from bertforge.model.bert import use_fast_paths
from bertforge.tokenizer import save_tokenizer, special_ids, train_tokenizer  # noqa: E402
from bertforge.training.config import TrainConfig  # noqa: E402
from bertforge.training.loader import BatchPlan, make_loader  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="mini")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--train-steps", type=int, default=6)
    parser.add_argument("--json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        text = gzip.open(asset_path("gutenberg_sample.txt.gz"), "rt", encoding="utf-8").read()
        (scratch / "books.txt").write_text(text, encoding="utf-8")
        tokenizer = train_tokenizer(text.splitlines(), vocab_size=30522, min_frequency=1)
        save_tokenizer(tokenizer, scratch / "tok")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prepare([scratch / "books.txt"], scratch / "tok", scratch / "data", valid_fraction=0.0, progress=False)
        ids = special_ids(tokenizer)
        dataset = PretrainingDataset(scratch / "data", "train", args.seq_len, seed=0, cls_id=ids.cls, sep_id=ids.sep)
        collator = MaskingCollator(tokenizer, seed=0)
        rates = {}
        for workers in (0, 1):
            cfg = TrainConfig(batch_size=args.batch_size, seq_len=args.seq_len, num_workers=workers)
            loader = iter(
                make_loader(BatchPlan(dataset, args.batch_size, Distributed(), 0), collator, (0, 0, 0), cfg, "cpu")
            )
            next(loader)  # worker start-up is paid once per run, not per batch
            start = time.perf_counter()
            batches = [next(loader) for _ in range(args.batches)]
            rates[workers] = args.batches / (time.perf_counter() - start)
        precision = resolve_precision("auto", "cpu")
        model = BertForPreTraining(ModelConfig.preset(args.preset, vocab_size=30522))
        use_fast_paths(model, "cpu", precision)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        times = []
        for batch in batches[: args.train_steps + 2]:
            start = time.perf_counter()
            with autocast("cpu", precision):
                loss = model(
                    batch["input_ids"],
                    batch["token_type_ids"],
                    batch["attention_mask"],
                    batch["mlm_labels"],
                    batch["nsp_labels"],
                ).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            times.append(time.perf_counter() - start)
        consumed = 1 / (sum(times[2:]) / len(times[2:]))
    result = {
        "preset": args.preset,
        "precision": precision,
        "loader_batches_per_s_0_workers": rates[0],
        "loader_batches_per_s_1_worker": rates[1],
        "train_batches_per_s": consumed,
        "headroom_0_workers": rates[0] / consumed,
        "headroom_1_worker": rates[1] / consumed,
    }
    print(
        f"| loader, 0 workers | loader, 1 worker | training consumes ({args.preset}, {precision}) "
        "| headroom (0 / 1 worker) |"
    )
    print("|---:|---:|---:|---:|")
    print(
        f"| {rates[0]:.1f} batches/s | {rates[1]:.1f} batches/s | {consumed:.2f} batches/s | "
        f"{result['headroom_0_workers']:.0f}× / {result['headroom_1_worker']:.0f}× |"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
