"""A person who left a team: their work that waits in it is cancelled at their next login.

Waiting work would otherwise start later in a team the person no longer belongs to, charged to
that team. Running work is left to end as it does (a notebook until it is stopped, a job until it
finishes): nobody loses work in the middle of it; an admin stops it from the admin panel or the
Tenants page when it must end now.
"""

from __future__ import annotations

import asyncio
import logging


from ..apiclient import TenancyError
from ..apiclient.aio import AsyncTenancyClient
from ..auth import TEAM_KEYS



def teams_left(user, new_groups) -> list[tuple[str, str]]:
    """(group, namespace) of the user's present teams that ``new_groups`` no longer has."""
    keep = set(new_groups or [])
    out = []
    for group in user.groups:
        props = group.properties or {}
        if group.name not in keep and any(k in props for k in TEAM_KEYS):
            out.append((group.name, str(props.get("tenancy.namespace") or group.name)))
    return sorted(out)


async def cancel_waiting_work(service, user: str, left: list[tuple[str, str]], log: logging.Logger,
                              timeout: float = 10) -> list[str]:
    """Cancel ``user``'s waiting workloads in the namespaces of ``left`` through the tenancy service
    (``service``: the hub's Service object, its own token); the ids cancelled. A failure is one line
    in the log: the login goes on."""
    client = AsyncTenancyClient.for_hub_service(service, timeout=timeout)
    if client is None:
        log.warning("%s left team(s) %s, but the hub has no tenancy service to cancel their waiting work in them",
                    user, ", ".join(g for g, _ in left))
        return []
    done: list[str] = []
    try:
        for group, namespace in left:
            waiting = await asyncio.wait_for(client.workloads(namespace=namespace, state="Pending", limit=500), timeout)
            for wl in waiting:
                if wl.get("user") == user:
                    await asyncio.wait_for(client.cancel(wl["id"]), timeout)
                    done.append(wl["id"])
                    log.info("%s left team %s: their waiting %s %s is cancelled", user, group, wl.get("kind"), wl["id"])
    except (TenancyError, asyncio.TimeoutError, OSError) as err:
        log.warning("%s left team(s) %s; cancelling their waiting work there failed: %s", user,
                    ", ".join(g for g, _ in left), err or type(err).__name__)
    return done
