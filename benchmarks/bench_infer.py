"""Inference speed: bertforge against `transformers` on the same weights and tokenizer.

    python benchmarks/bench_infer.py --preset mini
    python benchmarks/bench_infer.py --preset mini --sst2 ../shared/data/glue/SST-2   # SST-2-shaped singles

- embeddings: sentences/s over 10,000 sentences of mixed length ([CLS] pooling),
  bertforge's `Bert.embed` (length-bucketed batches) against `transformers.BertModel`
  with its fast tokenizer, batches in input order padded to the longest (the usual loop);
  bertforge three ways: as it chooses (`--unpad auto`), padded (`never`) and unpadded
  (`always`: the real tokens of a batch packed into one stream, unpadding.py);
- fill-mask: median latency of one sentence, `Bert.fill_mask` against `pipeline("fill-mask")`;
- both again for bertforge with `precision="bf16"`, with its distance from the fp32 answers
  (on a CPU with bf16 instructions; elsewhere torch emulates bf16 and it is not timed).

Sentences come from the book sample bundled with bertforge; the model is a random-weight
preset (speed does not depend on the weights), saved once and loaded by both.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import warnings
from functools import partial
from pathlib import Path

import numpy as np
import torch

from bertforge import BertForPreTraining, ModelConfig, save_model
from bertforge.data.batching import length_buckets
from bertforge.engine.hardware import cpu_has_bf16_instructions
from bertforge.fileio import asset_path
from bertforge.formats.corpus import read_paragraphs
from bertforge.formats.text import split_sentences
from bertforge.inference import load
from bertforge.model.bert import set_explicit_attention
from bertforge.model.unpadding import unpadding_mode
from bertforge.tokenizer import train_tokenizer

from common import machine_description


def sentences(n: int, sst2: str | None = None) -> list[str]:
    """`n` sentences of the bundled book sample, or of SST-2's training split (its `sentence` column) with `sst2`."""
    if sst2:
        from bertforge.formats.rows import read_rows

        rows = read_rows(Path(sst2) / "train.tsv", ["sentence"])
        return [row["sentence"] for _, (_, row) in zip(range(n), rows)]
    out: list[str] = []
    for paragraph in read_paragraphs([asset_path("gutenberg_sample.txt.gz")]):
        out.extend(s for s in split_sentences(paragraph.text) if len(s) > 3)
        if len(out) >= n:
            return out[:n]
    return out


def timed(fn, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="mini")
    parser.add_argument("--sentences", type=int, default=10_000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-calls", type=int, default=200)
    parser.add_argument("--sst2", help="a GLUE SST-2 directory: embed its training sentences instead of the book's")
    parser.add_argument("--json", help="also write results here")
    args = parser.parse_args()
    import transformers

    texts = sentences(args.sentences, args.sst2)
    bf16 = cpu_has_bf16_instructions()  # without them torch emulates bf16 at ~1 GFLOP/s: nothing worth timing
    lengths = [len(t.split()) for t in texts]
    with tempfile.TemporaryDirectory() as scratch:
        tokenizer = train_tokenizer(texts, vocab_size=30522, min_frequency=1)
        torch.manual_seed(0)
        save_model(
            BertForPreTraining(ModelConfig.preset(args.preset, vocab_size=tokenizer.get_vocab_size())),
            scratch,
            tokenizer,
        )
        ours = load(scratch)
        if bf16:
            ours_bf16 = load(scratch, precision="bf16")
            bf16_explicit = load(scratch, precision="bf16")
            set_explicit_attention(bf16_explicit.model, True)  # the form training takes in CPU bf16 (use_fast_paths)
        hf_tokenizer = transformers.AutoTokenizer.from_pretrained(scratch)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hf_model = transformers.BertModel.from_pretrained(scratch, attn_implementation="sdpa").eval()
            pipe = transformers.pipeline("fill-mask", model=scratch, top_k=5)

    @torch.inference_mode()
    def hf_embed():
        vectors = []
        for start in range(0, len(texts), args.batch_size):
            batch = hf_tokenizer(
                texts[start : start + args.batch_size],
                padding=True,
                truncation=True,
                max_length=512,
                return_tensors="pt",
            )
            vectors.append(hf_model(**batch).last_hidden_state[:, 0])
        return torch.cat(vectors)

    # Same vectors first: a speed comparison of different computations would mean nothing.
    check = np.abs(
        ours.embed(texts[:200], batch_size=args.batch_size) - hf_embed_first(hf_tokenizer, hf_model, texts[:200])
    ).max()
    if bf16:
        exact, fast = ours.embed(texts[:1000]), ours_bf16.embed(texts[:1000])
        bf16_cosine = float(
            ((exact * fast).sum(1) / np.linalg.norm(exact, axis=1) / np.linalg.norm(fast, axis=1)).min()
        )

    def ours_embed(mode: str):
        with unpadding_mode(mode):
            return ours.embed(texts, batch_size=args.batch_size)

    ours_times, hf_times, bf16_times, explicit_times = [], [], [], []
    forced = {"never": [], "always": []}  # padded, unpadded
    for _ in range(args.repeats):  # alternate A B C D A B C D
        ours_times += timed(lambda: ours_embed("auto"), 1)
        for mode, times in forced.items():
            times += timed(partial(ours_embed, mode), 1)
        hf_times += timed(hf_embed, 1)
        if bf16:
            bf16_times += timed(lambda: ours_bf16.embed(texts, batch_size=args.batch_size), 1)
            explicit_times += timed(lambda: bf16_explicit.embed(texts, batch_size=args.batch_size), 1)
    ours_rate, hf_rate = len(texts) / min(ours_times), len(texts) / min(hf_times)

    probe = "He opened the [MASK] and went out into the street."
    ours.fill_mask(probe)
    pipe(probe)
    if bf16:
        ours_bf16.fill_mask(probe)
        predictions = ours_bf16.fill_mask(probe, top_k=50)["masks"][0]["predictions"]
        fast_scores = {p["token_id"]: p["score"] for p in predictions}
        bf16_score_gap = max(
            abs(p["score"] - fast_scores.get(p["token_id"], 0.0))
            for p in ours.fill_mask(probe)["masks"][0]["predictions"]
        )
    ours_latency, hf_latency, bf16_latency = [], [], []
    for _ in range(args.latency_calls):
        ours_latency += timed(lambda: ours.fill_mask(probe, top_k=5), 1)
        hf_latency += timed(lambda: pipe(probe), 1)
        if bf16:
            bf16_latency += timed(lambda: ours_bf16.fill_mask(probe, top_k=5), 1)
    result = {
        "preset": args.preset,
        "threads": torch.get_num_threads(),
        "sentences": len(texts),
        "mean_words": statistics.mean(lengths),
        "max_abs_embedding_difference": float(check),
        "bertforge_sentences_per_s": ours_rate,
        "transformers_sentences_per_s": hf_rate,
        "embed_ratio": ours_rate / hf_rate,
        "padding_share": padding_share(ours, texts, args.batch_size),
        "bertforge_padded_sentences_per_s": len(texts) / min(forced["never"]),
        "bertforge_unpadded_sentences_per_s": len(texts) / min(forced["always"]),
        "bertforge_fill_mask_ms": 1000 * statistics.median(ours_latency),
        "transformers_fill_mask_ms": 1000 * statistics.median(hf_latency),
    }
    result["fill_mask_ratio"] = result["transformers_fill_mask_ms"] / result["bertforge_fill_mask_ms"]
    if bf16:
        result.update(
            bf16_sentences_per_s=len(texts) / min(bf16_times),
            bf16_explicit_attention_sentences_per_s=len(texts) / min(explicit_times),
            bf16_fill_mask_ms=1000 * statistics.median(bf16_latency),
            bf16_min_cosine_to_fp32=bf16_cosine,
            bf16_max_score_gap=bf16_score_gap,
        )
    print(machine_description())
    print(
        f"{len(texts)} sentences (mean {result['mean_words']:.1f} words), preset {args.preset}, "
        f"{result['threads']} threads; "
        f"max |embedding difference| {check:.1e}"
    )
    print("\n| measure | bertforge | transformers | ratio |\n|---|---:|---:|---:|")
    ratio = result["embed_ratio"]
    print(f"| embeddings, sentences/s (--unpad auto) | {ours_rate:,.0f} | {hf_rate:,.0f} | {ratio:.2f}× |")
    for name, key in (("padded (never)", "padded"), ("unpadded (always)", "unpadded")):
        rate = result[f"bertforge_{key}_sentences_per_s"]
        print(f"| embeddings, sentences/s, {name} | {rate:,.0f} | {hf_rate:,.0f} | {rate / hf_rate:.2f}× |")
    print(f"padding in bertforge's length-sorted batches: {result['padding_share']:.1%} of their tokens")
    print(
        f"| fill-mask latency, ms (median) | {result['bertforge_fill_mask_ms']:.2f} | "
        f"{result['transformers_fill_mask_ms']:.2f} | "
        f"{result['fill_mask_ratio']:.2f}× |"
    )
    if bf16:
        print_bf16_rows(result, hf_rate)
    else:
        print("bf16: not measured (this CPU has no bf16 instructions; torch would emulate it)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


def padding_share(bert, texts: list[str], batch_size: int) -> float:
    """The share of padding among the tokens of the batches `Bert.embed` runs (its own length buckets)."""
    encoded = bert._batcher.encode(texts)
    lengths = [[len(encoded[i][0]) for i in bucket] for bucket in length_buckets(encoded, batch_size)]
    return 1 - sum(map(sum, lengths)) / sum(max(b) * len(b) for b in lengths)


def print_bf16_rows(result: dict, hf_rate: float) -> None:
    bf16_rate, explicit_rate = result["bf16_sentences_per_s"], result["bf16_explicit_attention_sentences_per_s"]
    print(
        f"| embeddings, bertforge bf16, sentences/s | {bf16_rate:,.0f} | {hf_rate:,.0f} | {bf16_rate / hf_rate:.2f}× |"
    )
    print(
        f"| embeddings, bertforge bf16 with explicit attention, sentences/s | {explicit_rate:,.0f} | {hf_rate:,.0f} | "
        f"{explicit_rate / hf_rate:.2f}× |"
    )
    print(
        f"| fill-mask latency, bertforge bf16, ms | {result['bf16_fill_mask_ms']:.2f} | "
        f"{result['transformers_fill_mask_ms']:.2f} | "
        f"{result['transformers_fill_mask_ms'] / result['bf16_fill_mask_ms']:.2f}× |"
    )
    print(
        f"bf16 against fp32: embeddings (1,000 sentences) min cosine {result['bf16_min_cosine_to_fp32']:.5f}; "
        f"fill-mask top-5 scores differ by at most {result['bf16_max_score_gap']:.1e}"
    )


@torch.inference_mode()
def hf_embed_first(hf_tokenizer, hf_model, texts: list[str]) -> np.ndarray:
    batch = hf_tokenizer(texts, padding=True, truncation=True, max_length=512, return_tensors="pt")
    return hf_model(**batch).last_hidden_state[:, 0].numpy()


if __name__ == "__main__":
    main()
