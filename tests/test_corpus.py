"""Reading corpora: formats, encodings, cleaning and sentence splitting."""

from __future__ import annotations

import bz2
import codecs
import gzip
import itertools
import json
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bertforge.errors import UserError
from bertforge.fileio import asset_path
from bertforge.formats import rows as row_reader
from bertforge.formats.corpus import ReadStats, describe_files, find_files, read_paragraphs
from bertforge.formats.layouts import looks_wrapped
from bertforge.formats.options import CorpusOptions
from bertforge.formats.rows import read_rows
from bertforge.formats.text import clean_text, split_sentences
from bertforge.formats.textfiles import open_text

from conftest import documents_of


def test_txt_blank_lines_separate_documents(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("one.\ntwo.\n\n\nthree.\n", encoding="utf-8")
    assert documents_of(read_paragraphs([path])) == [["one.", "two."], ["three."]]


def test_a_document_boundary_survives_a_paragraph_that_cleaning_removes(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("one.\n\n<p></p>\ntwo.\n\n\x01\nthree.\n", encoding="utf-8")
    assert documents_of(read_paragraphs([path], CorpusOptions(clean="html"))) == [["one."], ["two."], ["three."]]


def test_jsonl_field_and_doc_field(tmp_path):
    path = tmp_path / "a.jsonl"
    rows = [{"text": "a1", "doc": 1}, {"text": "a2", "doc": 1}, {"text": "b1", "doc": 2}]
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    assert documents_of(read_paragraphs([path], CorpusOptions(doc_column="doc"))) == [["a1", "a2"], ["b1"]]
    assert documents_of(read_paragraphs([path])) == [["a1"], ["a2"], ["b1"]]


def test_jsonl_broken_lines_fail_with_the_line_number_or_are_skipped(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "fine"}\n{broken\n{"text": "also fine"}\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"a\.jsonl:2"):
        list(read_paragraphs([path]))
    stats = ReadStats()
    texts = [p.text for p in read_paragraphs([path], CorpusOptions(on_error="skip"), stats)]
    assert texts == ["fine", "also fine"] and stats.skipped_lines == 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12), max_size=6),
    indent=st.sampled_from([None, 0, 2]),
    piece=st.integers(1, 9),
)
def test_a_json_array_of_records_reads_as_its_rows_wherever_the_pieces_are_cut(
    texts, indent, piece, tmp_path, monkeypatch
):
    """A .json file holding one array of objects (not JSON lines) gives its objects, each numbered by the line it
    starts on, however the pieces it is read in cut it: in a number, a string, an escape, between elements."""
    monkeypatch.setattr(row_reader, "JSON_PIECE", piece)
    rows = [{"text": t, "n": 10**i + 0.5, "more": [i, None, {"x": True}]} for i, t in enumerate(texts)]
    path = tmp_path / "a.json"
    path.write_text("\n " + json.dumps(rows, indent=indent) + " \n", encoding="utf-8")
    read = list(read_rows(path, ["text", "n", "more"]))
    assert [row for _, row in read] == rows
    lines = path.read_text(encoding="utf-8").split("\n")
    assert all(lines[number - 1].lstrip(" [").startswith("{") for number, _ in read)


def test_a_json_array_that_is_broken_or_cut_short_names_its_line_and_one_that_is_not_objects_is_refused(tmp_path):
    path = tmp_path / "a.json"
    path.write_text('[\n  {"text": "fine"},\n  {"text": broken},\n  {"text": "never read"}\n]', encoding="utf-8")
    with pytest.raises(UserError, match=r"a\.json:3: not JSON \(Expecting value\); an array is not read past it"):
        list(read_rows(path, ["text"], on_error="skip"))
    path.write_text('[{"text": "fine"},\n{"text": "cut', encoding="utf-8")
    with pytest.raises(UserError, match=r"a\.json:2: not JSON"):
        list(read_rows(path, ["text"]))
    path.write_text('[{"text": "fine"},\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"a\.json:2: the JSON array is not closed with '\]'"):
        list(read_rows(path, ["text"]))
    path.write_text('[{"text": "fine"}, "a string", {"other": 1}, {"text": "also fine"}]', encoding="utf-8")
    with pytest.raises(UserError, match=r"a\.json:1: not a JSON object"):
        list(read_rows(path, ["text"]))
    stats = ReadStats()
    texts = [p.text for p in read_paragraphs([path], CorpusOptions(on_error="skip"), stats)]
    assert texts == ["fine", "also fine"] and stats.skipped_lines == 2
    path.write_text(" [ ] ", encoding="utf-8")
    assert list(read_rows(path, ["text"])) == []


def test_csv_and_tsv_columns_and_gzip(tmp_path):
    csv_path = tmp_path / "a.csv.gz"
    with gzip.open(csv_path, "wt", encoding="utf-8") as f:
        f.write('id,body\n1,"first, with a comma"\n2,second\n')
    assert [p.text for p in read_paragraphs([csv_path], CorpusOptions(text_column="body"))] == [
        "first, with a comma",
        "second",
    ]
    tsv_path = tmp_path / "b.tsv"
    tsv_path.write_text("\ufeffsentence\tlabel\nhello there\t1\n", encoding="utf-8")  # with a byte-order mark
    assert [p.text for p in read_paragraphs([tsv_path], CorpusOptions(text_column="sentence"))] == ["hello there"]
    with pytest.raises(UserError, match="no column 'text'"):
        list(read_paragraphs([tsv_path], CorpusOptions(text_column="text")))


@pytest.mark.parametrize(
    "name, content, hint",
    [
        ("excel.csv", "text;label\ngood;1\n", "split by ';', but a .csv is read split by commas: save it with commas"),
        ("tabs.csv", "text\tlabel\ngood\t1\n", "split by tabs, but a .csv is read split by commas: name it .tsv"),
        ("commas.tsv", "text,label\ngood,1\n", "split by commas, but a .tsv is read split by tabs: name it .csv"),
        ("other.csv", "body,label\ngood,1\n", None),  # split right, the column is missing: no hint
    ],
)
def test_a_table_split_by_another_character_says_so(tmp_path, name, content, hint):
    (tmp_path / name).write_text(content, encoding="utf-8")
    with pytest.raises(UserError, match="no column 'text'") as error:
        list(read_rows(tmp_path / name, ["text", "label"]))
    assert (hint in str(error.value)) if hint else "split by" not in str(error.value)


def test_wikiextractor_output_is_read_as_articles_without_its_markup(tmp_path):
    """The BERT repository's advice is WikiExtractor: text/AA/wiki_00, ... of <doc> blocks, each starting with the
    title; or, with --json, JSON lines. Documents are articles; the <doc> lines and titles are not text."""
    article = '<doc id="{0}" url="https://en.wikipedia.org/wiki?curid={0}" title="{1}">\n{1}\n\n{2}\n\n</doc>\n'
    (tmp_path / "text" / "AA").mkdir(parents=True)
    (tmp_path / "text" / "AA" / "wiki_00").write_text(
        article.format(12, "Anarchism", "Anarchism is a philosophy.\nHistory.\nIt is old.")
        + article.format(25, "Autism", "Autism is a condition."),
        encoding="utf-8",
    )
    with bz2.open(tmp_path / "text" / "AA" / "wiki_01.bz2", "wt", encoding="utf-8") as f:  # WikiExtractor --compress
        f.write(article.format(39, "Albedo", "Albedo is reflection."))
    (tmp_path / "text" / "AB").mkdir()
    json_lines = [{"id": "290", "url": "u", "title": "A", "text": "A is a letter.\nIt is the first."}]
    (tmp_path / "text" / "AB" / "wiki_00").write_text("".join(json.dumps(j) + "\n" for j in json_lines))
    (tmp_path / "text" / "README").write_text("not a corpus file\n")
    assert documents_of(read_paragraphs([tmp_path / "text"])) == [
        ["Anarchism is a philosophy.", "History.", "It is old."],
        ["Autism is a condition."],
        ["Albedo is reflection."],
        ["A is a letter.", "It is the first."],
    ]


# WikiText's raw layout: every line starts and ends with a space, and a blank line (" ") follows each
WIKITEXT = "".join(
    f" {line} \n \n"
    for line in [
        "= Valkyria Chronicles III =",
        "Senjō no Valkyria 3 is a tactical role @-@ playing game .",
        "It sold 102 @,@ 000 copies in 3 @.@ 5 weeks .",
        "= = Gameplay = =",
        "= = = Setting = = =",
        "The game is set in Gallia .",
        "= Tower Building =",
        "The tower stands in Little Rock .",
    ]
)


def test_wikitext_is_read_as_articles_without_headings_raw_or_as_rows(tmp_path):
    """WikiText, the corpus of the classic BERT-from-scratch chapters: a blank line between every paragraph, the
    ' = Title = ' lines are where articles start, and the @-@ of its tokenisation joins words again."""
    expected = [
        [
            "Senjō no Valkyria 3 is a tactical role-playing game .",
            "It sold 102,000 copies in 3.5 weeks .",
            "The game is set in Gallia .",
        ],
        ["The tower stands in Little Rock ."],
    ]
    (tmp_path / "wiki.train.raw").write_text(WIKITEXT, encoding="utf-8")
    assert documents_of(read_paragraphs([tmp_path / "wiki.train.raw"])) == expected
    rows = tmp_path / "wikitext.jsonl"  # `datasets`' wikitext: a row per line, blank lines as empty rows
    rows.write_text(
        "".join(json.dumps({"text": line + "\n" if line.strip() else ""}) + "\n" for line in WIKITEXT.split("\n"))
    )
    assert documents_of(read_paragraphs([rows])) == expected
    (tmp_path / "plain.txt").write_text("A line.\n= not a title =\n\nNext document.\n", encoding="utf-8")
    assert documents_of(read_paragraphs([tmp_path / "plain.txt"])) == [
        ["A line.", "= not a title ="],
        ["Next document."],
    ]


PROSE = [
    "It was a bright cold day in April, and the clocks were striking thirteen. Winston Smith, his chin nuzzled "
    f"into his breast in an effort to escape the vile wind, slipped quickly through the glass doors of Victory "
    f"Mansions, though not quickly enough to prevent a swirl of gritty dust from entering along with him, {n}."
    for n in range(12)
]


def test_hard_wrapped_prose_is_joined_into_paragraphs_and_a_file_is_one_document(tmp_path):
    """Raw Project Gutenberg books are cut at about 70 characters, a blank line between paragraphs and more between
    chapters: read a line at a time, every paragraph would be a document and every line end a sentence end."""
    wrapped = "\n\n".join(textwrap.fill(p, 60) for p in PROSE)
    chapter_two = "\n\n\n\nThe well-\nknown clock struck, a dash--\nthen silence.\n"  # blank lines part chapters
    (tmp_path / "book.txt").write_text(wrapped + chapter_two)
    ending = "The well-known clock struck, a dash-- then silence."  # a hyphenated word stays one; a dash does not
    assert documents_of(read_paragraphs([tmp_path / "book.txt"])) == [PROSE, [ending]]
    forced = read_paragraphs([tmp_path / "book.txt"], CorpusOptions(line_breaks="paragraphs"))
    assert len(documents_of(forced)) == len(PROSE) + 1  # every blank line a document, as the option says


def test_a_project_gutenberg_book_loses_its_header_and_licence(tmp_path):
    header = "The Project Gutenberg eBook of Nineteen, by Someone\n\nThis eBook is for the use of anyone anywhere.\n\n"
    licence = "\n\nSTART: FULL LICENSE\n\nTHE FULL PROJECT GUTENBERG LICENSE\n"
    book = "\n\n".join(textwrap.fill(p, 60) for p in PROSE)
    (tmp_path / "pg1.txt").write_text(
        header
        + "*** START OF THE PROJECT GUTENBERG EBOOK NINETEEN ***\n\n"
        + book
        + "\n\n*** END OF THE PROJECT GUTENBERG EBOOK NINETEEN ***"
        + licence,
        encoding="utf-8",
    )
    assert documents_of(read_paragraphs([tmp_path / "pg1.txt"])) == [PROSE]
    (tmp_path / "mention.txt").write_text(header + book + licence, encoding="utf-8")  # no START line: all of it
    assert "THE FULL PROJECT GUTENBERG LICENSE" in [p.text for p in read_paragraphs([tmp_path / "mention.txt"])]


def test_a_line_per_paragraph_or_sentence_is_not_taken_for_wrapped_text(tmp_path):
    """The bundled corpora (a sentence per line; a paragraph per line) and short wrapped samples stay as they are;
    --line-breaks wrapped joins what auto leaves alone."""
    for asset in ("toy_corpus.txt", "gutenberg_sample.txt.gz"):
        with open_text(asset_path(asset)) as f:
            assert not looks_wrapped([line.strip() for line in itertools.islice(f, 2000)]), asset
    (tmp_path / "short.txt").write_text("A line cut\nat a width.\n\nAnother\none.\n", encoding="utf-8")
    assert documents_of(read_paragraphs([tmp_path / "short.txt"])) == [
        ["A line cut", "at a width."],
        ["Another", "one."],
    ]
    joined = read_paragraphs([tmp_path / "short.txt"], CorpusOptions(line_breaks="wrapped"))
    assert documents_of(joined) == [["A line cut at a width.", "Another one."]]


PAGE = """<!DOCTYPE html>
<html><head><title>Site | Page</title><style>p { color: red; }</style></head>
<body><nav><a href="/">Home</a> <a href="/about">About</a></nav>
<h1>The &amp; Title</h1>
<p>A first paragraph, written
across two lines with <b>bold</b> and <a href="x">a link</a>.</p>
<script>
var text = "not prose";
</script>
<ul><li>One item</li><li>Another&nbsp;item</li></ul>
<div>Line one<br>Line two</div>
<footer>Copyright 2026</footer>
</body></html>
"""


def test_html_pages_are_read_as_documents_of_their_block_elements(tmp_path):
    """Saved web pages: a page is a document and a block element a paragraph; the head, scripts, styles and
    navigation are not text. A directory's .html files are read with its other text files."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "a.html").write_text(PAGE, encoding="utf-8")
    with gzip.open(tmp_path / "site" / "b.htm.gz", "wt", encoding="utf-8") as f:
        f.write("<p>Second page.</p>")
    expected = [
        "The & Title",
        "A first paragraph, written across two lines with bold and a link.",
        "One item",
        "Another item",
        "Line one",
        "Line two",
    ]
    assert documents_of(read_paragraphs([tmp_path / "site"])) == [expected, ["Second page."]]
    with pytest.raises(UserError, match="an HTML page holds no rows"):
        list(read_rows(tmp_path / "site" / "a.html", ["0"]))


def test_directories_are_read_recursively(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.txt").write_text("deep.\n", encoding="utf-8")
    (tmp_path / "y.txt").write_text("shallow.\n", encoding="utf-8")
    (tmp_path / "ignored.bin").write_bytes(b"\x00\x01")
    assert sorted(p.text for p in read_paragraphs([tmp_path])) == ["deep.", "shallow."]


def test_a_corpus_directory_skips_the_tokenizer_data_and_runs_written_into_it(tmp_path):
    """`tokenizer train corpus/ --out corpus/tok` is easy to type: its vocab.txt must not become training text."""
    (tmp_path / "book.txt").write_text("The text.\n", encoding="utf-8")
    for directory, files in {
        "tok": ["tokenizer.json", "vocab.txt"],
        "data": ["meta.json", "tokenizer.json"],
        "run": ["config.json", "metrics.jsonl"],
        "run/model": ["config.json", "tokenizer.json", "vocab.txt"],
    }.items():
        (tmp_path / directory).mkdir(parents=True, exist_ok=True)
        for name in files:
            (tmp_path / directory / name).write_text("[PAD]\n##ing\n", encoding="utf-8")
    with pytest.warns(UserWarning, match="skipped, a tokenizer, data, model or run directory") as caught:
        assert [p.text for p in read_paragraphs([tmp_path])] == ["The text."]
    assert sorted(str(w.message).split(":")[0] for w in caught) == [str(tmp_path / d) for d in ("data", "run", "tok")]
    tok = tmp_path / "tok"
    assert find_files([tok]) == [tok / "tokenizer.json", tok / "vocab.txt"]  # named itself: read as asked


SRT = """1
00:00:01,000 --> 00:00:03,500
<i>Where were you</i>
last night?

2
00:00:04,000 --> 00:00:06,000
- At the station.
- {\\an8}Alone?

3
00:00:06,500 --> 00:00:09,000
[DOOR SLAMS]
MAN: No, with my brother.

4
00:00:10,000 --> 00:00:12,000
♪ la la la ♪
"""
VTT = """WEBVTT
Kind: captions

NOTE written by hand

STYLE
::cue { color: yellow }

intro
00:01.000 --> 00:03.500 align:start
<v Anna>Where were you
last night?

00:04.000 --> 00:06.000
- At the station.
- <c.yellow>Alone?</c>

00:06.500 --> 00:09.000
(sighs) No, with my <00:07.000>brother.
"""


def test_subtitles_are_one_document_of_turns_without_timings_tags_or_sound_descriptions(tmp_path):
    """A sentence split over two lines or cues is one turn; a dash starts another speaker's; numbers, timings,
    styling tags, [SOUNDS] and (sighs), speaker labels and music notes are not dialogue. SubRip and WebVTT (its
    header, NOTE and STYLE blocks and cue names aside) read the same."""
    turns = ["Where were you last night?", "At the station.", "Alone?", "No, with my brother.", "la la la"]
    (tmp_path / "film.srt").write_text(SRT, encoding="utf-8")
    (tmp_path / "talk.vtt").write_text(VTT, encoding="utf-8")
    assert documents_of(read_paragraphs([tmp_path / "film.srt"])) == [turns]
    assert documents_of(read_paragraphs([tmp_path / "talk.vtt"])) == [turns[:4]]


def test_what_a_corpus_was_read_from_is_told_by_kind():
    assert describe_files(["a/b.txt"]) == "1 .txt file"
    assert describe_files(["x.pdf", "y.PDF", "notes.md.gz", "wiki_00"]) == "4 files (2 .pdf, 1 .md.gz, 1 no suffix)"


def test_hidden_files_and_directories_in_a_corpus_directory_are_not_the_corpus(tmp_path):
    """A repository's .git, Jupyter's .ipynb_checkpoints (a copy of each notebook), an editor's .notes.txt."""
    (tmp_path / "notes.txt").write_text("The text.\n", encoding="utf-8")
    (tmp_path / ".notes.txt").write_text("A hidden copy.\n", encoding="utf-8")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".ipynb_checkpoints" / "notes-checkpoint.txt").write_text("An older copy.\n", encoding="utf-8")
    assert find_files([tmp_path]) == [tmp_path / "notes.txt"]
    assert find_files([tmp_path / ".notes.txt"]) == [tmp_path / ".notes.txt"]  # named itself: read as asked


def test_invalid_utf8_is_replaced_and_counted_with_one_warning(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"caf\xe9 ok.\n\xff\xfe broken.\n")
    stats = ReadStats()
    with pytest.warns(UserWarning, match="3 invalid UTF-8") as caught:  # \xe9, \xff, \xfe
        texts = [p.text for p in read_paragraphs([path], stats=stats)]
    assert len(caught) == 1
    assert texts == ["caf\ufffd ok.", "\ufffd\ufffd broken."]
    assert stats.invalid_utf8 == 3


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_utf16_and_utf32_text_with_a_byte_order_mark_is_read(tmp_path, encoding):
    """Windows Notepad's and Excel's "Unicode text" (and PowerShell 5's `>`) is UTF-16 with a byte-order mark."""
    mark = {"utf-16": b"", "utf-16-be": codecs.BOM_UTF16_BE, "utf-32": b""}[encoding]  # Python's own add one
    (tmp_path / "notes.txt").write_bytes(mark + "Café au lait.\n\nNext document.\n".encode(encoding))
    with gzip.open(tmp_path / "table.tsv.gz", "wb") as f:
        f.write(mark + "sentence\tlabel\nnaïve and charming\t1\n".encode(encoding))
    assert documents_of(read_paragraphs([tmp_path / "notes.txt"])) == [["Café au lait."], ["Next document."]]
    rows = [row for _, row in read_rows(tmp_path / "table.tsv.gz", ["sentence", "label"])]
    assert rows == [{"sentence": "naïve and charming", "label": "1"}]


def test_utf16_without_a_byte_order_mark_is_refused_with_the_conversion(tmp_path):
    (tmp_path / "notes.txt").write_bytes("Hello there.\n".encode("utf-16-le"))
    with pytest.raises(UserError, match=r"notes\.txt: looks like a binary file .*iconv -f UTF-16LE -t UTF-8"):
        list(read_paragraphs([tmp_path / "notes.txt"]))


@pytest.mark.parametrize("content", [b"", b"\n\n   \n"])
def test_empty_corpus_is_a_clear_error_naming_the_path(tmp_path, content):
    path = tmp_path / "empty.txt"
    path.write_bytes(content)
    with pytest.raises(UserError, match="empty.txt"):
        list(read_paragraphs([path]))


def test_missing_path_binary_file_and_empty_directory(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        list(read_paragraphs([tmp_path / "nope.txt"]))
    (tmp_path / "bin.txt").write_bytes(b"\x00\x01\x02binary")
    with pytest.raises(UserError, match="binary"):
        list(read_paragraphs([tmp_path / "bin.txt"]))
    (tmp_path / "empty_dir").mkdir()
    with pytest.raises(UserError, match="no text files"):
        list(read_paragraphs([tmp_path / "empty_dir"]))


def test_html_cleaning():
    raw = (
        "<p>Hello&nbsp;<b>world</b> &amp; friends.</p><script>var x = 1;</script> See https://example.com/page now.\x07"
    )
    assert clean_text(raw, "html") == "Hello world & friends. See now."
    assert clean_text("tab\tand\x00nul") == "tab and nul"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Mr. Smith arrived. He sat down.", ["Mr. Smith arrived.", "He sat down."]),
        ("The U.S. economy grew. Prices rose.", ["The U.S. economy grew.", "Prices rose."]),
        ("Use tools, e.g. hammers. They help.", ["Use tools, e.g. hammers.", "They help."]),
        ("Pi is 3.14159 roughly. Yes.", ["Pi is 3.14159 roughly.", "Yes."]),
        ("He waited... Then he left.", ["He waited...", "Then he left."]),
        ("Well... maybe not.", ["Well... maybe not."]),
        ('"Is it?" she asked. "Yes!" He nodded.', ['"Is it?" she asked.', '"Yes!"', "He nodded."]),
        ("J. R. R. Tolkien wrote it. It is long.", ["J. R. R. Tolkien wrote it.", "It is long."]),
        ("It costs $5.50 today! Buy it.", ["It costs $5.50 today!", "Buy it."]),
        ("我爱北京。天安门很大！", ["我爱北京。", "天安门很大！"]),
        ("no terminal punctuation", ["no terminal punctuation"]),
    ],
)
def test_sentence_splitting_tricky_cases(text, expected):
    assert split_sentences(text) == expected


def test_a_headerless_table_keeps_its_first_row(tmp_path):
    """--text-column 0 means "no header": row 1 is text, not a header to skip."""
    for name, delimiter in (("a.tsv", "\t"), ("a.csv", ",")):
        path = tmp_path / name
        path.write_text(f"1{delimiter}first row.\n2{delimiter}second row.\n", encoding="utf-8")
        assert documents_of(read_paragraphs([path], CorpusOptions(text_column="1"))) == [
            ["first row."],
            ["second row."],
        ]


def test_compressed_files_read_like_plain_ones(tmp_path):
    import bz2
    import lzma

    text = "one.\ntwo.\n\nthree.\n"
    (tmp_path / "plain.txt").write_text(text, encoding="utf-8")
    expected = documents_of(read_paragraphs([tmp_path / "plain.txt"]))
    for suffix, opener in ((".gz", gzip.open), (".bz2", bz2.open), (".xz", lzma.open)):
        path = tmp_path / f"c.txt{suffix}"
        with opener(path, "wt", encoding="utf-8") as f:
            f.write(text)
        assert documents_of(read_paragraphs([path])) == expected, suffix
    (tmp_path / "broken.txt.xz").write_bytes(b"not xz at all")
    with pytest.raises(UserError, match="broken.txt.xz"):
        list(read_paragraphs([tmp_path / "broken.txt.xz"]))


def test_a_table_row_without_the_column_names_its_line(tmp_path):
    path = tmp_path / "a.tsv"
    path.write_text("id\ttext\n1\tfine.\n2\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"a\.tsv:3: row has 1 columns, column 'text' is missing"):
        list(read_paragraphs([path]))
