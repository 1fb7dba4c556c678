# Sourced by the scripts in this folder: finds the repository and makes sure its virtual
# environment exists and holds the project (re-installed only when pyproject.toml changes).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${SQUIDD_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"

ensure_venv() {
    local extra="${1:-}"
    if [ ! -x "$VENV/bin/python" ]; then
        echo "creating $VENV" >&2
        "$PYTHON" -m venv "$VENV"
    fi
    local spec="$ROOT"
    [ -n "$extra" ] && spec="$ROOT[$extra]"
    local want
    want="$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)-${extra:-base}"
    if [ "$(cat "$VENV/.squidd-installed" 2>/dev/null)" != "$want" ]; then
        echo "installing squidd into $VENV" >&2
        "$VENV/bin/python" -m pip install -q --upgrade pip >&2
        "$VENV/bin/python" -m pip install -q -e "$spec" >&2
        echo "$want" > "$VENV/.squidd-installed"
    fi
}
