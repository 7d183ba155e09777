"""Labelled examples for classification in the forms data sets come in: tables, a directory of classes
(MR, SUBJ, IMDB), label-first lines (fastText, TREC), and a dev share held out when there is no dev file."""

from __future__ import annotations

from collections import Counter

import pytest

from bertforge.errors import UserError
from bertforge.studies.score import parse_task
from bertforge.tasks.classification import Columns, Example, class_names, hold_out, read_examples


def test_a_directory_with_a_file_per_class_reads_a_line_per_example(tmp_path):
    (tmp_path / "rt-polarity.pos").write_text("a charming film .\n\nwarm and funny .\n", encoding="utf-8")
    (tmp_path / "rt-polarity.neg").write_text("a dull mess .\n", encoding="utf-8")
    (tmp_path / "README.txt").write_text("not a class\n", encoding="utf-8")
    (tmp_path / ".hidden").write_text("not a class either\n", encoding="utf-8")
    assert read_examples(tmp_path, Columns()) == [
        Example("a dull mess .", None, "neg"),
        Example("a charming film .", None, "pos"),
        Example("warm and funny .", None, "pos"),
    ]


def test_a_directory_with_a_folder_per_class_reads_a_file_per_example(tmp_path):
    for label, texts in {"pos": ["Loved it.\nTruly.", "Great  fun."], "neg": ["Awful."]}.items():
        (tmp_path / label).mkdir()
        for i, text in enumerate(texts):
            (tmp_path / label / f"{i}.txt").write_text(text, encoding="utf-8")
    assert read_examples(tmp_path, Columns()) == [
        Example("Awful.", None, "neg"),
        Example("Loved it. Truly.", None, "pos"),  # whitespace and line breaks collapse to single spaces
        Example("Great fun.", None, "pos"),
    ]


def test_a_folder_of_classes_reads_files_below_it_leaves_out_empty_ones_and_refuses_an_empty_class(tmp_path):
    """Files in folders below a class's folder are its examples too; an empty file is left out with a warning
    naming it; a class folder without one text in it is an error, not a class that silently has no examples."""
    (tmp_path / "pos" / "2024").mkdir(parents=True)
    (tmp_path / "pos" / "2024" / "a.txt").write_text("Loved it.", encoding="utf-8")
    (tmp_path / "pos" / "empty.txt").write_text(" \n", encoding="utf-8")
    (tmp_path / "pos" / ".cache").mkdir()
    (tmp_path / "pos" / ".cache" / "x.txt").write_text("hidden", encoding="utf-8")
    (tmp_path / "neg").mkdir()
    (tmp_path / "neg" / "b.html").write_text("<html><body><p>Awful.</p><p>Truly.</p></body></html>", encoding="utf-8")
    with pytest.warns(UserWarning, match="1 file.* without text left out: empty.txt"):
        examples = read_examples(tmp_path, Columns())
    assert examples == [Example("Awful. Truly.", None, "neg"), Example("Loved it.", None, "pos")]  # a page's text
    (tmp_path / "pos" / "2024" / "a.txt").write_text("", encoding="utf-8")
    with pytest.warns(UserWarning), pytest.raises(UserError, match="pos: no file with text in it"):
        read_examples(tmp_path, Columns())


@pytest.mark.parametrize(
    "names, labels",
    [
        (["rt-polarity.neg", "rt-polarity.pos"], ["neg", "pos"]),
        (["plot.tok.gt9.5000", "quote.tok.gt9.5000"], ["plot", "quote"]),
        (["negative.txt", "pos.txt"], ["negative", "pos"]),
        (["a.txt", "a.b.txt"], ["a.txt", "a.b.txt"]),  # stripping would leave an empty label: the whole names
        (["x_1.csv", "x_2.csv", "x_10.csv"], ["1", "2", "10"]),
    ],
)
def test_class_names_drop_what_all_file_names_share(names, labels):
    assert class_names(names) == labels


def test_label_first_lines_fasttext_and_trec(tmp_path):
    (tmp_path / "ft.txt").write_text("__label__pos great film\n\n__label__neg  dull , slow \n", encoding="utf-8")
    assert read_examples(tmp_path / "ft.txt", Columns()) == [
        Example("great film", None, "pos"),
        Example("dull , slow", None, "neg"),
    ]
    (tmp_path / "trec.txt").write_text("NUM:dist How far is it ?\nHUM:ind Who was Galileo ?\n", encoding="utf-8")
    assert [e.label for e in read_examples(tmp_path / "trec.txt", Columns())] == ["NUM:dist", "HUM:ind"]
    coarse = read_examples(tmp_path / "trec.txt", Columns(label_until=":"))
    assert [(e.label, e.text) for e in coarse] == [("NUM", "How far is it ?"), ("HUM", "Who was Galileo ?")]


@pytest.mark.parametrize(
    "files, columns, message",
    [
        ({"t.txt": "pos fine\nneg\n"}, Columns(), "t.txt:2: a line holds a label"),
        ({"t.txt": "__label__a __label__b text\n"}, Columns(), "t.txt:1: several labels"),
        ({"d/only.pos": "one\n"}, Columns(), "at least two"),
        ({"d/a.pos": "one\n", "d/b/x.txt": "two"}, Columns(), "one file per class, or one folder per class"),
        ({"d/a.pos": "one\n", "d/a.neg": "two\n"}, Columns("text", "label"), "has no columns"),
        ({"t.txt": "\n\n"}, Columns(), "no examples"),
        ({"t.jsonl": '{"text": "fine", "label": "pos"}\n'}, Columns(), "t.jsonl is a table: name its text and label"),
        # SST-2's layout: read as label-first lines, each sentence's first word became its label
        ({"train.tsv": "sentence\tlabel\nfine\t1\n"}, Columns(), "train.tsv is a table: name its text and label"),
        ({"t.csv": "text,label\nfine,pos\n"}, Columns(), "t.csv is a table: name its text and label"),
    ],
)
def test_bad_labelled_input_names_the_fault(tmp_path, files, columns, message):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    target = tmp_path / ("d" if any(name.startswith("d/") for name in files) else next(iter(files)))
    with pytest.raises(UserError, match=message):
        read_examples(target, columns)


def test_columns_are_named_both_or_neither():
    for half in (dict(text="s"), dict(label="l"), dict(pair="p")):
        with pytest.raises(UserError, match="name both the text and the label column"):
            Columns(**half)


def test_hold_out_takes_each_label_s_share_the_same_way_every_time():
    examples = [Example(f"text {i}", None, label) for i, label in enumerate(["a"] * 100 + ["b"] * 30 + ["c"])]
    train, dev = hold_out(examples, 0.1, by_label=True)
    assert hold_out(examples, 0.1, by_label=True) == (train, dev)  # a fixed draw: every seed and arm sees one dev
    assert sorted(train + dev, key=lambda e: int(e.text.split()[1])) == examples  # a partition, nothing repeated
    assert Counter(e.label for e in dev) == {"a": 10, "b": 3}  # per label; the single "c" stays in train
    assert {e.label for e in train} == {"a", "b", "c"}
    numbers = [Example(f"text {i}", None, str(i / 7)) for i in range(50)]  # regression: every label unique
    train, dev = hold_out(numbers, 0.2, by_label=False)
    assert len(dev) == 10 and len(train) == 40
    with pytest.raises(UserError, match="no dev examples"):
        hold_out(examples[:3], 0.1, by_label=True)


def test_score_knows_mr_subj_and_trec_with_dev_held_out(tmp_path):
    (tmp_path / "mr").mkdir()
    (tmp_path / "trec").mkdir()
    (tmp_path / "trec" / "train.txt").write_text("NUM:dist How far ?\n", encoding="utf-8")
    mr = parse_task(f"mr={tmp_path / 'mr'}")
    assert (mr.kind, mr.train, mr.dev, mr.metric) == ("classification", tmp_path / "mr", None, "accuracy")
    trec = parse_task(f"trec={tmp_path / 'trec'}")
    assert (trec.train, trec.dev, trec.columns) == (tmp_path / "trec" / "train.txt", None, Columns(label_until=":"))
    with pytest.raises(UserError, match="no such file"):
        parse_task(f"subj={tmp_path / 'missing'}")
    (tmp_path / "swag").mkdir()
    for name in ("train.csv", "val.csv"):
        (tmp_path / "swag" / name).write_text("sent1\n", encoding="utf-8")
    swag = parse_task(f"swag={tmp_path / 'swag'}")
    assert (swag.kind, swag.dev, swag.columns.choices) == (
        "multiple-choice",
        tmp_path / "swag" / "val.csv",
        ["ending0", "ending1", "ending2", "ending3"],
    )


def test_score_tasks_of_your_own_may_leave_out_dev_and_columns(tmp_path):
    (tmp_path / "imdb").mkdir()
    (tmp_path / "t.tsv").write_text("s\tl\n", encoding="utf-8")
    imdb = parse_task(f"imdb={tmp_path / 'imdb'}")  # a directory of classes, dev held out
    assert (imdb.kind, imdb.train, imdb.dev, imdb.columns) == ("classification", tmp_path / "imdb", None, Columns())
    table = parse_task(f"mine={tmp_path / 't.tsv'}:text=s,label=l")
    assert (table.dev, table.columns) == (None, Columns("s", "l"))
    coarse = parse_task(f"q={tmp_path / 't.tsv'}:label_until=:")
    assert coarse.columns == Columns(label_until=":")
    with pytest.raises(UserError, match="name both the text and the label column"):
        parse_task(f"mine={tmp_path / 't.tsv'}:text=s")
    with pytest.raises(UserError, match="regression and sentence-similarity hold out dev"):
        parse_task(f"tags={tmp_path / 't.tsv'}:task=token-classification")
