"""Who is acting (a user, an admin, the hub's spawner, the service itself) and the refusals they may meet."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..tenants import Tenant


class Forbidden(Exception):
    """The caller may not do this (a 403); the message says why."""


class TooMany(Exception):
    """The caller has too much queued already (a 429); the message says how much and what to do."""


@dataclass
class Identity:
    name: str
    admin: bool = False
    tenants: list[Tenant] = field(default_factory=list)
    kind: str = "user"
    spawner: bool = False  # the hub's spawner, with the service's own token

    def as_spawner(self) -> Identity:
        """This user, as the hub's spawner acts for them (queueing their notebook)."""
        return replace(self, spawner=True)

    def namespaces(self) -> list[str] | None:
        """Namespaces this identity may act in (None: all)."""
        return None if self.admin else [t.namespace for t in self.tenants if t.usable]


#: The service acting on its own behalf (the hub's spawner uses the service's token too).
SERVICE = Identity(name="tenancy", admin=True, kind="service", spawner=True)
