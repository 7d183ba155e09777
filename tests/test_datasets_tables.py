"""Tables as `datasets` publishes them: a tagged sentence per row (words and tags as two lists), and labels stored
as numbers whose names the file's metadata keeps (or the user gives). Each layout must read as its plain twin."""

from __future__ import annotations

import json

import pytest

from bertforge.errors import UserError
from bertforge.formats.rows import class_label_names
from bertforge.model.heads import REGRESSION
from bertforge.studies.score import parse_task
from bertforge.tasks.classification import ClassificationTask, Columns, read_examples
from bertforge.tasks.config import FinetuneConfig
from bertforge.tasks.finetune import finetune
from bertforge.tasks.tagging import Sentence, TagColumns, read_sentences
from bertforge.tokenizer import train_tokenizer

from conftest import bertforge, bertforge_ok, needs, one_line_error, save_random_model

TAGS = ["O", "B-person", "I-person", "B-place"]  # the ClassLabel's names, in their order
SENTENCES = [
    (["alice", "smith", "walked", "to", "paris"], [1, 2, 0, 0, 3]),
    (["bob", "saw", "a", "dog"], [1, 0, 0, 0]),
    (["the", "market", "in", "rome"], [0, 0, 0, 3]),
    (["carol", "jones", "and", "dave", "left", "oslo"], [1, 2, 0, 1, 0, 3]),
] * 3
NAMED = [Sentence(words, [TAGS[t] for t in tags]) for words, tags in SENTENCES]


def datasets_metadata(**features) -> dict[bytes, bytes]:
    """The schema metadata `datasets` writes into its Parquet and Arrow files."""
    return {b"huggingface": json.dumps({"info": {"features": features}}).encode()}


def tag_table(words_column: str = "tokens", tags_column: str = "ner_tags", list_type: str = "Sequence"):
    """The sentences as a table with integer tags, and a `-DOCSTART-` row as CoNLL-2003's Hub copy has."""
    pa = needs("pyarrow")
    rows = [(["-DOCSTART-"], [0]), *SENTENCES]
    table = pa.table({words_column: [w for w, _ in rows], tags_column: [t for _, t in rows]})
    tags_feature = {"feature": {"names": TAGS, "_type": "ClassLabel"}, "_type": list_type}
    words_feature = {"feature": {"dtype": "string", "_type": "Value"}, "_type": list_type}
    return table.replace_schema_metadata(datasets_metadata(**{words_column: words_feature, tags_column: tags_feature}))


def write_arrow_stream(table, path) -> None:
    """As `datasets.save_to_disk` writes a shard: the Arrow IPC stream format."""
    pa = needs("pyarrow")
    with pa.ipc.new_stream(str(path), table.schema) as writer:
        writer.write_table(table)


def write_conll(path, sentences: list[Sentence]) -> None:
    path.write_text("\n\n".join("\n".join(f"{w}\t{t}" for w, t in zip(s.words, s.tags)) for s in sentences) + "\n")


def write_jsonl(path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_every_tagging_layout_reads_as_the_conll_file(tmp_path):
    pq = needs("pyarrow.parquet")
    write_conll(tmp_path / "train.conll", NAMED)
    pq.write_table(tag_table(), tmp_path / "hub.parquet")
    write_arrow_stream(tag_table(list_type="List"), tmp_path / "data-00000-of-00001.arrow")  # datasets 4's "List"
    write_jsonl(tmp_path / "strings.jsonl", [{"tokens": s.words, "ner_tags": s.tags} for s in NAMED])
    write_jsonl(tmp_path / "numbers.jsonl", [{"words": w, "tags": t} for w, t in SENTENCES])
    expected = read_sentences(tmp_path / "train.conll")
    assert expected == NAMED
    assert read_sentences(tmp_path / "hub.parquet") == expected
    assert read_sentences(tmp_path / "data-00000-of-00001.arrow") == expected
    assert read_sentences(tmp_path / "strings.jsonl") == expected
    assert read_sentences(tmp_path / "numbers.jsonl", TagColumns("words", "tags", tuple(TAGS))) == expected


def test_class_label_names_come_from_the_datasets_metadata_or_nowhere(tmp_path):
    pa = needs("pyarrow")
    pq = needs("pyarrow.parquet")
    table = pa.table({"sentence": ["a fine film", "dull"], "label": [1, 0], "idx": [0, 1]})
    pq.write_table(table, tmp_path / "plain.parquet")
    label_feature = {"names": ["negative", "positive"], "_type": "ClassLabel"}
    pq.write_table(table.replace_schema_metadata(datasets_metadata(label=label_feature)), tmp_path / "sst2.parquet")
    assert class_label_names(tmp_path / "sst2.parquet", "label") == ("negative", "positive")
    assert class_label_names(tmp_path / "sst2.parquet", "1") == ("negative", "positive")  # the column by index
    assert class_label_names(tmp_path / "sst2.parquet", "idx") == ()
    assert class_label_names(tmp_path / "plain.parquet", "label") == ()
    (tmp_path / "sst2.tsv").write_text("sentence\tlabel\na fine film\t1\ndull\t0\n")
    assert class_label_names(tmp_path / "sst2.tsv", "label") == ()


def test_numbered_labels_are_named_in_every_table_format(tmp_path):
    """SST-2 from the Hub (ClassLabel), the same as a TSV of 0 and 1 with --label-names, and GoEmotions'
    lists of label ids: each reads as the labels' names."""
    pa = needs("pyarrow")
    pq = needs("pyarrow.parquet")
    label_feature = {"names": ["negative", "positive"], "_type": "ClassLabel"}
    table = pa.table({"sentence": ["a fine film", "dull"], "label": [1, 0]})
    pq.write_table(table.replace_schema_metadata(datasets_metadata(label=label_feature)), tmp_path / "sst2.parquet")
    (tmp_path / "sst2.tsv").write_text("sentence\tlabel\na fine film\t1\ndull\t0\n")
    hub = read_examples(tmp_path / "sst2.parquet", Columns("sentence", "label"))
    named = read_examples(tmp_path / "sst2.tsv", Columns("sentence", "label", label_names=("negative", "positive")))
    assert [e.label for e in hub] == [e.label for e in named] == ["positive", "negative"]
    assert [e.label for e in read_examples(tmp_path / "sst2.tsv", Columns("sentence", "label"))] == ["1", "0"]

    emotions = {"feature": {"names": ["admiration", "amusement", "anger"], "_type": "ClassLabel"}, "_type": "Sequence"}
    table = pa.table({"text": ["calm.", "wow, thanks!"], "labels": [[], [2, 0]]})
    pq.write_table(table.replace_schema_metadata(datasets_metadata(labels=emotions)), tmp_path / "go.parquet")
    examples = read_examples(tmp_path / "go.parquet", Columns("text", "labels"), multi_label=True)
    assert [e.label for e in examples] == [(), ("anger", "admiration")]


def test_a_parquet_tagging_table_fine_tunes_exactly_as_its_conll_file(tmp_path):
    """The same sentences from CoNLL (the API), Parquet with the Hub's metadata (the API) and JSONL of numbers
    named by --label-names (the CLI) train step for step alike, and save the tags' names."""
    pq = needs("pyarrow.parquet")
    tokenizer = train_tokenizer([" ".join(w) for w, _ in SENTENCES], kind="word", vocab_size=60, min_frequency=1)
    encoder = save_random_model(tmp_path / "encoder", tokenizer)
    write_conll(tmp_path / "train.conll", NAMED)
    pq.write_table(tag_table(), tmp_path / "train.parquet")
    write_jsonl(tmp_path / "train.jsonl", [{"words": w, "tags": t} for w, t in SENTENCES])
    cfg = FinetuneConfig(epochs=3, batch_size=4, device="cpu", precision="fp32")
    for name in ("train.conll", "train.parquet"):
        finetune(
            encoder, "token-classification", tmp_path / name, tmp_path / name, tmp_path / name[6:], cfg, None, False
        )
    jsonl = tmp_path / "train.jsonl"
    bertforge_ok(
        *("finetune", encoder, "--task", "token-classification", "--train", jsonl, "--dev", jsonl),
        *("--text-column", "words", "--label-column", "tags", "--label-names", ",".join(TAGS)),
        *("--epochs", "3", "--batch-size", "4", "--device", "cpu", "--precision", "fp32", "--out", tmp_path / "jsonl"),
        "--quiet",
    )
    records = {
        name: (tmp_path / name / "metrics.jsonl").read_text().splitlines() for name in ("conll", "parquet", "jsonl")
    }
    losses = {
        name: [(json.loads(r)["train_loss"], json.loads(r)["dev_f1"]) for r in rs] for name, rs in records.items()
    }
    assert len(losses["conll"]) == 3 and losses["parquet"] == losses["conll"] == losses["jsonl"]
    saved = json.loads((tmp_path / "parquet" / "model" / "config.json").read_text())
    assert sorted(saved["id2label"].values()) == sorted(TAGS)


@pytest.mark.parametrize(
    "rows, columns, message",
    [
        (
            [{"tokens": ["a", "b"], "ner_tags": [0, 1]}],
            TagColumns(),
            ["t.jsonl:1", "tags are numbers", "--label-names"],
        ),
        ([{"tokens": ["a", "b"], "ner_tags": ["O"]}], TagColumns(), ["t.jsonl:1", "2 words but 1 tags"]),
        ([{"tokens": "a b", "ner_tags": ["O", "O"]}], TagColumns(), ["t.jsonl:1", "must each hold a list"]),
        ([{"tokens": ["a"], "ner_tags": [5]}], TagColumns(names=("O", "B-x")), ["t.jsonl:1", "5", "0 to 1"]),
        ([{"tokens": ["a"], "ner_tags": ["O"]}], TagColumns(names=("O", "B-x")), ["t.jsonl:1", "'O' is not a number"]),
        ([{"words": ["a"], "ner_tags": ["O"]}], TagColumns(), ["t.jsonl:1", "'tokens'"]),
        ([{"tokens": ["-DOCSTART-"], "ner_tags": ["O"]}], TagColumns(), ["t.jsonl", "no sentences"]),
    ],
)
def test_a_bad_tagging_table_names_its_row(tmp_path, rows, columns, message):
    write_jsonl(tmp_path / "t.jsonl", rows)
    with pytest.raises(UserError) as error:
        read_sentences(tmp_path / "t.jsonl", columns)
    assert all(fragment in str(error.value) for fragment in message), str(error.value)


def test_label_names_where_they_mean_nothing_exit_2(tmp_path):
    (tmp_path / "t.tsv").write_text("text\tscore\tc0\tc1\nfine\t0.5\ta\tb\n")
    model = tmp_path / "no-model"  # refused before any model is read
    common = ("finetune", model, "--train", tmp_path / "t.tsv", "--out", tmp_path / "out", "--label-names", "a,b")
    one_line_error(bertforge(*common, "--task", "question-answering"), "--label-names", "question-answering")
    one_line_error(bertforge(*common, "--text-column", "text", "--label-columns", "c0,c1", "--task", "multi-label"))
    assert not (tmp_path / "out").exists()
    tokenizer = train_tokenizer(["fine"], kind="word", vocab_size=20, min_frequency=1)
    with pytest.raises(UserError, match="regression learns numbers"):
        ClassificationTask(
            tokenizer, tmp_path / "t.tsv", None, 16, Columns("text", "score", label_names=("a",)), REGRESSION
        )


def test_score_finds_datasets_splits_and_own_tagging_columns(tmp_path):
    pq = needs("pyarrow.parquet")
    for split in ("train", "validation", "test"):
        pq.write_table(tag_table(), tmp_path / f"{split}-00000-of-00001.parquet")
    task = parse_task(f"ner={tmp_path}")
    assert (task.train.name, task.dev.name) == ("train-00000-of-00001.parquet", "validation-00000-of-00001.parquet")
    shard = tmp_path / "train-00000-of-00001.parquet"
    own = parse_task(f"pos={shard},{shard}:task=token-classification,text=words,label=pos,names=NOUN+VERB")
    assert own.columns == TagColumns("words", "pos", ("NOUN", "VERB"))
