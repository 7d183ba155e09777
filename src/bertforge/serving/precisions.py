"""The precisions an export is written in, one record each: how the model is readied, how the traced graph becomes
that precision, and what the export's check must show before it is written.

    PRECISIONS.get("int8")    what `bertforge export --quantize int8` does

fp32 is the traced graph as it is, refused past TOLERANCE from PyTorch. int8 moves activation outliers into the
weights (smoothing.py), fuses BERT's attention into ONNX Runtime's operator (fused.py), quantises dynamically
(int8 weights, activations quantised as they come) and is held to a quality gate on the check texts.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import warnings
from pathlib import Path

from ..errors import UserError, one_line
from ..registry import Registry
from .fused import fuse_attention
from .smoothing import smooth_activations

TOLERANCE = 1e-3  # the largest difference a float graph may have from PyTorch, on any output
# The int8 graph's quality gate, against the PyTorch model on the check texts: what an export must keep to be written
# without --accept-quality-loss. ONNX Runtime's dynamic int8 keeps all-MiniLM-L6-v2's vectors at median 0.992, least
# 0.964 on SST-2 dev (experiments/export.md), and its SST-2 labels within 0.4 points: a graph below these has lost more
# than quantisation usually costs (an outlier layer, a model trained in another range).
GATE_MEDIAN_COSINE, GATE_LEAST_COSINE, GATE_AGREEMENT = 0.99, 0.95, 0.95


class Precision:
    """A float graph, as traced: nothing readied, nothing converted, and within TOLERANCE of PyTorch."""

    name = "fp32"
    quantized = False  # whether its answers are compared as answers (agreement, cosine), not to the last digit

    def ready(self, model, calibrate) -> list:
        """Ready the model before it is traced (`calibrate()` runs it on the check texts); the attention layers it
        wrapped in a fused operator, whose graph needs that operator's domain."""
        return []

    def convert(self, path: Path) -> None:
        """Turn the traced graph at `path` into this precision, in place."""

    def short_of(self, max_difference: float, agreement: float | None, cosine) -> list[str]:
        """What of the check falls short of this precision's gate, each said with its figure; empty when it passes."""
        if max_difference > TOLERANCE:
            return [f"the largest difference from PyTorch {max_difference:.2e} > {TOLERANCE:g}"]
        return []


class Int8(Precision):
    """Dynamic int8 quantisation: int8 weights for every matrix product, activations quantised per batch as they
    come (onnxruntime.quantization), on VNNI's int8 dot products where the CPU has them."""

    name, quantized = "int8", True

    def ready(self, model, calibrate) -> list:
        smooth_activations(model, calibrate)  # outliers moved into the weights
        return fuse_attention(model)  # attention as one operator, which the quantizer makes QAttention

    def convert(self, path: Path) -> None:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        with tempfile.TemporaryDirectory(dir=path.parent) as scratch, _quiet_root_logger():
            quantized = Path(scratch) / "model.onnx"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    quantize_dynamic(str(path), str(quantized), weight_type=QuantType.QInt8, per_channel=True)
                except Exception as e:  # the quantizer's own assertions: weights it finds no int8 scale for
                    raise UserError(
                        f"ONNX Runtime's quantizer could not make this model int8 ({one_line(e)[:120]}): nothing was "
                        "written; export it in fp32 (no --quantize)"
                    ) from None
            quantized.replace(path)

    def short_of(self, max_difference: float, agreement: float | None, cosine) -> list[str]:
        short = []
        if cosine is not None and cosine[0] < GATE_MEDIAN_COSINE:
            short.append(f"vectors' median cosine {cosine[0]:.4f} < {GATE_MEDIAN_COSINE}")
        if cosine is not None and cosine[1] < GATE_LEAST_COSINE:
            short.append(f"least cosine {cosine[1]:.4f} < {GATE_LEAST_COSINE}")
        if agreement is not None and agreement < GATE_AGREEMENT:
            short.append(f"answers agreeing with PyTorch's {agreement:.1%} < {GATE_AGREEMENT:.0%}")
        return short


PRECISIONS: Registry[Precision] = Registry("export precision", Precision)
for precision in (Precision(), Int8()):
    PRECISIONS.register(precision)
QUANTIZATIONS = tuple(p.name for p in PRECISIONS.records() if p.quantized)  # --quantize's choices


@contextlib.contextmanager
def _quiet_root_logger():
    """The quantizer's advice goes to the root logger as a warning for every export; a user is told the result."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)
