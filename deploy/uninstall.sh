#!/bin/sh
# Remove the squidd service and its virtualenv. Keeps the configuration and the data
# (/etc/squidd, /var/lib/squidd) unless --purge is given.
set -eu

PURGE=no
[ "${1:-}" = "--purge" ] && PURGE=yes

if [ "$(id -u)" -ne 0 ]; then
    echo "uninstall.sh: run as root (sudo)" >&2
    exit 1
fi

if [ -d /run/systemd/system ]; then
    systemctl disable --now squidd.service 2>/dev/null || true
fi
rm -f /etc/systemd/system/squidd.service
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload
fi
rm -rf /opt/squidd
echo "removed the unit and /opt/squidd"

if [ "$PURGE" = yes ]; then
    rm -rf /etc/squidd /var/lib/squidd /var/lib/private/squidd
    if getent passwd squidd >/dev/null; then
        userdel squidd
    fi
    echo "purged configuration, data and the squidd user"
else
    echo "kept /etc/squidd and /var/lib/squidd (use --purge to remove them and the user)"
fi
