#!/usr/bin/env bash
# start.sh DATA_DIR -- a disposable mail stack on 127.0.0.1 for the email channel tests.
#
#   Dovecot: IMAP (STARTTLS, IDLE), IMAPS, LMTP, and its auth service on TCP for Postfix SASL
#   Postfix: SMTP with STARTTLS and SASL (through Dovecot), delivering the test domain to
#            Dovecot over LMTP; everything else is refused (nothing leaves the machine)
#
# Runs as root, needs no systemd, installs the Debian packages when missing. Every port is
# chosen free at start unless MAIL_<NAME>_PORT is set. Idempotent: when the stack for DATA_DIR
# is already up and answering it returns at once with the same ports.
# Settings (env): MAIL_DOMAIN (example.test), MAIL_USERS ("bot:botpw alice:alicepw"),
#   MAIL_IMAP_PORT MAIL_IMAPS_PORT MAIL_SMTP_PORT MAIL_LMTP_PORT MAIL_AUTH_PORT.
# Output: DATA_DIR/mail.env (KEY=VALUE lines), DATA_DIR/pids/{dovecot,postfix}.pid,
#   logs in DATA_DIR/dovecot.log and DATA_DIR/postfix.log. Stop with stop.sh DATA_DIR.
# `start.sh --install-only` installs the packages and returns (used by ./prepare).
set -euo pipefail

DATA=${1:?usage: start.sh DATA_DIR | start.sh --install-only}
DOMAIN=${MAIL_DOMAIN:-example.test}
USERS=${MAIL_USERS:-bot:botpw alice:alicepw}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

say() { echo "mail-start: $*" >&2; }
fail() { say "ERROR: $*"; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (Dovecot and Postfix drop privileges themselves)"

# ------------------------------------------------------------------ packages
ensure_packages() {
  local missing=()
  [ -x /usr/sbin/dovecot ] || missing+=(dovecot-core)
  [ -x /usr/lib/dovecot/imap ] || missing+=(dovecot-imapd)
  [ -x /usr/lib/dovecot/lmtp ] || missing+=(dovecot-lmtpd)
  [ -x /usr/sbin/postfix ] || missing+=(postfix)
  command -v openssl >/dev/null || missing+=(openssl)
  command -v runuser >/dev/null || missing+=(util-linux)
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing ${missing[*]}"
  # Package scripts must not start system-wide daemons on the standard ports.
  local added_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    added_policy=1
  fi
  echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
  local apt=(env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o DPkg::Lock::Timeout=300
             -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
  local log=/tmp/squidd-mail-apt.log ok=1
  "${apt[@]}" install --no-install-recommends "${missing[@]}" > "$log" 2>&1 || ok=0
  if [ $ok = 0 ]; then
    say "install failed; apt-get update, then one more try"
    "${apt[@]}" update >> "$log" 2>&1 || true
    ok=1
    "${apt[@]}" install --no-install-recommends "${missing[@]}" >> "$log" 2>&1 || ok=0
  fi
  [ $added_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
  [ $ok = 1 ] || { tail -20 "$log" >&2; fail "apt-get install failed (see $log)"; }
}
ensure_packages
[ "$DATA" = "--install-only" ] && exit 0
mkdir -p "$DATA"
DATA=$(cd "$DATA" && pwd)
# postfix-script also looks at the default instance; "No configuration" leaves none behind.
if [ ! -e /etc/postfix/main.cf ]; then
  mkdir -p /etc/postfix
  printf 'compatibility_level = 3.6\ninet_interfaces = loopback-only\n' > /etc/postfix/main.cf
fi

# ------------------------------------------------------------------ helpers
running() {  # a zombie (reaped late by a non-init PID 1) counts as gone
  [ -n "${1:-}" ] && [ -e "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}
read_pid() { [ -s "$1" ] && tr -dc '0-9' < "$1" || true; }
greeting_is() {  # greeting_is PORT PREFIX
  local line=""
  { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
  IFS= read -r -t 2 line <&3 || true
  exec 3<&- 3>&-
  [[ "$line" == "$2"* ]]
}
# free_ports COUNT [TAKEN...]: COUNT free ports, none of them TAKEN. All are held bound
# until every one is chosen, so no port is handed out twice (ports chosen one at a time,
# each released before the next, could come back equal: Dovecot then refuses the config,
# "duplicate listener").
free_ports() {
  python3 - "$@" <<'PY'
import socket, sys

count, taken = int(sys.argv[1]), set(sys.argv[2:])
held, ports = [], []
while len(ports) < count:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    held.append(sock)
    port = str(sock.getsockname()[1])
    if port not in taken and port not in ports:
        ports.append(port)
print(" ".join(ports))
for sock in held:
    sock.close()
PY
}

# ports the caller asked for (read before mail.env of an earlier run is sourced)
REQ_IMAP=${MAIL_IMAP_PORT:-}; REQ_IMAPS=${MAIL_IMAPS_PORT:-}; REQ_SMTP=${MAIL_SMTP_PORT:-}
REQ_LMTP=${MAIL_LMTP_PORT:-}; REQ_AUTH=${MAIL_AUTH_PORT:-}
PIDS="$DATA/pids"
mkdir -p "$PIDS"
if [ -s "$DATA/mail.env" ]; then
  # shellcheck disable=SC1091
  . "$DATA/mail.env"
  if running "$(read_pid "$PIDS/dovecot.pid")" && running "$(read_pid "$PIDS/postfix.pid")" \
     && greeting_is "$MAIL_IMAP_PORT" "* OK" && greeting_is "$MAIL_SMTP_PORT" "220"; then
    say "already running"
    exit 0
  fi
fi
"$HERE/stop.sh" "$DATA" > /dev/null 2>&1 || true

# shellcheck disable=SC2086 # the ports asked for, as separate words (an empty one is none)
read -r -a FREE <<< "$(free_ports 5 $REQ_IMAP $REQ_IMAPS $REQ_SMTP $REQ_LMTP $REQ_AUTH)"
IMAP=${REQ_IMAP:-${FREE[0]}}; IMAPS=${REQ_IMAPS:-${FREE[1]}}; SMTP=${REQ_SMTP:-${FREE[2]}}
LMTP=${REQ_LMTP:-${FREE[3]}}; AUTH=${REQ_AUTH:-${FREE[4]}}

# ------------------------------------------------------------------ files
mkdir -p "$DATA/tls" "$DATA/mail" "$DATA/dovecot-state" "$DATA/postfix/etc" "$DATA/postfix/lib"
chmod 755 "$DATA"
chown nobody:nogroup "$DATA/mail"
chown postfix "$DATA/postfix/lib"
for u in nobody postfix dovecot; do
  runuser -u "$u" -- test -x "$DATA" \
    || fail "$DATA cannot be entered by user $u (a parent lacks o+x, e.g. a 0700 temp dir)"
done
if [ ! -s "$DATA/tls/cert.pem" ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$DATA/tls/key.pem" -out "$DATA/tls/cert.pem" > /dev/null 2>&1
fi
chmod 644 "$DATA/tls/cert.pem"
chgrp postfix "$DATA/tls/key.pem"
chmod 640 "$DATA/tls/key.pem"

# Mail is stored as nobody: Dovecot refuses to deliver as uid 0.
: > "$DATA/users"
RCPTS=""
for entry in $USERS; do
  user=${entry%%:*}; pw=${entry#*:}
  [[ "$user" == *@* ]] || user="$user@$DOMAIN"
  printf '%s:{PLAIN}%s:%s:%s::%s::\n' "$user" "$pw" "$(id -u nobody)" "$(id -g nobody)" \
    "$DATA/mail/$user" >> "$DATA/users"
  RCPTS="${RCPTS:+$RCPTS, }$user=ok"
done
chmod 644 "$DATA/users"

# Unix socket paths are limited to 108 bytes: keep the run dirs short.
RUN="$DATA/run"; SPOOL="$DATA/postfix/spool"
if [ ${#DATA} -gt 50 ]; then
  SHORT="/tmp/sqm-$(printf %s "$DATA" | md5sum | cut -c1-10)"
  RUN="$SHORT/run"; SPOOL="$SHORT/spool"
fi
mkdir -p "$RUN" "$SPOOL"
TAG=$(printf %s "$DATA" | md5sum | cut -c1-8)

cat > "$DATA/dovecot.conf" <<EOF
# written by start.sh: self-contained (does not read /etc/dovecot), loopback only
base_dir = $RUN
state_dir = $DATA/dovecot-state
instance_name = squidd-mail-$TAG
log_path = $DATA/dovecot.log
protocols = imap lmtp
listen = 127.0.0.1
hostname = localhost
postmaster_address = postmaster@$DOMAIN
ssl = yes
ssl_cert = <$DATA/tls/cert.pem
ssl_key = <$DATA/tls/key.pem
disable_plaintext_auth = no
auth_mechanisms = plain login
auth_failure_delay = 0
mail_location = maildir:~/Maildir
mail_uid = nobody
mail_gid = nogroup
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%u $DATA/users
}
userdb {
  driver = passwd-file
  args = username_format=%u $DATA/users
}
protocol imap {
  mail_max_userip_connections = 100
}
service imap-login {
  inet_listener imap {
    port = $IMAP
  }
  inet_listener imaps {
    port = $IMAPS
    ssl = yes
  }
}
service lmtp {
  inet_listener lmtp {
    address = 127.0.0.1
    port = $LMTP
  }
}
service auth {
  inet_listener auth-postfix {
    address = 127.0.0.1
    port = $AUTH
  }
}
EOF

cat > "$DATA/postfix/etc/main.cf" <<EOF
# written by start.sh: a separate instance, independent of /etc/postfix
compatibility_level = 3.6
queue_directory = $SPOOL
data_directory = $DATA/postfix/lib
# Postfix writes its log only to a file under one of these prefixes.
maillog_file = $DATA/postfix.log
maillog_file_prefixes = $DATA/
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
myhostname = localhost
mydestination =
mynetworks = 127.0.0.0/8
alias_maps =
alias_database =
local_recipient_maps =
# plus-addressing (bot1+work@...) reaches bot1's box, as at most providers
recipient_delimiter = +
virtual_mailbox_domains = $DOMAIN
virtual_mailbox_maps = inline:{ $RCPTS }
virtual_transport = lmtp:inet:127.0.0.1:$LMTP
default_transport = error:only the test domain is delivered
relay_transport = error:only the test domain is delivered
smtp_dns_support_level = disabled
smtpd_relay_restrictions = permit_sasl_authenticated, reject_unauth_destination
smtpd_tls_cert_file = $DATA/tls/cert.pem
smtpd_tls_key_file = $DATA/tls/key.pem
smtpd_tls_security_level = may
smtpd_sasl_auth_enable = yes
smtpd_sasl_type = dovecot
smtpd_sasl_path = inet:127.0.0.1:$AUTH
smtpd_tls_auth_only = yes
# the suite sends a 20 MB mail on purpose
message_size_limit = 60000000
mailbox_size_limit = 0
virtual_mailbox_limit = 0
smtpd_banner = \$myhostname ESMTP squidd-test
biff = no
EOF
cat > "$DATA/postfix/etc/master.cf" <<EOF
127.0.0.1:$SMTP inet n - n - - smtpd
pickup    unix  n - n 60 1 pickup
cleanup   unix  n - n -  0 cleanup
qmgr      unix  n - n 300 1 qmgr
tlsmgr    unix  - - n 1000? 1 tlsmgr
rewrite   unix  - - n -  - trivial-rewrite
bounce    unix  - - n -  0 bounce
defer     unix  - - n -  0 bounce
trace     unix  - - n -  0 bounce
verify    unix  - - n -  1 verify
flush     unix  n - n 1000? 0 flush
proxymap  unix  - - n -  - proxymap
smtp      unix  - - n -  - smtp
relay     unix  - - n -  - smtp
showq     unix  n - n -  - showq
error     unix  - - n -  - error
retry     unix  - - n -  - error
discard   unix  - - n -  - discard
lmtp      unix  - - n -  - lmtp
anvil     unix  - - n -  1 anvil
scache    unix  - - n -  1 scache
postlog   unix-dgram n - n - 1 postlogd
EOF

# ------------------------------------------------------------------ start
dovecot -c "$DATA/dovecot.conf" \
  || { tail -20 "$DATA/dovecot.log" >&2 2>/dev/null || true; "$HERE/stop.sh" "$DATA"; fail "dovecot did not start"; }
postfix -c "$DATA/postfix/etc" start >> "$DATA/postfix-start.log" 2>&1 \
  || { cat "$DATA/postfix-start.log" "$DATA/postfix.log" >&2 2>/dev/null || true
       "$HERE/stop.sh" "$DATA"; fail "postfix did not start (try: postfix -c $DATA/postfix/etc start-fg)"; }

deadline=$((SECONDS + 30))
until greeting_is "$IMAP" "* OK" && greeting_is "$SMTP" "220" && greeting_is "$LMTP" "220" \
      && [ -s "$RUN/master.pid" ] && [ -s "$SPOOL/pid/master.pid" ]; do
  if [ $SECONDS -ge $deadline ]; then
    tail -20 "$DATA/dovecot.log" "$DATA/postfix.log" >&2 2>/dev/null || true
    "$HERE/stop.sh" "$DATA"
    fail "servers not answering after 30 s"
  fi
  sleep 0.1
done
read_pid "$RUN/master.pid" > "$PIDS/dovecot.pid"
read_pid "$SPOOL/pid/master.pid" > "$PIDS/postfix.pid"

cat > "$DATA/mail.env" <<EOF
MAIL_HOST=127.0.0.1
MAIL_DOMAIN=$DOMAIN
MAIL_IMAP_PORT=$IMAP
MAIL_IMAPS_PORT=$IMAPS
MAIL_SMTP_PORT=$SMTP
MAIL_LMTP_PORT=$LMTP
MAIL_AUTH_PORT=$AUTH
MAIL_CA_FILE=$DATA/tls/cert.pem
MAIL_DATA=$DATA
MAIL_POSTFIX_CONF=$DATA/postfix/etc
EOF
say "ready: IMAP $IMAP IMAPS $IMAPS SMTP $SMTP LMTP $LMTP (dovecot $(cat "$PIDS/dovecot.pid"), postfix $(cat "$PIDS/postfix.pid"))"
