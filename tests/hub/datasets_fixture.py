"""A stand-in for the tenancy service's datasets API, for the rendering tests of the Datasets page and
the Lab panel's Datasets section ONLY, until the service's own (``hub_ext.service.datasets``) is on this
branch: recorded answers of exactly the API contract's shapes (issue 20's brief), served by a small
tornado application with the page's real template, static files and script. The real end-to-end tests
(tests/hub/test_datasets_browser.py, against the demo hub) replace it once the service has datasets;
remove this file then.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
import time
from pathlib import Path

from tornado import web
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from hub_ext.service.dashboard import PAGES
from hub_ext.service.pages import render

STATIC = Path(__file__).resolve().parents[2] / "hub_ext" / "service" / "static"

FASHION = {
    "name": "fashion-mnist", "description": "Fashion-MNIST, 70,000 28x28 images",
    "source": {"kind": "path", "detail": "/srv/datasets/fashion-mnist"}, "readOnly": True,
    "mountPath": "/datasets/fashion-mnist", "size": None, "accessModes": [], "teams": ["team-a", "team-b"],
    "namespaces": ["team-a", "team-b"],
    "status": {"team-a": {"state": "Bound", "message": None}, "team-b": {"state": "Bound", "message": None}},
    "inUse": {"team-a": 1, "team-b": 0}, "origin": "config",
    "manifest": {"apiVersion": "tenancy.jupyter.org/v1alpha1", "kind": "Dataset", "metadata": {"name": "fashion-mnist"},
                 "spec": {"description": "Fashion-MNIST, 70,000 28x28 images", "teams": ["team-a", "team-b"],
                          "source": {"path": "/srv/datasets/fashion-mnist"}}},
}
IMAGENET = {
    "name": "imagenet-mini", "description": "ImageNet, 1,000 classes, 50 images each",
    "source": {"kind": "persistentVolume", "detail": "hostPath /srv/datasets/imagenet-mini"}, "readOnly": True,
    "mountPath": "/datasets/imagenet-mini", "size": "10Gi", "accessModes": ["ReadWriteMany"],
    "teams": ["team-b", "team-d"], "namespaces": ["team-b", "team-d"],
    "status": {"team-b": {"state": "Pending", "message": "waiting for the volume tenancy-imagenet-mini.team-b to bind"},
               "team-d": {"state": "Refused", "message": 'persistentvolumeclaims "imagenet-mini" is forbidden: exceeded '
                                                          "quota: dev-quota, requested: persistentvolumeclaims=1, used: "
                                                          "persistentvolumeclaims=0, limited: persistentvolumeclaims=0"}},
    "inUse": {"team-b": 0, "team-d": 0}, "origin": "api",
    "manifest": {"apiVersion": "tenancy.jupyter.org/v1alpha1", "kind": "Dataset", "metadata": {"name": "imagenet-mini"},
                 "spec": {"description": "ImageNet, 1,000 classes, 50 images each", "teams": ["team-b", "team-d"],
                          "source": {"persistentVolume": {"capacity": {"storage": "10Gi"},
                                                          "accessModes": ["ReadWriteMany"],
                                                          "hostPath": {"path": "/srv/datasets/imagenet-mini"}}},
                          "size": "10Gi"}},
}
#: Who sees what: a user's teams' namespaces (None: an admin, everything).
USERS = {"admin": None, "alice": ["team-a"], "dave": ["team-d"]}


class FakeDatasets:
    """The recorded datasets, what was asked of them, and the audit trail of the changes made."""

    def __init__(self):
        self.datasets = {d["name"]: copy.deepcopy(d) for d in (FASHION, IMAGENET)}
        self.asked: list[tuple[str, str, str, dict | None]] = []  # (user, method, path, body)
        self.audit: list[dict] = []
        self.url = ""

    def visible(self, user: str) -> list[dict]:
        namespaces = USERS[user]
        return [d for d in self.datasets.values() if namespaces is None or set(d["namespaces"]) & set(namespaces)]


class _Base(web.RequestHandler):
    def initialize(self, fake: FakeDatasets):
        self.fake = fake

    def json(self, body, status=200):
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(body))


class _Page(_Base):
    def get(self, user):
        prefix = f"/as/{user}/"
        if self.get_argument("audit", None) is not None:
            return self.json({"audit": self.fake.audit})
        admin = USERS[user] is None
        nav = [{"href": prefix + path, "title": title, "current": path == "datasets"}
               for path, title, only in PAGES if admin or not only]
        self.finish(render("datasets.html", user=user, admin=admin, nav=nav, prefix=prefix, page="datasets",
                           hub_home="/hub/home", hub_admin="/hub/admin" if admin else None,
                           teams=USERS[user] or [], static=lambda name: f"/static/{name}",
                           data={"prefix": prefix, "user": user, "admin": admin, "now": time.time(), "xsrf": "",
                                 "namespaces": USERS[user] or [], "audit": self.fake.audit}))


class _List(_Base):
    def get(self, user):
        self.fake.asked.append((user, "GET", "datasets", None))
        self.json({"datasets": self.fake.visible(user)})


class _One(_Base):
    def put(self, user, name):
        body = json.loads(self.request.body)
        dry = self.get_argument("dryRun", "") == "true"
        self.fake.asked.append((user, "PUT", f"datasets/{name}" + ("?dryRun=true" if dry else ""), body))
        spec = body.get("spec") or {}
        d = {**copy.deepcopy(IMAGENET), "name": name, "description": spec.get("description", ""),
             "source": {"kind": "path", "detail": (spec.get("source") or {}).get("path", "")}, "size": None,
             "accessModes": [], "teams": spec.get("teams", []), "namespaces": spec.get("teams", []),
             "mountPath": spec.get("mountPath", f"/datasets/{name}"), "readOnly": spec.get("readOnly", True),
             "status": {ns: {"state": "Bound", "message": None} for ns in spec.get("teams", [])},
             "inUse": {}, "origin": "api", "manifest": body}
        if dry:
            return self.json({"dryRun": True, "dataset": d, "provision": [
                {"namespace": ns, "action": "create",
                 "refused": None if ns != "team-d" else 'persistentvolumeclaims "x" is forbidden: exceeded quota: '
                                                        "dev-quota, limited: persistentvolumeclaims=0"}
                for ns in d["namespaces"]]})
        self.fake.datasets[name] = d
        self.fake.audit.insert(0, {"time": time.time(), "by": user, "message": f"{user} applied dataset {name}",
                                   "changes": [f"dataset {name}: declared for {', '.join(d['teams'])}"]})
        self.json(d)

    def delete(self, user, name):
        self.fake.asked.append((user, "DELETE", f"datasets/{name}", None))
        self.fake.datasets.pop(name, None)
        self.fake.audit.insert(0, {"time": time.time(), "by": user, "message": f"{user} removed dataset {name}",
                                   "changes": []})
        self.json({"deleted": name})


class _NoIcon(web.RequestHandler):
    def get(self):  # the browser asks; a 404 would be a console error the tests count
        self.set_status(204)


class _Events(_Base):
    async def get(self, user):
        self.set_header("Content-Type", "text/event-stream")
        self.write(": connected\n\n")
        await self.flush()
        while not self.request.connection.stream.closed():
            await asyncio.sleep(0.5)


def serve_fake_datasets() -> tuple[FakeDatasets, callable]:
    """The stand-in on 127.0.0.1, on a loop of its own thread (the browser tests are synchronous); a stop."""
    fake = FakeDatasets()
    user = r"/as/(admin|alice|dave)"
    app = web.Application([
        (user + r"/datasets", _Page, {"fake": fake}),
        (user + r"/api/v1/datasets", _List, {"fake": fake}),
        (user + r"/api/v1/datasets/([a-z0-9-]+)", _One, {"fake": fake}),
        (user + r"/api/v1/events", _Events, {"fake": fake}),
        (r"/static/(.*)", web.StaticFileHandler, {"path": str(STATIC)}),
        (r"/favicon.ico", _NoIcon),
    ])
    sockets = bind_sockets(0, "127.0.0.1")
    fake.url = f"http://127.0.0.1:{sockets[0].getsockname()[1]}"
    loop = asyncio.new_event_loop()
    server = HTTPServer(app)

    async def listen():
        server.add_sockets(sockets)

    loop.run_until_complete(listen())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def stop():
        loop.call_soon_threadsafe(server.stop)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)

    return fake, stop
