"""sentence-transformers' ONNX backends on one model, timed as bench_serve.py times its contenders. bench_serve.py
runs it with --st-python in an environment of their own (benchmarks/st_env.sh builds it): their ONNX backend needs
optimum, which pins an older `transformers` than bertforge's tests use.

    python benchmarks/st_backends.py --model MODEL --texts texts.json --out scratch --rounds 3

The contenders, each exported or quantized as sentence-transformers' documentation says, into a copy of the model:

    st onnx             SentenceTransformer(backend="onnx"): optimum's fp32 export
    st onnx O3          export_optimized_onnx_model(..., "O3"): ONNX Runtime's fused attention, layer norms, GELU
    st onnx int8        export_dynamic_quantized_onnx_model(..., "avx512_vnni"): its recommended int8 on this CPU
    st onnx O3 int8     the O3 graph, quantized the same way
    ct2 int8            CTranslate2's int8 encoder (a hand-written C++ transformer), converted by its own converter;
                        mean pooling and Normalize in numpy, as all-MiniLM-L6-v2's modules pool

A line of JSON each: name, texts/s at --batch (median of --rounds), and the vectors' file (.npy) for the check.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from pathlib import Path

import numpy as np


def loaders(model: Path):
    """name -> a function that builds that contender's SentenceTransformer (exporting what it needs first)."""
    from sentence_transformers import (
        SentenceTransformer,
        export_dynamic_quantized_onnx_model,
        export_optimized_onnx_model,
    )

    def onnx(file_name=None):
        kwargs = {"model_kwargs": {"file_name": file_name}} if file_name else {}
        return SentenceTransformer(str(model), device="cpu", backend="onnx", **kwargs)

    def o3():
        export_optimized_onnx_model(onnx(), "O3", str(model))
        return onnx("onnx/model_O3.onnx")

    def int8():
        export_dynamic_quantized_onnx_model(onnx(), "avx512_vnni", str(model))
        return onnx("onnx/model_qint8_avx512_vnni.onnx")

    def o3_int8():
        export_dynamic_quantized_onnx_model(onnx("onnx/model_O3.onnx"), "avx512_vnni", str(model), "O3_qint8")
        return onnx("onnx/model_O3_qint8.onnx")

    def ct2_int8():
        return CTranslate2Encoder(model)

    return {"st onnx": onnx, "st onnx O3": o3, "st onnx int8": int8, "st onnx O3 int8": o3_int8, "ct2 int8": ct2_int8}


class CTranslate2Encoder:
    """CTranslate2's int8 encoder (its own C++ transformer, converted by its `transformers` converter as its
    documentation shows), with the model's mean pooling and Normalize done here in numpy: a contender with an
    `encode` like SentenceTransformer's."""

    def __init__(self, model: Path):
        import ctranslate2
        from ctranslate2.converters import TransformersConverter
        from transformers import AutoTokenizer

        converted = model.parent / "ct2-int8"
        if not converted.exists():
            TransformersConverter(str(model)).convert(str(converted), quantization="int8")
        self.encoder = ctranslate2.Encoder(str(converted), device="cpu", compute_type="int8", intra_threads=2)
        self.tokenizer = AutoTokenizer.from_pretrained(str(model))
        self.max_length = json.loads((model / "sentence_bert_config.json").read_text())["max_seq_length"]

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        vectors = []
        for start in range(0, len(texts), batch_size):
            ids = self.tokenizer(texts[start : start + batch_size], truncation=True, max_length=self.max_length)
            ids = ids["input_ids"]
            hidden = np.array(self.encoder.forward_batch(ids).last_hidden_state)  # (B, T, H), padded
            lengths = np.array([len(row) for row in ids])
            mask = np.arange(hidden.shape[1])[None, :] < lengths[:, None]  # (B, T)
            mean = (hidden * mask[..., None]).sum(1) / lengths[:, None]  # (B, H)
            vectors.append(mean / np.linalg.norm(mean, axis=1, keepdims=True))
        return np.concatenate(vectors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a sentence-transformers model directory (copied, not changed)")
    parser.add_argument("--texts", required=True, help="a JSON list of the texts to embed")
    parser.add_argument("--out", required=True, help="scratch directory: the model's copy and the vectors")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    texts = json.loads(Path(args.texts).read_text(encoding="utf-8"))
    out = Path(args.out)
    model = out / "st-model"
    if not model.exists():
        shutil.copytree(args.model, model)
    for name, load in loaders(model).items():
        try:
            st = load()
        except Exception as e:  # one backend's failure (its quantizer on a fused graph) leaves the others to run
            print(json.dumps({"name": name, "error": str(e).splitlines()[0][:200]}), flush=True)
            continue
        vectors = st.encode(texts, batch_size=args.batch)  # warm-up, and the answer
        seconds = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            st.encode(texts, batch_size=args.batch)
            seconds.append(time.perf_counter() - started)
        path = out / f"{name.replace(' ', '-')}.npy"
        np.save(path, vectors)
        print(
            json.dumps({"name": name, "rate": len(texts) / statistics.median(seconds), "vectors": str(path)}),
            flush=True,
        )


if __name__ == "__main__":
    main()
