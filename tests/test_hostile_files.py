"""Files from strangers: every reader is bounded in memory, disk and time, a file cut short is never read as if
whole, and each crafted file below is refused in one line (exit 2) or read correctly. Each file is made here,
small on disk."""

from __future__ import annotations

import base64
import bz2
import csv
import gzip
import io
import json
import lzma
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
from tokenizers import normalizers

from bertforge.errors import UserError
from bertforge.formats.corpus import read_paragraphs
from bertforge.formats.options import CorpusOptions
from bertforge.formats.rows import read_rows
from bertforge.tokenizer import load_tokenizer

from conftest import bertforge, needs, one_line_error, save_random_model

ODS_MIME = "application/vnd.oasis.opendocument.spreadsheet"
ODS_BODY = (
    '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:spreadsheet>'
    '<table:table table:name="s">{rows}</table:table></office:spreadsheet></office:body></office:document-content>'
)
ODT_BODY = (
    '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:text>'
    "{paragraphs}</office:text></office:body></office:document-content>"
)


def package(path: Path, parts: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in parts.items():
            z.writestr(name, text)
    return path


def ods(path: Path, rows: str) -> Path:
    return package(path, {"mimetype": ODS_MIME, "content.xml": ODS_BODY.format(rows=rows)})


def text_cell(text: str, repeat: str = "") -> str:
    repeated = f' table:number-columns-repeated="{repeat}"' if repeat else ""
    return f'<table:table-cell office:value-type="string"{repeated}><text:p>{text}</text:p></table:table-cell>'


def cells_of(path: Path, column: str = "0") -> list[str]:
    return [row[column] for _, row in read_rows(path, [column])]


# ---------------------------------------------------------------- crashes and silent truncation


def test_an_arrow_shard_with_an_offset_out_of_bounds_is_refused_not_a_crash(tmp_path):
    pa = needs("pyarrow")
    table = pa.table({"text": ["hello world", "second row", "third"] * 100})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data = bytearray(sink.getvalue().to_pybytes())
    at = data.find(struct.pack("<iii", 0, 11, 21))  # the string offsets
    data[at + 4 : at + 8] = struct.pack("<i", 50_000_000)
    (tmp_path / "data-00000-of-00001.arrow").write_bytes(bytes(data))
    tok = save_random_model(tmp_path / "m", _tokenizer())
    done = bertforge("prepare", tmp_path / "data-00000-of-00001.arrow", "--tokenizer", tok, "--out", tmp_path / "d")
    one_line_error(done, "data-00000-of-00001.arrow", "out of bounds")  # was SIGSEGV
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz", ".zst"])
def test_a_compressed_file_cut_short_is_refused_where_it_ends(tmp_path, suffix):
    """A download cut short must not train quietly on part of the data (a .zst read 17,539 of 50,000 lines)."""
    compress = {
        ".gz": gzip.compress,
        ".bz2": bz2.compress,
        ".xz": lzma.compress,
        ".zst": lambda data: needs("zstandard").ZstdCompressor().compress(data),
    }[suffix]
    text = "".join(f"line {i} of the corpus.\n" for i in range(50_000))
    whole = compress(text.encode())
    (tmp_path / f"whole.txt{suffix}").write_bytes(whole)
    (tmp_path / f"half.txt{suffix}").write_bytes(whole[: len(whole) // 2])
    assert len(list(read_paragraphs([tmp_path / f"whole.txt{suffix}"]))) == 50_000
    cut_short = "ended before the end-of-stream marker" if suffix != ".zst" else "cut short"  # Python's words, ours
    with pytest.raises(UserError, match=rf"half\.txt\{suffix}: cannot read .*{cut_short}"):
        list(read_paragraphs([tmp_path / f"half.txt{suffix}"]))


# ---------------------------------------------------------------- archives: disk, memory, time


@pytest.mark.parametrize("member", ["bomb.txt", "bomb.docx"])  # streamed, and copied out to be read from a path
def test_an_archive_bomb_is_refused_before_it_fills_memory_or_disk(tmp_path, member):
    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open(member, "w") as out:  # 256 MB of spaces: about 250 kB deflated, a ratio of 1,000
            block = b" " * (1 << 20)
            for _ in range(256):
                out.write(block)
    started = time.perf_counter()
    with pytest.raises(UserError, match=rf"{member}: expands more than 200 times its compressed size"):
        list(read_paragraphs([archive]))
    assert time.perf_counter() - started < 10
    generous = CorpusOptions(max_expansion=1e6, max_member_size=1 << 20)
    if member.endswith(".docx"):  # past a raised ratio, the copy's own cap
        with pytest.raises(UserError, match="larger than the 1,048,576 bytes an archive member may be copied out"):
            list(read_paragraphs([archive], generous))


def test_a_tar_of_many_members_is_read_in_bounded_memory(tmp_path, monkeypatch):
    """tarfile keeps every member it has seen, even reading a stream: 480 bytes each, a gigabyte for millions. The
    reader lets each go once it has passed: tarfile never holds more than the member at hand."""
    headers = []
    for i in range(12_000):
        info = tarfile.TarInfo(f"d/{i}.txt")
        info.size = 0
        headers.append(info.tobuf(tarfile.USTAR_FORMAT))
    (tmp_path / "many.tar.gz").write_bytes(gzip.compress(b"".join(headers) + bytes(1024), 1))
    held = []
    next_member = tarfile.TarFile.next

    def counting_next(archive):
        member = next_member(archive)
        held.append(len(archive.members))
        return member

    monkeypatch.setattr(tarfile.TarFile, "next", counting_next)
    with pytest.raises(UserError, match="no text found"):
        list(read_paragraphs([tmp_path / "many.tar.gz"]))
    assert len(held) > 12_000 and max(held) <= 1  # 12,000 held at the end when tarfile kept them all


def test_nested_archives_long_names_and_depth(tmp_path):
    inner = tmp_path / "inner.zip"
    package(inner, {"a.txt": "Inside, two levels down.\n"})
    long_name = "長" * 90 + ".zip"  # 270 bytes: longer than a file name may be, so never used as the copy's
    outer = tmp_path / "outer.zip"
    with zipfile.ZipFile(outer, "w") as z:
        z.write(inner, long_name)
    assert [p.text for p in read_paragraphs([outer])] == ["Inside, two levels down."]
    deep = inner
    for level in range(10):
        wrapper = tmp_path / f"level{level}.zip"
        with zipfile.ZipFile(wrapper, "w") as z:
            z.write(deep, f"level{level}.zip" if level else "inner.zip")
        deep = wrapper
    with pytest.raises(UserError, match="archives nested more than 8 deep"):
        list(read_paragraphs([deep]))


def test_an_interrupted_tokenizer_training_leaves_no_scratch(tmp_path):
    """A member copied out while SIGTERM arrives: the scratch directory goes with the process."""
    inner = tmp_path / "big.zip"
    with zipfile.ZipFile(inner, "w", zipfile.ZIP_STORED) as z:  # stored: copying it out takes a moment
        z.writestr("a.txt", "words and more words\n" * 1_000_000)
    outer = tmp_path / "corpus.zip"
    with zipfile.ZipFile(outer, "w", zipfile.ZIP_STORED) as z:
        for i in range(3):
            z.write(inner, f"part{i}.zip")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    command = [sys.executable, "-m", "bertforge", "tokenizer", "train", str(outer), "--out", str(tmp_path / "tok")]
    env = {**os.environ, "TMPDIR": str(scratch)}
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 60
    while not any(scratch.iterdir()) and process.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stderr
    assert not any(scratch.iterdir()) and not (tmp_path / "tok").exists()


# ---------------------------------------------------------------- office files


def test_spreadsheet_repeats_are_clamped_to_a_sheets_size(tmp_path):
    huge_columns = ods(tmp_path / "columns.ods", f"<table:table-row>{text_cell('x', '2000000000')}</table:table-row>")
    started = time.perf_counter()
    row = next(read_rows(huge_columns, ["16383"]))[1]  # the last column a sheet has, and none past it
    assert row["16383"] == "x" and "16384" not in row
    endless_row = f'<table:table-row table:number-rows-repeated="1000000000000">{text_cell("y")}</table:table-row>'
    endless = ods(tmp_path / "rows.ods", endless_row)
    assert len(cells_of(endless)) == 1_048_576  # a sheet's rows, not 10^12 of them
    paragraph = '<text:p>a<text:s text:c="3000000000"/>b</text:p>'  # three billion spaces
    spaces = package(tmp_path / "spaces.odt", {"content.xml": ODT_BODY.format(paragraphs=paragraph)})
    assert [p.text for p in read_paragraphs([spaces])] == ["a b"]
    assert time.perf_counter() - started < 30
    for count in ("many", "-1"):
        bad = ods(tmp_path / "bad.ods", f"<table:table-row>{text_cell('x', count)}</table:table-row>")
        with pytest.raises(UserError, match=f"number-columns-repeated='{count}' is not a count"):
            cells_of(bad)


def test_an_xlsx_cell_past_the_last_column_is_refused(tmp_path):
    workbook = (
        '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.'
        'openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="s" r:id="rId1"/></sheets>'
        "</workbook>"
    )
    rels = (
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" '
        'Target="worksheets/sheet1.xml" Type="worksheet"/></Relationships>'
    )
    for reference in ("ZZZZZZZ2", "ZZZZZZZZZZZZZZZ2"):  # 8·10^9 cells; and a number too large for a list
        sheet = (
            '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="2">'
            f'<c r="{reference}" t="inlineStr"><is><t>x</t></is></c></row></sheetData></worksheet>'
        )
        book = package(tmp_path / "book.xlsx", {"xl/workbook.xml": workbook, "xl/_rels/workbook.xml.rels": rels,
                                                "xl/worksheets/sheet1.xml": sheet})  # fmt: skip
        with pytest.raises(UserError, match=f"cell '{reference}' is beyond a sheet's last column"):
            cells_of(book)


def test_spans_nested_thousands_deep_are_read_not_a_recursion_error(tmp_path):
    nested = "<text:span>" * 5000 + "deep text" + "</text:span>" * 5000
    odt = package(tmp_path / "deep.odt", {"content.xml": ODT_BODY.format(paragraphs=f"<text:p>{nested}</text:p>")})
    assert [p.text for p in read_paragraphs([odt])] == ["deep text"]


# ---------------------------------------------------------------- records and paragraphs


def test_every_reader_caps_a_paragraph_and_records_have_a_limit(tmp_path, monkeypatch):
    words = " ".join(f"word{i % 50}" for i in range(60_000))  # ~420,000 characters in one field
    (tmp_path / "long.jsonl").write_text(json.dumps({"text": words}) + "\n")
    pieces = [p.text for p in read_paragraphs([tmp_path / "long.jsonl"])]
    assert max(map(len, pieces)) <= 1 << 16 and " ".join(pieces) == words  # cut at spaces, nothing lost
    monkeypatch.setattr("bertforge.formats.rows.MAX_RECORD_CHARS", 100_000)  # the limit, small enough to test
    with pytest.raises(UserError, match=r"long\.jsonl:1: a line of more than 100,000 characters"):
        list(read_paragraphs([tmp_path / "long.jsonl"]))
    (tmp_path / "long.csv").write_text(f'id,text\n1,"{words}"\n')
    with pytest.raises(UserError, match=r"long\.csv:2: field larger than field limit"):
        list(read_paragraphs([tmp_path / "long.csv"]))
    (tmp_path / "long.json").write_text(json.dumps([{"text": words}]))
    with pytest.raises(UserError, match=r"long\.json:1: an element of more than 100,000 characters"):
        list(read_paragraphs([tmp_path / "long.json"]))


def test_a_word_of_300000_characters_does_not_stall_tokenizer_training(tmp_path):
    from bertforge.data.vocabulary import train_corpus_tokenizer

    blob = "a" * 300_000  # an unclosed HTML comment, a base64 blob: 55 s in the WordPiece trainer
    (tmp_path / "c.txt").write_text(f"the cat sat on the mat.\n{blob}\nthe dog sat on the log.\n" * 3)
    started = time.perf_counter()
    made = train_corpus_tokenizer([tmp_path / "c.txt"], tmp_path / "tok", vocab_size=60, min_frequency=1)
    assert time.perf_counter() - started < 10
    assert made.filter_report.summary()["dropped"]["long_words"]["paragraphs"] >= 3  # each a piece of a line, or more


# ---------------------------------------------------------------- model directories


def test_absurd_or_mistyped_model_configs_are_refused_before_anything_is_allocated(tmp_path):
    model = save_random_model(tmp_path / "m", _tokenizer())
    config = json.loads((model / "config.json").read_text())
    for key, value, fragment in [
        ("vocab_size", 2_000_000_000, "vocab_size 2,000,000,000 is past any BERT's"),
        ("vocab_size", 99, "the token table is"),
        ("hidden_size", "big", "hidden_size is 'big', not a positive whole number"),
    ]:
        bad = tmp_path / f"{key}-{value}"
        shutil.copytree(model, bad)
        (bad / "config.json").write_text(json.dumps({**config, key: value}))
        one_line_error(bertforge("fill-mask", bad, "the [MASK] sat."), fragment)


def _tokenizer():
    from bertforge.tokenizer import train_tokenizer

    return train_tokenizer(["the cat sat on the mat.", "a dog and a bird."] * 10, vocab_size=60, min_frequency=1)


def test_a_full_scratch_disk_is_said_as_such(tmp_path, monkeypatch):
    from bertforge.formats import archives

    inner = package(tmp_path / "inner.zip", {"a.txt": "Some text.\n"})
    outer = tmp_path / "outer.zip"
    with zipfile.ZipFile(outer, "w") as z:
        z.write(inner, "inner.zip")
    real_open = Path.open

    def full(self, mode="r", *args, **kwargs):
        if "w" in mode and "bertforge-archive-" in str(self):
            handle = io.BytesIO()
            handle.write = lambda data: (_ for _ in ()).throw(OSError(28, "No space left on device"))
            return handle
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", full)
    with pytest.raises(UserError, match="inner.zip: no room to unpack it"):
        list(read_paragraphs([outer]))
    assert archives._SCRATCH == set()


# ---------------------------------------------------------------- the ceilings, measured from outside

BOUNDED_READER = """
import json, sys
from bertforge.errors import UserError
from bertforge.formats.corpus import read_paragraphs
from bertforge.formats.rows import read_rows
for path in sys.argv[1:]:
    try:  # a sheet's rows by their first column; any other file's paragraphs
        items = read_rows(path, ["0"]) if path.endswith(".ods") else read_paragraphs([path])
        print(json.dumps([path, sum(1 for _ in items)]))
    except UserError as e:
        print(json.dumps([path, str(e)]))
"""


def test_the_crafted_files_are_read_or_refused_under_a_gigabyte_of_memory_and_half_of_scratch(tmp_path):
    """The readers in a process that the kernel stops at 1 GB of address space, 512 MB per file written and 60 s of
    CPU: a bomb streamed and one copied out, spreadsheets asking for 16 GB and endless rows, three billion spaces,
    spans nested 5,000 deep. Each is read, or refused in one line; none is killed, and no scratch is left."""
    bombs = [tmp_path / "streamed.zip", tmp_path / "copied.zip"]
    with zipfile.ZipFile(bombs[0], "w", zipfile.ZIP_DEFLATED) as z, z.open("bb.txt", "w") as out:
        for _ in range(512):  # 512 MB of spaces, about 0.5 MB deflated
            out.write(b" " * (1 << 20))
    bombs[1].write_bytes(bombs[0].read_bytes().replace(b"bb.txt", b"b.docx"))  # the same bytes, a document's name
    row = f"<table:table-row>{text_cell('x', '2000000000')}</table:table-row>"
    endless = f'<table:table-row table:number-rows-repeated="1000000000000">{text_cell("y")}</table:table-row>'
    spaces = '<text:p>a<text:s text:c="3000000000"/>b</text:p>'
    nested = "<text:p>" + "<text:span>" * 5000 + "deep" + "</text:span>" * 5000 + "</text:p>"
    crafted = [
        *bombs,
        ods(tmp_path / "columns.ods", row),
        ods(tmp_path / "rows.ods", endless),
        package(tmp_path / "spaces.odt", {"content.xml": ODT_BODY.format(paragraphs=spaces)}),
        package(tmp_path / "nested.odt", {"content.xml": ODT_BODY.format(paragraphs=nested)}),
    ]
    (tmp_path / "scratch").mkdir()

    def ceilings():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        resource.setrlimit(resource.RLIMIT_FSIZE, (512 << 20, 512 << 20))
        resource.setrlimit(resource.RLIMIT_CPU, (60, 60))

    env = {**os.environ, "TMPDIR": str(tmp_path / "scratch"), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", BOUNDED_READER, *map(str, crafted)], capture_output=True, text=True,
                          env=env, preexec_fn=ceilings, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    outcomes = {Path(path).name: outcome for path, outcome in map(json.loads, done.stdout.splitlines())}
    for bomb in ("streamed.zip", "copied.zip"):
        refusal = outcomes.pop(bomb)
        assert "expands more than 200 times its compressed size" in refusal and "\n" not in refusal
    assert outcomes == {"columns.ods": 1, "rows.ods": 1_048_576, "spaces.odt": 1, "nested.odt": 1}
    assert not any((tmp_path / "scratch").iterdir())


@pytest.mark.parametrize("where", ["line", "cell"])
def test_an_inference_input_with_a_huge_text_is_refused_before_it_is_tokenised(tmp_path, wordpiece_tokenizer, where):
    """`embed --input` on a file with one line (or one table cell) of 2M characters: one line naming it, at once
    (a 20 MB line cost gigabytes when tokenised whole for a vector of its first tokens)."""
    model = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    huge = "the cat " * (1 << 18)
    path = tmp_path / ("in.txt" if where == "line" else "in.tsv")
    path.write_text(f"a short text\n{huge}\n" if where == "line" else f"text\nshort\n{huge}\n", encoding="utf-8")
    done = bertforge("embed", model, "--input", path, "--out", tmp_path / "v.npy")
    one_line_error(done, str(path), "more than 1,048,576")
    assert not (tmp_path / "v.npy").exists()


def test_answers_written_for_a_spreadsheet_never_hold_a_formula(tmp_path):
    """`classify`, `tag`, ... `--out p.csv`: a text starting with =, +, - or @ would run as a formula where the file
    is opened; it is written behind an apostrophe, shown as the text it is. Numbers stay numbers."""
    from bertforge.fileio import write_answers

    texts = ['=HYPERLINK("http://x")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "plain"]
    rows = [{"text": text, "score": -0.5} for text in texts]
    for suffix in (".csv", ".tsv"):
        write_answers(tmp_path / f"p{suffix}", [], rows, ["text", "score"])
        lines = (tmp_path / f"p{suffix}").read_text(encoding="utf-8").splitlines()[1:]
        cells = [next(csv.reader([line], delimiter="," if suffix == ".csv" else "\t")) for line in lines]
        assert [c[0] for c in cells] == ["'" + t for t in texts[:4]] + ["plain"]
        assert {c[1] for c in cells} == {"-0.5"}


@pytest.mark.parametrize(
    "text",
    ["a" + "\u0301\u0323" * 200_000, "!" * 200_000 + " Then more.", "Hi! " * 50_000],
    ids=["combining-marks", "exclamation-marks", "sentences"],
)
def test_text_transforms_take_time_linear_in_their_input(text):
    """Cleaning (NFC) and sentence splitting a 400,000-character paragraph built to be slow: well under 10 s
    (Python's NFC over 50,000 alternating combining marks took 26 s and grows with the square; the boundary
    pattern over 65,000 '!' took 38 s)."""
    from bertforge.formats.text import clean_text, split_sentences

    started = time.perf_counter()
    split_sentences(clean_text(text))
    assert time.perf_counter() - started < 10


def test_entity_spans_map_to_words_in_time_linear_in_the_text():
    """60,000 words, each an entity: mapped in well under 10 s (each word searched every entity: 83 s), and right."""
    from bertforge.tasks.tagging import spans_to_words

    text = " ".join(["Paris"] * 60_000)
    spans = [[6 * i, 6 * i + 5, "LOC"] for i in range(60_000)]
    started = time.perf_counter()
    sentence = spans_to_words(text, spans, "x")
    assert time.perf_counter() - started < 10
    assert sentence.tags == ["B-LOC"] * 60_000


@pytest.mark.parametrize(
    "change",
    [{"num_hidden_layers": 200}, {"intermediate_size": 1 << 17}, {"bertforge": {"pad_vocab_multiple": 1 << 40}}],
    ids=["200 layers", "wide feed-forward", "padding 2^40"],
)
def test_a_config_asking_for_more_than_its_weights_is_refused_before_it_is_built(tmp_path, wordpiece_tokenizer, change):
    """config.json beside the weights of a one-layer model, asking for 200 layers, a feed-forward 131,072 wide or a
    table padded to a multiple of 2^40: one line, without building what it asks for (that took gigabytes)."""
    model = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    config = json.loads((model / "config.json").read_text())
    if "bertforge" in change:
        config["bertforge"].update(change["bertforge"])
    else:
        config.update(change)
    (model / "config.json").write_text(json.dumps(config))
    started = time.perf_counter()
    done = bertforge("fill-mask", model, "the [MASK] sat.")
    one_line_error(done, str(model))
    assert time.perf_counter() - started < 10


@pytest.mark.parametrize(
    "change",
    [
        {"num_attention_heads": 0},
        {"intermediate_size": -5},
        {"pad_token_id": 5000},
        {"layer_norm_eps": -1.0},
        {"layer_norm_eps": float("nan")},
        [1, 2],
        "nan weight",
    ],
    ids=["0 heads", "negative size", "pad past vocab", "negative eps", "nan eps", "a list", "nan weight"],
)
def test_a_malformed_model_directory_is_one_line_not_a_traceback_or_nan(tmp_path, wordpiece_tokenizer, change):
    """Every config value checked, alone and together, and every weight a number: a model that answered nan with
    exit 0, or stopped in a ZeroDivisionError, is refused in one line naming its directory."""
    from safetensors.torch import load_file, save_file

    model = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    config = json.loads((model / "config.json").read_text())
    if change == "nan weight":
        weights = load_file(model / "model.safetensors")
        weights["bert.encoder.layer.0.output.dense.weight"][0, 0] = float("nan")
        save_file(weights, model / "model.safetensors")
    else:
        (model / "config.json").write_text(json.dumps(change if isinstance(change, list) else {**config, **change}))
    one_line_error(bertforge("fill-mask", model, "the [MASK] sat."), str(model))


def test_a_vocab_txt_token_holding_a_line_separator_keeps_every_id(tmp_path, wordpiece_tokenizer):
    """vocab.txt is read a line per token as transformers reads it (Python's text mode ends lines at \\n, \\r\\n
    and \\r only): a token holding U+2028 split in two and shifted every id after it."""
    vocab = sorted(wordpiece_tokenizer.get_vocab().items(), key=lambda item: item[1])
    tokens = [t for t, _ in vocab[:10]] + ["odd\u2028token"] + [t for t, _ in vocab[10:]]
    (tmp_path / "vocab.txt").write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    tokenizer = load_tokenizer(tmp_path)
    assert [tokenizer.token_to_id(t) for t in tokens] == list(range(len(tokens)))


def test_tokenizer_files_that_are_not_text_or_json_are_one_line(tmp_path, wordpiece_tokenizer):
    bad_vocab = tmp_path / "vocab"
    bad_vocab.mkdir()
    (bad_vocab / "vocab.txt").write_bytes(b"[PAD]\n[UNK]\n\xff\xfe\n")
    with pytest.raises(UserError, match="vocab.txt: not UTF-8 text"):
        load_tokenizer(bad_vocab)
    bad_config = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    (bad_config / "tokenizer_config.json").write_text("{not json")
    one_line_error(bertforge("fill-mask", bad_config, "the [MASK] sat."), "tokenizer_config.json: not valid JSON")


def test_a_null_text_or_a_column_named_twice_is_one_line(tmp_path):
    """JSONL's {"text": null} was read as the text "None", and a header `sentence label label` used its last
    `label` silently: both name their file and what is wrong."""
    nulls = tmp_path / "texts.jsonl"
    nulls.write_text('{"text": "fine"}\n{"text": null}\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"texts.jsonl:2: field 'text' is null"):
        list(read_rows(nulls, ["text"]))
    twice = tmp_path / "train.tsv"
    twice.write_text("sentence\tlabel\tlabel\na film\t1\t0\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"train.tsv: the header names column 'label' 2 times"):
        list(read_rows(twice, ["sentence", "label"]))


@pytest.mark.parametrize(
    "answer, problem",
    [
        ({"text": "cat", "answer_start": -20}, "does not point at its answer"),
        ({"text": "", "answer_start": 0}, "empty"),
    ],
    ids=["negative start", "empty answer"],
)
def test_a_squad_answer_that_points_nowhere_is_one_line(tmp_path, answer, problem):
    """answer_start -20 passed the check by slicing from the end; an empty answer stopped in a StopIteration after
    the first epoch had trained."""
    from bertforge.tasks.qa import read_squad

    qa = {"id": "q1", "question": "Who sat?", "answers": [answer]}
    document = {"data": [{"paragraphs": [{"context": "the cat sat on the mat.", "qas": [qa]}]}]}
    path = tmp_path / "train.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(UserError, match=problem):
        read_squad(path, training=True)


def test_a_dev_question_longer_than_a_window_is_one_line_before_training(tmp_path, wordpiece_tokenizer):
    """A dev question that fills the window (each window keeps the question whole): one line naming it, before any
    step, where it was a tokenizers traceback after the first epoch had trained."""
    model = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    for name, question in (("train", "Who sat?"), ("dev", "who sat " * 40)):
        qa = {"id": "q1", "question": question, "answers": [{"text": "cat", "answer_start": 4}]}
        document = {"data": [{"paragraphs": [{"context": "the cat sat on the mat.", "qas": [qa]}]}]}
        (tmp_path / f"{name}.json").write_text(json.dumps(document), encoding="utf-8")
    done = bertforge(
        "finetune", model, "--task", "question-answering", "--train", tmp_path / "train.json", "--dev",
        tmp_path / "dev.json", "--out", tmp_path / "qa", "--seq-len", "32", "--epochs", "1",
    )  # fmt: skip
    one_line_error(done, "who sat who sat", "leaves no room for its context in a window of 32 tokens")
    assert "epoch" not in done.stdout + done.stderr


def test_latin_1_bytes_in_a_labelled_file_or_an_input_are_read_with_a_warning(tmp_path):
    """A TSV, a CoNLL file or a file of lines in Latin-1 is read on, its invalid bytes as U+FFFD, with the warning
    prepare gives for a corpus (it was silent)."""
    from bertforge.formats.corpus import read_lines
    from bertforge.tasks.tagging import read_conll

    table, lines, conll = tmp_path / "t.tsv", tmp_path / "lines.txt", tmp_path / "train.conll"
    table.write_bytes(b"text\tlabel\ncaf\xe9\t1\n")
    lines.write_bytes(b"caf\xe9 au lait\n")
    conll.write_bytes(b"caf\xe9\tB-product\n\n")
    with pytest.warns(UserWarning, match=r"t.tsv: 1 invalid UTF-8 sequences replaced by U\+FFFD"):
        assert [row for _, row in read_rows(table, ["text", "label"])] == [{"text": "caf\ufffd", "label": "1"}]
    with pytest.warns(UserWarning, match=r"lines.txt: 1 invalid UTF-8"):
        assert read_lines(lines) == ["caf\ufffd au lait"]
    with pytest.warns(UserWarning, match=r"train.conll: 1 invalid UTF-8"):
        read_conll(conll)


def precompiled_charsmap(key: str, output: str) -> str:
    """A SentencePiece charsmap, as a tokenizer.json's Precompiled normalizer holds it (base64), that writes
    `output` for `key`: a double-array trie of one key, then the outputs, NUL-terminated. A unit is its byte (the
    label), a leaf flag (bit 8) and the offset (bits 10 up) from its position to where the next byte's unit is
    found by XOR; each byte's unit stands in a block of 256 of its own, the leaf (value 0: where `output` starts)
    in the last."""
    units = [0] * 256 * 8  # the root, at 0, has offset 0: the first byte's unit is at the byte's own position
    data = key.encode()
    positions = [data[0]] + [256 * i for i in range(1, len(data))]
    leaf = 256 * len(data)
    for i, byte in enumerate(data):
        after = positions[i + 1] ^ data[i + 1] if i + 1 < len(data) else leaf
        units[positions[i]] = byte | (i + 1 == len(data)) << 8 | (positions[i] ^ after) << 10
    units[leaf] = 1 << 31
    trie = struct.pack(f"<{len(units)}I", *units)
    return base64.b64encode(struct.pack("<I", len(trie)) + trie + output.encode() + b"\0").decode()


def test_the_hand_made_charsmap_is_one_tokenizers_reads():
    """What the refusal below is tested with is a charsmap `tokenizers` applies, not one it would reject itself."""
    normalizer = normalizers.Precompiled(base64.b64decode(precompiled_charsmap("e", "xy")))
    assert normalizer.normalize_str("tree") == "trxyxy"
    wide = normalizers.Precompiled(base64.b64decode(precompiled_charsmap("\ufdfa", "pbuh")))  # three UTF-8 bytes
    assert wide.normalize_str("a \ufdfa\ufdfa") == "a pbuhpbuh"


@pytest.mark.parametrize(
    "rule",
    [
        {"type": "Split", "pattern": {"Regex": "((a+)+)+b"}, "behavior": "Isolated", "invert": False},
        {"type": "Replace", "pattern": {"String": "e"}, "content": "e" * 500},
        {"type": "Precompiled", "precompiled_charsmap": precompiled_charsmap("e", "e" * 500)},
    ],
    ids=["exponential regex", "expanding replace", "expanding precompiled"],
)
def test_a_tokenizer_whose_rules_cost_without_bound_is_refused_in_one_line(tmp_path, wordpiece_tokenizer, rule):
    """A tokenizer.json pre-tokenizer regex that backtracks exponentially (Oniguruma gives up and the Rust side
    panics, 93 lines, on a 30-letter word) or a normalizer, a rule or a SentencePiece table, that writes 500 letters
    for one (750,000 tokens from a 2 KB text): refused when the model directory is read, in one line."""
    model = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    spec = json.loads((model / "tokenizer.json").read_text())
    key = "pre_tokenizer" if rule["type"] == "Split" else "normalizer"
    spec[key] = {"type": "Sequence", key + "s" if key == "normalizer" else "pretokenizers": [rule]}
    (model / "tokenizer.json").write_text(json.dumps(spec))
    one_line_error(bertforge("fill-mask", model, "a" * 30 + " the [MASK] " + "e" * 2000), "tokenizer.json")


def test_a_precompiled_normalizer_as_long_as_nfkc_s_is_read(tmp_path, wordpiece_tokenizer):
    """SentencePiece's NFKC table writes up to 18 characters for one (U+FDFA): such a tokenizer loads."""
    model = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    spec = json.loads((model / "tokenizer.json").read_text())
    spec["normalizer"] = {"type": "Precompiled", "precompiled_charsmap": precompiled_charsmap("\ufdfa", "x" * 18)}
    (model / "tokenizer.json").write_text(json.dumps(spec))
    assert load_tokenizer(model).normalizer.normalize_str("a\ufdfa") == "a" + "x" * 18


@pytest.mark.parametrize("verb", ["classify", "tag"])
def test_id2label_keys_that_are_not_ids_are_one_line(tmp_path, wordpiece_tokenizer, verb):
    """config.json's id2label keyed by names, not the ids 0..n-1: a KeyError traceback before, one line now."""
    model = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "id2label": {"a": "x", "b": "y"}}))
    one_line_error(bertforge(verb, model, "the cat sat."), "id2label's keys are not the ids 0 to 1")


@pytest.mark.parametrize("layout", ["lines", "array"])
def test_a_lone_surrogate_in_json_is_one_line_naming_its_record(tmp_path, wordpiece_tokenizer, layout):
    """`"\\ud800"` is valid JSON but no character: the tokenizer raised a TypeError traceback on it."""
    model = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    records = ['{"text": "the cat"}', '{"text": "\\ud800 sat"}']
    source = tmp_path / ("in.jsonl" if layout == "lines" else "in.json")
    source.write_text("\n".join(records) if layout == "lines" else "[" + ",\n".join(records) + "]", encoding="utf-8")
    done = bertforge("embed", model, "--input", source, "--text-column", "text", "--out", tmp_path / "v.npy")
    one_line_error(done, f"{source.name}:2: holds a lone surrogate (\\ud800)")
    assert not (tmp_path / "v.npy").exists()
