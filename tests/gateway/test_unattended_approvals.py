"""A cron or heartbeat run has no one to approve a tool call: through `squidd run` with the
scripted model asking for the shell in a cron job's turn, run twice from the dashboard, the
call is denied both times (the model told why), the warning is logged once for the job, not
per run, and `squidd status`, the status snapshot, `squidd doctor` and the dashboard name the
job with the fix. `[tools.approval] unattended` allows a tool for a job: it then runs, the
audit log naming that setting."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest
from pydantic import ValidationError
from structlog.testing import capture_logs

from squidd.config.tools import ApprovalSettings
from squidd.core.approvals import Question
from squidd.core.cron import CronJob, make_job
from squidd.gateway.status import ask
from squidd.gateway.unattended import UnattendedAsker
from squidd.ops.doctor import Outcome
from squidd.ops.doctor.local import unattended_check
from squidd.store.audit import AuditFile
from squidd.store.cron_jobs import JobsFile
from tests.channels.api.support import ApiDaemon
from tests.support.daemon import run_squidd
from tests.support.dashboard import FORM, log_in
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.gateway import eventually, make_settings, running_daemon

pytestmark = pytest.mark.anyio

COMMAND = "echo ran >> ran.txt"
TOLD = "not run: shell needs approval and there is no one to ask on this channel"


def _job(name: str) -> CronJob:
    return make_job(name, "tidy up", every="168h", timezone="UTC", target="", now=datetime.now(UTC))


async def _requests(fake_llm: FakeLLM, count: int) -> None:
    with anyio.fail_after(60):
        while len(fake_llm.chat_requests) < count:  # noqa: ASYNC110 - the model's record, polled
            await anyio.sleep(0.05)


async def test_a_cron_run_asking_for_the_shell_is_denied_and_the_operator_told(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    (tmp_path / "ws").mkdir()
    sections = {
        "agents": {"workspace": str(tmp_path / "ws")},
        "tools.shell": {"enabled": True},
        "tools.policy": {"default_deny": []},
    }
    daemon = ApiDaemon(tmp_path, fake_llm.base_url, sections=sections)
    JobsFile(tmp_path / "data").modify_sync(lambda jobs: [*jobs, _job("nightly")])
    shell = Reply(tool_calls=[("shell", {"command": COMMAND})])
    fake_llm.push(shell, "could not", shell, "could not again")
    try:
        run = await daemon.start()
        async with daemon.http() as http:
            csrf = await log_in(http, daemon.key)
            for count in (2, 4):  # two runs of the job, one after the other
                fired = await http.post("/cron/nightly/run", data={"csrf": csrf}, headers=FORM)
                assert fired.status_code == 303
                await _requests(fake_llm, count)
            home = (await http.get("/")).text
        await run.wait_event("turn_finished", count=2)
        assert run.count("approval_denied_unattended") == 1
        [warning] = [e for e in run.events() if e.get("event") == "approval_denied_unattended"]
        assert warning["level"] == "warning" and warning["session"] == "cron:nightly"
        assert '[tools.approval.unattended] "cron:nightly" = ["shell"]' in warning["fix"]
        for request in (fake_llm.chat_requests[1], fake_llm.chat_requests[3]):
            assert TOLD in json.dumps(request["messages"]), request["messages"]
        assert not (tmp_path / "ws" / "ran.txt").exists()

        assert "Denied in cron and heartbeat runs" in home
        assert "<td>cron:nightly</td><td>shell</td><td>2</td>" in home, home
        sock = tmp_path / "data" / "squidd.sock"
        snapshot = await anyio.to_thread.run_sync(ask, sock, {"op": "status"}, 10.0)
        [denied] = snapshot["unattended_denied"]
        assert denied["session"] == "cron:nightly" and denied["tools"] == ["shell"]
        assert denied["denied"] == 2
        status = await anyio.to_thread.run_sync(run_squidd, daemon.config, "status")
        assert status.returncode == 0, status.stderr
        assert "cron:nightly: shell denied 2 time(s)" in status.stdout, status.stdout
        assert '[tools.approval.unattended] "cron:nightly" = ["shell"]' in status.stdout
        doctor = await anyio.to_thread.run_sync(run_squidd, daemon.config, "doctor")
        assert "✗ cron and heartbeat approvals:" in doctor.stdout, doctor.stdout
        assert "cron:nightly: shell denied 2 time(s)" in doctor.stdout, doctor.stdout
        assert (
            'fix: allow them for this job in the config: [tools.approval.unattended] "cron:nightly"'
            in doctor.stdout
        )
    finally:
        daemon.close()


async def test_a_tool_allowed_for_the_job_runs_without_a_question(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    settings = make_settings(
        tmp_path / "data",
        fake_llm.base_url,
        agents={"workspace": str(workspace)},
        tools={
            "shell": {"enabled": True},
            "policy": {"default_deny": []},
            "approval": {"unattended": {"cron:backup": ["shell"]}},
        },
    )
    fake_llm.push(Reply(tool_calls=[("shell", {"command": COMMAND})]), "done")
    job = _job("backup")
    async with running_daemon(settings, []) as daemon:
        await daemon.scheduled.fire_cron(job, datetime.now(UTC))
        await eventually(lambda: len(fake_llm.chat_requests) == 2)
        await eventually(lambda: daemon.router.stats()["in_flight"] == 0)
        assert daemon.runtime.unattended is not None
        assert daemon.runtime.unattended.snapshot() == []
    assert (workspace / "ran.txt").read_text() == "ran\n"
    [entry] = [json.loads(line) for line in AuditFile(tmp_path / "data").lines()]
    assert entry["decision"] == "approved" and entry["by"] == "tools.approval.unattended"


def test_unattended_names_a_cron_job_or_the_heartbeat() -> None:
    ApprovalSettings(unattended={"cron:backup": ["shell"], "heartbeat": ["web_fetch"]})
    for key in ("backup", "cron:", "matrix:!room"):
        with pytest.raises(ValidationError, match="cron:<job name> or heartbeat"):
            ApprovalSettings(unattended={key: ["shell"]})


def test_doctor_names_the_jobs_whose_tools_will_be_denied(tmp_path: Path) -> None:
    tools = {"shell": {"enabled": True}, "policy": {"default_deny": []}}
    settings = make_settings(tmp_path / "data", "http://127.0.0.1:9/v1", tools=tools)
    assert unattended_check(settings).outcome is Outcome.OK  # no jobs, no heartbeat
    JobsFile(tmp_path / "data").modify_sync(lambda jobs: [*jobs, _job("backup"), _job("notes")])
    settings = make_settings(
        tmp_path / "data", "http://127.0.0.1:9/v1", tools=tools, heartbeat={"enabled": True}
    )
    check = unattended_check(settings)
    assert check.outcome is Outcome.FAIL
    assert "cron:backup: shell will be denied; cron:notes: shell will be denied" in check.detail
    assert "heartbeat: shell will be denied" in check.detail
    assert '"heartbeat" = ["shell"]' in check.fix
    allowed = {**tools, "approval": {"unattended": {"cron:backup": ["shell"]}}}
    settings = make_settings(tmp_path / "data", "http://127.0.0.1:9/v1", tools=allowed)
    check = unattended_check(settings)
    assert check.detail.endswith("cron:notes: shell will be denied"), check.detail
    refused = {**tools, "policy": {"default_deny": ["shell"]}}
    settings = make_settings(tmp_path / "data", "http://127.0.0.1:9/v1", tools=refused)
    assert unattended_check(settings).outcome is Outcome.OK  # not offered: nothing to deny


async def test_the_heartbeat_is_warned_about_once_and_counted() -> None:
    asker = UnattendedAsker({"heartbeat": ["web_fetch"]})
    asked = datetime.now(UTC)
    calls = [("shell", "a"), ("shell", "b"), ("web_fetch", "c")]
    with capture_logs() as logs:
        answers = [
            await asker.ask(
                Question(n, "heartbeat", "heartbeat", tool, "{}", "0" * 64, asked, asked)
            )
            for tool, n in calls
        ]
    assert [(a.choice.value, a.by) for a in answers] == [
        ("no", "nobody"),
        ("no", "nobody"),
        ("once", "tools.approval.unattended"),
    ]
    warnings = [e for e in logs if e["event"] == "approval_denied_unattended"]
    assert len(warnings) == 1 and warnings[0]["log_level"] == "warning"
    [denied] = asker.snapshot()
    assert denied["session"] == "heartbeat" and denied["denied"] == 2
    assert denied["tools"] == ["shell"]
