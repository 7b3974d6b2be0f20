"""How much room a team has now, and what each notebook profile would do: for the spawn form.

``POST /api/v1/room`` with ``{"tenant": "team-a", "profiles": {"small": {"requests": {"cpu": "5"}}}}``
answers, for a member of the team (or the hub's spawner, with the service's own
token): the room left below the team's ceiling on its quota path, what is left
of its guarantee, what its namespace's ResourceQuota still allows, the most a
node has free, and for each profile the engine's dry run (would it start now,
start after reclaiming, wait, or be refused, in a sentence), the class
notebooks run at and the warning a user gets before a notebook is stopped.
"""

from __future__ import annotations

import asyncio
import json

from tornado import web

from ..quota.errors import ValidationError
from ..quota.quantity import format_milli
from .identity import Forbidden
from .handlers import APIHandler

#: Most profiles one request may ask about (a spawn form lists a handful).
MAX_PROFILES = 50


def room_of(controller, tenant) -> dict:
    """The team's room now (amounts as people read them): ``ceiling``, ``guarantee``, ``resourceQuota``, ``node``."""
    engine = controller.engine
    ceiling, guarantee = {}, {}
    leaf = engine.quota.leaf_for(tenant.namespace)
    for node in leaf.path:
        for res, cap in node.max.items():
            left = cap - node.used.get(res, 0) - node.leaving.get(res, 0)
            ceiling[res] = min(ceiling.get(res, left), left)
    for res in leaf.managed:
        guarantee[res] = max(0, leaf.min.get(res, 0) - leaf.used.get(res, 0))
    quota = {}
    for name, rq in engine.resource_quotas.get(tenant.namespace, {}).items():
        used = engine.rq_used.get((tenant.namespace, name), {})
        for key, hard in rq.hard.items():
            if key in ("pods", "count/pods"):
                quota["pods"] = min(quota.get("pods", hard), hard - used.get(key, 0))
            elif key.startswith("requests.") or key in ("cpu", "memory"):
                res = key.split(".", 1)[-1]
                quota[res] = min(quota.get(res, hard), hard - used.get(key, 0))
    node = {res: engine.cluster.largest_free(res) for res in engine.cluster.capacity}

    def shown(amounts):
        return {r: (str(max(v, 0) // 1000) if r == "pods" else format_milli(r, max(v, 0))) for r, v in amounts.items()}

    return {"ceiling": shown(ceiling), "guarantee": shown(guarantee), "resourceQuota": shown(quota),
            "node": shown(node), "leaf": leaf.name if not leaf.virtual else None}


def _verdict(c, who, tenant, resources) -> dict:
    """What one profile would do now (the engine's dry run of a notebook asking for ``resources``)."""
    try:
        dry = c.preview_submit(who, {"kind": "notebook", "tenant": tenant.group, "resources": resources})
    except (ValidationError, Forbidden) as err:
        return {"verdict": "refused", "message": str(err)}
    if dry["state"] == "Running":
        verdict = "now"
    elif dry["startsAfterEvictions"]:
        verdict = "reclaim"
    elif dry["state"] == "Rejected" or dry["reason"] == "inadmissible":
        verdict = "refused"
    else:
        verdict = "wait"
    return {"verdict": verdict, "reason": dry["reason"], "message": dry["message"], "position": dry["position"]}


class RoomHandler(APIHandler):
    async def post(self):
        body = self.body()
        if not isinstance(body, dict) or not isinstance(body.get("tenant"), str):
            raise web.HTTPError(400, 'send {"tenant": "<team>", "profiles": {"<slug>": {"requests": {...}}}}')
        c, who = self.controller, self.identity
        tenant = next((t for t in (c.tenants if who.admin else who.tenants) if t.group == body["tenant"]), None)
        if tenant is None:
            raise web.HTTPError(403, f"{who.name} is not a member of team {body['tenant']}")
        if not tenant.usable:
            raise web.HTTPError(409, f"team {tenant.group} cannot be used: {'; '.join(tenant.errors)}")
        profiles = body.get("profiles") or {}
        if not isinstance(profiles, dict) or len(profiles) > MAX_PROFILES:
            raise web.HTTPError(400, f"profiles must be an object of at most {MAX_PROFILES} profiles")
        verdicts, decided = {}, {}
        for slug, resources in profiles.items():
            same = json.dumps(resources, sort_keys=True, default=str)
            if same not in decided:  # profiles that ask for the same get the same answer, worked out once
                # One dry run per turn of the event loop: the other users' requests are answered between.
                await asyncio.sleep(0)
                decided[same] = _verdict(c, who, tenant, resources)
            verdicts[slug] = decided[same]
        self.send({"tenant": tenant.group, "room": room_of(c, tenant), "profiles": verdicts,
                   "priorityClass": c.notebook_priority_class,
                   "warningSeconds": c.backend.notebook_warning_seconds,
                   "dashboard": self.settings.get("page_prefix", "/services/tenancy/") + "quota"})
