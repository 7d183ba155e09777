"""Archives (.zip, .tar and its compressed forms) read as the directory they were packed from."""

from __future__ import annotations

import json
import re
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest

from bertforge.errors import UserError
from bertforge.formats.corpus import ReadStats, read_paragraphs, read_passages
from bertforge.formats.rows import read_rows

from conftest import bertforge, bertforge_ok, documents_of, make_documents, needs, one_line_error, save_random_model

# member name: content. Sorted names, so that an archive stored in this order reads in a directory's order.
TEXT_FILES = {
    "books/a.txt": "The first book begins.\nIt goes on.\n\nA second story.\n",
    "books/b.txt.gz": None,  # written compressed below: a compressed file inside an archive
    "pages/c.html": "<html><body><h2>A heading</h2><p>A paragraph of a page.</p></body></html>",
    "rows.jsonl": '{"text": "a row of a JSONL file."}\n{"text": "another row."}\n',
}
# What a directory's reading skips, so an archive's must too.
NOT_TEXT = {
    "picture.png": "\x89PNG not text",
    ".hidden/notes.txt": "hidden, not the corpus.",
    "__MACOSX/books/._a.txt": "a resource fork that macOS Finder's Compress adds: hidden too.",
}


def write_directory(root: Path) -> Path:
    import gzip

    for name, content in {**TEXT_FILES, **NOT_TEXT}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            with gzip.open(path, "wt", encoding="utf-8") as f:
                f.write("Compressed, inside an archive.\n")
        else:
            path.write_text(content, encoding="utf-8")
    return root


def pack(directory: Path, archive: Path) -> Path:
    """`directory`'s files, every one (the skipped ones too), stored in sorted order as a zip or tar."""
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
            for file in files:
                z.write(file, file.relative_to(directory).as_posix())
    elif archive.suffix == ".zst":  # tarfile writes no zstd before Python 3.14: a plain tar, then compressed
        tar = pack(directory, archive.with_suffix(""))
        archive.write_bytes(needs("zstandard").ZstdCompressor().compress(tar.read_bytes()))
        tar.unlink()
    else:
        compression = {".tar": "", ".gz": "gz", ".tgz": "gz", ".bz2": "bz2", ".xz": "xz"}[archive.suffix]
        with tarfile.open(archive, f"w:{compression}") as t:
            for file in files:
                t.add(file, file.relative_to(directory).as_posix())
    return archive


@pytest.mark.parametrize(
    "name",
    ["corpus.zip", "corpus.tar", "corpus.tar.gz", "corpus.tgz", "corpus.tar.bz2", "corpus.tar.xz", "corpus.tar.zst"],
)
def test_an_archive_reads_as_the_directory_it_was_packed_from(tmp_path, name):
    directory = write_directory(tmp_path / "corpus")
    archive = pack(directory, tmp_path / name)
    from_directory, from_archive = ReadStats(), ReadStats()
    expected = documents_of(read_paragraphs([directory], stats=from_directory))
    assert documents_of(read_paragraphs([archive], stats=from_archive)) == expected
    assert len(expected) == 6  # two in a.txt, one in b.txt.gz, one page, two rows: nothing skipped read
    # each file is named by the archive's path and its own, as a directory's files are by theirs
    assert from_archive.files == [
        f"{archive}/{Path(f).relative_to(directory).as_posix()}" for f in from_directory.files
    ]


def test_an_archive_inside_an_archive_is_read_and_named_by_both(tmp_path):
    inner = pack(write_directory(tmp_path / "corpus"), tmp_path / "part1.tar.gz")
    outer = tmp_path / "dump.zip"
    with zipfile.ZipFile(outer, "w") as z:
        z.write(inner, "shards/part1.tar.gz")
    stats = ReadStats()
    assert documents_of(read_paragraphs([outer], stats=stats)) == documents_of(read_paragraphs([tmp_path / "corpus"]))
    assert stats.files[0] == f"{outer}/shards/part1.tar.gz/books/a.txt"


def test_a_directory_reads_the_archives_in_it(tmp_path):
    (tmp_path / "in").mkdir()
    pack(write_directory(tmp_path / "corpus"), tmp_path / "in" / "corpus.tar.gz")
    (tmp_path / "in" / "more.txt").write_text("A loose file beside it.\n", encoding="utf-8")
    expected = documents_of(read_paragraphs([tmp_path / "corpus"])) + [["A loose file beside it."]]
    assert documents_of(read_paragraphs([tmp_path / "in"])) == expected


def test_one_member_is_on_disk_at_a_time_and_nothing_is_left_behind(tmp_path, monkeypatch):
    """Text members stream out of the archive; a member read from a path (an archive inside, a document) is copied
    out, one at a time: the disk a corpus needs is its largest such member's."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    corpus = write_directory(tmp_path / "corpus")
    for name in ("inner1", "inner2"):  # archives inside the archive: read from copies
        with zipfile.ZipFile(corpus / f"{name}.zip", "w") as inner:
            inner.writestr(f"{name}.txt", f"A text inside {name}.\n")
    archive = pack(corpus, tmp_path / "corpus.zip")
    stats = ReadStats()
    on_disk = []
    for _ in read_paragraphs([archive], stats=stats):
        on_disk.append((stats.files[-1], sum(1 for p in scratch.rglob("*") if p.is_file())))
    assert on_disk and max(n for _, n in on_disk) == 1
    assert all(n == 0 for name, n in on_disk if "inner" not in name)  # text members were never copied
    assert not any(scratch.iterdir())


def test_search_names_the_file_inside_an_archive_each_hit_came_from(tmp_path, wordpiece_tokenizer):
    model = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("the cat sat on the mat.\n", encoding="utf-8")
    (docs / "b.txt").write_text("my friend painted a small boat.\n", encoding="utf-8")
    archive = pack(docs, tmp_path / "docs.zip")
    assert read_passages(archive) == (
        ["the cat sat on the mat.", "my friend painted a small boat."],
        ["a.txt", "b.txt"],
    )
    done = bertforge_ok(
        "search", model, "my friend painted a small boat.", "--corpus", archive, "--top-k", "1", "--json"
    )
    hit = json.loads(done.stdout)[0]["results"][0]
    assert (hit["source"], hit["score"]) == ("b.txt", pytest.approx(1.0))


def test_prepare_reads_a_tar_gz_corpus_and_lists_its_members_as_sources(tmp_path, wordpiece_tokenizer):
    corpus = tmp_path / "corpus"
    for i, document in enumerate(make_documents(n_docs=12)):
        (corpus / f"part{i % 3}").mkdir(parents=True, exist_ok=True)
        (corpus / f"part{i % 3}" / f"doc{i:02d}.txt").write_text(" ".join(document) + "\n", encoding="utf-8")
    archive = pack(corpus, tmp_path / "corpus.tar.gz")
    tokenizer = save_random_model(tmp_path / "model", wordpiece_tokenizer)  # its directory holds the tokenizer
    for source, out in ((corpus, "from_directory"), (archive, "from_archive")):
        bertforge_ok("prepare", source, "--tokenizer", tokenizer, "--out", tmp_path / out, "--quiet")
    for name in ("tokens.bin", "sentence_offsets.bin", "document_offsets.bin"):
        assert (tmp_path / "from_archive" / "train" / name).read_bytes() == (
            tmp_path / "from_directory" / "train" / name
        ).read_bytes(), name
    sources = json.loads((tmp_path / "from_archive" / "meta.json").read_text())["sources"]
    assert len(sources) == 12 and sources[0] == f"{archive}/part0/doc00.txt"


def marked_encrypted(data: bytes) -> bytes:
    """A one-member zip with bit 0 of its flags set, in the member's header and in the central directory, as a
    password-protected member is marked (Python's zipfile writes no encrypted members)."""
    data = bytearray(data)
    for signature, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        data[data.index(signature) + flags_at] |= 0x1
    return bytes(data)


def test_a_broken_archive_or_member_is_one_line_naming_it(tmp_path):
    good = pack(write_directory(tmp_path / "corpus"), tmp_path / "corpus.tar.gz")
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    (tmp_path / "not.zip").write_bytes(b"not a zip at all")
    pictures = tmp_path / "pictures.zip"
    with zipfile.ZipFile(pictures, "w") as z:
        z.writestr("a.png", b"\x89PNG")
    locked = tmp_path / "locked.zip"
    with zipfile.ZipFile(locked, "w") as z:
        z.writestr("notes.txt", b"secret")
    locked.write_bytes(marked_encrypted(locked.read_bytes()))
    broken_row = tmp_path / "rows.zip"
    with zipfile.ZipFile(broken_row, "w") as z:
        z.writestr("data/notes.txt", "A fine file first.\n")
        z.writestr("data/rows.jsonl", '{"text": "fine."}\n{"text": \n')
    for archive, message in (
        (cut, "cut.tar.gz: not a readable archive"),
        (tmp_path / "not.zip", "not.zip: not a readable archive"),
        (pictures, "pictures.zip: archive holds no text files (.txt"),
        (locked, "locked.zip/notes.txt: encrypted; unpack the archive with its password first"),
        (broken_row, "rows.zip/data/rows.jsonl:2: "),
    ):
        with pytest.raises(UserError, match=re.escape(f"{tmp_path}/{message}")):
            list(read_paragraphs([archive]))


def test_a_zip_of_one_table_is_that_table_wherever_one_file_is_read(tmp_path, wordpiece_tokenizer):
    """Kaggle serves its tables zipped, one file each (train.csv.zip): fine-tuning and inference read them as the
    file inside, and an archive of several files is refused with what to do."""
    rows = "text,label\n" + "".join(f"{word} film,{i % 2}\n" for i, word in enumerate(["good", "bad"] * 6))
    (tmp_path / "train.csv").write_text(rows, encoding="utf-8")
    with zipfile.ZipFile(tmp_path / "train.csv.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("train.csv", rows)
    assert list(read_rows(tmp_path / "train.csv.zip", ["text", "label"])) == list(
        read_rows(tmp_path / "train.csv", ["text", "label"])
    )
    model = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    columns = ("--text-column", "text", "--label-column", "label", "--epochs", "1", "--seed", "0")
    answers = {}  # (trained on, classified): the answers, which must not depend on either being the zip
    for table in ("train.csv", "train.csv.zip"):
        out = tmp_path / f"ft_{table}"
        bertforge_ok("finetune", model, "--train", tmp_path / table, "--dev", tmp_path / table, *columns, "--out", out)
        for given in ("train.csv", "train.csv.zip"):
            done = bertforge_ok(
                "classify", out / "model", "--input", tmp_path / given, "--text-column", "text", "--json"
            )
            answers[table, given] = json.loads(done.stdout)
    assert len(answers[("train.csv", "train.csv")]) == 12
    assert all(answer == answers[("train.csv", "train.csv")] for answer in answers.values())
    broken = tmp_path / "broken.csv.zip"  # a byte of the stored member changed: its CRC fails as it is read
    with zipfile.ZipFile(broken, "w", zipfile.ZIP_STORED) as z:
        z.writestr("broken.csv", rows)
    data = bytearray(broken.read_bytes())
    data[data.index(b"good film")] ^= 0x20
    broken.write_bytes(bytes(data))
    with pytest.raises(UserError, match=re.escape(f"{broken}/broken.csv: cannot read (Bad CRC-32")):
        list(read_rows(broken, ["text", "label"]))
    two = tmp_path / "data.zip"
    with zipfile.ZipFile(two, "w") as z:
        z.writestr("train.csv", rows)
        z.writestr("test.csv", rows)
    done = bertforge("finetune", model, "--train", two, "--dev", two, *columns, "--out", tmp_path / "ft")
    one_line_error(done, "data.zip: an archive of files (unpack it, and name the one to read)")
    done = bertforge("finetune", model, "--train", two, "--dev", two, "--out", tmp_path / "ft")
    one_line_error(done, "data.zip: an archive of files, not one text file; unpack it")
