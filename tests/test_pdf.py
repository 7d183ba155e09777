"""PDF files as corpora: a document per file, lines joined into paragraphs, running heads and page numbers out."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from bertforge.errors import UserError
from bertforge.formats.corpus import find_files, read_paragraphs
from bertforge.formats.layouts import typeset_paragraphs
from bertforge.formats.rows import read_rows

from conftest import bertforge, bertforge_ok, documents_of, needs, one_line_error, save_random_model


def pdf_bytes(pages: list[list[str]]) -> bytes:
    """A PDF as a typesetter writes one: each page its lines of Helvetica (WinAnsi: cp1252) from the top down."""
    body = [b"%PDF-1.4\n"]
    offsets = []

    def add(dictionary: str, stream: bytes | None = None) -> int:
        offsets.append(sum(map(len, body)))
        content = dictionary.encode() + (b"\nstream\n" + stream + b"\nendstream" if stream is not None else b"")
        body.append(f"{len(offsets)} 0 obj\n".encode() + content + b"\nendobj\n")
        return len(offsets)

    add("<< /Type /Catalog /Pages 2 0 R >>")
    kids = " ".join(f"{4 + 2 * i + 1} 0 R" for i in range(len(pages)))
    add(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>")
    add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    for lines in pages:
        escaped = (line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") for line in lines)
        stream = "\n".join(["BT /F1 11 Tf 14 TL 72 760 Td", *(f"({line}) Tj T*" for line in escaped), "ET"])
        contents = add(f"<< /Length {len(stream.encode('cp1252'))} >>", stream.encode("cp1252"))
        add(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {contents} 0 R >>"
        )
    xref = sum(map(len, body))
    rows = [f"0 {len(offsets) + 1}", "0000000000 65535 f "] + [f"{offset:010d} 00000 n " for offset in offsets]
    body.append(
        ("xref\n" + "\n".join(rows) + f"\ntrailer\n<< /Size {len(offsets) + 1} /Root 1 0 R >>\n").encode()
        + f"startxref\n{xref}\n%%EOF\n".encode()
    )
    return b"".join(body)


# A report's two pages: a running head with the page number in it, a bare page number at the foot, a paragraph
# running on over the page break, a word hyphenated at a line's end, a heading, a bulleted list.
PAGES = [
    [
        "Annual Report of the Test Society 1",
        "The society met twelve times this year and every meeting was",
        "well attended by its members, who heard a lecture on the sub-",
        "ject of rivers.",
        "Our Finances",
        "The treasurer reported a small surplus, which the members voted",
        "to spend on books for the library of the society. The money was",
        "- 1 -",
    ],
    [
        "Annual Report of the Test Society 2",
        "spent before the winter.",
        "The members asked for three things:",
        "• more meetings in the summer months of the year, when it is light,",
        "• a lecture on X-",
        "Rays.",
        "- 2 -",
    ],
]
REPORT = [
    "The society met twelve times this year and every meeting was well attended by its members, who heard a "
    "lecture on the subject of rivers.",
    "Our Finances",
    "The treasurer reported a small surplus, which the members voted to spend on books for the library of the "
    "society. The money was spent before the winter.",
    "The members asked for three things:",
    "• more meetings in the summer months of the year, when it is light,",
    "• a lecture on X-Rays.",
]


def test_a_pdf_is_one_document_of_rebuilt_paragraphs(tmp_path):
    (tmp_path / "report.pdf").write_bytes(pdf_bytes(PAGES))
    assert documents_of(read_paragraphs([tmp_path / "report.pdf"])) == [REPORT]


def test_running_heads_that_alternate_between_pages_are_left_out_and_text_that_does_not_repeat_is_kept():
    """A book's even pages carry its title, its odd pages the chapter's: a head repeats two pages on. A line at a
    page's edge that no nearby page repeats there is text, even a short one."""
    body = "A line of the book that fills the whole width of the page"
    ends = ["one", "two", "three", "four", "five", "six"]
    heads = ["THE BOOK", "CHAPTER ONE"] * 3
    pages = [[head, *[body] * 5, f"The end of page {end}.", str(i)] for i, (head, end) in enumerate(zip(heads, ends))]
    pages[2][0] = "A short top line"  # a page without its head: this line is text
    texts = [p.text for p in typeset_paragraphs(pages)]
    assert not any(head in text for text in texts for head in ("THE BOOK", "CHAPTER ONE"))
    assert "A short top line" in texts
    assert [end for end in ends if any(text.endswith(f"The end of page {end}.") for text in texts)] == ends


def test_ligatures_are_spelled_out_and_a_page_ending_a_sentence_ends_its_paragraph(tmp_path):
    pages = [["The ﬁrst chapter is short and its last line ends a sentence of it."], ["Chapter Two begins here."]]
    assert [p.text for p in typeset_paragraphs(pages)] == [pages[0][0], pages[1][0]]
    from bertforge.formats.pdf import LIGATURES

    assert "ﬁnd the ﬂow".translate(LIGATURES) == "find the flow"


def test_a_directory_reads_pdfs_beside_text_and_a_scan_is_skipped_with_a_warning(tmp_path):
    (tmp_path / "report.pdf").write_bytes(pdf_bytes(PAGES))
    (tmp_path / "scan.pdf").write_bytes(pdf_bytes([[], []]))  # pages without text: pictures of pages
    (tmp_path / "plain.txt").write_text("A line of text.\n", encoding="utf-8")
    assert [p.name for p in find_files([tmp_path])] == ["plain.txt", "report.pdf", "scan.pdf"]
    with pytest.warns(UserWarning, match="scan.pdf: no text on its pages"):
        assert documents_of(read_paragraphs([tmp_path])) == [["A line of text."], REPORT]
    with pytest.warns(UserWarning), pytest.raises(UserError, match="no text found in .*scan.pdf"):
        list(read_paragraphs([tmp_path / "scan.pdf"]))


def test_encrypted_pdfs_are_read_without_a_password_to_read_and_refused_with_one(tmp_path):
    pypdf = needs("pypdf")
    (tmp_path / "report.pdf").write_bytes(pdf_bytes(PAGES))
    for name, password in (("locked.pdf", "secret"), ("print-only.pdf", "")):
        writer = pypdf.PdfWriter(clone_from=tmp_path / "report.pdf")
        writer.encrypt(user_password=password, owner_password="owner", algorithm="RC4-128")
        writer.write(tmp_path / name)
    assert documents_of(read_paragraphs([tmp_path / "print-only.pdf"])) == [REPORT]
    with pytest.raises(UserError, match="locked.pdf: the PDF is protected by a password"):
        list(read_paragraphs([tmp_path / "locked.pdf"]))


def test_broken_pdfs_and_pdfs_as_tables_are_refused_by_name(tmp_path, monkeypatch):
    whole = pdf_bytes(PAGES)
    (tmp_path / "torn.pdf").write_bytes(whole[: len(whole) // 3])
    with pytest.raises(UserError, match="torn.pdf: not a readable PDF"):
        list(read_paragraphs([tmp_path / "torn.pdf"]))
    with pytest.raises(UserError, match="a PDF holds no rows or lines to read"):
        list(read_rows(tmp_path / "torn.pdf", ["0"]))
    (tmp_path / "report.pdf.gz").write_bytes(whole)
    with pytest.raises(UserError, match="report.pdf.gz: a PDF is read as it is; decompress it first"):
        list(read_paragraphs([tmp_path / "report.pdf.gz"]))
    monkeypatch.setitem(sys.modules, "pypdf", None)  # as without the `formats` extra
    with pytest.raises(
        UserError, match=r"torn.pdf: reading this format needs pypdf: pip install 'bertforge\[formats\]'"
    ):
        list(read_paragraphs([tmp_path / "torn.pdf"]))


def test_the_cli_trains_a_tokenizer_on_a_pdf_and_refuses_a_broken_one_in_one_line(tmp_path):
    (tmp_path / "report.pdf").write_bytes(pdf_bytes(PAGES))
    flags = "--vocab-size", "2000", "--min-frequency", "1"
    done = bertforge("tokenizer", "train", tmp_path / "report.pdf", "--out", tmp_path / "tok", *flags)
    assert done.returncode == 0, done.stderr
    vocabulary = set((tmp_path / "tok" / "vocab.txt").read_text(encoding="utf-8").split())
    assert {"subject", "society", "treasurer"} <= vocabulary  # "sub-" "ject" joined
    assert "annual" not in vocabulary  # the running head left out
    (tmp_path / "fake.pdf").write_text("not a PDF at all", encoding="utf-8")
    one_line_error(
        bertforge("tokenizer", "train", tmp_path / "fake.pdf", "--out", tmp_path / "tok2", *flags),
        "fake.pdf: not a readable PDF",
    )


def test_inference_commands_take_a_document_a_paragraph_per_text(tmp_path, wordpiece_tokenizer):
    """`embed --input report.pdf` embeds its paragraphs, as the same paragraphs a line each; pairs are refused."""
    model = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    (tmp_path / "report.pdf").write_bytes(pdf_bytes(PAGES))
    (tmp_path / "report.txt").write_text("\n".join(REPORT) + "\n", encoding="utf-8")
    for name in ("report.pdf", "report.txt"):
        bertforge_ok(
            "embed", model, "--input", tmp_path / name, "--out", tmp_path / f"{name}.npy", "--precision", "fp32"
        )
    from_pdf, from_lines = np.load(tmp_path / "report.pdf.npy"), np.load(tmp_path / "report.txt.npy")
    assert from_pdf.shape == (len(REPORT), 32)
    np.testing.assert_array_equal(from_pdf, from_lines)
    one_line_error(
        bertforge("nsp", model, "--input", tmp_path / "report.pdf"), "report.pdf: a document's paragraphs are single"
    )


def test_search_and_embed_take_a_directory_of_documents_and_name_each_hits_file(tmp_path, wordpiece_tokenizer):
    model = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    docs = tmp_path / "docs"
    (docs / "reports").mkdir(parents=True)
    (docs / "reports" / "report.pdf").write_bytes(pdf_bytes(PAGES))
    notes = ["the cat sat on the mat.", "my friend painted a small boat."]
    (docs / "notes.txt").write_text("\n".join(notes) + "\n", encoding="utf-8")
    (tmp_path / "all.txt").write_text("\n".join(notes + REPORT) + "\n", encoding="utf-8")  # in the same order
    for source in ("docs", "all.txt"):
        bertforge_ok("embed", model, "--input", tmp_path / source, "--out", tmp_path / f"{source}.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "docs.npy"), np.load(tmp_path / "all.txt.npy"))

    done = bertforge_ok("search", model, REPORT[1], "--corpus", docs, "--top-k", "8", "--json")
    hits = json.loads(done.stdout)[0]["results"]
    files = ["notes.txt"] * len(notes) + ["reports/report.pdf"] * len(REPORT)
    assert len(hits) == len(files) and hits[0]["text"] == REPORT[1] and hits[0]["score"] == pytest.approx(1.0)
    assert all(hit["source"] == files[hit["index"]] and hit["text"] == (notes + REPORT)[hit["index"]] for hit in hits)
    plain = bertforge_ok("search", model, REPORT[1], "--corpus", docs, "--top-k", "1").stdout.splitlines()
    assert plain == [REPORT[1], f"  1.000  reports/report.pdf: {REPORT[1]}"]


def test_documents_are_classified_a_file_each_as_a_folder_of_classes_trains_on_them(tmp_path, wordpiece_tokenizer):
    """A folder per class of PDFs and web pages trains a classifier on a file per example; `classify --per-file`
    reads a folder of such files whole, each answer naming its file and equal to classifying its text whole."""
    model = save_random_model(tmp_path / "model", wordpiece_tokenizer, max_position_embeddings=64)
    train, inbox = tmp_path / "train", tmp_path / "inbox"
    for label, pages in {"report": PAGES, "letter": [["Dear Anna,", "the cat sat on the mat.", "Yours, Bob"]]}.items():
        (train / label).mkdir(parents=True)
        for i in range(6):
            (train / label / f"{i}.pdf").write_bytes(pdf_bytes(pages))
    (train / "letter" / "4.html").write_text("<p>Dear Bob,</p><p>my friend sat.</p>", encoding="utf-8")
    (train / "letter" / "scan.pdf").write_bytes(pdf_bytes([[]]))
    done = bertforge_ok("finetune", model, "--train", train, "--out", tmp_path / "clf", "--epochs", "1", "--quiet")
    assert "scan.pdf" in done.stderr  # left out, and said so
    assert json.loads((tmp_path / "clf" / "summary.json").read_text())["train_examples"] == 13 - 2  # a tenth held out

    (inbox / "old").mkdir(parents=True)
    (inbox / "old" / "report.pdf").write_bytes(pdf_bytes(PAGES))
    (inbox / "note.txt").write_text("Dear Anna,\nthe cat sat  on the mat.\n", encoding="utf-8")
    classifier = tmp_path / "clf" / "model"
    results = json.loads(bertforge_ok("classify", classifier, "--input", inbox, "--per-file", "--json").stdout)
    assert [r["source"] for r in results] == ["note.txt", "old/report.pdf"] and "text" not in results[0]
    for r, text in zip(results, ["Dear Anna, the cat sat on the mat.", " ".join(REPORT)]):
        alone = json.loads(bertforge_ok("classify", classifier, text, "--whole", "--json").stdout)
        assert r["label"] == alone["label"] and r["probabilities"] == pytest.approx(alone["probabilities"], abs=1e-6)
        assert r["windows"] == alone["windows"]
    assert results[1]["windows"] > 1  # the report is longer than the model's 64 positions: read whole
    bertforge_ok("classify", classifier, "--input", inbox, "--per-file", "--out", tmp_path / "p.csv")
    assert (tmp_path / "p.csv").read_text().splitlines()[0] == "source,label,windows,p_letter,p_report"
    plain = bertforge_ok("classify", classifier, "--input", inbox / "old" / "report.pdf", "--per-file").stdout
    assert plain.strip().endswith(f"report.pdf  ({results[1]['windows']} windows)")
    assert len(plain.strip().splitlines()) == 1
    one_line_error(bertforge("classify", classifier, "a text", "--per-file"), "--per-file reads --input")
