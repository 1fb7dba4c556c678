"""Start-up cost: a daemon without MCP servers, PDFs or images never imports their libraries.

`mcp` alone is about half a second of start-up and several MiB; pypdf and Pillow another
tenth. The check runs in a fresh interpreter (this one has imported everything already):
it loads `squidd run`'s modules and builds the daemon (runtime, MCP hub, channels) from a
config without servers, then lists which of those libraries got imported.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.config import write_daemon_config
from tests.support.daemon import run_python

PROBE = """
import json, sys
from pathlib import Path
from squidd.config import load_settings
from squidd.commands.run import run_command
from squidd.gateway.build import build_daemon  # what run_command imports when it runs

settings = load_settings(Path(sys.argv[1]))
build_daemon(settings)  # the runtime, the daemon's MCP hub, the (no) channels
print(json.dumps(sorted(m for m in ("mcp", "mcp_types", "pypdf", "PIL") if m in sys.modules)))
"""


def test_optional_libraries_are_not_imported_at_start(tmp_path: Path) -> None:
    config = write_daemon_config(tmp_path, "http://127.0.0.1:9/v1", api_key="sk-lazy-imports")
    probe = run_python("-c", PROBE, str(config))
    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout.strip().splitlines()[-1]) == []


def test_the_mcp_names_still_resolve() -> None:
    from squidd.tools import mcp

    assert mcp.McpServer.__name__ == "McpServer"
    assert "up" in {state.value for state in mcp.ServerState}
