"""``BASE/tenancy/api/...``: what the lab extension calls, authenticated by jupyter-server as usual.

- ``GET state``: one snapshot: the team, its quota path to the root (with numbers for
  bars), my workloads, notices about my stopped servers that I have not dismissed,
  which workload is this very server, and the datasets of my teams (with where each is
  in this server, and its folder for the file browser when it is under the server's root).
- ``GET events``: server-sent events to the page: ``state`` (a snapshot) at once and
  after every change the service reports, ``workload`` (one workload, as the service
  sends it, e.g. with ``evictionDeadline``), and ``status`` (``{"ok": false, "message"}``
  while the service cannot be reached). One upstream stream per page, no polling.
- ``POST workloads`` (``?dryRun=true`` too), ``GET``/``DELETE workloads/ID``,
  ``GET workloads/ID/logs``: passed to the service with this server's token.
- ``POST notices/dismiss`` ``{"workload": ID}``: that stopped server is not mentioned again.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

from jupyter_core.paths import jupyter_data_dir
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import web
from tornado.iostream import StreamClosedError

from ..apiclient import NotConfigured, ServiceRefused, TenancyError
from ..apiclient.aio import AsyncTenancyClient
from ..quota_view import current_tenant, quota_path

#: A snapshot is sent this long after the last change reported (changes come in bursts).
SETTLE_SECONDS = 0.3
#: Other teams' work changes the parents' usage without an event of ours: refresh this often.
REFRESH_SECONDS = 30
#: Waiting before the service is asked again after it failed: growing up to the last.
RETRY_SECONDS = (1, 2, 5, 10, 30)
#: What the page says when the service is down (the technical detail goes to the server's log).
DOWN = ("The tenancy scheduler cannot be reached right now, so your team's quota and jobs are not shown. "
        "Your notebook keeps working; this comes back by itself when the scheduler answers again.")
NOT_IN_A_HUB = ("This server does not run in a JupyterHub with the tenancy scheduler "
                "(TENANCY_API_URL is not set), so there is no team quota to show.")
_ID = r"([0-9a-f]{1,64})"


class Dismissed:
    """Stopped servers the user has dismissed the notice of: a small JSON list in their Jupyter data folder."""

    def __init__(self, path: Path | None = None):
        self.path = path or Path(jupyter_data_dir()) / "jupyterhub-tenancy" / "dismissed-notices.json"

    def ids(self) -> set[str]:
        try:
            return set(json.loads(self.path.read_text()))
        except (OSError, ValueError, TypeError):
            return set()

    def add(self, wid: str) -> None:
        ids = sorted(self.ids() | {wid})[-500:]  # notices live a day; a short list is plenty
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(ids))
        os.replace(tmp, self.path)


class TenancyHandler(APIHandler):
    @property
    def service(self) -> AsyncTenancyClient:
        """The scheduler service, called with this server's own hub token."""
        return self.settings["tenancy_client"]

    @property
    def dismissed(self) -> Dismissed:
        return self.settings["tenancy_dismissed"]

    def refuse(self, err: TenancyError):
        if isinstance(err, NotConfigured):
            self.set_status(503)
            return self.finish(json.dumps({"error": NOT_IN_A_HUB}))
        if isinstance(err, ServiceRefused):
            self.set_status(err.status)
            return self.finish(json.dumps({"error": err.sentence or f"the scheduler refused (HTTP {err.status})"}))
        self.log.warning("tenancy: the scheduler service failed: %s", err)
        self.set_status(503)
        return self.finish(json.dumps({"error": DOWN}))

    async def snapshot(self) -> dict:
        """Everything the page shows, in one answer; ``ok`` False with a sentence when the service is down."""
        if not self.service.configured:
            return {"available": False, "ok": False, "message": NOT_IN_A_HUB}
        me, tree = await asyncio.gather(self.service.me(), self.service.tree())
        tenant = current_tenant(me.get("tenants") or [], os.environ.get("TENANCY_TENANT"))
        dismissed = self.dismissed.ids()
        return {
            "available": True, "ok": True, "message": None, "time": time.time(),
            "user": me.get("name"),
            "server": {"name": os.environ.get("JUPYTERHUB_SERVER_NAME", ""),
                       "workloadId": os.environ.get("TENANCY_WORKLOAD_ID") or None},
            "tenant": tenant, "tenants": me.get("tenants") or [],
            "path": quota_path(tree.get("tree"), tree.get("quota") or {}, (tenant or {}).get("quotaLeaf")),
            "workloads": [w for w in me.get("workloads") or [] if w.get("user") == me.get("name")],
            "notices": [n for n in me.get("notices") or [] if n.get("workload") not in dismissed],
            "datasets": here(of_namespace(me.get("datasets") or [], (tenant or {}).get("namespace")), mounted(),
                             self.contents_manager.root_dir),
        }


def mounted() -> dict[str, str]:
    """Where this server has each dataset (``TENANCY_DATASETS``, name -> path, set when it started); {} if not set."""
    try:
        paths = json.loads(os.environ.get("TENANCY_DATASETS") or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in paths.items()} if isinstance(paths, dict) else {}


def of_namespace(datasets: list[dict], namespace: str | None) -> list[dict]:
    """``/me`` lists a dataset once per namespace of mine that may use it: this server's namespace's, once."""
    out, seen = [], set()
    for d in datasets:
        if d.get("namespace") not in (None, namespace) or d.get("name") in seen:
            continue
        seen.add(d.get("name"))
        out.append(d)
    return out


def here(datasets: list[dict], paths: dict[str, str], root: str) -> list[dict]:
    """The service's datasets with ``path`` (where this server has it: its own mount, else the dataset's
    mount path) and ``browse``: that folder relative to the server's root, for the file browser, or None
    when the file browser cannot reach it (outside the root, or not mounted in this server)."""
    # Not realpath: a dataset is often a link in the home (the local backend's datasets/<name>), and the
    # file browser goes through the link.
    root = os.path.abspath(root)
    out = []
    for d in datasets:
        path = paths.get(d.get("name"))
        browse = None
        if path:
            full = os.path.abspath(os.path.join(root, path))
            if full != root and full.startswith(root.rstrip(os.sep) + os.sep):
                browse = os.path.relpath(full, root).replace(os.sep, "/")
        out.append({**d, "path": path or d.get("mountPath"), "browse": browse})
    return out


class StateHandler(TenancyHandler):
    @web.authenticated
    async def get(self):
        try:
            self.finish(json.dumps(await self.snapshot()))
        except TenancyError as err:
            self.refuse(err)


class EventsHandler(TenancyHandler):
    """The page's one stream. The service's events come through as they are, with a fresh snapshot after them."""

    _gone = False
    _queue: asyncio.Queue | None = None

    def on_connection_close(self):
        self._gone = True
        if self._queue is not None:
            self._queue.put_nowait(None)

    async def _send(self, event: str, data) -> None:
        self.write(f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n")
        await self.flush()

    @web.authenticated
    async def get(self):
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")  # nginx in front of a hub must not hold events back
        self._queue: asyncio.Queue = asyncio.Queue()
        if not self.service.configured:
            await self._send("state", {"available": False, "ok": False, "message": NOT_IN_A_HUB})
            return
        pump = asyncio.ensure_future(self._pump())
        try:
            while not self._gone:
                item = await self._queue.get()
                if item is None:
                    break
                await self._send(*item)
        except StreamClosedError:
            pass
        finally:
            # The pump ends by itself: its stream is dropped at the service's next keep-alive
            # (cancelling it mid-read would leave tornado logging a cancelled fetch).
            self._gone = True
            pump.add_done_callback(lambda _: None)

    async def _pump(self) -> None:
        """Upstream to queue: a snapshot, then the service's events; on failure, a sentence and a retry."""
        failures, refresh = 0, None
        while not self._gone:
            try:
                self._queue.put_nowait(("state", await self.snapshot()))
                failures = 0
                refresh = asyncio.ensure_future(self._refresh_every(REFRESH_SECONDS))
                await self.service.events(self._on_event, lambda: self._gone)
                # the service ended the stream (it restarted): connect again at once
            except asyncio.CancelledError:
                raise
            except Exception as err:  # noqa: BLE001 - whatever failed, the page hears it and we retry
                if not isinstance(err, (TenancyError, OSError)):
                    self.log.exception("tenancy: relaying the scheduler's events failed")
                else:
                    self.log.warning("tenancy: the scheduler service failed: %s", err)
                if failures == 0:  # said once per outage, not at every retry
                    self._queue.put_nowait(("status", {"ok": False, "message": DOWN}))
                failures += 1
            finally:
                if refresh is not None:
                    refresh.cancel()
            await asyncio.sleep(RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)] if failures else 0.5)

    def _on_event(self, event: dict | None) -> None:
        if event is None:
            return  # a keep-alive
        if event.get("type") == "workload":
            self._queue.put_nowait(("workload", event.get("workload")))
        self._settle()

    def _settle(self) -> None:
        """One snapshot after a burst of changes, not one per change."""
        handle = getattr(self, "_settling", None)
        if handle is not None:
            handle.cancel()
        loop = asyncio.get_running_loop()
        self._settling = loop.call_later(SETTLE_SECONDS, lambda: asyncio.ensure_future(self._push_snapshot()))

    async def _push_snapshot(self) -> None:
        if self._gone:
            return
        try:
            self._queue.put_nowait(("state", await self.snapshot()))
        except (TenancyError, OSError) as err:
            self.log.warning("tenancy: the scheduler service failed: %s", err)
            self._queue.put_nowait(("status", {"ok": False, "message": DOWN}))

    async def _refresh_every(self, seconds: float) -> None:
        while not self._gone:
            await asyncio.sleep(seconds)
            await self._push_snapshot()


class WorkloadsHandler(TenancyHandler):
    @web.authenticated
    async def post(self):
        dry_run = self.get_argument("dryRun", "false").lower() in ("1", "true", "yes")
        try:
            answer = await self.service.submit(self.request.body, dry_run=dry_run)
        except TenancyError as err:
            return self.refuse(err)
        self.set_status(200 if dry_run else 201)
        self.finish(json.dumps(answer))


class WorkloadHandler(TenancyHandler):
    @web.authenticated
    async def get(self, wid):
        try:
            self.finish(json.dumps(await self.service.get(wid)))
        except TenancyError as err:
            self.refuse(err)

    @web.authenticated
    async def delete(self, wid):
        try:
            self.finish(json.dumps(await self.service.cancel(wid)))
        except TenancyError as err:
            self.refuse(err)


class LogsHandler(TenancyHandler):
    """Plain text, for the page's log view and for people following a notebook's link; errors stay JSON."""

    def finish(self, *args, **kwargs):
        if self.get_status() == 200:
            self.update_api_activity()
            return JupyterHandler.finish(self, *args, **kwargs)  # not APIHandler's: it makes it JSON
        return super().finish(*args, **kwargs)

    @web.authenticated
    async def get(self, wid):
        try:
            text = await self.service.logs(wid)
        except TenancyError as err:
            return self.refuse(err)
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.finish(text)


class DismissHandler(TenancyHandler):
    @web.authenticated
    async def post(self):
        body = self.get_json_body() or {}
        wid = body.get("workload") if isinstance(body, dict) else None
        if not isinstance(wid, str) or not wid.isalnum() or len(wid) > 64:
            raise web.HTTPError(400, "Say which notice to dismiss: {\"workload\": \"<id>\"}.")
        self.dismissed.add(wid)
        self.finish(json.dumps({"dismissed": wid}))


def setup_handlers(serverapp) -> None:
    web_app = serverapp.web_app
    web_app.settings.setdefault("tenancy_client", AsyncTenancyClient())
    web_app.settings.setdefault("tenancy_dismissed", Dismissed())
    base = url_path_join(web_app.settings["base_url"], "tenancy", "api")
    web_app.add_handlers(".*$", [
        (url_path_join(base, "state"), StateHandler),
        (url_path_join(base, "events"), EventsHandler),
        (url_path_join(base, "workloads"), WorkloadsHandler),
        (url_path_join(base, "workloads", _ID), WorkloadHandler),
        (url_path_join(base, "workloads", _ID, "logs"), LogsHandler),
        (url_path_join(base, "notices", "dismiss"), DismissHandler),
    ])
