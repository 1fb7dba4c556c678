"""Headless Chromium (Debian's package) driven over the Chrome DevTools protocol: its
websocket, aiohttp's client, a handful of commands (navigate, evaluate, screenshot).

A page is read only once it has loaded: `goto` and `navigating` (a click that submits a
form) wait for the Page domain's events, the main frame's new document committed
(`Page.frameNavigated`) and then its `Page.loadEventFired`, never for a time; `until`
waits for a condition on a page that changes itself (the chat), checked on each change of
its document. `viewport` lays pages out at a width (1280 px, a 390 px phone).

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


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


class Browser:
    def __init__(self, profile: Path) -> None:
        self._profile = profile
        self._proc: subprocess.Popen[bytes] | None = None
        self._http: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._ids = itertools.count(1)
        self._events: list[dict[str, Any]] = []  # the page's events, in order

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
        # Chromium writes its port, then its browser path, into this file once it listens:
        # a foreign process's state, polled; both lines there, the port is whole.
        active = self._profile / "DevToolsActivePort"
        with anyio.fail_after(WAIT_S):
            while len(_lines(active)) < 2:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        port = int(_lines(active)[0])
        self._http = aiohttp.ClientSession()
        # A page of our own (PUT /json/new answers with it): nothing to wait for.
        async with self._http.put(f"http://127.0.0.1:{port}/json/new?about:blank") as response:
            page = await response.json()
        self._ws = await self._http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        await self.send("Page.enable")  # its navigation events come from now on

    async def _message(self) -> dict[str, Any]:
        """The next message from the page: an answer (`id`) or an event (`method`, kept)."""
        assert self._ws is not None
        received = await self._ws.receive()
        if received.type is not aiohttp.WSMsgType.TEXT:
            raise AssertionError(f"the DevTools connection ended: {received.type.name}")
        message: dict[str, Any] = json.loads(received.data)
        if "method" in message:
            self._events.append(message)
        return message

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        assert self._ws is not None
        command_id = next(self._ids)
        await self._ws.send_str(json.dumps({"id": command_id, "method": method, "params": params}))
        with anyio.fail_after(WAIT_S):
            while True:
                message = await self._message()
                if message.get("id") == command_id:
                    if "error" in message:
                        raise AssertionError(f"{method}: {message['error']}")
                    result: dict[str, Any] = message.get("result", {})
                    return result

    async def _loaded(self, since: int) -> None:
        """Until the page's main frame, after event number `since`, has committed a new
        document and fired its load event (the DevTools Page domain's events)."""
        committed = False
        seen = since
        with anyio.fail_after(WAIT_S):
            while True:
                while seen < len(self._events):
                    event = self._events[seen]
                    seen += 1
                    frame = event.get("params", {}).get("frame", {})
                    if event["method"] == "Page.frameNavigated" and not frame.get("parentId"):
                        committed = True
                    elif event["method"] == "Page.loadEventFired" and committed:
                        return
                await self._message()

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    async def text(self) -> str:
        return str(await self.evaluate("document.body ? document.body.innerText : ''"))

    async def navigating(self, expression: str) -> str:
        """Evaluate `expression` (a click that submits a form), wait for the page it leads
        to, loaded; that page's text. The page is never read while it changes."""
        since = len(self._events)
        await self.evaluate(expression)
        await self._loaded(since)
        return await self.text()

    async def goto(self, url: str) -> str:
        """Open `url`; the loaded page's text."""
        since = len(self._events)
        await self.send("Page.navigate", url=url)
        await self._loaded(since)
        return await self.text()

    async def viewport(self, width: int, height: int) -> None:
        """Lay the page out as a screen `width` CSS pixels wide (a phone below 600)."""
        await self.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=width < 600,
        )

    async def until(self, condition: str) -> Any:
        """Wait until the JavaScript expression `condition` is truthy on the page: checked
        now and on every change of the document (a MutationObserver, in the page), never on
        a timer; its value."""
        script = (
            "new Promise((resolve) => {"
            f"  const check = () => {{ const v = ({condition});"
            "    if (v) { o.disconnect(); resolve(v); } };"
            "  const o = new MutationObserver(check);"
            "  o.observe(document, {subtree: true, childList: true, characterData: true,"
            "    attributes: true});"
            "  check();"
            "})"
        )
        result = await self.send(
            "Runtime.evaluate", expression=script, awaitPromise=True, returnByValue=True
        )
        return result.get("result", {}).get("value")

    async def screenshot(self, path: Path) -> None:
        result = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
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
