"""`squidd init --interactive` typed into on a pseudo-terminal against the real Synapse, the
real mail servers and the scripted LLM: the config it writes starts a `squidd run` that
answers on Matrix and by mail; a wrong password is named and nothing is written."""

from __future__ import annotations

import json
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from squidd.config import load_settings
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
from tests.channels.matrix.conftest import Human, start_squidd
from tests.onboarding.terminal import Terminal
from tests.servers.synapse.server import SynapseServer, User
from tests.support.daemon import DaemonProcess, daemon_env, squidd_argv
from tests.support.fake_llm import FakeLLM

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
    *,
    imap_password: str = PASSWORD,
) -> None:
    term.answer(r"Data directory \[[^\]]*\]: ", str(data))
    term.answer(r"LLM endpoint \[https://api\.openai\.com/v1\]: ", llm.base_url)
    term.answer(r"Model \[gpt-4o-mini\]: ", llm.model)
    term.answer(r"API key \(empty: none\) \(not shown\): ", LLM_KEY)
    term.answer(r"Set up Matrix\? \(y/N\): ", "y")
    term.answer(r"Homeserver URL \[https://matrix\.org\]: ", synapse.url)
    term.answer(r"Matrix id \[@squidd:127\.0\.0\.1\]: ", bot.user_id)
    term.answer(r"Password of .* \(not shown\): ", bot.password)
    term.answer(r"Who may talk to it .*: ", alice)
    term.answer(r"Set up email\? \(y/N\): ", "y")
    term.answer(r"The bot's address: ", mailbot)
    term.answer(r"IMAP server \[imap\.example\.test\]: ", mail.host)
    term.answer(r"IMAP port \[993\]: ", str(mail.imaps_port))
    term.answer(r"IMAP security .*\[tls\]: ", "")
    term.answer(rf"Login name \[{mailbot}\]: ", "")
    term.answer(r"Password of .* \(not shown\): ", imap_password)
    term.answer(r"SMTP server \[smtp\.example\.test\]: ", mail.host)
    term.answer(r"SMTP port \[465\]: ", str(mail.smtp_port))
    term.answer(r"SMTP security .*\[tls\]: ", "starttls")
    term.answer(r"Extra CA certificate .*: ", str(mail.ca_file))
    term.answer(r"Who may write to it .*: ", f"alice@{DOMAIN}")
    term.answer(r"authserv-id .*: ", TRUSTED_ID)


async def test_the_written_config_answers_on_matrix_and_by_mail(
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
    term = Terminal(config, "init", "--interactive")
    try:
        _type_answers(
            term, tmp_path / "data", llm, synapse, bot, alice.user_id, mail_server, mailbot
        )
        term.expect(r"recovery key \(shown once")
        term.expect(r"systemctl enable --now squidd")
        assert term.wait() == 0, term.output
    finally:
        term.kill()

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
    assert llm.chat_requests  # the endpoint was tried

    # The next step it names, `squidd doctor`, finds nothing wrong before the first start.
    with anyio.fail_after(110):
        checked = await anyio.run_process(
            squidd_argv(config, "doctor", "--json"), env=daemon_env(), check=False
        )
    report = json.loads(checked.stdout)
    assert [c for c in report["checks"] if c["status"] == "fail"] == [], report
    assert checked.returncode == 0

    # The written config, unchanged, starts a daemon that answers on both channels.
    await start_squidd(squidds, config, tmp_path / "squidd.log")
    room = await alice.create_room([bot.user_id], direct=True)
    hello = await alice.send(room, "hello from matrix")
    await alice.wait_for(lambda: alice.replies_to(bot.user_id, hello), "a Matrix reply", 60)
    mail = make_mail(to=mailbot, body="hello by mail")
    await inject(mail_server, mail, to=mailbot, sender=f"alice@{DOMAIN}")
    await wait_for(mail_server, f"alice@{DOMAIN}", replies_to(str(mail["Message-ID"])), timeout=60)


async def test_a_wrong_password_is_named_and_nothing_is_written(
    tmp_path: Path,
    llm: FakeLLM,
    synapse: SynapseServer,
    make_user: type,
    mail_server: MailServer,
) -> None:
    bot = make_user("initbot")  # type: ignore[call-arg]
    mailbot = mail_server.take_bot()
    config = tmp_path / "etc" / "config.toml"
    alice = f"@alice-{uuid.uuid4().hex[:6]}:localhost"
    term = Terminal(config, "init", "--interactive")
    try:
        _type_answers(
            term,
            tmp_path / "data",
            llm,
            synapse,
            bot,
            alice,
            mail_server,
            mailbot,
            imap_password="not-the-password",
        )
        term.expect(r"refused: the IMAP password")
        term.expect(r"nothing was written")
        assert term.wait() == 1
    finally:
        term.kill()
    assert "not-the-password" not in term.output
    leftovers = list(config.parent.iterdir()) if config.parent.exists() else []
    assert leftovers == []
    assert not (tmp_path / "data").exists()


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
