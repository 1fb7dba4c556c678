"""`squidd config check`: exit 0 on a good file, 2 with each problem named by its key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.cli import config_check

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config.example.toml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def squidd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "squidd", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_config_check_example_passes() -> None:
    result = squidd("config", "check", "--config", str(EXAMPLE))
    assert result.returncode == 0, result.stderr
    assert "config ok" in result.stdout


def test_config_check_bad_ratio_exits_2_and_names_key(tmp_path: Path) -> None:
    result = squidd(
        "config", "check", "--config", str(write(tmp_path, "[agents]\nkeep_recent_ratio = 1.5\n"))
    )
    assert result.returncode == 2
    assert "agents.keep_recent_ratio" in result.stderr
    assert "Traceback" not in result.stderr


def test_config_check_names_the_spawn_and_skills_keys(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        "[tools.spawn]\nmax_depth = 0\n[tools.skills]\nextra_dirs = 3\n[tools]\n"
        "search_history_across_sessions = 'maybe'\n"
    )
    result = config_check(config)
    assert result.returncode == 2
    out = result.stdout + result.stderr
    for key in (
        "tools.spawn.max_depth",
        "tools.skills.extra_dirs",
        "tools.search_history_across_sessions",
    ):
        assert key in out, out


def test_config_check_names_each_bad_attachment_key(tmp_path: Path) -> None:
    """The attachment keys are validated with their key paths."""
    text = (
        '[llm]\nvision = "maybe"\n'
        "[media]\nmax_download_bytes = 0\nimage_max_px = 10\n"
        '[transcription]\nbase_url = "ftp://x"\n'
        '[email]\nallowed_attachment_types = ["pdf"]\nmax_attachments = -1\n'
    )
    result = squidd("config", "check", "--config", str(write(tmp_path, text)))
    assert result.returncode == 2
    for key in (
        "llm.vision",
        "media.max_download_bytes",
        "media.image_max_px",
        "transcription.base_url",
        "email.allowed_attachment_types",
        "email.max_attachments",
    ):
        assert key in result.stderr, key


def test_config_check_names_each_bad_outbound_file_key(tmp_path: Path) -> None:
    text = "[media]\nmax_send_bytes = 0\n[email]\nmax_reply_attachment_bytes = -5\n"
    result = squidd("config", "check", "--config", str(write(tmp_path, text)))
    assert result.returncode == 2
    for key in ("media.max_send_bytes", "email.max_reply_attachment_bytes"):
        assert key in result.stderr, key


def test_config_check_names_the_tool_result_retention_key(tmp_path: Path) -> None:
    result = squidd(
        "config", "check", "--config", str(write(tmp_path, "[tools]\nresult_retention_days = 0\n"))
    )
    assert result.returncode == 2
    assert "tools.result_retention_days" in result.stderr


def test_config_check_shows_what_each_agent_sets_for_itself(tmp_path: Path) -> None:
    config = write(
        tmp_path,
        "[heartbeat]\ninterval_minutes = 45\n"
        "[[agents.list]]\nname = 'home'\n"
        "[agents.list.tools]\ndefault_deny = ['shell', 'web_fetch']\n"
        "[[agents.list]]\nname = 'work'\n"
        "[agents.list.approvals]\ntools = ['write_file']\n"
        "[agents.list.caps]\ndaily_tokens = 5000\n"
        "[agents.list.heartbeat]\nenabled = true\ntarget = 'matrix:!w:example.org'\n",
    )
    result = config_check(config)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(
        "home: tools matrix:" in line and "(refused: web_fetch)" in line for line in lines
    ), result.stdout
    assert "  agent:     work: asks before: write_file" in lines
    assert "  agent:     work: own caps: daily_tokens 5000 (and the daemon's)" in lines
    assert "  agent:     work: heartbeat on -> matrix:!w:example.org" in lines
    assert "  heartbeat: on (work)" in lines  # work beats alone: [heartbeat] itself is off


def test_config_check_names_the_agents_own_channels_and_heartbeats(tmp_path: Path) -> None:
    """With `[matrix]` and `[email]` off, an agent's own account and mailbox still run, and
    an agent's own heartbeat beats: the check says so instead of "none enabled" and "off"."""
    secret = tmp_path / "pw"
    secret.write_text("pw")
    secret.chmod(0o600)
    text = (
        '[[agents.list]]\nname = "home"\n'
        '[[agents.list]]\nname = "planner"\n'
        f'[agents.list.matrix]\nuser_id = "@planner:example.org"\npassword_file = "{secret}"\n'
        f'[agents.list.email]\naddress = "planner@example.org"\npassword_file = "{secret}"\n'
        '[agents.list.heartbeat]\nenabled = true\ntarget = "email-planner:me@example.org"\n'
        '[matrix]\nhomeserver = "http://127.0.0.1:9"\n'
        '[email]\nimap_host = "127.0.0.1"\nsmtp_host = "127.0.0.1"\n'
    )
    result = config_check(write(tmp_path, text))
    assert result.returncode == 0, result.stderr
    assert "channels:  matrix-planner, email-planner\n" in result.stdout
    assert "heartbeat: on (planner)\n" in result.stdout


def test_config_check_without_agents_keeps_its_lines(tmp_path: Path) -> None:
    result = config_check(write(tmp_path, "[heartbeat]\nenabled = false\n"))
    assert result.returncode == 0, result.stderr
    assert "channels:  none enabled\n" in result.stdout
    assert "heartbeat: off\n" in result.stdout


def test_config_check_shows_an_agents_own_tools_and_approvals(tmp_path: Path) -> None:
    """The snippets of docs/agents.md: home's turns never see web_fetch, work asks first;
    the daemon's lines alone would say every agent has web_fetch and asks nothing."""
    text = (
        '[[agents.list]]\nname = "home"\n[agents.list.tools]\n'
        'default_deny = ["shell", "web_fetch"]\n'
        '[[agents.list]]\nname = "work"\n[agents.list.approvals]\n'
        'tools = ["shell", "write_file"]\n'
    )
    result = config_check(write(tmp_path, text))
    assert result.returncode == 0, result.stderr
    home = [line for line in result.stdout.splitlines() if "tools (home):" in line]
    assert home and all("(refused: web_fetch)" in line for line in home), result.stdout
    assert "tools (work)" not in result.stdout  # the daemon's, listed once above
    assert "  approvals (work): shell, write_file asked first\n" in result.stdout
