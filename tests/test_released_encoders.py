"""The encoders people download continue faithfully: each released layout (tests/released.py, built here with
`transformers`) loads with `transformers`' own outputs, prepares and continues its pre-training in bertforge, and is
saved in its own family and class, with its special tokens' ids, its dropout and no head that did not train, so that
`transformers` loads it with no weight missing and its fill-mask pipeline answers as `bertforge fill-mask` does."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from bertforge import BertForPreTraining, ModelConfig, load_model, save_model
from bertforge.data.masking import MaskingCollator, MaskingConfig
from bertforge.model.electra import BertForReplacedTokenDetection
from bertforge.model.heads import (
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from bertforge.modelfiles.directory import load_model_and_tokenizer
from bertforge.tokenizer import load_tokenizer, special_ids, word_starts

from conftest import (
    assert_fill_mask_is_the_pipeline,
    bertforge,
    bertforge_ok,
    needs,
    one_line_error,
    padded_batch,
    write_corpus,
)
from released import DISCRIMINATORS, LAYOUTS, TASK_LAYOUTS, build, randomised, sentences

SPECIAL_KEYS = ("pad_token_id", "bos_token_id", "eos_token_id", "cls_token_id", "sep_token_id")


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """Every layout, built once: name -> directory."""
    needs("transformers")
    root = tmp_path_factory.mktemp("released")
    return {name: build(name, root) for name in [*LAYOUTS, *DISCRIMINATORS]}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "corpus.txt"
    write_corpus(path, [sentences(8, seed=i) for i in range(40)])
    return path


def encoded_batch(directory):
    """(input_ids, attention_mask) of two texts of different lengths, padded, as the model's tokenizer makes them."""
    return padded_batch(directory, ["The cat sat on the mat by the river bank.", "covid lockdown"])


def transformers_logits(directory, input_ids, attention_mask, discriminator=False):
    transformers = needs("transformers")
    auto = transformers.AutoModelForPreTraining if discriminator else transformers.AutoModelForMaskedLM
    model, info = auto.from_pretrained(directory, output_loading_info=True)
    assert not info["missing_keys"], info
    with torch.no_grad():
        return model.eval()(input_ids=input_ids, attention_mask=attention_mask).logits


@pytest.mark.parametrize("name", [*LAYOUTS, *DISCRIMINATORS])
def test_every_released_layout_loads_with_transformers_own_outputs(released, name):
    """Before any step, bertforge's model of the directory gives `transformers`' logits (masked LM, or the
    discriminator's replaced-token logits) on a padded batch."""
    discriminator = name in DISCRIMINATORS
    cls = BertForReplacedTokenDetection if discriminator else BertForPreTraining
    _, model, _ = load_model_and_tokenizer(released[name], cls, trust_pickle=name == "bert_bin_only")
    input_ids, attention_mask = encoded_batch(released[name])
    with torch.no_grad():
        ours = model(input_ids, None, attention_mask)
    ours = ours if discriminator else ours.mlm_logits
    theirs = transformers_logits(released[name], input_ids, attention_mask, discriminator)
    real = attention_mask.bool()
    torch.testing.assert_close(ours[real], theirs[real], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_a_continued_model_keeps_its_family_class_ids_dropout_and_starting_weights(released, corpus, tmp_path, name):
    """prepare -> pretrain --init-from with lr 0 -> the saved model is the start: the same model_type, class,
    special-token ids and dropout in config.json, and `transformers` loads it with nothing missing or left over
    and the start's logits. A step-0 evaluation scores the start on the held-out text."""
    start = released[name]
    pickle = ["--trust-pickle"] if name == "bert_bin_only" else []
    bertforge_ok("prepare", corpus, "--tokenizer", start, "--out", tmp_path / "data", "--valid-fraction", "0.1")
    bertforge_ok(
        "pretrain", "--data", tmp_path / "data", "--out", tmp_path / "run", "--init-from", start, "--lr", "0",
        "--max-steps", "2", "--seq-len", "32", "--batch-size", "4", "--eval-every", "2", "--eval-batches", "1",
        "--precision", "fp32", "--num-workers", "0", "--quiet", *pickle,
    )  # fmt: skip
    before = json.loads((start / "config.json").read_text())
    after = json.loads((tmp_path / "run" / "model" / "config.json").read_text())
    for key in ("model_type", "architectures", "vocab_size", *SPECIAL_KEYS):
        assert after.get(key) == before.get(key), key
    dropout = ("hidden_dropout_prob", "dropout", "mlp_dropout")
    assert [after.get(k) for k in dropout] == [before.get(k, after.get(k)) for k in dropout]
    input_ids, attention_mask = encoded_batch(tmp_path / "run" / "model")
    real = attention_mask.bool()
    torch.testing.assert_close(
        transformers_logits(tmp_path / "run" / "model", input_ids, attention_mask)[real],
        transformers_logits(start, input_ids, attention_mask)[real],
        rtol=1e-5,
        atol=1e-5,
    )
    steps = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in steps if r["split"] == "valid"][0] == 0


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_a_continued_model_answers_fill_mask_as_transformers_pipeline(released, corpus, tmp_path, name):
    """After real steps, `bertforge fill-mask` and `transformers`' pipeline give the same top five, the model's own
    mask token (RoBERTa's <mask>) or [MASK] written for it; the tokens are shown as text, not as stored pieces."""
    start = released[name]
    bertforge_ok("prepare", corpus, "--tokenizer", start, "--out", tmp_path / "data")
    pickle = ["--trust-pickle"] if name == "bert_bin_only" else []
    bertforge_ok(
        "pretrain", "--data", tmp_path / "data", "--out", tmp_path / "run", "--init-from", start, "--lr", "1e-3",
        "--max-steps", "6", "--seq-len", "32", "--batch-size", "8", "--precision", "fp32", "--num-workers", "0",
        "--quiet", *pickle,
    )  # fmt: skip
    model = tmp_path / "run" / "model"
    mask = load_tokenizer(model).specials["mask"]
    assert_fill_mask_is_the_pipeline(model, f"The cat sat on the {mask}.")
    shown = json.loads(bertforge_ok("fill-mask", model, "The cat sat on the [MASK].", "--json").stdout)
    tokens = [p["token"] for p in shown["masks"][0]["predictions"]]
    assert not any(t.startswith(("Ġ", "▁")) for t in tokens), tokens


HEADS = {
    "sequence": (BertForSequenceClassification, "AutoModelForSequenceClassification", {"num_labels": 3}),
    "tokens": (BertForTokenClassification, "AutoModelForTokenClassification", {"num_labels": 4}),
    "qa": (BertForQuestionAnswering, "AutoModelForQuestionAnswering", {}),
    "choice": (BertForMultipleChoice, "AutoModelForMultipleChoice", {}),
}


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("name", [*LAYOUTS, *DISCRIMINATORS])
def test_task_heads_of_each_family_are_transformers_own(released, tmp_path, name, head):
    """A task head fine-tuned on every released layout's encoder is saved as that family's class (its
    classification head: RoBERTa's dense + tanh and out_proj, DistilBERT's pre_classifier + ReLU, ELECTRA's dense +
    GELU, ModernBERT's transform) and gives the same outputs in `transformers`."""
    transformers = needs("transformers")
    cls, auto, kwargs = HEADS[head]
    ours = load_model(cls, released[name], name == "bert_bin_only", keep_heads=False, **kwargs)
    torch.manual_seed(1)
    with torch.no_grad():
        for p in ours.parameters():
            if p.requires_grad:  # not a fixed table (ModernBERT's rotary slot, a sinusoidal one): they are not saved
                p.normal_(0.0, 0.2)
    labels = kwargs.get("num_labels", 2)
    save_model(ours.eval(), tmp_path / "ours", None, {"id2label": {str(i): f"L{i}" for i in range(labels)}})
    theirs, info = getattr(transformers, auto).from_pretrained(tmp_path / "ours", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert theirs.config.model_type == json.loads((released[name] / "config.json").read_text())["model_type"]
    input_ids, attention_mask = encoded_batch(released[name])
    if head == "choice":
        input_ids, attention_mask = input_ids[:, None].repeat(1, 2, 1), attention_mask[:, None].repeat(1, 2, 1)
    with torch.no_grad():
        a = ours(input_ids, None, attention_mask)[0]
        b = theirs.eval()(input_ids=input_ids, attention_mask=attention_mask)
    b = torch.stack([b.start_logits, b.end_logits], -1) if head == "qa" else b.logits
    if head in ("tokens", "qa"):
        a, b = a[attention_mask.bool()], b[attention_mask.bool()]
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_whole_word_masking_takes_words_as_the_tokenizer_marks_them(released, name):
    """Byte-level BPE's Ġ, SentencePiece's ▁ and WordPiece's ## mark where words start: every masked word is masked
    whole, over many sequences."""
    tokenizer = load_tokenizer(released[name])
    starts = np.array(word_starts(tokenizer))
    collator = MaskingCollator(tokenizer, MaskingConfig(mask_prob=0.3, max_predictions=40, whole_word_mask=True))
    ids = special_ids(tokenizer)
    multi_piece_words = 0
    for seed, text in enumerate(sentences(200, seed=5)):
        pieces = np.array([ids.cls, *tokenizer.encode(text, add_special_tokens=False).ids, ids.sep])
        _, labels = collator.mask(pieces, seed)
        chosen = labels != -100
        word = np.cumsum(starts[pieces] | np.r_[True, np.isin(pieces[:-1], ids.all)])  # a word number per piece
        for w in np.unique(word[chosen]):
            assert chosen[word == w].all(), (text, tokenizer.encode(text).tokens)
            multi_piece_words += int((word == w).sum() > 1)
    assert multi_piece_words > 20  # the test saw words of several pieces masked whole


def test_what_is_not_read_is_refused_in_one_line(released, corpus, tmp_path):
    """A family bertforge does not read, a tokenizer without a mask token, an embedding table smaller than the
    tokenizer and a directory without tokenizer files: one line naming the directory and what to do, nothing
    written."""
    funnel = tmp_path / "funnel"
    funnel.mkdir()
    (funnel / "config.json").write_text(json.dumps({"model_type": "funnel", "vocab_size": 10}))
    save_file({"funnel.embeddings.word_embeddings.weight": torch.zeros(10, 4)}, funnel / "model.safetensors")
    one_line_error(bertforge("fill-mask", funnel, "a [MASK]."), "funnel", "bert, camembert, deberta-v2, distilbert")

    no_mask = tmp_path / "no_mask"
    build("roberta", no_mask.parent / "no_mask_build").rename(no_mask)
    (no_mask / "tokenizer_config.json").write_text(json.dumps({"mask_token": "<nothing>"}))
    one_line_error(
        bertforge("prepare", corpus, "--tokenizer", no_mask, "--out", tmp_path / "data"), str(no_mask), "mask token"
    )
    small = tmp_path / "small"
    torch.manual_seed(0)
    save_model(BertForPreTraining(ModelConfig(vocab_size=20, hidden_size=16, num_layers=1, num_heads=2)), small, None)
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json"):
        (small / name).write_bytes((released["bert_gamma_beta"] / name).read_bytes())
    one_line_error(bertforge("fill-mask", small, "a [MASK]."), str(small), "not trained together")
    bare = tmp_path / "bare"
    save_model(BertForPreTraining(ModelConfig(vocab_size=20, hidden_size=16, num_layers=1, num_heads=2)), bare, None)
    one_line_error(bertforge("fill-mask", bare, "a [MASK]."), str(bare), "no tokenizer")
    assert not (tmp_path / "data").exists()


def test_a_pickle_only_model_needs_trust_and_the_advice_names_a_flag_the_verb_has(released, corpus, tmp_path):
    start = released["bert_bin_only"]
    bertforge_ok("prepare", corpus, "--tokenizer", start, "--out", tmp_path / "data")
    for verb in (
        ["pretrain", "--data", tmp_path / "data", "--out", tmp_path / "run", "--init-from", start, "--max-steps", "1"],
        ["finetune", start, "--task", "classification", "--train", corpus, "--out", tmp_path / "ft"],
        ["fill-mask", start, "a [MASK]."],
    ):
        done = bertforge(*verb)
        one_line_error(done, "pytorch_model.bin", "--trust-pickle")
        assert "--trust-pickle" in bertforge(verb[0], "--help").stdout
    assert not (tmp_path / "run").exists() and not (tmp_path / "ft").exists()


def test_weights_that_do_not_fit_are_named_as_the_file_names_them(released, tmp_path):
    """A file missing a layer's weights is refused naming the file's own names, not bertforge's."""
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in released["roberta"].iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    weights = load_file(broken / "model.safetensors")
    del weights["roberta.encoder.layer.1.output.dense.weight"]
    save_file(weights, broken / "model.safetensors")
    one_line_error(bertforge("fill-mask", broken, "a <mask>."), "roberta.encoder.layer.1.output.dense.weight")


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_tokenizer_extend_makes_a_corpus_costliest_words_whole_tokens(released, corpus, tmp_path, name):
    """`tokenizer extend` on WordPiece, byte-level BPE, SentencePiece unigram and a table padded past its
    tokenizer: the chosen words become one token each, in bertforge and in `transformers` alike; nothing else is
    cut differently and no special token moves; each new row starts at the mean of its old pieces' (embedding and
    output bias); the result prepares and continues, and pieces per word fall."""
    transformers = needs("transformers")
    start, out = released[name], tmp_path / "extended"
    trust = ["--trust-pickle"] if name == "bert_bin_only" else []
    done = json.loads(
        bertforge_ok("tokenizer", "extend", start, corpus, "--add", "4", "--out", out, "--json", *trust).stdout
    )
    assert len(done["added"]) == 4 and done["other_words_changed"] == 0
    assert done["pieces_per_word_after"] < done["pieces_per_word_before"]
    before, after = load_tokenizer(start), load_tokenizer(out)
    assert special_ids(after) == special_ids(before)
    theirs = transformers.AutoTokenizer.from_pretrained(out)
    text = " ".join(sentences(30, seed=9))
    assert after.encode(text).ids == theirs(text)["input_ids"]
    old, new = load_model(BertForPreTraining, start, bool(trust)), load_model(BertForPreTraining, out)
    for added in done["added"]:
        word = f" {added['word']}" if name in ("roberta", "modernbert") else added["word"]
        (token,) = after.encode(word, add_special_tokens=False).ids
        pieces = before.encode(word, add_special_tokens=False).ids
        assert len(pieces) == added["pieces"] > 1
        for table in (lambda m: m.bert.embeddings.token.weight, lambda m: m.mlm_head.bias):
            torch.testing.assert_close(table(new)[token], table(old)[pieces].mean(0))
    kept = min(old.config.vocab_size, before.get_vocab_size())
    torch.testing.assert_close(new.bert.embeddings.token.weight[:kept], old.bert.embeddings.token.weight[:kept])
    bertforge_ok("prepare", corpus, "--tokenizer", out, "--out", tmp_path / "data")
    bertforge_ok(
        "pretrain", "--data", tmp_path / "data", "--out", tmp_path / "run", "--init-from", out, "--max-steps", "2",
        "--seq-len", "32", "--batch-size", "4", "--precision", "fp32", "--num-workers", "0", "--quiet",
    )  # fmt: skip
    _, info = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "run" / "model", output_loading_info=True)
    assert not info["missing_keys"]


def test_a_start_and_its_continuation_are_scored_on_the_same_instances(released, corpus, tmp_path):
    """`evaluate RUN START --data DATA`: one layout and one set of masks for both (the run's own held-out
    instances), so the start scores what the run logged for it at step 0, and the run what it logged at its end;
    a masked LM given pair instances is scored on their masked tokens alone."""
    start = released["bert_gamma_beta"]  # a BertForPreTraining: MLM and NSP
    bertforge_ok("prepare", corpus, "--tokenizer", start, "--out", tmp_path / "data", "--valid-fraction", "0.2")
    bertforge_ok(
        "pretrain", "--data", tmp_path / "data", "--out", tmp_path / "run", "--init-from", start,
        "--pair-objective", "none", "--max-steps", "4", "--eval-every", "4", "--seq-len", "32", "--batch-size", "4",
        "--eval-batches", "3", "--precision", "fp32", "--num-workers", "0", "--quiet",
    )  # fmt: skip
    assert json.loads((tmp_path / "run" / "model" / "config.json").read_text())["architectures"] == ["BertForMaskedLM"]
    logged = [r for r in map(json.loads, (tmp_path / "run" / "metrics.jsonl").read_text().splitlines())]
    logged = {r["step"]: r for r in logged if r["split"] == "valid"}
    run, first = json.loads(
        bertforge_ok("evaluate", tmp_path / "run", start, "--data", tmp_path / "data", "--json").stdout
    )
    assert run["masked_tokens"] == first["masked_tokens"] == logged[0]["masked_tokens"]
    assert first["mlm_loss"] == pytest.approx(logged[0]["mlm_loss"], rel=1e-5)
    assert run["mlm_loss"] == pytest.approx(logged[4]["mlm_loss"], rel=1e-5)
    # laid out as the start was pre-trained, in sentence pairs: its NSP head is scored, the masked LM's MLM alone
    pairs = json.loads(bertforge_ok("evaluate", start, tmp_path / "run", "--data", corpus, "--json").stdout)
    assert [r["pair_objective"] for r in pairs] == ["nsp", "none"]
    assert [r["model"] for r in pairs] == [str(start), str(tmp_path / "run" / "model")]  # named by their paths
    assert pairs[0]["masked_tokens"] == pairs[1]["masked_tokens"]
    extended = tmp_path / "extended"
    bertforge_ok("tokenizer", "extend", start, corpus, "--add", "2", "--out", extended)
    one_line_error(bertforge("evaluate", start, extended, "--data", corpus), "another tokenizer")


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_tagged_words_are_cut_as_in_running_text(released, name):
    """Fine-tuning a tagger encodes a sentence word by word; each word must come out as it does in the running
    text the tagger later reads (a byte-level BPE's `Ġ` before every word but the first)."""
    from bertforge.tasks.tagging import encode_sentences

    tokenizer = load_tokenizer(released[name])
    for text in sentences(20, seed=3):
        (window,) = encode_sentences(tokenizer, [text.split()], 512)
        assert window.ids == tokenizer.encode(text).ids


RELEASED_HEADS = {  # ours, their class's suffix, what ours is built with
    "sequence": (BertForSequenceClassification, "ForSequenceClassification", {"num_labels": 3}),
    "tokens": (BertForTokenClassification, "ForTokenClassification", {"num_labels": 3}),
    "qa": (BertForQuestionAnswering, "ForQuestionAnswering", {}),
    "choice": (BertForMultipleChoice, "ForMultipleChoice", {}),
}


@pytest.mark.parametrize("head", RELEASED_HEADS)
@pytest.mark.parametrize("family", TASK_LAYOUTS)
def test_a_released_head_is_read_as_transformers_computes_it_and_saved_back(tmp_path, family, head):
    """A task model `transformers` saved (each head class of each family that computes differently, labels in
    config.json) is read by bertforge, which gives its logits on a text of about 380 tokens (far positions in the
    relative buckets); saved back, it is the same class, loaded with nothing missing."""
    transformers = needs("transformers")
    make_tokenizer, make_config, prefix = TASK_LAYOUTS[family]
    ours_cls, suffix, kwargs = RELEASED_HEADS[head]
    tokenizer = make_tokenizer()
    config = make_config(len(tokenizer))
    config.num_labels = kwargs.get("num_labels", 2)
    config.id2label = {i: f"L{i}" for i in range(config.num_labels)}
    config.label2id = {f"L{i}": i for i in range(config.num_labels)}
    theirs = randomised(getattr(transformers, prefix + suffix)(config))
    theirs.save_pretrained(tmp_path / "theirs")
    tokenizer.save_pretrained(tmp_path / "theirs")
    ours = load_model(ours_cls, tmp_path / "theirs", **kwargs)
    ids = load_tokenizer(tmp_path / "theirs").encode(" ".join(sentences(28, seed=4))).ids
    input_ids = torch.tensor([ids])
    if head == "choice":
        input_ids = input_ids[:, None].repeat(1, 2, 1)
    with torch.no_grad():
        mine = ours(input_ids)[0]
        expected = theirs(input_ids=input_ids)
    expected = torch.stack([expected.start_logits, expected.end_logits], -1) if head == "qa" else expected.logits
    assert input_ids.shape[-1] > 300
    torch.testing.assert_close(mine, expected, rtol=1e-5, atol=1e-5)
    save_model(ours, tmp_path / "ours", load_tokenizer(tmp_path / "theirs"), {"id2label": config.id2label})
    saved = json.loads((tmp_path / "ours" / "config.json").read_text())
    assert saved["architectures"] == [prefix + suffix] and saved["model_type"] == family
    _, info = getattr(transformers, prefix + suffix).from_pretrained(tmp_path / "ours", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
