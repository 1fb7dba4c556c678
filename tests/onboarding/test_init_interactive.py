"""`squidd init --interactive` typed into on a pseudo-terminal against the real Synapse, the
real mail servers and the scripted LLM, as a new user would: each mistake (no scheme, a
bare name, a wrong password, an id on the URL's host) is asked again with the reason and
nothing typed before is typed again; `doctor` agrees right after, the next commands run as
printed, and the config starts a `squidd run` that answers on Matrix and by mail. Run
again, it adds email to a Matrix config and leaves the rest of the file as it was."""

from __future__ import annotations

import json
import os
import re
import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from squidd.config import load_settings
from tests.channels.api.support import free_port
from tests.channels.email.mailbox import (
    DOMAIN,
    PASSWORD,
    TRUSTED_ID,
    MailServer,
    inject,
    make_mail,
    replies_to,
    wait_for,
)
from tests.onboarding.terminal import Terminal
from tests.servers.synapse.server import SynapseServer, User
from tests.support.daemon import DaemonProcess, daemon_env, squidd_argv
from tests.support.fake_llm import FakeLLM
from tests.support.matrix import Human, start_squidd

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.mail, pytest.mark.slow]

LLM_KEY = "init-llm-key-1"


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def _type_answers(
    term: Terminal,
    data: Path,
    llm: FakeLLM,
    synapse: SynapseServer,
    bot: User,
    alice: str,
    mail: MailServer,
    mailbot: str,
) -> None:
    """Every answer, each with the mistake a new user makes first: asked again with the
    reason, the earlier answers (passwords too) never typed again."""
    local = bot.user_id[1:].partition(":")[0]
    term.answer(r"Data directory \[[^\]]*\]: ", str(data))
    term.answer(r"Timezone \[[^\]]*\]: ", "Mars/Olympus")
    term.expect(r"unknown IANA timezone.*please try again")
    term.answer(r"Timezone \[[^\]]*\]: ", "Europe/Berlin")
    term.answer(r"2 a local model server \(Ollama, llama\.cpp, vLLM\) \[1\]: ", "")
    term.answer(r"LLM endpoint \[https://api\.openai\.com/v1\]: ", llm.base_url.split("://")[1])
    term.expect(r"no http:// or https:// in front.*please try again")
    term.answer(r"LLM endpoint \[[^\]]*\]: ", llm.base_url)
    term.answer(r"API key \(empty: none\) \(not shown\): ", LLM_KEY)
    term.expect(rf"it serves: {llm.model}")
    term.answer(rf"Model \[{llm.model}\]: ", "gpt-nonexistent")
    term.expect(r"serves no model 'gpt-nonexistent'; please try again")
    term.answer(rf"Model \[{llm.model}\]: ", "")
    term.answer(r"Set up Matrix\? \(y/N\): ", "y")
    term.answer(r"Homeserver URL \[https://matrix\.org\]: ", synapse.url.split("://")[1])
    term.expect(r"no http:// or https:// in front.*please try again")
    term.answer(r"Homeserver URL \[[^\]]*\]: ", synapse.url)
    # The id on the URL's host, not the server's name; first with a wrong password.
    term.answer(r"Matrix id \(or just its name[^\[]*\[squidd\]: ", f"@{local}:127.0.0.1")
    term.answer(r"Password of .* \(not shown\): ", "not-the-password")
    term.expect(rf"the homeserver refused {local} with this password.*please try again")
    term.answer(r"Matrix id .*\[@[^\]]*\]: ", "")
    term.answer(r"Password of .* \(not shown\): ", bot.password)
    term.expect(rf"this homeserver's name is localhost: the bot's id there is @{local}:localhost")
    term.answer(rf"Matrix id \[@{local}:localhost\]: ", "")  # no password asked again
    term.expect(rf"logged in as @{local}:localhost")
    term.answer(r"Who may talk to it .*: ", "alice")
    term.expect(r"'alice' is not a Matrix id: write it as @alice:localhost; please try again")
    term.answer(r"Who may talk to it .*: ", alice)
    term.answer(r"Set up email\? \(y/N\): ", "y")
    term.answer(r"The bot's address: ", mailbot.partition("@")[0])
    term.expect(r"is not an email address; please try again")
    term.answer(r"The bot's address: ", mailbot)
    term.answer(rf"Login name \[{mailbot}\]: ", "")
    term.answer(r"Extra CA certificate .*: ", str(mail.ca_file))
    term.answer(r"IMAP server \[imap\.example\.test\]: ", mail.host)
    term.answer(r"IMAP port \[993\]: ", str(mail.imaps_port))
    term.answer(r"IMAP security .*\[tls\]: ", "")
    term.answer(r"Password of .* \(not shown\): ", "not-the-password")
    term.expect(r"IMAP: .*please try again")
    term.answer(r"Password of .* \(not shown\): ", PASSWORD)  # the server is not asked again
    term.answer(r"SMTP server \[smtp\.example\.test\]: ", mail.host)
    term.answer(r"SMTP port \[465\]: ", str(mail.smtp_port))
    term.answer(r"SMTP security .*\[tls\]: ", "starttls")
    term.answer(r"Who may write to it .*: ", f"alice@{DOMAIN}")
    term.answer(r"authserv-id .*: ", TRUSTED_ID)
    term.answer(r"Turn them on\? \(Y/n\): ", "")
    term.answer(r"Listen on \[[^\]]*\]: ", f"127.0.0.1:{free_port()}")


def _next_lines(output: str) -> list[str]:
    """The commands the set-up printed under "Next", as printed."""
    block = output.split("Next (each runs as printed):", 1)[1]
    found = []
    for line in block.splitlines()[1:]:
        if not line.startswith("  "):
            break
        found.append(re.split(r"\s{2,}", line.strip())[0])
    return found


async def test_each_mistake_is_asked_again_and_the_config_answers_on_matrix_and_by_mail(
    tmp_path: Path,
    llm: FakeLLM,
    synapse: SynapseServer,
    make_user: type,
    make_human: type,
    mail_server: MailServer,
    squidds: list[DaemonProcess],
) -> None:
    bot = make_user("initbot")  # type: ignore[call-arg]
    alice: Human = await make_human("alice")  # type: ignore[call-arg]
    mailbot = mail_server.take_bot()
    config = tmp_path / "etc" / "config.toml"
    home = tmp_path / "home"  # a new user's: nothing of squidd in it
    home.mkdir()
    term = Terminal(config, "init", "--interactive", home=home)
    try:
        _type_answers(
            term, tmp_path / "data", llm, synapse, bot, alice.user_id, mail_server, mailbot
        )
        term.expect(r"recovery key \(shown once")
        term.expect(r"systemctl enable --now squidd")
        assert term.wait() == 0, term.output
    finally:
        term.kill()

    out = term.output
    # Two Matrix passwords typed (the wrong one, the right one), two IMAP ones: nothing retyped.
    assert len(re.findall(r"Password of ", out)) == 4, out
    assert "Value error" not in out and "kept " not in out
    assert '"event"' not in out and "[info" not in out  # no log line among the answers
    assert out.count(f"created  {config}\n") == 1
    text = config.read_text()
    for secret in (LLM_KEY, bot.password, PASSWORD):
        assert secret not in text
    for name, secret in (
        ("llm_api_key", LLM_KEY),
        ("matrix_password", bot.password),
        ("email_password", PASSWORD),
    ):
        path = config.parent / name
        assert path.read_text().strip() == secret
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not [p for p in config.parent.iterdir() if p.name.startswith(".squidd-init-")]
    settings = load_settings(config)
    assert settings.llm.api_key is not None and settings.llm.api_key.get_secret_value() == LLM_KEY
    assert settings.matrix.user_id == bot.user_id  # the server's name, not the URL's host
    assert settings.timezone == settings.cron.default_timezone == "Europe/Berlin"
    assert settings.api.enabled
    keys = settings.api.keys_path(settings.storage.data_dir)
    assert f"http://{settings.api.listen}/" in out and f"the key in {keys}" in out
    assert keys.is_file()

    # `doctor` agrees right after: nothing failed, the identity the set-up made is seen.
    with anyio.fail_after(110):
        checked = await anyio.run_process(
            squidd_argv(config, "doctor", "--json"), env=daemon_env(HOME=str(home)), check=False
        )
    report = json.loads(checked.stdout)
    assert [c for c in report["checks"] if c["status"] == "fail"] == [], report
    (cross,) = [c for c in report["checks"] if c["name"] == "Matrix cross-signing"]
    assert cross["status"] == "ok", cross
    assert checked.returncode == 0

    # The next commands run as printed (from where the set-up ran), `run` aside: it stays.
    printed = _next_lines(out)
    assert [line.split()[-1] for line in printed if "chat" not in line] == ["doctor", "run"]
    env = daemon_env(SQUIDD_VENV=os.environ.get("SQUIDD_VENV", ""), HOME=str(home))
    for line in printed[:2]:
        with anyio.fail_after(170):
            ran = await anyio.run_process(["bash", "-c", line], env=env, check=False)
        assert ran.returncode == 0, (line, ran.stdout, ran.stderr)

    # The written config, unchanged, starts a daemon that answers on both channels.
    await start_squidd(squidds, config, tmp_path / "squidd.log")
    room = await alice.room_with(bot.user_id)  # joined before the first message
    hello = await alice.send(room, "hello from matrix")
    await alice.wait_for(lambda: alice.replies_to(bot.user_id, hello), "a Matrix reply", 60)
    mail = make_mail(to=mailbot, body="hello by mail")
    await inject(mail_server, mail, to=mailbot, sender=f"alice@{DOMAIN}")
    await wait_for(mail_server, f"alice@{DOMAIN}", replies_to(str(mail["Message-ID"])), timeout=60)


MATRIX_ONLY = """# My squidd; the comments below are mine.
timezone = "Europe/Paris"  # where I live

[storage]
data_dir = "{data}"

[llm]
# the scripted one
base_url = "{llm}"
model = "{model}"

[matrix]
enabled = true
homeserver = "{hs}"   # local Synapse
user_id = "{user}"
password_file = "{password}"
allowed_users = ["@alice:localhost"]
"""


async def test_a_rerun_adds_email_and_keeps_the_rest_of_the_file(
    tmp_path: Path,
    llm: FakeLLM,
    synapse: SynapseServer,
    make_user: type,
    mail_server: MailServer,
) -> None:
    bot = make_user("initbot")  # type: ignore[call-arg]
    mailbot = mail_server.take_bot()
    config = tmp_path / "etc" / "config.toml"
    config.parent.mkdir(mode=0o700)
    password = config.parent / "matrix_password"
    password.write_text(bot.password + "\n")
    before = MATRIX_ONLY.format(
        data=tmp_path / "data",
        llm=llm.base_url,
        model=llm.model,
        hs=synapse.url,
        user=bot.user_id,
        password=password,
    )
    config.write_text(before)
    term = Terminal(config, "init", "--interactive")
    try:
        term.expect(r"exists; which part would you like to change")
        term.answer(r"Part: ", "9")
        term.expect(r"answer a number above; please try again")
        term.answer(r"Part: ", "3")
        term.answer(r"The bot's address: ", mailbot)
        term.answer(rf"Login name \[{mailbot}\]: ", "")
        term.answer(r"Extra CA certificate .*: ", str(mail_server.ca_file))
        term.answer(r"IMAP server \[[^\]]*\]: ", mail_server.host)
        term.answer(r"IMAP port \[993\]: ", str(mail_server.imaps_port))
        term.answer(r"IMAP security .*\[tls\]: ", "")
        term.answer(r"Password of .* \(not shown\): ", PASSWORD)
        term.answer(r"SMTP server \[[^\]]*\]: ", mail_server.host)
        term.answer(r"SMTP port \[465\]: ", str(mail_server.smtp_port))
        term.answer(r"SMTP security .*\[tls\]: ", "starttls")
        term.answer(r"Who may write to it .*: ", f"alice@{DOMAIN}")
        term.answer(r"authserv-id .*: ", TRUSTED_ID)
        term.expect(r"Next \(each runs as printed\)")
        assert term.wait() == 0, term.output
    finally:
        term.kill()
    assert "recovery key" not in term.output  # Matrix was not touched
    after = config.read_text()
    assert after.startswith(before), after  # every line and comment kept, in place
    added = tomllib.loads(after[len(before) :])
    assert list(added) == ["email"]
    assert added["email"]["password_file"] == str(config.parent / "email_password")
    assert (config.parent / "email_password").read_text().strip() == PASSWORD
    names = sorted(p.name for p in config.parent.iterdir())
    assert names == ["config.toml", "email_password", "matrix_password"]
    settings = load_settings(config)
    assert settings.email.enabled and settings.matrix.enabled
    assert settings.heartbeat.timezone == "Europe/Paris"


async def test_ctrl_c_leaves_nothing(tmp_path: Path) -> None:
    config = tmp_path / "etc" / "config.toml"
    term = Terminal(config, "init", "--interactive")
    try:
        term.expect(r"Data directory \[[^\]]*\]: ")
        term.interrupt()
        term.expect(r"nothing was written")
        assert term.wait() == 130
    finally:
        term.kill()
    assert not config.exists()


async def test_a_rerun_sets_the_timezone_and_names_a_section_that_keeps_its_own(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.toml"
    before = f'# mine\n[storage]\ndata_dir = "{tmp_path / "data"}"\n\n'
    before += '[heartbeat]\ntimezone = "Asia/Tokyo"  # the office\n'
    config.write_text(before)
    term = Terminal(config, "init", "--interactive")
    try:
        term.answer(r"Part: ", "5")
        term.answer(r"Timezone \[[^\]]*\]: ", "Europe/Berlin")
        term.expect(r"note: heartbeat\.timezone = 'Asia/Tokyo' stays")
        term.expect(r"Next \(each runs as printed\)")
        assert term.wait() == 0, term.output
    finally:
        term.kill()
    after = config.read_text()
    assert after == before.replace("# mine\n", '# mine\ntimezone = "Europe/Berlin"\n\n', 1)
    settings = load_settings(config)
    assert settings.cron.default_timezone == settings.limits.timezone == "Europe/Berlin"
    assert settings.heartbeat.timezone == "Asia/Tokyo"


async def test_a_rerun_changes_the_model_keeping_the_key(tmp_path: Path, llm: FakeLLM) -> None:
    config = tmp_path / "config.toml"
    key = tmp_path / "llm_api_key"
    key.write_text(LLM_KEY + "\n")
    before = f'[storage]\ndata_dir = "{tmp_path / "data"}"\n\n[llm]\n# where\n'
    before += f'base_url = "http://127.0.0.1:9/v1"\nmodel = "old"  # why\napi_key_file = "{key}"\n'
    config.write_text(before)
    term = Terminal(config, "init", "--interactive")
    try:
        term.answer(r"Part: ", "1")
        term.answer(r"2 a local model server \(Ollama, llama\.cpp, vLLM\) \[1\]: ", "")
        term.answer(r"LLM endpoint \[http://127\.0\.0\.1:9/v1\]: ", "")
        term.answer(r"API key \(empty: keep the current one\) \(not shown\): ", "")
        term.expect(r"cannot|refused|failed|did not answer")  # nothing listens on port 9
        term.answer(r"LLM endpoint \[http://127\.0\.0\.1:9/v1\]: ", llm.base_url)
        term.answer(rf"Model \[{llm.model}\]: ", "")  # the key is not asked again
        term.expect(r"Next \(each runs as printed\)")
        assert term.wait() == 0, term.output
    finally:
        term.kill()
    assert LLM_KEY not in term.output
    after = config.read_text()
    expected = before.replace("http://127.0.0.1:9/v1", llm.base_url)
    assert after == expected.replace('model = "old"', f'model = "{llm.model}"')
    assert llm.chat_requests[-1]["model"] == llm.model
    files = sorted(p.name for p in tmp_path.iterdir() if p.is_file())
    assert files == ["config.toml", "llm_api_key"]  # no new key file: the kept one is used


async def test_a_rerun_of_matrix_keeps_the_password_and_the_rest(
    tmp_path: Path, llm: FakeLLM, synapse: SynapseServer, make_user: type
) -> None:
    bot = make_user("initbot")  # type: ignore[call-arg]
    config = tmp_path / "etc" / "config.toml"
    config.parent.mkdir(mode=0o700)
    password = config.parent / "matrix_password"
    password.write_text(bot.password + "\n")
    values = {"llm": llm.base_url, "model": llm.model, "hs": synapse.url, "user": bot.user_id}
    before = MATRIX_ONLY.format(data=tmp_path / "data", password=password, **values)
    config.write_text(before)
    term = Terminal(config, "init", "--interactive")
    try:
        term.answer(r"Part: ", "2")
        term.answer(r"Homeserver URL \[[^\]]*\]: ", "")
        term.answer(rf"Matrix id .*\[{re.escape(bot.user_id)}\]: ", "")
        term.answer(r"Password of .* \(empty: keep the current one\) \(not shown\): ", "")
        term.expect(rf"logged in as {re.escape(bot.user_id)}")
        who = "@alice:localhost, @bob:localhost"
        term.answer(r"Who may talk to it .*\[@alice:localhost\]: ", who)
        term.expect(r"Next \(each runs as printed\)")
        assert term.wait() == 0, term.output
    finally:
        term.kill()
    after = config.read_text()
    old = 'allowed_users = ["@alice:localhost"]'
    assert after == before.replace(old, 'allowed_users = ["@alice:localhost", "@bob:localhost"]')
    assert password.read_text() == bot.password + "\n"
    assert sorted(p.name for p in config.parent.iterdir()) == ["config.toml", "matrix_password"]
