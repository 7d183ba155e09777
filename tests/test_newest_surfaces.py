"""Boundary III: the newest surfaces held to the one boundary, each case built as the real libraries write it
(`save_pretrained`, `SentenceTransformer.save`, a checkpoint or an export bertforge wrote and then altered).

Resumed optimizer states are inputs (their tensors checked, their hyper-parameters the run's own, another optimizer's
state started fresh in one line); sizes are read from headers before any mapping; a served graph's answers are
checked after each run; records cannot misdirect loads; DeBERTa's absent keys mean what `transformers` takes them to
mean; released layouts are read as they are (no id2label, prompts); defaults fit the run; task heads are kept."""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

from bertforge.errors import UserError
from bertforge.families.architectures import ARCHITECTURES, BATCH, Architecture
from bertforge.modelfiles.exported import EXPORT_KEY, GRAPH

from conftest import (
    TINY_MODEL,
    TINY_RUN,
    bertforge,
    bertforge_ok,
    needs,
    one_line_error,
    prepared_data,
    train_metrics,
)
from released import build, deberta_config, deberta_tokenizer, randomised, sentences


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """Prepared data, and a tiny run of each optimizer with checkpoints at steps 2 and 4."""
    root = prepared_data(tmp_path_factory.mktemp("surfaces"), seed=11)
    for optimizer in ("adamw", "muon"):
        bertforge_ok(
            "pretrain", "--data", root / "data", "--out", root / optimizer, *TINY_MODEL, *TINY_RUN,
            "--max-steps", "4", "--save-every", "2", "--recipe", "budget", "--optimizer", optimizer,
        )  # fmt: skip
    return root


def tampered(run, target, change):
    """A copy of `run` whose last checkpoint's optimizer.pt `change(tensors)` altered, its checksum made to match
    (a hostile state, not a damaged one)."""
    shutil.copytree(run, target)
    checkpoint = sorted((target / "checkpoints").iterdir())[-1]
    path = checkpoint / "optimizer.pt"
    tensors = torch.load(path, weights_only=True)
    change(tensors)
    torch.save(tensors, path)
    sums = json.loads((checkpoint / "checksums.json").read_text())
    sums["optimizer.pt"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (checkpoint / "checksums.json").write_text(json.dumps(sums))
    return target


def resume(work, run, *flags):
    return bertforge("pretrain", "--data", work / "data", "--out", run, "--resume", *TINY_RUN, "--max-steps",
                     "6", *flags)  # fmt: skip


def _set_ns_steps(tensors):
    for group in tensors["optimizer"]["muon"]["param_groups"]:
        group["ns_steps"] = 10**9


def test_a_resumed_state_trains_with_the_runs_hyper_parameters_not_the_files(work, tmp_path):
    """A checksummed optimizer.pt whose Muon groups ask for 10⁹ Newton-Schulz steps (no step would ever end) resumes
    exactly as the untouched state does, step for step: the run's own hyper-parameters step it."""
    plain = tampered(work / "muon", tmp_path / "plain", lambda tensors: None)
    hostile = tampered(work / "muon", tmp_path / "hostile", _set_ns_steps)
    for run in (plain, hostile):
        done = resume(work, run)
        assert done.returncode == 0, done.stderr
    losses = [[row["loss"] for row in train_metrics(run) if row["step"] > 4] for run in (plain, hostile)]
    assert losses[0] and losses[0] == losses[1]


@pytest.mark.parametrize(
    "change, said",
    [
        (lambda t: t["optimizer"]["muon"]["state"][0].update(momentum_buffer=torch.zeros(3, 3)), "momentum_buffer"),
        (lambda t: t["optimizer"]["adamw"]["state"][0]["exp_avg"].fill_(float("nan")), "not numbers"),
        (lambda t: t["optimizer"]["adamw"]["state"][0].update(exp_avg_sq=torch.zeros(2, dtype=torch.long)), "float"),
        (lambda t: t["optimizer"]["adamw"]["state"].update({10**6: {}}), "no parameter of this model"),
        (lambda t: t["optimizer"]["adamw"]["param_groups"].pop(), "parameter groups differ"),
        (lambda t: t.update(cpu_rng=torch.zeros(3)), "not a checkpoint state"),
    ],
)
def test_a_hostile_optimizer_state_is_one_line(work, tmp_path, change, said):
    """A momentum buffer of another shape, moments that are not numbers or not floats, an entry for no parameter,
    a missing group, a foreign RNG state: one line naming the file, exit 2 (each was a traceback or a nan run)."""
    run = tampered(work / "muon", tmp_path / "run", change)
    one_line_error(resume(work, run), "optimizer.pt", said)


@pytest.mark.parametrize("started, switched", [("adamw", "muon"), ("muon", "adamw")])
def test_resuming_with_another_optimizer_starts_its_state_fresh_in_one_line(work, tmp_path, started, switched):
    """`pretrain --resume --optimizer muon` on an AdamW run (a KeyError before) and the reverse: the run goes on,
    the new optimizer's state fresh, said in one line; the run records the optimizer it now steps with."""
    run = shutil.copytree(work / started, tmp_path / "run")
    done = resume(work, run, "--optimizer", switched)
    assert done.returncode == 0, done.stderr
    assert f"holds {started}'s optimizer state" in done.stderr and "starts fresh" in done.stderr
    assert json.loads((run / "config.json").read_text())["train"]["optimizer"] == switched
    assert max(row["step"] for row in train_metrics(run)) == 6


@settings(max_examples=12, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    group=st.sampled_from(["muon", "adamw"]),
    key=st.sampled_from(["lr", "weight_decay", "momentum", "ns_steps", "eps", "betas", "nesterov", "params", "foo"]),
    value=st.one_of(
        st.none(),
        st.integers(-(10**12), 10**12),
        st.floats(allow_subnormal=False),
        st.text(max_size=5),
        st.lists(st.integers(0, 9), max_size=3),
    ),  # noqa: E501
)
def test_fuzzed_optimizer_states_resume_in_bounded_time_or_one_line(work, tmp_path_factory, group, key, value):
    """Any value in any hyper-parameter of a resumed state (checksums made to match): the resume ends with exit 0
    or 2 and no traceback, in seconds."""

    def change(tensors):
        for settings_ in tensors["optimizer"][group]["param_groups"]:
            settings_[key] = value

    run = tampered(work / "muon", tmp_path_factory.mktemp("fuzz-state") / "run", change)
    done = resume(work, run)
    assert done.returncode in (0, 2) and "Traceback" not in done.stderr, (group, key, value, done.stderr[-2000:])


# ----------------------------------------------------------------------------- sizes from headers


def test_a_header_listing_a_huge_unused_tensor_is_refused_without_mapping_the_file(work, tmp_path):
    """model.safetensors whose header lists an unused 3 GB tensor past the real ones (a sparse file): the index is
    read from the header's bytes, so the refusal names the tensor, and nothing maps or reads the 3 GB."""
    from bertforge.modelfiles import directory as model_files

    model = shutil.copytree(work / "adamw" / "model", tmp_path / "model")
    path = model / "model.safetensors"
    data = path.read_bytes()
    length = int.from_bytes(data[:8], "little")
    header, tensors = json.loads(data[8 : 8 + length]), data[8 + length :]
    header["unused.huge"] = {
        "dtype": "F32",
        "shape": [3 << 28],
        "data_offsets": [len(tensors), len(tensors) + (3 << 30)],
    }
    encoded = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(len(encoded).to_bytes(8, "little") + encoded + tensors)
        f.truncate(8 + len(encoded) + len(tensors) + (3 << 30))
    index = model_files.weight_index(model)
    assert index["unused.huge"] == ((3 << 28,), "F32")
    one_line_error(bertforge("fill-mask", model, "the [MASK] sat."), "unused.huge")


@pytest.mark.parametrize(
    "entry, said",
    [
        ({"dtype": ["F32"], "shape": [2], "data_offsets": [0, 8]}, "not a tensor's"),
        ({"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}, "lies outside it"),
        ({"dtype": "F32", "shape": [2], "data_offsets": [0, 10**12]}, "lies outside it"),
        ({"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}, "not a tensor's"),
    ],
)
def test_a_safetensors_entry_is_checked_as_the_format_defines_it(work, tmp_path, entry, said):
    model = shutil.copytree(work / "adamw" / "model", tmp_path / "model")
    path = model / "model.safetensors"
    data = path.read_bytes()
    length = int.from_bytes(data[:8], "little")
    header = {**json.loads(data[8 : 8 + length]), "extra": entry}
    encoded = json.dumps(header).encode()
    path.write_bytes(len(encoded).to_bytes(8, "little") + encoded + data[8 + length :])
    one_line_error(bertforge("fill-mask", model, "the [MASK] sat."), said)


# ----------------------------------------------------------------------------- served graphs


@pytest.fixture(scope="module")
def classifier(work):
    """A 3-label classifier fine-tuned here, and its fp32 export."""
    needs("onnxruntime")
    rows = ["text\tlabel", *(f"{s}\t{('pos', 'neg', 'mid')[i % 3]}" for i, s in enumerate(sentences(60)))]
    (work / "labels.tsv").write_text("\n".join(rows) + "\n")
    bertforge_ok(
        "finetune", work / "adamw" / "model", "--task", "classification", "--train", work / "labels.tsv", "--dev",
        work / "labels.tsv", "--text-column", "text", "--label-column", "label", "--out", work / "classifier",
        "--epochs", "1", "--precision", "fp32", "--quiet",
    )  # fmt: skip
    bertforge_ok("export", work / "classifier", "--out", work / "classifier-onnx")
    return work / "classifier" / "model", work / "classifier-onnx"


def rewired(source, target, tail, dtype=None, record_digest=True, initializers=()):
    """A copy of the export whose logits pass through `tail` nodes (input "raw", output "logits"), declared
    dynamic in width, its recorded digest the new graph's (a hostile directory alters both)."""
    import onnx
    from onnx import TensorProto, helper

    shutil.copytree(source, target)
    model = onnx.load(str(target / GRAPH))
    graph = model.graph
    for node in graph.node:
        node.output[:] = ["raw" if name == "logits" else name for name in node.output]
    graph.initializer.extend(initializers)
    graph.node.extend(tail)
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info("logits", dtype or TensorProto.FLOAT, [BATCH, "width"]))
    onnx.save(model, str(target / GRAPH))
    if record_digest:
        config = json.loads((target / "config.json").read_text())
        config[EXPORT_KEY]["sha256"] = hashlib.sha256((target / GRAPH).read_bytes()).hexdigest()
        (target / "config.json").write_text(json.dumps(config))
    return target


def _tails():
    from onnx import TensorProto, helper

    int64 = ([helper.make_node("Cast", ["raw"], ["logits"], to=TensorProto.INT64)], TensorProto.INT64, ())
    zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
    infinite = ([helper.make_node("Div", ["raw", "zero"], ["d"]), helper.make_node("Abs", ["d"], ["logits"])], None,
                (zero,))  # fmt: skip
    bounds = [helper.make_tensor(n, TensorProto.INT64, [1], [v]) for n, v in (("s", 0), ("e", 2), ("a", 1))]
    narrow = ([helper.make_node("Slice", ["raw", "s", "e", "a"], ["logits"])], None, bounds)
    six = ([helper.make_node("Concat", ["raw", "raw"], ["logits"], axis=1)], None, ())
    return {"int64": (int64, "as int64"), "inf": (infinite, "not numbers"), "narrow": (narrow, "2 wide"),
            "six": (six, "6 wide")}  # fmt: skip


@pytest.mark.parametrize("kind", ["int64", "inf", "narrow", "six"])
def test_a_served_graphs_answer_is_checked_after_it_runs(classifier, tmp_path, kind):
    """Logits as int64, +inf, narrower or wider than the labels (six for three), the width declared dynamic so no
    check before the run can see it: one line, never probabilities computed from them."""
    (nodes, dtype, initializers), said = _tails()[kind]
    bad = rewired(classifier[1], tmp_path / "bad", nodes, dtype, initializers=initializers)
    one_line_error(bertforge("classify", bad, "the cat sat."), said)


def test_another_models_graph_or_config_is_refused(classifier, work, tmp_path):
    """Another model's graph dropped into an export: its digest is not the recorded one; a config.json whose
    hidden size is not the graph's: its token table says so (was a traceback)."""
    bertforge_ok("export", work / "adamw" / "model", "--out", tmp_path / "masked")
    swapped = shutil.copytree(classifier[1], tmp_path / "swapped")
    shutil.copyfile(tmp_path / "masked" / GRAPH, swapped / GRAPH)
    one_line_error(bertforge("classify", swapped, "the cat"), "sha256 differs")
    wider = shutil.copytree(classifier[1], tmp_path / "wider")
    config = json.loads((wider / "config.json").read_text())
    (wider / "config.json").write_text(json.dumps({**config, "hidden_size": 64}))
    one_line_error(bertforge("classify", wider, "the cat"), "token table is", "x 64")


def test_a_graph_past_protobufs_limit_is_refused_unread(classifier, tmp_path):
    """A 2.2 GB onnx/model.onnx (a sparse file) is refused from its size, before a byte of it is parsed."""
    big = shutil.copytree(classifier[1], tmp_path / "big")
    with open(big / GRAPH, "r+b") as f:
        f.truncate(2_200_000_000)
    one_line_error(bertforge("classify", big, "the cat"), "refused unread")


def test_unreadable_initializers_are_one_line(classifier, tmp_path):
    """A graph weight whose bytes do not fit its type and shape: one line (was a numpy traceback)."""
    import onnx

    bad = shutil.copytree(classifier[1], tmp_path / "bad")
    model = onnx.load(str(bad / GRAPH))
    model.graph.initializer[0].raw_data = b"\x00" * 3
    onnx.save(model, str(bad / GRAPH))
    config = json.loads((bad / "config.json").read_text())
    config[EXPORT_KEY]["sha256"] = hashlib.sha256((bad / GRAPH).read_bytes()).hexdigest()
    (bad / "config.json").write_text(json.dumps(config))
    one_line_error(bertforge("classify", bad, "the cat"), "cannot be read")


def test_weights_past_float_range_are_one_line_in_every_path(classifier, tmp_path):
    """Finite weights of 1e20 overflow to nan in the forward pass: classify and export (fp32, and int8 through
    SmoothQuant and the quantizer) end in one line, never nan probabilities with exit 0."""
    model = shutil.copytree(classifier[0], tmp_path / "huge")
    weights = load_file(model / "model.safetensors")
    for tensor in weights.values():
        if tensor.ndim == 2:  # every matrix
            tensor.fill_(1e20)
    save_file(weights, model / "model.safetensors", metadata={"format": "pt"})
    one_line_error(bertforge("classify", model, "the cat sat"), "not numbers")
    one_line_error(bertforge("export", model, "--out", tmp_path / "x"), "not numbers")
    one_line_error(bertforge("export", model, "--out", tmp_path / "y", "--quantize", "int8"), "not numbers")


def test_a_classifier_without_its_head_is_refused_where_it_would_answer(classifier, tmp_path):
    """A classifier directory whose classifier weights are gone: classify and export refuse in one line (each
    answered from a fresh random head with exit 0); fine-tuning it, which trains a new head, goes on."""
    model = shutil.copytree(classifier[0], tmp_path / "headless")
    weights = {k: v for k, v in load_file(model / "model.safetensors").items() if not k.startswith("classifier")}
    save_file(weights, model / "model.safetensors", metadata={"format": "pt"})
    one_line_error(bertforge("classify", model, "the cat"), "lack", "classifier")
    one_line_error(bertforge("export", model, "--out", tmp_path / "x"), "lack", "classifier")


@settings(max_examples=10, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scale=st.sampled_from([0.0, 1e-30, 1e30, float("inf"), float("nan")]), width=st.integers(1, 6))
def test_fuzzed_graph_answers_end_in_exit_0_or_2(classifier, tmp_path_factory, scale, width):
    """The logits scaled by any number and cut or repeated to any width: classify ends in exit 0 (3 labels,
    finite) or 2, never a traceback and never a nan probability."""
    from onnx import TensorProto, helper

    factor = helper.make_tensor("factor", TensorProto.FLOAT, [], [scale])
    bounds = [helper.make_tensor(n, TensorProto.INT64, [1], [v]) for n, v in (("s", 0), ("e", width), ("a", 1))]
    tail = [helper.make_node("Mul", ["raw", "factor"], ["m"]), helper.make_node("Concat", ["m", "m"], ["c"], axis=1),
            helper.make_node("Slice", ["c", "s", "e", "a"], ["logits"])]  # fmt: skip
    bad = rewired(classifier[1], tmp_path_factory.mktemp("graph") / "bad", tail, initializers=[factor, *bounds])
    done = bertforge("classify", bad, "the cat sat.", "--json")
    assert done.returncode in (0, 2) and "Traceback" not in done.stderr, done.stderr
    if done.returncode == 0:
        assert width == 3
        assert all(np.isfinite(p) for p in json.loads(done.stdout)[0]["probabilities"].values())


# ----------------------------------------------------------------------------- records


def test_a_record_that_would_misdirect_loads_is_refused_when_registered():
    """A record whose head is the encoder (every load dropping heads would start the encoder fresh), or one whose
    axes are numbers: refused at registration, one line."""
    model = "bertforge.model.heads:BertForSequenceClassification"
    for heads in (("bert",), ("bert.layers",), ("",)):
        with pytest.raises(UserError, match="head"):
            ARCHITECTURES.register(Architecture("Misdirected", "ForMisdirection", model, "x", "x", "AutoModel",
                                                heads=heads))  # fmt: skip
    with pytest.raises(UserError, match="names"):
        ARCHITECTURES.register(Architecture("Numeric", "ForNumbers", model, "x", "x", "AutoModel", outputs={"o": (0,)}))
    assert "Misdirected" not in ARCHITECTURES and "Numeric" not in ARCHITECTURES


# ----------------------------------------------------------------------------- families' absent keys


def _their_and_our_logits(directory):
    from bertforge.modelfiles.directory import load_model_and_tokenizer

    transformers = needs("transformers")
    ids = torch.tensor([[2, 10, 11, 12, 13, 14, 15, 3]])
    _, ours, _ = load_model_and_tokenizer(directory)
    with torch.no_grad():
        mine = ours.mlm_head(ours.bert(ids).sequence_output)[..., : ours.config.vocab_size]
        theirs = transformers.AutoModelForMaskedLM.from_pretrained(directory).eval()(input_ids=ids).logits
    return mine, theirs


@pytest.fixture(scope="module")
def deberta(tmp_path_factory):
    """DeBERTa-v3's layout, saved by `save_pretrained`, its position table drawn wide so that a term computed
    otherwise moves the logits far past the tolerance."""
    transformers = needs("transformers")
    needs("sentencepiece")
    root = tmp_path_factory.mktemp("deberta-keys")
    tokenizer = deberta_tokenizer()
    model = randomised(transformers.DebertaV2ForMaskedLM(deberta_config(len(tokenizer))))
    with torch.no_grad():
        model.deberta.encoder.rel_embeddings.weight.normal_(0.0, 3.0)
    model.save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    return root / "model"


def test_every_deberta_key_left_out_means_what_transformers_takes_it_to_mean(deberta, tmp_path):
    """Each key of a DeBERTa-v3 config.json deleted in turn: bertforge computes what `transformers` computes from the
    same file (logits to 1e-5), or refuses in one line naming the key. Without relative_attention or norm_rel_ebd
    `transformers` computes other attention than v3's: bertforge once computed v3's anyway."""
    refused = each_key_left_out(deberta, tmp_path)
    assert {"relative_attention", "norm_rel_ebd", "position_buckets", "share_att_key"} <= set(refused)


def each_key_left_out(model, tmp_path) -> list[str]:
    """Each key of `model`'s config.json deleted in turn: our logits equal `transformers`' from the same file (to
    1e-5), or the key is refused in one line naming it; the keys refused."""
    config = json.loads((model / "config.json").read_text())
    refused = []
    for key in sorted(set(config) - {"architectures", "model_type", "transformers_version", "dtype"}):
        case = shutil.copytree(model, tmp_path / key)
        (case / "config.json").write_text(json.dumps({k: v for k, v in config.items() if k != key}))
        try:
            mine, theirs = _their_and_our_logits(case)
        except UserError as e:
            assert key in str(e), (key, str(e))
            refused.append(key)
            continue
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-5, msg=f"without {key}")
    return refused


def test_every_mpnet_key_left_out_means_what_transformers_takes_it_to_mean(tmp_path):
    """The same for MPNet (microsoft/mpnet-base's layout, MPNetForMaskedLM by save_pretrained, its relative
    attention table drawn wide): each key deleted in turn computes `transformers`' logits or is refused naming it."""
    needs("transformers")
    model = build("mpnet", tmp_path)
    weights = load_file(model / "model.safetensors")
    table = "mpnet.encoder.relative_attention_bias.weight"
    weights[table] = torch.randn_like(weights[table]) * 3.0
    save_file(weights, model / "model.safetensors", metadata={"format": "pt"})
    assert "max_position_embeddings" in each_key_left_out(model, tmp_path / "keys")  # its table has 514 rows


# ----------------------------------------------------------------------------- released layouts as they are


def test_a_two_label_classifier_saved_without_id2label_classifies(work, tmp_path):
    """transformers 5 writes no id2label for its default two labels: classify and export read LABEL_0 and LABEL_1,
    its probabilities `transformers`' own (it was "not a classification model")."""
    transformers = needs("transformers")
    from bertforge.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(work / "tok")
    config = transformers.BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=64)  # fmt: skip
    theirs = randomised(transformers.BertForSequenceClassification(config))
    theirs.save_pretrained(tmp_path / "model")
    assert "id2label" not in json.loads((tmp_path / "model" / "config.json").read_text())
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if (work / "adamw" / "model" / name).is_file():
            shutil.copyfile(work / "adamw" / "model" / name, tmp_path / "model" / name)
    answer = json.loads(bertforge_ok("classify", tmp_path / "model", "the cat sat on the mat", "--json").stdout)
    ids = torch.tensor([tokenizer.encode("the cat sat on the mat").ids])
    with torch.no_grad():
        expected = theirs(input_ids=ids).logits.softmax(-1)[0]
    assert list(answer["probabilities"]) == ["LABEL_0", "LABEL_1"]
    assert list(answer["probabilities"].values()) == pytest.approx(expected.tolist(), abs=1e-5)


@pytest.fixture(scope="module")
def prompted(tmp_path_factory):
    """all-MiniLM-L6-v2's layout (SentenceTransformer.save) with prompts as E5 and nomic-embed-text write them,
    the query prompt the default."""
    root = tmp_path_factory.mktemp("prompts")
    model = build("sentence_embedding", root)
    path = model / "config_sentence_transformers.json"
    settings_ = json.loads(path.read_text())
    settings_.update(prompts={"query": "search_query: ", "document": "search_document: "}, default_prompt_name="query")
    path.write_text(json.dumps(settings_))
    return model


def test_embed_and_search_honour_the_models_prompts(prompted, tmp_path):
    """embed equals SentenceTransformer.encode with the default prompt, and with --prompt NAME its prompt_name;
    search reads queries after the query prompt and the corpus after the document prompt (encode_query,
    encode_document); --dimensions cuts Matryoshka-style and normalises again. Leaving the prompt out moves the
    vectors far past the tolerance."""
    sentence_transformers = needs("sentence_transformers")
    st_model = sentence_transformers.SentenceTransformer(str(prompted), device="cpu")
    texts = ["the cat sat on the mat", "a bird sang in the tree"]
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    runs = {"default": (), "document": ("--prompt", "document"), "cut": ("--dimensions", "8")}
    got = {}
    for name, flags in runs.items():
        bertforge_ok("embed", prompted, "--input", tmp_path / "texts.txt", "--out", tmp_path / f"{name}.npy", *flags)
        got[name] = np.load(tmp_path / f"{name}.npy")
    np.testing.assert_allclose(got["default"], st_model.encode(texts), atol=1e-5)
    np.testing.assert_allclose(got["document"], st_model.encode(texts, prompt_name="document"), atol=1e-5)
    assert np.abs(got["default"] - st_model.encode(texts, prompt="")).max() > 1e-3  # the prompt matters
    cut = st_model.encode(texts, truncate_dim=8)
    np.testing.assert_allclose(got["cut"], cut / np.linalg.norm(cut, axis=1, keepdims=True), atol=1e-5)
    hits = json.loads(
        bertforge_ok("search", prompted, "a cat on a mat", "--corpus", tmp_path / "texts.txt", "--json").stdout
    )[0]["results"]
    query = st_model.encode_query(["a cat on a mat"])
    corpus = st_model.encode_document(texts)
    assert hits[0]["score"] == pytest.approx(float((query @ corpus.T).max()), abs=1e-5)
    one_line_error(bertforge("embed", prompted, "--input", tmp_path / "texts.txt", "--out", tmp_path / "x.npy",
                             "--prompt", "passage"), "no prompt of that name")  # fmt: skip
    one_line_error(bertforge("embed", prompted, "--input", tmp_path / "texts.txt", "--out", tmp_path / "x.npy",
                             "--dimensions", "999"), "--dimensions 999")  # fmt: skip


# ----------------------------------------------------------------------------- defaults that fit the run


@pytest.fixture(scope="module")
def headless(tmp_path_factory):
    """A released headless sentence-embedding model and data prepared with its tokenizer."""
    root = tmp_path_factory.mktemp("headless")
    model = build("sentence_embedding", root)
    (root / "corpus.txt").write_text("\n".join(sentences(400, seed=3)) + "\n")
    bertforge_ok(
        "prepare", root / "corpus.txt", "--tokenizer", model, "--out", root / "data", "--valid-fraction", "0.1"
    )
    return model, root / "data"


def continue_run(headless, out, *flags):
    model, data = headless
    return bertforge("pretrain", "--data", data, "--init-from", model, "--out", out, "--seq-len", "64", "--precision",
                     "fp32", "--num-workers", "0", "--quiet", "--eval-every", "0", *flags)  # fmt: skip


def test_the_head_warmups_default_fits_a_short_continuation(headless, tmp_path):
    """`pretrain --init-from RELEASED --max-steps 30`, no flag: it runs, the head warming up for a tenth of the
    run (it was refused for a warm-up of 100 nobody asked for); an explicit warm-up that leaves the encoder no
    steps is still refused."""
    done = continue_run(headless, tmp_path / "run", "--max-steps", "30")
    assert done.returncode == 0, done.stderr
    assert (
        json.loads((tmp_path / "run" / "model" / "config.json").read_text())["bertforge_pretrain"]["head_warmup"] == 3
    )
    one_line_error(continue_run(headless, tmp_path / "refused", "--max-steps", "30", "--head-warmup-steps", "30"),
                   "--head-warmup-steps 30 is not shorter than --max-steps 30")  # fmt: skip


def test_a_huge_warmup_under_a_time_budget_leaves_the_encoder_its_time(headless, tmp_path):
    """--head-warmup-steps 10⁶ with --time-budget: the head's phase ends at half the budget, said in a line; the
    run records where it ended, and the encoder moved."""
    model, _ = headless
    done = continue_run(headless, tmp_path / "run", "--time-budget", "6s", "--head-warmup-steps", "1000000")
    assert done.returncode == 0, done.stderr
    assert "the new head's warm-up ends at step" in done.stderr
    ended = json.loads((tmp_path / "run" / "model" / "config.json").read_text())["bertforge_pretrain"]["head_warmup"]
    steps = max(row["step"] for row in train_metrics(tmp_path / "run"))
    assert 0 < ended < steps
    before, after = load_file(model / "model.safetensors"), load_file(tmp_path / "run" / "model" / "model.safetensors")
    name = next(k for k in before if k.endswith("attention.self.query.weight"))
    assert not torch.equal(before[name], after["bert." + name])  # saved under the encoder's prefix, as transformers


def test_evaluate_refuses_a_run_config_it_cannot_score_and_a_score_of_nothing(work, tmp_path):
    """A run config without seed, or with batch_size 0: one line (tracebacks); a text whose every token is
    special or unknown, masking nothing: one line, never "perplexity 1.00" over zero tokens."""
    for change, said in ((lambda train: train.pop("seed"), "lack seed"), (lambda train: train.update(batch_size=0),
                                                                          "batch_size")):  # fmt: skip
        run = shutil.copytree(work / "adamw", tmp_path / said.replace(" ", "-"))
        config = json.loads((run / "config.json").read_text())
        change(config["train"])
        (run / "config.json").write_text(json.dumps(config))
        one_line_error(bertforge("evaluate", run, "--data", work / "data"), said)
    (tmp_path / "unknown.txt").write_text("\n".join("∂∆∇ ∂∆∇ ∂∆∇ ∂∆∇ ∂∆∇ ∂∆∇ ∂∆∇ ∂∆∇" for _ in range(40)) + "\n")
    done = bertforge("evaluate", work / "adamw", "--data", tmp_path / "unknown.txt")
    assert done.returncode == 2 and "perplexity" not in done.stdout, done


# ----------------------------------------------------------------------------- heads kept


def test_a_continued_or_extended_classifier_comes_back_as_a_classifier(classifier, work, tmp_path):
    """pretrain --init-from and tokenizer extend on a fine-tuned classifier (ModernBERT's, as `budget` makes it):
    saved as its class again, its labels and head weights as they were, a trained masked-LM head beside them that
    fill-mask answers from; `transformers` loads the class from it (the two verbs saved a masked LM and an encoder
    before, the head and labels gone)."""
    transformers = needs("transformers")
    model, _ = classifier
    data = work / "data"
    done = bertforge("pretrain", "--data", data, "--init-from", model, "--out", tmp_path / "run", "--max-steps", "20",
                     *TINY_RUN)  # fmt: skip
    assert done.returncode == 0, done.stderr
    saved_as = json.loads((model / "config.json").read_text())["architectures"]  # the recipe's family's class
    assert f"saved as {saved_as[0]} again" in done.stderr, done.stderr
    bertforge_ok("tokenizer", "extend", model, work / "corpus.txt", "--add", "2", "--out", tmp_path / "extended")
    before = load_file(model / "model.safetensors")
    head = [name for name in before if name.startswith(("classifier.", "head."))]
    for directory in (tmp_path / "run" / "model", tmp_path / "extended"):
        config = json.loads((directory / "config.json").read_text())
        assert config["architectures"] == saved_as
        assert config["id2label"] == json.loads((model / "config.json").read_text())["id2label"]
        after = load_file(directory / "model.safetensors")
        assert head and all(torch.equal(after[name], before[name]) for name in head)
        classes = transformers.AutoModelForSequenceClassification.from_pretrained(directory)
        assert classes.config.id2label == {int(k): v for k, v in config["id2label"].items()}
    bertforge_ok("fill-mask", tmp_path / "run", "the [MASK] sat on the mat.")
    bertforge_ok("classify", tmp_path / "extended", "the cat sat")


def test_the_int8_gate_reads_a_pair_classifiers_pairs_and_a_bounded_sample(classifier, tmp_path):
    """--check-data with --pair-column feeds the gate pairs as the classifier reads them ([CLS] a [SEP] b [SEP],
    segment 1 for b); a file of 5,000 lines is checked on a seeded sample of 2,000, said in the summary."""
    from bertforge.serving import export as exporting
    from bertforge.serving.kinds import KINDS
    from bertforge.tokenizer import load_tokenizer

    pairs = [f"{a}\t{b}" for a, b in zip(sentences(5000, seed=1), sentences(5000, seed=2))]
    (tmp_path / "pairs.txt").write_text("\n".join(pairs) + "\n")
    texts, seconds = exporting.check_sample([p.split("\t")[0] for p in pairs], [p.split("\t")[1] for p in pairs])
    assert (
        len(texts) == len(seconds) == exporting.CHECK_SAMPLE
        and texts == exporting.check_sample([p.split("\t")[0] for p in pairs], None)[0]
    )
    tokenizer = load_tokenizer(classifier[0])
    config = json.loads((classifier[0] / "config.json").read_text())
    from bertforge.model.config import ModelConfig

    shape = ModelConfig(vocab_size=config["vocab_size"], hidden_size=32, num_heads=2, intermediate_size=64,
                        max_position_embeddings=64)  # fmt: skip
    batches = exporting._batches(tokenizer, shape, texts[:16], KINDS.get("sequence-classification"), seconds[:16])
    assert all(int(batch["token_type_ids"].max()) == 1 for batch in batches)
    done = bertforge_ok("export", classifier[0], "--out", tmp_path / "x", "--check-data", tmp_path / "pairs.txt",
                        "--pair-column", "1", "--json")  # fmt: skip
    made = json.loads(done.stdout)
    assert made["texts"] == 2000 and made["texts_given"] == 5000


# ----------------------------------------------------------------------------- what a user is told


def test_an_empty_sentencepiece_model_is_one_line_of_bertforges_alone(tmp_path):
    """SentencePiece's own C++ log lines (three, on the process's stderr) no longer precede bertforge's one."""
    model = build("deberta_v3", tmp_path)
    (model / "tokenizer.json").unlink()
    (model / "spm.model").write_bytes(b"")
    done = bertforge("fill-mask", model, "the [MASK] sat.", timeout=120)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr


def test_a_position_table_that_reads_no_text_is_one_line(work, tmp_path):
    model = shutil.copytree(work / "adamw" / "model", tmp_path / "model")
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 1}))
    (tmp_path / "t.txt").write_text("the cat\n")
    one_line_error(bertforge("embed", model, "--input", tmp_path / "t.txt", "--out", tmp_path / "v.npy"),
                   "max_position_embeddings 1 reads no text")  # fmt: skip


def test_advice_is_true_of_the_model_at_hand(work, tmp_path):
    """fill-mask on a sentence-embedding model whose config names a masked-LM class its weights lack (the real
    all-mpnet-base-v2's) says it is a sentence-embedding model and how to train a head, not that it was
    fine-tuned; a classifier whose table is longer than its tokenizer (DeBERTa-v3's are) classifies without the
    never-predicted warning, which a masked LM's fill-mask still gives."""
    transformers = needs("transformers")
    model = build("mpnet_sentence_embedding", tmp_path)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "architectures": ["MPNetForMaskedLM"]}))
    one_line_error(bertforge("fill-mask", model, "the <mask> sat."), "sentence-embedding model", "pretrain --init-from")
    from bertforge.tokenizer import load_tokenizer

    size = load_tokenizer(work / "tok").get_vocab_size()
    labels = {"id2label": {0: "a", 1: "b"}, "label2id": {"a": 0, "b": 1}}
    config = transformers.BertConfig(vocab_size=size + 8, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=64, **labels)  # fmt: skip
    for cls, verb, args in ((transformers.BertForSequenceClassification, "classify", ("the cat sat",)),
                            (transformers.BertForMaskedLM, "fill-mask", ("the [MASK] sat",))):  # fmt: skip
        randomised(cls(config)).save_pretrained(tmp_path / verb)
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
            if (work / "adamw" / "model" / name).is_file():
                shutil.copyfile(work / "adamw" / "model" / name, tmp_path / verb / name)
        said = bertforge_ok(verb, tmp_path / verb, *args).stderr
        assert ("never predicted" in said) == (verb == "fill-mask"), said
