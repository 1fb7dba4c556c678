"""The workspace tools through `squidd init` and `squidd chat`: a real process, real files,
the scripted LLM server on 127.0.0.1. The prompt comes from the workspace, the model's tool
calls reach the files, and the policy decides which tools the model is offered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.config import write_config
from tests.support.fake_llm import FakeLLM, Reply


def squidd(tmp_path: Path, config: Path, *args: str, base_url: str = "") -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUIDD_")}
    env.update(
        {
            "HOME": str(tmp_path / "home"),
            "XDG_DATA_HOME": str(tmp_path / "data"),
            "SQUIDD_LLM__MAX_RETRIES": "0",
        }
    )
    if base_url:
        env["SQUIDD_LLM__BASE_URL"] = base_url
        env["SQUIDD_LLM__API_KEY"] = "sk-test-not-a-real-key-42"
    result = subprocess.run(
        [sys.executable, "-m", "squidd", "--config", str(config), *args],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def tool_names(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools", [])}


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_prompt_and_file_tools_after_init(tmp_path: Path, fake_llm: FakeLLM) -> None:
    config = tmp_path / "config.toml"
    squidd(tmp_path, config, "init")
    workspace = tmp_path / "data" / "squidd" / "workspace"
    (workspace / "USER.md").write_text("My name is Ada.\n")
    fake_llm.push(
        Reply(tool_calls=[("write_file", {"path": "notes/shop.md", "content": "- basil\n"})]),
        Reply(tool_calls=[("read_file", {"path": "../../../config.toml"})]),
        "Noted.",
    )
    reply = squidd(tmp_path, config, "chat", "-m", "note basil", base_url=fake_llm.base_url)
    assert reply == "Noted.\n"
    assert (workspace / "notes" / "shop.md").read_text() == "- basil\n"

    first, _, last = fake_llm.chat_requests
    system = first["messages"][0]["content"]
    assert system.startswith((workspace / "SOUL.md").read_text().strip())
    assert "My name is Ada." in system
    assert {"read_file", "write_file", "edit_file", "list_dir", "web_fetch"} <= tool_names(first)
    assert "shell" not in tool_names(first)
    results = tool_results(last)
    assert results[0] == "created notes/shop.md (8 bytes)"
    assert "'..' is not allowed" in results[1]


def test_shell_only_where_a_rule_allows_it(tmp_path: Path, fake_llm: FakeLLM) -> None:
    config = write_config(tmp_path / "config.toml", {"tools.shell": {"enabled": True}})
    squidd(tmp_path, config, "init")
    squidd(tmp_path, config, "chat", "-m", "hi", base_url=fake_llm.base_url)
    assert "shell" not in tool_names(fake_llm.chat_requests[-1])

    ops_only = {"channel": "terminal", "session": "terminal:ops", "allow": ["shell"]}
    shell = {"tools.shell": {"enabled": True}, "tools.policy": {"rules": [ops_only]}}
    write_config(config, {**shell, "tools.approval": {"tools": []}})
    squidd(tmp_path, config, "chat", "-m", "hi", base_url=fake_llm.base_url)
    assert "shell" not in tool_names(fake_llm.chat_requests[-1])

    fake_llm.push(Reply(tool_calls=[("shell", {"command": "echo from-the-shell"})]), "Done.")
    out = squidd(
        tmp_path, config, "chat", "-m", "run it", "--session", "ops", base_url=fake_llm.base_url
    )
    assert out == "Done.\n"
    assert "shell" in tool_names(fake_llm.chat_requests[-2])
    assert tool_results(fake_llm.chat_requests[-1]) == ["exit code 0\nfrom-the-shell\n"]
    assert json.dumps(fake_llm.chat_requests[-1]).count("sk-test-not-a-real-key-42") == 0


def test_chat_m_without_a_terminal_does_not_run_the_shell_and_says_so(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    terminal = {"channel": "terminal", "allow": ["shell"]}
    config = write_config(
        tmp_path / "config.toml",
        {"tools.shell": {"enabled": True}, "tools.policy": {"rules": [terminal]}},
    )
    squidd(tmp_path, config, "init")
    marker = tmp_path / "the-shell-ran"
    fake_llm.push(Reply(tool_calls=[("shell", {"command": f"touch {marker}"})]), "Done.")
    out = squidd(tmp_path, config, "chat", "-m", "run it", base_url=fake_llm.base_url)
    assert not marker.exists()
    assert out.startswith("Done.\n[shell was not run: it needs approval and there is no terminal")
    [result] = tool_results(fake_llm.chat_requests[-1])
    assert result.startswith("Error: not run: shell needs approval")
    audit = squidd(tmp_path, config, "audit", "--decision", "denied")
    assert "denied by no terminal" in audit and f"touch {marker}" in audit


def test_chat_reads_the_example_skill_and_spawns_a_waiting_sub_agent(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    config = tmp_path / "config.toml"
    squidd(tmp_path, config, "init")
    fake_llm.push(
        Reply(tool_calls=[("read_skill", {"name": "daily-note"})]),
        Reply(tool_calls=[("spawn", {"task": "summarise the daily-note skill"})]),
        "It keeps a dated note.",  # the sub-agent's report
        Reply(tool_calls=[("spawn", {"task": "later", "wait": False})]),
        "Done.",
    )
    reply = squidd(tmp_path, config, "chat", "-m", "what skills?", base_url=fake_llm.base_url)
    assert reply == "Done.\n"
    first, _, sub, _, last = fake_llm.chat_requests
    assert "- daily-note: Keep a dated note" in first["messages"][0]["content"]
    assert {"read_skill", "spawn"} <= tool_names(first)
    assert sub["messages"][-1] == {"role": "user", "content": "summarise the daily-note skill"}
    assert "spawn" not in tool_names(sub)
    skill, report, background = tool_results(last)
    assert skill.startswith("# Skill: daily-note")
    assert report == "It keeps a dated note."
    assert "need the daemon" in background
