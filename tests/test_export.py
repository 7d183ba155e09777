"""`bertforge export`: every family, variant and head exported to ONNX answers as the PyTorch model does, at batch
sizes and lengths other than the one it was traced at; an exported directory serves `embed`, `classify`, `tag` and
`answer` with the PyTorch model's answers; int8 says what it costs; bad input is one line."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from bertforge import BertForPreTraining, ModelConfig, save_model
from bertforge.errors import UserError
from bertforge.model.heads import (
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSentenceEmbedding,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from bertforge.modelfiles.exported import EXPORT_KEY, GRAPH

from conftest import MODERN, bertforge, bertforge_ok, needs, one_line_error, randomised
from released import DISCRIMINATORS, LAYOUTS, build

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
TEXTS = ["The cat sat on the mat.", "my friend painted the red house by the river bank today", "covid"]


@pytest.fixture(autouse=True)
def onnx_installed():
    needs("onnxruntime")
    needs("onnx")


def export(model, out, *flags):
    done = json.loads(bertforge_ok("export", model, "--out", out, "--json", *flags).stdout)
    assert (out / GRAPH).is_file() and json.loads((out / "config.json").read_text())[EXPORT_KEY]["format"] == "onnx"
    return done


@pytest.mark.parametrize("name", [*LAYOUTS, *DISCRIMINATORS])
def test_every_family_exports_within_tolerance(tmp_path, name):
    """Each released layout (a masked LM, or ELECTRA's discriminator as an encoder) exports, and its graph's
    outputs are PyTorch's to 1e-3 on texts of other lengths and batch sizes than the traced one."""
    needs("transformers")
    model = build(name, tmp_path)
    done = export(model, tmp_path / "onnx", *(["--trust-pickle"] if name == "bert_bin_only" else []))
    assert done["answers"] == ("feature-extraction" if name in DISCRIMINATORS else "masked-lm")
    assert done["max_difference"] < 1e-3


VARIANTS = {
    "pre-ln": {"norm_style": "pre"},
    "sinusoidal": {"position_embedding": "sinusoidal"},
    "alibi": {"attention_bias": "alibi"},
    "glu": {"feed_forward": "glu"},
    "rotary": {"position_embedding": "rotary"},
    "rotary-glu": {"position_embedding": "rotary", "feed_forward": "glu"},
    "modernbert-windows": {**MODERN, "local_attention": 8, "global_attention_every": 2},
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_exports_within_tolerance(tmp_path, wordpiece_tokenizer, variant):
    """The variants no other exporter has the code for (ALiBi, a gated feed-forward, rotary positions in a BERT,
    ModernBERT's sliding windows) export from bertforge's own modelling code."""
    config = ModelConfig(vocab_size=wordpiece_tokenizer.get_vocab_size(), hidden_size=32, num_layers=2, num_heads=2,
                         intermediate_size=64, max_position_embeddings=64, **VARIANTS[variant])  # fmt: skip
    save_model(randomised(BertForPreTraining(config)), tmp_path / "model", wordpiece_tokenizer)
    done = export(tmp_path / "model", tmp_path / "onnx")
    assert done["max_difference"] < 1e-3


HEADS = {
    "classification": (BertForSequenceClassification, {"num_labels": 3}, "sequence-classification"),
    "regression": (BertForSequenceClassification, {"problem_type": "regression"}, "sequence-classification"),
    "tagging": (BertForTokenClassification, {"num_labels": 4}, "token-classification"),
    "qa": (BertForQuestionAnswering, {}, "question-answering"),
    "choice": (BertForMultipleChoice, {}, "multiple-choice"),
    "sentence": (BertForSentenceEmbedding, {}, "feature-extraction"),
}


def head_model(tmp_path, tokenizer, head, family_shape=None):
    cls, kwargs, _ = HEADS[head]
    shape = dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_position_embeddings=64)
    config = ModelConfig(vocab_size=tokenizer.get_vocab_size(), **{**shape, **(family_shape or {})})
    labels = kwargs.get("num_labels", 1 if head == "regression" else 2)
    extra = {"id2label": {str(i): f"L{i}" for i in range(labels)}, "label2id": {f"L{i}": i for i in range(labels)}}
    if head == "regression":
        extra["problem_type"] = "regression"
    save_model(randomised(cls(config, **kwargs)), tmp_path / head, tokenizer, extra)
    return tmp_path / head


@pytest.mark.parametrize("shape", ["bert", "modernbert"])
@pytest.mark.parametrize("head", HEADS)
def test_every_head_exports_within_tolerance(tmp_path, wordpiece_tokenizer, head, shape):
    model = head_model(tmp_path, wordpiece_tokenizer, head, MODERN if shape == "modernbert" else None)
    done = export(model, tmp_path / "onnx")
    assert done["answers"] == HEADS[head][2] and done["max_difference"] < 1e-3
    if head == "sentence":
        assert done["outputs"] == ["last_hidden_state", "sentence_embedding"]


def test_an_exported_model_answers_as_the_pytorch_one(tmp_path, wordpiece_tokenizer):
    """classify, tag, answer and embed on the exported directory: the PyTorch directory's answers, within the
    export's tolerance."""
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n")
    for head, verb in (("classification", "classify"), ("tagging", "tag"), ("sentence", "embed"), ("qa", "answer")):
        model = head_model(tmp_path, wordpiece_tokenizer, head)
        export(model, tmp_path / f"{head}-onnx")
        if verb == "embed":
            vectors = []
            for directory in (model, tmp_path / f"{head}-onnx"):
                out = tmp_path / f"{directory.name}.npy"
                bertforge_ok("embed", directory, "--input", tmp_path / "texts.txt", "--out", out, "--precision", "fp32")
                vectors.append(np.load(out))
            np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-4)
            continue
        args = {
            "classify": ["--input", tmp_path / "texts.txt", "--json"],
            "tag": ["--input", tmp_path / "texts.txt", "--json"],
            "answer": ["--question", "who sat?", "--context", TEXTS[1], "--json"],
        }[verb]
        ours = json.loads(bertforge_ok(verb, model, *args).stdout)
        exported = json.loads(bertforge_ok(verb, tmp_path / f"{head}-onnx", *args).stdout)
        assert _rounded(exported) == _rounded(ours)


def test_any_model_exports_its_encoder_for_embeddings(tmp_path, wordpiece_tokenizer):
    """--task feature-extraction: a classifier's and a masked LM's encoder exported alone; `embed` on the export
    gives the vectors `embed` gives on the PyTorch model, and `classify` refuses the encoder graph in one line."""
    import onnx

    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n")
    masked = tmp_path / "mlm"
    config = ModelConfig(vocab_size=wordpiece_tokenizer.get_vocab_size(), hidden_size=32, num_layers=1, num_heads=2)
    save_model(randomised(BertForPreTraining(config)), masked, wordpiece_tokenizer)
    for model in (head_model(tmp_path, wordpiece_tokenizer, "classification"), masked):
        onnx_dir = tmp_path / f"{model.name}-encoder"
        made = export(model, onnx_dir, "--task", "feature-extraction")
        assert made["answers"] == "feature-extraction" and made["outputs"] == ["last_hidden_state"]
        assert [o.name for o in onnx.load(str(onnx_dir / GRAPH)).graph.output] == ["last_hidden_state"]
        vectors = []
        for directory in (model, onnx_dir):
            out = tmp_path / f"{directory.name}.npy"
            bertforge_ok("embed", directory, "--input", tmp_path / "texts.txt", "--out", out, "--precision", "fp32")
            vectors.append(np.load(out))
        np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-4)
    one_line_error(bertforge("classify", tmp_path / "classification-encoder", "the cat sat."), "feature-extraction")
    from bertforge.serving.export import export_model

    with pytest.raises(UserError, match="--task fill-mask"):
        export_model(masked, tmp_path / "x", task="fill-mask")


def test_a_masked_lm_graph_stores_its_tied_table_once(tmp_path, wordpiece_tokenizer):
    """The decoder reads the token table the embeddings read (one Gemm over it, transposed in the op): no
    transposed copy beside it, so the graph is the size of the model, not a vocabulary table larger."""
    import onnx

    masked = tmp_path / "mlm"
    config = ModelConfig(vocab_size=wordpiece_tokenizer.get_vocab_size(), hidden_size=32, num_layers=1, num_heads=2)
    save_model(randomised(BertForPreTraining(config)), masked, wordpiece_tokenizer)
    assert export(masked, tmp_path / "onnx")["max_difference"] < 1e-3
    tables = [t for t in onnx.load(str(tmp_path / "onnx" / GRAPH)).graph.initializer if len(t.dims) == 2]
    assert sorted(tuple(t.dims) for t in tables if config.padded_vocab_size in t.dims) == [
        (config.padded_vocab_size, 32)
    ]


def test_the_serving_runner_takes_subnormal_floats_as_zero(tmp_path, wordpiece_tokenizer):
    """ONNX Runtime's softmax leaves a padded batch's masked positions subnormal, on the CPU's slow path
    (benchmarks/README.md): the runner serving an export flushes them, and a text padded in a batch still gets
    the hidden states it gets alone."""
    import torch

    from bertforge.serving.served import load_served

    export(head_model(tmp_path, wordpiece_tokenizer, "sentence"), tmp_path / "onnx")
    _, served, _ = load_served(tmp_path / "onnx", BertForSentenceEmbedding)
    assert served.runner.get_session_options().get_session_config_entry("session.set_denormal_as_zero") == "1"
    short, long = (wordpiece_tokenizer.encode(text).ids for text in (TEXTS[2], TEXTS[1]))
    ids = torch.tensor([short + [0] * (len(long) - len(short)), long])
    mask = torch.tensor([[1] * len(short) + [0] * (len(long) - len(short)), [1] * len(long)])
    padded = served.run(ids, None, mask)["last_hidden_state"][0, : len(short)]
    alone = served.run(torch.tensor([short]), None, torch.ones(1, len(short), dtype=torch.long))["last_hidden_state"]
    np.testing.assert_allclose(padded.numpy(), alone[0].numpy(), atol=1e-5)


def _rounded(value):
    """Answers with their scores to three places: what an export may change within its tolerance."""
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return round(value, 3) if isinstance(value, float) else value


def test_an_int8_export_says_what_it_costs(tmp_path, wordpiece_tokenizer):
    """--quantize int8: the graph is smaller, and the export says how often its answers agree with PyTorch's on
    --check-data (a classifier's labels), and how close a sentence model's vectors lie."""
    (tmp_path / "check.txt").write_text("\n".join(TEXTS * 4) + "\n")
    classifier = head_model(tmp_path, wordpiece_tokenizer, "classification", {"hidden_size": 64})
    fp32 = export(classifier, tmp_path / "fp32")
    int8 = export(classifier, tmp_path / "int8", "--quantize", "int8", "--check-data", tmp_path / "check.txt")
    assert int8["quantize"] == "int8" and int8["texts"] == 12 and 0.0 <= int8["agreement"] <= 1.0
    assert int8["megabytes"] < fp32["megabytes"]
    sentence = export(head_model(tmp_path, wordpiece_tokenizer, "sentence"), tmp_path / "s8", "--quantize", "int8")
    assert -1.0 <= sentence["cosine"][1] <= sentence["cosine"][0] <= 1.0
    bertforge_ok("classify", tmp_path / "int8", "the cat sat.")


@pytest.mark.parametrize("shape", ["bert", "alibi", "rotary"])
def test_the_int8_graph_fuses_bert_attention_into_onnx_runtimes_operator(tmp_path, wordpiece_tokenizer, monkeypatch,
                                                                        shape):  # fmt: skip
    """BERT's own attention becomes one Attention node (QAttention once quantized), computing what PyTorch does on
    padded batches: with the quantizer left out, the fused float graph is PyTorch's to 1e-5. Attention that adds a
    bias (ALiBi) or turns its queries (rotary) is traced as it is, and the export says nothing of the operator."""
    import onnx

    from bertforge.serving import export as exporting
    from bertforge.serving import precisions

    variant = {"bert": {}, "alibi": {"attention_bias": "alibi"}, "rotary": {"position_embedding": "rotary"}}[shape]
    model = head_model(tmp_path, wordpiece_tokenizer, "classification", variant)
    monkeypatch.setattr(precisions.Int8, "convert", lambda self, path: None)
    fused = exporting.export_model(model, tmp_path / "fused", quantize="int8")
    assert fused.max_difference < 1e-5
    operators = {node.op_type for node in onnx.load(str(tmp_path / "fused" / GRAPH)).graph.node}
    assert ("Attention" in operators) == (shape == "bert") and ("Softmax" in operators) == (shape != "bert")
    monkeypatch.undo()
    done = bertforge_ok("export", model, "--out", tmp_path / "int8", "--quantize", "int8")
    assert "Warning" not in done.stderr  # the exporter told of the operator's domain only where it wrote one
    operators = {node.op_type for node in onnx.load(str(tmp_path / "int8" / GRAPH)).graph.node}
    assert ("QAttention" in operators) == (shape == "bert")
    classified = [
        json.loads(bertforge_ok("classify", d, "the cat sat.", "--json").stdout) for d in (model, tmp_path / "int8")
    ]
    assert classified[0]["label"] == classified[1]["label"]


def test_smoothing_keeps_the_float_model_and_evens_out_an_outlier_channel(tmp_path, wordpiece_tokenizer, monkeypatch):
    """Moving the LayerNorm outputs' outliers into the weights changes no float answer (to 1e-5), and on a model
    whose normalised hidden states have one channel 30 times the others (as trained BERTs have) it brings the int8
    vectors closer to PyTorch's than quantizing them as they are."""
    import torch
    from safetensors.torch import load_file, save_file

    from bertforge.modelfiles.directory import load_model
    from bertforge.serving import export as exporting
    from bertforge.serving import precisions
    from bertforge.serving.smoothing import smooth_activations

    model = head_model(tmp_path, wordpiece_tokenizer, "sentence", {"hidden_size": 64, "intermediate_size": 128})
    weights = load_file(model / "model.safetensors")
    for name in [n for n in weights if n.endswith("LayerNorm.weight")]:
        weights[name][3] = 30.0  # the same channel of every normalised hidden state
    save_file(weights, model / "model.safetensors", metadata={"format": "pt"})
    loaded = load_model(BertForSentenceEmbedding, model)
    ids = torch.randint(5, wordpiece_tokenizer.get_vocab_size(), (4, 12))
    mask = torch.ones_like(ids)
    mask[1:, 8:] = 0
    before = loaded.bert(ids, None, mask).sequence_output
    assert smooth_activations(loaded, lambda: loaded.bert(ids, None, mask)) == 4  # 2 layers x (QKV, up)
    torch.testing.assert_close(loaded.bert(ids, None, mask).sequence_output, before, atol=1e-5, rtol=1e-5)
    smoothed = exporting.export_model(model, tmp_path / "smoothed", quantize="int8", accept_quality_loss=True)
    monkeypatch.setattr(precisions, "smooth_activations", lambda model, calibrate: 0)
    plain = exporting.export_model(model, tmp_path / "plain", quantize="int8", accept_quality_loss=True)
    assert smoothed.cosine[1] > plain.cosine[1] and smoothed.cosine[0] > plain.cosine[0], (
        smoothed.cosine,
        plain.cosine,
    )


def test_an_int8_graph_below_the_quality_gate_is_refused_unless_accepted(tmp_path, wordpiece_tokenizer):
    """A sentence model with a feed-forward channel in each layer 500 times the others, what reads it shrunk to
    match and the rest of the feed-forward loud (an outlier channel, as trained models have): each batch's
    activations are quantised with one scale, so the other channels lose their resolution and the vectors turn. The
    export says the figures and the gate in one line and writes nothing; --accept-quality-loss writes the graph,
    marked below the gate. The same model without the outlier passes."""
    from safetensors.torch import load_file, save_file

    model = head_model(tmp_path, wordpiece_tokenizer, "sentence")
    export(model, tmp_path / "fine", "--quantize", "int8")
    weights = load_file(model / "model.safetensors")
    for up in [name for name in weights if name.endswith("intermediate.dense.weight")]:  # each layer's
        weights[up][0] *= 500.0  # (inner, H): one inner channel's row
        down = weights[up.replace("intermediate", "output")]  # (H, inner)
        down[:, 0] /= 500.0  # what reads the outlier channel
        down[:, 1:] *= 200.0  # and the feed-forward's other channels, loud enough to outweigh the residual
    save_file(weights, model / "model.safetensors", metadata={"format": "pt"})
    refused = bertforge("export", model, "--out", tmp_path / "int8", "--quantize", "int8")
    one_line_error(refused, "below the quality gate")
    assert "median cosine" in refused.stderr and "--accept-quality-loss" in refused.stderr
    assert not (tmp_path / "int8").exists()
    made = export(model, tmp_path / "int8", "--quantize", "int8", "--accept-quality-loss")
    assert made["cosine"][0] < 0.99 and made["accepted_below_gate"]
    facts = json.loads((tmp_path / "int8" / "config.json").read_text())[EXPORT_KEY]
    assert facts["accepted_below_gate"] is True


def test_export_refuses_in_one_line(tmp_path, wordpiece_tokenizer, monkeypatch):
    """Over its own input, a second time without --overwrite, an export of an export, a verb an export does not
    serve, and without ONNX Runtime installed: one line each."""
    model = head_model(tmp_path, wordpiece_tokenizer, "classification")
    one_line_error(bertforge("export", model, "--out", model), "which this command reads")
    export(model, tmp_path / "onnx")
    one_line_error(bertforge("export", model, "--out", tmp_path / "onnx"), "--overwrite")
    export(model, tmp_path / "onnx", "--overwrite")
    one_line_error(bertforge("export", tmp_path / "onnx", "--out", tmp_path / "again"), "exported model already")
    masked = tmp_path / "mlm"
    config = ModelConfig(vocab_size=wordpiece_tokenizer.get_vocab_size(), hidden_size=32, num_layers=1, num_heads=2)
    save_model(randomised(BertForPreTraining(config)), masked, wordpiece_tokenizer)
    export(masked, tmp_path / "mlm-onnx")
    one_line_error(bertforge("fill-mask", tmp_path / "mlm-onnx", "the [MASK] sat."), "exported model")
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(UserError, match=r"pip install 'bertforge\[onnx\]'"):
        from bertforge.serving.export import export_model

        export_model(model, tmp_path / "none")
    assert not (tmp_path / "none").exists()


def test_an_export_serves_and_nothing_trains_it(tmp_path, wordpiece_tokenizer):
    """A served export is its own type, handed out only to the verbs that answer (load_served); loading it as a
    trainable model (finetune, evaluate, extend, pretrain --init-from all do) is refused in one line, never a
    graph where a module is expected."""
    from bertforge.modelfiles.directory import load_model, load_model_and_tokenizer, load_weights, read_model_files
    from bertforge.serving.served import ServedGraph, load_served

    model = head_model(tmp_path, wordpiece_tokenizer, "classification")
    export(model, tmp_path / "onnx")
    files = read_model_files(tmp_path / "onnx")
    _, served, _ = load_served(files, BertForSequenceClassification, num_labels=3)
    assert isinstance(served, ServedGraph)
    trainable = load_model(BertForSequenceClassification, model, num_labels=3)
    for attempt in (
        lambda: load_model(BertForSequenceClassification, files, num_labels=2),
        lambda: load_model_and_tokenizer(files, BertForSequenceClassification, num_labels=2),
        lambda: load_weights(trainable, files),
    ):
        with pytest.raises(UserError, match="is an exported model .* the model it was exported from"):
            attempt()
    (tmp_path / "train.tsv").write_text("text\tlabel\n" + "".join(f"{t}\t{i % 2}\n" for i, t in enumerate(TEXTS * 4)))
    done = bertforge(
        "finetune", tmp_path / "onnx", "--task", "classification", "--train", tmp_path / "train.tsv",
        "--text-column", "text", "--label-column", "label", "--out", tmp_path / "tuned",
    )  # fmt: skip
    one_line_error(done, "is an exported model")
    assert not (tmp_path / "tuned").exists()


@pytest.mark.parametrize("check", [["the cat sat."], ["the cat sat."] * 5])
def test_the_graph_is_traced_with_padding_whatever_the_check_texts(tmp_path, wordpiece_tokenizer, check):
    """--check-data of one text, or of identical lines, holds no padding: the graph is traced on texts of different
    lengths all the same, so it reads attention_mask and a padded batch gets PyTorch's answers."""
    (tmp_path / "check.txt").write_text("\n".join(check) + "\n")
    model = head_model(tmp_path, wordpiece_tokenizer, "classification")
    done = export(model, tmp_path / "onnx", "--check-data", tmp_path / "check.txt")
    assert "attention_mask" in done["inputs"] and done["texts"] == len(check)
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n")
    args = ["--input", tmp_path / "texts.txt", "--json"]
    ours = json.loads(bertforge_ok("classify", model, *args).stdout)
    exported = json.loads(bertforge_ok("classify", tmp_path / "onnx", *args).stdout)
    assert _rounded(exported) == _rounded(ours)


def changed_graph(source, out, change, record_digest=True):
    """A copy of the export at `source` whose graph `change(model_proto)` altered (what a hostile file could be), its
    config.json's recorded digest made the altered graph's (a hostile directory alters both), or left as exported."""
    import shutil

    import onnx

    from bertforge.serving.graph import graph_digest

    shutil.copytree(source, out)
    model = onnx.load(str(out / GRAPH))
    change(model)
    onnx.save(model, str(out / GRAPH))
    if record_digest:
        config = json.loads((out / "config.json").read_text())
        config[EXPORT_KEY]["sha256"] = graph_digest(out / GRAPH)
        (out / "config.json").write_text(json.dumps(config))
    return out


def _rename_output(model):
    model.graph.output[0].name = "scores"


def _add_loop(model):
    import onnx

    model.graph.node.append(onnx.helper.make_node("Loop", ["trip", "cond"], ["out"], body=onnx.GraphProto()))


def _nan_weight(model):
    from onnx import numpy_helper

    tensor = next(t for t in model.graph.initializer if t.data_type == 1 and len(t.dims) == 2)
    values = numpy_helper.to_array(tensor).copy()
    values[0, 0] = np.nan
    tensor.CopyFrom(numpy_helper.from_array(values, tensor.name))


def _wider_logits(model):
    model.graph.output[0].type.tensor_type.shape.dim[-1].dim_value = 7


def _rename_input(model):
    model.graph.input[1].name = "mask"


def _scalar_output(model):
    del model.graph.output[0].type.tensor_type.shape.dim[:]


@pytest.mark.parametrize(
    "change, said",
    [
        (_rename_output, "the graph answers scores; the verb reads logits"),
        (_add_loop, "a Loop operator, which bertforge never exports"),
        (_nan_weight, "holds values that are not numbers"),
        (_wider_logits, "logits is 7 wide; the model's config makes 3"),
        (_rename_input, "the graph takes"),
        (_scalar_output, "has rank 0, not 2"),
    ],
)
def test_a_served_graph_is_checked_against_its_config_before_it_runs(tmp_path, wordpiece_tokenizer, change, said):
    """An export directory is an input: its graph's inputs, outputs, widths, operators and weights are checked
    against config.json and the verb's head before ONNX Runtime runs it; each fault is one line, exit 2."""
    model = head_model(tmp_path, wordpiece_tokenizer, "classification")
    export(model, tmp_path / "onnx")
    bad = changed_graph(tmp_path / "onnx", tmp_path / "bad", change)
    one_line_error(bertforge("classify", bad, "the cat sat."), said)


def test_a_verb_needing_another_head_refuses_the_export(tmp_path, wordpiece_tokenizer):
    """`answer` or `tag` on a classifier's export: one line saying what the graph answers and what the verb needs."""
    model = head_model(tmp_path, wordpiece_tokenizer, "classification")
    export(model, tmp_path / "onnx")
    done = bertforge("answer", tmp_path / "onnx", "--question", "who?", "--context", "the cat sat.")
    one_line_error(done, "answers sequence-classification; the verb needs question-answering")


def test_a_run_past_its_time_is_terminated_in_one_line(tmp_path, wordpiece_tokenizer, monkeypatch):
    """A served graph runs under a watchdog: a run past RUN_SECONDS (here none at all) is terminated, one line."""
    import torch

    from bertforge.serving import served

    export(head_model(tmp_path, wordpiece_tokenizer, "sentence"), tmp_path / "onnx")
    _, model, _ = served.load_served(tmp_path / "onnx", BertForSentenceEmbedding)
    monkeypatch.setattr(served, "RUN_SECONDS", 0.0)
    ids = torch.randint(5, 50, (64, 64))
    with pytest.raises(UserError, match="could not answer"):
        for _ in range(20):  # the watchdog fires before the run or between its nodes
            model.run(ids, None, torch.ones_like(ids))
