"""Serving sentence embeddings: bertforge's PyTorch path and its ONNX exports against sentence-transformers and the
`transformers` pipeline, in one run on one CPU.

    python benchmarks/bench_serve.py --rounds 3                     # a MiniLM-sized model built here
    python benchmarks/bench_serve.py --model all-MiniLM-L6-v2       # a released sentence-embedding model

The model is a sentence-embedding BERT laid out as all-MiniLM-L6-v2 (a BertModel of 6 layers, width 384, mean
pooling and Normalize, saved by `SentenceTransformer.save`; random weights unless --model names one: speed does
not depend on them). Each contender has the model loaded and embeds the same 2,000 sentences (SST-2 dev's, or
generated ones), short (as written) and long (each repeated to ~200 tokens), at batch 32 and batch 1 (latency, on
the first 200); the median of --rounds, contenders alternating:

    bertforge fp32 / bf16     Bert.embed, PyTorch, --precision fp32 / bf16
    bertforge onnx fp32/int8  Bert.embed on `bertforge export`'s directory (ONNX Runtime), int8 by --quantize int8
    st torch                  SentenceTransformer.encode (PyTorch backend)
    st onnx                   SentenceTransformer(backend="onnx") on the fp32 export, where optimum is installed
    pipeline                  transformers' pipeline("feature-extraction"), mean-pooled and normalised by hand

Every contender's vectors are checked against sentence-transformers' (cosine), so no speed is bought with a wrong
answer.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from common import machine_description  # noqa: E402

N_TEXTS, LATENCY_TEXTS = 2000, 200


def texts(data: Path) -> list[str]:
    path = data / "glue" / "SST-2" / "dev.tsv"
    if path.is_file():
        with open(path, encoding="utf-8", newline="") as f:
            found = [row["sentence"] for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
    else:
        from released import sentences

        found = sentences(N_TEXTS, seed=1)
    return [found[i % len(found)] for i in range(N_TEXTS)]


def released_layout(root: Path) -> Path:
    """A random MiniLM-sized sentence-embedding model, saved as all-MiniLM-L6-v2 is, with a 30k WordPiece."""
    import transformers
    from sentence_transformers import SentenceTransformer

    from bertforge.tokenizer import train_tokenizer

    from released import padded, sentence_transformers_modules

    words = [f"{a}{b}" for a in "bcdfghjklmnprstvwz" for b in ("at", "en", "ing", "on", "le", "er", "ous")]
    tok = padded(train_tokenizer([" ".join(words[i:] + words[:i]) for i in range(len(words))], vocab_size=30522))
    config = transformers.BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=384, num_hidden_layers=6,
                                     num_attention_heads=12, intermediate_size=1536)  # fmt: skip
    encoder = root / "encoder"
    transformers.BertModel(config).save_pretrained(encoder)
    transformers.BertTokenizerFast(tokenizer_object=tok, model_max_length=256).save_pretrained(encoder)
    modules = sentence_transformers_modules()
    pipeline = [
        modules.Transformer(str(encoder), max_seq_length=256),
        modules.Pooling(384, "mean"),
        modules.Normalize(),
    ]
    SentenceTransformer(modules=pipeline, device="cpu").save(str(root / "model"))
    return root / "model"


def embedder(bert):
    return lambda batch, size: bert.embed(batch, batch_size=size)


def contenders(model: Path, scratch: Path) -> dict:
    """name -> embed(list of texts, batch size) -> (N, D) array, each with its model loaded."""
    import bertforge
    from bertforge.deploy.export import export_model

    export_model(model, scratch / "onnx-fp32")
    export_model(model, scratch / "onnx-int8", quantize="int8")
    loaded = {
        "bertforge fp32": bertforge.load(model, precision="fp32"),
        "bertforge bf16": bertforge.load(model, precision="bf16"),
        "bertforge onnx fp32": bertforge.load(scratch / "onnx-fp32"),
        "bertforge onnx int8": bertforge.load(scratch / "onnx-int8"),
    }
    run = {name: embedder(bert) for name, bert in loaded.items()}
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(model), device="cpu")
    run["st torch"] = lambda batch, size: st.encode(batch, batch_size=size)
    try:
        st_onnx = SentenceTransformer(str(scratch / "onnx-fp32"), device="cpu", backend="onnx")
        run["st onnx"] = lambda batch, size: st_onnx.encode(batch, batch_size=size)
    except Exception as e:  # its ONNX backend needs optimum, which does not install beside transformers 5
        print(f"st onnx: not run ({str(e).splitlines()[0][:120]})", flush=True)
    import transformers

    extractor = transformers.pipeline("feature-extraction", model=str(model), device=-1)

    def pipeline(batch, size):
        out = []
        for states in extractor(batch, batch_size=size, truncation=True):
            vector = np.asarray(states)[0].mean(0)
            out.append(vector / np.linalg.norm(vector))
        return np.stack(out)

    run["pipeline"] = pipeline
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a sentence-embedding model directory (default: one built here)")
    parser.add_argument("--data", default="../shared/data", help="for SST-2 dev's sentences")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(machine_description(), flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        model = Path(args.model) if args.model else released_layout(scratch)
        short = texts(Path(args.data))
        long = [" ".join([t] * max(1, 200 // max(len(t.split()), 1)))[:1200] for t in short]
        run = contenders(model, scratch)
        reference = {"short": run["st torch"](short, 32), "long": run["st torch"](long, 32)}
        rows = []
        for length, batch in (("short", short), ("long", long)):
            for name, embed in run.items():
                vectors = embed(batch[:64], 32)  # warm-up; and the answer, checked
                cosine = float(np.min((vectors * reference[length][:64]).sum(1) / np.linalg.norm(vectors, axis=1)))
                seconds = []
                for _ in range(args.rounds):
                    started = time.perf_counter()
                    embed(batch, 32)
                    seconds.append(time.perf_counter() - started)
                latency = []
                for text in batch[:LATENCY_TEXTS]:
                    started = time.perf_counter()
                    embed([text], 1)
                    latency.append(time.perf_counter() - started)
                rate = len(batch) / statistics.median(seconds)
                rows.append((length, name, rate, 1000 * statistics.median(latency), cosine))
                print(f"| {length} | {name} | {rate:,.0f} | {rows[-1][3]:.1f} | {cosine:.4f} |", flush=True)
    torch.set_num_threads(torch.get_num_threads())


if __name__ == "__main__":
    main()
