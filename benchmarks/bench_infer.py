"""Inference speed: bertforge against `transformers` on the same weights and tokenizer.

    python benchmarks/bench_infer.py --preset mini

- embeddings: sentences/s over 10,000 sentences of mixed length ([CLS] pooling),
  bertforge's `Bert.embed` (length-bucketed batches) against `transformers.BertModel`
  with its fast tokenizer, batches in input order padded to the longest (the usual loop);
- fill-mask: median latency of one sentence, `Bert.fill_mask` against `pipeline("fill-mask")`.

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
from pathlib import Path

import numpy as np
import torch

from bertforge import BertForPreTraining, ModelConfig, save_model
from bertforge.corpus import read_paragraphs, split_sentences
from bertforge.demo import asset_path
from bertforge.inference import load
from bertforge.tokenizer import train_tokenizer


def sentences(n: int) -> list[str]:
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
    parser.add_argument("--json", help="also write results here")
    args = parser.parse_args()
    import transformers

    texts = sentences(args.sentences)
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
    ours_times, hf_times = [], []
    for _ in range(args.repeats):  # alternate A B A B
        ours_times += timed(lambda: ours.embed(texts, batch_size=args.batch_size), 1)
        hf_times += timed(hf_embed, 1)
    ours_rate, hf_rate = len(texts) / min(ours_times), len(texts) / min(hf_times)

    probe = "He opened the [MASK] and went out into the street."
    ours.fill_mask(probe)
    pipe(probe)
    ours_latency, hf_latency = [], []
    for _ in range(args.latency_calls):
        ours_latency += timed(lambda: ours.fill_mask(probe, top_k=5), 1)
        hf_latency += timed(lambda: pipe(probe), 1)
    result = {
        "preset": args.preset,
        "threads": torch.get_num_threads(),
        "sentences": len(texts),
        "mean_words": statistics.mean(lengths),
        "max_abs_embedding_difference": float(check),
        "bertforge_sentences_per_s": ours_rate,
        "transformers_sentences_per_s": hf_rate,
        "embed_ratio": ours_rate / hf_rate,
        "bertforge_fill_mask_ms": 1000 * statistics.median(ours_latency),
        "transformers_fill_mask_ms": 1000 * statistics.median(hf_latency),
    }
    result["fill_mask_ratio"] = result["transformers_fill_mask_ms"] / result["bertforge_fill_mask_ms"]
    print(
        f"{len(texts)} sentences (mean {result['mean_words']:.1f} words), preset {args.preset}, "
        f"{result['threads']} threads; "
        f"max |embedding difference| {check:.1e}"
    )
    print("\n| measure | bertforge | transformers | ratio |\n|---|---:|---:|---:|")
    print(f"| embeddings, sentences/s | {ours_rate:,.0f} | {hf_rate:,.0f} | {result['embed_ratio']:.2f}× |")
    print(
        f"| fill-mask latency, ms (median) | {result['bertforge_fill_mask_ms']:.2f} | "
        f"{result['transformers_fill_mask_ms']:.2f} | "
        f"{result['fill_mask_ratio']:.2f}× |"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


@torch.inference_mode()
def hf_embed_first(hf_tokenizer, hf_model, texts: list[str]) -> np.ndarray:
    batch = hf_tokenizer(texts, padding=True, truncation=True, max_length=512, return_tensors="pt")
    return hf_model(**batch).last_hidden_state[:, 0].numpy()


if __name__ == "__main__":
    main()
