"""ModernBERT-shaped models are `transformers`' own ModernBERT: the same weights give the same outputs both ways,
for the masked LM and every task head, with no code of ours in the directory; and every tool that takes a
Hugging Face directory (pipelines, sentence-transformers) reads them without `trust_remote_code`."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from bertforge import BertForPreTraining, ModelConfig, load_model, save_model
from bertforge.model.heads import (
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSentenceEmbedding,
    BertForSequenceClassification,
    BertForTokenClassification,
)

from conftest import (
    MODERN,
    assert_fill_mask_is_the_pipeline,
    bertforge,
    bertforge_ok,
    needs,
    one_line_error,
    prepared_data,
    randomised,
)

# Sliding windows of 8 tokens in two layers of three (ModernBERT's pattern), or every layer global with biases.
SHAPES = {
    "windows": dict(local_attention=8, global_attention_every=3, rope_theta=160000.0),
    "biases": dict(linear_bias=True, norm_bias=True, classifier_pooling="mean"),
}


def modern_config(vocab_size: int = 100, **overrides) -> ModelConfig:
    shape = dict(vocab_size=vocab_size, hidden_size=32, num_layers=3, num_heads=2, intermediate_size=48)
    return ModelConfig(**{**shape, **MODERN, **overrides})


def padded_batch(vocab: int, seed: int = 1):
    """(input_ids, attention_mask), both (3, 14): three rows of 14, 9 and 5 real tokens."""
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, vocab, (3, 14), generator=g)
    attention_mask = torch.zeros(3, 14, dtype=torch.long)
    for row, length in enumerate((14, 9, 5)):
        attention_mask[row, :length] = 1
        input_ids[row, 0], input_ids[row, length - 1] = 2, 3  # [CLS] ... [SEP]
        input_ids[row, length:] = 0
    return input_ids, attention_mask


def assert_real_positions_equal(ours, theirs, attention_mask):
    real = attention_mask.bool()
    torch.testing.assert_close(ours[real], theirs[real], rtol=1e-5, atol=1e-5)


def assert_no_code_of_ours(directory):
    config = json.loads((directory / "config.json").read_text())
    assert config["model_type"] == "modernbert" and "auto_map" not in config
    assert not list(directory.glob("*.py"))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_our_masked_lm_is_transformers_modernbert(shape, attn, tmp_path):
    transformers = needs("transformers")
    config = modern_config(**SHAPES[shape])
    ours = randomised(BertForPreTraining(config))
    save_model(ours, tmp_path, None)
    assert_no_code_of_ours(tmp_path)
    theirs = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path, attn_implementation=attn).eval()
    assert type(theirs).__name__ == "ModernBertForMaskedLM"
    input_ids, attention_mask = padded_batch(config.vocab_size)
    with torch.no_grad():
        assert_real_positions_equal(
            ours(input_ids, None, attention_mask).mlm_logits,
            theirs(input_ids=input_ids, attention_mask=attention_mask).logits,
            attention_mask,
        )
    again = load_model(BertForPreTraining, tmp_path)
    assert again.config == config


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_a_modernbert_transformers_wrote_is_ours_too(attn, tmp_path):
    """ModernBertConfig's own defaults for what we do not set: sliding windows every third layer, no biases."""
    transformers = needs("transformers")
    torch.manual_seed(0)
    hf_config = transformers.ModernBertConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=48,
        local_attention=8,
        pad_token_id=0,
        attn_implementation=attn,
    )
    theirs = randomised(transformers.ModernBertForMaskedLM(hf_config))
    theirs.save_pretrained(tmp_path)
    ours = load_model(BertForPreTraining, tmp_path).eval()
    assert (ours.config.local_attention, ours.config.global_attention_every) == (8, 3)
    input_ids, attention_mask = padded_batch(100)
    with torch.no_grad():
        assert_real_positions_equal(
            ours(input_ids, None, attention_mask).mlm_logits,
            theirs(input_ids=input_ids, attention_mask=attention_mask).logits,
            attention_mask,
        )


HEADS = [
    (BertForSequenceClassification, "AutoModelForSequenceClassification", {"num_labels": 3}),
    (BertForTokenClassification, "AutoModelForTokenClassification", {"num_labels": 4}),
    (BertForQuestionAnswering, "AutoModelForQuestionAnswering", {}),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("head", HEADS, ids=lambda h: h[0].__name__)
def test_every_task_head_is_transformers_modernbert_both_ways(head, shape, tmp_path):
    """Ours loads in the Auto class with the same logits; what transformers saves again (after fine-tuning there,
    say) loads back in bertforge with the same logits."""
    transformers = needs("transformers")
    cls, auto, kwargs = head
    ours = randomised(cls(modern_config(**SHAPES[shape]), **kwargs))
    labels = {"id2label": {str(i): f"L{i}" for i in range(kwargs["num_labels"])}} if kwargs else {}
    save_model(ours, tmp_path / "ours", None, labels)
    assert_no_code_of_ours(tmp_path / "ours")
    theirs = getattr(transformers, auto).from_pretrained(tmp_path / "ours").eval()
    assert type(theirs).__name__.startswith("ModernBert")
    input_ids, attention_mask = padded_batch(100)
    with torch.no_grad():
        ours_logits = ours(input_ids, None, attention_mask)[0]
        out = theirs(input_ids=input_ids, attention_mask=attention_mask)
    their_logits = out.logits if hasattr(out, "logits") else torch.stack([out.start_logits, out.end_logits], -1)
    if ours_logits.ndim == 2:
        torch.testing.assert_close(ours_logits, their_logits, rtol=1e-5, atol=1e-5)
    else:
        assert_real_positions_equal(ours_logits, their_logits, attention_mask)
    theirs.save_pretrained(tmp_path / "theirs")
    again = load_model(cls, tmp_path / "theirs", **kwargs).eval()
    with torch.no_grad():
        torch.testing.assert_close(again(input_ids, None, attention_mask)[0], ours_logits)


@pytest.mark.parametrize("shape", SHAPES)
def test_multiple_choice_is_transformers_modernbert(shape, tmp_path):
    transformers = needs("transformers")
    ours = randomised(BertForMultipleChoice(modern_config(**SHAPES[shape])))
    save_model(ours, tmp_path, None)
    theirs = transformers.AutoModelForMultipleChoice.from_pretrained(tmp_path).eval()
    input_ids, attention_mask = (x.view(1, 3, -1) for x in padded_batch(100))  # one question, three choices
    with torch.no_grad():
        ours_logits = ours(input_ids, None, attention_mask)[0]  # (1, 3)
        theirs_logits = theirs(input_ids=input_ids, attention_mask=attention_mask).logits
    torch.testing.assert_close(ours_logits, theirs_logits, rtol=1e-5, atol=1e-5)


def test_pipelines_answer_as_our_commands(wordpiece_tokenizer, tmp_path):
    """fill-mask, classify, tag and answer from the command line against transformers' four pipelines, on the
    same directories: the same tokens, labels, entities and answer spans, with the same scores."""
    transformers = needs("transformers")
    vocab = wordpiece_tokenizer.get_vocab_size()
    config = modern_config(vocab, **SHAPES["windows"])

    masked_lm = tmp_path / "mlm"
    save_model(randomised(BertForPreTraining(config)), masked_lm, wordpiece_tokenizer)
    assert_fill_mask_is_the_pipeline(masked_lm, "the cat [MASK] on the mat.", abs_tolerance=1e-4)

    classifier = tmp_path / "classifier"
    labels = {"id2label": {"0": "no", "1": "yes"}, "label2id": {"no": 0, "yes": 1}}
    save_model(randomised(BertForSequenceClassification(config, num_labels=2)), classifier, wordpiece_tokenizer, labels)
    texts = ["the cat sat on the mat.", "a bird sang in the garden by the river."]
    ours = [json.loads(bertforge_ok("classify", classifier, t, "--json").stdout) for t in texts]
    reference = transformers.pipeline("text-classification", model=str(classifier), top_k=None)(texts)
    for answer, expected in zip(ours, reference):
        assert answer["probabilities"] == pytest.approx({r["label"]: r["score"] for r in expected}, abs=1e-5)

    tagger = tmp_path / "tagger"
    tags = ["O", "B-person", "I-person", "B-place", "I-place"]
    save_model(
        randomised(BertForTokenClassification(config, num_labels=5)),
        tagger,
        wordpiece_tokenizer,
        {"id2label": dict(enumerate(tags)), "label2id": {t: i for i, t in enumerate(tags)}},
    )
    sentence = "my friend walked to the red house with the teacher"
    ours = json.loads(bertforge_ok("tag", tagger, sentence, "--json").stdout)
    reference = transformers.pipeline("token-classification", model=str(tagger), aggregation_strategy="simple")(
        sentence
    )
    assert [(e["entity_group"], e["start"], e["end"]) for e in ours] == [
        (r["entity_group"], r["start"], r["end"]) for r in reference
    ]
    assert [e["score"] for e in ours] == pytest.approx([float(r["score"]) for r in reference], abs=1e-5)

    # transformers 5 has no question-answering pipeline; `answer`'s span is the best of transformers' own logits.
    reader = tmp_path / "reader"
    save_model(randomised(BertForQuestionAnswering(config)), reader, wordpiece_tokenizer)
    question, context = "who sat on the mat?", "the cat sat on the mat. the dog looked at the window."
    ours = json.loads(bertforge_ok("answer", reader, "--question", question, "--context", context, "--json").stdout)
    their_tokenizer = transformers.AutoTokenizer.from_pretrained(reader)
    encoded = their_tokenizer(question, context, return_tensors="pt")
    with torch.no_grad():
        out = transformers.AutoModelForQuestionAnswering.from_pretrained(reader).eval()(**encoded)
    in_context = torch.tensor([part == 1 for part in encoded.sequence_ids(0)])  # (T,)
    start, end = (x[0].masked_fill(~in_context, -1e9) for x in (out.start_logits, out.end_logits))
    spans = start[:, None] + end[None, :]  # (T, T): [s, e] the score of the span s..e
    length = torch.arange(len(start))[None, :] - torch.arange(len(start))[:, None]
    spans = spans.masked_fill((length < 0) | (length >= 30), -1e9)
    s, e = divmod(int(spans.argmax()), len(start))
    words = encoded.token_to_word(0, s), encoded.token_to_word(0, e)  # the span widened to whole words
    expected = encoded.word_to_chars(0, words[0], 1).start, encoded.word_to_chars(0, words[1], 1).end
    assert (ours["start"], ours["end"]) == expected
    assert ours["answer"] == context[ours["start"] : ours["end"]]


def test_sentence_transformers_reads_a_sentence_model_as_embed_does(wordpiece_tokenizer, tmp_path):
    sentence_transformers = needs("sentence_transformers")
    config = modern_config(wordpiece_tokenizer.get_vocab_size(), **SHAPES["windows"])
    save_model(randomised(BertForSentenceEmbedding(config)), tmp_path / "m", wordpiece_tokenizer)
    assert_no_code_of_ours(tmp_path / "m")
    (tmp_path / "texts.txt").write_text("the cat sat on the mat.\na bird sang.\n", encoding="utf-8")
    bertforge_ok("embed", tmp_path / "m", "--input", tmp_path / "texts.txt", "--out", tmp_path / "v.npy")
    ours = np.load(tmp_path / "v.npy")
    theirs = sentence_transformers.SentenceTransformer(str(tmp_path / "m"), device="cpu").encode(
        ["the cat sat on the mat.", "a bird sang."]
    )
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_a_modernbert_config_we_cannot_build_is_refused_naming_the_key(tmp_path, wordpiece_tokenizer):
    save_model(randomised(BertForPreTraining(modern_config(wordpiece_tokenizer.get_vocab_size()))), tmp_path / "m",
               wordpiece_tokenizer)  # fmt: skip
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    cases = {
        "layer_types": {"layer_types": ["sliding_attention", "full_attention", "full_attention"]},
        "rope_parameters": {"rope_parameters": {"full_attention": {"rope_type": "yarn", "rope_theta": 1.0}}},
        "hidden_activation": {"hidden_activation": "silu"},
        "decoder_bias": {"decoder_bias": False},
    }
    for key, change in cases.items():
        (tmp_path / "m" / "config.json").write_text(json.dumps({**config, **change}))
        one_line_error(bertforge("fill-mask", tmp_path / "m", "the [MASK] sat."), key)


def test_code_in_a_directory_is_never_run(tmp_path, wordpiece_tokenizer):
    """A directory whose config names custom code (auto_map) that bertforge did not write: the code is not
    imported, whatever config.json says; the weights load as the model type they are."""
    save_model(randomised(BertForPreTraining(modern_config(wordpiece_tokenizer.get_vocab_size()))), tmp_path / "m",
               wordpiece_tokenizer)  # fmt: skip
    marker = tmp_path / "ran"
    (tmp_path / "m" / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    config["auto_map"] = {"AutoModelForMaskedLM": "modeling_evil.Evil", "AutoConfig": "modeling_evil.EvilConfig"}
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    bertforge_ok("fill-mask", tmp_path / "m", "the [MASK] sat.")
    assert not marker.exists()


def test_a_modernbert_written_by_transformers_fine_tunes_scores_and_continues(tmp_path):
    """finetune, score and pretrain --init-from take a ModernBERT directory transformers wrote."""
    transformers = needs("transformers")
    (tmp_path / "corpus").mkdir()
    root = prepared_data(tmp_path / "corpus", seed=3)
    data, tokenizer_dir = root / "data", root / "tok"
    vocab = json.loads((data / "meta.json").read_text())["vocab_size"]
    hf_config = transformers.ModernBertConfig(
        vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48,
        local_attention=8, pad_token_id=0, max_position_embeddings=64,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.ModernBertForMaskedLM(hf_config).save_pretrained(tmp_path / "hf")
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        (tmp_path / "hf" / name).write_bytes((tokenizer_dir / name).read_bytes())
    rows = "".join(f"{t}\t{y}\n" for t, y in [("the cat sat.", "a"), ("the dog ran.", "b")] * 8)
    (tmp_path / "t.tsv").write_text("text\tlabel\n" + rows, encoding="utf-8")
    bertforge_ok("finetune", tmp_path / "hf", "--train", tmp_path / "t.tsv", "--dev", tmp_path / "t.tsv",
                 "--text-column", "text", "--label-column", "label", "--epochs", "1", "--out", tmp_path / "ft",
                 "--quiet")  # fmt: skip
    transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "ft" / "model")
    bertforge_ok("score", tmp_path / "hf", "--tasks", f"toy={tmp_path / 't.tsv'},{tmp_path / 't.tsv'}:"
                 "task=classification,text=text,label=label", "--epochs", "1", "--seeds", "1",
                 "--out", tmp_path / "scores")  # fmt: skip
    bertforge_ok("pretrain", "--data", data, "--out", tmp_path / "continued", "--init-from", tmp_path / "hf",
                 "--max-steps", "2", "--seq-len", "64", "--batch-size", "4", "--quiet")  # fmt: skip
    continued = json.loads((tmp_path / "continued" / "model" / "config.json").read_text())
    assert continued["model_type"] == "modernbert" and continued["local_attention"] == 8


def test_the_budget_recipe_writes_a_modernbert_every_hf_tool_loads(tmp_path):
    """The issue's "done when": `pretrain --recipe budget` writes a directory with no code and no auto_map, which
    transformers' fill-mask pipeline answers as `fill-mask` does, whose fine-tuned classifier
    AutoModelForSequenceClassification runs to our prediction, and which sentence-transformers reads as `embed
    --pooling mean` does; its model card names the recipe."""
    transformers = needs("transformers")
    sentence_transformers = needs("sentence_transformers")
    (tmp_path / "corpus").mkdir()
    data = prepared_data(tmp_path / "corpus", seed=5) / "data"
    bertforge_ok("pretrain", "--data", data, "--out", tmp_path / "run", "--recipe", "budget", "--preset", "tiny",
                 "--max-steps", "4", "--batch-size", "8", "--seq-len", "64", "--num-workers", "0",
                 "--precision", "fp32", "--quiet")  # fmt: skip
    model = tmp_path / "run" / "model"
    assert_no_code_of_ours(model)
    config = json.loads((model / "config.json").read_text())
    assert config["model_type"] == "modernbert" and "auto_map" not in config
    assert "recipe-budget" in (model / "README.md").read_text()

    assert_fill_mask_is_the_pipeline(model, "the cat [MASK] on the mat.", abs_tolerance=1e-4)

    rows = "".join(f"{t}\t{y}\n" for t, y in [("the cat sat on the mat.", "a"), ("the dog ran.", "b")] * 8)
    (tmp_path / "t.tsv").write_text("text\tlabel\n" + rows, encoding="utf-8")
    bertforge_ok("finetune", model, "--train", tmp_path / "t.tsv", "--dev", tmp_path / "t.tsv", "--text-column",
                 "text", "--label-column", "label", "--epochs", "1", "--out", tmp_path / "ft", "--quiet")  # fmt: skip
    classifier = tmp_path / "ft" / "model"
    assert_no_code_of_ours(classifier)
    ours = json.loads(bertforge_ok("classify", classifier, "the dog ran.", "--json").stdout)
    theirs = transformers.pipeline("text-classification", model=str(classifier), top_k=None)(["the dog ran."])[0]
    assert ours["probabilities"] == pytest.approx({r["label"]: r["score"] for r in theirs}, abs=1e-5)

    (tmp_path / "texts.txt").write_text("the cat sat on the mat.\na bird sang.\n", encoding="utf-8")
    bertforge_ok("embed", model, "--input", tmp_path / "texts.txt", "--out", tmp_path / "v.npy", "--pooling", "mean",
                 "--precision", "fp32")  # fmt: skip
    vectors = sentence_transformers.SentenceTransformer(str(model), device="cpu").encode(
        ["the cat sat on the mat.", "a bird sang."]
    )
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), vectors, rtol=1e-4, atol=1e-5)
