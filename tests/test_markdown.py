"""Markdown files as corpora and inputs: a document per file, a paragraph per block, the markup and code left out."""

from __future__ import annotations

import gzip
import json

import pytest

from bertforge.errors import UserError
from bertforge.formats.corpus import find_files, read_document, read_paragraphs, read_texts
from bertforge.formats.rows import read_rows

from conftest import bertforge, bertforge_ok, documents_of, one_line_error, save_random_model

# A project's documentation page: front matter, both kinds of heading, a paragraph wrapped over lines, a list
# with a task box and a continuation line, a quote, code in a fence, indented and inline, a table, links, an
# image, a bare link, inline and block HTML, an entity, a footnote.
PAGE = """---
title: Getting started
tags: [intro]
---
# Getting *started*

Install the package with `pip install bertforge` and read
the [user guide](https://example.org/guide.html) first.
![build status](https://example.org/badge.svg) See <https://example.org>.

```bash
bertforge demo --out runs
```

    an indented code block

Things to check
---------------

- [x] the corpus is **plain** text,
  one paragraph per line
- a tokenizer was trained<sup>1</sup>

> Tom &amp; Jerry trained theirs for an hour.[^1]

| flag | what it does |
|------|--------------|
| `--seeds` | runs per arm |

<!-- a note to the editor,
     over two lines -->
<div class="note"><p>Block HTML is read as a page is.</p></div>

[^1]: On a laptop.
"""
PARAGRAPHS = [
    "Getting started",
    "Install the package with pip install bertforge and read the user guide first. See .",
    "Things to check",
    "the corpus is plain text, one paragraph per line",
    "a tokenizer was trained1",
    "Tom & Jerry trained theirs for an hour.",
    "flag",
    "what it does",
    "--seeds",
    "runs per arm",
    "Block HTML is read as a page is.",
    "On a laptop.",
]


def test_a_markdown_file_is_one_document_of_its_blocks_without_markup_or_code(tmp_path):
    (tmp_path / "guide.md").write_text(PAGE, encoding="utf-8")
    assert documents_of(read_paragraphs([tmp_path / "guide.md"])) == [PARAGRAPHS]
    assert read_texts(tmp_path / "guide.md") == (PARAGRAPHS, None)  # what --input reads: a paragraph each
    assert read_document(tmp_path / "guide.md") == "\n".join(PARAGRAPHS)  # what --context-file reads


def test_a_directory_reads_markdown_beside_text_compressed_too(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "README.md").write_text("# Notes\n\nA first note.\n", encoding="utf-8")
    with gzip.open(tmp_path / "docs" / "guide.markdown.gz", "wt", encoding="utf-8") as f:
        f.write(PAGE)
    (tmp_path / "docs" / "plain.txt").write_text("A line of text.\n", encoding="utf-8")
    assert [p.name for p in find_files([tmp_path / "docs"])] == ["README.md", "guide.markdown.gz", "plain.txt"]
    assert documents_of(read_paragraphs([tmp_path / "docs"])) == [
        ["Notes", "A first note."],
        PARAGRAPHS,
        ["A line of text."],
    ]


def test_a_notebook_is_one_document_of_its_markdown_cells(tmp_path):
    """Markdown cells read as Markdown files are, their source a string or a list of lines; code, its outputs and
    raw cells are not prose."""
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# A *notebook*\n", "\n", "Some `prose`\n", "wrapped."]},
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": 1,
            "source": "print('code is not prose')",
            "outputs": [{"output_type": "stream", "name": "stdout", "text": ["code is not prose\n"]}],
        },
        {"cell_type": "raw", "metadata": {}, "source": "raw text"},
        {"cell_type": "markdown", "metadata": {}, "source": "- one item\n- [x] two"},
    ]
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "analysis.ipynb").write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    assert documents_of(read_paragraphs([tmp_path / "analysis.ipynb"])) == [
        ["A notebook", "Some prose wrapped.", "one item", "two"]
    ]
    (tmp_path / "torn.ipynb").write_text('{"cells": [', encoding="utf-8")
    with pytest.raises(UserError, match="torn.ipynb:1: not a Jupyter notebook \\(not JSON"):
        list(read_paragraphs([tmp_path / "torn.ipynb"]))
    (tmp_path / "other.ipynb").write_text('{"worksheets": []}', encoding="utf-8")
    with pytest.raises(UserError, match="other.ipynb: not a Jupyter notebook \\(no list of cells"):
        list(read_paragraphs([tmp_path / "other.ipynb"]))


def test_markdown_is_refused_as_a_table_and_as_pairs(tmp_path):
    (tmp_path / "guide.md").write_text(PAGE, encoding="utf-8")
    with pytest.raises(UserError, match="guide.md: a Markdown text holds no rows or lines to read"):
        list(read_rows(tmp_path / "guide.md", ["0"]))
    with pytest.raises(UserError, match="guide.md: a document's paragraphs are single texts"):
        read_texts(tmp_path / "guide.md", pair_column="1")


def test_search_over_a_folder_of_markdown_names_each_hits_file(tmp_path, wordpiece_tokenizer):
    model = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    (tmp_path / "wiki" / "howto").mkdir(parents=True)
    (tmp_path / "wiki" / "howto" / "guide.md").write_text(PAGE, encoding="utf-8")
    done = bertforge_ok("search", model, PARAGRAPHS[3], "--corpus", tmp_path / "wiki", "--top-k", "1", "--json")
    [hit] = json.loads(done.stdout)[0]["results"]
    assert (hit["text"], hit["source"], hit["score"]) == (PARAGRAPHS[3], "howto/guide.md", pytest.approx(1.0))
    bertforge_ok(
        "tokenizer",
        "train",
        tmp_path / "wiki",
        "--out",
        tmp_path / "tok",
        "--vocab-size",
        "2000",
        "--min-frequency",
        "1",
    )
    vocabulary = set((tmp_path / "tok" / "vocab.txt").read_text(encoding="utf-8").split())
    assert {"tokenizer", "corpus"} <= vocabulary and not {"bash", "indented", "https"} & vocabulary  # prose, not code
    one_line_error(
        bertforge("nsp", model, "--input", tmp_path / "wiki" / "howto" / "guide.md"),
        "guide.md: a document's paragraphs are single texts",
    )
