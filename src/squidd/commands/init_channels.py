"""The Matrix and email questions of `squidd init --interactive`, each answer checked as it
is given (see init_ask.py): the homeserver answers and says its name, so the bot's default
id is the one it can log in with; the login is tried before the next question; the mail
servers' logins are tried before the senders are asked. A wrong answer is asked again with
the reason; a password already given is kept unless it was the one refused."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from squidd.commands.init_ask import Answers, ask, ask_secret, ask_until, tried
from squidd.config.email import EmailSettings
from squidd.ops.doctor.trials import (
    Refused,
    http_url_problem,
    matrix_login,
    matrix_server_name,
    matrix_versions,
    try_imap,
    try_smtp,
)

__all__ = ["ask_email", "ask_matrix"]

_MXID = re.compile(r"^@[a-z0-9._=/+-]+:[A-Za-z0-9.:\[\]-]+$")
_ADDRESS = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.replace(";", ",").split(",") if part.strip()]


def _homeserver(url: str) -> str | None:
    problem = http_url_problem(url)
    if problem is not None:
        return problem
    try:
        tried(f"asking {url} for its Matrix versions", lambda: matrix_versions(url))
    except Refused as exc:
        return str(exc)
    return None


def _bot_id_problem(user: str, *, server: str | None) -> str | None:
    if server is None and re.fullmatch(r"[a-z0-9._=/+-]+", user):
        return None  # a bare name: the login completes it
    if not _MXID.match(user):
        example = f"@{user.lstrip('@') or 'squidd'}:{server or 'example.org'}"
        return f"{user!r} is not a Matrix id: write it as {example}"
    if server is not None and user.partition(":")[2] != server:
        local = user[1:].partition(":")[0]
        return f"this homeserver's name is {server}: the id is @{local}:{server}"
    return None


def _users_problem(text: str, *, server: str) -> str | None:
    for name in _names(text):
        if not _MXID.match(name):
            return f"{name!r} is not a Matrix id: write it as @{name.lstrip('@')}:{server}"
    return None


def _matrix_account(
    homeserver: str, current: dict[str, Any], kept: str | None
) -> tuple[str, str | None]:
    """The bot's full id (as the server answers it at login) and its password (None: the
    one the config has, `kept`, still works)."""
    server: str | None = tried("reading its server name", matrix_server_name, homeserver)
    user = str(current.get("user_id") or (f"@squidd:{server}" if server else "squidd"))
    password: str | None = None
    while True:
        hint = "" if server else " (or just its name: the login completes it)"
        check = partial(_bot_id_problem, server=server)
        user = ask_until(f"The bot's Matrix id{hint}", user, check)
        if password is None:
            keep = " (empty: keep the current one)" if kept else ""
            password = ask_secret(f"Password of {user}{keep}") or kept or ""
        try:
            real = tried("logging in", matrix_login, homeserver, user, password)
        except Refused as exc:
            print(f"  {exc}; please try again")
            password = kept = None
            continue
        real_server = real.partition(":")[2]
        if user.startswith("@") and user != real:
            print(f"  this homeserver's name is {real_server}: the bot's id there is {real}")
            server = real_server
            user = real
            continue  # asked again; the password is kept
        print(f"  logged in as {real}")
        return real, (None if password == kept else password)


def ask_matrix(answers: Answers, current: dict[str, Any], kept: str | None = None) -> None:
    """`kept`: the password the config has now (a re-run), offered as the empty answer."""
    print("\nMatrix")
    url = str(current.get("homeserver") or "https://matrix.org")
    homeserver = ask_until("Homeserver URL", url, _homeserver)
    user, password = _matrix_account(homeserver, current, kept)
    server = user.partition(":")[2]
    allowed = ", ".join(current.get("allowed_users") or [])
    who = ask_until(
        f"Who may talk to it (Matrix ids such as @you:{server}, comma-separated)",
        allowed,
        partial(_users_problem, server=server),
    )
    answers.sections["matrix"] = {
        "enabled": True,
        "homeserver": homeserver,
        "user_id": user,
        "allowed_users": _names(who),
    }
    if password is not None:
        answers.secrets["matrix_password"] = password


def _port_problem(text: str) -> str | None:
    ok = text.isdigit() and 0 < int(text) < 65536
    return None if ok else f"{text!r} is not a port number (1-65535)"


def _security_problem(text: str) -> str | None:
    return None if text in ("tls", "starttls", "none") else "answer tls, starttls or none"


def _ca_problem(text: str) -> str | None:
    if text and not Path(text).expanduser().is_file():
        return f"there is no file {text}"
    return None


def _server(kind: str, host: str, port: str, security: str) -> tuple[str, str, str]:
    host = ask(f"{kind} server", host)
    port = ask_until(f"{kind} port", port, _port_problem)
    security = ask_until(f"{kind} security (tls, starttls, none)", security, _security_problem)
    return host, port, security


def _email_settings(values: dict[str, Any], password: str) -> EmailSettings:
    ints = {k: int(v) for k, v in values.items() if k.endswith("_port")}
    # The IMAP trial comes before the SMTP questions: a stand-in host lets the section load.
    stand_in = {
        "smtp_host": values.get("smtp_host") or values["imap_host"],
        "trusted_authserv_id": values.get("trusted_authserv_id") or values["imap_host"],
    }
    return EmailSettings(**{**values, **ints, **stand_in}, password=SecretStr(password))


def ask_email(answers: Answers, current: dict[str, Any]) -> None:
    print("\nEmail")
    address = ask_until(
        "The bot's address",
        str(current.get("address", "")),
        lambda a: None if _ADDRESS.match(a) else f"{a!r} is not an email address",
    )
    domain = address.rpartition("@")[2]
    values: dict[str, Any] = {"enabled": True, "address": address}
    imap = (str(current.get("imap_host") or f"imap.{domain}"), "993", "tls")
    values["username"] = ask("Login name", str(current.get("username") or address))
    ca = ask_until("Extra CA certificate for a self-hosted server (empty: none)", "", _ca_problem)
    if ca:
        values["ca_file"] = str(Path(ca).expanduser().resolve())
    password: str | None = None
    server_wrong = True
    while True:
        if server_wrong:
            imap = _server("IMAP", *imap)
            values.update(imap_host=imap[0], imap_port=imap[1], imap_security=imap[2])
        password = password or ask_secret(f"Password of {values['username']}")
        try:
            tried("logging in to IMAP (no mail read)", try_imap, _settings(values, password))
            break
        except Refused as exc:
            print(f"  {exc}; please try again")
            server_wrong = exc.what != "password"
            password = None if exc.what == "password" else password
    smtp_password = _smtp(values, str(current.get("smtp_host") or f"smtp.{domain}"), password)
    _senders(values, current, imap[0])
    answers.sections["email"] = {k: int(v) if k.endswith("_port") else v for k, v in values.items()}
    answers.secrets["email_password"] = password
    if smtp_password is not None:
        answers.secrets["email_smtp_password"] = smtp_password


def _smtp(values: dict[str, Any], host: str, password: str | None) -> str | None:
    """The SMTP server's questions until its login works; its own password when the IMAP
    one is refused there (None: the IMAP one is used)."""
    smtp = (host, "465", "tls")
    own: str | None = None
    server_wrong = True
    while True:
        if server_wrong:
            smtp = _server("SMTP", *smtp)
            values.update(smtp_host=smtp[0], smtp_port=smtp[1], smtp_security=smtp[2])
        settings = _settings(values, password)
        if own is not None:
            settings = settings.model_copy(update={"smtp_password": SecretStr(own)})
        try:
            tried("logging in to SMTP (no mail sent)", try_smtp, settings)
        except Refused as exc:
            print(f"  {exc}; please try again")
            server_wrong = exc.what != "password"
            if not server_wrong:
                own = ask_secret("SMTP password, if it is not the IMAP one") or None
        else:
            return own


def _settings(values: dict[str, Any], password: str | None) -> EmailSettings:
    return _email_settings(values, password or "")


def _senders(values: dict[str, Any], current: dict[str, Any], imap_host: str) -> None:
    allowed = ask_until(
        "Who may write to it (addresses, comma-separated)",
        ", ".join(current.get("allowed_senders") or []),
        lambda t: next(
            (f"{a!r} is not an email address" for a in _names(t) if not _ADDRESS.match(a)), None
        ),
    )
    values["allowed_senders"] = _names(allowed)
    values["trusted_authserv_id"] = ask(
        "Your receiving server's authserv-id (Authentication-Results)",
        str(current.get("trusted_authserv_id") or imap_host),
    )
