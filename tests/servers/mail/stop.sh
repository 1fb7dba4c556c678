#!/usr/bin/env bash
# stop.sh DATA_DIR [--purge] -- stop the Dovecot and Postfix started by start.sh DATA_DIR.
# Only the recorded PIDs are signalled, and only if they still are the expected program.
set -uo pipefail
DATA=${1:?usage: stop.sh DATA_DIR [--purge]}
[ -d "$DATA" ] || exit 0
DATA=$(cd "$DATA" && pwd)

running() {
  [ -n "${1:-}" ] && [ -e "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}
stop_pidfile() {  # stop_pidfile NAME FILE COMM
  local name=$1 file=$2 comm=$3 pid
  [ -s "$file" ] || return 0
  pid=$(tr -dc '0-9' < "$file")
  if running "$pid" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ]; then
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 100); do running "$pid" || break; sleep 0.1; done
    if running "$pid"; then
      echo "mail-stop: $name ($pid) ignored TERM; sending KILL" >&2
      kill -KILL "$pid" 2>/dev/null
    fi
    echo "mail-stop: stopped $name ($pid)" >&2
  fi
  rm -f "$file"
}
stop_pidfile postfix "$DATA/pids/postfix.pid" master
# the daemons' own pid files cover a start that never got to copy them
SPOOL=$(sed -n 's/^queue_directory = //p' "$DATA/postfix/etc/main.cf" 2>/dev/null)
[ -n "$SPOOL" ] && stop_pidfile postfix "$SPOOL/pid/master.pid" master
stop_pidfile dovecot "$DATA/pids/dovecot.pid" dovecot
RUN=$(sed -n 's/^base_dir = //p' "$DATA/dovecot.conf" 2>/dev/null)
[ -n "$RUN" ] && stop_pidfile dovecot "$RUN/master.pid" dovecot
if [ "${2:-}" = "--purge" ]; then
  [ -n "$SPOOL" ] && case "$SPOOL" in /tmp/sqm-*) rm -rf "$(dirname "$SPOOL")";; esac
  rm -rf "$DATA"
fi
exit 0
