"""`[mcp]` configuration: validated with key paths, secrets read from files and never shown."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from squidd.config import ConfigError, load_settings
from squidd.secrets import known_secrets
from tests.tools.mcp.servers import supervised_hub


def _load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "config.toml"
    path.write_text(text)
    return load_settings(path)


def test_problems_are_reported_with_key_paths(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(
            tmp_path,
            """
[mcp]
connect_timeout_s = -1
[[mcp.servers]]
name = "a__b"
command = "x"
[[mcp.servers]]
name = "web"
transport = "http"
[[mcp.servers]]
name = "c"
command = "x"
timout_s = 3
[[mcp.servers]]
name = "d"
command = "x"
secret_env = { A = "b" }
""",
        )
    problems = "\n".join(caught.value.problems)
    assert "mcp.connect_timeout_s:" in problems
    assert "mcp.servers.0.name:" in problems
    assert "mcp.servers.1: an http server needs 'url'" in problems
    assert "mcp.servers.2.timout_s: unknown key" in problems
    assert "mcp.servers.3.secret_env: not a config key" in problems


def test_secret_env_comes_from_a_file_and_stays_out_of_repr(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cr3t-mcp-token\n")
    settings = _load(
        tmp_path,
        f"""
[[mcp.servers]]
name = "cal"
command = "cal-server"
env = {{ CAL_REGION = "eu" }}
env_files = {{ CAL_TOKEN = "{token}" }}
""",
    )
    server = settings.mcp.servers[0]
    assert server.process_env() == {"CAL_REGION": "eu", "CAL_TOKEN": "s3cr3t-mcp-token"}
    assert "s3cr3t-mcp-token" not in repr(settings)
    assert "s3cr3t-mcp-token" in known_secrets(settings)  # so the log redactor knows it


def test_an_unreadable_secret_file_names_its_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(
            tmp_path,
            f"""
[[mcp.servers]]
name = "web"
transport = "http"
url = "http://127.0.0.1:1/mcp"
header_files = {{ Authorization = "{tmp_path / "missing"}" }}
""",
        )
    assert any(p.startswith("mcp.servers.0:") and "cannot read" in p for p in caught.value.problems)


@pytest.mark.anyio
async def test_the_secret_reaches_the_server_process_but_no_log_line(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cr3t-mcp-token")
    # a server that notes whether it got the secret, then fails (the failure is logged)
    marker = tmp_path / "seen"
    script = (
        "import os,pathlib,sys; "
        f"pathlib.Path({str(marker)!r}).write_text(os.environ.get('MY_TOKEN', '')); "
        "sys.exit('no MCP here')"
    )
    server = {
        "name": "leaky",
        "command": sys.executable,
        "args": ["-c", script],
        "env_files": {"MY_TOKEN": str(token)},
    }
    with capture_logs() as logs:
        async with supervised_hub(server) as (hub, _):
            await hub.wait_connected(30)
    assert hub.servers["leaky"].last_error
    assert marker.read_text() == "s3cr3t-mcp-token"
    assert "s3cr3t-mcp-token" not in str(logs)
