"""What every tenancy spawner does: pick the team, queue the notebook, explain the wait, stop cleanly.

A notebook is a ``low-priority-dev`` workload of the user's tenant. ``start()``
submits it to the scheduler service with the service's own token, naming the
user (only the spawner may queue a notebook), waits until it is admitted while
``progress()`` streams the reason and queue position, then starts the server.
A ResourceQuota/LimitRange rejection becomes a ``SpawnException`` that says
which limit, how much is used and what to do. A notebook preempted earlier is
reported, with who preempted it and when, at the next start.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from jupyterhub.spawner import SpawnException
from jupyterhub.utils import url_path_join
from tornado import web
from traitlets import Dict, Float, Unicode, default
from traitlets.config import Configurable

from hub_ext.apiclient import TenancyError
from hub_ext.apiclient.aio import AsyncTenancyClient
from hub_ext.vocabulary import amounts, duration, quantity, resource_name, sentence, when

from .team_notices import NOTICES
from .waiting_words import stopped_for, waiting_status

TENANT_KEYS = ("tenancy.namespace", "tenancy.quota-leaf")
#: The spawn form's options: a template with autoescape, never HTML glued from strings.
_FORMS = Environment(loader=FileSystemLoader(Path(__file__).with_name("templates")),
                     autoescape=select_autoescape(default=True), trim_blocks=True, lstrip_blocks=True)


def _asks(resources: dict) -> str:
    """``5 CPU, 4 GiB memory`` for a profile's requests."""
    return amounts((resources or {}).get("requests")) or "the default size"


def _workload_name(user: str, server: str) -> str:
    """``nb-<user>[-<server>]`` as a DNS label: any username (``j.doe@example.org``) gives a valid one."""
    raw = f"nb-{user}" + (f"-{server}" if server else "")
    return re.sub(r"[^a-z0-9-]+", "-", raw.lower())[:40].strip("-") or "nb"


def _notice(wl: dict, event: dict) -> dict:
    """What is kept of a stop to make room: when the server stopped (the workload's end, not the decision),
    whose work took the room (the pod's name, and the person's words when the service gave them), why."""
    details = event.get("details") or {}
    return {"time": wl.get("finished") or event["time"], "by": details.get("preemptor") or "",
            "byName": details.get("preemptorName") or "", "byTeam": details.get("preemptorTeam") or "",
            "message": event["message"]}


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
        "description": "For reading data and light analysis.",
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}}``. The spawn form shows each
        as a card with its description, what it asks for and whether the team has room for it
        now. A group's
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

    @default("http_timeout")
    def _default_http_timeout(self):
        # JupyterHub's 30 s for a started server to answer is short for JupyterLab on a busy
        # machine (two cores shared with other servers and training jobs); a server that is slow,
        # not broken, would be stopped and its room given away.
        return 120

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

    @property
    def tenancy_public_url(self) -> str:
        """The service's pages as the browser reaches them (``/services/tenancy/``)."""
        base = (getattr(self.user, "settings", None) or {}).get("base_url", "/")
        return url_path_join(base, "services", self.tenancy_service_name) + "/"

    async def _team_status(self) -> dict | None:
        """The service's view of every team (``/tenants`` with its own token): group -> tenant, or None
        when it cannot be asked (then the hub's groups are taken as they are)."""
        token = self._service_token()
        if not token:
            return None
        try:
            body = await self._tenancy(token).tenants()
        except TenancyError:
            return None
        NOTICES.update(body.get("tenants", []))
        return {t["group"]: t for t in body.get("tenants", [])}

    def tenancy_admin_notices(self) -> list[dict]:
        """For an admin's hub home (spawner/templates/home.html): each group whose properties the service
        refused, kept on its last good ones or unusable, with the property and the fix (team_notices.py)."""
        async def ask():
            status = await self._team_status()
            return None if status is None else list(status.values())
        return NOTICES.lines(ask)

    async def _room(self, group: str, slugs: list[str]) -> dict | None:
        """What each profile would do now for team ``group``, and the team's room (``POST /room``)."""
        token = self._service_token()
        if not token or not slugs:
            return None
        body = {"tenant": group, "profiles": {s: (self.profiles.get(s) or {}).get("resources") or {} for s in slugs}}
        try:
            return await self._tenancy(token).room(body)
        except TenancyError:
            return None

    async def _tenancy_options_form(self, spawner) -> str:
        groups = self.tenant_groups()
        if not groups:
            return self._no_team_form()
        status = await self._team_status()
        teams, broken = [], []
        for g in groups:
            known = (status or {}).get(g.name)
            if known is not None and known.get("errors"):
                broken.append(known)
            else:
                teams.append({"group": g.name, "leaf": (known or {}).get("quotaLeaf"), "slugs": self.allowed_profiles(g)})
        slugs = sorted({s for t in teams for s in t["slugs"]}, key=list(self.profiles).index)
        rooms = {t["group"]: await self._room(t["group"], t["slugs"]) for t in teams}
        profiles = []
        for slug in slugs:
            spec = self.profiles.get(slug) or {}
            lines = []
            for t in teams:
                verdict = ((rooms.get(t["group"]) or {}).get("profiles") or {}).get(slug)
                if slug in t["slugs"] and verdict:
                    who = f"{t['group']}: " if len(teams) > 1 else ""
                    lines.append({"verdict": verdict["verdict"], "text": who + self._verdict_words(verdict)})
            # Refused for every team it could run in: not offered (disabled, its card says why), as the
            # spawn would only fail. With one team of several refusing it, the card's line says which.
            refused = bool(lines) and all(line["verdict"] not in ("now", "reclaim", "wait") for line in lines)
            profiles.append({"slug": slug, "display_name": spec.get("display_name", slug),
                             "description": spec.get("description", ""), "asks": _asks(spec.get("resources")),
                             "room": lines, "refused": refused})
        for t in teams:
            room = (rooms.get(t["group"]) or {}).get("room") or {}
            ceiling = amounts(room.get("ceiling"))
            if ceiling:
                t["room_text"] = f"Room left now for {t['group']} below its ceiling: {ceiling}."
        any_room = next((r for r in rooms.values() if r), None) or {}
        warning = any_room.get("warningSeconds")
        pc = any_room.get("priorityClass") or "low-priority-dev"
        note = (f"Notebooks run at low priority ({pc}): when another team takes back room it is guaranteed, or "
                "higher-priority work needs it, your server may be stopped"
                + (f", after a warning of {duration(warning)} in JupyterLab to save your work." if warning
                   else " after a short grace period; save your work often."))
        return _FORMS.get_template("tenancy_options_form.html").render(
            teams=teams, broken=broken, profiles=profiles if teams else [], priority_note=note,
            dashboard=self.tenancy_public_url + "quota", previous_stop=self._previous_stop_words())

    def _previous_stop_words(self) -> str:
        """The spawn form's answer to "where did my server go": when the scheduler stopped this server's
        last run, for whose work and why (kept in the server's state since that stop, until the next start)."""
        notice = getattr(self, "tenancy_notice", None)
        if not notice:
            return ""
        label = f"Your server {self.name}" if self.name else "Your server"
        who, why = stopped_for(notice)
        by = f" to make room for {who}" if who else ""
        return f"{label} was stopped at {when(notice['time'])}{by}. Because: {why}"

    def _no_team_form(self) -> str:
        """What someone in no team sees instead of a form (an empty form would start a server at once, to
        fail): their provider's groups as the login recorded them, and whom to ask
        (``c.JupyterHub.template_vars["tenancy_contact"]``)."""
        record = (getattr(self.user, "user_info", None) or {}).get("tenancy") or {}
        contact = ((self.user.settings or {}).get("template_vars") or {}).get("tenancy_contact") or "an admin of this hub"
        return _FORMS.get_template("tenancy_no_team.html").render(user=self.user.name, record=record, contact=contact)

    @staticmethod
    def _verdict_words(verdict: dict) -> str:
        kind, message = verdict.get("verdict"), verdict.get("message") or ""
        if kind == "now":
            return "Fits now: it would start at once."
        if kind == "reclaim":
            return "Fits within the team's guarantee: it would start once borrowed room is taken back."
        if kind == "wait":
            where = f" (position {verdict['position']} in the queue)" if verdict.get("position") else ""
            return f"Would wait{where}: {sentence(message)}"
        return f"Cannot start as asked: {sentence(message)}"

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
    @property
    def tenancy_api_url(self) -> str:
        return self.tenancy_service_url.rstrip("/") + "/api/v1"

    def _tenancy(self, token: str | None = None) -> AsyncTenancyClient:
        """The scheduler's API, called with this server's own token (the service sees the user), or ``token``."""
        return AsyncTenancyClient(self.tenancy_api_url, token or self.api_token)

    @staticmethod
    def _refused(err: TenancyError) -> SpawnException:
        return SpawnException(f"The scheduler refused this server: {err.sentence or err}", reason="tenancy",
                              status_code=err.status or 503)

    # -- lifecycle ------------------------------------------------------------------------
    def get_state(self):
        state = super().get_state()
        if getattr(self, "workload_id", None):
            state["tenancy_workload"] = self.workload_id
        if getattr(self, "tenancy_notice", None):
            state["tenancy_notice"] = self.tenancy_notice
        return state

    def load_state(self, state):
        super().load_state(state)
        self.workload_id = state.get("tenancy_workload")
        self.tenancy_notice = state.get("tenancy_notice")

    # No clear_state() override: the workload id is dropped by _forget() alone, once the
    # scheduler has let the workload go. LocalProcessSpawner.stop() clears state (through
    # poll()) as soon as the process dies, before our stop() could tell the scheduler.

    async def _previous_run(self) -> str | None:
        """Remove what an earlier start left in the queue (the hub restarted meanwhile, and could
        not tell the scheduler); if this server's last run was preempted: who took its room, and when."""
        try:
            mine = await self._tenancy().workloads(kind="notebook", mine="true", limit=100)
            here = [w for w in mine if w["user"] == self.user.name and (w.get("serverName") or "") == (self.name or "")]
            for left in [w for w in here if w["state"] in ("Pending", "Running")]:
                self.log.info("%s: removing notebook workload %s left by an earlier start", self._log_name, left["id"])
                await self._tenancy(self._service_token()).cancel(left["id"], by_spawner=True)
            last = here[0] if here else None
            if last is None or last["state"] != "Preempted":
                return None
            wl = await self._tenancy().get(last["id"])
        except TenancyError:
            return None
        evicted = next((e for e in reversed(wl.get("events", [])) if e["type"] in ("preempted", "reclaimed")), None)
        if evicted is None:
            return None
        who, why = stopped_for(_notice(wl, evicted))
        return (f"Your previous server was stopped at {when(wl.get('finished') or evicted['time'])}"
                + (f" to make room for {who}" if who else "") + f". Because: {why}")

    async def _usable_team(self, group) -> None:
        """Refuse a team the service says is broken, with all its errors in plain words."""
        status = await self._team_status()
        known = (status or {}).get(group.name)
        if known is None or not known.get("errors"):
            return
        others = [g.name for g in self.tenant_groups() if g.name != group.name
                  and not ((status or {}).get(g.name) or {}).get("errors")]
        errors = " ".join(sentence(e) for e in known["errors"])
        todo = (f"Pick another of your teams ({', '.join(others)})." if others
                else "You have no other team: ask an admin to fix the group's properties (the tenancy Tenants page "
                     "lists what to change).")
        raise SpawnException(f"Team {group.name} cannot be used until an admin fixes its settings: {errors} {todo}",
                             reason="tenant-broken", status_code=409)

    async def start(self):
        self._notice, self._latest = None, {}  # progress() may already be reading them
        self._fits_instead = None  # asked again for this start's wait
        self._estimate = (None, None)  # (what it was asked for, the service's answer)
        self.tenancy_notice = None  # the home page's "stopped at ..." is answered by this start
        group, profile = self._choose()
        await self._usable_team(group)
        self._profile = profile
        self.tenant = group.name
        resources = (self.profiles.get(profile) or {}).get("resources") or {}
        self._notice = await self._previous_run()
        if self._notice:
            self.log.info("%s: %s", self._log_name, self._notice)
        self._latest = {}
        token = self._service_token()
        if not token:
            raise SpawnException(f"The hub has no token of the scheduler service {self.tenancy_service_name!r}, which "
                                 "alone may queue a notebook: ask an admin to check the hub's services.",
                                 reason="tenancy", status_code=503)
        try:
            # With the service's token, naming the user: only the spawner queues notebooks (the
            # server's token, which the notebook can read, would let code post notebooks at will).
            wl = await self._tenancy(token).submit({
                "kind": "notebook", "user": self.user.name, "tenant": group.name, "serverName": self.name or "",
                "name": _workload_name(self.user.name, self.name),
                "resources": resources, **({"profile": profile} if profile else {}),
            })
        except TenancyError as err:
            raise self._refused(err) from None
        self.workload_id = wl["id"]
        self._latest = wl
        try:
            while wl["state"] == "Pending" and wl.get("reason") != "inadmissible":
                await asyncio.sleep(self.queue_poll_seconds)
                wl = self._latest = await self._tenancy().get(self.workload_id)
        except asyncio.CancelledError:
            # The user stopped the pending spawn: leave the queue.
            await asyncio.shield(self._forget())
            raise
        except TenancyError as err:
            raise self._refused(err) from None
        if wl["state"] != "Running":
            await self._forget()
            raise await self._refusal(wl, group, profile)
        self.tenancy_namespace = wl["namespace"]
        await self.tenancy_admitted(wl)
        self.environment = {**self.environment, **self.tenancy_env(wl)}
        return await super().start()

    async def tenancy_admitted(self, wl) -> None:
        """The notebook was admitted (``wl``: its workload, with the ``datasets`` it mounts); the server
        starts next. A spawner prepares what it needs here."""

    def tenancy_env(self, wl) -> dict:
        return {
            "TENANCY_API_URL": self.tenancy_api_url,
            "TENANCY_TENANT": wl.get("tenant") or "", "TENANCY_NAMESPACE": wl["namespace"],
            "TENANCY_WORKLOAD_ID": wl["id"],
            # name -> where it is mounted: code never hard-codes a path
            "TENANCY_DATASETS": json.dumps({d["name"]: self.dataset_path(d) for d in wl.get("datasets") or []},
                                           sort_keys=True),
        }

    def dataset_path(self, use: dict) -> str:
        """Where the notebook finds a dataset it mounts (``use``: an item of the workload's ``datasets``)."""
        return use["mountPath"]

    async def _would_fit(self, group, profile: str) -> list[str]:
        """The team's other profiles that would start now or wait their turn (not refused), by name."""
        others = [p for p in self.allowed_profiles(group) if p != profile]
        room = await self._room(group.name, others)
        verdicts = (room or {}).get("profiles") or {}
        return [self.profiles[p].get("display_name", p) for p in others
                if (verdicts.get(p) or {}).get("verdict") in ("now", "reclaim", "wait")]

    async def _refusal(self, wl, group=None, profile: str = "") -> SpawnException:
        """The scheduler's refusal in plain words: which limit, and what would fit instead."""
        message = wl.get("message") or f"the notebook ended as {wl['state']}"
        name = (self.profiles.get(profile) or {}).get("display_name", profile) if profile else "This server"
        fits = await self._would_fit(group, profile) if group is not None and profile else []
        instead = (f" The {' or the '.join(fits)} profile would fit: choose it on the spawn page." if fits else "")
        reason, details = wl.get("reason"), wl.get("details") or {}
        if reason == "resource-quota":
            room = await self._room(group.name, []) if group is not None else None
            quota = details.get("quota") or "its ResourceQuota"
            left = ((room or {}).get("room") or {}).get("resourceQuota") or {}
            left_words = amounts(left)
            text = (f"{name} does not fit in team {wl.get('tenant')}'s namespace quota {quota}, which counts every "
                    f"server and job of the team, waiting ones too" + (f": only {left_words} left." if left_words else
                    ".") + instead + " Or stop another server or job of the team, or ask an admin to raise the quota.")
            return SpawnException(text, reason="resource-quota", status_code=403,
                                  log_message=f"{text} (the scheduler: {message})")
        if reason == "limit-range":
            return SpawnException(f"{name} breaks a limit of namespace {wl['namespace']}: {sentence(message)}"
                                  f"{instead or ' Pick a smaller profile.'}", reason="limit-range", status_code=403)
        if reason == "inadmissible":
            node, res = details.get("node"), details.get("resource")
            need = quantity(res, details.get("need"))
            limit = (f"team {wl.get('tenant')}'s quota {node} allows at most {quantity(res, details.get('limit'))} "
                     f"{resource_name(res)}" if node else f"no node of the cluster has {need} {resource_name(res)}")
            return SpawnException(f"{name} can never start as things are: {limit}, and it asks for "
                                  f"{need}.{instead or ' Ask an admin for a larger quota.'}",
                                  reason="inadmissible", status_code=403)
        return SpawnException(f"The notebook could not start: {sentence(message)}{instead}",
                              reason=reason or "tenancy", status_code=403)

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
            await self._tenancy(token).cancel(wid, by_spawner=True)
        except TenancyError as err:
            if err.status != 404:
                self.log.warning("could not remove workload %s: %s", wid, err)
                return  # kept in the state: the next start (and the scheduler's own check) cleans up
        self.workload_id = None

    def _service_token(self) -> str:
        """The scheduler service's API token, as the hub knows it (managed or external service)."""
        service = (self.user.settings.get("services") or {}).get(self.tenancy_service_name)
        return getattr(service, "api_token", None) or ""

    async def stop(self, now=False):
        # The server first: its room is given back to the queue only once it is free.
        wid = getattr(self, "workload_id", None)
        try:
            return await super().stop(now=now)
        finally:
            await self._forget()
            if wid:
                await self._remember_preemption(wid)

    async def _remember_preemption(self, wid: str) -> None:
        """When this stop was the scheduler making room: when, by whom and why (for the home page)."""
        try:
            wl = await self._tenancy(self._service_token()).get(wid)
        except TenancyError:
            return
        event = next((e for e in reversed(wl.get("events", [])) if e["type"] in ("preempted", "reclaimed")), None)
        if wl.get("state") == "Preempted" and event is not None:
            self.tenancy_notice = _notice(wl, event)

    def clear_state(self):
        notice = getattr(self, "tenancy_notice", None)
        super().clear_state()
        self.tenancy_notice = notice  # shown on the home page until the next start

    def tenancy_home_status(self) -> dict | None:
        """What the hub's home page says about this server (spawner/templates/home.html), or None."""
        label = f"Your server {self.name}" if self.name else "Your server"
        if self.pending == "spawn":
            wl = getattr(self, "_latest", None) or {}
            if wl.get("state") == "Pending":
                where = (f" It is number {wl['position']} in the queue ({wl.get('leafPosition')} in your team)."
                         if wl.get("position") else "")
                base = (getattr(self.user, "settings", None) or {}).get("base_url", "/")
                link = url_path_join(base, "hub", "spawn-pending", self.user.name, self.name or "")
                return {"kind": "waiting", "server": self.name or "", "title": f"{label} is waiting for room.",
                        "text": sentence(wl.get("message") or "The scheduler is looking at it") + where,
                        "link": link, "link_text": "See why, or stop waiting"}
        notice = getattr(self, "tenancy_notice", None)
        if notice and not self.active:
            who, why = stopped_for(notice)
            by = f" to make room for {who}" if who else ""
            return {"kind": "stopped", "server": self.name or "",
                    "title": f"{label} was stopped at {when(notice['time'])}{by}.",
                    "text": f"Because: {why} Your files are kept; start it again when there is room.",
                    "link": None, "link_text": ""}
        return None

    async def poll(self):
        status = await super().poll()
        if status is not None and getattr(self, "workload_id", None):
            # Ended on its own (shut down from JupyterLab, killed, deleted): the hub does not call
            # stop() for a server that is not running, so tell the scheduler here.
            await self._forget()
        return status

    def _waiting_status(self, wl: dict) -> dict:
        """The waiting page's status (spawn-pending.js shows it): why, where in the queue, what to do."""
        base = (getattr(self.user, "settings", None) or {}).get("base_url", "/")
        size = (self.profiles.get(getattr(self, "_profile", "") or "") or {}).get("display_name", "")
        return waiting_status(wl, hub_home=url_path_join(base, "hub", "home"), pages=self.tenancy_public_url,
                              fits=getattr(self, "_fits_instead", None) or [], size=size,
                              estimate=getattr(self, "_estimate", (None, None))[1])

    async def _ask_estimate(self, wl: dict) -> None:
        """The service's estimate of this wait, asked again when the server's place in its team's queue changes."""
        key = (wl.get("id"), wl.get("leafPosition"))
        if getattr(self, "_estimate", (None, None))[0] == key or not wl.get("id"):
            return
        try:
            answer = await self._tenancy().estimate(wl["id"])
        except TenancyError:
            answer = None
        self._estimate = (key, answer)

    async def _profiles_that_fit_now(self) -> list[str]:
        """The display names of the team's other profiles that would start at once (asked once per wait)."""
        group = next((g for g in self.tenant_groups() if g.name == getattr(self, "tenant", None)), None)
        others = [s for s in self.allowed_profiles(group) if s != getattr(self, "_profile", None)] if group else []
        room = await self._room(group.name, others) if others else None
        verdicts = (room or {}).get("profiles") or {}
        return [(self.profiles.get(s) or {}).get("display_name", s) for s in others
                if (verdicts.get(s) or {}).get("verdict") == "now"]

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
            if wl and getattr(self, "_fits_instead", None) is None:
                self._fits_instead = await self._profiles_that_fit_now()
            if wl:
                await self._ask_estimate(wl)
            if wl:
                status = self._waiting_status(wl)
                where = ""
                if wl.get("position"):
                    where = f" (position {wl['position']} in the queue, {wl.get('leafPosition')} in your team)"
                message = f"Waiting for the scheduler: {wl.get('message') or 'queued'}{where}"
                if message != seen:
                    progress += (90 - progress) / 3
                    seen = message
                    yield {"progress": int(progress), "message": message, "tenancy": status}
            await asyncio.sleep(self.queue_poll_seconds)
        yield {"progress": 90, "message": "Admitted by the scheduler; starting the server",
               "tenancy": {"state": "starting", "headline": "Admitted: the server is starting.", "reason": "",
                           "position": "", "todo": []}}
