"""Files that go out with a reply: typed references, never bytes.

The `send_file` tool adds a `FileRef` to the turn's `ReplyFiles`; the turn's answer is a
`Reply` (text and files), which the router keeps in the outbox as one `PendingReply`
before anything is uploaded. A crash after an upload but before the send therefore
resends the same reply (same references, same transaction ids), not a second one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FileKind = Literal["image", "file", "voice"]
"""`voice`: a spoken answer (Ogg/Opus), which Matrix shows as a voice note."""


@dataclass(frozen=True, slots=True)
class FileRef:
    """A file to send: where it is (absolute, checked by the tool), what it is, its name.

    `sha256` and `size` are what the tool saw; a channel sends the file as it is then.
    A voice note carries what its event claims: its length and a waveform (0..1024).
    """

    path: str
    kind: FileKind
    mime: str
    size: int
    sha256: str
    name: str
    duration_ms: int = 0
    waveform: tuple[int, ...] = ()


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
