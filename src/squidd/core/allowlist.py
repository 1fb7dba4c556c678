"""The common part of every channel's "who is answered": exact ids and whole domains.

A channel says how its ids are compared (`fold`: email lowercases addresses, Matrix keeps
MXIDs as written) and where the domain of an id is (`domain_of`: an address's part after the
`@`, an MXID's server after the `:`); domains are compared in lowercase. An empty allowlist
lets nobody in, and the channel's own id (`own`) is never let in, whatever the lists say.
What else a channel checks (rooms and mentions, mail loops and sender authentication) stays
in its own policy module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["Allowlist"]


def _same(value: str) -> str:
    return value


@dataclass(frozen=True, slots=True)
class Allowlist:
    """Ids and domains let in; see the module docstring."""

    ids: frozenset[str]
    domains: frozenset[str]
    domain_of: Callable[[str], str]
    fold: Callable[[str], str] = _same
    own: str = ""

    @classmethod
    def of(
        cls,
        ids: Iterable[str],
        domains: Iterable[str],
        *,
        domain_of: Callable[[str], str],
        fold: Callable[[str], str] = _same,
        own: str = "",
    ) -> Allowlist:
        return cls(
            ids=frozenset(fold(i) for i in ids),
            domains=frozenset(d.lower() for d in domains),
            domain_of=domain_of,
            fold=fold,
            own=fold(own) if own else "",
        )

    def allows(self, identity: str) -> bool:
        """Whether `identity` is let in: listed itself, or its domain is."""
        who = self.fold(identity)
        if self.own and who == self.own:
            return False
        return who in self.ids or self.domain_of(who).lower() in self.domains
