#!/usr/bin/env bash
# Stops the Synapse started by start.sh for DATA_DIR, by the PID in DATA_DIR/synapse.pid
# (only if that process really is a Synapse running in DATA_DIR).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DATA_DIR" >&2; exit 2; }
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
PY="${SQUIDD_VENV:-$ROOT/.venv}/bin/python"
DATA="$(cd "$1" && pwd)"
cd "$ROOT"
exec "$PY" -m tests.servers.synapse.server stop "$DATA"
