"""The answers of `squidd init --interactive` tried as they are given, through the same probes
as `squidd doctor`: the LLM's model list and one one-token request, the homeserver's
`/versions` and its server name, a Matrix password login (logged out again), an IMAP login
with the folder selected, an SMTP login (no mail sent). `Refused` says in plain words what
was refused and why, never a secret; `what` says which answer to ask again."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

import aiohttp

from squidd.channels.email.probe import probe_imap, probe_smtp
from squidd.channels.matrix.errors import NETWORK_ERRORS, describe
from squidd.config.email import EmailSettings
from squidd.config.sections import LLMSettings
from squidd.errors import LLMCredentialsError, LLMError, SquiddError
from squidd.llm.http import async_client
from squidd.llm.local import Kind, ServedModel, openai_base
from squidd.llm.probe import list_models, one_token, one_token_at

__all__ = [
    "Refused",
    "http_url_problem",
    "matrix_login",
    "matrix_server_name",
    "matrix_versions",
    "try_imap",
    "try_llm",
    "try_local_models",
    "try_local_token",
    "try_models",
    "try_smtp",
]

_TIMEOUT_S = 15.0


class Refused(Exception):
    """A trial failed: `what` (e.g. "password", "server", "key") and why, in words."""

    def __init__(self, what: str, why: str) -> None:
        super().__init__(why)
        self.what = what


def http_url_problem(url: str) -> str | None:
    """Why `url` is not an http(s) URL with a host, or None when it is one."""
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https"):
        return f"{url!r} has no http:// or https:// in front (e.g. https://{url or 'example.org'})"
    if not parsed.hostname:
        return f"{url!r} names no host"
    return None


async def try_models(settings: LLMSettings) -> list[str] | None:
    """The models the endpoint serves (None: it does not list them). Refused "key" or "url"."""
    try:
        return await list_models(settings)
    except LLMCredentialsError as exc:
        raise Refused("key", f"the endpoint refused the API key ({exc})") from None
    except LLMError as exc:
        raise Refused("url", f"the endpoint did not answer as an LLM API: {exc}") from None


async def try_llm(settings: LLMSettings) -> None:
    """One one-token request to the chosen model. Refused "key" or "model"."""
    try:
        await one_token(settings)
    except LLMCredentialsError as exc:
        raise Refused("key", f"the endpoint refused the API key ({exc})") from None
    except LLMError as exc:
        raise Refused("model", f"a one-token request to {settings.model} failed: {exc}") from None


async def try_local_models(kind: Kind, base_url: str) -> list[ServedModel]:
    """The models a local server (ollama, llamacpp, vllm) serves, each with its window.
    Refused "url" when it does not answer or lists none."""
    import httpx2

    from squidd.config.providers import ProviderSettings
    from squidd.llm.survey import try_provider

    provider = ProviderSettings(name="local", kind=kind, base_url=base_url)
    timeout = httpx2.Timeout(_TIMEOUT_S, connect=5.0)
    async with async_client(timeout=timeout) as client:
        trial = await try_provider(provider, client=client)
    if not trial.ok:
        raise Refused("url", f"{base_url} did not answer as a {kind} server: {trial.reason}")
    if not trial.models:
        raise Refused("url", f"{base_url} serves no model yet (pull or load one first)")
    return list(trial.models)


async def try_local_token(kind: Kind, base_url: str, model: str) -> None:
    """One one-token request to `model` on a local server (no key). Refused "model"."""
    try:
        await one_token_at(
            openai_base(kind, base_url), None, model, timeout_s=120.0, connect_timeout_s=5.0
        )
    except LLMError as exc:
        raise Refused("model", f"a one-token request to {model} failed: {exc}") from None


async def _get_json(url: str) -> tuple[int, Any]:
    timeout = aiohttp.ClientTimeout(total=_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url) as response:
        try:
            return response.status, await response.json(content_type=None)
        except ValueError:
            return response.status, None


async def matrix_versions(homeserver: str) -> None:
    """The homeserver answers `/_matrix/client/versions`; else Refused "url" saying why."""
    url = homeserver.rstrip("/") + "/_matrix/client/versions"
    try:
        status, body = await _get_json(url)
    except NETWORK_ERRORS as exc:
        raise Refused("url", f"{homeserver} cannot be reached ({describe(exc)})") from None
    if status != 200 or not isinstance(body, dict) or "versions" not in body:
        raise Refused("url", f"{homeserver} is no Matrix homeserver (HTTP {status} for {url})")


async def matrix_server_name(homeserver: str) -> str | None:
    """The server's name as it signs it (`/_matrix/key/v2/server`, served where federation
    is on the same listener); None when it does not say (the login tells it then)."""
    try:
        status, body = await _get_json(homeserver.rstrip("/") + "/_matrix/key/v2/server")
    except NETWORK_ERRORS:
        return None
    name = body.get("server_name") if status == 200 and isinstance(body, dict) else None
    return name if isinstance(name, str) and name else None


async def matrix_login(homeserver: str, user: str, password: str) -> str:
    """Log in as `user` (its name part: the server completes the id) and out again; the
    full user id the server answers. Refused "login" (id or password) or "url"."""
    local = user[1:].partition(":")[0] if user.startswith("@") else user
    body = {
        "type": "m.login.password",
        "identifier": {"type": "m.id.user", "user": local},
        "password": password,
        "initial_device_display_name": "squidd set-up",
    }
    base = homeserver.rstrip("/") + "/_matrix/client/v3"
    timeout = aiohttp.ClientTimeout(total=_TIMEOUT_S)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            async with session.post(f"{base}/login", json=body) as response:
                data = await response.json(content_type=None)
                status = response.status
            if status >= 300 or not isinstance(data, dict) or "access_token" not in data:
                why = data.get("error") if isinstance(data, dict) else None
                raise Refused("login", f"the homeserver refused {local} with this password ({why})")
            headers = {"Authorization": f"Bearer {data['access_token']}"}
            async with session.post(f"{base}/logout", json={}, headers=headers):
                pass
    except NETWORK_ERRORS as exc:
        raise Refused("url", f"{homeserver} cannot be reached ({describe(exc)})") from None
    return str(data.get("user_id", user))


async def try_imap(settings: EmailSettings) -> None:
    """An IMAP login with the folder selected. Refused "password" or "server"."""
    try:
        await probe_imap(settings)
    except (SquiddError, OSError) as exc:
        what = "password" if "login" in str(exc) else "server"
        raise Refused(what, f"IMAP: {exc}") from None


async def try_smtp(settings: EmailSettings) -> None:
    """An SMTP login, no mail sent. Refused "password" or "server"."""
    try:
        await probe_smtp(settings)
    except (SquiddError, OSError) as exc:
        what = "password" if "login" in str(exc) else "server"
        raise Refused(what, f"SMTP: {exc}") from None
