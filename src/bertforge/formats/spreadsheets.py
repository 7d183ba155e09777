"""Spreadsheets as tables: one sheet's rows of an Excel workbook (.xlsx) or an OpenDocument spreadsheet (.ods:
LibreOffice Calc's, Google Sheets' export), each cell as the text it shows.

Labelled examples are often kept in a spreadsheet, and saving one as CSV goes wrong in ways that are hard to
see (Excel writes ';' where the decimal comma is the custom, and its own code page). Both formats are zips of
XML. An .xlsx (Office Open XML, ECMA-376): the workbook lists the sheets, a shared-string table holds the texts,
and each sheet holds its rows of cells. An .ods (OpenDocument, ISO/IEC 26300): content.xml holds every sheet
(a table:table) in order, each row's cells with their values, and a run of equal rows or cells written once
with its count. No spreadsheet library is needed to read that much.

    sheet_rows(path)   (row number, the row's cells as strings, "" where a cell is empty) for each row
    split_sheet(path)  (the workbook, the sheet's name or None): `reviews.xlsx#test` names the sheet "test"

The sheet read is the first, or the one a path names after '#', as a spreadsheet's own links name a sheet
(`reviews.xlsx#test`, `reviews.ods#test`): a workbook often keeps the training and the test examples on two
sheets.

The sheet streams: rows of any number pass through bounded memory; an .xlsx's shared strings are held (a
sheet's texts, which Excel caps with its rows).
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn
from xml.etree import ElementTree

from ..errors import UserError
from .zipparts import (
    ODF_BODY,
    ODF_PARAGRAPHS,
    RELATIONSHIP_ID,
    count_attribute,
    member_info,
    member_xml,
    odf_text,
    relationships,
)

SHEET_MARK = "#"  # reviews.xlsx#test: the sheet "test"
# A sheet's size in Excel and LibreOffice: a run of repeated rows or cells, or a cell reference, past it is not a
# sheet's (a crafted file's "2,000,000,000 repeated cells" would ask for gigabytes).
MAX_ROWS, MAX_COLUMNS = 1_048_576, 16_384
SUFFIXES = (".xlsx", ".ods")
MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
WORKBOOK = "xl/workbook.xml"
CELL_REFERENCE = re.compile(r"([A-Z]+)(\d+)")
BOOLEANS = {"0": "FALSE", "1": "TRUE"}
TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
ODS_CELLS = (f"{TABLE}table-cell", f"{TABLE}covered-table-cell")  # a covered cell lies under a merged one: empty
# A cell's value as stored, by its type (a number as 0.25 where it shows 25%); a string's is its paragraphs' text.
ODS_VALUES = {"float": "value", "percentage": "value", "currency": "value", "date": "date-value", "time": "time-value"}


def split_sheet(path: Path) -> tuple[Path, str | None]:
    """`book.xlsx#name` -> (book.xlsx, "name"), and so for .ods; any other path, or a file whose own name holds the
    '#', is itself."""
    head, mark, sheet = str(path).rpartition(SHEET_MARK)
    if mark and head.lower().endswith(SUFFIXES) and not path.exists():
        return Path(head), sheet
    return path, None


def sheet_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """The non-empty rows of the first sheet, or of the one `path` names, numbered as Excel numbers them (from 1)."""
    path, name = split_sheet(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    ods = path.name.lower().endswith(".ods")
    try:
        with zipfile.ZipFile(path) as book:
            yield from (_ods_rows if ods else _xlsx_rows)(book, path, name)
    except zipfile.BadZipFile:
        what = "an OpenDocument spreadsheet" if ods else "an Excel workbook"
        raise UserError(f"{path}: not {what} (not a zip file, or a truncated one)") from None
    except ElementTree.ParseError as e:
        raise UserError(f"{path}: not well-formed XML inside ({e})") from None
    except (OSError, EOFError) as e:  # unreadable, or a member cut short
        raise UserError(f"{path}: cannot read ({e})") from None


def _xlsx_rows(book: zipfile.ZipFile, path: Path, name: str | None) -> Iterator[tuple[int, list[str]]]:
    strings = _shared_strings(book, path)
    with book.open(_sheet_member(book, path, name)) as sheet:
        yield from _rows(sheet, strings, path)


def _sheet_member(book: zipfile.ZipFile, path: Path, name: str | None) -> str:
    """The member holding the sheet called `name`, or the first: xl/workbook.xml lists the sheets in the order
    Excel shows their tabs, and its relationships locate each one's member."""
    sheets = list(member_xml(book, WORKBOOK, path, "an Excel .xlsx workbook").iter(f"{MAIN}sheet"))
    sheet = next((s for s in sheets if name in (None, s.get("name"))), None)
    if sheet is None:
        _no_such_sheet(path, name, [s.get("name") for s in sheets])
    member = relationships(book, WORKBOOK, path).get(sheet.get(RELATIONSHIP_ID))
    if not member:
        raise UserError(f"{path}: the workbook does not say where its sheet {sheet.get('name')!r} is")
    member_info(book, member, path, f"the workbook lists {member}, which it does not hold")
    return member


def _no_such_sheet(path: Path, name: str | None, names: list[str]) -> NoReturn:
    """Refuse a workbook without the sheet asked for (the first, where `name` is None), naming those it has."""
    if not names:
        raise UserError(f"{path}: the workbook has no sheets")
    listed = ", ".join(map(repr, names))
    raise UserError(f"{path}: the workbook has no sheet named {name!r}; its sheets are {listed}")


def _shared_strings(book: zipfile.ZipFile, path: Path) -> list[str]:
    """The texts that cells of type "s" index; each <si> is plain (<t>) or rich text (runs of <t>), and the
    phonetic guides (<rPh>) of East Asian text are not part of it."""
    if "xl/sharedStrings.xml" not in book.namelist():
        return []
    strings = []
    with book.open("xl/sharedStrings.xml") as f:
        for _, element in ElementTree.iterparse(f):
            if element.tag == f"{MAIN}si":
                strings.append("".join(t.text or "" for t in _texts(element)))
                element.clear()
    return strings


def _rows(sheet, strings: list[str], path: Path) -> Iterator[tuple[int, list[str]]]:
    number = 0
    for _, element in ElementTree.iterparse(sheet):
        if element.tag != f"{MAIN}row":
            continue
        number = count_attribute(element, "r", number + 1, str(path))
        if number > MAX_ROWS:
            raise UserError(f"{path}: row {number} is beyond a sheet's {MAX_ROWS:,} rows")
        cells: list[str] = []
        for cell in element.iter(f"{MAIN}c"):
            reference = CELL_REFERENCE.fullmatch(cell.get("r") or "")
            column = _column_index(reference.group(1)) if reference else len(cells)
            if column >= MAX_COLUMNS:
                raise UserError(f"{path}:{number}: cell {cell.get('r')!r} is beyond a sheet's last column, XFD")
            cells.extend([""] * (column - len(cells)))  # empty cells are left out of the file
            cells.append(_value(cell, strings, path, number))
        element.clear()  # what is read is let go: bounded memory
        if any(cell.strip() for cell in cells):
            yield number, cells


def _value(cell: ElementTree.Element, strings: list[str], path: Path, number: int) -> str:
    kind, value = cell.get("t", "n"), cell.findtext(f"{MAIN}v") or ""
    if kind == "s":
        if not value.isdigit() or int(value) >= len(strings):
            raise UserError(f"{path}:{number}: a cell names shared string {value!r}, which the workbook lacks")
        return strings[int(value)]
    if kind == "inlineStr":
        return "".join(t.text or "" for t in _texts(cell))
    if kind == "b":
        return BOOLEANS.get(value, value)
    return value  # a number (as stored: 1, 0.5), a formula's text ("str") or an error (#N/A)


def _texts(element: ElementTree.Element) -> list[ElementTree.Element]:
    """The <t> elements of a string item, outside phonetic guides."""
    guides = {id(t) for guide in element.iter(f"{MAIN}rPh") for t in guide.iter(f"{MAIN}t")}
    return [t for t in element.iter(f"{MAIN}t") if id(t) not in guides]


def _column_index(letters: str) -> int:
    """A -> 0, Z -> 25, AA -> 26."""
    index = 0
    for letter in letters:
        index = index * 26 + ord(letter) - ord("A") + 1
    return index - 1


def _ods_rows(book: zipfile.ZipFile, path: Path, name: str | None) -> Iterator[tuple[int, list[str]]]:
    """The rows of an .ods's first table, or of the one called `name`, numbered as Calc numbers them; a run of
    equal rows is written once with its count (the empty rows to a sheet's end among them)."""
    member_info(book, ODF_BODY, path, f"it holds no {ODF_BODY}: not an OpenDocument spreadsheet")
    names: list[str] = []  # the sheets passed, in order
    reading, number = False, 0
    with book.open(ODF_BODY) as body:
        for event, element in ElementTree.iterparse(body, events=("start", "end")):
            if element.tag == f"{TABLE}table" and event == "start":
                names.append(element.get(f"{TABLE}name") or "")
                reading, number = name in (None, names[-1]), 0
            elif element.tag == f"{TABLE}table" and reading:
                return  # the end of the sheet read
            elif element.tag == f"{TABLE}table-row" and event == "end":
                repeated = count_attribute(element, f"{TABLE}number-rows-repeated", 1, str(path))
                repeated = min(repeated, MAX_ROWS - number)  # the rows past the sheet's last are no rows
                cells = _ods_cells(element, path) if reading else []
                element.clear()  # what is read is let go: bounded memory
                if any(cell.strip() for cell in cells):
                    for offset in range(1, repeated + 1):
                        yield number + offset, cells
                number += repeated
    _no_such_sheet(path, name, names)


def _ods_cells(row: ElementTree.Element, path: Path) -> list[str]:
    """A row's cells, each run of equal cells as its count of them; the empty cells at the row's end are left out
    (a sheet's last row runs to its 16,384th column), and none past that column is read."""
    cells: list[str] = []
    empty = 0  # empty cells not yet placed: placed only where a value follows them
    for cell in row:
        if cell.tag not in ODS_CELLS:
            continue
        repeated = count_attribute(cell, f"{TABLE}number-columns-repeated", 1, str(path))
        repeated = min(repeated, MAX_COLUMNS - len(cells) - empty)
        if repeated <= 0:
            break
        value = _ods_value(cell, path)
        if not value:
            empty += repeated
            continue
        cells.extend([""] * empty + [value] * repeated)
        empty = 0
    return cells


def _ods_value(cell: ElementTree.Element, path: Path) -> str:
    kind = cell.get(f"{OFFICE}value-type")
    if kind == "boolean":
        return "TRUE" if cell.get(f"{OFFICE}boolean-value") == "true" else "FALSE"
    if kind in ODS_VALUES:
        return cell.get(f"{OFFICE}{ODS_VALUES[kind]}", "")
    return "\n".join(odf_text(p, str(path)) for p in cell if p.tag in ODF_PARAGRAPHS)  # a string or formula text
