"""Spreadsheets (Excel's .xlsx, OpenDocument's .ods) read as tables: the first sheet or a named one, each cell as
the text it shows, like its CSV twin."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from bertforge.errors import UserError
from bertforge.formats.corpus import read_paragraphs, read_texts
from bertforge.formats.options import CorpusOptions
from bertforge.formats.rows import read_rows
from bertforge.studies.score import parse_task
from bertforge.tasks.classification import Columns, Example, read_examples
from bertforge.tokenizer import train_tokenizer

from conftest import bertforge, bertforge_ok, one_line_error, save_random_model

NS = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
R = 'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'

# As Excel writes it: texts in the shared-string table (one of them rich text, one with a phonetic guide),
# numbers and booleans in the cells, empty cells left out, the sheet listed first stored as sheet2.xml.
SHARED = (
    f'<sst {NS} count="7" uniqueCount="7">'
    "<si><t>sentence</t></si><si><t>label</t></si><si><t>a fine film</t></si><si><t>positive</t></si>"
    "<si><r><t>dull, </t></r><r><rPr><b/></rPr><t>and long</t></r></si><si><t>negative</t></si>"
    '<si><t>東京</t><rPh sb="0" eb="2"><t>トウキョウ</t></rPh></si></sst>'
)
SHEET = (
    f"<worksheet {NS}><sheetData>"
    '<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c><c r="C1" t="inlineStr"><is><t>stars</t>'
    "</is></c></row>"
    '<row r="2"><c r="A2" t="s"><v>2</v></c><c r="B2" t="s"><v>3</v></c><c r="C2"><v>4.5</v></c></row>'
    '<row r="3"><c r="A3" t="s"><v>4</v></c><c r="B3" t="s"><v>5</v></c></row>'  # C3 empty: left out
    '<row r="4"/>'
    '<row r="6"><c r="A6" t="s"><v>6</v></c><c r="B6" t="b"><v>1</v></c><c r="C6" t="str"><f>B2</f><v>positive</v>'
    "</c></row>"
    "</sheetData></worksheet>"
)
CSV_TWIN = 'sentence,label,stars\na fine film,positive,4.5\n"dull, and long",negative,\n東京,TRUE,positive\n'


def write_xlsx(path, sheet=SHEET, shared=SHARED, workbook=True):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        if workbook:
            z.writestr(
                "xl/workbook.xml",
                f'<workbook {NS} {R}><sheets><sheet name="data" sheetId="1" r:id="rId7"/>'
                '<sheet name="notes" sheetId="2" r:id="rId1"/></sheets></workbook>',
            )
        z.writestr(
            "xl/_rels/workbook.xml.rels",
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            '<Relationship Id="rId1" Target="worksheets/sheet1.xml"/>'
            '<Relationship Id="rId7" Target="/xl/worksheets/sheet2.xml"/></Relationships>',
        )
        z.writestr("xl/sharedStrings.xml", shared)
        z.writestr("xl/worksheets/sheet2.xml", sheet)
        z.writestr("xl/worksheets/sheet1.xml", f'<worksheet {NS}><sheetData><row r="1"><c r="A1" t="s"><v>0</v></c>'
                   '<c r="B1" t="s"><v>1</v></c></row><row r="2"><c r="A2" t="inlineStr"><is><t>from the notes</t>'
                   '</is></c><c r="B2" t="s"><v>5</v></c></row></sheetData></worksheet>')  # fmt: skip


def assert_reads_as_the_csv_twin(book):
    """`book`'s first sheet gives CSV_TWIN's rows, numbered as the spreadsheet numbers them, as a table, as
    labelled examples and as a corpus."""
    twin = book.with_suffix(".csv")
    twin.write_text(CSV_TWIN, encoding="utf-8")
    columns = ["sentence", "label", "stars"]
    rows = list(read_rows(book, columns))
    assert [number for number, _ in rows] == [2, 3, 6]
    assert [row for _, row in rows] == [row for _, row in read_rows(twin, columns)]
    as_table = Columns("sentence", "label")
    assert read_examples(book, as_table) == read_examples(twin, as_table)
    corpus = read_paragraphs([book], CorpusOptions(text_column="sentence"))
    assert [p.text for p in corpus] == ["a fine film", "dull, and long", "東京"]


def test_a_workbook_reads_as_its_csv_twin(tmp_path):
    """The first sheet (by the workbook's order, found through its relationships), rows numbered as Excel shows
    them, shared and inline strings, rich text joined, phonetic guides left out, numbers as stored, booleans as
    Excel shows them, a formula's cached value, and the empty cells at a row's end as ""."""
    write_xlsx(tmp_path / "reviews.xlsx")
    assert_reads_as_the_csv_twin(tmp_path / "reviews.xlsx")
    headerless = [row for _, row in read_rows(tmp_path / "reviews.xlsx", ["0", "1"])]
    assert headerless[0] == {"0": "sentence", "1": "label", "2": "stars"} and len(headerless) == 4


def test_a_path_names_its_sheet_after_a_hash(tmp_path):
    """reviews.xlsx#notes reads the sheet called "notes" wherever a table is read (training examples, a corpus,
    the texts a command runs on), as a spreadsheet's own links name a sheet; a name it lacks is refused with
    the names it has, and a file whose own name holds '#' is itself."""
    book = tmp_path / "reviews.xlsx"
    write_xlsx(book)
    notes = tmp_path / "reviews.xlsx#notes"
    columns = ["sentence", "label"]
    assert list(read_rows(notes, columns)) == [(2, {"sentence": "from the notes", "label": "negative"})]
    assert list(read_rows(tmp_path / "reviews.xlsx#data", columns)) == list(read_rows(book, columns))
    assert read_examples(notes, Columns("sentence", "label")) == [Example("from the notes", None, "negative")]
    assert [p.text for p in read_paragraphs([notes], CorpusOptions(text_column="sentence"))] == ["from the notes"]
    assert read_texts(notes, "sentence") == (["from the notes"], None)
    spec = parse_task(f"reviews={book}#data,{book}#notes:task=classification,text=sentence,label=label")
    assert (spec.train, spec.dev) == (tmp_path / "reviews.xlsx#data", notes)
    with pytest.raises(UserError, match="reviews.xlsx: the workbook has no sheet named 'test'; its sheets are "
                       "'data', 'notes'"):  # fmt: skip
        list(read_rows(tmp_path / "reviews.xlsx#test", columns))
    with pytest.raises(UserError, match="gone.xlsx: no such file"):
        list(read_rows(tmp_path / "gone.xlsx#data", columns))
    with pytest.raises(UserError, match="gone.xlsx#data: no such file or directory"):
        list(read_paragraphs([tmp_path / "gone.xlsx#data"], CorpusOptions(text_column="sentence")))
    write_xlsx(tmp_path / "week#2.xlsx")
    assert list(read_rows(tmp_path / "week#2.xlsx", columns)) == list(read_rows(book, columns))


def test_a_sheet_is_named_on_the_command_line(tmp_path):
    """The CLI passes reviews.xlsx#notes on as it is: a tokenizer trains on a sheet, `prepare` reads two sheets as
    two sources, and `embed --input` reads that sheet's texts."""
    write_xlsx(tmp_path / "reviews.xlsx")
    data, notes = tmp_path / "reviews.xlsx#data", tmp_path / "reviews.xlsx#notes"
    bertforge_ok("tokenizer", "train", data, "--text-column", "sentence", "--out", tmp_path / "tok", "--vocab-size", 60)
    done = bertforge_ok(
        "prepare", data, notes, "--text-column", "sentence", "--tokenizer", tmp_path / "tok", "--out", tmp_path / "d"
    )
    assert "from 2 .xlsx files" in done.stdout + done.stderr
    model = save_random_model(tmp_path / "model", train_tokenizer(["from the notes a fine film"], vocab_size=60))
    out = tmp_path / "vectors.npy"
    bertforge_ok("embed", model, "--input", tmp_path / "reviews.xlsx#notes", "--text-column", "sentence", "--out", out)
    assert np.load(out).shape == (1, 32)
    one_line_error(
        bertforge("embed", model, "--input", tmp_path / "reviews.xlsx#test", "--text-column", "sentence", "--out", out),
        "no sheet named 'test'",
    )


def test_broken_workbooks_are_refused_by_name(tmp_path):
    with pytest.raises(UserError, match="missing.xlsx: no such file"):
        list(read_rows(tmp_path / "missing.xlsx", ["sentence"]))
    (tmp_path / "fake.xlsx").write_text("sentence,label\n", encoding="utf-8")  # a CSV saved with the wrong name
    with pytest.raises(UserError, match="fake.xlsx: not an Excel workbook \\(not a zip file"):
        list(read_rows(tmp_path / "fake.xlsx", ["sentence"]))
    write_xlsx(tmp_path / "bare.xlsx", workbook=False)
    with pytest.raises(UserError, match="bare.xlsx: it holds no xl/workbook.xml: not an Excel .xlsx workbook"):
        list(read_rows(tmp_path / "bare.xlsx", ["sentence"]))
    write_xlsx(tmp_path / "short.xlsx", shared=SHARED.replace("<si><t>negative</t></si>", ""))
    with pytest.raises(UserError, match="short.xlsx:6: a cell names shared string '6', which the workbook lacks"):
        list(read_rows(tmp_path / "short.xlsx", ["sentence"]))
    write_xlsx(tmp_path / "torn.xlsx", sheet=SHEET[:200])
    with pytest.raises(UserError, match="torn.xlsx: not well-formed XML inside"):
        list(read_rows(tmp_path / "torn.xlsx", ["sentence"]))
    write_xlsx(tmp_path / "ok.xlsx")
    with pytest.raises(UserError, match="no column 'text'; the header has 'sentence', 'label', 'stars'$"):
        list(read_rows(tmp_path / "ok.xlsx", ["text"]))


# As LibreOffice Calc writes it: the header among the header rows, a number shown as 4.50 and stored as 4.5, rich
# text, runs of equal rows and cells written once with their count (the sheet's end among them), a boolean, and a
# formula's last value; a second sheet with a percentage, a run of two equal rows and a merged cell.
ODS_NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"'
)


def ods_cell(text="", kind="string", repeated=1, **attributes):
    attrs = "".join(f' {name.replace("_", ":", 1).replace("_", "-")}="{value}"' for name, value in attributes.items())
    run = f' table:number-columns-repeated="{repeated}"' if repeated > 1 else ""
    if not text:
        return f"<table:table-cell{run}/>"
    return f'<table:table-cell office:value-type="{kind}"{attrs}{run}><text:p>{text}</text:p></table:table-cell>'


def ods_row(*cells, repeated=1):
    run = f' table:number-rows-repeated="{repeated}"' if repeated > 1 else ""
    return f"<table:table-row{run}>{''.join(cells)}</table:table-row>"


ODS_DATA = (
    '<table:table table:name="data"><table:table-column table:number-columns-repeated="3"/>'
    f"<table:table-header-rows>{ods_row(ods_cell('sentence'), ods_cell('label'), ods_cell('stars'))}"
    "</table:table-header-rows>"
    + ods_row(ods_cell("a fine film"), ods_cell("positive"), ods_cell("4.50", "float", office_value="4.5"),
              ods_cell(repeated=1021))
    + ods_row(ods_cell('dull, <text:span text:style-name="T1">and long</text:span>'), ods_cell("negative"),
              ods_cell(repeated=1022))
    + ods_row(ods_cell(repeated=1024), repeated=2)
    + ods_row(ods_cell("東京"), ods_cell("TRUE", "boolean", office_boolean_value="true"),
              ods_cell("positive", table_formula="of:=[.B2]"))
    + ods_row(ods_cell(repeated=1024), repeated=1048570)
    + "</table:table>"
)  # fmt: skip
ODS_NOTES = (
    '<table:table table:name="notes">'
    + ods_row(ods_cell("sentence"), ods_cell("label"), ods_cell("share"))
    + ods_row(ods_cell("from<text:s text:c=\"2\"/>the notes"), ods_cell("negative"),
              ods_cell("25%", "percentage", office_value="0.25"))
    + ods_row(ods_cell("twice"), ods_cell("positive"), repeated=2)
    + ods_row(ods_cell("merged", table_number_columns_spanned="2"), "<table:covered-table-cell/>",
              ods_cell("1", "float", office_value="1"))
    + "</table:table>"
)  # fmt: skip


def write_ods(path, content=None):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("mimetype", "application/vnd.oasis.opendocument.spreadsheet")
        if content is not False:
            body = f"<office:body><office:spreadsheet>{ODS_DATA}{ODS_NOTES}</office:spreadsheet></office:body>"
            z.writestr("content.xml", content or f"<office:document-content {ODS_NS}>{body}</office:document-content>")


def test_an_opendocument_spreadsheet_reads_as_its_csv_twin(tmp_path):
    """LibreOffice's .ods as Excel's .xlsx: the first sheet or a named one, rows numbered as Calc shows them
    (through runs of empty rows), each cell's value as stored (4.5 where it shows 4.50, 0.25 for 25%), rich text
    and spaces joined, a run of equal rows as that many rows, a merged cell's covered neighbours empty."""
    write_ods(tmp_path / "reviews.ods")
    assert_reads_as_the_csv_twin(tmp_path / "reviews.ods")
    assert list(read_rows(tmp_path / "reviews.ods#notes", ["sentence", "label", "share"])) == [
        (2, {"sentence": "from  the notes", "label": "negative", "share": "0.25"}),
        (3, {"sentence": "twice", "label": "positive", "share": ""}),
        (4, {"sentence": "twice", "label": "positive", "share": ""}),
        (5, {"sentence": "merged", "label": "", "share": "1"}),
    ]
    with pytest.raises(UserError, match="reviews.ods: the workbook has no sheet named 'test'; its sheets are "
                       "'data', 'notes'"):  # fmt: skip
        list(read_rows(tmp_path / "reviews.ods#test", ["sentence"]))


def test_broken_opendocument_spreadsheets_are_refused_by_name(tmp_path):
    (tmp_path / "fake.ods").write_text("sentence,label\n", encoding="utf-8")
    with pytest.raises(UserError, match="fake.ods: not an OpenDocument spreadsheet \\(not a zip file"):
        list(read_rows(tmp_path / "fake.ods", ["sentence"]))
    write_ods(tmp_path / "bare.ods", content=False)
    with pytest.raises(UserError, match="bare.ods: it holds no content.xml: not an OpenDocument spreadsheet"):
        list(read_rows(tmp_path / "bare.ods", ["sentence"]))
    write_ods(tmp_path / "torn.ods", content=f"<office:document-content {ODS_NS}><office:body>{ODS_DATA[:300]}")
    with pytest.raises(UserError, match="torn.ods: not well-formed XML inside"):
        list(read_rows(tmp_path / "torn.ods", ["sentence"]))
    write_ods(tmp_path / "empty.ods", content=f"<office:document-content {ODS_NS}/>")
    with pytest.raises(UserError, match="empty.ods: the workbook has no sheets"):
        list(read_rows(tmp_path / "empty.ods", ["sentence"]))
