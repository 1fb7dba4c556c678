"""The answers of `squidd init --interactive` tried before anything is written, through the
same probes as `squidd doctor`: one one-token LLM request, a Matrix password login (logged
out again), an IMAP login with the folder selected, an SMTP login (no mail sent).
`Refused` names the first answer refused ("the IMAP password"), never its value."""

from __future__ import annotations

from collections.abc import Callable

from squidd.channels.email.probe import probe_imap, probe_smtp
from squidd.channels.matrix.identity.api import ApiError
from squidd.channels.matrix.probe import MatrixProbe
from squidd.config import Settings
from squidd.errors import LLMCredentialsError, LLMError, SquiddError
from squidd.llm.probe import one_token

__all__ = ["Refused", "try_settings"]


class Refused(Exception):
    """A trial failed: `what` (e.g. "the IMAP password") and why."""

    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"{what}: {why}")
        self.what = what


async def try_settings(settings: Settings, say: Callable[[str], object]) -> None:
    """Each answer tried once (`say` tells the person what is being tried); `Refused`
    names the first one refused."""
    say("\ntrying the LLM endpoint with a one-token request…")
    try:
        await one_token(settings.llm)
    except LLMCredentialsError as exc:
        raise Refused("the LLM API key", str(exc)) from None
    except LLMError as exc:
        raise Refused("the LLM endpoint or model", str(exc)) from None
    if settings.matrix.enabled:
        say("logging in to Matrix…")
        probe = MatrixProbe(settings.matrix, settings.storage.data_dir)
        try:
            await probe.login()
        except ApiError as exc:
            raise Refused("the Matrix password (or user id)", str(exc)) from None
        except (SquiddError, OSError) as exc:
            raise Refused("the Matrix homeserver", str(exc)) from None
        finally:
            await probe.close()
    if settings.email.enabled:
        for what, trial in (("IMAP", probe_imap), ("SMTP", probe_smtp)):
            say(f"logging in to {what} (no mail read or sent)…")
            try:
                await trial(settings.email)
            except (SquiddError, OSError) as exc:
                wrong = "password" if "login" in str(exc) else "server"
                raise Refused(f"the {what} {wrong}", str(exc)) from None
