"""Start-up cost: a daemon imports a library only when what it is configured to do needs it.

`mcp` alone is about half a second of start-up and several MiB; pypdf and Pillow another
tenth; the openai SDK 0.4 s and 22 MiB (its type tree, and aiohttp under it), aiohttp's
server (the API and the dashboard), httpcore2 and h2 (web_fetch, the model check after
READY=1), YAML (skills) and html2text (a fetched page) the rest (docs/performance.md).
The checks run in a fresh interpreter (this one has imported everything already): it
loads `squidd run`'s modules and builds the daemon (runtime, MCP hub, channels, the
dashboard's routes) from a config without servers, API or skills, then lists which of
those libraries got imported. Each library named here fails the test when an eager import
brings it back.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.config import write_daemon_config
from tests.support.daemon import run_python
from tests.support.fake_llm import FakeLLM

LAZY = ("mcp", "mcp_types", "pypdf", "PIL", "openai", "aiohttp", "yaml", "html2text")
LAZY += ("httpcore2", "h2")

PROBE = """
import json, sys
from pathlib import Path
from squidd.config import load_settings
from squidd.commands.run import run_command
from squidd.gateway.build import build_daemon  # what run_command imports when it runs
from squidd.web import dashboard

settings = load_settings(Path(sys.argv[1]))
build_daemon(settings, dashboard=dashboard)  # the runtime, MCP hub, (no) channels, pages
print(json.dumps(sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)))
"""

# The model list `squidd run` asks for at start, from an endpoint that answers with it.
MODELS_PROBE = """
import json, sys
import anyio
from pathlib import Path
from squidd.config import load_settings
from squidd.llm.probe import list_models

listed = anyio.run(list_models, load_settings(Path(sys.argv[1])).llm)
print(json.dumps([listed, "openai" in sys.modules]))
"""


def test_optional_libraries_are_not_imported_at_start(tmp_path: Path) -> None:
    config = write_daemon_config(tmp_path, "http://127.0.0.1:9/v1", api_key="sk-lazy-imports")
    probe = run_python("-c", PROBE, str(config), json.dumps(LAZY))
    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout.strip().splitlines()[-1]) == []


def test_a_matrix_daemon_built_holds_no_reply_libraries_yet(tmp_path: Path) -> None:
    """Pillow (thumbnails), markdown-it and nh3 (a reply's HTML) wait for the first reply;
    nio is the channel's and loads with it, and aiohttp and h2 with nio."""
    matrix = {
        "enabled": True,
        "homeserver": "http://127.0.0.1:9",
        "user_id": "@bot:localhost",
        "password": "not-used",
        "allowed_users": ["@owner:localhost"],
    }
    config = write_daemon_config(
        tmp_path, "http://127.0.0.1:9/v1", api_key="sk-lazy-imports", matrix=matrix
    )
    libraries = [*LAZY, "markdown_it", "nh3", "nio", "cryptography"]
    probe = run_python("-c", PROBE, str(config), json.dumps(libraries))
    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout.strip().splitlines()[-1]) == ["aiohttp", "h2", "nio"]


def test_an_email_daemon_built_holds_no_reply_or_html_libraries_yet(tmp_path: Path) -> None:
    """markdown-it and nh3 (a reply's HTML part) wait for the first reply, html2text for the
    first mail without a text part."""
    email = {
        "enabled": True,
        "address": "bot@localhost",
        "username": "bot@localhost",
        "password": "not-used",
        "imap_host": "127.0.0.1",
        "imap_port": 9,
        "smtp_host": "127.0.0.1",
        "smtp_port": 9,
        "allowed_senders": ["owner@localhost"],
        "trusted_authserv_id": "mx.localhost",
    }
    config = write_daemon_config(
        tmp_path, "http://127.0.0.1:9/v1", api_key="sk-lazy-imports", email=email
    )
    libraries = [*LAZY, "markdown_it", "nh3", "html2text", "squidd.channels.email.channel"]
    probe = run_python("-c", PROBE, str(config), json.dumps(libraries))
    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout.strip().splitlines()[-1]) == ["squidd.channels.email.channel"]


# What the Matrix channel's start does with its identity (load the keys from their seeds,
# sign the device, open and store secrets) and what a file in an encrypted room takes.
IDENTITY_PROBE = """
import json, secrets, sys
import anyio
from squidd.channels.matrix import attachments
from squidd.channels.matrix.identity import secret_storage
from squidd.channels.matrix.identity.cross_signing import CrossSigningKeys
from squidd.channels.matrix.identity.signed_json import verify

keys = CrossSigningKeys.from_seeds(CrossSigningKeys.generate().seeds())
signed = keys.sign_device("@bot:localhost", {"device_id": "D", "keys": {}})
checked = verify(signed, "@bot:localhost", keys.self_signing.key_id, keys.self_signing.public)
storage = secrets.token_bytes(32)
opened = secret_storage.decrypt(storage, "m", secret_storage.encrypt(storage, "m", b"seed"))
encryptor = attachments.Encryptor(attachments.AttachmentKey.fresh())
ciphertext = encryptor.update(b"file")

async def chunks():
    yield ciphertext

async def plain():
    return b"".join([c async for c in attachments.decrypt(chunks(), encryptor.file_info())])

print(json.dumps([checked, opened == b"seed", anyio.run(plain) == b"file",
                  "cryptography" in sys.modules]))
"""


def test_the_matrix_identity_and_attachments_do_not_load_cryptography() -> None:
    """Ed25519, AES-CTR and HKDF come from PyCryptodome, which nio loads anyway: the
    `cryptography` package would add 6 MiB to every Matrix daemon's resident set."""
    probe = run_python("-c", IDENTITY_PROBE)
    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout.strip().splitlines()[-1]) == [True, True, True, False]


def test_the_model_check_at_start_does_not_load_the_sdk(tmp_path: Path) -> None:
    with FakeLLM() as llm:
        config = write_daemon_config(tmp_path, llm.base_url, api_key="sk-lazy-imports")
        probe = run_python("-c", MODELS_PROBE, str(config))
    assert probe.returncode == 0, probe.stderr
    listed, sdk_loaded = json.loads(probe.stdout.strip().splitlines()[-1])
    assert listed == [llm.model]
    assert sdk_loaded is False


def test_the_mcp_names_still_resolve() -> None:
    from squidd.tools import mcp

    assert mcp.McpServer.__name__ == "McpServer"
    assert "up" in {state.value for state in mcp.ServerState}


def test_the_dashboard_built_at_its_first_mount_is_the_one_every_mount_serves(
    tmp_path: Path,
) -> None:
    """Its logins live in it: a restarted listener mounts the same pages, logins kept."""
    from types import SimpleNamespace
    from typing import cast

    from aiohttp import web

    from squidd.web import dashboard
    from squidd.web.host import DashboardHost

    mount = dashboard(cast(DashboardHost, SimpleNamespace(data_dir=tmp_path)))
    first, second = web.Application(), web.Application()
    mount(first)
    mount(second)

    def pages(app: web.Application) -> set[object]:
        """The objects whose methods serve the routes (the dashboard and its page groups)."""
        found = {getattr(r.handler, "__self__", None) for r in app.router.routes()}
        return found - {None}

    assert pages(first)  # the pages were mounted
    assert pages(first) == pages(second)  # the same objects, with their logins


# `squidd run` as the command line starts it: every command module is imported for its
# subparser, then the daemon is built. What other commands need (the MCP client `squidd
# mcp` connects with, the terminal's password prompt of `squidd matrix`) stays out.
RUN_PROBE = """
import json, sys
from pathlib import Path
from squidd import cli
from squidd.config import load_settings
from squidd.gateway.build import build_daemon
from squidd.web import dashboard

cli._parser().parse_args(["run"])
build_daemon(load_settings(Path(sys.argv[1])), dashboard=dashboard)
print(json.dumps(sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)))
"""

OTHER_COMMANDS_ONLY = ("squidd.gateway.mcp", "getpass", "termios")


def test_run_does_not_load_what_only_other_commands_need(tmp_path: Path) -> None:
    config = write_daemon_config(tmp_path, "http://127.0.0.1:9/v1", api_key="sk-lazy-imports")
    probe = run_python("-c", RUN_PROBE, str(config), json.dumps(OTHER_COMMANDS_ONLY))
    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout.strip().splitlines()[-1]) == []
