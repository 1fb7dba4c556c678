# Sourced by the scripts in this folder: finds the repository and makes sure its virtual
# environment exists and holds the project with exactly the locked dependencies
# (requirements/run.txt, or requirements/test.txt with the test extra; see scripts/lock).
# It is re-installed only when pyproject.toml or that lock changes.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${SQUIDD_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"

ensure_venv() {
    local extra="${1:-}"
    local lock="$ROOT/requirements/run.txt"
    [ "$extra" = test ] && lock="$ROOT/requirements/test.txt"
    if ! "$PYTHON" "$ROOT/scripts/lockcheck.py" --stamps; then
        echo "the dependencies in pyproject.toml changed: run scripts/lock, then commit the locks" >&2
        return 1
    fi
    if [ ! -x "$VENV/bin/python" ]; then
        echo "creating $VENV" >&2
        "$PYTHON" -m venv "$VENV"
    fi
    local want
    want="$(cat "$ROOT/pyproject.toml" "$lock" | sha256sum | cut -c1-16)-${extra:-base}"
    if [ "$(cat "$VENV/.squidd-installed" 2>/dev/null)" != "$want" ]; then
        echo "installing squidd into $VENV" >&2
        # the lock holds pip itself and the build backend, so nothing unpinned is fetched:
        # the project goes in without its dependencies and without an isolated build
        "$VENV/bin/python" -m pip install -q --require-hashes -r "$lock" >&2
        "$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation -e "$ROOT" >&2
        "$VENV/bin/python" -m pip check >&2
        echo "$want" > "$VENV/.squidd-installed"
    fi
}
