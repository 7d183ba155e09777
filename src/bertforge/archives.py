"""Files inside archives: a .zip, or a .tar (also .tar.gz, .tgz, .tar.bz2, .tar.xz, .tar.zst), read a member at a time.

    members(path, wanted)   (member name, a local copy of it) for each regular file of the archive whose name
                            `wanted` accepts, in the order the archive stores them; each copy is deleted once the
                            caller moves on, so a corpus of any size needs the disk of its largest member only

Corpora come packed: a Kaggle data set is a .zip, a crawl or a book collection a .tar.gz (OpenWebText is tar files
inside a .tar.xz). Each member is copied out to a private scratch directory and read by its own name's format
(corpus.py), so every format a directory may hold is read inside an archive too, archives inside archives
included. A tar is read as a stream, never seeked, which is what a compressed tar allows cheaply.
"""

from __future__ import annotations

import gzip
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import IO

from .errors import UserError
from .textfiles import COMPRESSIONS, compression_of, open_member, read_errors

ZIP = ".zip"  # any other archive name is a tar's (textfiles.FORMATS names both)


def members(path: Path, wanted: Callable[[str], bool]) -> Iterator[tuple[str, Path]]:
    """(name inside the archive, local copy) for each regular file whose name `wanted` accepts."""
    with tempfile.TemporaryDirectory(prefix="bertforge-archive-") as scratch:
        for name, stream in _streams(path, wanted):
            copy = Path(scratch) / PurePosixPath(name).name  # its own name: the format is read from it
            try:
                with copy.open("wb") as out:
                    shutil.copyfileobj(stream, out)
            except (tarfile.TarError, *read_errors()) as e:
                raise UserError(f"{path}/{name}: cannot read it from the archive ({e})") from None
            finally:
                stream.close()
            try:
                yield name, copy
            finally:
                copy.unlink(missing_ok=True)


def _streams(path: Path, wanted: Callable[[str], bool]) -> Iterator[tuple[str, IO[bytes]]]:
    try:
        if path.name.lower().endswith(ZIP):
            yield from _zip_streams(path, wanted)
        else:
            yield from _tar_streams(path, wanted)
    except (tarfile.TarError, *read_errors()) as e:
        raise UserError(f"{path}: not a readable archive ({e})") from None


def _zip_streams(path: Path, wanted: Callable[[str], bool]) -> Iterator[tuple[str, IO[bytes]]]:
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.is_dir() or not wanted(info.filename):
                continue
            yield info.filename, open_member(archive, info, f"{path}/{info.filename}")


def _tar_streams(path: Path, wanted: Callable[[str], bool]) -> Iterator[tuple[str, IO[bytes]]]:
    opener = gzip.open if path.name.lower().endswith(".tgz") else COMPRESSIONS.get(compression_of(path) or "", open)
    with opener(path, "rb") as raw, tarfile.open(fileobj=raw, mode="r|") as archive:
        for info in archive:  # a stream: each member must be read before the next is reached
            if info.isfile() and wanted(info.name):
                yield info.name, archive.extractfile(info)
