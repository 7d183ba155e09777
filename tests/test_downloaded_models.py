"""The models people download most, built here as their own libraries save them (tests/released.py): a
sentence-embedding model saved by `SentenceTransformer.save` (a headless BertModel with its pooler, mean pooling,
Normalize, a tokenizer.json that pads and truncates to 128), headless encoders saved by `save_pretrained`, and
the tokenizer files released models still ship without a tokenizer.json. Each is read as its library reads it,
continued, extended and fine-tuned, and comes back as itself."""

from __future__ import annotations

import json
import math
import random
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from bertforge.errors import UserError
from bertforge.families import FAMILIES
from bertforge.model.heads import pool
from bertforge.tokenizer import load_tokenizer

from conftest import bertforge, bertforge_ok, needs, one_line_error, write_corpus
from released import (
    HEADLESS,
    OLDER_TOKENIZER_FILES,
    SENTENCE_LENGTH,
    build,
    sentence_transformers_modules,
    sentences,
)

TEXTS = ["The cat sat on the mat.", "My friend painted the red house by the river bank.", "covid lockdown"]


@pytest.fixture(scope="module")
def downloaded(tmp_path_factory):
    """Every layout, built once: name -> directory."""
    needs("transformers")
    needs("sentence_transformers")
    root = tmp_path_factory.mktemp("downloaded")
    return {name: build(name, root) for name in HEADLESS}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "corpus.txt"
    write_corpus(path, [sentences(8, seed=i) for i in range(40)])
    return path


def sentence_transformer(directory):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(directory), device="cpu")


def embedded(model, texts, *flags, tmp_path):
    out = tmp_path / f"vectors{len(list(tmp_path.iterdir()))}.npy"
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    done = bertforge_ok("embed", model, "--input", tmp_path / "texts.txt", "--out", out, "--precision", "fp32", *flags)
    return np.load(out), done


def cosines(a, b):
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


# ----------------------------------------------------------------------------- sentence-embedding models


def test_a_sentence_embedding_model_embeds_as_sentence_transformers_does(downloaded, tmp_path):
    """`embed` with no flag gives sentence-transformers' own vectors: its mean pooling, unit length as its
    Normalize module makes them, cut where its length (128) cuts. Flags override: the [CLS] vector is another,
    and --no-normalize leaves their length."""
    model = downloaded["sentence_embedding"]
    long_text = " ".join(sentences(60, seed=3))  # several hundred tokens: cut at 128 by both
    texts = [*TEXTS, long_text]
    theirs = sentence_transformer(model).encode(texts)
    ours, done = embedded(model, texts, tmp_path=tmp_path)
    assert cosines(ours, theirs).min() >= 0.999999
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-6)
    assert f"1 of 4 texts are longer than the {SENTENCE_LENGTH} tokens" in done.stderr
    assert "initialised fresh" not in done.stderr and "masked-LM" not in done.stderr
    cls_vectors, _ = embedded(model, texts, "--pooling", "cls", tmp_path=tmp_path)
    assert not np.allclose(cls_vectors, ours, atol=1e-3)
    raw, _ = embedded(model, texts, "--no-normalize", tmp_path=tmp_path)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0, atol=1e-3)
    np.testing.assert_allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), ours, atol=1e-6)


def test_older_sentence_transformers_files_are_read_as_their_library_reads_them(downloaded, tmp_path):
    """all-MiniLM-L6-v2's files as sentence-transformers 2 wrote them: the old module type names, pooling as
    `pooling_mode_*_tokens` flags, max_seq_length in sentence_bert_config.json and no 2_Normalize folder. Today's
    sentence-transformers and bertforge give the same vectors, cut at that length."""
    old = tmp_path / "old"
    old.mkdir()
    for path in downloaded["sentence_embedding"].iterdir():
        if path.is_file():
            (old / path.name).write_bytes(path.read_bytes())
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (old / "modules.json").write_text(json.dumps(modules, indent=2))
    (old / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 24, "do_lower_case": False}))
    (old / "1_Pooling").mkdir()
    flags = {"word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
             "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}  # fmt: skip
    (old / "1_Pooling" / "config.json").write_text(json.dumps(flags, indent=2))
    texts = [*TEXTS, " ".join(sentences(6, seed=4))]  # the last longer than 24 tokens
    theirs = sentence_transformer(old).encode(texts)
    ours, done = embedded(old, texts, tmp_path=tmp_path)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
    assert "1 of 4 texts are longer than the 24 tokens" in done.stderr


@pytest.mark.parametrize("modes", [("cls",), ("max",), ("mean_sqrt_len_tokens",), ("weightedmean",), ("lasttoken",),
                                   ("mean", "max")])  # fmt: skip
def test_every_pooling_mode_is_sentence_transformers_own(modes):
    """Each of sentence-transformers' pooling modes (and two concatenated) on a right-padded batch."""
    needs("sentence_transformers")
    from released import sentence_transformers_modules

    Pooling = sentence_transformers_modules().Pooling

    torch.manual_seed(0)
    hidden = torch.randn(3, 7, 8)
    mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3, [1] * 2 + [0] * 5])
    theirs = Pooling(8, list(modes) if len(modes) > 1 else modes[0])(
        {"token_embeddings": hidden, "attention_mask": mask}
    )["sentence_embedding"]
    torch.testing.assert_close(pool(hidden, mask, modes), theirs, rtol=1e-5, atol=1e-6)


def test_a_module_bertforge_does_not_compute_is_refused_by_every_verb_that_would_use_it(downloaded, corpus, tmp_path):
    """A Dense module after pooling, as `SentenceTransformer.save` writes one: every verb that would serve the
    model's vectors or save its modules back beside weights it changed (embed, search, export, finetune,
    pretrain --init-from, tokenizer extend) refuses in one line, through the one check, and writes nothing."""
    from sentence_transformers import SentenceTransformer

    models = sentence_transformers_modules()
    source = SentenceTransformer(str(downloaded["sentence_embedding"]), device="cpu")
    model = tmp_path / "dense"
    SentenceTransformer(modules=[*source, models.Dense(32, 8)], device="cpu").save(str(model))
    assert "Dense" in (model / "modules.json").read_text()
    (tmp_path / "texts.txt").write_text("a text\nanother text\n")
    rows = "".join(f"{s}\t{i % 2}\n" for i, s in enumerate(sentences(40)))
    (tmp_path / "train.tsv").write_text("text\tlabel\n" + rows)
    bertforge_ok("prepare", corpus, "--tokenizer", model, "--out", tmp_path / "data")
    out = tmp_path / "out"
    verbs = {
        "embed": ["embed", model, "--input", tmp_path / "texts.txt", "--out", out],
        "search": ["search", model, "a text", "--corpus", tmp_path / "texts.txt"],
        "export": ["export", model, "--out", out],
        "finetune": ["finetune", model, "--task", "classification", "--train", tmp_path / "train.tsv",
                     "--text-column", "text", "--label-column", "label", "--out", out],
        "pretrain": ["pretrain", "--data", tmp_path / "data", "--init-from", model, "--out", out, "--max-steps", "2"],
        "extend": ["tokenizer", "extend", model, corpus, "--add", "2", "--out", out],
    }  # fmt: skip
    for verb, args in verbs.items():
        one_line_error(bertforge(*args), "Dense module after pooling")
        assert not out.exists(), verb


# ----------------------------------------------------------------------------- tokenizer files that pad


def test_a_tokenizer_file_that_pads_never_pads_prepare(downloaded, corpus, tmp_path):
    """prepare stores the text's own tokens, no [PAD] among them, however the tokenizer.json pads; data show
    prints no padding; the tokenizer saved beside the data still pads as released (for the tools that read it)."""
    model = downloaded["sentence_embedding"]
    bertforge_ok("prepare", corpus, "--tokenizer", model, "--out", tmp_path / "data", "--valid-fraction", "0.1")
    meta = json.loads((tmp_path / "data" / "meta.json").read_text())
    tokenizer = load_tokenizer(model)
    assert tokenizer.padding is None and tokenizer.truncation is None
    text = corpus.read_text().split()
    own = len(tokenizer.encode(" ".join(text), add_special_tokens=False).ids)
    stored = sum(split["tokens"] for split in meta["splits"].values())
    assert stored == pytest.approx(own, rel=0.02)
    pad = tokenizer.token_to_id("[PAD]")
    for split in ("train", "valid"):
        tokens = np.fromfile(tmp_path / "data" / split / "tokens.bin", dtype=np.uint16)
        assert pad not in tokens
    shown = bertforge_ok("data", "show", tmp_path / "data", "--n", "3").stdout
    assert "[PAD]" not in shown
    saved = json.loads((tmp_path / "data" / "tokenizer.json").read_text())
    assert saved["padding"]["strategy"] == {"Fixed": SENTENCE_LENGTH}


def test_ner_on_a_padded_tokenizer_takes_the_steps_its_data_needs(downloaded, tmp_path):
    """Token classification with a tokenizer.json that pads to 128: one window a sentence, so an epoch is
    ceil(sentences / batch) steps."""
    rng = random.Random(0)
    lines = []
    for _ in range(40):
        words = sentences(1, seed=rng.randrange(10**6))[0].rstrip(".").split()
        lines.append("\n".join(f"{w}\t{'B-animal' if w.lower() in ('cat', 'dog', 'bird') else 'O'}" for w in words))
    (tmp_path / "train.conll").write_text("\n\n".join(lines) + "\n")
    bertforge_ok(
        "finetune", downloaded["sentence_embedding"], "--task", "token-classification", "--train",
        tmp_path / "train.conll", "--dev", tmp_path / "train.conll", "--out", tmp_path / "ner", "--epochs", "1",
        "--batch-size", "8", "--precision", "fp32", "--quiet",
    )  # fmt: skip
    epochs = [json.loads(line) for line in (tmp_path / "ner" / "metrics.jsonl").read_text().splitlines()]
    assert epochs[-1]["step"] == math.ceil(40 / 8)


def test_model_max_length_is_a_limit_every_verb_keeps(downloaded, tmp_path):
    """tokenizer_config.json's model_max_length (shorter than the position table) bounds what a verb reads."""
    model = tmp_path / "short"
    model.mkdir()
    for path in downloaded["bert_model"].iterdir():
        (model / path.name).write_bytes(path.read_bytes())
    config = json.loads((model / "tokenizer_config.json").read_text())
    (model / "tokenizer_config.json").write_text(json.dumps({**config, "model_max_length": 12}))
    texts = ["the cat sat on the mat " * 6]
    vectors, done = embedded(model, texts, tmp_path=tmp_path)
    assert "longer than the 12 tokens" in done.stderr
    from bertforge import load

    assert load(model).limit == 12


# ----------------------------------------------------------------------------- headless encoders


@pytest.mark.parametrize("name", list(HEADLESS))
def test_a_headless_model_is_never_scored_or_asked_through_a_random_head(downloaded, corpus, tmp_path, name):
    """No masked-LM head: fill-mask and evaluate refuse in one line that says what the model is and how to train
    a head; nsp says it has no next-sentence head (not that it was pre-trained on MLM alone); embed says nothing
    of heads."""
    model = downloaded[name]
    done = bertforge("fill-mask", model, "the cat [MASK] on the mat.")
    one_line_error(done, "no masked-LM head", "pretrain --init-from")
    one_line_error(bertforge("evaluate", model, "--data", corpus), "no masked-LM head", "pretrain --init-from")
    done = bertforge("nsp", model, "The cat sat.", "--pair", "It purred.")
    one_line_error(done, "no next-sentence head")
    assert "MLM only" not in done.stderr and "masked LM only" not in done.stderr
    _, done = embedded(model, TEXTS, tmp_path=tmp_path)
    assert "head" not in done.stderr.replace(str(tmp_path), "")


def continue_headless(model, corpus, tmp_path, *flags, steps=4):
    bertforge_ok("prepare", corpus, "--tokenizer", model, "--out", tmp_path / "data", "--valid-fraction", "0.1")
    return bertforge_ok(
        "pretrain", "--data", tmp_path / "data", "--out", tmp_path / "run", "--init-from", model, "--lr", "1e-2",
        "--max-steps", str(steps), "--seq-len", "32", "--batch-size", "4", "--eval-every", "2", "--eval-batches",
        "1", "--precision", "fp32", "--num-workers", "0", "--recipe", "budget", *flags,
    )  # fmt: skip


def our_tensors(directory):
    """The directory's weights by our names, as bertforge reads them."""
    from bertforge.modelfiles.directory import read_config, read_weights
    from bertforge.modelfiles.hf import config_from_hf, from_hf_state_dict

    config = config_from_hf(read_config(directory))
    return from_hf_state_dict(read_weights(directory), config)[0]


@pytest.mark.parametrize("name", list(HEADLESS))
def test_a_new_head_trains_alone_first_and_the_model_comes_back_as_its_class(downloaded, corpus, tmp_path, name):
    """pretrain --init-from a headless model: the new head trains alone for --head-warmup-steps, every encoder
    weight as it was; then the encoder learns. The saved model is the source's class, loads in `transformers`
    with nothing missing, keeps the pooler it never trained, and answers fill-mask from its trained head."""
    transformers = needs("transformers")
    model = downloaded[name]
    done = continue_headless(model, corpus, tmp_path, "--head-warmup-steps", "4", "--save-every", "2", steps=6)
    assert "no masked-LM head: a new one" in done.stderr
    refused = bertforge(
        "pretrain", "--data", tmp_path / "data", "--out", tmp_path / "never", "--init-from", model,
        "--max-steps", "4", "--head-warmup-steps", "4", "--recipe", "budget",
    )  # fmt: skip
    one_line_error(refused, "--head-warmup-steps 4 is not shorter than --max-steps 4")
    assert not (tmp_path / "never").exists()
    start = our_tensors(model)
    warmed = our_tensors(tmp_path / "run" / "checkpoints" / "step_000004")
    encoder = [k for k in start if k.startswith("bert.")]
    assert encoder and all(torch.equal(warmed[k], start[k]) for k in encoder)
    assert not torch.equal(warmed["mlm_head.transform.weight"], warmed["mlm_head.transform.weight"] * 0)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["split"] == "valid"] == [2, 4, 6]  # none at step 0: the head was random

    bertforge_ok("pretrain", "--data", tmp_path / "data", "--out", tmp_path / "more", "--init-from", tmp_path / "run",
                 "--lr", "1e-2", "--max-steps", "2", "--seq-len", "32", "--batch-size", "4", "--precision", "fp32",
                 "--num-workers", "0", "--recipe", "budget", "--quiet")  # fmt: skip
    more = our_tensors(tmp_path / "more" / "model")
    assert any(not torch.equal(more[k], start[k]) for k in encoder if start[k].is_floating_point())

    saved = tmp_path / "run" / "model"
    before = json.loads((model / "config.json").read_text())
    after = json.loads((saved / "config.json").read_text())
    assert after["architectures"] == before["architectures"] and after["model_type"] == before["model_type"]
    loaded, info = transformers.AutoModel.from_pretrained(saved, output_loading_info=True)
    assert not info["missing_keys"], info
    assert type(loaded).__name__ == before["architectures"][0]
    pooler = [k for k in start if k.startswith("bert.pooler.")]
    assert bool(pooler) == FAMILIES.get(before["model_type"]).base_pooler  # the family's bare encoder has one
    final = our_tensors(saved)
    assert all(torch.equal(final[k], start[k]) for k in pooler)  # kept as it was, never trained
    bertforge_ok("fill-mask", saved, "the cat [MASK] on the mat.")


def test_a_sentence_embedding_model_continued_is_the_same_pipeline_with_its_card(downloaded, corpus, tmp_path):
    """Continued, a sentence-embedding model keeps its modules (sentence-transformers loads Transformer, Pooling
    and Normalize from it) and its own card with a section on what bertforge did; at lr 0 its vectors are the
    original's. Resumed, the section is not repeated."""
    model = downloaded["sentence_embedding"]
    bertforge_ok("prepare", corpus, "--tokenizer", model, "--out", tmp_path / "data", "--valid-fraction", "0.1")
    run = ("pretrain", "--data", tmp_path / "data", "--out", tmp_path / "run", "--init-from", model, "--lr", "0",
           "--seq-len", "32", "--batch-size", "4", "--eval-every", "2", "--eval-batches", "1", "--precision", "fp32",
           "--num-workers", "0", "--head-warmup-steps", "1", "--save-every", "2", "--quiet")  # fmt: skip
    bertforge_ok(*run, "--max-steps", "2")
    bertforge_ok(*run, "--max-steps", "3", "--resume")
    saved = tmp_path / "run" / "model"
    for name in (
        "modules.json",
        "1_Pooling/config.json",
        "2_Normalize/config.json",
        "config_sentence_transformers.json",
    ):
        assert (saved / name).read_bytes() == (model / name).read_bytes(), name
    theirs = sentence_transformer(saved)
    assert [type(m).__name__ for m in theirs] == ["Transformer", "Pooling", "Normalize"]
    np.testing.assert_allclose(theirs.encode(TEXTS), sentence_transformer(model).encode(TEXTS), atol=1e-5)
    card = (saved / "README.md").read_text()
    original = (model / "README.md").read_text()
    assert card.startswith(original.rstrip()[:200]) and card.count("## Continued pre-training with bertforge") == 1
    assert "trained alone for the first 1 steps" in card and "3 steps" in card


def test_tokenizer_extend_on_a_headless_model_saves_no_random_head(downloaded, corpus, tmp_path):
    """`tokenizer extend` on a BertModel: the words are added, the result is a BertModel with its pooler and no
    masked-LM weights (a random head is never saved as a trained one), the extended tokenizer pads as released
    but not in bertforge, and pretrain --init-from it trains a head first."""
    model = downloaded["sentence_embedding"]
    out = tmp_path / "extended"
    done = bertforge_ok("tokenizer", "extend", model, corpus, "--add", "3", "--out", out)
    assert "no masked-LM head, and none is saved" in done.stdout + done.stderr
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["BertModel"]
    names = load_file(out / "model.safetensors").keys()
    assert not any(name.startswith("cls.") for name in names) and any("pooler" in name for name in names)
    assert (out / "modules.json").read_bytes() == (model / "modules.json").read_bytes()
    tokenizer = load_tokenizer(out)
    assert tokenizer.padding is None and json.loads((out / "tokenizer.json").read_text())["padding"] is not None
    done = continue_headless(out, corpus, tmp_path, "--head-warmup-steps", "2", steps=3)
    assert "no masked-LM head: a new one" in done.stderr


@pytest.mark.parametrize("task", ["classification", "token-classification", "sentence-similarity"])
def test_fine_tuning_a_sentence_embedding_model_keeps_its_modules(downloaded, tmp_path, task):
    """A classifier, a tagger or a sentence model fine-tuned from a sentence-embedding model carries its modules:
    sentence-transformers loads each as the same pipeline (mean pooling, Normalize)."""
    model = downloaded["sentence_embedding"]
    rows = sentences(40, seed=7)
    if task == "classification":
        (tmp_path / "train.tsv").write_text("text\tlabel\n" + "".join(f"{s}\t{'cat' in s}\n" for s in rows))
        data = ["--train", tmp_path / "train.tsv", "--text-column", "text", "--label-column", "label"]
    elif task == "token-classification":
        tagged = ["\n".join(f"{w}\t{'B-x' if w == 'cat' else 'O'}" for w in s.rstrip(".").split()) for s in rows]
        (tmp_path / "train.conll").write_text("\n\n".join(tagged) + "\n")
        data = ["--train", tmp_path / "train.conll", "--dev", tmp_path / "train.conll"]
    else:
        (tmp_path / "pairs.tsv").write_text("a\tb\n" + "".join(f"{s}\t{s.lower()}\n" for s in rows))
        data = ["--train", tmp_path / "pairs.tsv", "--text-column", "a", "--pair-column", "b"]
    bertforge_ok("finetune", model, "--task", task, *data, "--out", tmp_path / "ft", "--epochs", "1", "--quiet",
                 "--precision", "fp32")  # fmt: skip
    saved = tmp_path / "ft" / "model"
    assert (saved / "modules.json").read_bytes() == (model / "modules.json").read_bytes()
    assert [type(m).__name__ for m in sentence_transformer(saved)] == ["Transformer", "Pooling", "Normalize"]
    if task == "sentence-similarity":  # its vectors, made as its modules say, are sentence-transformers' own
        ours, _ = embedded(saved, TEXTS, tmp_path=tmp_path)
        np.testing.assert_allclose(ours, sentence_transformer(saved).encode(TEXTS), atol=1e-5)


# ----------------------------------------------------------------------------- older tokenizer files


@pytest.fixture(scope="module")
def older(tmp_path_factory):
    needs("transformers")
    needs("sentencepiece")
    root = tmp_path_factory.mktemp("older")
    return {name: build(name, root) for name in OLDER_TOKENIZER_FILES}


@pytest.mark.parametrize("name", list(OLDER_TOKENIZER_FILES))
def test_older_tokenizer_files_are_read_as_transformers_reads_them(older, name):
    """vocab.json + merges.txt (roberta-base's) and a SentencePiece model (xlm-roberta-base's), no tokenizer.json:
    the same ids as `transformers`' AutoTokenizer gives, pairs included; the mask token takes the space before it,
    as RoBERTa's and XLM-R's did in training (transformers 4's tokenizers and their released tokenizer.json; 5
    reads vocab.json without that); fill-mask runs."""
    transformers = needs("transformers")
    theirs = transformers.AutoTokenizer.from_pretrained(older[name])
    ours = load_tokenizer(older[name])
    for text in [*TEXTS, "  spaced   out  text "]:
        assert ours.encode(text).ids == theirs(text)["input_ids"], text
    assert ours.encode(TEXTS[0], TEXTS[1]).ids == theirs(TEXTS[0], TEXTS[1])["input_ids"]
    mask = ours.specials["mask"]
    masked = ours.encode(f"The cat sat on the {mask}.").ids
    at = masked.index(ours.token_to_id(mask))
    assert masked[:at] == ours.encode("The cat sat on the.").ids[:at]  # no space piece of its own before it
    bertforge_ok("fill-mask", older[name], "The cat sat on the [MASK].")


def test_a_sentencepiece_model_without_its_converter_is_one_line_naming_it(older, monkeypatch):
    monkeypatch.setitem(sys.modules, "sentencepiece", None)  # as if not installed
    with pytest.raises(UserError, match=r"sentencepiece\.bpe\.model.*pip install 'bertforge\[sentencepiece\]'"):
        load_tokenizer(older["xlm_roberta_sentencepiece"])


@pytest.mark.parametrize("name", [*HEADLESS, *OLDER_TOKENIZER_FILES])
def test_every_downloaded_kind_prepares_fine_tunes_and_extends(downloaded, older, corpus, tmp_path, name):
    """Each kind through the verbs a user runs on a download: prepare (no padding stored), fine-tuning for
    classification and for tagging (each saved as its family's class, loaded by `transformers` with nothing
    missing), and tokenizer extend."""
    transformers = needs("transformers")
    model = {**downloaded, **older}[name]
    bertforge_ok("prepare", corpus, "--tokenizer", model, "--out", tmp_path / "data")
    splits = json.loads((tmp_path / "data" / "meta.json").read_text())["splits"].values()
    tokenizer = load_tokenizer(model)
    own = sum(len(tokenizer.encode(line, add_special_tokens=False).ids) for line in corpus.read_text().splitlines())
    assert sum(split["tokens"] for split in splits) == pytest.approx(own, rel=0.05)  # no rows of padding
    rows = sentences(24, seed=9)
    (tmp_path / "train.tsv").write_text("text\tlabel\n" + "".join(f"{s}\t{'cat' in s}\n" for s in rows))
    tagged = ["\n".join(f"{w}\t{'B-x' if w == 'cat' else 'O'}" for w in s.rstrip(".").split()) for s in rows]
    (tmp_path / "train.conll").write_text("\n\n".join(tagged) + "\n")
    runs = {
        "AutoModelForSequenceClassification": ["--task", "classification", "--train", tmp_path / "train.tsv",
                                               "--text-column", "text", "--label-column", "label"],
        "AutoModelForTokenClassification": ["--task", "token-classification", "--train", tmp_path / "train.conll",
                                            "--dev", tmp_path / "train.conll"],
    }  # fmt: skip
    for auto, args in runs.items():
        out = tmp_path / auto
        bertforge_ok("finetune", model, *args, "--out", out, "--epochs", "1", "--precision", "fp32", "--quiet")
        _, info = getattr(transformers, auto).from_pretrained(out / "model", output_loading_info=True)
        assert not info["missing_keys"], info
    bertforge_ok("tokenizer", "extend", model, corpus, "--add", "2", "--out", tmp_path / "extended")


def test_a_damaged_or_near_empty_sentencepiece_model_is_one_line_of_its_own(older, tmp_path):
    """A SentencePiece file cut short is refused as what it is (not with the converter's message about tiktoken);
    one of a handful of pieces is refused as too few to be a vocabulary, never a 5-token tokenizer that answers."""
    import sentencepiece

    source = older["xlm_roberta_sentencepiece"]
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "config.json").write_bytes((source / "config.json").read_bytes())
    data = (source / "sentencepiece.bpe.model").read_bytes()
    (cut / "sentencepiece.bpe.model").write_bytes(data[: len(data) // 3])
    with pytest.raises(UserError, match="not a SentencePiece model") as refused:
        load_tokenizer(cut)
    assert "tiktoken" not in str(refused.value)
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    (tiny / "config.json").write_bytes((source / "config.json").read_bytes())
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(["a b", "b a"] * 20), model_prefix=str(tiny / "sentencepiece.bpe"), vocab_size=8,
        model_type="char", minloglevel=2,
    )  # fmt: skip
    with pytest.raises(UserError, match="pieces, too few to be a model's vocabulary"):
        load_tokenizer(tiny)
