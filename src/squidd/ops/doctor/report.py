"""Running every doctor check in order and rendering the result for a person or a script."""

from __future__ import annotations

import json
from typing import Any, TextIO

import anyio
import httpx2

from squidd.config import Settings
from squidd.llm.http import async_client
from squidd.ops.doctor import Check
from squidd.ops.doctor.agents import agent_checks
from squidd.ops.doctor.local import (
    daemon_checks,
    disk_checks,
    systemd_check,
    unattended_check,
)
from squidd.ops.doctor.prompt import fixed_prompt_check
from squidd.ops.doctor.providers import provider_checks, served_windows
from squidd.ops.doctor.recall import recall_checks
from squidd.ops.doctor.services import email_checks, llm_checks, matrix_checks, mcp_checks

__all__ = ["render_json", "render_text", "run_checks"]


async def run_checks(settings: Settings, *, llm_call: bool, errlog: TextIO) -> list[Check]:
    """Every check, in the order a person fixes things: the machine, then the servers."""
    checks = [Check.ok("config", "valid")]
    checks.extend(await anyio.to_thread.run_sync(disk_checks, settings))
    daemon, status = await anyio.to_thread.run_sync(daemon_checks, settings)
    checks.extend(daemon)
    unit = await anyio.to_thread.run_sync(systemd_check)
    if unit is not None:
        checks.append(unit)
    checks.append(await anyio.to_thread.run_sync(unattended_check, settings))
    checks.extend(await anyio.to_thread.run_sync(agent_checks, settings))
    checks.extend(await _model_checks(settings, llm_call=llm_call))
    checks.extend(daemon_model_check(status))
    checks.extend(await recall_checks(settings, call=llm_call))
    checks.extend(await matrix_checks(settings, status))
    checks.extend(await email_checks(settings))
    checks.extend(await mcp_checks(settings, errlog))
    return checks


async def _model_checks(settings: Settings, *, llm_call: bool) -> list[Check]:
    """The model's lines: the one endpoint's two (a config without providers) or each
    provider's, each pair's; then the fixed prompt against the smallest window."""
    cfg = settings.llm
    timeout = httpx2.Timeout(cfg.connect_timeout_s * 2, connect=cfg.connect_timeout_s)
    async with async_client(timeout=timeout) as client:
        windows = await served_windows(settings, client)
    if cfg.providers:
        checks = await provider_checks(settings, call=llm_call, windows=windows)
    else:
        checks = await llm_checks(settings, call=llm_call)
    return [*checks, await fixed_prompt_check(settings, windows)]


def daemon_model_check(status: dict[str, Any] | None) -> list[Check]:
    """The model as the running daemon met it (its last answer, its last failure and why)."""
    model = (status or {}).get("model")
    if not isinstance(model, dict):
        return []
    name = "model, as the daemon met it"
    answered = f"last answer {model.get('last_success') or 'never'}"
    if model.get("state") == "failing":
        return [
            Check.fail(
                name,
                f"failing since {model.get('last_failure')}: {model.get('last_failure_reason')}"
                f" ({answered})",
                "fix what the reason names (llm.base_url, the key, the endpoint); the daemon "
                "tries again with the next turn",
            )
        ]
    return [Check.ok(name, f"{model.get('state')}, {answered}")]


def render_text(checks: list[Check]) -> str:
    failed = sum(check.failed for check in checks)
    tail = "all good" if not failed else f"{failed} problem(s) found"
    return "\n".join([*(check.line() for check in checks), tail])


def render_json(checks: list[Check]) -> str:
    document: dict[str, Any] = {
        "ok": not any(check.failed for check in checks),
        "checks": [check.to_dict() for check in checks],
    }
    return json.dumps(document, ensure_ascii=False, indent=2)
