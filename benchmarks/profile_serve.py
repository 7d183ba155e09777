"""Where a batch of sentence embeddings spends its time: bertforge's PyTorch path (torch.profiler) against its fp32
ONNX export (ONNX Runtime's own profiler), the same model and the same padded batches, by kind of operation.

    python benchmarks/profile_serve.py --batches 20             # sorted by length, as `embed` batches
    python benchmarks/profile_serve.py --batches 20 --arrival   # in the order they come: more padding
    python benchmarks/profile_serve.py --model all-MiniLM-L6-v2 --int8 --batches 63   # the int8 export, by operator

The model is bench_serve.py's bertforge-saved one (MiniLM's size: 6 layers, width 384, random weights) with its
tokenizer; the batches are 32 of SST-2 dev's sentences each, sorted by length and padded to their longest, as
`embed` makes them (or, with --arrival, as they come). Every batch runs once unprofiled first (ONNX Runtime plans
its memory, oneDNN builds its kernels), then once profiled. ONNX Runtime runs the graph twice: set up as
serving/served.py sets it up, subnormal floats taken as zero, and with its default, keeping them.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serve import bertforge_model, texts, tokenizer_for  # noqa: E402

from common import machine_description  # noqa: E402

# ONNX Runtime's op types and torch's op names, in the kinds this table compares.
KINDS = {
    "matmul": ("MatMul", "Gemm", "FusedMatMul", "aten::addmm", "aten::mm", "aten::bmm", "aten::matmul", "aten::linear"),
    "attention": ("Softmax", "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::softmax", "aten::_softmax"),
    "layer norm": ("LayerNormalization", "SkipLayerNormalization", "aten::layer_norm", "aten::native_layer_norm"),
    "gelu": ("Gelu", "BiasGelu", "FastGelu", "Erf", "aten::gelu"),
}


def kind_of(name: str) -> str:
    return next((kind for kind, names in KINDS.items() if name in names), "other")


def padded_batches(
    tokenizer, sentences: list[str], size: int, count: int, arrival: bool = False
) -> list[dict[str, np.ndarray]]:
    """`count` batches of `size`, each padded to its longest: sorted by length first (as `embed` sorts what it is
    given), or, with `arrival`, in the order the sentences come (as a server batches requests)."""
    encodings = tokenizer.encode_batch(sentences)
    encodings = encodings if arrival else sorted(encodings, key=lambda e: len(e.ids))
    starts = range(0, len(encodings) - size + 1, size)
    batches = []
    for start in [starts[i * len(starts) // count] for i in range(min(count, len(starts)))]:  # short to long
        group = encodings[start : start + size]
        width = max(len(e.ids) for e in group)
        ids = np.zeros((len(group), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, e in enumerate(group):
            ids[row, : len(e.ids)], mask[row, : len(e.ids)] = e.ids, 1
        batches.append({"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
    return batches


def onnx_profile(
    graph: Path, batches: list[dict], zero_subnormals: bool = True, by_operator: bool = False
) -> tuple[float, dict[str, float]]:
    """(seconds for the batches, seconds by kind of op, or by operator) of the graph run as serving/served.py runs
    it, or, without `zero_subnormals`, keeping subnormal floats (ONNX Runtime's default)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if zero_subnormals:
        options.add_session_config_entry("session.set_denormal_as_zero", "1")
    plain = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    options.enable_profiling = True
    options.profile_file_prefix = str(graph.parent / "profile")  # beside the graph, in the scratch directory
    profiled = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    for feeds in batches:  # warm-up, and the unprofiled time
        profiled.run(None, feeds)
    started = time.perf_counter()
    for feeds in batches:
        plain.run(None, feeds)
    seconds = time.perf_counter() - started
    for feeds in batches:
        profiled.run(None, feeds)
    events = json.loads(Path(profiled.end_profiling()).read_text())  # deleted with the scratch directory
    kinds: dict[str, float] = collections.Counter()
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            name = event["args"]["op_name"]
            kinds[name if by_operator else kind_of(name)] += event["dur"] / 1e6 / 2  # two profiled passes
    return seconds, kinds


def torch_profile(model, batches: list[dict]) -> tuple[float, dict[str, float]]:
    tensors = [{k: torch.from_numpy(v) for k, v in feeds.items()} for feeds in batches]
    with torch.inference_mode():
        for feeds in tensors:
            model.embed(**feeds)
        started = time.perf_counter()
        for feeds in tensors:
            model.embed(**feeds)
        seconds = time.perf_counter() - started
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
            for feeds in tensors:
                model.embed(**feeds)
    kinds: dict[str, float] = collections.Counter()
    for event in profiler.key_averages():
        kinds[kind_of(event.key)] += event.self_cpu_time_total / 1e6
    return seconds, kinds


def profile_int8(model: Path, sentences: list[str], count: int) -> None:
    """The model's int8 export (`export --quantize int8`) on `count` sorted batches of 32: seconds by operator."""
    from bertforge.modelfiles.exported import GRAPH
    from bertforge.serving.export import export_model
    from bertforge.tokenizer import load_tokenizer

    batches = padded_batches(load_tokenizer(model), sentences, 32, count)
    with tempfile.TemporaryDirectory() as scratch:
        export_model(model, Path(scratch) / "int8", quantize="int8")
        seconds, operators = onnx_profile(Path(scratch) / "int8" / GRAPH, batches, by_operator=True)
    rows = sum(len(b["input_ids"]) for b in batches)
    print(f"{len(batches)} batches of 32: {seconds:.2f} s, {rows / seconds:,.0f} texts/s")
    print("| operator | s |\n|---|---:|")
    for name, spent in sorted(operators.items(), key=lambda item: -item[1]):
        print(f"| {name} | {spent:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="../shared/data", help="for SST-2 dev's sentences and Gutenberg's text")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument(
        "--arrival", action="store_true", help="batch the sentences in the order they come, not sorted by length"
    )
    parser.add_argument("--model", help="a sentence-embedding model directory (default: one built here)")
    parser.add_argument("--int8", action="store_true", help="profile the int8 export alone, by ONNX operator")
    args = parser.parse_args()
    torch.set_num_threads(2)
    print(machine_description(), flush=True)
    from bertforge.model.heads import BertForSentenceEmbedding
    from bertforge.modelfiles.directory import load_model
    from bertforge.modelfiles.exported import GRAPH
    from bertforge.serving.export import export_model

    data = Path(args.data)
    sentences = texts(data)
    if args.int8:
        profile_int8(Path(args.model), sentences, args.batches)
        return
    tokenizer = tokenizer_for(sentences, data)
    with tempfile.TemporaryDirectory() as scratch:
        model_dir = bertforge_model(Path(scratch), tokenizer)
        export_model(model_dir, Path(scratch) / "onnx")
        model = load_model(BertForSentenceEmbedding, model_dir)
        batches = padded_batches(tokenizer, sentences, 32, args.batches, args.arrival)
        onnx_seconds, onnx_kinds = onnx_profile(Path(scratch) / "onnx" / GRAPH, batches)
        kept_seconds, kept_kinds = onnx_profile(Path(scratch) / "onnx" / GRAPH, batches, zero_subnormals=False)
        torch_seconds, torch_kinds = torch_profile(model, batches)
    print(
        f"{len(batches)} batches of 32: PyTorch {torch_seconds:.2f} s, ONNX Runtime fp32 {onnx_seconds:.2f} s "
        f"({kept_seconds:.2f} s keeping subnormal floats)"
    )
    print("| kind | PyTorch s | ONNX Runtime s | ONNX Runtime, subnormals kept, s |\n|---|---:|---:|---:|")
    for kind in [*KINDS, "other"]:
        seconds = (torch_kinds.get(kind, 0), onnx_kinds.get(kind, 0), kept_kinds.get(kind, 0))
        print(f"| {kind} | " + " | ".join(f"{s:.2f}" for s in seconds) + " |")


if __name__ == "__main__":
    main()
