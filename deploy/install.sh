#!/bin/sh
# Install squidd as a system service. Idempotent: run it again to upgrade.
#
#   sudo deploy/install.sh [SOURCE]     SOURCE: a checkout (default: this one) or a wheel
#                                       built from this checkout
#
# The dependencies are the exact versions locked in requirements/run.txt (with hashes: the
# versions the test suite passed with), not the newest that pyproject.toml's ranges allow on
# the day of the install; squidd itself goes in without dependencies of its own (see
# scripts/lock).
#
# Creates the system user `squidd`, a virtualenv in /opt/squidd, /etc/squidd/config.toml
# from config.example.toml when absent (never overwritten), /etc/squidd/credentials/ for
# secrets read through LoadCredential=, and the systemd unit. It does not start the
# service: edit the config, put secrets in place, then `systemctl enable --now squidd`.
set -eu

PREFIX=/opt/squidd
CONF_DIR=/etc/squidd
UNIT=/etc/systemd/system/squidd.service
HERE=$(cd "$(dirname "$0")/.." && pwd)
SOURCE=${1:-$HERE}
PYTHON=${PYTHON:-python3}
LOCK=$HERE/requirements/run.txt

"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
    echo "install.sh: squidd needs Python 3.11 or newer ($PYTHON is older)" >&2
    exit 1
}

# before anything changes: a lock that does not match pyproject.toml would install a set of
# packages nobody tested
"$PYTHON" "$HERE/scripts/lockcheck.py" --stamps || {
    echo "install.sh: requirements/run.txt is out of step with pyproject.toml (run scripts/lock)" >&2
    exit 1
}

if [ "$(id -u)" -ne 0 ]; then
    echo "install.sh: run as root (sudo)" >&2
    exit 1
fi

if ! getent passwd squidd >/dev/null; then
    useradd --system --home-dir /var/lib/squidd --no-create-home \
        --shell /usr/sbin/nologin --user-group squidd
    echo "created system user squidd"
fi

if [ ! -x "$PREFIX/bin/python" ]; then
    "$PYTHON" -m venv "$PREFIX"
    echo "created virtualenv $PREFIX"
fi
# the lock holds pip and the build backend too: nothing unpinned is fetched
"$PREFIX/bin/python" -m pip install --quiet --require-hashes -r "$LOCK"
"$PREFIX/bin/python" -m pip install --quiet --upgrade --no-deps --no-build-isolation "$SOURCE"
"$PREFIX/bin/python" -m pip check >/dev/null || {
    "$PREFIX/bin/python" -m pip check >&2
    echo "install.sh: $SOURCE needs other packages than $LOCK holds" >&2
    exit 1
}
echo "installed $("$PREFIX/bin/squidd" --version)"
[ -f "$HERE/README.md" ] && install -m 0644 "$HERE/README.md" "$PREFIX/README.md"
# the README links into docs/: install them beside it
if [ -d "$HERE/docs" ]; then
    install -d -m 0755 "$PREFIX/docs"
    install -m 0644 "$HERE"/docs/*.md "$PREFIX/docs/"
fi

install -d -m 0750 -o root -g squidd "$CONF_DIR"
install -d -m 0700 -o root -g root "$CONF_DIR/credentials"
if [ ! -e "$CONF_DIR/config.toml" ]; then
    if [ -f "$HERE/config.example.toml" ]; then
        install -m 0640 -o root -g squidd "$HERE/config.example.toml" "$CONF_DIR/config.toml"
    else
        install -m 0640 -o root -g squidd /dev/null "$CONF_DIR/config.toml"
    fi
    echo "wrote $CONF_DIR/config.toml (edit it)"
else
    echo "kept existing $CONF_DIR/config.toml"
fi

install -m 0644 "$HERE/systemd/squidd.service" "$UNIT"
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload
fi
echo "installed $UNIT"
if [ ! -s "$CONF_DIR/credentials/llm_api_key" ]; then
    echo "note: $CONF_DIR/credentials/llm_api_key is missing; the unit loads it (LoadCredential=)."
    echo "      Create it, or drop that line with 'systemctl edit squidd' if your endpoint needs no key."
fi
cat <<NEXT
next:
  1. edit $CONF_DIR/config.toml (squidd --config $CONF_DIR/config.toml config check)
  2. secrets, one per file, mode 0600, e.g.: $CONF_DIR/credentials/llm_api_key
  3. systemctl enable --now squidd && squidd --config $CONF_DIR/config.toml status
NEXT
