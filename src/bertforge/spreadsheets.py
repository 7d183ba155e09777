"""Excel workbooks (.xlsx) as tables: one sheet's rows, each cell as the text it shows.

Labelled examples are often kept in a spreadsheet, and saving one as CSV goes wrong in ways that are hard to
see (Excel writes ';' where the decimal comma is the custom, and its own code page). An .xlsx is a zip of XML
(Office Open XML, ECMA-376): the workbook lists the sheets, a shared-string table holds the texts, and each
sheet holds its rows of cells. No spreadsheet library is needed to read that much.

    sheet_rows(path)   (row number, the row's cells as strings, "" where a cell is empty) for each row
    split_sheet(path)  (the workbook, the sheet's name or None): `reviews.xlsx#test` names the sheet "test"

The sheet read is the first, or the one a path names after '#', as a spreadsheet's own links name a sheet
(`reviews.xlsx#test`): a workbook often keeps the training and the test examples on two sheets.

The sheet streams: rows of any number pass through bounded memory; the shared strings are held (a sheet's
texts, which Excel caps with its rows).
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

from .errors import UserError
from .packages import RELATIONSHIP_ID, member_info, member_xml, relationships

MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
WORKBOOK = "xl/workbook.xml"
CELL_REFERENCE = re.compile(r"([A-Z]+)(\d+)")
BOOLEANS = {"0": "FALSE", "1": "TRUE"}
SHEET_MARK = "#"  # reviews.xlsx#test: the sheet "test"


def split_sheet(path: Path) -> tuple[Path, str | None]:
    """`book.xlsx#name` -> (book.xlsx, "name"); any other path, or a file whose own name holds the '#', is itself."""
    head, mark, sheet = str(path).rpartition(SHEET_MARK)
    if mark and head.lower().endswith(".xlsx") and not path.exists():
        return Path(head), sheet
    return path, None


def sheet_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """The non-empty rows of the first sheet, or of the one `path` names, numbered as Excel numbers them (from 1)."""
    path, name = split_sheet(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    try:
        with zipfile.ZipFile(path) as book:
            strings = _shared_strings(book, path)
            with book.open(_sheet_member(book, path, name)) as sheet:
                yield from _rows(sheet, strings, path)
    except zipfile.BadZipFile:
        raise UserError(f"{path}: not an Excel workbook (not a zip file, or a truncated one)") from None
    except ElementTree.ParseError as e:
        raise UserError(f"{path}: not well-formed XML inside ({e})") from None
    except (OSError, EOFError) as e:  # unreadable, or a member cut short
        raise UserError(f"{path}: cannot read ({e})") from None


def _sheet_member(book: zipfile.ZipFile, path: Path, name: str | None) -> str:
    """The member holding the sheet called `name`, or the first: xl/workbook.xml lists the sheets in the order
    Excel shows their tabs, and its relationships locate each one's member."""
    sheets = list(member_xml(book, WORKBOOK, path, "an Excel .xlsx workbook").iter(f"{MAIN}sheet"))
    if not sheets:
        raise UserError(f"{path}: the workbook has no sheets")
    sheet = sheets[0] if name is None else next((s for s in sheets if s.get("name") == name), None)
    if sheet is None:
        listed = ", ".join(repr(s.get("name")) for s in sheets)
        raise UserError(f"{path}: the workbook has no sheet named {name!r}; its sheets are {listed}")
    member = relationships(book, WORKBOOK, path).get(sheet.get(RELATIONSHIP_ID))
    if not member:
        raise UserError(f"{path}: the workbook does not say where its sheet {sheet.get('name')!r} is")
    member_info(book, member, path, f"the workbook lists {member}, which it does not hold")
    return member


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
        number = int(element.get("r") or number + 1)
        cells: list[str] = []
        for cell in element.iter(f"{MAIN}c"):
            reference = CELL_REFERENCE.fullmatch(cell.get("r") or "")
            column = _column_index(reference.group(1)) if reference else len(cells)
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
