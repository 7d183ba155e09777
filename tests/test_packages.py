"""Parts of zip packages by name and by relationship, as the Office, OpenDocument and EPUB readers ask for them."""

from __future__ import annotations

import zipfile

import pytest

from bertforge.errors import UserError
from bertforge.formats.zipparts import member_xml, part_name, relationships

RELS = """<?xml version="1.0" encoding="UTF-8"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
  <Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide"
                Target="slides/slide%202.xml"/>
  <Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/notesSlide"
                Target="../notesSlides/notesSlide1.xml"/>
  <Relationship Id="rId3" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink"
                Target="https://example.org/" TargetMode="External"/>
  <Relationship Id="rId4" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/theme"
                Target="/ppt/theme/theme1.xml"/>
</Relationships>"""


def test_link_targets_become_part_names():
    assert part_name("xl", "worksheets/sheet1.xml") == "xl/worksheets/sheet1.xml"
    assert part_name("xl", "/xl/worksheets/sheet1.xml") == "xl/worksheets/sheet1.xml"  # from the package's root
    assert part_name("ppt/slides", "../media/image%201.png") == "ppt/media/image 1.png"  # %-escapes undone
    assert part_name("OEBPS", "Text/ch01.xhtml") == "OEBPS/Text/ch01.xhtml"


def test_relationships_resolve_by_kind_and_leave_links_out_of_the_package(tmp_path):
    path = tmp_path / "deck.pptx"
    with zipfile.ZipFile(path, "w") as package:
        package.writestr("ppt/slides/_rels/slide1.xml.rels", RELS)
        package.writestr("ppt/slides/slide1.xml", "<sld/>")
        package.writestr("ppt/broken.xml", "<p><unclosed></p>")
    with zipfile.ZipFile(path) as package:
        assert relationships(package, "ppt/slides/slide1.xml", path) == {
            "rId1": "ppt/slides/slides/slide 2.xml",
            "rId2": "ppt/notesSlides/notesSlide1.xml",
            "rId4": "ppt/theme/theme1.xml",
        }
        assert relationships(package, "ppt/slides/slide1.xml", path, "/notesSlide") == {
            "rId2": "ppt/notesSlides/notesSlide1.xml"
        }
        assert relationships(package, "ppt/broken.xml", path) == {}  # a part without a .rels links nowhere
        with pytest.raises(UserError, match=r"deck.pptx: it holds no ppt/presentation.xml: not a \.pptx"):
            member_xml(package, "ppt/presentation.xml", path, "a .pptx")
        with pytest.raises(UserError, match="deck.pptx: ppt/broken.xml is not well-formed XML"):
            member_xml(package, "ppt/broken.xml", path, "a .pptx")
