#!/usr/bin/env bash
# Starts a throw-away Synapse on 127.0.0.1 (free port) with DATA_DIR as its data dir and
# prints SYNAPSE_URL / SYNAPSE_PID / SYNAPSE_SHARED_SECRET_FILE lines for `eval`.
# Usage: tests/servers/synapse/start.sh DATA_DIR      (stop with stop.sh DATA_DIR)
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DATA_DIR" >&2; exit 2; }
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
PY="${SQUIDD_VENV:-$ROOT/.venv}/bin/python"
DATA="$(mkdir -p "$1" && cd "$1" && pwd)"
cd "$ROOT"
exec "$PY" -m tests.servers.synapse.server start "$DATA"
