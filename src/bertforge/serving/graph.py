"""An exported graph is an input too: checked against its directory's config.json before ONNX Runtime runs it.

    check_graph(path, config, record, facts, widths)
        one line for a graph that is not what `bertforge export` wrote for this model and the verb's head: its size
        (protobuf's 2 GB, and its config's weights), its digest (the one the export recorded), its inputs (names,
        int64, rank), its outputs (names, rank, widths), the head kind the verb needs, weights that are numbers,
        a token table of config.json's shape, no control flow, no foreign operator

A graph that passes runs bounded in time (served.py's `ServedGraph.run`): a watchdog terminates a run past RUN_SECONDS.
The graph file is parsed with the `onnx` package (the [onnx] extra); its tensors stored outside the file are never
followed (ONNX Runtime refuses such references outside the export itself).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError, one_line
from ..families.architectures import Architecture
from ..fileio import sha256_of
from .kinds import kind_of

CONTROL_FLOW = {"Loop", "Scan", "If"}  # the exporter never writes them: a graph with one may never end
DOMAINS = {"", "ai.onnx", "com.microsoft"}  # ONNX's own operators, and the ones its int8 quantizer writes
RUN_SECONDS = 300.0  # the longest one run of a served graph may take before it is terminated


def check_graph(path: Path, config, record: Architecture, facts: dict[str, Any], widths: dict[str, int]) -> None:
    """Refuse, in one line naming the file, a graph at `path` that is not the export of a model of `config` for
    `record`'s head: `facts` is what config.json says of the export (what it answers, the graph's digest);
    `widths` the last dimension each output must have where the model fixes it (logits: the labels; hidden
    states: the hidden size)."""
    _check_size(path, config)
    _check_digest(path, facts.get("sha256"))
    onnx = _onnx()
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # a file that is not a graph: the protobuf parser's own errors
        raise UserError(f"{path}: not an ONNX graph ({one_line(e)[:200]})") from None
    answers = facts.get("answers")
    if answers != record.answers:
        raise UserError(f"{path}: this exported graph answers {answers}; the verb needs {record.answers}")
    graph = model.graph
    _check_operators(path, graph)
    _check_inputs(path, graph, config, record)
    _check_outputs(path, graph, record, widths)
    _check_weights(path, graph, onnx)
    _check_token_table(path, graph, config)


def graph_digest(path: Path) -> str:
    """The sha256 of a graph file: recorded by the export, checked before the graph is served."""
    return sha256_of(path)


def _check_digest(path: Path, recorded: Any) -> None:
    """A graph is the one its export wrote beside this config.json: another model's graph dropped in its place (or
    one altered since) is refused. An export from before digests were recorded has its structure checked alone."""
    if recorded is not None and graph_digest(path) != recorded:
        raise UserError(
            f"{path}: not the graph exported with this config.json (its sha256 differs from the one the export "
            "recorded); export the model again"
        )


PROTOBUF_LIMIT = 2**31 - 1  # no protobuf message, and so no ONNX graph in one file, is larger
GRAPH_SLACK = 64 << 20  # bytes a graph may hold beyond twice its model's weights at 4 bytes a number


def _check_size(path: Path, config) -> None:
    """Refuse, from its size and unread, a graph file that no export of this config writes: past protobuf's 2 GB,
    or far larger than the config's weights at fp32 (an int8 graph is smaller still)."""
    size = path.stat().st_size
    expected = 4 * config.parameter_estimate()
    if size > PROTOBUF_LIMIT or size > 2 * expected + GRAPH_SLACK:
        raise UserError(
            f"{path}: {size / 1e6:,.0f} MB, more than an ONNX graph of this model's config can be "
            f"(about {expected / 1e6:,.1f} MB of weights); refused unread"
        )


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
    rank = kind_of(record).input_rank
    for value in inputs:
        if value.type.tensor_type.elem_type != 7 or len(_dims(value)) != rank:  # 7: int64
            raise UserError(f"{path}: the graph's {value.name} is not a rank-{rank} int64 input")


def _check_outputs(path: Path, graph, record: Architecture, widths: dict[str, int]) -> None:
    names = [value.name for value in graph.output]
    kind = kind_of(record)
    bare, pooled = kind.axes(record, None), kind.axes(record, ("mean",))  # an encoder's vectors may come beside
    if names not in (list(bare), list(pooled)):
        raise UserError(f"{path}: the graph answers {', '.join(names) or 'nothing'}; the verb reads {', '.join(bare)}")
    for value in graph.output:
        dims = _dims(value)
        rank = kind.output_rank(pooled[value.name])
        if len(dims) != rank:
            raise UserError(f"{path}: the graph's {value.name} has rank {len(dims)}, not {rank}")
        width = widths.get(value.name)
        if width is not None and isinstance(dims[-1], int) and dims[-1] not in (0, width):
            raise UserError(f"{path}: the graph's {value.name} is {dims[-1]} wide; the model's config makes {width}")


def _check_weights(path: Path, graph, onnx) -> None:
    from onnx import numpy_helper

    for tensor in graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            continue  # not read here; ONNX Runtime refuses a reference outside the export
        try:
            values = numpy_helper.to_array(tensor)  # -inf is ours (a padded vocabulary's logits); NaN never is
        except Exception as e:  # a tensor whose bytes do not fit its type and shape: numpy's and onnx's errors
            raise UserError(
                f"{path}: the graph's weight {tensor.name[:80]} cannot be read ({one_line(e)[:120]})"
            ) from None
        if values.dtype.kind == "f" and bool(np.isnan(values).any()):
            raise UserError(f"{path}: the graph's weight {tensor.name} holds values that are not numbers (NaN)")


def _check_token_table(path: Path, graph, config) -> None:
    """The token table the graph looks input_ids up in (float, or int8 after quantisation) against config.json's
    vocabulary and width: a config.json that is not the graph's is refused before it runs."""
    tables = {tensor.name: list(tensor.dims) for tensor in graph.initializer}
    lookups = (node for node in graph.node if node.op_type == "Gather" and list(node.input[1:2]) == ["input_ids"])
    looked_up = [tables[node.input[0]] for node in lookups if node.input[0] in tables]
    expected = [config.padded_vocab_size, config.embedding_width]
    if looked_up and looked_up[0] != expected:
        shape = " x ".join(map(str, looked_up[0]))
        raise UserError(
            f"{path}: the graph's token table is {shape}; config.json makes {expected[0]} x {expected[1]} "
            "(a config.json that is not this graph's)"
        )
