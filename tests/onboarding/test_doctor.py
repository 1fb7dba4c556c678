"""`squidd doctor` against the real servers: all ✓ with a running daemon, and each broken
setting (wrong IMAP password, LLM key refused, homeserver stopped, an MCP server that does
not start) shows as exactly its own ✗ line with the fix named, and exit 1."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.channels.email.mailbox import MailServer, bot_email_section
from tests.servers.synapse.server import SynapseServer
from tests.support.config import config_sections, write_config
from tests.support.daemon import DaemonProcess, daemon_env, squidd_argv
from tests.support.fake_llm import FakeLLM, Reply
from tests.tools.mcp.servers import time_server

pytestmark = [pytest.mark.matrix, pytest.mark.mail, pytest.mark.slow]

API_KEY = "doctor-test-key"


@dataclass
class Setup:
    tmp: Path
    llm: FakeLLM
    synapse: SynapseServer
    sections: dict[str, dict[str, Any]]
    mcp: list[dict[str, Any]]

    def config(self, name: str, mcp: list[dict[str, Any]] | None = None, **changes: Any) -> Path:
        """A config file with `changes` (`{"email": {...}}`) over the working one."""
        sections = {k: {**v, **changes.get(k, {})} for k, v in self.sections.items()}
        path = write_config(self.tmp / f"{name}.toml", sections)
        lines = []
        for server in self.mcp if mcp is None else mcp:
            lines.append("[[mcp.servers]]")
            lines.extend(f"{key} = {json.dumps(value)}" for key, value in server.items())
        path.write_text(path.read_text() + "\n" + "\n".join(lines) + "\n")
        return path


def doctor(config: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = subprocess.run(
        squidd_argv(config, "doctor", "--json", *args),
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert result.stdout, result.stderr
    return result.returncode, json.loads(result.stdout)


def by_status(report: dict[str, Any], status: str) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["checks"] if c["status"] == status}


@pytest.fixture(scope="module")
def setup(
    tmp_path_factory: pytest.TempPathFactory, synapse: SynapseServer, mail_server: MailServer
) -> Iterator[Setup]:
    tmp = tmp_path_factory.mktemp("doctor")
    tag = uuid.uuid4().hex[:8]
    bot = synapse.register(f"doctor-{tag}", password=f"pw-{tag}")
    mailbot = mail_server.take_bot()
    email = bot_email_section(mail_server, mailbot)
    email["ca_file"] = str(email["ca_file"])
    email["smtp_password"] = email["password"]  # so a wrong IMAP password is only that
    with FakeLLM() as llm:
        sections = config_sections(
            llm.base_url,
            tmp / "data",
            api_key=API_KEY,
            logging={"format": "json", "level": "debug"},
            llm={"model": llm.model},
            heartbeat={"enabled": False},
            matrix={
                "enabled": True,
                "homeserver": synapse.url,
                "user_id": bot.user_id,
                "password": bot.password,
            },
            email=email,
        )
        here = Setup(tmp, llm, synapse, sections, [time_server("time")])
        daemon = DaemonProcess(here.config("daemon"), tmp / "daemon.log")
        try:
            anyio.run(daemon.wait_event, "matrix_connected")
            anyio.run(daemon.wait_event, "email_connected")
            yield here
        finally:
            anyio.run(daemon.stop)


def test_all_good_against_the_real_servers_with_the_daemon_running(setup: Setup) -> None:
    code, report = doctor(setup.config("good"))
    assert by_status(report, "fail") == {}, report
    assert code == 0 and report["ok"] is True
    good = by_status(report, "ok")
    for name in (
        "config",
        "data dir",
        "workspace",
        "free disk",
        "daemon",
        "one daemon per data dir",
        "LLM endpoint and model",
        "LLM answers",
        "Matrix login",
        "Matrix sync",
        "Matrix device keys",
        "Matrix cross-signing",
        "Matrix rooms",
        "IMAP login",
        "IMAP IDLE",
        "SMTP login",
        "MCP time",
    ):
        assert name in good, (name, report)
    assert "running" in good["daemon"]["detail"]
    assert "UIDVALIDITY" in good["IMAP login"]["detail"]
    assert "tool(s)" in good["MCP time"]["detail"]


def test_text_report_and_no_llm_call(setup: Setup) -> None:
    asked = len(setup.llm.chat_requests)
    result = subprocess.run(
        squidd_argv(setup.config("text"), "doctor", "--no-llm-call"),
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "✓ IMAP login" in result.stdout and lines[-1] == "all good"
    assert any(line.startswith("- LLM answers: no request made") for line in lines)
    assert len(setup.llm.chat_requests) == asked  # not one token asked for
    assert API_KEY not in result.stdout + result.stderr


def _only_failure(report: dict[str, Any], name: str) -> dict[str, Any]:
    failed = by_status(report, "fail")
    assert list(failed) == [name], report
    return failed[name]


def test_wrong_imap_password(setup: Setup) -> None:
    code, report = doctor(setup.config("imap", email={"password": "wrong-password"}))
    assert code == 1
    line = _only_failure(report, "IMAP login")
    assert "email.password" in line["fix"]
    assert "wrong-password" not in json.dumps(report)


def test_llm_key_refused(setup: Setup) -> None:
    setup.llm.push(Reply(status=401))
    code, report = doctor(setup.config("llm"))
    assert code == 1
    assert "llm.api_key" in _only_failure(report, "LLM answers")["fix"]


def test_mcp_server_that_does_not_start(setup: Setup) -> None:
    broken = {"name": "broken", "command": sys.executable, "args": ["-c", "raise SystemExit(3)"]}
    code, report = doctor(setup.config("mcp", mcp=[time_server("time"), broken]))
    assert code == 1
    assert "broken" in _only_failure(report, "MCP broken")["fix"]
    assert "MCP time" in by_status(report, "ok")


def test_broken_config_is_one_line(setup: Setup) -> None:
    path = write_config(setup.tmp / "broken.toml", {"llm": {"base_url": "not a url"}})
    code, report = doctor(path)
    assert code == 1
    assert "llm.base_url" in _only_failure(report, "config")["detail"]


def test_stopped_homeserver(setup: Setup) -> None:
    setup.synapse.stop()
    try:
        code, report = doctor(setup.config("synapse"))
    finally:
        setup.synapse.start()  # on its port again, for the tests after this one
    assert code == 1
    assert "homeserver" in _only_failure(report, "Matrix login")["fix"]
    skipped = by_status(report, "skip")
    assert {"Matrix sync", "Matrix rooms"} <= set(skipped)
