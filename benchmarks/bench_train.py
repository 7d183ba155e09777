"""Training throughput: bertforge against `transformers.BertForPreTraining`, on identical batches.

    python benchmarks/bench_train.py --presets tiny,mini,small
    python benchmarks/bench_train.py --presets mini --ablate        # what each lever buys

A step is forward + backward + clip + AdamW. The two models alternate step by
step (A B A B) after warm-up steps, so drift in machine speed hits both alike.
Tokens/s counts real (non-pad) tokens. MFU is bertforge's useful FLOP/s
(PaLM count, MLM head at masked positions only) over the fp32 (or bf16) matmul
peak measured in the same run.

Batches come from our own pipeline on ../shared/data/gutenberg (a 30522-token
WordPiece vocabulary trained on its first MB) or, without it, from synthetic
instances of realistic length.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bertforge import BertForPreTraining, ModelConfig  # noqa: E402
from bertforge.flops import measure_peak_flops, training_flops_per_token  # noqa: E402
from bertforge.model import IGNORE_INDEX  # noqa: E402

from common import gutenberg_batches, synthetic_batches  # noqa: E402


def hf_model(config: ModelConfig):
    import transformers

    hf_config = transformers.BertConfig(
        vocab_size=config.vocab_size,
        hidden_size=config.hidden_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        intermediate_size=config.intermediate_size,
        hidden_dropout_prob=config.hidden_dropout,
        attention_probs_dropout_prob=config.attention_dropout,
        max_position_embeddings=config.max_position_embeddings,
        attn_implementation="sdpa",
    )
    return transformers.BertForPreTraining(hf_config)


def ours_step(model, precision: str):
    def forward(batch):
        with autocast(precision):
            return model(
                batch["input_ids"],
                batch["token_type_ids"],
                batch["attention_mask"],
                batch["mlm_labels"],
                batch["nsp_labels"],
            ).loss

    return forward


def ours_dense_head_step(model, precision: str):
    """The lever off: the MLM decoder at every position, loss over the labelled ones (what transformers does)."""

    def forward(batch):
        with autocast(precision):
            out = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
            mlm = torch.nn.functional.cross_entropy(
                out.mlm_logits.flatten(0, 1).float(), batch["mlm_labels"].flatten(), ignore_index=IGNORE_INDEX
            )
            nsp = torch.nn.functional.cross_entropy(out.nsp_logits.float(), batch["nsp_labels"])
            return mlm + nsp

    return forward


def hf_step(model, precision: str):
    def forward(batch):
        with autocast(precision):
            return model(
                input_ids=batch["input_ids"],
                token_type_ids=batch["token_type_ids"],
                attention_mask=batch["attention_mask"],
                labels=batch["mlm_labels"],
                next_sentence_label=batch["nsp_labels"],
            ).loss

    return forward


def autocast(precision: str):
    return torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()


class Contender:
    """One model with its optimizer; `step(batch)` returns seconds for a full training step."""

    def __init__(self, name: str, model, forward_factory, precision: str, compile_model: bool = False):
        self.name = name
        self.model = model.train()
        self.params = list(model.parameters())  # the tied matrix appears once
        self.optimizer = torch.optim.AdamW(self.params, lr=1e-4, weight_decay=0.01)
        runnable = model
        self.compile_seconds = 0.0
        if compile_model:
            runnable = torch.compile(model)
        self.forward = forward_factory(runnable, precision)
        self.times: list[float] = []
        self.tokens: list[int] = []

    def step(self, batch) -> float:
        start = time.perf_counter()
        loss = self.forward(batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - start

    def tokens_per_second(self) -> float:
        return sum(self.tokens) / sum(self.times)


def race(contenders: list[Contender], batches: list[dict], warmup: int, steps: int) -> None:
    """Alternate contenders step by step: A B A B ..."""
    for i in range(warmup + steps):
        batch = batches[i % len(batches)]
        real_tokens = int(batch["attention_mask"].sum())
        for c in contenders:
            seconds = c.step(batch)
            if i == 0:
                c.compile_seconds = seconds
            if i >= warmup:
                c.times.append(seconds)
                c.tokens.append(real_tokens)


def mask_fraction(batches: list[dict]) -> float:
    masked = sum(int((b["mlm_labels"] != IGNORE_INDEX).sum()) for b in batches)
    return masked / sum(int(b["attention_mask"].sum()) for b in batches)


def bench_preset(preset: str, batches: list[dict], args, peak: float) -> dict:
    vocab = 30522
    config = ModelConfig.preset(preset, vocab_size=vocab)
    torch.manual_seed(0)
    ours = Contender("bertforge", BertForPreTraining(config), ours_step, args.precision)
    theirs = Contender("transformers", hf_model(config), hf_step, args.precision)
    race([ours, theirs], batches, args.warmup, args.steps)
    flops = training_flops_per_token(config, args.seq_len, mask_fraction(batches))
    result = {
        "preset": preset,
        "precision": args.precision,
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "bertforge_tokens_per_s": ours.tokens_per_second(),
        "transformers_tokens_per_s": theirs.tokens_per_second(),
        "bertforge_step_ms_median": 1000 * statistics.median(ours.times),
        "transformers_step_ms_median": 1000 * statistics.median(theirs.times),
    }
    result["ratio"] = result["bertforge_tokens_per_s"] / result["transformers_tokens_per_s"]
    result["bertforge_mfu"] = flops * result["bertforge_tokens_per_s"] / peak
    result["transformers_mfu_same_useful_flops"] = flops * result["transformers_tokens_per_s"] / peak
    return result


def ablate(batches: list[dict], args, peak: float) -> list[dict]:
    """Each lever switched off (or an option switched on) against the default, on the mini preset."""
    torch.manual_seed(0)
    base = ModelConfig.preset("mini", vocab_size=30522)
    variants = [
        Contender("bertforge (all levers)", BertForPreTraining(base), ours_step, args.precision),
        Contender("MLM head at every position", BertForPreTraining(base), ours_dense_head_step, args.precision),
        Contender(
            "vocabulary not padded to 64",
            BertForPreTraining(ModelConfig.preset("mini", vocab_size=30522, pad_vocab_multiple=1)),
            ours_step,
            args.precision,
        ),
        Contender("transformers (unfused QKV, dense head)", hf_model(base), hf_step, args.precision),
    ]
    if args.precision == "fp32":
        variants.append(Contender("bf16 autocast", BertForPreTraining(base), ours_step, "bf16"))
    if args.compile:
        variants.append(
            Contender("torch.compile", BertForPreTraining(base), ours_step, args.precision, compile_model=True)
        )
    race(variants, batches, args.warmup, args.steps)
    reference = variants[0].tokens_per_second()
    return [
        {
            "variant": v.name,
            "tokens_per_s": v.tokens_per_second(),
            "vs_default": v.tokens_per_second() / reference,
            "first_step_s": v.compile_seconds,
        }
        for v in variants
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", default="tiny,mini,small")
    parser.add_argument(
        "--data", default="../shared/data/gutenberg", help="Gutenberg directory (synthetic batches if absent)"
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    parser.add_argument("--ablate", action="store_true", help="per-lever table on the mini preset")
    parser.add_argument("--compile", action="store_true", help="include torch.compile in the ablation")
    parser.add_argument("--json", help="also write results here")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as scratch:
        batches = gutenberg_batches(Path(args.data), Path(scratch), args.batch_size, args.seq_len, n_batches=8)
        source = "gutenberg"
        if batches is None:
            batches, source = synthetic_batches(args.batch_size, args.seq_len, 30522, n_batches=8), "synthetic"
    dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32
    peak = measure_peak_flops("cpu", dtype, 2.0)
    print(
        f"batches: {source}, {args.batch_size} x {args.seq_len}, mask fraction {mask_fraction(batches):.3f}; "
        f"threads {torch.get_num_threads()}; measured {args.precision} matmul peak {peak / 1e9:.0f} GFLOP/s",
        flush=True,
    )
    results = {
        "source": source,
        "peak_gflops": peak / 1e9,
        "threads": torch.get_num_threads(),
        "presets": [],
        "ablation": [],
    }
    if args.ablate:
        results["ablation"] = ablate(batches, args, peak)
        print(f"\n| variant (mini, {args.precision}) | tokens/s | vs default | first step s |\n|---|---:|---:|---:|")
        for row in results["ablation"]:
            print(
                f"| {row['variant']} | {row['tokens_per_s']:,.0f} | {row['vs_default']:.2f}× "
                f"| {row['first_step_s']:.1f} |"
            )
    else:
        print(
            "\n| preset | bertforge tokens/s | transformers tokens/s | ratio | bertforge MFU |"
            "\n|---|---:|---:|---:|---:|"
        )
        for preset in args.presets.split(","):
            r = bench_preset(preset, batches, args, peak)
            results["presets"].append(r)
            print(
                f"| {preset} | {r['bertforge_tokens_per_s']:,.0f} | {r['transformers_tokens_per_s']:,.0f} | "
                f"{r['ratio']:.2f}× | {r['bertforge_mfu']:.1%} |",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
