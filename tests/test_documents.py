"""EPUB e-books and Word documents as corpora: chapters in reading order, paragraphs as written, no boilerplate."""

from __future__ import annotations

import zipfile

import pytest

from bertforge.errors import UserError
from bertforge.formats.corpus import ReadStats, find_files, read_paragraphs
from bertforge.formats.rows import read_rows

from conftest import bertforge, documents_of, one_line_error

XHTML = """<?xml version='1.0' encoding='utf-8'?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">
<head><title>Test Book</title><style>p {{ margin: 0 }}</style></head>
<body>{}</body></html>"""

# Spine order differs from name order (c, b, a): the reader must follow the spine.
CHAPTERS = {
    "cover.xhtml": "<p>Cover text</p>",
    "nav.xhtml": '<nav epub:type="toc"><ol><li>Chapter I</li><li>Chapter II</li></ol></nav>',
    "Text/c.xhtml": (
        '<div class="pg-boilerplate pgheader" id="pg-header"><h2>The Project Gutenberg eBook of Test</h2>'
        "<div><div>This eBook is for the use of anyone anywhere.</div></div>"
        "<div>*** START OF THE PROJECT GUTENBERG EBOOK TEST ***</div></div>"
        "<h1>The Book&#8217;s Title</h1><p>By A. Writer</p>"
    ),
    "Text/b chapter.xhtml": (
        "<h2>Chapter I</h2><p>It was a dark &amp; stormy\nnight;<br/>the rain fell.</p><p>Second paragraph.</p>"
    ),
    "Text/a.xhtml": "<h2>Chapter II</h2><p>The end.</p>",
    "Text/footer.xhtml": (
        '<section class="pg-boilerplate pgfooter" id="pg-footer"><div>*** END OF THE PROJECT GUTENBERG EBOOK TEST '
        "***</div><section><p>The licence, thousands of words.</p></section></section>"
    ),
}
MANIFEST = [  # id, href (as the package file writes it), media type, properties
    ("cover", "../cover.xhtml", "application/xhtml+xml", ""),
    ("nav", "../nav.xhtml", "application/xhtml+xml", "nav"),
    ("title", "c.xhtml", "application/xhtml+xml", ""),
    ("ch1", "b%20chapter.xhtml", "application/xhtml+xml", ""),
    ("ch2", "a.xhtml", "application/xhtml+xml", ""),
    ("footer", "footer.xhtml", "application/xhtml+xml", ""),
    ("css", "../style.css", "text/css", ""),
]
SPINE = ['<itemref idref="cover" linear="no"/>'] + [f'<itemref idref="{i}"/>' for i in ("nav", "title", "ch1", "ch2")]
SPINE.append('<itemref idref="footer"/>')

BOOK = [
    ["The Book’s Title", "By A. Writer"],
    ["Chapter I", "It was a dark & stormy night;", "the rain fell.", "Second paragraph."],
    ["Chapter II", "The end."],
]


def write_epub(path, chapters=CHAPTERS, container=True):
    """An EPUB 3 as e-book tools write it: the package file in OEBPS/Text, chapters beside and above it."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("mimetype", "application/epub+zip", zipfile.ZIP_STORED)
        if container:
            z.writestr(
                "META-INF/container.xml",
                '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:'
                'container"><rootfiles><rootfile full-path="OEBPS/Text/content.opf" media-type="application/'
                'oebps-package+xml"/></rootfiles></container>',
            )
        items = "".join(
            f'<item id="{i}" href="{href}" media-type="{kind}"' + (f' properties="{props}"' if props else "") + "/>"
            for i, href, kind, props in MANIFEST
        )
        z.writestr(
            "OEBPS/Text/content.opf",
            '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><manifest>'
            f"{items}</manifest><spine>{''.join(SPINE)}</spine></package>",
        )
        for name, body in chapters.items():
            z.writestr(f"OEBPS/{name}", XHTML.format(body))
        z.writestr("OEBPS/style.css", "p { margin: 0 }")


W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
DOCUMENT = f"""<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document {W}><w:body>
<w:p><w:pPr><w:tabs><w:tab w:val="left" w:pos="720"/></w:tabs></w:pPr><w:r><w:t>Hel</w:t></w:r><w:r><w:t>lo,</w:t>
</w:r><w:r><w:tab/><w:t xml:space="preserve">world </w:t></w:r><w:del><w:r><w:delText>gone</w:delText></w:r></w:del>
<w:ins><w:r><w:t>again</w:t></w:r></w:ins></w:p>
<w:p/>
<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Cell one</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>Cell &amp; two</w:t></w:r></w:p>
</w:tc></w:tr></w:tbl>
<w:p><w:r><w:t>Before the box</w:t></w:r><w:r><w:pict><w:txbxContent><w:p><w:r><w:t>In a text box</w:t></w:r></w:p>
</w:txbxContent></w:pict></w:r><w:r><w:t xml:space="preserve"> after it.</w:t></w:r><w:r><w:br/><w:t>New line.</w:t>
</w:r></w:p>
<w:sectPr/></w:body></w:document>"""


def write_docx(path, document=DOCUMENT):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("word/document.xml", document)
        z.writestr("word/header1.xml", f"<w:hdr {W}><w:p><w:r><w:t>Page header</w:t></w:r></w:p></w:hdr>")


TEXT_NS = 'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"'
CONTENT = f"""<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" {TEXT_NS}
 xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
 xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"><office:body><office:text>
<text:tracked-changes><text:changed-region text:id="c1"><text:deletion><text:p>Deleted words.</text:p></text:deletion>
</text:changed-region></text:tracked-changes>
<text:h text:outline-level="1">A Heading</text:h>
<text:p>Hello <text:span>bold</text:span> world.<text:s text:c="3"/>after<text:tab/>a tab<text:note>
<text:note-citation>1</text:note-citation><text:note-body><text:p>A footnote.</text:p></text:note-body>
</text:note> End.</text:p>
<text:p/>
<text:list><text:list-item><text:p>Item one</text:p></text:list-item></text:list>
<table:table><table:table-row><table:table-cell><text:p>Cell A</text:p></table:table-cell></table:table-row>
</table:table>
<text:p>Before <draw:frame><draw:text-box><text:p>In a frame</text:p></draw:text-box></draw:frame>after.</text:p>
</office:text></office:body></office:document-content>"""


def write_odt(path, content=CONTENT):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("mimetype", "application/vnd.oasis.opendocument.text", zipfile.ZIP_STORED)
        z.writestr("content.xml", content)
        z.writestr("styles.xml", f"<office:document-styles {TEXT_NS}/>")


PML = (
    'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" '
    'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
)
PACKAGE_RELS = 'xmlns="http://schemas.openxmlformats.org/package/2006/relationships"'
OFFICE_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"


def shapes(*paragraphs: str) -> str:
    """A slide or notes page of one text box holding these DrawingML paragraphs."""
    body = "".join(f"<a:p>{p}</a:p>" for p in paragraphs)
    return f"<p:sld {PML}><p:cSld><p:spTree><p:sp><p:txBody>{body}</p:txBody></p:sp></p:spTree></p:cSld></p:sld>"


def write_pptx(path):
    """Two slides listed in the other order than their file names; the first has a title, runs, a line break, a
    slide number field and speaker notes; the second a table. The master's placeholder text is in no slide."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr(
            "ppt/presentation.xml",
            f'<p:presentation {PML}><p:sldIdLst><p:sldId id="257" r:id="rId3"/><p:sldId id="256" r:id="rId2"/>'
            "</p:sldIdLst></p:presentation>",
        )
        z.writestr(
            "ppt/_rels/presentation.xml.rels",
            f'<Relationships {PACKAGE_RELS}><Relationship Id="rId1" Type="{OFFICE_REL}/slideMaster" '
            f'Target="slideMasters/slideMaster1.xml"/><Relationship Id="rId2" Type="{OFFICE_REL}/slide" '
            f'Target="slides/slide1.xml"/><Relationship Id="rId3" Type="{OFFICE_REL}/slide" '
            'Target="/ppt/slides/slide2.xml"/></Relationships>',
        )
        z.writestr(
            "ppt/slideMasters/slideMaster1.xml", shapes("<a:r><a:t>Click to edit Master title style</a:t></a:r>")
        )
        z.writestr(
            "ppt/slides/slide2.xml",
            shapes(
                "<a:r><a:t>Quarterly results</a:t></a:r>",
                "<a:r><a:t>Sales grew by </a:t></a:r><a:r><a:t>12%</a:t></a:r><a:br/><a:r><a:t>this year</a:t></a:r>",
                '<a:fld id="{1}" type="slidenum"><a:t>1</a:t></a:fld>',
            ),
        )
        z.writestr(
            "ppt/slides/_rels/slide2.xml.rels",
            f'<Relationships {PACKAGE_RELS}><Relationship Id="rId1" Type="{OFFICE_REL}/notesSlide" '
            f'Target="../notesSlides/notesSlide2.xml"/><Relationship Id="rId2" Type="{OFFICE_REL}/hyperlink" '
            'Target="https://example.org" TargetMode="External"/></Relationships>',
        )
        z.writestr(
            "ppt/notesSlides/notesSlide2.xml",
            shapes("<a:r><a:t>Mention the new office.</a:t></a:r>", '<a:fld type="slidenum"><a:t>1</a:t></a:fld>'),
        )
        table = "".join(
            f"<a:tc><a:txBody><a:p><a:r><a:t>{cell}</a:t></a:r></a:p></a:txBody></a:tc>"
            for cell in ("Cell A", "Cell B")
        )
        z.writestr(
            "ppt/slides/slide1.xml",
            f"<p:sld {PML}><p:cSld><p:spTree><p:graphicFrame><a:graphic><a:graphicData><a:tbl><a:tr>{table}"
            "</a:tr></a:tbl></a:graphicData></a:graphic></p:graphicFrame></p:spTree></p:cSld></p:sld>",
        )


PRESENTATION = f"""<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" {TEXT_NS}
 xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
 xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"><office:body><office:presentation>
<draw:page draw:name="page1"><draw:frame><draw:text-box><text:p>Quarterly results</text:p></draw:text-box></draw:frame>
<presentation:notes><draw:frame><draw:text-box><text:p>Mention the new office.</text:p></draw:text-box></draw:frame>
</presentation:notes></draw:page>
<draw:page draw:name="page2"><draw:frame><draw:text-box><text:list><text:list-item><text:p>Sales grew</text:p>
</text:list-item></text:list></draw:text-box></draw:frame></draw:page>
</office:presentation></office:body></office:document-content>"""


def test_presentations_are_one_document_slide_by_slide_with_their_notes(tmp_path):
    """PowerPoint: the slides in the presentation's order (not their files'), runs joined, a line break a space,
    each slide's speaker notes after it, table cells as paragraphs; slide numbers (fields) and the master's
    placeholder text left out. OpenDocument's presentations read as its texts do, page by page."""
    write_pptx(tmp_path / "deck.pptx")
    assert documents_of(read_paragraphs([tmp_path / "deck.pptx"])) == [
        ["Quarterly results", "Sales grew by 12% this year", "Mention the new office.", "Cell A", "Cell B"]
    ]
    write_odt(tmp_path / "deck.odp", PRESENTATION)
    assert documents_of(read_paragraphs([tmp_path / "deck.odp"])) == [
        ["Quarterly results", "Mention the new office.", "Sales grew"]
    ]
    with zipfile.ZipFile(tmp_path / "deck.pptx") as z, zipfile.ZipFile(tmp_path / "bare.pptx", "w") as bare:
        for name in z.namelist():
            if name != "ppt/presentation.xml":
                bare.writestr(name, z.read(name))
    with pytest.raises(UserError, match="bare.pptx: it holds no ppt/presentation.xml: not a .pptx"):
        list(read_paragraphs([tmp_path / "bare.pptx"]))
    with pytest.raises(UserError, match="deck.pptx: a PowerPoint presentation holds no rows or lines to read"):
        list(read_rows(tmp_path / "deck.pptx", ["0"]))


def test_an_epub_is_read_chapter_by_chapter_in_spine_order_without_boilerplate(tmp_path):
    """A chapter per document, in the spine's order (not the names'); the cover outside the reading order, the
    table of contents, styles, and Project Gutenberg's header and licence (ids pg-header, pg-footer, with
    elements of their own tag nested inside) are left out; entities are decoded."""
    write_epub(tmp_path / "book.epub")
    stats = ReadStats()
    assert documents_of(read_paragraphs([tmp_path / "book.epub"], stats=stats)) == BOOK
    assert 0 < stats.bytes_read <= (tmp_path / "book.epub").stat().st_size  # the progress bar counts file bytes


def test_a_word_document_is_one_document_of_its_paragraphs(tmp_path):
    """Runs are joined into words, tabs and line breaks are spaces, deleted text (tracked changes) is not text and
    inserted text is; table cells are paragraphs; a text box's paragraph is its own, read before the paragraph
    holding it; headers are left out."""
    write_docx(tmp_path / "notes.docx")
    assert documents_of(read_paragraphs([tmp_path / "notes.docx"])) == [
        ["Hello, world again", "Cell one", "Cell & two", "In a text box", "Before the box after it. New line."]
    ]


def test_an_opendocument_text_is_one_document_of_its_paragraphs(tmp_path):
    """Text mixed with its markup (spans, their tails), <text:s text:c="3"/> as spaces, headings, lists and table
    cells; footnotes and tracked deletions left out; a frame's paragraph its own, read before the one holding it."""
    write_odt(tmp_path / "letter.odt")
    assert documents_of(read_paragraphs([tmp_path / "letter.odt"])) == [
        ["A Heading", "Hello bold world. after a tab End.", "Item one", "Cell A", "In a frame", "Before after."]
    ]


def test_a_directory_reads_books_and_documents_beside_text(tmp_path):
    write_epub(tmp_path / "book.epub")
    write_docx(tmp_path / "notes.docx")
    write_odt(tmp_path / "letter.odt")
    (tmp_path / "plain.txt").write_text("A line of text.\n", encoding="utf-8")
    assert [p.name for p in find_files([tmp_path])] == ["book.epub", "letter.odt", "notes.docx", "plain.txt"]
    assert len(documents_of(read_paragraphs([tmp_path]))) == 3 + 1 + 1 + 1


def test_broken_packages_are_refused_by_name(tmp_path):
    (tmp_path / "fake.epub").write_text("not a zip at all", encoding="utf-8")
    with pytest.raises(UserError, match="fake.epub: not an EPUB e-book \\(not a zip file"):
        list(read_paragraphs([tmp_path / "fake.epub"]))
    write_epub(tmp_path / "bare.epub", container=False)
    with pytest.raises(UserError, match="bare.epub: it holds no META-INF/container.xml: not an EPUB"):
        list(read_paragraphs([tmp_path / "bare.epub"]))
    write_epub(tmp_path / "gap.epub", chapters={k: v for k, v in CHAPTERS.items() if k != "Text/a.xhtml"})
    with pytest.raises(UserError, match="gap.epub: its spine lists OEBPS/Text/a.xhtml, which it does not hold"):
        list(read_paragraphs([tmp_path / "gap.epub"]))
    with zipfile.ZipFile(tmp_path / "sheet.docx", "w") as z:  # a spreadsheet renamed
        z.writestr("xl/workbook.xml", "<workbook/>")
    with pytest.raises(UserError, match="sheet.docx: it holds no word/document.xml: not a Word .docx"):
        list(read_paragraphs([tmp_path / "sheet.docx"]))
    write_docx(tmp_path / "torn.docx", DOCUMENT[: len(DOCUMENT) // 2])
    with pytest.raises(UserError, match="torn.docx: word/document.xml is not well-formed XML"):
        list(read_paragraphs([tmp_path / "torn.docx"]))
    with zipfile.ZipFile(tmp_path / "sheet.odt", "w") as z:  # an OpenDocument spreadsheet renamed
        z.writestr("mimetype", "application/vnd.oasis.opendocument.spreadsheet")
    with pytest.raises(UserError, match="sheet.odt: it holds no content.xml: not an .odt"):
        list(read_paragraphs([tmp_path / "sheet.odt"]))
    with pytest.raises(UserError, match="an e-book holds no rows or lines to read"):
        list(read_rows(tmp_path / "bare.epub", ["0"]))


def test_the_cli_trains_a_tokenizer_on_an_epub_and_refuses_a_broken_one_in_one_line(tmp_path):
    write_epub(tmp_path / "book.epub")
    flags = "--vocab-size", "300", "--min-frequency", "1"
    done = bertforge("tokenizer", "train", tmp_path / "book.epub", "--out", tmp_path / "tok", *flags)
    assert done.returncode == 0, done.stderr
    vocabulary = set((tmp_path / "tok" / "vocab.txt").read_text(encoding="utf-8").split())
    assert {"stormy", "chapter", "writer"} <= vocabulary  # every word of the book, whole
    assert not vocabulary & {"licence", "gutenberg", "cover", "margin"}  # the footer, header, cover and styles
    (tmp_path / "fake.epub").write_bytes(b"PK\x03\x04 truncated")
    one_line_error(bertforge("tokenizer", "train", tmp_path / "fake.epub", "--out", tmp_path / "t2"), "fake.epub")
