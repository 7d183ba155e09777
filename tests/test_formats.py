"""Corpora as people have them (Parquet, `datasets` directories, zstd) give the tokens of the same text as .txt,
and the junk filters drop exactly what they should, deterministically, and say so."""

from __future__ import annotations

import gzip
import json
import string
import zipfile

import numpy as np
import pytest

from bertforge.data.directory import open_split
from bertforge.data.prepare import prepare
from bertforge.errors import UserError
from bertforge.formats import catalog
from bertforge.formats.corpus import read_paragraphs
from bertforge.formats.filters import ParagraphFilter, compression_verdict
from bertforge.formats.layouts import Paragraph
from bertforge.formats.options import CorpusOptions
from bertforge.formats.rows import read_rows
from bertforge.tokenizer import save_tokenizer, train_tokenizer

from conftest import SUBJECTS, VERBS, bertforge, bertforge_ok, needs, one_line_error


@pytest.fixture
def tokenizer_dir(tmp_path, wordpiece_tokenizer):
    save_tokenizer(wordpiece_tokenizer, tmp_path / "tok")
    return tmp_path / "tok"


def token_ids(data_dir) -> dict[str, list]:
    """Every split's tokens and document boundaries: what prepare made of a corpus."""
    out = {}
    for split in ("train", "valid"):
        store = open_split(data_dir, split)
        out[split] = [np.asarray(store.tokens).tolist(), np.asarray(store.document_offsets).tolist()]
    return out


def prepared(sources, tokenizer_dir, out, **options) -> dict:
    prepare(sources, tokenizer_dir, out, valid_fraction=0.2, options=CorpusOptions(**options), progress=False)
    return token_ids(out)


def write_datasets_dir(directory, table, shards: int = 2) -> None:
    """What `datasets.Dataset.save_to_disk` writes for a pyarrow `table`: Arrow IPC stream shards and two JSON
    metadata files."""
    pa = needs("pyarrow")
    directory.mkdir()
    rows = table.num_rows
    names = []
    for i in range(shards):
        name = f"data-{i:05d}-of-{shards:05d}.arrow"
        part = table.slice(i * rows // shards, (i + 1) * rows // shards - i * rows // shards)
        with pa.OSFile(str(directory / name), "wb") as f, pa.ipc.new_stream(f, table.schema) as writer:
            writer.write_table(part)
        names.append({"filename": name})
    (directory / "state.json").write_text(json.dumps({"_data_files": names, "_split": "train"}))
    (directory / "dataset_info.json").write_text(json.dumps({"features": {"text": {"dtype": "string"}}}))


def test_parquet_arrow_and_zstd_give_the_tokens_of_the_same_text(documents, tokenizer_dir, tmp_path):
    pa = needs("pyarrow")
    pq = needs("pyarrow.parquet")
    zstandard = needs("zstandard")
    texts = [" ".join(doc) for doc in documents]  # one row = one document
    (tmp_path / "plain.txt").write_text("\n\n".join(texts) + "\n", encoding="utf-8")
    expected = prepared([tmp_path / "plain.txt"], tokenizer_dir, tmp_path / "d_txt")
    table = pa.table({"id": list(range(len(texts))), "text": texts})

    pq.write_table(table, tmp_path / "one.parquet", row_group_size=7)  # several record batches
    shards = tmp_path / "shards"
    shards.mkdir()
    half = len(texts) // 2
    pq.write_table(table.slice(0, half), shards / "part-0.parquet")
    pq.write_table(table.slice(half), shards / "part-1.parquet")
    write_datasets_dir(tmp_path / "saved", table)
    with zstandard.open(tmp_path / "rows.jsonl.zst", "wt", encoding="utf-8") as f:
        f.writelines(json.dumps({"text": t}) + "\n" for t in texts)
    with zstandard.open(tmp_path / "plain.txt.zst", "wt", encoding="utf-8") as f:
        f.write((tmp_path / "plain.txt").read_text())

    for name in ("one.parquet", "shards", "saved", "rows.jsonl.zst", "plain.txt.zst"):
        assert prepared([tmp_path / name], tokenizer_dir, tmp_path / f"d_{name}") == expected, name
    # A column by index, as for a headerless table.
    assert prepared([tmp_path / "one.parquet"], tokenizer_dir, tmp_path / "d_index", text_column="1") == expected


def prepare_refuses(tokenizer_dir, source, out, *fragments) -> None:
    """`prepare` stops with one line holding `fragments`, exit 2, and leaves no data directory behind."""
    one_line_error(bertforge("prepare", source, "--tokenizer", tokenizer_dir, "--out", out), *fragments)
    assert not (out / "meta.json").exists()


def test_a_missing_column_and_a_broken_parquet_file_exit_2_naming_the_file(tokenizer_dir, tmp_path):
    pa = needs("pyarrow")
    pq = needs("pyarrow.parquet")
    pq.write_table(pa.table({"body": ["some text here."]}), tmp_path / "a.parquet")
    prepare_refuses(tokenizer_dir, tmp_path / "a.parquet", tmp_path / "d", "a.parquet", "no column 'text'", "'body'")
    (tmp_path / "b.parquet").write_bytes(b"PAR1 this is not parquet")
    prepare_refuses(tokenizer_dir, tmp_path / "b.parquet", tmp_path / "d2", "b.parquet", "cannot read as parquet")


def test_without_the_formats_extra_the_error_says_what_to_install(tmp_path, monkeypatch):
    zstandard = needs("zstandard")
    import sys

    (tmp_path / "a.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(b'{"text": "x"}\n'))
    monkeypatch.setitem(sys.modules, "zstandard", None)  # as if it were not installed
    with pytest.raises(UserError, match=r"a\.jsonl\.zst: .*needs zstandard: pip install 'bertforge\[formats\]'"):
        list(read_paragraphs([tmp_path / "a.jsonl.zst"]))


def test_dedupe_drops_every_planted_duplicate_and_keeps_near_duplicates(tmp_path):
    base = [f"paragraph number {i} is about something else entirely." for i in range(50)]
    near = [p.replace("else", "Else") for p in base[:10]]  # one character different
    lines = base + near + base[::3] + ["  paragraph   number 1 is about something else entirely. "]  # spacing only
    (tmp_path / "c.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    paragraph_filter = ParagraphFilter(dedupe=True)
    kept = [p.text for p in read_paragraphs([tmp_path / "c.txt"], paragraph_filter=paragraph_filter)]
    assert kept == base + near
    summary = paragraph_filter.report.summary()
    assert summary["dropped"]["dedupe"]["paragraphs"] == len(base[::3]) + 1
    assert summary["paragraphs_kept"] == len(base) + len(near)


def test_filters_in_prepare_are_counted_reported_and_independent_of_workers(tokenizer_dir, tmp_path):
    prose = "the cat sat on the mat and the dog watched the window"
    junk = "| 3.1 | 4.15 | 9.26 | 5.35 | 8.97 | 9.32 | 3.84 | 6.26 | 4.33 | 8.32 | 7.95 | 0.28 | 8.41 |"
    boilerplate = "the teacher walked to the red house."
    docs = []
    for i in range(30):
        unique = f"{SUBJECTS[i % 8]} {VERBS[i // 8]}"
        docs.append([f"{prose} and {unique} it.", boilerplate, junk, "short", f"{unique} the mat, {prose}."])
    (tmp_path / "c.txt").write_text("\n\n".join("\n".join(d) for d in docs) + "\n", encoding="utf-8")
    flags = ["--dedupe", "--min-chars", "10", "--min-chars-per-token", "2.0", "--valid-fraction", "0.2", "--quiet"]
    for workers in (1, 2):
        bertforge_ok(
            "prepare", tmp_path / "c.txt", "--tokenizer", tokenizer_dir, "--out", tmp_path / f"d{workers}",
            "--workers", workers, "--filter-report", tmp_path / f"report{workers}.json", *flags,
        )  # fmt: skip
    for name in ("train", "valid"):
        for part in ("tokens.bin", "sentence_offsets.bin", "document_offsets.bin"):
            assert (tmp_path / "d1" / name / part).read_bytes() == (tmp_path / "d2" / name / part).read_bytes()
    meta = json.loads((tmp_path / "d1" / "meta.json").read_text())
    dropped = meta["filters"]["dropped"]
    assert dropped["dedupe"]["paragraphs"] == 2 * 29  # the boilerplate line and the table, after their first time
    assert dropped["min_chars"]["paragraphs"] == 30  # "short"
    assert dropped["min_chars_per_token"]["paragraphs"] == 1  # the table row (dedupe got its repeats first)
    assert meta["filters"]["paragraphs_kept"] == 30 * 2 + 1  # two prose lines per document, one boilerplate line
    assert meta["splits"]["train"]["documents"] + meta["splits"]["valid"]["documents"] == 30
    report = json.loads((tmp_path / "report1.json").read_text())
    assert report == json.loads((tmp_path / "report2.json").read_text())
    assert report["dropped"]["min_chars_per_token"]["examples"] == [junk]
    assert report["dropped"]["min_chars"]["examples"] == ["short"] * 20
    stats = bertforge_ok("data", "stats", tmp_path / "d1").stdout
    assert "filters kept 61 of 150 paragraphs" in stats and "dedupe 58" in stats


def test_compression_verdict_bounds():
    assert compression_verdict(100, 25, 2.5, 0) is None  # 4 characters per token: prose
    assert compression_verdict(100, 50, 2.5, 0) == "min_chars_per_token"
    assert compression_verdict(100, 5, 0, 10) == "max_chars_per_token"
    assert compression_verdict(100, 50, 0, 0) is None  # both bounds off


def test_tokenizer_training_sees_the_filtered_text_and_reports_it(tmp_path):
    lines = [f"line {i} of the story." for i in range(20)] + ["Subscribe to our newsletter!"] * 200
    (tmp_path / "c.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = bertforge_ok(
        "tokenizer", "train", tmp_path / "c.txt", "--out", tmp_path / "tok", "--vocab-size", "200",
        "--min-frequency", "1", "--dedupe", "--filter-report", tmp_path / "report.json",
    )  # fmt: skip
    assert "dedupe 199" in done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["dropped"]["dedupe"]["examples"] == ["Subscribe to our newsletter!"] * 20
    assert report["paragraphs_kept"] == 21


def test_explicit_pairs_are_kept_or_dropped_whole(tokenizer_dir, tmp_path):
    rows = ["q one?\tyes.", "q two?\tyes.", "q one?\tyes.", "q three?\tno."]  # B repeats; one whole pair repeats
    (tmp_path / "p.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    options = CorpusOptions(text_column="0", pair_column="1", dedupe=True)
    paragraphs = [(p.text, p.new_document) for p in read_paragraphs([tmp_path / "p.tsv"], options)]
    assert paragraphs == [
        ("q one?", True), ("yes.", False), ("q two?", True), ("yes.", False), ("q three?", True), ("no.", False),
    ]  # fmt: skip
    one_line_error(
        bertforge(
            "prepare",
            tmp_path / "p.tsv",
            "--text-column",
            "0",
            "--pair-column",
            "1",
            "--min-chars-per-token",
            "2",
            "--tokenizer",
            tokenizer_dir,
            "--out",
            tmp_path / "d",
        ),  # fmt: skip
        "--pair-column",
    )


def test_the_compression_filter_drops_planted_junk_and_keeps_english_and_vietnamese_prose(tmp_path):
    english = [
        "The old man walked slowly down the road towards the village, where his daughter was waiting for him.",
        "She opened the window and looked out at the garden, which was full of flowers in the early summer.",
        "They talked for a long time about the harvest, the weather and the price of bread in the town.",
    ]
    vietnamese = [
        "Ông lão chậm rãi đi trên con đường về làng, nơi con gái ông đang đợi ông trở về nhà.",
        "Cô ấy mở cửa sổ và nhìn ra khu vườn, nơi có rất nhiều hoa nở vào đầu mùa hè năm ấy.",
        "Họ nói chuyện rất lâu về mùa gặt, về thời tiết và về giá bánh mì ở trong thị trấn.",
    ]
    junk = [
        "aGVsbG8gd29ybGQhIFRoaXMgaXMgYmFzZTY0IGVuY29kZWQgZGF0YSBRMkZ5WkdsbVpnPT0gWm1sc1pTMHhNak0wTlRZPQ==",
        "12 0.345 67.8 9 1011 12.13 1415 16.17 18 1920 21.22 23 2425 26.27 28 2930 31.32 33 3435 36.37",
    ]
    # Trained on prose of both languages, with every letter and digit seen (as in any real corpus), not on the junk.
    alphabet = string.ascii_letters + string.digits + "+/="
    texts = (english + vietnamese) * 20 + [" ".join(alphabet), alphabet, alphabet[::-1]]
    tokenizer = train_tokenizer(texts, vocab_size=400, min_frequency=1, lowercase=False)
    save_tokenizer(tokenizer, tmp_path / "tok")
    paragraphs = english + junk + vietnamese
    (tmp_path / "c.txt").write_text("\n".join(paragraphs) + "\n", encoding="utf-8")
    with pytest.warns(UserWarning, match="no held-out"):  # one document, nothing held out: fine here
        prepare(
            [tmp_path / "c.txt"], tmp_path / "tok", tmp_path / "d", valid_fraction=0.0,
            options=CorpusOptions(min_chars_per_token=2.0, split_sentences=False), progress=False,
            filter_report=tmp_path / "report.json",
        )  # fmt: skip
    report = json.loads((tmp_path / "report.json").read_text())
    assert sorted(report["dropped"]["min_chars_per_token"]["examples"]) == sorted(junk)
    assert report["paragraphs_kept"] == len(english) + len(vietnamese)


def test_a_zst_file_that_is_not_zstd_exits_2_and_writes_nothing(tokenizer_dir, tmp_path):
    (tmp_path / "c.jsonl.zst").write_text('{"text": "plain text pretending to be compressed"}\n')
    prepare_refuses(tokenizer_dir, tmp_path / "c.jsonl.zst", tmp_path / "d", "c.jsonl.zst", "cannot read")


def test_without_the_extra_every_other_format_still_reads(tmp_path, monkeypatch):
    import gzip
    import sys

    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "zstandard", None)
    (tmp_path / "a.txt").write_text("one.\n\ntwo.\n", encoding="utf-8")
    with gzip.open(tmp_path / "b.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write('{"text": "three."}\n')
    (tmp_path / "c.tsv").write_text("text\nfour.\n", encoding="utf-8")
    assert [p.text for p in read_paragraphs([tmp_path])] == ["one.", "two.", "three.", "four."]


def play_paragraphs(f, stats):
    """A toy format, as docs/architecture.md's walkthrough adds one: a play script, an act per document (a line
    "ACT ..."), a paragraph per speech ("NAME: words"), stage directions in brackets left out."""
    new_act = False
    for line in f:
        stats.bytes_read += len(line)
        line = line.strip()
        if line.startswith("ACT"):
            new_act = True
        elif ":" in line and not line.startswith("["):
            yield Paragraph(line.split(":", 1)[1].strip(), new_act)
            new_act = False


def test_a_format_added_by_its_row_is_read_everywhere_a_corpus_is(tmp_path, monkeypatch):
    """The "add a format" walkthrough: one row registered, and a directory, a compressed file and an archive's
    member of that format are read, the help and the docs table list it, and row readers refuse it by name."""
    monkeypatch.setattr(catalog, "FORMATS", catalog.FORMATS.copy())  # the row is forgotten after the test
    play = catalog.Format(
        "play", (".play",), catalog.LAYOUT, "a play script", "an act per document, a speech per paragraph",
        text=True, read=play_paragraphs,
    )  # fmt: skip
    catalog.register_format(play)
    script = (
        "ACT I\nHAMLET: To be, or not to be.\n[Exit]\nACT II\nOPHELIA: Good my lord.\nHAMLET: I humbly thank you.\n"
    )
    corpus = tmp_path / "plays"
    corpus.mkdir()
    (corpus / "hamlet.play").write_text(script, encoding="utf-8")
    with gzip.open(corpus / "more.play.gz", "wt", encoding="utf-8") as f:
        f.write("ACT III\nPOLONIUS: Though this be madness, yet there is method in it.\n")
    with zipfile.ZipFile(tmp_path / "packed.zip", "w") as z:
        z.writestr("inside/hamlet.play", script)
    read = [(p.text, p.new_document) for p in read_paragraphs([corpus, tmp_path / "packed.zip"])]
    hamlet = [("To be, or not to be.", True), ("Good my lord.", True), ("I humbly thank you.", False)]
    assert read == hamlet + [("Though this be madness, yet there is method in it.", True)] + hamlet
    assert ".play" in catalog.suffix_help() and "| `.play` | an act per document" in catalog.reference()
    with pytest.raises(UserError, match="a play script holds no rows"):
        list(read_rows(corpus / "hamlet.play", ["text"]))
    with pytest.raises(UserError, match=".play already names the play format"):
        catalog.register_format(catalog.Format("drama", (".play",), catalog.LINES, "a drama", "lines"))
