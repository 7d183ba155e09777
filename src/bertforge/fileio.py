"""Files read bounded, files and directories written whole or not at all, and directories one process at a time.

    read_bounded / read_json    a file another program wrote, its size checked by its kind before it is read
    check_not_inputs(...)       no command writes over anything it reads
    write_text / write_json     a file replaced in one rename: a kill leaves the old file or the new one
    atomic_directory(target)    a directory built under a temporary sibling and renamed into place when
                                complete; what a killed writer left behind is cleared by the next one
    directory_lock(dir)         an advisory lock (flock on the directory) held while a run or prepare uses it: a
                                second process is refused in one line naming the holder

Everything written follows the umask, as files any other tool writes do. Also where the package's own files
(assets/) are found.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import hashlib
import importlib.resources
import io
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import UserError

try:
    import fcntl
except ImportError:  # Windows: no advisory locks, and none taken
    fcntl = None


def asset_path(name: str) -> Path:
    """A file shipped in bertforge/assets (the bundled corpora, the modeling file for `transformers`)."""
    return Path(str(importlib.resources.files("bertforge") / "assets" / name))


# The most bytes bertforge reads of each kind of file a user hands it, before it reads any: far above every released
# file of the kind (a model's config.json is a few KB, XLM-R's tokenizer.json 17 MB, a 250k-piece vocab.txt 3 MB),
# far below what would exhaust memory (a 1 GB config.json took 2.4 GB to refuse).
FILE_LIMITS = {
    "config": 1 << 20,  # config.json, special_tokens_map.json, a module's config
    "tokenizer_config": 16 << 20,  # tokenizer_config.json (added tokens may be listed in it)
    "tokenizer": 256 << 20,  # tokenizer.json
    "vocabulary": 64 << 20,  # vocab.txt, vocab.json, merges.txt, a SentencePiece model
    "card": 1 << 20,  # README.md
}
MAX_JSON_DIGITS = 40  # transformers writes int(1e30), 31 digits, for "no limit"; a 5,000-digit integer is an attack


def read_bounded(path: str | Path, kind: str) -> bytes:
    """A file's bytes, refused in one line, unread, when it is larger than FILE_LIMITS[kind]."""
    path = Path(path)
    check_size(path, kind)
    try:
        with open(path, "rb") as f:
            return f.read(FILE_LIMITS[kind] + 1)
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror or e})") from None


def check_size(path: str | Path, kind: str) -> None:
    """Refuse, unread, a file larger than FILE_LIMITS[kind] (before this or another library reads it)."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror or e})") from None
    if size > FILE_LIMITS[kind]:
        raise UserError(f"{path}: {size:,} bytes, more than a {kind} file holds (at most {FILE_LIMITS[kind]:,})")


def read_json(path: str | Path, kind: str = "config") -> Any:
    """A JSON file another program wrote: bounded in size (`read_bounded`), in nesting (Python's parser stops at
    its recursion limit) and in the digits of a number; anything else wrong with it is one line naming the file."""
    return parse_json(read_bounded(Path(path), kind), Path(path), kind)


def parse_json(data: bytes, path: Path, kind: str = "config") -> Any:
    """`read_json`'s parsing, of a file's bytes read already (`read_bounded`): for a file that is kept as it was
    as well as read (a sentence-transformers module's), so that it is opened once."""

    def bounded_int(text: str) -> int:
        if len(text.lstrip("-")) > MAX_JSON_DIGITS:
            raise ValueError(f"a number of {len(text):,} digits")
        return int(text)

    try:
        return json.loads(data.decode("utf-8"), parse_int=bounded_int)
    except RecursionError:
        raise UserError(f"{path}: nested too deeply to be a {kind} file") from None
    except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError is a ValueError
        raise UserError(f"{path}: not valid JSON ({str(e).splitlines()[0][:200]})") from None


def _umask() -> int:
    """The process's umask (read by setting it, then putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _publishable(root: Path) -> None:
    """Every file and directory below `root` on disk, so that the rename that publishes it publishes data, and
    with the modes the umask gives (libraries write some files 0600, as safetensors does)."""
    mask = _umask()
    for directory, _, files in os.walk(root):
        for name in files:
            with open(Path(directory) / name, "rb") as f:
                os.fchmod(f.fileno(), 0o666 & ~mask)
                os.fsync(f.fileno())
        os.chmod(directory, 0o777 & ~mask)  # mkdtemp's 0700 is for secrets
        _fsync_dir(Path(directory))


def write_json(path: str | Path, data: Any) -> None:
    """Write JSON atomically (`write_text`)."""
    write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def write_text(path: str | Path, text: str) -> None:
    """Write text to a temporary file beside `path`, fsync it, then rename over `path`."""
    write_bytes(path, text.encode("utf-8"))


def write_bytes(path: str | Path, data: bytes) -> None:
    """Write bytes to a temporary file beside `path`, fsync it, then rename over `path`."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 is for secrets; this is the user's file
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def check_not_inputs(outputs: dict[str, Any], inputs: dict[str, Any]) -> None:
    """No command writes over anything it reads. Each output (flag -> a path it writes: a file, or a directory it
    writes whole) is compared with each input (flag -> a path or paths it reads) as resolved real paths (links
    followed, hard links found): refused in one line, before any work, where it is the input, holds it (replacing
    the output would remove the input) or lies inside an input directory (the command would write into what it
    reads)."""
    read = [(flag, Path(path)) for flag, paths in inputs.items() for path in _paths(paths)]
    for out_flag, out in ((flag, Path(path)) for flag, paths in outputs.items() for path in _paths(paths)):
        target = Path(os.path.realpath(out))
        for in_flag, source in read:
            if not source.exists():
                continue
            real = Path(os.path.realpath(source))
            if target == real or (target.exists() and os.path.samefile(target, real)):
                how = "is"
            elif target in real.parents:
                how = "holds"
            elif real.is_dir() and real in target.parents:
                how = "is inside"
            else:
                continue
            raise UserError(
                f"{out_flag} {out} {how} {in_flag} {source}, which this command reads: give another {out_flag}"
            )


def _paths(value: Any) -> list[Any]:
    if value is None:
        return []
    return [p for p in value if p is not None] if isinstance(value, (list, tuple)) else [value]


TABLE_OUTPUTS = (".csv", ".tsv", ".jsonl")  # what the answering commands' --out writes


def table_output(path: str | Path) -> Path:
    """`path`, if `write_answers` can write it: checked before a model runs, not after."""
    path = Path(path)
    if path.suffix.lower() not in TABLE_OUTPUTS:
        raise UserError(f"{path}: answers are written as {', '.join(TABLE_OUTPUTS)}; name the file so")
    check_writable(path.parent)
    return path


def write_answers(
    path: str | Path, records: list[dict[str, Any]], rows: list[dict[str, Any]], columns: list[str]
) -> None:
    """A command's answers, written atomically: to .jsonl the `records` as they are, a line each; to .csv or .tsv
    their flat `rows` under `columns`, which a spreadsheet opens as it is."""
    path = table_output(path)
    if path.suffix.lower() == ".jsonl":
        write_text(path, "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))
        return
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
    writer.writeheader()
    writer.writerows({key: spreadsheet_safe(value) for key, value in row.items()} for row in rows)
    write_text(path, out.getvalue())


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet runs as a formula at a cell's start


def spreadsheet_safe(value: Any) -> Any:
    """A text cell that a spreadsheet would run as a formula (`=HYPERLINK(...)`, `+cmd|...`), with an apostrophe
    before it, as OWASP advises: shown as the text it is. Numbers (a negative score) are left as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


PROBE_PREFIX = ".bertforge-probe-"  # check_writable's file, there for a moment; never a user's


def check_writable(path: str | Path) -> None:
    """Meet, before any work, the OSError (a read-only file system, a folder not the user's) that writing `path`
    would meet after it: a temporary file is made and removed in `path`, or in the nearest folder above it that
    exists."""
    directory = Path(path).absolute()
    while not directory.is_dir():
        directory = directory.parent
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=PROBE_PREFIX)
    except OSError as e:  # also what no errno names for a user: a pseudo-file system (/proc) takes no new files
        raise UserError(f"{path}: bertforge cannot write there ({e.strerror or e}); nothing was written") from None
    os.close(fd)
    os.unlink(probe)


def check_output_dir(out: Path, overwrite: bool, what: str, ours: bool) -> None:
    """An --out a command may (re)write as a whole: new, empty, or holding `what` (`ours`: it holds nothing
    else) and `overwrite` given, on a file system it can write. A directory holding anything else is never
    replaced."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: a file, not a directory")
    check_writable(out)
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not ours:
        raise UserError(f"--out {out} holds files that are not {what}; choose another directory")
    if not overwrite:
        raise UserError(f"{out} already holds {what}; pass --overwrite to replace it")


# A directory being written is `.NAME.tmp-PID-XXXX` beside NAME; one being replaced, `.NAME.old-XXXX` for a moment.
_TEMPORARY = re.compile(r"\.(?P<name>.+)\.(?P<kind>tmp|old)-(?:(?P<pid>\d+)-)?[^/]*")


@contextlib.contextmanager
def atomic_directory(target: str | Path) -> Iterator[Path]:
    """Yield a temporary sibling directory; on success it replaces `target` in one rename.

    If the body raises (a full disk, an interruption), the temporary directory is removed and `target`, if it
    existed, is untouched. A SIGKILL leaves the temporary directory, named `.TARGET.tmp-PID-...`: never read as
    data (a hidden name), and removed by the next writer of `target` once its process is gone. The writer holds
    a lock on it while it writes, so that a concurrent writer's clean-up leaves it alone.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned(target.parent, target.name)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.tmp-{os.getpid()}-"))
    held = _hold(tmp)
    try:
        yield tmp
        _publishable(tmp)
        if target.exists():
            # Two renames: the old directory is moved aside before the new one takes its name. A kill between
            # them leaves the old one in .TARGET.old-*, which the next writer puts back (remove_abandoned).
            old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.old-"))
            os.replace(target, old / target.name)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
        _fsync_dir(target.parent)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        fault = write_fault(e, target)
        if fault is not None:
            raise fault from None
        raise
    finally:
        if held is not None:
            os.close(held)


_OS_ERROR_CODE = re.compile(r"os error (\d+)|code: (\d+)")  # how the Rust writers (safetensors) say an errno


def write_fault(error: BaseException, where: Path) -> OSError | None:
    """A writer's failure to write, whatever library raised it, as the OSError it is (None for any other error):
    safetensors says "os error 28" in a SafetensorError, torch.save "unexpected pos" or "failed writing file" in
    a RuntimeError, with no errno at all; a full disk is then told by the room left. The command line ends on
    an OSError in one line (cli.main)."""
    if isinstance(error, OSError) or not isinstance(error, Exception):
        return None
    text = str(error)
    code = next((int(g) for m in _OS_ERROR_CODE.finditer(text) for g in m.groups() if g), None)
    if code is None and ("unexpected pos" in text or "failed writing" in text):
        try:
            code = errno.ENOSPC if shutil.disk_usage(where.parent).free < (64 << 20) else errno.EIO
        except OSError:
            code = errno.EIO
    return OSError(code, os.strerror(code), str(where)) if code is not None else None


def remove_abandoned(parent: Path, name: str = "*") -> None:
    """What killed writers of `parent/name` left: temporary directories whose process is gone are removed, and a
    directory moved aside to be replaced comes back where the replacement never arrived. `name` may be a glob."""
    if not parent.is_dir():
        return
    for leftover in sorted(parent.glob(f".{name}.*-*")):
        match = _TEMPORARY.fullmatch(leftover.name)
        if match is None or not leftover.is_dir():
            continue
        if match["kind"] == "old":
            original = parent / match["name"]
            if not original.exists() and (leftover / match["name"]).is_dir():
                os.replace(leftover / match["name"], original)
            shutil.rmtree(leftover, ignore_errors=True)
        elif not _alive(match["pid"]) and (held := _hold(leftover)) is not None:
            shutil.rmtree(leftover, ignore_errors=True)
            os.close(held)


def _alive(pid: str | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _hold(directory: Path) -> int | None:
    """An exclusive lock on a directory we write (its descriptor; close it to release), or None if another
    process holds one or the platform has none."""
    if fcntl is None:
        return None
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


@contextlib.contextmanager
def directory_lock(directory: str | Path, shared: bool = False) -> Iterator[None]:
    """Hold an advisory lock on `directory` (created if need be) while the body runs.

    Exclusive: the one process that writes it (a run, `prepare`). Shared: processes that read it (runs reading a
    data directory), which keeps a writer out. A lock that cannot be had is one line naming the holder's pid.
    The lock is taken on the directory itself, so that nothing is written into it (a data directory stays byte
    for byte what `prepare` wrote, and one this user may only read can still be locked), and it goes with the
    process, so a killed holder never blocks the next. Where the file system has no such locks, none is taken.
    """
    directory = Path(directory)
    if fcntl is None:
        yield
        return
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory, os.O_RDONLY)
    _HELD_LOCKS.add(fd)
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                yield  # a file system without flock (some network ones): no lock to take
                return
            raise UserError(
                f"{directory} is in use by another bertforge process ({_holder(fd)}); wait for it to finish, or stop it"
            ) from None
        if not shared:  # its writer: told now if it cannot write there, not when the work is done
            check_writable(directory)
        yield
    finally:
        _HELD_LOCKS.discard(fd)
        os.close(fd)


# The descriptors this process holds its directory locks by. A forked child (a data-loader worker) shares them, and
# with them the locks: once the parent is killed, a child still alive would keep the run locked.
_HELD_LOCKS: set[int] = set()


def release_inherited_locks() -> None:
    """In a forked child: close the descriptors of the parent's locks, which stay the parent's alone (a lock ends
    when every descriptor of it is closed, so the parent's own keeps it)."""
    for fd in list(_HELD_LOCKS):
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD_LOCKS.clear()


def _holder(fd: int) -> str:
    """Which process holds the lock on the file behind `fd`: "pid N", read from Linux's /proc/locks."""
    inode = os.fstat(fd).st_ino
    try:
        with open("/proc/locks", encoding="ascii") as locks:
            for line in locks:  # "1: FLOCK  ADVISORY  WRITE 1234 fd:00:5678 0 EOF"
                fields = line.split()
                if len(fields) > 5 and fields[1] == "FLOCK" and fields[5].rsplit(":", 1)[-1] == str(inode):
                    return f"pid {fields[4]}"
    except OSError:
        pass
    return "its pid unknown"


def sha256_of(path: Path) -> str:
    """A file's sha256, read a few MB at a time: a checkpoint's checksums, an export's graph digest."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()
