"""Files that go out with a reply: typed references, never bytes.

The `send_file` tool adds a `FileRef` to the turn's `ReplyFiles`; the turn's answer is a
`Reply` (text and files), which the router keeps in the outbox as one `PendingReply`
before anything is uploaded. A crash after an upload but before the send therefore
resends the same reply (same references, same transaction ids), not a second one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

FileKind = Literal["image", "file"]


@dataclass(frozen=True, slots=True)
class FileRef:
    """A file to send: where it is (absolute, checked by the tool), what it is, its name.

    `sha256` and `size` are what the tool saw; a channel sends the file as it is then.
    """

    path: str
    kind: FileKind
    mime: str
    size: int
    sha256: str
    name: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "mime": self.mime,
            "size": self.size,
            "sha256": self.sha256,
            "name": self.name,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FileRef:
        kind = data.get("kind")
        if kind not in ("image", "file"):
            raise ValueError(f"unknown file kind: {kind!r}")
        return cls(
            path=str(data["path"]),
            kind=kind,
            mime=str(data.get("mime") or "application/octet-stream"),
            size=int(data.get("size", 0)),
            sha256=str(data.get("sha256", "")),
            name=str(data.get("name", "")),
        )


def files_from(data: object) -> tuple[FileRef, ...]:
    """The `files` of a stored reply; absent (older entries) is none."""
    if data is None:
        return ()
    if not isinstance(data, list):
        raise TypeError("files must be a list")
    return tuple(FileRef.from_dict(item) for item in data)


@dataclass(frozen=True, slots=True)
class Reply:
    """What a turn answers: its text and the files it attaches."""

    text: str
    files: tuple[FileRef, ...] = ()


class ReplyFiles:
    """The files one turn attached, in order; the same file twice is attached once."""

    def __init__(self, max_files: int = 10) -> None:
        self._files: list[FileRef] = []
        self.max_files = max_files

    def add(self, ref: FileRef) -> bool:
        """Attach `ref`; False when the same content under the same name already is."""
        if any(f.sha256 == ref.sha256 and f.name == ref.name for f in self._files):
            return False
        if len(self._files) >= self.max_files:
            raise ValueError(f"a reply carries at most {self.max_files} files")
        self._files.append(ref)
        return True

    @property
    def files(self) -> tuple[FileRef, ...]:
        return tuple(self._files)
