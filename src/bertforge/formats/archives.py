"""Files inside archives: a .zip, or a .tar (also .tar.gz, .tgz, .tar.bz2, .tar.xz, .tar.zst), read a member at a time.

    members(path, wanted, limits)   each regular file of the archive whose name `wanted` accepts, in the order the
                                    archive stores them, as a `Member`: its bytes as a stream (what a text
                                    format reads), or copied to a private scratch directory (what a format read
                                    from a path needs: documents, spreadsheets, archives inside archives)

Corpora come packed: a Kaggle data set is a .zip, a crawl or a book collection a .tar.gz (OpenWebText is tar files
inside a .tar.xz). Every format a directory may hold is read inside an archive too. A tar is read as a stream,
never seeked, which is what a compressed tar allows cheaply, and its members are let go as it goes (tarfile keeps
each one it has seen: 480 bytes a member, a gigabyte for an archive of millions of empty files).

Archives are untrusted input, and bounded (`ArchiveLimits`): a member that expands more than `max_ratio` times its
compressed size is refused (text compresses 3 to 10 times; a zip bomb a thousand times and more), a member is
copied out only up to `max_copy` bytes, archives nest at most MAX_DEPTH deep, and the scratch directory is removed
however the reading ends, the process's exit included.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import gzip
import io
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

from ..errors import UserError
from .textfiles import MAX_EXPANSION, Bounded, ExpandedBytes, decompressed, open_member, read_errors

ZIP = ".zip"  # any other archive name is a tar's (catalog.py names both)
MAX_DEPTH = 8  # archives inside archives inside ...: deeper is refused
_SCRATCH: set[Path] = set()  # scratch directories in use, removed at exit if reading never returned


@dataclass(frozen=True)
class ArchiveLimits:
    """How far an archive may expand: the ratio of a member's bytes to its compressed bytes, and the bytes of a
    member copied to scratch disk."""

    max_ratio: float = MAX_EXPANSION
    max_copy: int = 1 << 30


@dataclass
class Member:
    """A file inside an archive: its name there, and its bytes, expanded and checked against the limits."""

    name: str
    stream: IO[bytes]
    index: int  # its place among the archive's members read: a scratch copy's name
    scratch: Path = field(repr=False, default=Path())
    limits: ArchiveLimits = field(repr=False, default_factory=ArchiveLimits)
    where: str = ""  # the archive and member, for messages

    @contextlib.contextmanager
    def copy(self) -> Iterator[Path]:
        """The member copied to scratch disk (at most `max_copy` bytes), deleted when the body is done. The copy is
        named by its index and the member's last suffixes: the format is read from them, and a member's own name
        may be longer than the file system takes."""
        suffixes = "".join(PurePosixPath(self.name).suffixes[-2:])[-24:]
        path = self.scratch / f"{self.index}{suffixes}"
        try:
            with path.open("wb") as out:
                while chunk := self.stream.read(1 << 20):
                    if out.tell() + len(chunk) > self.limits.max_copy:
                        raise UserError(
                            f"{self.where}: larger than the {self.limits.max_copy:,} bytes an archive member may "
                            "be copied out at (--max-member-size raises it)"
                        )
                    out.write(chunk)
            yield path
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise UserError(
                    f"{self.where}: no room to unpack it in {self.scratch.parent} (TMPDIR); make room, or point "
                    "TMPDIR at a larger disk"
                ) from None
            raise
        finally:
            path.unlink(missing_ok=True)


def members(path: Path, wanted: Callable[[str], bool], limits: ArchiveLimits | None = None) -> Iterator[Member]:
    """Each regular file whose name `wanted` accepts, as a `Member`; read each before the next."""
    limits = limits or ArchiveLimits()
    scratch = Path(tempfile.mkdtemp(prefix="bertforge-archive-"))
    _SCRATCH.add(scratch)
    try:
        for index, (name, stream) in enumerate(_streams(path, wanted, limits)):
            where = f"{path}/{name}"
            try:
                yield Member(name, stream, index, scratch, limits, where)
            except (tarfile.TarError, *read_errors()) as e:
                if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
                    raise
                raise UserError(f"{where}: cannot read it from the archive ({e})") from None
            finally:
                stream.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        _SCRATCH.discard(scratch)


@atexit.register
def _remove_scratch() -> None:
    """Scratch a reader left when the process ended under it (an interrupted thread's generator never unwinds)."""
    for scratch in list(_SCRATCH):
        shutil.rmtree(scratch, ignore_errors=True)


def _streams(path: Path, wanted: Callable[[str], bool], limits: ArchiveLimits) -> Iterator[tuple[str, IO[bytes]]]:
    try:
        if path.name.lower().endswith(ZIP):
            yield from _zip_streams(path, wanted, limits)
        else:
            yield from _tar_streams(path, wanted, limits)
    except (tarfile.TarError, *read_errors()) as e:
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise UserError(f"{path}: not a readable archive ({e})") from None


def _zip_streams(path: Path, wanted: Callable[[str], bool], limits: ArchiveLimits) -> Iterator[tuple[str, IO[bytes]]]:
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.is_dir() or not wanted(info.filename):
                continue
            where = f"{path}/{info.filename}"
            raw = open_member(archive, info, where)
            yield info.filename, Bounded(raw, lambda size=info.compress_size: size, limits.max_ratio, where)


def _tar_streams(path: Path, wanted: Callable[[str], bool], limits: ArchiveLimits) -> Iterator[tuple[str, IO[bytes]]]:
    """A tar's members as a stream; the ratio is the tar's bytes so far to the compressed file's bytes so far."""
    with open(path, "rb") as file:
        counted = _Counted(file)
        tgz = path.name.lower().endswith(".tgz")
        compressed = gzip.GzipFile(fileobj=counted) if tgz else decompressed(counted, path.name)
        with compressed, tarfile.open(fileobj=compressed, mode="r|") as archive:
            expanded = ExpandedBytes()
            for info in archive:  # a stream: each member must be read before the next is reached
                archive.members = []  # tarfile keeps every member it has seen; the stream needs none of them
                if info.isfile() and wanted(info.name):
                    where = f"{path}/{info.name}"
                    stream = archive.extractfile(info)
                    yield info.name, Bounded(stream, lambda: counted.count, limits.max_ratio, where, expanded)


class _Counted(io.RawIOBase):
    """A file's bytes, counted as they are read (how much of a compressed tar has been read)."""

    def __init__(self, raw: IO[bytes]):
        self.raw, self.count = raw, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.raw.readinto(buffer)
        self.count += n or 0
        return n
