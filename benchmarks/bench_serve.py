"""Serving sentence embeddings: bertforge's PyTorch path and its ONNX exports against sentence-transformers and the
`transformers` pipeline, in one run on one CPU.

    python benchmarks/bench_serve.py --rounds 3                     # the two models built here
    python benchmarks/bench_serve.py --model all-MiniLM-L6-v2       # a sentence-embedding model you have
    python benchmarks/bench_serve.py --family mpnet --rounds 1      # all-mpnet-base-v2's layout at that size

Two models of all-MiniLM-L6-v2's size (6 layers, width 384, a 30k WordPiece trained here on the texts and some of
Gutenberg's, so that English is cut into realistic pieces; random weights: speed does not depend on them): one laid
out as all-MiniLM-L6-v2 is (a BertModel with mean pooling and Normalize, saved by `SentenceTransformer.save`), one
saved by bertforge (as `finetune --task sentence-similarity` saves one: mean pooling, its modules written). Each
contender has the model loaded and embeds the same texts, short (SST-2 dev's 872 sentences, repeated to 2,000) and
long (500 of them, each repeated to about 200 words), at batch 32 (texts a second, the median of --rounds) and at
batch 1 (the median milliseconds a text, over 100):

    bertforge fp32 / bf16     Bert.embed, PyTorch, --precision fp32 / bf16
    bertforge onnx fp32/int8  Bert.embed on `bertforge export`'s directory (ONNX Runtime), int8 by --quantize int8
    st torch                  SentenceTransformer.encode (PyTorch backend)
    pipeline                  transformers' pipeline("feature-extraction"), mean-pooled over each text's tokens
                              and normalised by hand
    st onnx, O3, int8         sentence-transformers' ONNX backends (benchmarks/st_backends.py), with --st-python:
                              the python of an environment that has them (benchmarks/st_env.sh builds one)
    ct2 int8                  CTranslate2's int8 encoder, in the same environment

Every contender's vectors are checked against sentence-transformers' PyTorch ones (median and least cosine over
every text), so no speed is bought with a wrong answer. The run first measures the CPU's matrix-product peaks at the
model's feed-forward shape (fp32 and bf16 in PyTorch, int8 in ONNX Runtime's integer product, u8 by s8 as its
quantizer writes), and gives each contender's tokens a second as a share of its precision's peak: the weight
products a token costs (2 x the encoder layers' weights) times its tokens a second, over the peak.

    python benchmarks/bench_serve.py --model all-MiniLM-L6-v2 --lengths short --st-python .st-env/bin/python
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from common import machine_description  # noqa: E402

N_TEXTS, LONG_TEXTS, LATENCY_TEXTS = 2000, 500, 100
MAX_SEQ_LENGTH = 256  # all-MiniLM-L6-v2's max_seq_length


def texts(data: Path) -> list[str]:
    path = data / "glue" / "SST-2" / "dev.tsv"
    if path.is_file():
        with open(path, encoding="utf-8", newline="") as f:
            found = [row["sentence"] for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
    else:
        from released import sentences

        found = sentences(N_TEXTS, seed=1)
    return [found[i % len(found)] for i in range(N_TEXTS)]


def tokenizer_for(texts: list[str], data: Path):
    """A 30k WordPiece trained on the benchmark's texts and, where --data has them, some of Gutenberg's: English cut
    into about the pieces a released BERT's vocabulary cuts it into, so that lengths are realistic."""
    from bertforge.tokenizer import train_tokenizer

    books = data / "gutenberg" / "train.txt"
    extra = books.read_text(encoding="utf-8")[:20_000_000].splitlines() if books.is_file() else []
    return train_tokenizer(texts + extra, vocab_size=30522)


def released_layout(root: Path, tokenizer) -> Path:
    """A random MiniLM-sized sentence-embedding model saved as all-MiniLM-L6-v2 is: a BertModel of 6 layers, width
    384, mean pooling and Normalize (`SentenceTransformer.save`), its tokenizer.json padding to 128."""
    import transformers

    from released import mean_normalized, padded

    config = transformers.BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=384, num_hidden_layers=6,
                                     num_attention_heads=12, intermediate_size=1536)  # fmt: skip
    encoder = root / "encoder"
    transformers.BertModel(config).save_pretrained(encoder)
    fast = transformers.BertTokenizerFast(tokenizer_object=padded(tokenizer), model_max_length=256)
    fast.save_pretrained(encoder)
    return mean_normalized(encoder, root / "released", 384, MAX_SEQ_LENGTH)


def mpnet_layout(root: Path, tokenizer) -> Path:
    """The same size laid out as all-mpnet-base-v2 is: an MPNetModel (its relative attention bias shared by the
    layers), MPNet's tokenizer class over the same pieces, mean pooling and Normalize (`SentenceTransformer.save`)."""
    import transformers

    from released import mean_normalized

    pieces = [t for t, _ in sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])]
    pieces = [t for t in pieces if t not in ("[PAD]", "[CLS]", "[SEP]", "[MASK]")]
    vocab = {token: i for i, token in enumerate(["<s>", "<pad>", "</s>", "<unk>", *pieces, "<mask>"])}
    config = transformers.MPNetConfig(
        vocab_size=len(vocab), hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536,
        max_position_embeddings=514,
    )  # fmt: skip
    encoder = root / "mpnet-encoder"
    transformers.MPNetModel(config).save_pretrained(encoder)
    transformers.MPNetTokenizer(vocab=vocab, model_max_length=MAX_SEQ_LENGTH).save_pretrained(encoder)
    return mean_normalized(encoder, root / "mpnet", 384, MAX_SEQ_LENGTH)


def bertforge_model(root: Path, tokenizer) -> Path:
    """A sentence model of the same size saved by bertforge, as `finetune --task sentence-similarity` saves one: a
    BERT encoder with mean pooling and the modules sentence-transformers reads."""
    from bertforge import ModelConfig, save_model
    from bertforge.model.heads import BertForSentenceEmbedding

    config = ModelConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=384, num_layers=6, num_heads=12,
                         intermediate_size=1536, max_position_embeddings=512)  # fmt: skip
    save_model(BertForSentenceEmbedding(config).eval(), root / "bertforge", tokenizer)
    return root / "bertforge"


def embedder(bert):
    return lambda batch, size: bert.embed(batch, batch_size=size)


def matmul_peaks(hidden: int, inner: int, rows: int = 4096, repeats: int = 20) -> dict[str, float]:
    """The CPU's matrix-product peaks, in billions of multiply-adds x 2 a second, at the model's feed-forward shape:
    (rows, hidden) by (hidden, inner), the best of three timings of `repeats` products."""
    import onnxruntime as ort
    import torch
    from onnx import TensorProto, helper, numpy_helper

    flops = 2 * rows * hidden * inner * repeats

    def best(run) -> float:
        run()
        times = []
        for _ in range(3):
            started = time.perf_counter()
            for _ in range(repeats):
                run()
            times.append(time.perf_counter() - started)
        return flops / min(times) / 1e9

    peaks = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        a, b = torch.randn(rows, hidden, dtype=dtype), torch.randn(hidden, inner, dtype=dtype)
        peaks[name] = best(lambda a=a, b=b: torch.mm(a, b))
    weights = numpy_helper.from_array(np.random.randint(-127, 128, (hidden, inner), dtype=np.int8), "b")
    node = helper.make_node("MatMulInteger", ["a", "b"], ["y"])
    graph = helper.make_graph(
        [node], "peak", [helper.make_tensor_value_info("a", TensorProto.UINT8, [rows, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [rows, inner])], [weights],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feed = {"a": np.random.randint(0, 256, (rows, hidden), dtype=np.uint8)}
    peaks["int8"] = best(lambda: session.run(None, feed))
    return peaks


def precision_of(name: str) -> str:
    return "int8" if "int8" in name else "bf16" if "bf16" in name else "fp32"


def weight_flops(model: Path) -> tuple[float, int, int]:
    """(the weight products' FLOPs a token costs in the encoder, its hidden width, its feed-forward width)."""
    config = json.loads((model / "config.json").read_text())
    hidden, inner = config["hidden_size"], config["intermediate_size"]
    return 2 * config["num_hidden_layers"] * (4 * hidden * hidden + 2 * hidden * inner), hidden, inner


def st_backends(st_python: str, model: Path, batch: list[str], scratch: Path, rounds: int) -> dict[str, tuple]:
    """name -> (texts/s, vectors) of sentence-transformers' ONNX backends, run in their own environment."""

    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "texts.json").write_text(json.dumps(batch), encoding="utf-8")
    script = Path(__file__).resolve().parent / "st_backends.py"
    done = subprocess.run(
        [st_python, str(script), "--model", str(model), "--texts", str(scratch / "texts.json"), "--out",
         str(scratch), "--rounds", str(rounds)], capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        print(f"st onnx backends: not run ({done.stderr.strip().splitlines()[-1][:200]})", flush=True)
        return {}
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    for row in rows:
        if "error" in row:
            print(f"{row['name']}: not run ({row['error']})", flush=True)
    return {row["name"]: (row["rate"], np.load(row["vectors"])) for row in rows if "error" not in row}


def contenders(model: Path, scratch: Path) -> dict:
    """name -> embed(list of texts, batch size) -> (N, D) array, each with its model loaded."""
    import bertforge
    from bertforge.serving.export import export_model

    scratch.mkdir(parents=True, exist_ok=True)
    export_model(model, scratch / "onnx-fp32")
    export_model(model, scratch / "onnx-int8", quantize="int8", accept_quality_loss=True)  # its cosine is in the table
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
    import transformers

    extractor = transformers.pipeline("feature-extraction", model=str(model), device=-1)

    def pipeline(batch, size):
        # A batch's states come back padded to its longest text: the mean is over each text's own tokens, counted
        # by the pipeline's tokenizer (as a user must, the pipeline giving no mask).
        cut = {"truncation": True, "max_length": MAX_SEQ_LENGTH}  # where sentence-transformers cuts
        lengths = [len(ids) for ids in extractor.tokenizer(batch, **cut)["input_ids"]]
        out = []
        for states, length in zip(extractor(batch, batch_size=size, tokenize_kwargs=cut), lengths):
            vector = np.asarray(states)[0][:length].mean(0)
            out.append(vector / np.linalg.norm(vector))
        return np.stack(out)

    run["pipeline"] = pipeline
    return run


def race(model: Path, scratch: Path, texts: dict[str, list[str]], rounds: int, st_python: str | None) -> None:
    """Every contender on `model`, a line each as it is measured: texts and tokens a second at batch 32, the share
    of its precision's peak, milliseconds a text at batch 1, and its vectors' cosine to sentence-transformers'."""
    from bertforge.tokenizer import load_tokenizer

    flops, hidden, inner = weight_flops(model)
    peaks = matmul_peaks(hidden, inner)
    print("peaks (GFLOP/s, GOPS for int8), the model's feed-forward shape: "
          + ", ".join(f"{k} {v:,.0f}" for k, v in peaks.items()), flush=True)  # fmt: skip
    tokenizer = load_tokenizer(model)
    run = contenders(model, scratch)
    for length, batch in texts.items():
        tokens = sum(min(len(e.ids), MAX_SEQ_LENGTH) for e in tokenizer.encode_batch(batch))
        reference = run["st torch"](batch, 32)
        measured = {}
        for name, embed in run.items():
            embed(batch[:64], 32)  # warm-up
            seconds = []
            for _ in range(rounds):
                started = time.perf_counter()
                vectors = embed(batch, 32)
                seconds.append(time.perf_counter() - started)
            latency = []
            for text in batch[:LATENCY_TEXTS]:
                started = time.perf_counter()
                embed([text], 1)
                latency.append(time.perf_counter() - started)
            measured[name] = (len(batch) / statistics.median(seconds), vectors, 1000 * statistics.median(latency))
        if st_python:
            for name, (rate, vectors) in st_backends(st_python, model, batch, scratch / f"st-{length}", rounds).items():
                measured[name] = (rate, vectors, float("nan"))
        for name, (rate, vectors, latency) in measured.items():
            cosine = (vectors * reference).sum(1) / np.linalg.norm(vectors, axis=1) / np.linalg.norm(reference, axis=1)
            per_second, precision = rate * tokens / len(batch), precision_of(name)
            share = per_second * flops / 1e9 / peaks[precision]
            print(f"| {model.name} | {length} | {name} | {rate:,.0f} | {per_second:,.0f} | {share:.0%} of "
                  f"{precision} | {latency:.1f} | {np.median(cosine):.4f} / {cosine.min():.4f} |",
                  flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a sentence-embedding model directory (default: the two built here)")
    parser.add_argument("--data", default="../shared/data", help="for SST-2 dev's sentences and Gutenberg's text")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--family", choices=["bert", "mpnet"], default="bert", help="the models built here: BERT's "
                        "two layouts, or all-mpnet-base-v2's at the same size")  # fmt: skip
    parser.add_argument("--lengths", choices=["short", "long", "both"], default="both")
    parser.add_argument("--st-python", help="python of an environment with sentence-transformers' ONNX backends "
                        "(benchmarks/st_env.sh), to race them too")  # fmt: skip
    args = parser.parse_args()
    print(machine_description(), flush=True)
    print("| model | texts | contender | texts/s, batch 32 | tokens/s | share of peak | ms a text, batch 1 | "
          "cosine to st torch, median / least |\n|---|---|---|---:|---:|---:|---:|---:|", flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        short = texts(Path(args.data))
        long = [" ".join([t] * max(1, 200 // max(len(t.split()), 1))) for t in short[:LONG_TEXTS]]
        lengths = {"short": short, "long": long}
        lengths = lengths if args.lengths == "both" else {args.lengths: lengths[args.lengths]}
        if args.model:
            models = [Path(args.model)]
        else:
            tokenizer = tokenizer_for(short, Path(args.data))
            if args.family == "mpnet":
                models = [mpnet_layout(scratch, tokenizer)]
            else:
                models = [released_layout(scratch, tokenizer), bertforge_model(scratch, tokenizer)]
        for model in models:
            race(model, scratch / f"{model.name}-exports", lengths, args.rounds, args.st_python)


if __name__ == "__main__":
    main()
