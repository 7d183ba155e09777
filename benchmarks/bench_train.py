"""Training throughput: bertforge against `transformers.BertForPreTraining`, on identical batches.

    python benchmarks/bench_train.py --presets tiny,mini,small       # fp32 and auto rows per preset
    python benchmarks/bench_train.py --ablate                         # what each lever buys, fp32 and bf16
    python benchmarks/bench_train.py --device cuda --batch-size 128   # the same races on a GPU

A step is forward + backward + clip + AdamW, fused for every contender (the
trainer's choice, and transformers' Trainer's default on torch >= 2.8: its
users get it too). Contenders alternate step by step,
in a shuffled order each round, after warm-up steps, so drift in machine speed
and cache effects hit all alike.
Tokens/s counts real (non-pad) tokens. MFU is useful FLOP/s (PaLM count, MLM
head at masked positions only) over the dense matmul speed of the precision in
use, sampled between the steps of the same race (MatmulProbe): on a shared
machine whose speed drifts, numerator and denominator drift together. The
first lines name the machine (and the GPU, with --device cuda).
Both libraries run with glibc's default allocator here: the trainer's own
setting (runtime.keep_freed_memory) is per process, so bench_allocator.py
measures it with each arm in its own process.

Batches come from our own pipeline on ../shared/data/gutenberg (a 30522-token
WordPiece vocabulary trained on its first MB) or, without it, from synthetic
instances of realistic length.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bertforge.model.bert  # noqa: E402
import bertforge.model.dropout  # noqa: E402
from bertforge import BertForPreTraining, ModelConfig  # noqa: E402
from bertforge.engine.hardware import cpu_has_bf16_instructions, matmul_flops_per_second, matmul_operands  # noqa: E402
from bertforge.engine.runtime import AUTOCAST_DTYPES, autocast, resolve_precision  # noqa: E402
from bertforge.labels import IGNORE_INDEX  # noqa: E402
from bertforge.model.bert import (
    set_explicit_attention,  # noqa: E402
    use_fast_paths,
)
from bertforge.training.flops import training_flops_per_token  # noqa: E402

from common import gutenberg_batches, machine_description, synthetic_batches  # noqa: E402

VOCAB = 30522


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


def ours_loss(model, device: str, precision: str, keep_logits: bool = False):
    """`keep_logits`: the blockwise MLM loss off, the (N, V) logits written out (model/vocabulary_loss.py)."""

    def forward(batch):
        with autocast(device, precision):
            return model(
                batch["input_ids"],
                batch["token_type_ids"],
                batch["attention_mask"],
                batch["mlm_labels"],
                batch["nsp_labels"],
                keep_logits=keep_logits,
            ).loss

    return forward


def torch_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    return torch.nn.functional.dropout(x, p, training)


def ours_torch_dropout_loss(model, device: str, precision: str):
    """The dropout lever off: masks drawn by torch's F.dropout (a bernoulli_ draw per element) instead of
    dropout.py's, swapped in for this contender's forward passes only (the masks are drawn there)."""
    forward_with_our_masks = ours_loss(model, device, precision)

    def forward(batch):
        with (
            mock.patch.object(bertforge.model.bert, "dropout", torch_dropout),
            mock.patch.object(bertforge.model.dropout, "dropout", torch_dropout),
        ):
            return forward_with_our_masks(batch)

    return forward


def ours_dense_head_loss(model, device: str, precision: str):
    """The gather lever off: the MLM decoder at every position, loss over the labelled ones (what transformers does)."""

    def forward(batch):
        with autocast(device, precision):
            out = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
            mlm = torch.nn.functional.cross_entropy(
                out.mlm_logits.flatten(0, 1).float(), batch["mlm_labels"].flatten(), ignore_index=IGNORE_INDEX
            )
            return mlm + torch.nn.functional.cross_entropy(out.nsp_logits.float(), batch["nsp_labels"])

    return forward


def hf_loss(model, device: str, precision: str):
    def forward(batch):
        with autocast(device, precision):
            return model(
                input_ids=batch["input_ids"],
                token_type_ids=batch["token_type_ids"],
                attention_mask=batch["attention_mask"],
                labels=batch["mlm_labels"],
                next_sentence_label=batch["nsp_labels"],
            ).loss

    return forward


class Contender:
    """One model with its optimizer; `step(batch)` returns seconds for a full training step."""

    def __init__(
        self,
        name: str,
        model,
        loss_factory,
        precision: str,
        device: str,
        compile_model: bool = False,
        fused_adamw: bool = True,
    ):
        self.name, self.precision, self.device = name, precision, device
        self.model = model.to(device).train()
        self.params = list(model.parameters())  # the tied matrix appears once
        self.optimizer = torch.optim.AdamW(self.params, lr=1e-4, weight_decay=0.01, fused=fused_adamw)
        self.forward = loss_factory(torch.compile(model) if compile_model else model, device, precision)
        self.first_step = 0.0
        self.times: list[float] = []
        self.tokens: list[int] = []

    def step(self, batch) -> float:
        start = self.clock()
        self.forward(batch).backward()
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return self.clock() - start

    def clock(self) -> float:
        """Seconds now, after the GPU has finished what was queued (its kernels run asynchronously)."""
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter()

    def tokens_per_second(self) -> float:
        return sum(self.tokens) / sum(self.times)


class MasterWeightsContender(Contender):
    """A lever not in the trainer yet: the model held in bf16, so autocast casts nothing, and AdamW stepping fp32
    master copies of the weights, which are copied back into the bf16 model after every step."""

    def __init__(self, name: str, model, device: str):
        use_fast_paths(model, device, "bf16")
        super().__init__(name, model, ours_loss, "fp32", device)  # no autocast: the weights themselves are bf16
        self.precision = "bf16"
        self.masters = [p.detach().clone() for p in self.params]  # fp32
        model.to(torch.bfloat16)
        self.optimizer = torch.optim.AdamW(self.masters, lr=1e-4, weight_decay=0.01, fused=True)

    def step(self, batch) -> float:
        start = self.clock()
        self.forward(batch).backward()
        for param, master in zip(self.params, self.masters):
            master.grad, param.grad = param.grad.float(), None
        torch.nn.utils.clip_grad_norm_(self.masters, 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            torch._foreach_copy_(self.params, self.masters)
        return self.clock() - start


class MatmulProbe:
    """The machine's dense matmul speed in one precision *during* a race: one timed sample per round, taken at a
    random point among the contenders' steps. MFU divides by the median sample. A peak measured once before the
    race swung from 127 to 170 GFLOP/s between processes minutes apart on a shared 2-core VM (AVX2 EPYC), which
    moved MFU as much as any lever did."""

    def __init__(self, device: str, precision: str):
        self.a, self.b = matmul_operands(device, AUTOCAST_DTYPES.get(precision, torch.float32))
        matmul_flops_per_second(self.a, self.b)  # warm-up
        self.samples: list[float] = []

    def sample(self) -> None:
        self.samples.append(matmul_flops_per_second(self.a, self.b))

    def flops_per_second(self) -> float:
        return statistics.median(self.samples)


def race(
    contenders: list[Contender], batches: list[dict], warmup: int, steps: int, probes: tuple[MatmulProbe, ...] = ()
) -> None:
    """Alternate contenders step by step, in a new random order each round: no one always follows the same model.
    After the warm-up, each probe samples the matmul speed once a round, at its own place in that order."""
    order = [*contenders, *probes]
    rng = random.Random(0)
    for i in range(warmup + steps):
        batch = batches[i % len(batches)]
        real_tokens = int(batch["attention_mask"].sum())
        rng.shuffle(order)
        for c in order:
            if isinstance(c, MatmulProbe):
                if i >= warmup:
                    c.sample()
                continue
            seconds = c.step(batch)
            if i == 0:
                c.first_step = seconds
            if i >= warmup:
                c.times.append(seconds)
                c.tokens.append(real_tokens)


def ours(config: ModelConfig, precision: str, device: str, name: str = "bertforge", **levers) -> Contender:
    """Our model with the trainer's fast paths for `precision` on `device`, then any lever overridden."""
    torch.manual_seed(0)
    model = BertForPreTraining(config)
    use_fast_paths(model, device, precision)
    if "explicit_attention" in levers:
        set_explicit_attention(model, levers["explicit_attention"])
    return Contender(
        name,
        model,
        levers.get("loss", ours_loss),
        precision,
        device,
        levers.get("compile", False),
        levers.get("fused_adamw", True),
    )


def mask_fraction(batches: list[dict]) -> float:
    masked = sum(int((b["mlm_labels"] != IGNORE_INDEX).sum()) for b in batches)
    return masked / sum(int(b["attention_mask"].sum()) for b in batches)


def bench_preset(preset: str, batches: list[dict], args, auto: str) -> list[dict]:
    """bertforge fp32 and at --precision auto, transformers in the same precisions, racing together."""
    config = ModelConfig.preset(preset, vocab_size=VOCAB, hidden_dropout=args.dropout, attention_dropout=args.dropout)
    device = args.device
    racers = [
        ours(config, "fp32", device, "bertforge fp32"),
        Contender("transformers fp32", hf_model(config), hf_loss, "fp32", device),
    ]
    if auto != "fp32":
        racers += [
            ours(config, auto, device, f"bertforge auto ({auto})"),
            Contender(f"transformers {auto}", hf_model(config), hf_loss, auto, device),
        ]
    if args.compile:
        racers.append(ours(config, auto, device, f"bertforge auto ({auto}), torch.compile", compile=True))
    probes = {precision: MatmulProbe(device, precision) for precision in {c.precision for c in racers}}
    race(racers, batches, args.warmup, args.steps, tuple(probes.values()))
    flops = training_flops_per_token(config, args.seq_len, mask_fraction(batches))
    return [
        {
            "preset": preset,
            "contender": c.name,
            "precision": c.precision,
            "tokens_per_s": c.tokens_per_second(),
            "step_ms_median": 1000 * statistics.median(c.times),
            "matmul_gflops": probes[c.precision].flops_per_second() / 1e9,
            "mfu": flops * c.tokens_per_second() / probes[c.precision].flops_per_second(),
        }
        for c in racers
    ]


def ablate(batches: list[dict], args, precision: str) -> list[dict]:
    """Each lever switched off (or on) against the default, on the mini preset, in one precision."""
    config = ModelConfig.preset("mini", vocab_size=VOCAB, hidden_dropout=args.dropout, attention_dropout=args.dropout)
    device = args.device
    variants = [
        ours(config, precision, device, "bertforge (the trainer's choice)"),
        ours(config, precision, device, "MLM head at every position (gather off)", loss=ours_dense_head_loss),
        ours(
            config,
            precision,
            device,
            "the loss from the (N, V) logits (blockwise loss off)",
            loss=functools.partial(ours_loss, keep_logits=True),
        ),
        ours(
            ModelConfig.preset(
                "mini",
                vocab_size=VOCAB,
                pad_vocab_multiple=1,
                hidden_dropout=args.dropout,
                attention_dropout=args.dropout,
            ),
            precision,
            device,
            "vocabulary not padded to 64",
        ),
        Contender("transformers", hf_model(config), hf_loss, precision, device),
    ]
    variants.append(ours(config, precision, device, "AdamW's per-parameter loop (not fused)", fused_adamw=False))
    if device == "cpu" and args.dropout > 0:  # attention with dropout on CPU has one form: the explicit one
        variants.append(
            ours(config, precision, device, "torch's dropout mask (bernoulli_)", loss=ours_torch_dropout_loss)
        )
    else:
        variants += [
            ours(config, precision, device, "explicit attention (softmax(qkᵀ)v)", explicit_attention=True),
            ours(config, precision, device, "PyTorch SDPA attention", explicit_attention=False),
        ]
    if precision == "bf16":
        torch.manual_seed(0)
        variants.append(
            MasterWeightsContender("bf16 weights, fp32 masters (no autocast)", BertForPreTraining(config), device)
        )
    if args.compile:
        variants.append(ours(config, precision, device, "torch.compile", compile=True))
    race(variants, batches, args.warmup, args.steps)
    reference = variants[0].tokens_per_second()
    return [
        {
            "precision": precision,
            "variant": v.name,
            "tokens_per_s": v.tokens_per_second(),
            "vs_default": v.tokens_per_second() / reference,
            "first_step_s": v.first_step,
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
    parser.add_argument("--dropout", type=float, default=0.1, help="hidden and attention dropout of both models")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (fp32 on CUDA: no TF32, as torch defaults)")
    parser.add_argument("--ablate", action="store_true", help="per-lever table on the mini preset, fp32 and auto")
    parser.add_argument("--compile", action="store_true", help="add a torch.compile contender")
    parser.add_argument("--json", help="also write results here")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as scratch:
        batches = gutenberg_batches(Path(args.data), Path(scratch), args.batch_size, args.seq_len, n_batches=8)
        source = "gutenberg"
        if batches is None:
            batches, source = synthetic_batches(args.batch_size, args.seq_len, VOCAB, n_batches=8), "synthetic"
    batches = [{key: value.to(args.device) for key, value in batch.items()} for batch in batches]
    auto = resolve_precision("auto", args.device)
    # fp32, and the lower precision that races: bf16 on a CPU with bf16 instructions whatever auto picks (the
    # ablation has a bf16 table), none on a CPU that would emulate it, auto's on a GPU (bf16, or fp16 on older cards).
    precisions = ["fp32"]
    if auto != "fp32" or (args.device == "cpu" and cpu_has_bf16_instructions()):
        precisions.append("bf16" if auto == "fp32" else auto)
    machine = machine_description() + (f"; GPU: {torch.cuda.get_device_name()}" if args.device != "cpu" else "")
    print(machine)
    print(
        f"batches: {source}, {args.batch_size} x {args.seq_len}, mask fraction {mask_fraction(batches):.3f}, "
        f"dropout {args.dropout}; --precision auto picks {auto}",
        flush=True,
    )
    results = {
        "machine": machine,
        "source": source,
        "auto": auto,
        "presets": [],
        "ablation": [],
    }
    if args.ablate:
        print("\n| precision | variant (mini) | tokens/s | vs default | first step s |\n|---|---|---:|---:|---:|")
        for precision in precisions:
            for row in ablate(batches, args, precision):
                results["ablation"].append(row)
                print(
                    f"| {precision} | {row['variant']} | {row['tokens_per_s']:,.0f} | {row['vs_default']:.2f}× "
                    f"| {row['first_step_s']:.1f} |",
                    flush=True,
                )
    else:
        print(
            "\n| preset | contender | tokens/s | vs transformers fp32 | vs bertforge fp32 | MFU "
            "| matmul GFLOP/s during the race |\n|---|---|---:|---:|---:|---:|---:|"
        )
        for preset in args.presets.split(","):
            rows = bench_preset(preset, batches, args, auto)
            hf32 = next(r for r in rows if r["contender"] == "transformers fp32")["tokens_per_s"]
            ours32 = next(r for r in rows if r["contender"] == "bertforge fp32")["tokens_per_s"]
            for r in rows:
                results["presets"].append(r)
                print(
                    f"| {preset} | {r['contender']} | {r['tokens_per_s']:,.0f} | {r['tokens_per_s'] / hf32:.2f}× | "
                    f"{r['tokens_per_s'] / ours32:.2f}× | {r['mfu']:.1%} | {r['matmul_gflops']:,.0f} |",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
