"""Zip packages of XML parts: what the Excel, Word, PowerPoint, OpenDocument and EPUB readers share.

Office Open XML (ECMA-376) keeps a document as parts in a zip, linked by relationships: a part's `_rels/NAME.rels`
lists the ids it uses and the parts they point to (a workbook's sheets, a presentation's slides, a slide's notes).
OpenDocument and EPUB are zips of XML parts too. Each reader asks for parts by name and gets a clear error naming
the file where a part is missing or broken, never a traceback.

    member_info(package, name, path, missing)     the part's zip entry, or UserError(missing)
    member_xml(package, name, path, what)         a small part parsed whole
    relationships(package, member, path, kind)    {relationship id: part name} of a part's .rels
    part_name(folder, target)                     a link's target as a part name
    odf_text(element, where)                      an OpenDocument paragraph's text, its markup left out
    count_attribute(element, name, ...)           a repeat count, or one line saying it is none
"""

from __future__ import annotations

import posixpath
import zipfile
from pathlib import Path
from urllib.parse import unquote
from xml.etree import ElementTree

from ..errors import UserError

RELATIONSHIPS = "{http://schemas.openxmlformats.org/package/2006/relationships}"
RELATIONSHIP_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"  # r:id on a part's refs
ODF_BODY = "content.xml"  # an OpenDocument file's body: a text's paragraphs, a presentation's pages, a spreadsheet
ODF_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
ODF_PARAGRAPHS = frozenset({f"{ODF_TEXT}p", f"{ODF_TEXT}h"})
ODF_ASIDE = frozenset({f"{ODF_TEXT}note", f"{ODF_TEXT}tracked-changes"})  # footnotes; deleted text kept for undo


def member_info(package: zipfile.ZipFile, name: str, path: Path, missing: str) -> zipfile.ZipInfo:
    """The zip entry of part `name`; a package without it is refused with `missing`."""
    try:
        return package.getinfo(name)
    except KeyError:
        raise UserError(f"{path}: {missing}") from None


def member_xml(package: zipfile.ZipFile, name: str, path: Path, what: str) -> ElementTree.Element:
    """A small part (a workbook, a container, a package file, a list of slides or relationships) parsed whole;
    a package without it is "not `what`"."""
    member_info(package, name, path, f"it holds no {name}: not {what}")
    try:
        return ElementTree.fromstring(package.read(name))
    except ElementTree.ParseError as e:
        raise UserError(f"{path}: {name} is not well-formed XML ({e})") from None


def relationships(package: zipfile.ZipFile, member: str, path: Path, kind: str = "") -> dict[str, str]:
    """{relationship id: part name} from `member`'s .rels part (none where it has none); `kind` keeps only
    relationships whose Type ends so, and links out of the package are left out."""
    folder, name = posixpath.split(member)
    rels = posixpath.join(folder, "_rels", f"{name}.rels")
    try:
        package.getinfo(rels)  # a dict lookup: namelist() would build the list of every part for each slide
    except KeyError:
        return {}
    return {
        r.get("Id"): part_name(folder, r.get("Target", ""))
        for r in member_xml(package, rels, path, "an Office file").iter(f"{RELATIONSHIPS}Relationship")
        if (r.get("Type") or "").endswith(kind) and r.get("TargetMode") != "External"
    }


def part_name(folder: str, target: str) -> str:
    """A link's target (a relationship's, an EPUB item's href; %-escaped as URLs are) as a part name:
    "/xl/worksheets/sheet1.xml" from the package's root, anything else from the folder of the part that links."""
    target = unquote(target)
    return target.lstrip("/") if target.startswith("/") else posixpath.normpath(posixpath.join(folder, target))


MAX_SPACES = 64  # <text:s text:c="N"/>: N spaces, at most this many (whitespace collapses anyway)


def count_attribute(element: ElementTree.Element, name: str, default: int, where: str) -> int:
    """An attribute holding a count (a run of repeated rows, cells or spaces), or one line saying it is none."""
    text = element.get(name)
    if text is None:
        return default
    if not text.isdigit():
        raise UserError(f"{where}: {name.rsplit('}', 1)[-1]}={text!r} is not a count")
    return int(text)


def odf_text(element: ElementTree.Element, where: str) -> str:
    """A paragraph's text: ODF mixes it with its markup (spans, links), so each child's tail counts; <text:s
    text:c="3"/> is three spaces; nested paragraphs (a text box's) and notes are not this paragraph's. Walked
    with a stack of its own, not by recursion: spans nested thousands deep are only deep, not an error. `where`
    names the file in messages."""
    parts = [element.text or ""]
    stack: list = [iter(element)]  # iterators over children still to read, and tails due once they are read
    while stack:
        top = stack[-1]
        if isinstance(top, str):
            parts.append(stack.pop())
            continue
        child = next(top, None)
        if child is None:
            stack.pop()
        elif child.tag == f"{ODF_TEXT}s":
            spaces = min(count_attribute(child, f"{ODF_TEXT}c", 1, where), MAX_SPACES)
            parts += [" " * spaces, child.tail or ""]
        elif child.tag in (f"{ODF_TEXT}tab", f"{ODF_TEXT}line-break"):
            parts += [" ", child.tail or ""]
        elif child.tag in ODF_PARAGRAPHS or child.tag in ODF_ASIDE:
            parts.append(child.tail or "")
        else:
            parts.append(child.text or "")
            stack += [child.tail or "", iter(child)]
    return "".join(parts)
