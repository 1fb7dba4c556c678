"""The API's bearer keys: read from the keys file, checked in constant time.

The file holds one key per line; blank lines and `#` comments are skipped. It must not be
group- or world-readable (like an SSH key), and it must hold at least one key: `[api]`
enabled without a key refuses to start, loopback too. Each key has a short id (a hash
prefix) under which its conversation, rate limit and stored replies are kept, so the key
itself never reaches a file name or a log line.
"""

from __future__ import annotations

import hashlib
import hmac
import stat
from pathlib import Path

from squidd.errors import ConfigError

MIN_KEY_CHARS = 16


def key_id(key: str) -> str:
    """A short, stable, non-secret name of `key`."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]


class ApiKeys:
    """The keys allowed in; `match` names the key a bearer token is, or None."""

    def __init__(self, keys: list[str]) -> None:
        self._keys = [(key.encode("utf-8"), key_id(key)) for key in keys]

    def __len__(self) -> int:
        return len(self._keys)

    def match(self, token: str) -> str | None:
        """The id of the key `token` is, comparing with every key in constant time."""
        given = token.encode("utf-8", "surrogateescape")
        found = None
        for key, kid in self._keys:
            if hmac.compare_digest(given, key):
                found = kid
        return found

    @classmethod
    def load(cls, path: Path) -> ApiKeys:
        """The keys in `path`; `ConfigError` (one line) when there is none or the file is
        readable by others."""
        hint = "run `squidd init` or write one key per line there, mode 0600"
        try:
            mode = path.stat().st_mode
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(
                [f"api.keys_file: [api] is enabled but {path} does not exist; {hint}"]
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError([f"api.keys_file: cannot read {path}: {exc}"]) from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ConfigError([f"api.keys_file: {path} is readable by others; chmod 600 it"])
        keys = [
            line.strip()
            for line in text.splitlines()
            if line.strip() and not line.strip().startswith("#")
        ]
        if not keys:
            raise ConfigError([f"api.keys_file: [api] is enabled but {path} holds no key; {hint}"])
        short = [n for n, k in enumerate(keys, 1) if len(k) < MIN_KEY_CHARS]
        if short:
            raise ConfigError(
                [
                    f"api.keys_file: key number {short[0]} in the file is shorter than "
                    f"{MIN_KEY_CHARS} characters"
                ]
            )
        return cls(keys)
