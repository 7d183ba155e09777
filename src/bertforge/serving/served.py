"""A model exported to ONNX (`bertforge export`), served by ONNX Runtime as the PyTorch model of its class is, and
the one loader of the verbs that answer (embed, classify, tag, answer, choose): a model directory gives its network,
an export its served graph.

    load_served(path, cls)   (files, network or ServedGraph, tokenizer), checked against each other

`ServedGraph` answers the calls those verbs make of a model (`model(input_ids, token_type_ids, attention_mask)` and
`model.bert(...)`), and everything else a model is asked (its config, a classifier's `probabilities`) from the same
class built on the meta device, which holds no weights. What its graph must hold and what each answer may be is its
answer kind's (kinds.py). ONNX Runtime is an optional dependency (pip install 'bertforge[onnx]'): without it, one
line names the extra.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import UserError, one_line
from ..families.architectures import ARCHITECTURES
from ..model.bert import BertForPreTraining, EncoderOutput
from ..modelfiles.directory import (
    ModelFiles,
    load_model_and_tokenizer,
    read_model_files,
    refuse_discriminator,
    refuse_fresh_heads,
)
from ..modelfiles.exported import GRAPH, export_facts
from ..modelfiles.vocabulary import model_tokenizer
from .graph import RUN_SECONDS, check_graph
from .kinds import KINDS, kind_of


def load_served(
    path: str | Path | ModelFiles,
    cls=BertForPreTraining,
    trust_pickle: bool = False,
    keep_heads: bool = True,
    **model_kwargs,
) -> tuple[ModelFiles, Any, Any]:
    """(the directory's files, what answers, its tokenizer) for a verb that answers with `cls`: the network of a model
    directory (a task's head refused where its weights lack it: it would answer at random), or the served graph of
    an export, checked against its config and the head `cls` computes before it runs."""
    files = path if isinstance(path, ModelFiles) else read_model_files(path)
    if not files.exported:
        files, model, tokenizer = load_model_and_tokenizer(files, cls, trust_pickle, keep_heads, **model_kwargs)
        if cls is not BertForPreTraining:
            refuse_fresh_heads(model, files.directory)
        return files, model, tokenizer
    refuse_discriminator(files, cls, keep_heads)
    graph = ServedGraph(files.directory, cls, files.config, files.raw, **model_kwargs)
    return files, graph, model_tokenizer(files, graph, cls)


def _whole_model(answers: Any) -> bool:
    """Whether an export that says it answers `answers` holds a whole model (a masked LM's, an encoder's)."""
    return isinstance(answers, str) and answers in KINDS and KINDS.get(answers).whole_model


def onnx_runtime():
    """The onnxruntime module, or one line naming the extra that installs it."""
    try:
        import onnxruntime
    except ImportError:
        raise UserError(
            "an exported model is served by ONNX Runtime, which is not installed: pip install 'bertforge[onnx]'"
        ) from None
    return onnxruntime


def graph_runner(path: Path, threads: int | None = None):
    """ONNX Runtime's runner (its InferenceSession) of the graph at `path` on the CPU, with every graph
    optimisation, and subnormal floats taken as zero: ONNX Runtime's softmax gives a padded batch's masked positions
    subnormals instead of zeros, on the CPU's slow path (5x the softmax's time: benchmarks/README.md)."""
    ort = onnx_runtime()
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.set_denormal_as_zero", "1")
    if threads:
        options.intra_op_num_threads = threads
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own types for a graph it cannot read
        raise UserError(f"{path}: not a graph ONNX Runtime runs ({one_line(e)[:200]})") from None


def bounded_run(runner, feeds: dict[str, np.ndarray], directory: Path) -> list[np.ndarray]:
    """The graph's outputs for `feeds`, the run terminated by a watchdog past RUN_SECONDS; whatever ONNX Runtime
    raises (a run terminated, an allocation it cannot make) ends in one line."""
    options = onnx_runtime().RunOptions()
    watchdog = threading.Timer(RUN_SECONDS, lambda: setattr(options, "terminate", True))
    watchdog.start()
    try:
        return runner.run(None, feeds, options)
    except Exception as e:  # onnxruntime's own error types
        said = f"terminated after {RUN_SECONDS:.0f} s" if options.terminate else one_line(e)[:200]
        raise UserError(f"{directory}: the exported graph could not answer ({said})") from None
    finally:
        watchdog.cancel()


class ServedGraph:
    """An exported model in the place of the PyTorch model of `cls`: called as it is, answering from the graph,
    which is checked against config.json (`raw`) and the head `cls` computes before it is run (graph.py)."""

    def __init__(self, directory: Path, cls, config, raw: dict[str, Any], **model_kwargs):
        with torch.device("meta"):  # the class's attributes and methods, without its weights
            self.meta = cls(config, **model_kwargs)
        facts = export_facts(raw)
        record = ARCHITECTURES.get(self.meta.hf_architecture)
        kind, exported = kind_of(record), facts.get("answers")
        if kind.whole_model and _whole_model(exported):  # embed reads an encoder's or a masked LM's graph
            record = next(r for r in ARCHITECTURES.records() if r.answers == exported)
            kind = kind_of(record)
        self.kind, self.widths = kind, kind.widths(config, getattr(self.meta, "num_labels", None))
        check_graph(directory / GRAPH, config, record, facts, self.widths)
        self.runner = graph_runner(directory / GRAPH)
        self.input_names = [i.name for i in self.runner.get_inputs()]
        self.output_names = [o.name for o in self.runner.get_outputs()]
        self.directory = directory

    def __getattr__(self, name: str) -> Any:
        if name in ("meta", "runner"):  # not set yet (copy, pickle): no answer from the meta model either
            raise AttributeError(name)
        return getattr(self.meta, name)

    def to(self, *args, **kwargs) -> ServedGraph:
        return self  # ONNX Runtime runs it on the CPU

    def eval(self) -> ServedGraph:
        return self

    def run(self, input_ids, token_type_ids=None, attention_mask=None) -> dict[str, torch.Tensor]:
        """The graph's outputs by name, for a batch as the PyTorch model takes it."""
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        if feeds["attention_mask"] is None:
            feeds["attention_mask"] = torch.ones_like(input_ids)
        if feeds["token_type_ids"] is None:
            feeds["token_type_ids"] = torch.zeros_like(input_ids)
        arrays = {name: np.ascontiguousarray(feeds[name].cpu().numpy().astype(np.int64)) for name in self.input_names}
        outputs = bounded_run(self.runner, arrays, self.directory)
        for name, out in zip(self.output_names, outputs):
            self._check_answer(name, out, input_ids.shape[0])
        return {name: torch.from_numpy(out) for name, out in zip(self.output_names, outputs)}

    def _check_answer(self, name: str, out: np.ndarray, batch: int) -> None:
        """An output as the model's head gives it, whatever the graph declared: floats, one row per input, as wide
        as the labels (or the hidden size) config.json names, and what its kind's answers hold (numbers; a masked
        LM's padded vocabulary answers -inf). Anything else ends in one line, never in probabilities computed
        from it."""
        said = f"{self.directory}: the exported graph answered {name}"
        if out.dtype.kind != "f":
            raise UserError(f"{said} as {out.dtype}, not as floats")
        if out.ndim == 0 or out.shape[0] != batch:
            raise UserError(f"{said} of shape {out.shape} for {batch} inputs")
        width = self.widths.get(name)
        if width is not None and out.shape[-1] != width:
            raise UserError(f"{said} {out.shape[-1]} wide; config.json makes {width}")
        if bool(self.kind.unbounded(out).any()):
            raise UserError(f"{said} with values that are not numbers (nan or infinity)")

    def __call__(self, input_ids, token_type_ids=None, attention_mask=None, labels=None):
        """(logits, None) as a task head returns them (a reader's start and end logits stacked: (B, T, 2))."""
        return self.kind.head_answer(self.run(input_ids, token_type_ids, attention_mask)), None

    @property
    def bert(self):
        """The encoder's answer, as BertModel gives it: the last layer's hidden states (the graph has no other)."""

        def encode(input_ids, token_type_ids=None, attention_mask=None, output_hidden_states=False, **_):
            if output_hidden_states:
                raise UserError(f"{self.directory}: an exported model gives its last layer only (--layer -1)")
            if "last_hidden_state" not in self.output_names:
                raise UserError(f"{self.directory}: this exported graph answers {', '.join(self.output_names)}")
            hidden = self.run(input_ids, token_type_ids, attention_mask)["last_hidden_state"]
            return EncoderOutput(hidden, None)

        return encode
