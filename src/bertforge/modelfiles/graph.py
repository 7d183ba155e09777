"""An exported graph is an input too: checked against its directory's config.json before ONNX Runtime runs it.

    check_graph(path, config, record, widths)   one line for a graph that is not what `bertforge export` writes for
                                                this model and the verb's head: its inputs (names, int64, rank),
                                                its outputs (names, rank, widths), the head kind the verb needs,
                                                weights that are numbers, no control flow, no foreign operator

A graph that passes runs bounded in time (onnx.py's `OnnxModel.run`): a watchdog terminates a run past RUN_SECONDS.
The graph file is parsed with the `onnx` package (the [onnx] extra); its tensors stored outside the file are never
followed (ONNX Runtime refuses such references outside the export itself).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError, one_line
from ..families.architectures import CHOICE, ENCODER, MASKED_LM, SEQUENCE, SPANS, TOKENS, Architecture

CONTROL_FLOW = {"Loop", "Scan", "If"}  # the exporter never writes them: a graph with one may never end
DOMAINS = {"", "ai.onnx", "com.microsoft"}  # ONNX's own operators, and the ones its int8 quantizer writes
KINDS = (MASKED_LM, SEQUENCE, TOKENS, SPANS, CHOICE, ENCODER)  # the built-in heads, whose outputs' ranks are known
RUN_SECONDS = 300.0  # the longest one run of a served graph may take before it is terminated


def check_graph(path: Path, config, record: Architecture, answers: str | None, widths: dict[str, int]) -> None:
    """Refuse, in one line naming the file, a graph at `path` that is not the export of a model of `config` for
    `record`'s head: `answers` is what config.json says the export answers; `widths` the last dimension each output
    must have where the model fixes it (logits: the labels; hidden states: the hidden size)."""
    onnx = _onnx()
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # a file that is not a graph: the protobuf parser's own errors
        raise UserError(f"{path}: not an ONNX graph ({one_line(e)[:200]})") from None
    if answers != record.answers:
        raise UserError(f"{path}: this exported graph answers {answers}; the verb needs {record.answers}")
    graph = model.graph
    _check_operators(path, graph)
    _check_inputs(path, graph, config, record)
    _check_outputs(path, graph, record, widths)
    _check_weights(path, graph, onnx)


def _onnx():
    try:
        import onnx
    except ImportError:
        raise UserError(
            "an exported model is checked with the onnx package, which is not installed: pip install 'bertforge[onnx]'"
        ) from None
    return onnx


def _check_operators(path: Path, graph) -> None:
    for node in graph.node:
        if node.op_type in CONTROL_FLOW or node.domain not in DOMAINS:
            where = f"{node.domain}." if node.domain else ""
            raise UserError(f"{path}: the graph holds a {where}{node.op_type} operator, which bertforge never exports")


def _dims(value) -> list[Any]:
    """A graph value's shape: each dimension's size, or its name where it is dynamic."""
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in value.type.tensor_type.shape.dim]


def graph_inputs(config) -> list[str]:
    """The inputs an exported graph of a model of `config` takes: token_type_ids only where it has segments to tell
    apart (RoBERTa's one segment row, ModernBERT's none, take none)."""
    return ["input_ids", "attention_mask"] + (["token_type_ids"] if config.type_vocab_size > 1 else [])


def _check_inputs(path: Path, graph, config, record: Architecture) -> None:
    initialised = {tensor.name for tensor in graph.initializer}
    inputs = [value for value in graph.input if value.name not in initialised]
    names = [value.name for value in inputs]
    expected = graph_inputs(config)
    if sorted(names) != sorted(expected):
        raise UserError(
            f"{path}: the graph takes {', '.join(names) or 'nothing'}; this model takes {', '.join(expected)}"
        )
    rank = 3 if record.answers == CHOICE else 2
    for value in inputs:
        if value.type.tensor_type.elem_type != 7 or len(_dims(value)) != rank:  # 7: int64
            raise UserError(f"{path}: the graph's {value.name} is not a rank-{rank} int64 input")


def _check_outputs(path: Path, graph, record: Architecture, widths: dict[str, int]) -> None:
    names = [value.name for value in graph.output]
    expected = list(record.outputs)
    pooled = record.answers == ENCODER and names == [*expected, "sentence_embedding"]
    if names != expected and not pooled:
        raise UserError(
            f"{path}: the graph answers {', '.join(names) or 'nothing'}; the verb reads {', '.join(expected)}"
        )
    for value in graph.output:
        dims = _dims(value)
        axes = record.outputs.get(value.name, ("batch_size",))  # the dynamic ones; a width follows, but for a
        rank = len(axes) + (record.answers not in (SPANS, CHOICE))  # span's logit or a choice's score
        if record.answers in KINDS and len(dims) != rank:
            raise UserError(f"{path}: the graph's {value.name} has rank {len(dims)}, not {rank}")
        width = widths.get(value.name)
        if width is not None and isinstance(dims[-1], int) and dims[-1] not in (0, width):
            raise UserError(f"{path}: the graph's {value.name} is {dims[-1]} wide; the model's config makes {width}")


def _check_weights(path: Path, graph, onnx) -> None:
    from onnx import numpy_helper

    for tensor in graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            continue  # not read here; ONNX Runtime refuses a reference outside the export
        values = numpy_helper.to_array(tensor)  # -inf is ours (a padded vocabulary's logits); NaN never is
        if values.dtype.kind == "f" and bool(np.isnan(values).any()):
            raise UserError(f"{path}: the graph's weight {tensor.name} holds values that are not numbers (NaN)")
