"""The small exception hierarchy shared by the core and every adapter.

Adapters translate their library's exceptions into these types at the edge
(`raise TransientError(...) from exc`), so callers decide on retry versus give-up
by type, never by matching strings. Messages never carry secrets.

    SquiddError
    ├── ConfigError                     the process must not start (exit 2)
    ├── TransientError                  retry later
    │   ├── DeliveryError               a reply not handed over; its inbound stays unacked
    │   └── LLMUnavailableError         (also an LLMError) timeouts, 429/5xx, broken streams
    ├── PermanentError                  a human must act; retrying cannot help
    │   ├── DeliveryRefusedError        this reply refused for good (SMTP 5xx, M_FORBIDDEN)
    │   └── LLMRejectedError            (also an LLMError) this model refused the request
    │       ├── LLMContextOverflowError     the request is longer than the context window
    │       └── LLMCredentialsError         the API key is refused: no other model helps
    ├── LLMError                        the model could not answer (after retries, fallbacks)
    ├── StorageError                    a file of the data dir could not be read or written
    ├── ToolError                       shown to the model as the tool's result
    ├── TranscriptionError              a voice note could not be transcribed
    └── SpeechError                     an answer could not be spoken (the text still goes)

Each adapter maps its libraries' exceptions through one table with a test that every
exception class the library defines is in it: `llm/errors.py` (openai, httpx2),
`channels/matrix/errors.py` (matrix-nio, aiohttp), `channels/email/errors.py`
(aioimaplib, aiosmtplib). An exception a table does not translate is a defect: it leaves
unchanged, so it reaches a supervisor or the poison parking (`core/poison.py`: not
`is_passing`, so parked after `gateway.max_attempts`), never an endless retry.
"""

from __future__ import annotations


class SquiddError(Exception):
    """Base class of every error squidd raises on purpose."""


class ConfigError(SquiddError):
    """The configuration is invalid; the process must not start."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


class TransientError(SquiddError):
    """Worth retrying later: a network blip, a 5xx, a timeout, a server restart."""


class PermanentError(SquiddError):
    """Retrying will not help until a human acts: rejected credentials, a revoked token."""


class LLMError(SquiddError):
    """The language model could not produce an answer (after retries and fallbacks)."""


class LLMUnavailableError(LLMError, TransientError):
    """The endpoint did not answer or kept failing: timeouts, connection errors, 429/5xx.

    `retry_after_s` is the wait the server asked for (`Retry-After`), when it said one."""

    def __init__(self, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class LLMRateLimitedError(LLMUnavailableError):
    """429: this key asked too often, or (`quota`) its quota is spent; another key of the
    provider, or another provider, may answer at once."""

    def __init__(
        self, message: str, *, retry_after_s: float | None = None, quota: bool = False
    ) -> None:
        super().__init__(message, retry_after_s=retry_after_s)
        self.quota = quota


class LLMRejectedError(LLMError, PermanentError):
    """The endpoint refused the request: bad key, unknown model, malformed request."""


class LLMContextOverflowError(LLMRejectedError):
    """The request was longer than the model's context window (the provider said so)."""


class LLMCredentialsError(LLMRejectedError):
    """The endpoint does not accept the API key (401/403): no other model can help."""


class StorageError(SquiddError):
    """A file of the data dir could not be read or written; the message names the file."""


class DeliveryError(TransientError):
    """A reply could not be handed to its channel; the inbound message stays unacknowledged."""


class DeliveryRefusedError(PermanentError):
    """The destination refused this reply for good: an SMTP 5xx for the recipient or the
    message (unknown user, too large), a Matrix M_FORBIDDEN or M_TOO_LARGE. Sending it again
    cannot work, so the router ends the delivery instead of retrying."""


class ToolError(SquiddError):
    """A tool refused or failed; its message is shown to the model as the tool result."""


class TranscriptionError(SquiddError):
    """A voice note could not be transcribed (no endpoint, endpoint down, refused)."""


class SpeechError(SquiddError):
    """An answer could not be spoken: the speech endpoint is down, refused, timed out, or
    answered with something that is not Ogg/Opus. The written answer goes all the same."""


EXIT_OK = 0
"""Process exit code: done, or stopped by SIGTERM/SIGINT."""
EXIT_FAILURE = 1
"""Process exit code: a runtime failure (systemd restarts the service)."""
EXIT_CONFIG = 2
"""Process exit code: a configuration problem (the unit's RestartPreventExitStatus=2)."""
