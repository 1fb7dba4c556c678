"""Who gets an answer: loop protection, the allowlist, sender authentication, rate limits.

The From header alone proves nothing, so by default a mail is answered only when the
receiving server the user trusts (its authserv-id) wrote an `Authentication-Results` field
(RFC 8601) saying DMARC passed, or DKIM passed for a domain aligned with the From domain.
Robots are never answered (RFC 3834), so two auto-responders cannot ping-pong.

Every check returns a short machine-readable reason, logged when a mail is ignored.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from squidd.channels.email.headers import MailHeaders
from squidd.core.allowlist import Allowlist

_ROBOT_LOCAL_RE = re.compile(
    r"^(mailer-daemon|postmaster|no-?reply|do-?not-?reply|bounces?|notifications?)([+._-].*)?$"
)
_COMMENT_RE = re.compile(r"\([^()]*\)")


@dataclass(frozen=True, slots=True)
class AuthResult:
    """One `method=result` of an Authentication-Results field, with its properties."""

    method: str
    result: str
    props: dict[str, str] = field(default_factory=dict)


def parse_auth_results(value: str) -> tuple[str, list[AuthResult]]:
    """(authserv-id, results) of one Authentication-Results field (RFC 8601, tolerant)."""
    text = value
    for _ in range(5):  # comments may nest
        text = _COMMENT_RE.sub(" ", text)
    parts = [p.strip() for p in text.split(";")]
    if not parts or not parts[0]:
        return "", []
    authserv_id = parts[0].split()[0].lower()
    results: list[AuthResult] = []
    for part in parts[1:]:
        tokens = part.split()
        if not tokens or "=" not in tokens[0]:
            continue
        method, _, result = tokens[0].partition("=")
        props: dict[str, str] = {}
        for token in tokens[1:]:
            key, sep, val = token.partition("=")
            if sep:
                props[key.lower()] = val.strip('"').lower()
        results.append(AuthResult(method.split("/")[0].lower(), result.lower(), props))
    return authserv_id, results


def _aligned(signing_domain: str, from_domain: str) -> bool:
    """Relaxed alignment: same domain, or one a subdomain of the other (never a bare TLD)."""
    d = signing_domain.strip(".").lower()
    f = from_domain.strip(".").lower()
    if not d or "." not in d or not f:
        return False
    return d == f or f.endswith("." + d) or d.endswith("." + f)


def trusted_results(headers: MailHeaders, trusted: set[str]) -> list[AuthResult]:
    """The verdicts the trusted server wrote for this delivery.

    A receiving server adds its Authentication-Results on top of what the sender sent, so
    its fields stand above the sender's own header block; any such field further down may
    be a forgery carried in by the sender. Scanning from the top, the block starts at the
    first field with a trusted authserv-id and ends at the next Received field (the hop that
    brought the mail in). Split setups (one field for DKIM, one for DMARC) stay together.
    """
    fields = headers.trace or tuple(("authentication-results", v) for v in headers.auth_results)
    results: list[AuthResult] = []
    started = False
    for name, value in fields:
        if name == "received":
            if started:
                break
            continue
        authserv_id, found = parse_auth_results(value)
        if authserv_id in trusted:
            started = True
            results.extend(found)
    return results


def _signer(result: AuthResult) -> str:
    return result.props.get("header.d") or result.props.get("header.i", "").rpartition("@")[2]


def authentication_failure(headers: MailHeaders, trusted_authserv_id: str) -> str | None:
    """None when the trusted server vouches for the From domain, else why not.

    A failure for the From domain outweighs any pass: a forged field can add a pass, but
    it cannot take back the real server's fail.
    """
    if not headers.from_addr:
        return "no_single_from"
    from_domain = headers.from_addr.rpartition("@")[2]
    # One id, or several separated by commas (a provider whose MX hosts sign as mx1, mx2...).
    trusted = {t for t in re.split(r"[,\s]+", trusted_authserv_id.lower()) if t}
    results = trusted_results(headers, trusted)
    if not results:
        return "no_trusted_authentication_results"
    dmarc = [r for r in results if r.method == "dmarc"]
    if any(r.result == "fail" for r in dmarc):
        return "dmarc_fail"
    dkim = [r for r in results if r.method == "dkim"]
    if any(r.result == "fail" and _aligned(_signer(r), from_domain) for r in dkim):
        return "dkim_fail"
    for r in dmarc:
        header_from = r.props.get("header.from", from_domain)
        if r.result == "pass" and header_from == from_domain:
            return None
    if any(r.result == "pass" and _aligned(_signer(r), from_domain) for r in dkim):
        return None
    return "no_dmarc_or_aligned_dkim_pass"


def loop_reason(headers: MailHeaders, own_address: str) -> str | None:
    """Why answering this mail could start a mail loop (RFC 3834), or None."""
    sender = headers.from_addr
    if headers.from_too_long:
        return "from_too_long"
    if headers.from_count == 0:
        return "no_from"
    if headers.from_count > 1:
        return "several_from_addresses"
    if sender == own_address.strip().lower():
        return "own_address"
    if headers.auto_submitted and headers.auto_submitted.split(";")[0].strip() != "no":
        return "auto_submitted"
    if headers.precedence in ("bulk", "list", "junk"):
        return "precedence_" + headers.precedence
    if headers.has_list_id:
        return "mailing_list"
    if headers.return_path is not None and headers.return_path == "":
        return "null_return_path"
    if headers.autoreply_marked:
        return "autoreply_header"
    if "multipart/report" in headers.content_type:
        return "delivery_report"
    if _ROBOT_LOCAL_RE.match(sender.partition("@")[0]):
        return "robot_sender"
    return None


def domain_of(address: str) -> str:
    return address.rpartition("@")[2]


def is_allowed(address: str, senders: Sequence[str], domains: Sequence[str]) -> bool:
    """Allowlisted by exact address or by domain (subdomains not included). Empty: nobody.
    The common part every channel shares (`core.allowlist`), addresses in lowercase."""
    return Allowlist.of(senders, domains, domain_of=domain_of, fold=str.lower).allows(address)


class RateLimiter:
    """At most `count` answers per sender within a sliding `window_s`: a guard against mail
    loops, not a filter. Mail over the limit waits (the channel defers it), it is not
    dropped.

    The times are wall-clock seconds, so they mean the same to the next process: the channel
    keeps `snapshot()` in its state file and hands it to `restore` at start, and a restart
    does not reset the counts (a mail loop across restarts would escape the limit). The table
    is bounded: a sender keeps only its newest `count` times (the only ones the window
    needs), a sender whose window emptied is forgotten, and at most `max_senders` are kept.
    """

    def __init__(
        self,
        count: int,
        window_s: float,
        clock: Callable[[], float] = time.time,
        *,
        max_senders: int = 10_000,
    ) -> None:
        self._count = count
        self._window = window_s
        self._clock = clock
        self._max_senders = max_senders
        self._hits: dict[str, deque[float]] = {}

    def _prune(self, sender: str) -> deque[float]:
        hits = self._hits.setdefault(sender, deque(maxlen=self._count))
        horizon = self._clock() - self._window
        while hits and hits[0] <= horizon:
            hits.popleft()
        return hits

    def allows(self, sender: str) -> bool:
        return len(self._prune(sender)) < self._count

    def wait_s(self, sender: str) -> float:
        """Seconds until `sender` may be answered again (0 when now)."""
        hits = self._prune(sender)
        if len(hits) < self._count:
            return 0.0
        return max(0.0, hits[len(hits) - self._count] + self._window - self._clock())

    def record(self, sender: str) -> None:
        self._prune(sender).append(self._clock())
        # Senders whose window emptied are forgotten, so the table cannot grow without bound.
        for key in [k for k, v in self._hits.items() if not v and k != sender]:
            del self._hits[key]
        if len(self._hits) > self._max_senders:
            oldest = sorted(self._hits, key=lambda k: self._hits[k][-1] if self._hits[k] else 0)
            for key in oldest[: len(self._hits) - self._max_senders]:
                del self._hits[key]

    def snapshot(self) -> dict[str, list[float]]:
        """The times still inside their window, per sender (what `restore` takes back)."""
        out: dict[str, list[float]] = {}
        for sender in list(self._hits):
            hits = self._prune(sender)
            if hits:
                out[sender] = list(hits)
            else:
                del self._hits[sender]
        return out

    def restore(self, saved: Mapping[str, Sequence[float]]) -> None:
        """Take back a `snapshot()`. A time ahead of the clock (the clock was set back) counts
        as now, so it holds a sender back for one window at most."""
        now = self._clock()
        self._hits = {}
        for sender, times in saved.items():
            kept = sorted(min(float(t), now) for t in times)[-self._count :]
            self._hits[sender] = deque(kept, maxlen=self._count)
        self.snapshot()  # drop what has expired meanwhile


@dataclass(frozen=True, slots=True)
class Gate:
    """The full decision for one mail, in the order that keeps robots out first."""

    own_address: str
    allowed_senders: Sequence[str]
    allowed_domains: Sequence[str]
    require_authentication: bool
    trusted_authserv_id: str

    def reason_to_ignore(self, headers: MailHeaders) -> str | None:
        reason = loop_reason(headers, self.own_address)
        if reason:
            return reason
        if not is_allowed(headers.from_addr, self.allowed_senders, self.allowed_domains):
            return "not_allowlisted"
        if self.require_authentication:
            return authentication_failure(headers, self.trusted_authserv_id)
        return None
