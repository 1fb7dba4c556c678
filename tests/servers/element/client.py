"""A person on a current Element, driven from the tests: matrix-js-sdk with its Rust crypto.

`driver.mjs` (Node) logs in, keeps syncing, and answers JSON-line commands; it shares room
keys only with devices their owner cross-signed and refuses what unsigned devices send, as
Element does since "exclude insecure devices" became its default. `ElementClient` starts it
(the SDK installed by `prepare` into `.test-servers/element/`), sends commands and returns
their results; `stop()` ends the process by its PID.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import shutil
import signal
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[2]
MODULES_DIR = REPO_ROOT / ".test-servers" / "element" / "node_modules"
DRIVER = HERE / "driver.mjs"


class ElementError(RuntimeError):
    """The driver answered a command with an error, or is gone."""


class ElementClient:
    """One matrix-js-sdk client in its own Node process."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.user_id = ""
        self.device_id = ""
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._ready: asyncio.Future[None] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    async def start(self) -> None:
        node = shutil.which("node")
        if node is None or not MODULES_DIR.is_dir():
            raise ElementError("node or matrix-js-sdk missing: run tests/servers/element/prepare")
        log = self.log_path.open("ab")
        try:
            self._proc = await asyncio.create_subprocess_exec(
                node,
                str(DRIVER),
                str(MODULES_DIR),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                start_new_session=True,
                limit=16 * 1024 * 1024,
            )
        finally:
            log.close()
        self._ready = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read())
        await asyncio.wait_for(asyncio.shield(self._ready), 60)

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        try:
            while line := await self._proc.stdout.readline():
                msg = json.loads(line)
                if msg.get("id") is None:
                    if self._ready is not None and not self._ready.done():
                        self._ready.set_result(None)
                    continue
                future = self._waiting.pop(msg["id"], None)
                if future is None or future.done():
                    continue
                if msg["ok"]:
                    future.set_result(msg["result"])
                else:
                    future.set_exception(ElementError(msg["error"]))
        finally:
            gone = ElementError(f"element driver exited; see {self.log_path}")
            for future in [*self._waiting.values(), self._ready]:
                if future is not None and not future.done():
                    future.set_exception(gone)
            self._waiting.clear()

    async def call(self, cmd: str, timeout: float = 60, **args: Any) -> Any:
        """Send one command and return its result (raise ElementError on its error)."""
        if self._proc is None or self._proc.stdin is None:
            raise ElementError("element driver not started")
        msg_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[msg_id] = future
        self._proc.stdin.write(json.dumps({"id": msg_id, "cmd": cmd, **args}).encode() + b"\n")
        await self._proc.stdin.drain()
        return await asyncio.wait_for(future, timeout)

    async def stop(self) -> None:
        """End the driver: SIGTERM by PID, SIGKILL if it lingers."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader

    # --- the commands, typed ------------------------------------------------------------

    async def login(self, homeserver: str, user_id: str, password: str) -> None:
        result = await self.call("login", homeserver=homeserver, user_id=user_id, password=password)
        self.user_id = result["user_id"]
        self.device_id = result["device_id"]

    async def bootstrap_cross_signing(self, *, reset: bool = False) -> dict[str, Any]:
        """Cross-sign this device (`reset`: replace the account's identity with a new one);
        returns the status, `master_key` among it."""
        result: dict[str, Any] = await self.call("bootstrap_cross_signing", reset=reset)
        return result

    async def create_dm(self, user_id: str, *, encrypted: bool = True) -> str:
        result = await self.call("create_dm", user_id=user_id, encrypted=encrypted)
        return str(result["room_id"])

    async def create_room(self, invite: list[str], *, encrypted: bool = True) -> str:
        """A group room (not direct) with `invite` invited."""
        result = await self.call("create_room", invite=invite, encrypted=encrypted)
        return str(result["room_id"])

    async def wait_joined(self, room_id: str, user_id: str, timeout: float = 30) -> None:
        await self.call(
            "wait_joined",
            timeout=timeout + 5,
            room_id=room_id,
            user_id=user_id,
            timeout_ms=int(timeout * 1000),
        )

    async def send_text(self, room_id: str, body: str) -> str:
        result = await self.call("send_text", room_id=room_id, body=body)
        return str(result["event_id"])

    async def messages(
        self, room_id: str | None = None, sender: str | None = None
    ) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self.call("messages", room_id=room_id, sender=sender)
        return result

    async def wait_messages(
        self, sender: str, room_id: str | None = None, count: int = 1, timeout: float = 30
    ) -> list[dict[str, Any]]:
        """The settled (decrypted or failed) messages from `sender`, once there are `count`."""
        result: list[dict[str, Any]] = await self.call(
            "wait_messages",
            timeout=timeout + 5,
            room_id=room_id,
            sender=sender,
            count=count,
            timeout_ms=int(timeout * 1000),
        )
        return result

    async def device_trust(self, user_id: str, device_id: str) -> dict[str, Any] | None:
        result: dict[str, Any] | None = await self.call(
            "device_trust", user_id=user_id, device_id=device_id
        )
        return result

    async def user_trust(self, user_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.call("user_trust", user_id=user_id)
        return result

    async def wait_devices(self, user_id: str, timeout: float = 30) -> list[str]:
        """The device ids of `user_id` with keys, once there is one."""
        result: list[str] = await self.call(
            "wait_devices", timeout=timeout + 5, user_id=user_id, timeout_ms=int(timeout * 1000)
        )
        return result

    async def wait_user_verified(self, user_id: str, timeout: float = 30) -> dict[str, Any]:
        """`user_trust` once this client counts `user_id`'s identity as verified."""
        result: dict[str, Any] = await self.call(
            "wait_user_verified",
            timeout=timeout + 5,
            user_id=user_id,
            timeout_ms=int(timeout * 1000),
        )
        return result

    async def wait_needs_approval(self, user_id: str, timeout: float = 30) -> dict[str, Any]:
        """`user_trust` once this client shows that `user_id`'s identity changed."""
        result: dict[str, Any] = await self.call(
            "wait_needs_approval",
            timeout=timeout + 5,
            user_id=user_id,
            timeout_ms=int(timeout * 1000),
        )
        return result

    async def to_device(self, event_type: str | None = None) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self.call("to_device", type=event_type)
        return result

    async def request_verification(
        self, user_id: str, *, device_id: str | None = None, room_id: str | None = None
    ) -> dict[str, Any]:
        result: dict[str, Any] = await self.call(
            "request_verification", user_id=user_id, device_id=device_id, room_id=room_id
        )
        return result

    async def wait_verification(
        self,
        *,
        flow_id: str | None = None,
        user_id: str | None = None,
        phase: str | None = None,
        sas: bool = False,
        timeout: float = 30,
    ) -> dict[str, Any]:
        result: dict[str, Any] = await self.call(
            "wait_verification",
            timeout=timeout + 5,
            flow_id=flow_id,
            user_id=user_id,
            phase=phase,
            sas=sas,
            timeout_ms=int(timeout * 1000),
        )
        return result

    async def accept_verification(self, flow_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.call("accept_verification", flow_id=flow_id)
        return result

    async def start_sas(self, flow_id: str, timeout: float = 30) -> dict[str, Any]:
        result: dict[str, Any] = await self.call(
            "start_sas", timeout=timeout + 5, flow_id=flow_id, timeout_ms=int(timeout * 1000)
        )
        return result

    async def confirm_sas(self, flow_id: str, *, match: bool = True) -> dict[str, Any]:
        result: dict[str, Any] = await self.call("confirm_sas", flow_id=flow_id, match=match)
        return result
