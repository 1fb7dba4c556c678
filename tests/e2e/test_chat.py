"""`squidd chat -m` end to end: a real process against the scripted OpenAI-compatible server
on 127.0.0.1, real files. Covers the foundation's acceptance: replies, consolidation once
(and not again in the next process), global memory across sessions, clear failures."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.support.fake_llm import FakeLLM, Reply


def squidd_chat(
    data: Path, base_url: str, *args: str, input: str | None = None, **env_extra: str
) -> subprocess.CompletedProcess[str]:
    """`squidd chat <args>` configured from the environment only (no config file), its
    data in `data` and its home beside it."""
    env = dict(os.environ)
    env.pop("SQUIDD_CONFIG", None)
    env.update(
        {
            "SQUIDD_LLM__BASE_URL": base_url,
            "SQUIDD_LLM__API_KEY": "sk-test-not-a-real-key-42",
            "SQUIDD_STORAGE__DATA_DIR": str(data),
            "HOME": str(data.parent),
            **env_extra,
        }
    )
    return subprocess.run(
        [sys.executable, "-m", "squidd", "chat", *args],
        input=input,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def run_chat(
    data: Path, base_url: str, message: str, *extra: str, **env_extra: str
) -> subprocess.CompletedProcess[str]:
    quick = {"SQUIDD_AGENTS__CONSOLIDATION_THRESHOLD": "6", "SQUIDD_LLM__MAX_RETRIES": "0"}
    return squidd_chat(data, base_url, "-m", message, *extra, **{**quick, **env_extra})


def summary_files(data: Path) -> list[Path]:
    return sorted((data / "memory").glob("*/summary.md"))


def test_chat_replies(tmp_path: Path, fake_llm: FakeLLM) -> None:
    result = run_chat(tmp_path / "data", fake_llm.base_url, "hello there")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "echo: hello there\n"
    request = fake_llm.chat_requests[0]
    assert request["messages"][-1] == {"role": "user", "content": "hello there"}
    assert any(t["function"]["name"] == "memory_write" for t in request["tools"])


def test_consolidates_once_and_not_again_in_a_new_process(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    data = tmp_path / "data"
    consolidations = 0

    def responder(request: dict[str, object]) -> Reply:
        nonlocal consolidations
        messages = request["messages"]
        assert isinstance(messages, list)
        if "Summarize the following conversation" in str(messages[-1]["content"]):
            consolidations += 1
            return Reply(content="The user counted from zero upwards.")
        return Reply(content="ok")

    fake_llm.responder = responder
    # Each turn stores 2 messages: after 4 turns there are 8 (> threshold 6).
    for i in range(4):
        assert run_chat(data, fake_llm.base_url, f"count {i}").returncode == 0
    assert consolidations == 0
    result = run_chat(data, fake_llm.base_url, "count 4")
    assert result.returncode == 0, result.stderr
    assert consolidations == 1
    (summary,) = summary_files(data)
    assert summary.read_text() == "The user counted from zero upwards."
    (meta,) = (data / "sessions").glob("*.meta.json")
    assert json.loads(meta.read_text())["last_consolidated"] > 0
    # The next process does not consolidate again, and shows the summary.
    assert run_chat(data, fake_llm.base_url, "count 5").returncode == 0
    assert consolidations == 1
    system = fake_llm.chat_requests[-1]["messages"][0]["content"]
    assert "## Conversation Summary\n\nThe user counted from zero upwards." in system


def test_memory_write_in_one_session_shows_in_another(tmp_path: Path, fake_llm: FakeLLM) -> None:
    data = tmp_path / "data"
    fake_llm.push(
        Reply(tool_calls=[("memory_write", {"content": "The owner is allergic to peanuts."})]),
        "I'll remember that.",
    )
    first = run_chat(data, fake_llm.base_url, "remember: no peanuts", "--session", "kitchen")
    assert first.returncode == 0, first.stderr
    assert first.stdout == "I'll remember that.\n"
    assert (data / "workspace" / "MEMORY.md").read_text() == "The owner is allergic to peanuts."
    second = run_chat(data, fake_llm.base_url, "what should I cook?", "--session", "office")
    assert second.returncode == 0, second.stderr
    system = fake_llm.chat_requests[-1]["messages"][0]["content"]
    assert "## Your Memory\n\nThe owner is allergic to peanuts." in system


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_endpoint_is_one_clear_line(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    result = run_chat(tmp_path / "data", url, "hello", SQUIDD_LOGGING__LEVEL="error")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("squidd: the model endpoint did not answer")
    assert "Traceback" not in result.stderr


def test_missing_key_is_one_clear_line(tmp_path: Path) -> None:
    env = dict(os.environ)
    env.pop("SQUIDD_LLM__API_KEY", None)
    env.pop("SQUIDD_CONFIG", None)
    env.update({"HOME": str(tmp_path), "SQUIDD_STORAGE__DATA_DIR": str(tmp_path / "d")})
    result = subprocess.run(
        [sys.executable, "-m", "squidd", "chat", "-m", "hi"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "squidd: llm.api_key is not set: put it in the config ([llm] api_key or api_key_file) "
        "or in SQUIDD_LLM__API_KEY"
    ]


def test_rejected_key_is_one_clear_line_without_the_key(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.push(Reply(status=401))
    result = run_chat(tmp_path / "data", fake_llm.base_url, "hi", SQUIDD_LOGGING__LEVEL="error")
    assert result.returncode == 1
    assert "rejected the credentials" in result.stderr
    assert "sk-test-not-a-real-key" not in result.stderr + result.stdout


def test_interactive_chat_streams_and_exits(tmp_path: Path, fake_llm: FakeLLM) -> None:
    result = squidd_chat(
        tmp_path / "data",
        fake_llm.base_url,
        input="first question\n\nsecond question\n/exit\nnever sent\n",
    )
    assert result.returncode == 0, result.stderr
    assert "echo: first question" in result.stdout
    assert "echo: second question" in result.stdout
    assert [r["messages"][-1]["content"] for r in fake_llm.chat_requests] == [
        "first question",
        "second question",
    ]


def test_chat_is_held_to_the_daily_caps_and_the_owner_can_lift_them_for_one_run(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """`session_daily_tokens = 100` and turns of about 70 tokens: the first two turns call
    the model (0, then 70 used), the next get the fixed reply without a model call, as on
    every channel, until `--ignore-caps` lifts the caps for that one run."""
    data = tmp_path / "data"
    fake_llm.responder = lambda request: Reply(content="an answer", usage=(60, 10, 0))
    caps = {
        "SQUIDD_LIMITS__SESSION_DAILY_TOKENS": "100",
        "SQUIDD_LIMITS__REFUSAL_TEXT": "Budget used up for today.",
    }
    outputs = [run_chat(data, fake_llm.base_url, f"turn {i}", **caps) for i in range(4)]
    assert [r.returncode for r in outputs] == [0, 0, 0, 0], outputs[-1].stderr
    assert [r.stdout for r in outputs] == ["an answer\n"] * 2 + ["Budget used up for today.\n"] * 2
    assert len(fake_llm.chat_requests) == 2
    assert "--ignore-caps" in outputs[-1].stderr
    lifted = run_chat(data, fake_llm.base_url, "turn 4", "--ignore-caps", **caps)
    assert lifted.returncode == 0 and lifted.stdout == "an answer\n"
    assert len(fake_llm.chat_requests) == 3
    # the cap holds again in the next run
    assert (
        run_chat(data, fake_llm.base_url, "turn 5", **caps).stdout == "Budget used up for today.\n"
    )
    assert len(fake_llm.chat_requests) == 3


def test_the_interactive_chat_is_held_to_the_caps_too(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.responder = lambda request: Reply(content="an answer", usage=(60, 10, 0))
    result = squidd_chat(
        tmp_path / "data",
        fake_llm.base_url,
        input="one\ntwo\nthree\nfour\n/exit\n",
        SQUIDD_LLM__MAX_RETRIES="0",
        SQUIDD_LIMITS__DAILY_TOKENS="100",
        SQUIDD_LIMITS__REFUSAL_TEXT="Budget used up for today.",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("an answer") == 2
    assert result.stdout.count("Budget used up for today.") == 2
    assert len(fake_llm.chat_requests) == 2


def test_new_in_the_terminal_starts_a_fresh_session_without_a_model_call(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    data = tmp_path / "data"
    assert run_chat(data, fake_llm.base_url, "my boat is the Mary Rose").returncode == 0
    result = run_chat(data, fake_llm.base_url, "/new")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Started a new conversation")
    assert len(fake_llm.chat_requests) == 1
    assert run_chat(data, fake_llm.base_url, "which boat?").returncode == 0
    assert "Mary Rose" in json.dumps(fake_llm.chat_requests[0]["messages"])
    assert "Mary Rose" not in json.dumps(fake_llm.chat_requests[1]["messages"])
