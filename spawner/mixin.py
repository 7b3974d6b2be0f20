"""What every tenancy spawner does: pick the team, queue the notebook, explain the wait, stop cleanly.

A notebook is a ``low-priority-dev`` workload of the user's tenant. ``start()``
submits it to the scheduler service with the server's own token (so the
service sees the user, not the hub), waits until it is admitted while
``progress()`` streams the reason and queue position, then starts the server.
A ResourceQuota/LimitRange rejection becomes a ``SpawnException`` that says
which limit, how much is used and what to do. A notebook preempted earlier is
reported, with who preempted it and when, at the next start.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import time

from jupyterhub.spawner import SpawnException
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from traitlets import Dict, Float, Unicode, default
from traitlets.config import Configurable

TENANT_KEYS = ("tenancy.namespace", "tenancy.quota-leaf")


def _workload_name(user: str, server: str) -> str:
    """``nb-<user>[-<server>]`` as a DNS label: any username (``j.doe@example.org``) gives a valid one."""
    raw = f"nb-{user}" + (f"-{server}" if server else "")
    return re.sub(r"[^a-z0-9-]+", "-", raw.lower())[:40].strip("-") or "nb"


def _check_user_options(spawner, options) -> None:
    """Only a team and a profile can be chosen; anything else is a 400 naming the option."""
    for key, value in (options or {}).items():
        if key not in ("tenant", "profile"):
            raise web.HTTPError(400, f"unknown server option {key!r} (options: tenant, profile)")
        if not isinstance(value, str):
            raise web.HTTPError(400, f"server option {key} must be a string")
    profile = (options or {}).get("profile")
    if profile and profile not in spawner.profiles:
        raise web.HTTPError(400, f"unknown profile {profile!r} (profiles: {', '.join(spawner.profiles) or 'none'})")


class TenancySpawnerMixin(Configurable):
    tenancy_service_url = Unicode(
        "http://127.0.0.1:10101/services/tenancy/",
        help="""
        Where the hub reaches the tenancy scheduler service (its internal URL, with the
        service prefix). Example: ``http://127.0.0.1:10101/services/tenancy/``.

        .. versionadded:: 0.1
        """,
    ).tag(config=True)

    tenancy_service_name = Unicode(
        "tenancy", help="The scheduler service's name in the hub (for the scope of tokens made for it).",
    ).tag(config=True)

    profiles = Dict(
        help="""
        Notebook profiles by slug: ``{"small": {"display_name": "Small (1 CPU, 2 GiB)",
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}}``. A group's
        ``tenancy.profiles`` property (comma-separated slugs) limits what its members see;
        without it they see every profile.
        """,
    ).tag(config=True)

    default_profile = Unicode("", help="Slug of the profile used when none is chosen (default: the first).").tag(config=True)

    queue_poll_seconds = Float(1.0, help="How often a queued notebook asks the scheduler for news.").tag(config=True)

    @default("start_timeout")
    def _default_start_timeout(self):
        # Queued notebooks may wait for a long time; the spawn page explains why meanwhile.
        return 3600

    @default("options_form")
    def _default_options_form(self):
        return self._tenancy_options_form

    @default("apply_user_options")
    def _default_apply_user_options(self):
        return _check_user_options

    # -- teams and profiles ---------------------------------------------------------
    def tenant_groups(self) -> list:
        """The user's groups that are tenants (they set tenancy.namespace or tenancy.quota-leaf)."""
        return sorted((g for g in self.user.groups if any(k in (g.properties or {}) for k in TENANT_KEYS)),
                      key=lambda g: g.name)

    def allowed_profiles(self, group) -> list[str]:
        listed = (group.properties or {}).get("tenancy.profiles") if group is not None else None
        slugs = list(self.profiles)
        if isinstance(listed, str) and listed.strip():
            wanted = [s.strip() for s in listed.split(",") if s.strip()]
            slugs = [s for s in slugs if s in wanted]
        return slugs

    def _tenancy_options_form(self, spawner) -> str:
        groups = self.tenant_groups()
        profiles = sorted({p for g in groups for p in self.allowed_profiles(g)}, key=list(self.profiles).index)
        if len(groups) <= 1 and len(profiles) <= 1:
            return ""
        parts = []
        if len(groups) > 1:
            opts = "".join(f'<option value="{html.escape(g.name)}">{html.escape(g.name)}</option>' for g in groups)
            parts.append(f'<label for="tenancy-team">Team</label><select class="form-control" name="tenant" id="tenancy-team">{opts}</select>')
        if len(profiles) > 1:
            opts = "".join(
                f'<option value="{html.escape(s)}">{html.escape(self.profiles[s].get("display_name", s))}</option>'
                for s in profiles)
            parts.append(f'<label for="tenancy-profile">Profile</label><select class="form-control" name="profile" id="tenancy-profile">{opts}</select>')
        return "\n".join(parts)

    def options_from_form(self, formdata):
        return {k: formdata[k][0] for k in ("tenant", "profile") if formdata.get(k)}

    def _choose(self):
        """(tenant group, profile slug) for this spawn, checked against the user's groups."""
        groups = self.tenant_groups()
        if not groups:
            raise SpawnException(
                f"{self.user.name} is in no team: ask an admin to add you to a group with a tenancy.namespace "
                "or tenancy.quota-leaf property.", reason="no-tenant", status_code=403)
        wanted = (self.user_options or {}).get("tenant")
        if wanted:
            group = next((g for g in groups if g.name == wanted), None)
            if group is None:
                raise SpawnException(f"you are not a member of team {wanted}", reason="tenant", status_code=403)
        else:
            group = groups[0]
        allowed = self.allowed_profiles(group)
        profile = (self.user_options or {}).get("profile") or self.default_profile or (allowed[0] if allowed else "")
        if profile and allowed and profile not in allowed:
            raise SpawnException(f"team {group.name} may not use profile {profile} (allowed: {', '.join(allowed)})",
                                 reason="profile", status_code=403)
        return group, profile

    # -- talking to the service ---------------------------------------------------------
    async def _service(self, method: str, path: str, body=None, *, token: str | None = None):
        url = self.tenancy_service_url.rstrip("/") + "/api/v1" + path
        req = HTTPRequest(url, method=method, headers={"Authorization": f"token {token or self.api_token}",
                                                       "Content-Type": "application/json"},
                          body=None if body is None else json.dumps(body), allow_nonstandard_methods=True,
                          request_timeout=30)
        resp = await AsyncHTTPClient().fetch(req, raise_error=False)
        data = json.loads(resp.body) if resp.body and resp.headers.get("Content-Type", "").startswith("application/json") else {}
        if resp.code >= 400 or resp.code == 599:
            message = data.get("error") or (str(resp.error) if resp.error else f"status {resp.code}")
            raise SpawnException(f"The scheduler refused this server: {message}", reason="tenancy",
                                 status_code=resp.code if 400 <= resp.code < 600 and resp.code != 599 else 503)
        return data

    # -- lifecycle ------------------------------------------------------------------------
    def get_state(self):
        state = super().get_state()
        if getattr(self, "workload_id", None):
            state["tenancy_workload"] = self.workload_id
        return state

    def load_state(self, state):
        super().load_state(state)
        self.workload_id = state.get("tenancy_workload")

    # No clear_state() override: the workload id is dropped by _forget() alone, once the
    # scheduler has let the workload go. LocalProcessSpawner.stop() clears state (through
    # poll()) as soon as the process dies, before our stop() could tell the scheduler.

    async def _previous_run(self) -> str | None:
        """Remove what an earlier start left in the queue (the hub restarted meanwhile, and could
        not tell the scheduler); if this server's last run was preempted: who took its room, and when."""
        try:
            mine = (await self._service("GET", "/workloads?kind=notebook&mine=true&limit=100"))["workloads"]
            here = [w for w in mine if w["user"] == self.user.name and (w.get("serverName") or "") == (self.name or "")]
            for left in [w for w in here if w["state"] in ("Pending", "Running")]:
                self.log.info("%s: removing notebook workload %s left by an earlier start", self._log_name, left["id"])
                await self._service("DELETE", f"/workloads/{left['id']}?by=spawner", token=self._service_token())
            last = here[0] if here else None
            if last is None or last["state"] != "Preempted":
                return None
            wl = await self._service("GET", f"/workloads/{last['id']}")
        except SpawnException:
            return None
        evicted = next((e for e in reversed(wl.get("events", [])) if e["type"] in ("preempted", "reclaimed")), None)
        if evicted is None:
            return None
        when = time.strftime("%H:%M:%S", time.localtime(evicted["time"]))
        return f"Your previous server was stopped at {when}: {evicted['message']}"

    async def start(self):
        self._notice, self._latest = None, {}  # progress() may already be reading them
        group, profile = self._choose()
        self.tenant = group.name
        resources = (self.profiles.get(profile) or {}).get("resources") or {}
        self._notice = await self._previous_run()
        if self._notice:
            self.log.info("%s: %s", self._log_name, self._notice)
        self._latest = {}
        wl = await self._service("POST", "/workloads", {
            "kind": "notebook", "tenant": group.name, "serverName": self.name or "",
            "name": _workload_name(self.user.name, self.name),
            "resources": resources, **({"profile": profile} if profile else {}),
        })
        self.workload_id = wl["id"]
        self._latest = wl
        try:
            while wl["state"] == "Pending":
                await asyncio.sleep(self.queue_poll_seconds)
                wl = self._latest = await self._service("GET", f"/workloads/{self.workload_id}")
        except asyncio.CancelledError:
            # The user stopped the pending spawn: leave the queue.
            await asyncio.shield(self._forget())
            raise
        if wl["state"] != "Running":
            await self._forget()
            raise self._refusal(wl)
        self.tenancy_namespace = wl["namespace"]
        self.environment = {**self.environment, **self.tenancy_env(wl)}
        return await super().start()

    def tenancy_env(self, wl) -> dict:
        return {
            "TENANCY_API_URL": self.tenancy_service_url.rstrip("/") + "/api/v1",
            "TENANCY_TENANT": wl.get("tenant") or "", "TENANCY_NAMESPACE": wl["namespace"],
            "TENANCY_WORKLOAD_ID": wl["id"],
        }

    def _refusal(self, wl) -> SpawnException:
        message = wl.get("message") or f"the notebook ended as {wl['state']}"
        if wl.get("reason") == "resource-quota":
            hint = "Stop another server or job of your team, or ask an admin to raise the namespace's ResourceQuota."
            return SpawnException(f"Team {wl.get('tenant')}'s quota refuses this server: {message}. {hint}",
                                  reason="resource-quota", status_code=403)
        if wl.get("reason") == "limit-range":
            return SpawnException(f"This profile breaks a limit of namespace {wl['namespace']}: {message}. "
                                  "Pick a smaller profile.", reason="limit-range", status_code=403)
        return SpawnException(f"The notebook could not start: {message}", reason=wl.get("reason") or "tenancy",
                              status_code=403)

    async def _forget(self):
        """Tell the scheduler this notebook's server is gone (or never started): its room is free.

        Sent with the scheduler service's own token, which only the hub and the service
        hold: ``?by=spawner`` (release the quota without asking the hub to stop the server)
        is refused from any other credential, so a user cannot drop a running server's
        quota with the server's token, which their notebook can read.
        """
        wid = getattr(self, "workload_id", None)
        if not wid:
            return
        token = self._service_token()
        if not token:
            self.log.warning("%s: the hub has no token of the service %r; the scheduler will notice the end of "
                             "workload %s on its own", self._log_name, self.tenancy_service_name, wid)
            return
        try:
            await self._service("DELETE", f"/workloads/{wid}?by=spawner", token=token)
        except SpawnException as err:
            if getattr(err, "status_code", None) != 404:
                self.log.warning("could not remove workload %s: %s", wid, err)
                return  # kept in the state: the next start (and the scheduler's own check) cleans up
        self.workload_id = None

    def _service_token(self) -> str:
        """The scheduler service's API token, as the hub knows it (managed or external service)."""
        service = (self.user.settings.get("services") or {}).get(self.tenancy_service_name)
        return getattr(service, "api_token", None) or ""

    async def stop(self, now=False):
        # The server first: its room is given back to the queue only once it is free.
        try:
            return await super().stop(now=now)
        finally:
            await self._forget()

    async def poll(self):
        status = await super().poll()
        if status is not None and getattr(self, "workload_id", None):
            # Ended on its own (shut down from JupyterLab, killed, deleted): the hub does not call
            # stop() for a server that is not running, so tell the scheduler here.
            await self._forget()
        return status

    async def progress(self):
        progress, seen, told = 10, None, None
        while True:
            notice = getattr(self, "_notice", None)
            if notice and notice != told:  # found out by start() meanwhile: who preempted the last server
                told = notice
                yield {"progress": progress, "message": notice}
            wl = getattr(self, "_latest", None) or {}
            state = wl.get("state")
            if state and state != "Pending":
                break
            if wl:
                where = ""
                if wl.get("position"):
                    where = f" (position {wl['position']} in the queue, {wl.get('leafPosition')} in your team)"
                message = f"Waiting for the scheduler: {wl.get('message') or 'queued'}{where}"
                if message != seen:
                    progress += (90 - progress) / 3
                    seen = message
                    yield {"progress": int(progress), "message": message}
            await asyncio.sleep(self.queue_poll_seconds)
        yield {"progress": 90, "message": "Admitted by the scheduler; starting the server"}
