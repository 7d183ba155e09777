"""`bertforge export`: a model directory as an ONNX graph that ONNX Runtime serves alone, checked against PyTorch.

    bertforge export MODEL --out MODEL-onnx                          # fp32: the same answers, to 1e-3
    bertforge export MODEL --out MODEL-int8 --quantize int8 --check-data texts.txt

Every model bertforge reads is exported by its own modelling code (bert.py), whatever its family or variant (ALiBi,
a gated feed-forward, rotary positions: what no other exporter has the code for), and every head: a masked LM's
logits, a classifier's, a tagger's, a reader's start and end logits, a multiple-choice model's, or an encoder's
hidden states (a sentence-embedding model's pooled, normalised vectors beside them, as its modules make them).
Inputs and outputs are named as `transformers`' ONNX exports name them, batch and length dynamic.

The export checks itself: the same texts (--check-data's, or a few of its own) through PyTorch and ONNX Runtime,
the largest difference said, and held to its precision's gate (precisions.py): a float graph further than 1e-3
from PyTorch is refused, nothing written; an int8 graph (dynamic quantisation: int8 weights, activations quantised
as they come) is said by how often its answers agree with PyTorch's and how close its vectors lie, and refused
below the quality gate. What the graph computes for each head is its answer kind's (kinds.py). The directory keeps
the config, tokenizer files, card and sentence-transformers modules, the graph at onnx/model.onnx.
"""

from __future__ import annotations

import dataclasses
import random
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..data.batching import TextBatcher
from ..errors import UserError
from ..families import ARCHITECTURES, Architecture, family_of
from ..families.architectures import ENCODER
from ..fileio import atomic_directory, check_not_inputs, check_output_dir, read_bounded, write_json
from ..model.config import ModelConfig
from ..model.heads import pool
from ..model.unpadding import unpadding_mode
from ..modelfiles.card import CARD, card_with_section
from ..modelfiles.directory import load_model, read_model_files, refuse_fresh_heads, resolve_model_dir
from ..modelfiles.exported import EXPORT_KEY, GRAPH, is_exported
from ..modelfiles.hf import OWN_MODEL_TYPE
from ..modelfiles.origin import Origin, read_origin
from ..modelfiles.sentence import write_pipeline
from ..modelfiles.vocabulary import check_vocab
from ..tokenizer import load_tokenizer, max_input_length, save_tokenizer
from .fused import DOMAIN as FUSED_DOMAIN
from .graph import graph_digest, graph_inputs
from .kinds import AnswerKind, kind_of
from .precisions import PRECISIONS, QUANTIZATIONS, Precision
from .served import graph_runner, onnx_runtime

OPSET = 17  # LayerNormalization as one op; every ONNX Runtime since 1.14 runs it
ENCODER_ONLY = ENCODER  # --task's one value: any model's encoder alone, as optimum names that task
SAMPLE_TEXTS = [  # what the check reads without --check-data: lengths apart, so that batches are padded
    "The cat sat on the mat.",
    "She deposited the money in the bank by the river, then walked home along the water.",
    "Paris is the capital of France.",
    "A short one.",
    "The old man shook his head slowly and said nothing for a long while, watching the boats come in.",
    "Why?",
]


@dataclasses.dataclass
class Export:
    """What `export_model` wrote, and how its answers compare with PyTorch's."""

    out: Path
    answers: str  # the head's kind (its architecture's record: families/architectures.py)
    quantize: str | None
    inputs: list[str]
    outputs: list[str]
    texts: int  # the check texts (or pairs) run
    max_difference: float
    agreement: float | None = None  # int8: the share of answers (labels, tags, tokens, spans) PyTorch gives too
    cosine: tuple[float, float] | None = None  # int8 encoder: median and least cosine of the vectors to PyTorch's
    megabytes: float = 0.0
    accepted_below_gate: bool = False  # written under its precision's gate, as --accept-quality-loss asked
    texts_given: int = 0  # the check texts --check-data held, of which `texts` were drawn (CHECK_SAMPLE at most)

    def summary(self) -> str:
        drawn = f" (a seeded sample of the {self.texts_given:,} given)" if self.texts_given > self.texts else ""
        check = f"largest difference from PyTorch {self.max_difference:.2e} over {self.texts:,} texts{drawn}"
        if self.quantize:
            if self.agreement is not None:
                check += f"; answers agree with PyTorch's on {self.agreement:.1%}"
            if self.cosine is not None:
                check += f"; vectors' cosine to PyTorch's: median {self.cosine[0]:.4f}, least {self.cosine[1]:.4f}"
            if self.accepted_below_gate:
                check += " (below the quality gate, written as --accept-quality-loss asked)"
        precision = self.quantize or "fp32"
        return f"exported a {self.answers} graph ({precision}, {self.megabytes:.1f} MB) to {self.out / GRAPH}: {check}"


class Graph(nn.Module):
    """What the exported graph computes: the model's own forward, its outputs named as its architecture's record says
    (as `transformers`' ONNX exports name them) and computed as its answer kind says (kinds.py). An encoder's graph
    gives the sentence vectors beside the hidden states where the model has a pooling of its own (a
    sentence-embedding model's, normalised as its modules say)."""

    def __init__(self, model: nn.Module, record: Architecture, origin: Origin):
        super().__init__()
        self.model, self.record, self.kind = model, record, kind_of(record)
        sentence = origin.sentence
        self.pooling = sentence.pooling if sentence is not None else None
        self.normalize = sentence is not None and sentence.normalize

    @property
    def axes(self) -> dict[str, tuple[str, ...]]:
        """Each output's dynamic axes."""
        return self.kind.axes(self.record, self.pooling)

    @property
    def outputs(self) -> list[str]:
        return list(self.axes)

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        return self.kind.outputs(self.model, input_ids, attention_mask, token_type_ids, self.pooling, self.normalize)


def what_it_answers(
    directory: Path, raw: dict[str, Any], config: ModelConfig, origin: Origin, encoder_only: bool = False
):
    """(the architecture's record, the arguments its class is built with) for a model directory, by the class it was
    saved as. A pre-training class without a trained masked-LM head, and a bare encoder, export their encoder; so
    does any model with `encoder_only` (embeddings from a masked LM or a classifier)."""
    if encoder_only:
        return _encoder(origin)
    theirs = origin.architecture.removeprefix("Bertforge") if raw.get("model_type") == OWN_MODEL_TYPE else ""
    theirs = theirs or origin.architecture
    family = family_of(config)
    # several of ours may share their class (BertModel: a bare encoder, a sentence encoder, BERT's discriminator)
    ours = [record for record in ARCHITECTURES.records() if family.hf_architecture(record.name) == theirs]
    record = next((r for r in ours if r.task_head), None)
    discriminator = ARCHITECTURES.get("BertForReplacedTokenDetection")
    if record is None and discriminator in ours and theirs != family.hf_architecture("BertModel"):
        record = discriminator
    if record is None and "mlm" in origin.heads and not origin.encoder_only:
        record = ARCHITECTURES.get("BertForPreTraining")
    if record is None or record.name == "BertForSentenceEmbedding":
        return _encoder(origin)
    return record, kind_of(record).model_arguments(directory, raw)


def _encoder(origin: Origin) -> tuple[Architecture, dict[str, Any]]:
    """The encoder's record: hidden states, and the sentence vectors beside them where the model pools its own."""
    record = ARCHITECTURES.get("BertForSentenceEmbedding")
    return record, {"pooling": origin.sentence.pooling} if origin.sentence is not None else {}


def export_model(
    model_path: str | Path,
    out: str | Path,
    quantize: str | None = None,
    check_texts: list[str] | None = None,
    check_pairs: list[str] | None = None,
    overwrite: bool = False,
    trust_pickle: bool = False,
    accept_quality_loss: bool = False,
    task: str | None = None,
) -> Export:
    """Export the model in `model_path` to OUT (see the module's docstring); OUT is written whole or not at all. An
    int8 graph whose answers fall below the quality gate is refused, nothing written, unless `accept_quality_loss`."""
    onnx_runtime()  # one line naming the extra, before any work
    if quantize is not None and quantize not in QUANTIZATIONS:
        raise UserError(f"--quantize {quantize}: bertforge quantizes to {', '.join(QUANTIZATIONS)}")
    precision = PRECISIONS.get(quantize or "fp32")
    if task not in (None, ENCODER_ONLY):
        raise UserError(f"--task {task}: export the model's own head (no --task) or its encoder ({ENCODER_ONLY})")
    directory, out = resolve_model_dir(model_path), Path(out)
    check_not_inputs({"--out": out}, {"MODEL": directory})
    check_output_dir(out, overwrite, "an exported model", out.is_dir() and is_exported(out))
    if is_exported(directory):
        raise UserError(f"{directory} is an exported model already; export the PyTorch model it came from")
    files = read_model_files(directory)
    config, origin = files.config, read_origin(files)
    origin.check_computable()
    record, kwargs = what_it_answers(directory, files.raw, config, origin, encoder_only=task == ENCODER_ONLY)
    kind = kind_of(record)
    kind.check_exportable(files, origin)
    model = load_model(record.model_class(), files, trust_pickle, keep_heads=kind.has_head, **kwargs)
    if kind.has_head:
        refuse_fresh_heads(model, directory)
    model = model.float().eval()
    tokenizer = load_tokenizer(directory, files.raw)
    check_vocab(tokenizer, config.vocab_size, str(directory), config.type_vocab_size, kind.predicts_tokens)
    graph = Graph(model, record, origin)
    inputs = graph_inputs(config)
    given = len(check_texts or ())
    check_texts, check_pairs = check_sample(check_texts, check_pairs)
    batches = _batches(tokenizer, config, check_texts or SAMPLE_TEXTS, kind, check_pairs)

    def calibrate() -> None:  # each batch's outputs dropped as it goes: a masked LM's are (B, T, V)
        for batch in batches:
            graph(*_arguments(batch, inputs))

    wrapped = precision.ready(model, calibrate)
    # traced on texts of different lengths whatever the check's: a batch without padding would build a graph
    # that ignores attention_mask (one text, or identical lines)
    trace = _batches(tokenizer, config, SAMPLE_TEXTS, kind)[0]
    if wrapped:
        with torch.no_grad(), unpadding_mode("never"):
            graph(*_arguments(trace, inputs))  # which layers the operator computes (a bias or window: none)
    with atomic_directory(out) as tmp:
        (tmp / GRAPH).parent.mkdir()
        _export(graph, trace, inputs, tmp / GRAPH, any(w.fused for w in wrapped))
        precision.convert(tmp / GRAPH)
        report = _compare(graph, graph_runner(tmp / GRAPH), batches, inputs, precision)
        made = Export(out, kind.name, quantize, inputs, graph.outputs, len(check_texts or SAMPLE_TEXTS), **report)
        made.texts_given = given
        made.accepted_below_gate = _gate(precision, made, accept_quality_loss)
        made.megabytes = (tmp / GRAPH).stat().st_size / 1e6
        _write_files(tmp, files.raw, tokenizer, config, origin, made)
    return made


def _gate(precision: Precision, made: Export, accept_quality_loss: bool) -> bool:
    """Whether the export is written below its precision's gate (as `accept_quality_loss` asks for a quantized
    one); one line, nothing written, where it falls short otherwise. A float graph past TOLERANCE is a fault of
    the export, never accepted."""
    short = precision.short_of(made.max_difference, made.agreement, made.cosine)
    if short and not precision.quantized:
        raise UserError(f"the exported graph differs from PyTorch ({short[0]}): nothing was written")
    if short and not accept_quality_loss:
        raise UserError(
            f"the {precision.name} graph falls below the quality gate on {made.texts} check texts "
            f"({'; '.join(short)}): nothing was written; keep fp32 (no --quantize), check on more of your own texts "
            "(--check-data), or write it anyway with --accept-quality-loss"
        )
    return bool(short)


CHECK_SAMPLE = 2000  # the most check texts an export runs: a seeded sample of a larger --check-data


def check_sample(texts: list[str] | None, pairs: list[str] | None) -> tuple[list[str] | None, list[str] | None]:
    """At most CHECK_SAMPLE of the check texts (and their pairs), drawn with a fixed seed and kept in file order: a
    200,000-line file checks in seconds, not in minutes, and the same file always checks the same way."""
    if pairs is not None and texts is not None and len(pairs) != len(texts):
        raise UserError("--check-data: every text needs its pair")
    if texts is None or len(texts) <= CHECK_SAMPLE:
        return texts, pairs
    rows = sorted(random.Random(0).sample(range(len(texts)), CHECK_SAMPLE))
    return [texts[i] for i in rows], [pairs[i] for i in rows] if pairs is not None else None


def _batches(
    tokenizer, config: ModelConfig, texts: list[str], kind: AnswerKind, pairs: list[str] | None = None
) -> list[dict[str, torch.Tensor]]:
    """The texts (with their `pairs`, as a pair classifier reads them) as the graph of `kind` reads them."""
    if not texts:
        raise UserError("--check-data holds no texts")
    batcher = TextBatcher(tokenizer, max_input_length(tokenizer, config.max_position_embeddings))
    return kind.check_batches(batcher, texts, pairs)


def _arguments(batch: dict[str, torch.Tensor], inputs: list[str]) -> tuple[torch.Tensor, ...]:
    return tuple(batch[name] for name in inputs)


def _export(graph: Graph, batch: dict[str, torch.Tensor], inputs: list[str], path: Path, fused: bool) -> None:
    """torch.onnx's tracing exporter, the axes the architecture's record names dynamic (batch, length, the number of
    choices). Padded batches run padded here (unpadding packs by the data, which a graph cannot)."""
    dynamic = {name: dict(enumerate(graph.record.inputs_axes)) for name in inputs}
    dynamic |= {name: dict(enumerate(axes)) for name, axes in graph.axes.items()}
    with torch.no_grad(), unpadding_mode("never"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on Python values it takes as constants
        torch.onnx.export(
            graph, _arguments(batch, inputs), str(path), input_names=inputs, output_names=graph.outputs,
            dynamic_axes=dynamic, opset_version=OPSET, dynamo=False, do_constant_folding=True,
            custom_opsets={FUSED_DOMAIN: 1} if fused else None,
        )  # fmt: skip
    graph.eval()  # the exporter puts the training mode back as it found it: the module's own, set here


def _compare(graph: Graph, runner, batches, inputs: list[str], precision: Precision) -> dict[str, Any]:
    """The largest difference between the graph's outputs and PyTorch's, on real tokens; for a quantized graph also
    how often their answers agree (as its answer kind reads an answer: a label, a token's tag or prediction, a
    span's start and end) and how close their vectors lie (cosine of the sentence vectors, or of the mean hidden
    state)."""
    largest, agree, total, cosines = 0.0, 0, 0, []
    for batch in batches:
        with torch.no_grad(), unpadding_mode("never"):
            expected = graph(*_arguments(batch, inputs))
        expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
        if not all(bool(torch.isfinite(e).all()) for e in expected if e.dtype != torch.bool):
            raise UserError(
                "the model itself answers values that are not numbers on the check texts (weights past float range?): "
                "nothing was written"
            )
        got = [torch.from_numpy(a) for a in runner.run(None, {n: batch[n].numpy() for n in inputs})]
        if not all(bool(torch.isfinite(g).all()) for g in got):
            raise UserError("the exported graph answers values that are not numbers: nothing was written")
        mask = batch["attention_mask"].bool()  # (B, T), or (B, C, T) for multiple choice
        for name, ref, out in zip(graph.outputs, expected, got):
            per_token = graph.kind.per_token or name == "last_hidden_state"
            real = mask if per_token else torch.ones(ref.shape[:-1], dtype=torch.bool)  # the rows compared
            largest = max(largest, float((ref - out).abs()[real].max()))
            if name == "last_hidden_state":
                vectors = [pool(h, batch["attention_mask"]) for h in (ref, out)]  # (B, H) mean of real tokens
                cosines += nn.functional.cosine_similarity(*vectors, dim=-1).tolist()
            elif name == "sentence_embedding":
                cosines += nn.functional.cosine_similarity(ref, out, dim=-1).tolist()
            elif precision.quantized:
                same, compared = graph.kind.agreement(ref, out, mask)
                agree, total = agree + same, total + compared
    report: dict[str, Any] = {"max_difference": largest}
    if precision.quantized:
        report["agreement"] = agree / total if total else None
        report["cosine"] = (float(np.median(cosines)), float(min(cosines))) if cosines else None
    return report


def _write_files(tmp: Path, raw: dict[str, Any], tokenizer, config: ModelConfig, origin: Origin, made: Export) -> None:
    """config.json (the model's, with what the export did), the tokenizer, the sentence-transformers modules and
    the card, beside the graph: what ONNX Runtime needs to serve it, and the ecosystem to load it."""
    facts = {
        "format": "onnx",
        "graph": GRAPH.as_posix(),
        "opset": OPSET,
        "answers": made.answers,
        "precision": made.quantize or "fp32",
        "inputs": made.inputs,
        "outputs": made.outputs,
        "texts": made.texts,
        "max_difference": made.max_difference,
        "sha256": graph_digest(tmp / GRAPH),
        **({"agreement": made.agreement} if made.agreement is not None else {}),
        **({"cosine": list(made.cosine)} if made.cosine is not None else {}),
        **({"accepted_below_gate": True} if made.accepted_below_gate else {}),
    }
    write_json(tmp / "config.json", {**raw, EXPORT_KEY: facts})
    save_tokenizer(tokenizer, tmp, config.max_position_embeddings, config.type_vocab_size > 1)
    if origin.sentence is not None:
        write_pipeline(
            tmp, origin.sentence, config.hidden_size, max_input_length(tokenizer, config.max_position_embeddings)
        )
    check = made.summary().split(": ", 1)[1]
    card = origin.card
    if card is None and (origin.directory / CARD).is_file():  # bertforge's own: kept as it was written
        card = read_bounded(origin.directory / CARD, "card").decode("utf-8", errors="replace")
    card = card_with_section(card or f"# {origin.directory.name}\n", {"export": {**facts, "check": check}})
    (tmp / CARD).write_text(card, encoding="utf-8")
