"""A misbehaving MCP server over stdio, hand-written JSON-RPC so it can do what the SDK
would not let it: print garbage on stdout, offer a tool whose schema has a `$ref` cycle, and
answer with a 20 MB result (one line), text full of lone surrogates and control characters
(`odd`, and `broken`'s error), or never answer (`slow`; the `notifications/cancelled` it
then gets are appended to the file named by $BAD_SERVER_LOG). `python bad_server.py` speaks
on stdin/stdout.
"""

from __future__ import annotations

import json
import os
import sys

# `huge` answers with this many characters in one line ($BAD_SERVER_HUGE_BYTES, 20 MB).
HUGE_BYTES = int(os.environ.get("BAD_SERVER_HUGE_BYTES", 20 * 1024 * 1024))

TOOLS = [
    {
        "name": "cyclic",
        "description": "a tool whose schema refers to itself",
        "inputSchema": {
            "type": "object",
            "properties": {"node": {"$ref": "#/$defs/node"}},
            "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
        },
    },
    {
        "name": "huge",
        "description": "answers with 20 MB of text",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "slow",
        "description": "never answers",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "die",
        "description": "exits the server process",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "ping",
        "description": "answers pong",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "odd",
        "description": "odd \ud800 te\x00xt\x1b[2J everywhere",
        "inputSchema": {
            "type": "object",
            "properties": {"q": {"type": "string", "description": "a \ud800 b\x07"}},
        },
    },
    {
        "name": "broken",
        "description": "fails with an odd message",
        "inputSchema": {"type": "object", "properties": {}},
    },
]
# What `odd` answers and `broken` fails with: JSON escapes of a lone surrogate, an escaped
# byte, NUL, ESC and a C1 control.
ODD_TEXT = "res\ud800ult\x00 caf\udce9\x1b[31m red\x85 \ud83d\ude00"


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def garbage() -> None:
    sys.stdout.write("this is not JSON-RPC {{{\n")
    sys.stdout.flush()


def main() -> None:
    garbage()
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        method, ident = request.get("method"), request.get("id")
        if ident is None:  # a notification
            if method == "notifications/cancelled" and os.environ.get("BAD_SERVER_LOG"):
                with open(os.environ["BAD_SERVER_LOG"], "a") as log:
                    log.write(json.dumps(request["params"]) + "\n")
            continue
        if method == "initialize":
            version = request["params"]["protocolVersion"]
            result: dict[str, object] = {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "bad", "version": "0"},
            }
        elif method == "tools/list":
            garbage()
            result = {"tools": TOOLS}
        elif method == "tools/call":
            name = request["params"]["name"]
            if name == "slow":
                continue
            if name == "die":
                sys.exit(3)
            if name == "broken":
                error = {"code": -32603, "message": ODD_TEXT}
                send({"jsonrpc": "2.0", "id": ident, "error": error})
                continue
            text = {"huge": "x" * HUGE_BYTES, "odd": ODD_TEXT}.get(name, "pong")
            result = {"content": [{"type": "text", "text": text}], "isError": False}
        elif method == "ping":
            result = {}
        else:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": method}})
            continue
        send({"jsonrpc": "2.0", "id": ident, "result": result})


if __name__ == "__main__":
    main()
