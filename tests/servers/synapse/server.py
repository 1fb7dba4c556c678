"""A throw-away Synapse homeserver on loopback for the Matrix tests.

Synapse is installed (pinned) from the package index into its own virtualenv under the
repository's gitignored `.test-servers/` dir, once; later runs reuse it. Each test session
gets a fresh data dir (in /dev/shm when there is one: SQLite fsyncs are slow on disk), a
free port on 127.0.0.1, a config without federation and with every rate limit raised (or,
with `stock_limits`, Synapse's own defaults: `DEFAULT_RC_MESSAGE`), an access log read by
`requests`, and users registered through the shared-secret admin API. The server is stopped
by its PID.

Usable from Python (`SynapseServer`) and from the shell:
`python -m tests.servers.synapse.server start DATA_DIR` / `stop DATA_DIR`.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SYNAPSE_PIN = os.environ.get("SQUIDD_TEST_SYNAPSE_SPEC", "matrix-synapse==1.163.2")
REPO_ROOT = Path(__file__).resolve().parents[3]
CACHE_DIR = REPO_ROOT / ".test-servers"
VENV_DIR = CACHE_DIR / "synapse-venv"
SERVER_NAME = "localhost"
READY_TIMEOUT_S = 120.0


class SynapseError(RuntimeError):
    """The test homeserver could not be installed, started or used."""


def _log(msg: str) -> None:
    print(f"synapse: {msg}", file=sys.stderr, flush=True)


def ensure_installed(venv: Path = VENV_DIR, spec: str = SYNAPSE_PIN) -> Path:
    """Install `spec` into `venv` unless a stamp says it is already there; return its python."""
    python = venv / "bin" / "python"
    stamp = venv / ".installed-spec"
    if python.exists() and stamp.exists() and stamp.read_text() == spec:
        return python
    venv.parent.mkdir(parents=True, exist_ok=True)
    lock_path = venv.parent / ".synapse-install.lock"
    with lock_path.open("w") as lock:
        import fcntl

        fcntl.flock(lock, fcntl.LOCK_EX)  # a parallel run waits for the first install
        if python.exists() and stamp.exists() and stamp.read_text() == spec:
            return python
        started = time.monotonic()
        _log(f"installing {spec} into {venv} (about a minute the first time)")
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        logfile = venv / "pip-install.log"
        with logfile.open("w") as out:
            proc = subprocess.run(
                [str(python), "-m", "pip", "install", "--disable-pip-version-check", spec],
                stdout=out,
                stderr=subprocess.STDOUT,
                check=False,
            )
        if proc.returncode != 0:
            tail = logfile.read_text(errors="replace").splitlines()[-30:]
            raise SynapseError(f"pip install {spec} failed:\n" + "\n".join(tail))
        stamp.write_text(spec)
        _log(f"installed {spec} in {time.monotonic() - started:.0f}s")
    return python


PORT_ATTEMPTS = 3


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def default_data_root() -> Path:
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return shm
    return Path(tempfile.gettempdir())


DEFAULT_RC_MESSAGE = (0.2, 10)
"""Synapse's own `rc_message` default: (per_second, burst_count)."""
_ACCESS_RE = re.compile(r'B (?P<status>\d{3}) "(?P<request>[A-Z]+ [^"]*)"')

_RATE = "{per_second: 100000, burst_count: 1000000}"


def _config(data: Path, port: int, *, stock_limits: bool = False) -> str:
    if stock_limits:  # Synapse's own defaults (rc_message: 0.2/s, burst 10) apply
        return _config(data, port).split("\nrc_message:")[0] + "\n"
    limits = "\n".join(
        f"{key}: {_RATE}"
        for key in (
            "rc_message",
            "rc_registration",
            "rc_registration_token_validity",
            "rc_joins_per_room",
            "rc_room_creation",
            "rc_admin_redaction",
            "rc_3pid_validation",
            "rc_third_party_invite",
            "rc_media_create",
            "rc_delayed_event_mgmt",
            "rc_reports",
            "rc_user_directory",
            "rc_profile",
            "rc_key_requests",
        )
    )
    return f"""# Test-only homeserver: loopback, no federation, no rate limits. Do not expose.
server_name: "{SERVER_NAME}"
public_baseurl: "http://127.0.0.1:{port}/"
report_stats: false
listeners:
  - port: {port}
    bind_addresses: ['127.0.0.1']
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: "{data}/homeserver.db"
log_config: "{data}/log.config"
media_store_path: "{data}/media_store"
signing_key_path: "{data}/signing.key"
registration_shared_secret_path: "{data}/shared_secret"
macaroon_secret_key_path: "{data}/macaroon_secret"
form_secret_path: "{data}/form_secret"
enable_registration: false
bcrypt_rounds: 4
trusted_key_servers: []
suppress_key_server_warning: true
federation_domain_whitelist: []
url_preview_enabled: false
enable_metrics: false
presence:
  enabled: false
user_directory:
  enabled: false  # no test searches it; it is updated at every registration and join
{limits}
rc_login:
  address: {_RATE}
  account: {_RATE}
  failed_attempts: {_RATE}
rc_joins:
  local: {_RATE}
  remote: {_RATE}
rc_invites:
  per_room: {_RATE}
  per_user: {_RATE}
  per_issuer: {_RATE}
rc_presence:
  per_user: {_RATE}
"""


def _log_config(data: Path) -> str:
    return f"""version: 1
formatters:
  plain:
    format: '%(asctime)s %(name)s %(levelname)s %(request)s %(message)s'
handlers:
  file:
    class: logging.FileHandler
    formatter: plain
    filename: "{data}/homeserver.log"
    encoding: utf8
  access:
    class: logging.FileHandler
    formatter: plain
    filename: "{data}/access.log"
    encoding: utf8
loggers:
  synapse.access.http:
    level: INFO
    handlers: [access]
    propagate: false
root:
  level: WARNING
  handlers: [file]
disable_existing_loggers: false
"""


@dataclass
class User:
    user_id: str
    localpart: str
    password: str
    access_token: str
    device_id: str


class SynapseServer:
    """One homeserver process. `start()`, `register()`, `restart()`, `stop()`."""

    def __init__(
        self, data_dir: Path, *, python: Path | None = None, stock_limits: bool = False
    ) -> None:
        self.data_dir = data_dir
        self.stock_limits = stock_limits
        self.python = python
        self.port = 0
        self.pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self.shared_secret = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def bot_rate(self) -> dict[str, float]:
        """The `[matrix]` rate keys that match this server's `rc_message`: the bot's defaults
        for stock limits, no budget for the raised ones."""
        return {} if self.stock_limits else {"rate_per_second": 0}

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "synapse.pid"

    def _write_files(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for name in ("shared_secret", "macaroon_secret", "form_secret"):
            path = self.data_dir / name
            if not path.exists():
                path.write_text(secrets.token_hex(24))
                path.chmod(0o600)
        self.shared_secret = (self.data_dir / "shared_secret").read_text().strip()
        config = _config(self.data_dir, self.port, stock_limits=self.stock_limits)
        (self.data_dir / "homeserver.yaml").write_text(config)
        (self.data_dir / "log.config").write_text(_log_config(self.data_dir))

    def start(self, port: int | None = None) -> None:
        """Start the server (on `port`, else the last one, else a free one) and wait for it.

        A port found free can be taken before Synapse binds it (another test worker's
        server, or the kernel handing it out as a client's source port): a port chosen here
        is then chosen again, a few times."""
        chosen = not (port or self.port)
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                self._start_once(port)
            except SynapseError as error:
                taken = "Address already in use" in str(error)
                if not (chosen and taken) or attempt == PORT_ATTEMPTS:
                    raise
                _log(f"port {self.port} was taken meanwhile, try {attempt + 1}")
                self.port = 0
            else:
                return

    def _start_once(self, port: int | None) -> None:
        if self.python is None:
            self.python = ensure_installed()
        self.port = port or self.port or free_port()
        self._write_files()
        stdout = (self.data_dir / "stdout.log").open("ab")
        started = time.monotonic()
        self._proc = subprocess.Popen(
            [str(self.python), "-m", "synapse.app.homeserver", "-c", "homeserver.yaml"],
            cwd=self.data_dir,
            stdout=stdout,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C in the test terminal is ours to handle
        )
        stdout.close()
        self.pid = self._proc.pid
        self.pid_file.write_text(str(self.pid))
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        _log(f"ready at {self.url} in {time.monotonic() - started:.1f}s (pid {self.pid})")

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise SynapseError(f"synapse exited during start-up:\n{self._log_tail()}")
            try:
                with urllib.request.urlopen(  # noqa: S310 - loopback http only
                    self.url + "/_matrix/client/versions", timeout=2
                ) as resp:
                    if resp.status == 200:
                        return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.1)
        raise SynapseError(f"synapse not ready after {READY_TIMEOUT_S}s:\n{self._log_tail()}")

    def _log_tail(self) -> str:
        parts = []
        for name in ("stdout.log", "homeserver.log"):
            path = self.data_dir / name
            if path.exists():
                parts.append(f"--- {name}\n" + "\n".join(path.read_text().splitlines()[-30:]))
        return "\n".join(parts)

    def stop(self) -> None:
        """SIGTERM the process we started, SIGKILL after 20 s."""
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.send_signal(signal.SIGTERM)
                try:
                    self._proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait(timeout=10)
            self._proc = None
        elif self.pid is not None:
            stop_pid_file(self.data_dir)
        self.pid = None
        with contextlib.suppress(FileNotFoundError):
            self.pid_file.unlink()

    def restart(self) -> None:
        self.stop()
        self.start(self.port)

    # --- client-server helpers ----------------------------------------------------------

    def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        token: str | None = None,
    ) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)  # noqa: S310
        req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", "Bearer " + token)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310
                result: dict[str, Any] = json.loads(resp.read() or b"{}")
                return result
        except urllib.error.HTTPError as exc:
            raise SynapseError(f"{method} {path} -> {exc.code} {exc.read()!r}") from None

    def requests(self, user_id: str) -> list[tuple[str, int]]:
        """The (request line, HTTP status) of each request `user_id` made, from the access
        log, in order."""
        path = self.data_dir / "access.log"
        out: list[tuple[str, int]] = []
        text = path.read_text(errors="replace") if path.exists() else ""
        for line in text.splitlines():
            match = _ACCESS_RE.search(line)
            if match and "{" + user_id + "}" in line:
                out.append((match.group("request"), int(match.group("status"))))
        return out

    def register(self, localpart: str, password: str | None = None, *, admin: bool = False) -> User:
        """Create a user with the shared-secret admin API; return it logged in."""
        password = password or secrets.token_hex(8)
        nonce = self.call("GET", "/_synapse/admin/v1/register")["nonce"]
        mac = hmac.new(self.shared_secret.encode(), digestmod=hashlib.sha1)
        mac.update(
            b"\x00".join(
                [
                    nonce.encode(),
                    localpart.encode(),
                    password.encode(),
                    b"admin" if admin else b"notadmin",
                ]
            )
        )
        result = self.call(
            "POST",
            "/_synapse/admin/v1/register",
            {
                "nonce": nonce,
                "username": localpart,
                "password": password,
                "admin": admin,
                "mac": mac.hexdigest(),
            },
        )
        return User(
            user_id=result["user_id"],
            localpart=localpart,
            password=password,
            access_token=result["access_token"],
            device_id=result.get("device_id", ""),
        )


def _is_synapse_for(pid: int, data_dir: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return False
    return b"synapse.app.homeserver" in cmdline and cwd == data_dir.resolve()


def stop_pid_file(data_dir: Path) -> None:
    """Stop the Synapse whose PID is in DATA_DIR/synapse.pid, if it really is that one."""
    pid_file = data_dir / "synapse.pid"
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    if _is_synapse_for(pid, data_dir):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while _is_synapse_for(pid, data_dir) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _is_synapse_for(pid, data_dir):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(FileNotFoundError):
        pid_file.unlink()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: server.py start|stop DATA_DIR", file=sys.stderr)
        return 2
    data = Path(argv[1]).resolve()
    if argv[0] == "stop":
        stop_pid_file(data)
        return 0
    server = SynapseServer(data)
    server.start()
    # The shell caller owns the process now; forget it so our exit does not stop it.
    server._proc = None
    print(f"SYNAPSE_URL={server.url}")
    print(f"SYNAPSE_PID={server.pid}")
    print(f"SYNAPSE_SHARED_SECRET_FILE={data / 'shared_secret'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
