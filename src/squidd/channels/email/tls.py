"""The TLS context both mail connections verify their server with.

One context serves IMAP (implicit TLS or STARTTLS) and SMTP: the system CAs, plus the
configured `email.ca_file` for a self-hosted server with its own CA. A file that cannot be
loaded is a configuration error, raised at construction, before any connection is tried.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from squidd.errors import ConfigError

__all__ = ["make_tls_context"]


def make_tls_context(ca_file: Path | None) -> ssl.SSLContext:
    """Verifying TLS context: the system CAs, plus `ca_file` for a self-hosted server."""
    context = ssl.create_default_context()
    if ca_file is not None:
        try:
            context.load_verify_locations(cafile=str(ca_file))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError([f"email.ca_file: cannot load {ca_file}: {exc}"]) from None
    return context
