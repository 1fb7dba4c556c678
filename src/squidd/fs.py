"""File primitives every layer may use: private modes, safe names, atomic writes, locked
appends.

These are synchronous on purpose; async callers run them through `anyio.to_thread`.

* Private by default, one rule: every directory squidd creates is 0700 and every file
  0600, whatever the umask. `make_private_dir` creates a directory and each missing parent
  0700 (pathlib's `mkdir(parents=True)` makes the parents with the umask's modes); the
  writers below create their files 0600; and the CLI runs every command under
  `private_umask()` (077), so files that libraries create on their own (SQLite, the Matrix
  crypto store) are private too. Nothing else in squidd picks a mode.

* `safe_name` turns any external id (Matrix room id, email address, cron job name) into a
  file name that cannot escape its directory and cannot collide with another id's name,
  even on a case-insensitive file system.
* `atomic_write_*` replaces a file whole (temp file, fsync, rename, fsync of the directory):
  a reader sees the old or the new content, never half of it.
* `append_lines_locked` appends whole lines under an exclusive `flock`, so two processes on
  the same data dir (the daemon and a `squidd chat`) never interleave or tear a line.
* Text is written as UTF-8 with any lone surrogate (e.g. from a model's `\\ud800` escape)
  replaced by U+FFFD (`squidd.text.utf8`): a write never fails on the text it is given.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from squidd.errors import StorageError
from squidd.text import clean_text, utf8

DIR_MODE = 0o700
FILE_MODE = 0o600
PRIVATE_UMASK = 0o077

_SLUG_BAD = re.compile(r"[^a-z0-9._-]+")
_SLUG_MAX = 48
_DIGEST_CHARS = 20  # 80 bits of SHA-256: no collision among any realistic number of ids


def safe_name(raw_id: str) -> str:
    """A readable, collision-free, traversal-proof file name for `raw_id`.

    The readable part is a lowercase slug (for humans browsing the data dir); uniqueness
    comes from a hash of the exact id, so `a:b` and `a__b`, or `Room` and `room`, differ.
    """
    slug = _SLUG_BAD.sub("_", raw_id.lower()).strip("._-")[:_SLUG_MAX].strip("._-")
    digest = hashlib.sha256(raw_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{slug or 'id'}-{digest[:_DIGEST_CHARS]}"


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """Run the block with umask 077 (whatever creates a file then makes it owner-only), and
    put the caller's umask back after it (a command run inside a test process)."""
    previous = os.umask(PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(previous)


def make_private_dir(path: Path) -> None:
    """Create `path` and every missing parent, each exactly 0700; an existing directory is
    left as it is (its owner may have chosen its mode). OSError when it cannot be made."""
    missing: list[Path] = []
    current = path
    while not os.path.lexists(current):
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            continue  # made meanwhile by another writer: theirs
        os.chmod(directory, DIR_MODE)  # exact, not whatever the umask left of it
    if not path.is_dir():
        raise NotADirectoryError(20, "not a directory", str(path))


def open_private(path: Path, flags: int) -> int:
    """`os.open(path, flags | O_CREAT)` creating the file 0600 (lock files, appends)."""
    return os.open(path, flags | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)


def fsync_dir(directory: Path) -> None:
    """Make the directory's entries durable (a file just created, renamed or removed)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, *, mode: int = FILE_MODE) -> None:
    """Replace `path` with `data` so that a crash leaves the old or the new file whole."""
    try:
        make_private_dir(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        fsync_dir(path.parent)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc


def atomic_write_text(path: Path, text: str, *, mode: int = FILE_MODE) -> None:
    atomic_write_bytes(path, utf8(text), mode=mode)


def read_text_or_empty(path: Path) -> str:
    """The file's text, '' when it does not exist; a clear error naming it otherwise."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except UnicodeDecodeError as exc:
        raise StorageError(f"cannot read {path}: not UTF-8 text") from exc
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from exc


def read_bytes_or_empty(path: Path) -> bytes:
    """The file's bytes, b'' when it does not exist; a clear error naming it otherwise."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from exc


@contextlib.contextmanager
def locked(fd: int, *, shared: bool = False) -> Iterator[None]:
    """Hold `flock` on the open file `fd` (exclusive, or shared) for the block."""
    fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def lock_file(path: Path, what: str) -> Iterator[None]:
    """An exclusive lock across processes on the lock file `path` (made 0600, its folder
    0700), for the block; `what` names the locked thing in a `StorageError`."""
    try:
        make_private_dir(path.parent)
        fd = open_private(path, os.O_RDWR)
    except OSError as exc:
        raise StorageError(f"cannot open {what}: {exc.strerror or exc}") from exc
    try:
        with locked(fd):
            yield
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data` to `fd` (`os.write` may write less than it is given)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def append_lines_locked(path: Path, lines: Sequence[str], *, fsync: bool = True) -> None:
    """Append `lines` (no newlines inside) as whole lines, under an exclusive file lock.

    If a previous writer crashed mid-line, the torn line is terminated first, so the new
    lines start clean and only the torn one is lost (readers skip it with a warning).
    """
    if not lines:
        return
    for line in lines:
        if "\n" in line or "\r" in line:
            raise ValueError("a line to append must not contain a line break")
    payload = utf8("".join(f"{line}\n" for line in lines))
    try:
        make_private_dir(path.parent)
        fd = open_private(path, os.O_WRONLY | os.O_APPEND)
    except OSError as exc:
        raise StorageError(f"cannot open {path} for append: {exc.strerror or exc}") from exc
    try:
        with locked(fd):
            size = os.fstat(fd).st_size
            if size > 0:
                with open(path, "rb") as reader:
                    reader.seek(size - 1)
                    if reader.read(1) != b"\n":
                        payload = b"\n" + payload
            write_all(fd, payload)
            if fsync:
                os.fsync(fd)
    except OSError as exc:
        raise StorageError(f"cannot append to {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)


_EXT = re.compile(r"\.([a-z0-9]{1,8})$")
_DISPLAY_MAX = 120


def safe_extension(raw_name: str) -> str:
    """The extension of an untrusted file name (".pdf"), or "" when it has no sane one.

    Only `[a-z0-9]{1,8}` after the last dot survives: the result can be appended to a name
    the caller made without ever adding a separator, a dot-dot or a NUL.
    """
    match = _EXT.search(raw_name.strip().lower())
    return f".{match.group(1)}" if match else ""


def display_name(raw_name: str) -> str:
    """An untrusted file name made fit to show (never to open): one line, no NUL, bounded.

    Path separators are kept out (the last component only), the text is made valid
    (`clean_text`: surrogates decoded or replaced, controls dropped), runs of white space
    (line breaks too) become one space and the result is cut to a readable length, keeping
    the extension.
    """
    base = raw_name.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = " ".join(clean_text(base).split())
    if cleaned in ("", ".", ".."):
        return "file"
    if len(cleaned) <= _DISPLAY_MAX:
        return cleaned
    ext = safe_extension(cleaned)
    return cleaned[: _DISPLAY_MAX - len(ext) - 1] + "…" + ext


def read_json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in `path`; None when the file is missing, empty, not JSON or not an
    object (the caller logs what that means for it). Other read errors raise StorageError."""
    text = read_text_or_empty(path)
    if not text.strip():
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def write_json_object(path: Path, data: dict[str, Any]) -> None:
    """`data` as indented, key-sorted JSON, replacing `path` atomically (0600)."""
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
