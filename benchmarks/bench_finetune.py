"""Fine-tuning step throughput: bertforge's sequence classifier, padded and unpadded, against `transformers`' on
identical batches.

    python benchmarks/bench_finetune.py --preset mini
    python benchmarks/bench_finetune.py --preset mini --batches shuffled
    python benchmarks/bench_finetune.py --preset base --device cuda --batch-size 64   # on a GPU: fp32 and bf16

Batches are sentence pairs (consecutive sentences of the bundled book sample),
tokenised once. `--batches bucketed` (the default) pads to the longest in a
length-sorted pool, as `finetune` builds them; `--batches shuffled` pads a
random draw to its longest, as the plain `transformers` loop does
(`DataCollatorWithPadding` over a shuffled set). bertforge races twice: padded
(`--unpad never`) and unpadded (`--unpad always`, unpadding.py: the sequences
packed into fewer rows). A step is forward + cross-entropy +
backward + clip + AdamW. Contenders alternate step by step, in a shuffled order
each round (bench_train's race). Rows: fp32, and bf16 on a GPU or where the CPU
is fast at it. Dropout is 0.1, so on CPU bertforge takes the explicit attention
form with its own dropout mask (dropout.py) whatever the precision.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import warnings
from functools import partial
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_infer import sentences  # noqa: E402
from bench_train import Contender, autocast, race  # noqa: E402

from bertforge import ModelConfig  # noqa: E402
from bertforge.data.batching import TextBatcher, shuffled_buckets  # noqa: E402
from bertforge.engine.hardware import cpu_has_fast_bf16  # noqa: E402
from bertforge.model.heads import BertForSequenceClassification  # noqa: E402
from bertforge.model.unpadding import set_unpadding  # noqa: E402
from bertforge.modelfiles.directory import save_model  # noqa: E402
from bertforge.tokenizer import train_tokenizer  # noqa: E402

from common import machine_description  # noqa: E402


def pair_batches(texts: list[str], batch_size: int, n_batches: int, seq_len: int, bucketed: bool = True):
    """(tokenizer, batches with labels): consecutive sentences as pairs, in shuffled length buckets as finetune
    makes them, or (not `bucketed`) in random draws."""
    tokenizer = train_tokenizer(texts, vocab_size=30522, min_frequency=1)
    batcher = TextBatcher(tokenizer, seq_len)
    encoded = batcher.encode(texts[0::2], texts[1::2])
    rng = np.random.default_rng(0)
    if bucketed:
        draws = shuffled_buckets(encoded, batch_size, rng)
    else:
        order = rng.permutation(len(encoded)).tolist()
        draws = [order[s : s + batch_size] for s in range(0, len(order) - batch_size + 1, batch_size)]
    batches = []
    for indices in draws[:n_batches]:
        batch = batcher.batch(encoded, indices)
        batch["labels"] = torch.from_numpy(rng.integers(0, 2, len(indices)))
        batches.append(batch)
    return tokenizer, batches


def classifier_loss(model, device: str, precision: str, unpad: str | None = None):
    """bertforge and transformers take the same keyword arguments; both give logits first. `unpad`: bertforge's
    unpadding mode for this contender's steps."""

    def forward(batch):
        if unpad is not None:
            set_unpadding(unpad)
        with autocast(device, precision):
            out = model(
                input_ids=batch["input_ids"],
                token_type_ids=batch["token_type_ids"],
                attention_mask=batch["attention_mask"],
            )
            logits = out[0] if isinstance(out, tuple) else out.logits
            return torch.nn.functional.cross_entropy(logits.float(), batch["labels"])

    return forward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="mini")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batches", choices=("bucketed", "shuffled"), default="bucketed")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--json", help="also write results here")
    args = parser.parse_args()
    import transformers

    n_batches = args.warmup + args.steps
    device = args.device
    tokenizer, batches = pair_batches(
        sentences(8000), args.batch_size, n_batches, args.seq_len, bucketed=args.batches == "bucketed"
    )
    batches = [{k: v.to(device) for k, v in batch.items()} for batch in batches]
    config = ModelConfig.preset(args.preset, vocab_size=tokenizer.get_vocab_size(), hidden_dropout=0.1)
    torch.manual_seed(0)
    model = BertForSequenceClassification(config, 2)

    def ours() -> BertForSequenceClassification:
        copy = BertForSequenceClassification(config, 2)
        copy.load_state_dict(model.state_dict())
        return copy

    with tempfile.TemporaryDirectory() as scratch:
        save_model(model, scratch, tokenizer)  # the same weights for transformers
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = [
                transformers.BertForSequenceClassification.from_pretrained(scratch, attn_implementation="sdpa")
                for _ in range(2)
            ]
        padded, unpadded = partial(classifier_loss, unpad="never"), partial(classifier_loss, unpad="always")
        racers = [
            Contender("bertforge fp32 padded", ours(), padded, "fp32", device),
            Contender("transformers fp32", theirs[0], classifier_loss, "fp32", device),
            Contender("bertforge fp32 unpadded", ours(), unpadded, "fp32", device),
        ]
        if device.startswith("cuda") or cpu_has_fast_bf16():
            racers += [
                Contender("bertforge bf16 padded", ours(), padded, "bf16", device),
                Contender("bertforge bf16 unpadded", ours(), unpadded, "bf16", device),
                Contender("transformers bf16", theirs[1], classifier_loss, "bf16", device),
            ]
    race(racers, batches, args.warmup, args.steps)
    padding = 1 - sum(int(b["attention_mask"].sum()) for b in batches) / sum(
        b["attention_mask"].numel() for b in batches
    )
    reference = racers[1].tokens_per_second()
    rows = [
        {
            "contender": c.name,
            "precision": c.precision,
            "tokens_per_s": c.tokens_per_second(),
            "step_ms_median": 1000 * statistics.median(c.times),
            "vs_transformers_fp32": c.tokens_per_second() / reference,
        }
        for c in racers
    ]
    print(machine_description() + (f"; GPU: {torch.cuda.get_device_name()}" if device != "cpu" else ""))
    mean_tokens = statistics.mean(int(b["attention_mask"].sum()) / len(b["input_ids"]) for b in batches)
    print(
        f"preset {args.preset}, batch {args.batch_size} pairs (mean {mean_tokens:.0f} real tokens), "
        f"{args.batches} batches, {padding:.0%} of their tokens padding, dropout 0.1, "
        f"{args.steps} timed steps after {args.warmup}"
    )
    print("\n| contender | tokens/s | step ms (median) | vs transformers fp32 |\n|---|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['contender']} | {r['tokens_per_s']:,.0f} | {r['step_ms_median']:.0f} | "
            f"{r['vs_transformers_fp32']:.2f}× |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
