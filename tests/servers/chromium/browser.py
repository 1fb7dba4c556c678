"""Headless Chromium (Debian's package) driven over the Chrome DevTools protocol: its
websocket, aiohttp's client, a handful of commands (navigate, evaluate, screenshot).

The browser runs with its own profile in a temporary folder, on a DevTools port it picks
itself (`--remote-debugging-port=0`, read back from `DevToolsActivePort`), and is stopped by
its own PID.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import anyio

WAIT_S = 60.0


def chromium() -> str | None:
    return shutil.which("chromium")


class Browser:
    def __init__(self, profile: Path) -> None:
        self._profile = profile
        self._proc: subprocess.Popen[bytes] | None = None
        self._http: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._ids = itertools.count(1)

    async def start(self) -> None:
        binary = chromium()
        assert binary is not None, "chromium is not installed"
        self._profile.mkdir(parents=True, exist_ok=True)
        self._proc = subprocess.Popen(  # noqa: ASYNC220 - starts it, does not wait
            [
                binary,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-extensions",
                "--remote-debugging-port=0",
                f"--user-data-dir={self._profile}",
                "--window-size=1200,1600",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        active = self._profile / "DevToolsActivePort"
        with anyio.fail_after(WAIT_S):
            while not active.exists() or not active.read_text().strip():  # noqa: ASYNC110
                await anyio.sleep(0.1)
        port = int(active.read_text().splitlines()[0])
        self._http = aiohttp.ClientSession()
        with anyio.fail_after(WAIT_S):
            while True:
                async with self._http.get(f"http://127.0.0.1:{port}/json/list") as response:
                    targets = await response.json()
                pages = [t for t in targets if t.get("type") == "page"]
                if pages:
                    break
                await anyio.sleep(0.1)
        self._ws = await self._http.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        assert self._ws is not None
        command_id = next(self._ids)
        await self._ws.send_str(json.dumps({"id": command_id, "method": method, "params": params}))
        with anyio.fail_after(WAIT_S):
            while True:
                message = json.loads((await self._ws.receive()).data)
                if message.get("id") == command_id:
                    if "error" in message:
                        raise AssertionError(f"{method}: {message['error']}")
                    result: dict[str, Any] = message.get("result", {})
                    return result

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    async def text(self) -> str:
        return str(await self.evaluate("document.body ? document.body.innerText : ''"))

    async def wait_text(self, needle: str) -> str:
        text = ""
        with anyio.move_on_after(WAIT_S):
            while True:
                ready = await self.evaluate("document.readyState")
                text = await self.text()
                if ready == "complete" and needle in text:
                    return text
                await anyio.sleep(0.1)
        href = await self.evaluate("location.href")
        raise AssertionError(f"no {needle!r} on {href}: {text[:2000]}")

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", url=url)
        with anyio.fail_after(WAIT_S):
            while await self.evaluate("document.readyState") != "complete":  # noqa: ASYNC110
                await anyio.sleep(0.05)

    async def screenshot(self, path: Path) -> None:
        result = await self.send("Page.captureScreenshot", format="png")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(result["data"]))

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._http is not None:
            await self._http.close()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=30)
