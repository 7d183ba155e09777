"""Tagging (NER), question answering and regression: learned completely on tiny tasks, scored exactly,
in agreement with `transformers`, and bad input refused with one line."""

from __future__ import annotations

import csv
import functools
import json
import random
import re

import numpy as np
import pytest
import tokenizers
import torch

from bertforge import ModelConfig, save_model
from bertforge.data.batching import windowing_tokenizer, windows
from bertforge.errors import UserError
from bertforge.studies.score import parse_task, score
from bertforge.tasks.classification import Classifier, Columns
from bertforge.tasks.finetune import finetune
from bertforge.tasks.qa import (
    NULL_THRESHOLD_KEY,
    Answerer,
    answer_candidates,
    answer_tokens,
    best_null_threshold,
    best_span,
    f1_score,
    normalize_answer,
    null_score_diff,
    question_f1,
    read_squad,
    span_probabilities,
    span_text,
    squad_scores,
)
from bertforge.tasks.tagging import (
    Sentence,
    TagColumns,
    Tagger,
    encode_sentences,
    entities,
    entity_scores,
    read_sentences,
    spans_to_words,
)
from bertforge.tasks.targets import regression_metrics
from bertforge.tokenizer import special_ids, train_tokenizer

from conftest import bertforge, bertforge_ok, needs, one_line_error, quick_finetuning, save_random_model

NAMES = ["alice", "bob", "carol", "dave", "erin", "frank"]
PLACES = ["paris", "london", "rome", "oslo", "lima", "cairo"]
FILLER = ["walked", "to", "the", "market", "and", "saw", "a", "dog", "today", "with", "friends"]


fast = functools.partial(quick_finetuning, epochs=30)


@pytest.fixture(scope="module")
def tokenizer():
    # Every word of the tasks is one token; a word never seen (cairolondon) splits into pieces.
    texts = [" ".join(NAMES + PLACES + FILLER + ["new", "york", "where", "does", "live", "lives", "in", "?"])] * 20
    return train_tokenizer(texts, kind="wordpiece", vocab_size=200, min_frequency=1)


@pytest.fixture(scope="module")
def encoder(tmp_path_factory, tokenizer):
    shape = dict(hidden_size=48, num_layers=2, num_heads=4, intermediate_size=96, max_position_embeddings=128)
    directory = tmp_path_factory.mktemp("encoder") / "model"
    return save_random_model(directory, tokenizer, **shape, hidden_dropout=0.0, attention_dropout=0.0)


# ---------------------------------------------------------------- tagging


def tagged_sentence(rng: random.Random) -> list[tuple[str, str]]:
    words = [(w, "O") for w in rng.sample(FILLER, 4)]
    words.insert(rng.randrange(len(words) + 1), (rng.choice(NAMES), "B-person"))
    if rng.random() < 0.5:
        words.insert(rng.randrange(len(words) + 1), (rng.choice(PLACES), "B-place"))
    else:
        at = rng.randrange(len(words) + 1)
        words[at:at] = [("new", "B-place"), ("york", "I-place")]
    return words


def write_conll(path, sentences) -> None:
    path.write_text("-DOCSTART- O\n\n" + "\n\n".join("\n".join(f"{w}\t{t}" for w, t in s) for s in sentences) + "\n")


def test_conlleval_chunks_and_scores():
    assert entities(["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC"]) == {("PER", 0, 2), ("LOC", 3, 4), ("LOC", 4, 6)}
    assert entities(["I-PER", "I-PER", "O", "I-LOC", "I-PER"]) == {("PER", 0, 2), ("LOC", 3, 4), ("PER", 4, 5)}  # IOB1
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-ORG"]]
    predicted = [
        ["B-PER", "I-PER", "O", "O"],
        ["B-ORG", "B-ORG"],
    ]  # PER and the second ORG right: 2 of 3 found, 2 of 3 gold
    scores = {"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3, "accuracy": 4 / 6}  # 3 of 4 words, 1 of 2
    assert entity_scores(gold, predicted) == pytest.approx(scores)
    assert entity_scores(gold, [["O"] * 4, ["O", "O"]]) == {
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
        "accuracy": 2 / 6,
    }


def test_a_multi_piece_word_gets_one_label_and_long_sentences_become_windows(tokenizer):
    words = ["cairolondon"] + ["alice", "walked", "to", "paris"] * 10
    assert len(tokenizer.encode("cairolondon", add_special_tokens=False).ids) > 1
    windows = encode_sentences(tokenizer, [words], seq_len=16)
    assert len(windows) > 1 and all(len(w.ids) <= 16 for w in windows)
    labelled = [word for w in windows for word in w.first_piece_word if word is not None]
    assert labelled == list(range(len(words)))  # every word labelled once, on its first piece, none lost
    ids = special_ids(tokenizer)
    assert all(w.ids[0] == ids.cls and w.ids[-1] == ids.sep for w in windows)


def test_tagging_is_learned_and_matches_the_transformers_pipeline(encoder, tmp_path):
    transformers = needs("transformers")
    rng = random.Random(0)
    sentences = [tagged_sentence(rng) for _ in range(48)]
    write_conll(tmp_path / "train.conll", sentences)
    write_conll(tmp_path / "dev.conll", sentences[:12])
    summary = finetune(
        encoder,
        "token-classification",
        tmp_path / "train.conll",
        tmp_path / "dev.conll",
        tmp_path / "ner",
        fast(),
        progress=False,
    )
    assert summary["best"]["dev_f1"] == 1.0 and summary["labels"] == ["O", "B-person", "B-place", "I-place"]
    model_dir = tmp_path / "ner" / "model"
    # A dev sentence with a two-word place: dev F1 of 1.0 says every one of its tags is right, on any CPU;
    # an unseen sentence would test the toy model's generalisation, which differs between machines.
    sentence = next(s for s in sentences[:12] if ("york", "I-place") in s)
    text = " ".join(word for word, _ in sentence)
    ours = json.loads(bertforge_ok("tag", model_dir, text, "--json").stdout)
    gold = [(tag[2:], word) for word, tag in sentence if tag.startswith("B-")]
    assert [(e["entity_group"], e["word"]) for e in ours] == [(t, "new york" if w == "new" else w) for t, w in gold]
    assert all(text[e["start"] : e["end"]] == e["word"] for e in ours)
    # --out: a row per entity with its text's number, or a JSON line per text, as --json gives them
    (tmp_path / "texts.txt").write_text(f"{text}\n{' '.join(w for w, _ in sentences[1])}\n", encoding="utf-8")
    texts = tmp_path / "texts.txt"
    expected = json.loads(bertforge_ok("tag", model_dir, "--input", texts, "--json").stdout)
    bertforge_ok("tag", model_dir, "--input", texts, "--out", tmp_path / "entities.tsv")
    with open(tmp_path / "entities.tsv", encoding="utf-8", newline="") as f:
        table = list(csv.DictReader(f, delimiter="\t"))
    assert [(int(r["text_number"]), r["entity_group"], r["word"], int(r["start"]), int(r["end"])) for r in table] == [
        (n, e["entity_group"], e["word"], e["start"], e["end"])
        for n, t in enumerate(expected, 1)
        for e in t["entities"]
    ]
    assert len(table) >= len(ours) > 0  # the first text's entities, at least
    bertforge_ok("tag", model_dir, "--input", texts, "--out", tmp_path / "entities.jsonl")
    lines = (tmp_path / "entities.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == expected
    pipe = transformers.pipeline("token-classification", model=str(model_dir), aggregation_strategy="simple")
    reference = pipe(text)
    assert [(r["entity_group"], r["word"], r["start"], r["end"]) for r in reference] == [
        (e["entity_group"], e["word"], e["start"], e["end"]) for e in ours
    ]
    assert [e["score"] for e in ours] == pytest.approx([float(r["score"]) for r in reference], abs=1e-5)
    theirs = transformers.AutoModelForTokenClassification.from_pretrained(model_dir).eval()
    ids = torch.tensor([Tagger(model_dir).tokenizer.encode(text).ids])
    with torch.no_grad():
        torch.testing.assert_close(Tagger(model_dir).model(ids)[0], theirs(input_ids=ids).logits, rtol=1e-5, atol=1e-5)


def exported_spans(words_and_tags: list[tuple[str, str]], shape: str) -> dict:
    """A tagged sentence as an annotation tool exports it: the text, and each entity as a character span."""
    text, spans = "", []
    for word, tag in words_and_tags:
        text += ("" if not text else " ") + word
        start, end = len(text) - len(word), len(text)
        if tag.startswith("B-"):
            spans.append([start, end, tag[2:]])
        elif tag.startswith("I-"):
            spans[-1][1] = end
    if shape == "doccano":
        return {"text": text, "label": spans}
    if shape == "label-studio":  # JSON-MIN
        return {"text": text, "label": [{"start": a, "end": b, "text": text[a:b], "labels": [k]} for a, b, k in spans]}
    return {"text": text, "label": [{"start": a, "end": b, "label": k} for a, b, k in spans]}  # Prodigy, spaCy


@pytest.mark.parametrize("shape", ["doccano", "label-studio", "prodigy"])
def test_annotation_tools_character_spans_read_as_the_conll_file_of_their_words(tmp_path, shape):
    rng = random.Random(1)
    sentences = [tagged_sentence(rng) for _ in range(20)]
    write_conll(tmp_path / "ner.conll", sentences)
    rows = [exported_spans(s, shape) for s in sentences]
    if shape == "label-studio":  # a JSON array, as its export is
        (tmp_path / "ner.json").write_text(json.dumps(rows), encoding="utf-8")
    else:
        (tmp_path / "ner.json").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    spans = read_sentences(tmp_path / "ner.json", TagColumns.given("text", "label"))
    assert spans == read_sentences(tmp_path / "ner.conll")


def test_character_spans_that_overlap_miss_every_word_or_have_no_shape_name_their_row():
    assert spans_to_words("Alice met Bob.", [[0, 5, "PER"], [10, 13, "PER"]], "x") == Sentence(
        ["Alice", "met", "Bob", "."], ["B-PER", "O", "B-PER", "O"]
    )
    assert spans_to_words("Ann Lee", [[0, 3, "PER"], [4, 7, "PER"]], "x").tags == [
        "B-PER",
        "B-PER",
    ]  # two, side by side
    for spans, message in (
        ([[0, 9, "PER"], [6, 9, "PER"]], "x: entities 'PER' and 'PER' overlap at character 6"),
        ([[5, 6, "PER"]], "x: an entity's span holds no word of the text"),
        ([{"begin": 0, "end": 5}], "x: an entity is [start, end, type] or {start, end, label}"),
        ([[5, 0, "PER"]], "x: an entity's start and end are character offsets, start < end: 5, 0"),
    ):
        with pytest.raises(UserError, match=re.escape(message)):
            spans_to_words("Alice met Bob.", spans, "x")


# Part of speech, as a Universal Dependencies treebank tags it: UPOS, and a language-specific XPOS beside it.
POS = {**{w: ("PROPN", "NNP") for w in NAMES + PLACES}, "walked": ("VERB", "VBD"), "saw": ("VERB", "VBD")}
POS |= {"to": ("ADP", "IN"), "with": ("ADP", "IN"), "the": ("DET", "DT"), "a": ("DET", "DT"), "and": ("CCONJ", "CC")}
POS |= {"market": ("NOUN", "NN"), "dog": ("NOUN", "NN"), "friends": ("NOUN", "NNS"), "today": ("ADV", "RB")}


def write_conllu(path, sentences: list[list[str]]) -> None:
    """UD's format: comments, then a 10-column line per word; each sentence starts with a multiword token (a line
    1-2 whose words 1 and 2 follow it, as French "du" is "de le") and holds an empty node (2.1), neither a word."""
    blocks = []
    for n, words in enumerate(sentences):
        lines = [f"# sent_id = s{n}", f"# text = {' '.join(words)}", f"1-2\t{words[0]}{words[1]}" + "\t_" * 8]
        for i, word in enumerate(words, start=1):
            upos, xpos = POS[word]
            lines.append(f"{i}\t{word}\t{word}\t{upos}\t{xpos}\t_\t{max(i - 1, 0)}\tdep\t_\t_")
            if i == 2:
                lines.append("2.1\telided\t_\tVERB\tVB\t_\t_\t_\t1:dep\t_")
        blocks.append("\n".join(lines))
    path.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")


def pos_sentence(rng: random.Random) -> list[str]:
    return [rng.choice(NAMES), "walked", "to", rng.choice(PLACES), *rng.sample(["and", "saw", "a", "dog", "today"], 3)]


def test_a_conllu_file_gives_its_words_and_the_tags_of_the_column_asked_for(tmp_path):
    write_conllu(tmp_path / "s.conllu", [["alice", "walked", "to", "paris"]])
    words = ["alice", "walked", "to", "paris"]  # no multiword token, no empty node
    assert read_sentences(tmp_path / "s.conllu") == [Sentence(words, ["PROPN", "VERB", "ADP", "PROPN"])]
    xpos = TagColumns.given(None, "xpos")
    assert read_sentences(tmp_path / "s.conllu", xpos) == [Sentence(words, ["NNP", "VBD", "IN", "NNP"])]
    with pytest.raises(UserError, match="one of its columns: lemma, upos, xpos"):
        read_sentences(tmp_path / "s.conllu", TagColumns.given(None, "ner"))
    (tmp_path / "cut.conllu").write_text("# text = a\n1\ta\tNOUN\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"cut\.conllu:2: a CoNLL-U word line has 10 tab-separated fields, found 3"):
        read_sentences(tmp_path / "cut.conllu")


def test_part_of_speech_is_learned_scored_by_word_accuracy_and_tagged_word_by_word(encoder, tmp_path):
    rng = random.Random(0)
    sentences = [pos_sentence(rng) for _ in range(48)]
    write_conllu(tmp_path / "train.conllu", sentences)
    write_conllu(tmp_path / "dev.conllu", sentences[:12])
    summary = finetune(
        encoder,
        "token-classification",
        tmp_path / "train.conllu",
        tmp_path / "dev.conllu",
        tmp_path / "pos",
        fast(),
        progress=False,
    )
    assert summary["main_metric"] == "accuracy" and summary["best"]["dev_accuracy"] == 1.0
    assert summary["labels"] == sorted({upos for upos, _ in POS.values()})
    text = " ".join(sentences[0])  # a dev sentence: dev accuracy 1.0 says each of its words is tagged right
    ours = json.loads(bertforge_ok("tag", tmp_path / "pos" / "model", text, "--json").stdout)
    assert [(e["word"], e["entity_group"]) for e in ours] == [(w, POS[w][0]) for w in sentences[0]]
    assert all(text[e["start"] : e["end"]] == e["word"] for e in ours)
    # score leads with the metric the spec names, and picks the lr by it
    spec = parse_task(
        f"pos={tmp_path / 'train.conllu'},{tmp_path / 'dev.conllu'}:task=token-classification,metric=accuracy"
    )
    rows = score(encoder, [spec], tmp_path / "score", fast(), seeds=1, progress=False)
    assert [(r["metric"], r["median"]) for r in rows if r["main"]] == [("accuracy", 1.0)]


# ---------------------------------------------------------------- question answering


def squad(items: list[tuple[str, str, str | None]]) -> dict:
    """{"data": ...} from (context, question, answer) triples; answer_start is the answer's first occurrence.
    An answer of None is a SQuAD v2.0 question the context does not answer."""
    paragraphs = [
        {
            "context": c,
            "qas": [
                {"id": str(i), "question": q, "answers": [{"text": a, "answer_start": c.index(a)}]}
                if a is not None
                else {"id": str(i), "question": q, "answers": [], "is_impossible": True, "plausible_answers": []}
            ],
        }
        for i, (c, q, a) in enumerate(items)
    ]
    return {"data": [{"title": "t", "paragraphs": paragraphs}]}


def squad_rows(items: list[tuple[str, str, str | None]]) -> list[dict]:
    """The same questions as `datasets` keeps squad_v2: a row each, answers as lists."""
    return [
        {"id": str(i), "title": "t", "context": c, "question": q}
        | {"answers": {"text": [a] if a else [], "answer_start": [c.index(a)] if a else []}}
        for i, (c, q, a) in enumerate(items)
    ]


def qa_items(rng: random.Random, n: int) -> list[tuple[str, str, str]]:
    """The answer is the place after "in", wherever it stands among other words and places."""
    items = []
    for _ in range(n):
        words = [rng.choice(FILLER + NAMES) for _ in range(rng.randrange(3, 12))]
        place = rng.choice(PLACES)
        at = rng.randrange(len(words) + 1)
        words[at:at] = ["in", place]
        words.insert(rng.randrange(len(words) + 1), rng.choice([p for p in PLACES if p != place]))  # a distractor
        items.append((" ".join(words), f"where does {rng.choice(NAMES)} live ?", place))
    return items


def fine_tuned_qa(encoder, tmp_path, items, dev_items, **overrides) -> dict:
    """`items` and `dev_items` as SQuAD files (tmp_path/train.json, dev.json), fine-tuned until the toy task is
    learned (unless `overrides` say otherwise); the summary, the model in tmp_path/qa/model."""
    (tmp_path / "train.json").write_text(json.dumps(squad(items)))
    (tmp_path / "dev.json").write_text(json.dumps(squad(dev_items)))
    cfg = fast(**{"epochs": 50, "seq_len": 64, "stride": 16, **overrides})
    train, dev = tmp_path / "train.json", tmp_path / "dev.json"
    return finetune(encoder, "question-answering", train, dev, tmp_path / "qa", cfg, progress=False)


def pipeline_p_mask(encoding) -> np.ndarray:
    """(1, T) 1 where the QA pipeline bars a token from answering: all but the context, [CLS] kept for its softmax."""
    p_mask = np.array([[s != 1 for s in encoding.sequence_ids]], dtype=int)
    p_mask[0, 0] = 0
    return p_mask


def test_squad_normalisation_and_scores():
    assert normalize_answer("The  Cat's hat!") == "cats hat"
    assert f1_score("the cat sat", "a cat sat down") == pytest.approx(0.8)  # 2 common of 2 predicted, 3 expected
    assert squad_scores(["Paris", "in rome"], [["paris", "the city of paris"], ["lima"]]) == {
        "exact_match": 50.0,
        "f1": 50.0,
    }
    # SQuAD v2.0: no answer ("") is right only for a question without answers, and F1 is split by kind.
    assert squad_scores(["", "paris", "", "rome"], [[], [], ["rome"], ["rome"]]) == {
        "exact_match": 50.0,
        "f1": 50.0,
        "has_answer_f1": 50.0,
        "no_answer_f1": 50.0,
    }


def test_answer_offsets_recover_the_answer_across_windows(tokenizer):
    rng = random.Random(3)
    context = " ".join(f"{rng.choice(NAMES)} {rng.choice(FILLER)} {rng.choice(PLACES)} ." for _ in range(30))
    start = context.index("cairo") if "cairo" in context else context.index("rome")
    answer = context[start : start + (5 if context[start] == "c" else 4)]
    windowed = windowing_tokenizer(tokenizer, seq_len=32, stride=8, strategy="only_second")
    encodings = windows(windowed, "where ?", context)
    assert len(encodings) > 3
    holding = 0
    for encoding in encodings:
        first, last = answer_tokens(encoding, start, start + len(answer))
        if (first, last) != (0, 0):
            holding += 1
            assert context.__getitem__(slice(*span_text(encoding, context, first, last))) == answer
    assert holding >= 1


def test_a_tokenizers_release_that_cuts_windows_short_is_refused(tokenizer, monkeypatch):
    monkeypatch.setattr(tokenizers, "__version__", "0.23.2")
    with pytest.raises(UserError, match=r"tokenizers 0.23.2 drops the windows.*tokenizers>=0.23.3"):
        windowing_tokenizer(tokenizer, seq_len=32, stride=8, strategy="only_second")


def test_question_answering_is_learned_and_decodes_as_transformers_does(encoder, tmp_path):
    transformers = needs("transformers")
    from transformers.pipelines.document_question_answering import select_starts_ends

    items = qa_items(random.Random(1), 64)
    summary = fine_tuned_qa(encoder, tmp_path, items, items[:16])
    assert summary["best"]["dev_exact_match"] >= 90.0
    model_dir = tmp_path / "qa" / "model"
    context, question, gold = items[0]
    ours = json.loads(bertforge_ok("answer", model_dir, "--question", question, "--context", context, "--json").stdout)
    assert ours["answer"] == gold and context[ours["start"] : ours["end"]] == gold
    (tmp_path / "page.html").write_text(f"<html><body><h1>{question}</h1><p>{context}</p></body></html>")
    page = bertforge_ok("answer", model_dir, "--question", question, "--context-file", tmp_path / "page.html", "--json")
    assert json.loads(page.stdout)["answer"] == gold  # read as its paragraphs, a line each: the heading, the context
    assert json.loads(page.stdout)["start"] == len(question) + 1 + ours["start"]
    # The same logits in transformers, and transformers' own span decoding of them gives the same span and score.
    answerer = Answerer(model_dir)
    encoding = windows(answerer.tokenizer, question, context)[0]
    ids = torch.tensor([encoding.ids])
    types = torch.tensor([encoding.type_ids])
    theirs = transformers.AutoModelForQuestionAnswering.from_pretrained(model_dir).eval()
    with torch.no_grad():
        ours_logits = answerer.model(ids, types)[0][0].numpy()  # (T, 2)
        out = theirs(input_ids=ids, token_type_ids=types)
    np.testing.assert_allclose(ours_logits[:, 0], out.start_logits[0].numpy(), rtol=1e-5, atol=1e-5)
    p_mask = pipeline_p_mask(encoding)
    starts, ends, scores, _ = select_starts_ends(
        out.start_logits.numpy(), out.end_logits.numpy(), p_mask, np.ones_like(p_mask), max_answer_len=15
    )
    probabilities = span_probabilities(ours_logits[:, 0], ours_logits[:, 1], encoding)
    first, last, score = best_span(*probabilities, encoding, 15)
    assert (first, last) == (int(starts[0]), int(ends[0])) and score == pytest.approx(float(scores[0]), rel=1e-5)


def unanswerable_items(rng: random.Random, n: int) -> list[tuple[str, str, None]]:
    """Contexts without "in PLACE": a place is named, but nobody is said to live anywhere."""
    items = []
    for _ in range(n):
        words = [rng.choice(FILLER + NAMES) for _ in range(rng.randrange(3, 12))]
        words.insert(rng.randrange(len(words) + 1), rng.choice(PLACES))
        items.append((" ".join(words), f"where does {rng.choice(NAMES)} live ?", None))
    return items


def test_squad_v2_json_and_datasets_tables_read_the_same_questions(tmp_path):
    items = qa_items(random.Random(5), 3) + unanswerable_items(random.Random(6), 2)
    (tmp_path / "v2.json").write_text(json.dumps(squad(items)))
    rows = squad_rows(items)
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "to_json.json").write_text("".join(json.dumps(r) + "\n" for r in rows))  # datasets' to_json
    expected = read_squad(tmp_path / "v2.json", training=True)
    assert [q.answers for q in expected] == [[a] for _, _, a in items[:3]] + [[], []]
    assert read_squad(tmp_path / "rows.jsonl", training=True) == expected
    assert read_squad(tmp_path / "to_json.json", training=True) == expected
    (tmp_path / "array.json").write_text(json.dumps(rows, indent=2))  # to_json(lines=False): one array of rows
    assert read_squad(tmp_path / "array.json", training=True) == expected
    pa, pq = needs("pyarrow"), needs("pyarrow.parquet")
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "validation.parquet")  # answers: a struct of two lists
    assert read_squad(tmp_path / "validation.parquet", training=True) == expected


def test_squad_v2_learns_to_abstain_and_decides_as_transformers_does(encoder, tmp_path):
    """Trained with unanswerable questions, the model answers "no answer" where the context has no answer,
    by the pipeline's handle_impossible_answer rule on the same logits."""
    needs("transformers")
    from transformers.pipelines.document_question_answering import select_starts_ends

    rng = random.Random(7)
    items = qa_items(rng, 48) + unanswerable_items(rng, 48)
    rng.shuffle(items)
    summary = fine_tuned_qa(encoder, tmp_path, items, items[:24])
    best = summary["best"]
    assert best["dev_has_answer_f1"] >= 90.0 and best["dev_no_answer_f1"] >= 90.0, best
    assert summary["train_questions_without_answer"] == 48
    model_dir = tmp_path / "qa" / "model"
    answerer = Answerer(model_dir)
    assert answerer.allow_no_answer
    for context, question, gold in items[:24]:
        ours = answerer.answer(question, context)
        assert ours["answer"] == (gold or ""), (context, ours)
        encoding = windows(answerer.tokenizer, question, context)[0]
        ids, types = torch.tensor([encoding.ids]), torch.tensor([encoding.type_ids])
        with torch.no_grad():
            logits = answerer.model(ids, types)[0][0].numpy()  # (T, 2)
        p_mask = pipeline_p_mask(encoding)
        starts, ends, scores, no_answer = select_starts_ends(
            logits[None, :, 0], logits[None, :, 1], p_mask, np.ones_like(p_mask), 1e6, 1, True, 15
        )
        expected = "" if no_answer > scores[0] else context[slice(*span_text(encoding, context, starts[0], ends[0]))]
        assert ours["answer"] == expected
        assert ours["score"] == pytest.approx(max(no_answer, float(scores[0])), rel=1e-5)
    context, question, _ = next(item for item in items[:24] if item[2] is None)
    shown = bertforge_ok("answer", model_dir, "--question", question, "--context", context).stdout
    assert shown.startswith("(no answer")
    # A whole file: SQuAD's predictions file, and the dev scores fine-tuning reported.
    done = bertforge_ok(
        "answer", model_dir, "--input", tmp_path / "dev.json", "--out", tmp_path / "pred.json", "--json"
    )
    assert json.loads((tmp_path / "pred.json").read_text()) == {
        str(i): gold or "" for i, (_, _, gold) in enumerate(items[:24])
    }
    one_line_error(bertforge("answer", model_dir, "--input", tmp_path / "dev.json", "--question", "who?"), "not both")
    scores = json.loads(done.stdout)["scores"]
    assert scores == pytest.approx({k.removeprefix("dev_"): v for k, v in best.items() if k.startswith("dev_")})
    (tmp_path / "v1.json").write_text(json.dumps(squad(qa_items(rng, 4))))
    with pytest.raises(UserError, match="never learn"):
        finetune(encoder, "question-answering", tmp_path / "v1.json", tmp_path / "dev.json", tmp_path / "x", fast())


# ---------------------------------------------------------------- regression


def test_the_no_answer_threshold_is_the_cut_with_the_best_f1():
    """Against every cut there is, with ties among the differences: abstaining where the difference exceeds it."""
    rng = np.random.default_rng(0)
    diffs = np.round(rng.normal(size=300), 1)  # ties
    no_answer_f1 = (rng.random(300) < 0.4 + 0.2 * (diffs > 0)).astype(float)
    span_f1 = np.where(no_answer_f1 > 0, 0.0, rng.random(300))

    def mean_f1(threshold: float) -> float:
        return float(np.where(diffs > threshold, no_answer_f1, span_f1).mean())

    threshold = best_null_threshold(diffs, span_f1, no_answer_f1)
    assert mean_f1(threshold) == max(mean_f1(t) for t in [*np.unique(diffs), diffs.min() - 1])
    assert not np.any(diffs == threshold)
    few = np.array([1.0, -2.0, 0.5])  # every question unanswerable: abstain on all; every span right: on none
    assert best_null_threshold(few, np.zeros(3), np.ones(3)) < -2.0
    assert best_null_threshold(few, np.ones(3), np.zeros(3)) > 1.0


def test_squad_v2_fits_its_no_answer_threshold_on_dev_and_answers_by_it(encoder, tmp_path):
    """--tune-thresholds: the threshold saved is the one that suits the saved model on dev, the epoch is picked by
    the tuned F1, and `answer` abstains by it, scoring the dev file as fine-tuning did."""
    rng = random.Random(8)
    items = qa_items(rng, 32) + unanswerable_items(rng, 32)
    rng.shuffle(items)
    dev = items[:24]
    summary = fine_tuned_qa(encoder, tmp_path, items, dev, epochs=4, tune_thresholds=True)
    assert summary["main_metric"] == "tuned_f1"
    records = [json.loads(line) for line in (tmp_path / "qa" / "metrics.jsonl").read_text().splitlines()]
    assert summary["best"] == max(records, key=lambda r: r["dev_tuned_f1"])
    assert summary["best"]["dev_tuned_f1"] >= summary["best"]["dev_f1"]
    model_dir = tmp_path / "qa" / "model"
    saved = json.loads((model_dir / "config.json").read_text())[NULL_THRESHOLD_KEY]
    answerer = Answerer(model_dir)
    items_asked = [(question, context) for context, question, _ in dev]
    spans, no_answer = answer_candidates(answerer.model, answerer.tokenizer, items_asked, answerer.precision, 15)
    diffs = np.array([null_score_diff(none, span["score"]) for span, none in zip(spans, no_answer)])
    span_f1 = question_f1([span["answer"] for span in spans], [[gold] if gold else [] for _, _, gold in dev])
    refitted = best_null_threshold(diffs, span_f1, np.array([float(gold is None) for _, _, gold in dev]))
    assert saved == pytest.approx(refitted, abs=1e-4)
    for (question, context), span, diff in zip(items_asked, spans, diffs):
        assert answerer.answer(question, context)["answer"] == ("" if diff > saved else span["answer"])
    done = bertforge_ok("answer", model_dir, "--input", tmp_path / "dev.json", "--json")
    tuned = {k.removeprefix("dev_tuned_"): v for k, v in summary["best"].items() if k.startswith("dev_tuned_")}
    assert json.loads(done.stdout)["scores"] == pytest.approx(tuned)
    # SQuAD v1.1 has no 'no answer' to tune; a threshold that is not a number is refused
    (tmp_path / "v1").mkdir()
    with pytest.raises(UserError, match="every question has an answer; --tune-thresholds fits when"):
        fine_tuned_qa(encoder, tmp_path / "v1", qa_items(rng, 4), qa_items(rng, 2), epochs=1, tune_thresholds=True)
    config = json.loads((model_dir / "config.json").read_text())
    (model_dir / "config.json").write_text(json.dumps({**config, NULL_THRESHOLD_KEY: "high"}))
    with pytest.raises(UserError, match="null_score_diff_threshold is 'high', not a number"):
        Answerer(model_dir)


def test_regression_is_learned_and_saved_as_transformers_regression(encoder, tmp_path):
    transformers = needs("transformers")
    rng = random.Random(2)
    rows = []
    for _ in range(64):
        count = rng.randrange(4)
        words = [rng.choice(FILLER) for _ in range(5)] + ["dog"] * count
        rng.shuffle(words)
        rows.append((" ".join(words), str(count / 3)))
    (tmp_path / "train.tsv").write_text("text\tscore\n" + "".join(f"{t}\t{y}\n" for t, y in rows))
    summary = finetune(
        encoder,
        "regression",
        tmp_path / "train.tsv",
        tmp_path / "train.tsv",
        tmp_path / "reg",
        fast(epochs=40),
        Columns("text", "score"),
        progress=False,
    )
    assert summary["best"]["dev_pearson"] > 0.95 and summary["best"]["dev_spearman"] > 0.9
    model_dir = tmp_path / "reg" / "model"
    assert json.loads((model_dir / "config.json").read_text())["problem_type"] == "regression"
    values = [r["value"] for r in Classifier(model_dir).classify([t for t, _ in rows[:8]])]
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    with torch.no_grad():
        reference = theirs(**tokenizer([t for t, _ in rows[:8]], padding=True, return_tensors="pt")).logits[:, 0]
    assert values == pytest.approx(reference.tolist(), abs=1e-5)


def test_regression_metrics_by_hand():
    m = regression_metrics(np.array([1.0, 2.0, 3.0, 3.0]), np.array([1.0, 3.0, 2.0, 4.0]))
    assert m["mse"] == pytest.approx((0 + 1 + 1 + 1) / 4)
    assert m["spearman"] == pytest.approx(np.corrcoef([1, 2, 3.5, 3.5], [1, 3, 2, 4])[0, 1])  # ties share their rank


# ---------------------------------------------------------------- bad input


def test_bad_task_files_exit_2_with_one_line_and_write_nothing(encoder, tmp_path):
    write_conll(tmp_path / "ok.conll", [[("alice", "B-person"), ("walked", "O")]])
    (tmp_path / "one_field.conll").write_text("alice\tB-person\nwalked\n")
    write_conll(tmp_path / "new_tag.conll", [[("alice", "B-place")], [("bob", "B-city")]])
    (tmp_path / "broken.json").write_text('{"data": [')
    wrong = squad([("alice lives in paris .", "where ?", "paris")])
    wrong["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = 3
    (tmp_path / "wrong_start.json").write_text(json.dumps(wrong))
    (tmp_path / "reg.tsv").write_text("text\tscore\nalice\t0.5\nbob\thigh\n")
    cases = [
        (
            ["--task", "token-classification", "--train", tmp_path / "one_field.conll", "--dev", tmp_path / "ok.conll"],
            ["one_field.conll:2", "one field"],
        ),
        (
            ["--task", "token-classification", "--train", tmp_path / "ok.conll", "--dev", tmp_path / "new_tag.conll"],
            ["new_tag.conll", "'B-city'"],
        ),
        (
            ["--task", "question-answering", "--train", tmp_path / "broken.json", "--dev", tmp_path / "broken.json"],
            ["broken.json:1", "not valid JSON"],
        ),
        (
            [
                "--task",
                "question-answering",
                "--train",
                tmp_path / "wrong_start.json",
                "--dev",
                tmp_path / "wrong_start.json",
            ],
            ["wrong_start.json", "does not point at its answer"],
        ),
        (
            [
                "--task",
                "regression",
                "--train",
                tmp_path / "reg.tsv",
                "--dev",
                tmp_path / "reg.tsv",
                "--text-column",
                "text",
                "--label-column",
                "score",
            ],
            ["reg.tsv", "'high'", "not a number"],
        ),
    ]
    for flags, fragments in cases:
        one_line_error(bertforge("finetune", encoder, *flags, "--out", tmp_path / "out", "--quiet"), *fragments)
        assert not (tmp_path / "out").exists()  # nothing half-written


# ---------------------------------------------------------------- score


def test_score_tabulates_seeds_and_arms_and_resumes(encoder, tmp_path):
    rng = random.Random(4)
    rows = [(f"{rng.choice(NAMES)} walked to {rng.choice(PLACES)}", "a") for _ in range(12)]
    rows += [(f"the dog saw {rng.choice(FILLER)}", "b") for _ in range(12)]
    (tmp_path / "cls.tsv").write_text("text\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows))
    write_conll(tmp_path / "train.conll", [tagged_sentence(rng) for _ in range(16)])
    write_conll(tmp_path / "dev.conll", [tagged_sentence(rng) for _ in range(4)])
    flags = [
        "score",
        encoder,
        "--out",
        tmp_path / "score",
        "--seeds",
        "2",
        "--from-scratch",
        "--epochs",
        "2",
        "--lr",
        "3e-3",
        "--precision",
        "fp32",
        "--device",
        "cpu",
        "--quiet",
        "--tasks",
        f"toy={tmp_path / 'cls.tsv'},{tmp_path / 'cls.tsv'}:task=classification,text=text,label=label",
        f"toy2={tmp_path / 'cls.tsv'},{tmp_path / 'cls.tsv'}:task=classification,text=text,label=label",
        f"ner={tmp_path / 'train.conll'},{tmp_path / 'dev.conll'}",
    ]
    first = json.loads(bertforge_ok(*flags, "--json").stdout)
    main = {(r["task"], r["arm"]): r for r in first if r["main"]}
    assert set(main) == {(t, a) for t in ("toy", "toy2", "ner", "average") for a in ("pre-trained", "from scratch")}
    # The average (as GLUE's): per seed, the mean over the classification tasks; then median and range over seeds.
    for arm in ("pre-trained", "from_scratch"):
        by_seed = [
            np.mean([json.loads(p.read_text())["best"]["dev_accuracy"] for p in (tmp_path / "score").glob(pattern)])
            for pattern in (f"toy*/{arm}/*/seed_{s}/summary.json" for s in range(2))
        ]
        average = main[("average", arm.replace("_", " "))]
        assert (average["min"], average["max"]) == pytest.approx((min(by_seed), max(by_seed)))
    assert main[("toy", "pre-trained")]["metric"] == "accuracy" and main[("ner", "pre-trained")]["metric"] == "f1"
    for r in main.values():
        assert r["seeds"] == 2 and r["min"] <= r["median"] <= r["max"]
        assert r["minutes"] is None if r["task"] == "average" else 0 < r["minutes"] < 5
    gain = main[("toy", "pre-trained")]["gain"]
    assert gain == pytest.approx(main[("toy", "pre-trained")]["median"] - main[("toy", "from scratch")]["median"])
    for task in ("toy", "toy2", "ner", "average"):  # apart: every pre-trained seed above, or below, every scratch seed
        ours, scratch = main[(task, "pre-trained")], main[(task, "from scratch")]
        assert ours["apart"] == (ours["min"] > scratch["max"] or ours["max"] < scratch["min"])
        assert "apart" not in scratch and "higher_in" not in scratch
        assert ours["higher_in"] == f"{sum(a > b for a, b in zip(ours['by_seed'], scratch['by_seed']))} of 2"
    for seed in range(2):  # by_seed holds seed 0, then seed 1
        summary = json.loads(
            next((tmp_path / "score" / "toy" / "pre-trained").glob(f"*/seed_{seed}/summary.json")).read_text()
        )
        assert main[("toy", "pre-trained")]["by_seed"][seed] == summary["best"]["dev_accuracy"]
    runs = sorted(p.relative_to(tmp_path / "score") for p in (tmp_path / "score").rglob("summary.json"))
    assert len(runs) == 12  # 3 tasks x 2 arms x 2 seeds
    assert json.loads((tmp_path / "score" / "results.json").read_text()) == first
    assert (tmp_path / "score" / "results.png").is_file()  # its bars: test_plots
    assert_tables_show(first, tmp_path / "score")
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "score").rglob("summary.json")}
    assert json.loads(bertforge_ok(*flags, "--json").stdout) == first  # a second call reuses every finished run
    assert stamps == {p: p.stat().st_mtime_ns for p in (tmp_path / "score").rglob("summary.json")}
    one_line_error(bertforge("score", encoder, "--out", tmp_path / "x", "--tasks", "sst2=/nonexistent"), "train.tsv")


def assert_tables_show(rows: list[dict], directory) -> None:
    """results.md and results.csv hold each row of results.json: its median, range, seeds and gain, in one line."""
    lines = (directory / "results.md").read_text().splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    shown = [dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")))) for line in lines[2:]]
    written = list(csv.DictReader(open(directory / "results.csv", encoding="utf-8")))
    assert len(shown) == len(written) == len(rows)
    for r in rows:
        metric = r["metric"] + (" (main)" if r["main"] else "")
        (md,) = [m for m in shown if (m["task"], m["arm"], m["metric"]) == (r["task"], r["arm"], metric)]
        numbers = [float(x) for x in re.findall(r"-?\d+\.\d+", md["median (min–max)"])]
        assert numbers == pytest.approx([r["median"], r["min"], r["max"]], abs=5e-5)
        assert int(md["seeds"]) == r["seeds"]
        assert md["gain over from scratch"] == (f"{r['gain']:+.4f}" if "gain" in r else "–")
        (row,) = [w for w in written if (w["task"], w["arm"], w["metric"]) == (r["task"], r["arm"], r["metric"])]
        assert [float(row[k]) for k in ("median", "min", "max")] == [r["median"], r["min"], r["max"]]


def test_a_long_text_is_classified_whole_as_the_mean_over_its_windows(tokenizer, tmp_path):
    """With `whole`, a text past the position table is read in windows of its length overlapping by a quarter,
    every word in one: the probabilities are the mean of each window's own, and without it the text is cut."""
    from bertforge.model.heads import BertForSequenceClassification

    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=tokenizer.get_vocab_size(), hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
        max_position_embeddings=16,
    )  # fmt: skip
    model = BertForSequenceClassification(config, num_labels=3)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)  # windows that differ get answers that differ
    labels = {"id2label": {"0": "a", "1": "b", "2": "c"}, "label2id": {"a": 0, "b": 1, "c": 2}}
    save_model(model, tmp_path / "clf", tokenizer, labels)
    classifier = Classifier(tmp_path / "clf")
    rng = random.Random(0)
    words = [rng.choice(NAMES + PLACES + FILLER) for _ in range(40)]  # a token each; windows hold 14 of them
    whole, cut = classifier.classify([" ".join(words)], whole=True)[0], classifier.classify([" ".join(words)])[0]
    # Windows of 16 = [CLS] + 14 words + [SEP], each after the first repeating the last 4 words before it.
    starts = [0, 10, 20, 30]
    assert whole["windows"] == len(starts) and "windows" not in cut
    alone = classifier.classify([" ".join(words[s : s + 14]) for s in starts])
    mean = {label: np.mean([r["probabilities"][label] for r in alone]) for label in "abc"}
    assert whole["probabilities"] == pytest.approx(mean, abs=1e-6)
    assert whole["label"] == max(mean, key=mean.get)
    assert cut["probabilities"] == pytest.approx(alone[0]["probabilities"], abs=1e-6)
    assert len({round(r["probabilities"]["a"], 6) for r in alone}) == len(starts)  # the windows did differ
    short = classifier.classify(["alice walked"], whole=True)[0]
    assert short["windows"] == 1 and short["probabilities"] == classifier.classify(["alice walked"])[0]["probabilities"]
    with pytest.raises(UserError, match="only single texts are read whole"):
        classifier.classify(["alice"], ["bob"], whole=True)


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_a_long_text_is_embedded_whole_as_the_mean_of_its_windows_vectors(tokenizer, tmp_path, pooling):
    """`embed(whole=True)` cuts windows as `classify` does: a long text's vector is the mean of each window's
    vector alone, a short text's is unchanged, and without it the text is cut to the first window."""
    import bertforge

    save_random_model(tmp_path / "enc", tokenizer, num_layers=2, max_position_embeddings=16)
    model = bertforge.load(tmp_path / "enc")
    rng = random.Random(1)
    words = [rng.choice(NAMES + PLACES + FILLER) for _ in range(40)]  # windows of [CLS] + 14 words + [SEP]
    texts = [" ".join(words), "alice walked"]
    whole = model.embed(texts, pooling=pooling, whole=True)  # (2, H)
    cut = model.embed(texts, pooling=pooling)
    alone = model.embed([" ".join(words[s : s + 14]) for s in (0, 10, 20, 30)], pooling=pooling)  # (4, H)
    assert whole.shape == cut.shape == (2, 32)
    assert np.allclose(whole[0], alone.mean(0), atol=1e-5)
    assert np.allclose(cut[0], alone[0], atol=1e-5) and not np.allclose(whole[0], cut[0], atol=1e-3)
    assert np.allclose(whole[1], cut[1], atol=1e-6)
    found = model.search([texts[0]], texts, top_k=1, whole=True)[0][0]
    assert found["index"] == 0 and found["score"] == pytest.approx(1.0, abs=1e-5)
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    flags = (
        "--input",
        tmp_path / "texts.txt",
        "--out",
        tmp_path / "v.npy",
        "--pooling",
        pooling,
        "--precision",
        "fp32",
    )
    bertforge_ok("embed", tmp_path / "enc", *flags, "--whole")
    assert np.allclose(np.load(tmp_path / "v.npy"), whole, atol=1e-6)
    if pooling == "cls":  # once: search reads with the model's own pooling, not this case's
        searched = bertforge_ok("search", tmp_path / "enc", texts[0], "--corpus", tmp_path / "texts.txt", "--whole",
                                "--top-k", "2", "--precision", "fp32", "--json")  # fmt: skip
        hits = json.loads(searched.stdout)[0]["results"]
        expected = model.search([texts[0]], texts, top_k=2, whole=True)[0]
        assert [h["index"] for h in hits] == [e["index"] for e in expected] == [0, 1]
        assert [h["score"] for h in hits] == pytest.approx([e["score"] for e in expected], abs=1e-5)
