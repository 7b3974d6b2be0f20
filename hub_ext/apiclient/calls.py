"""Every call of the service's REST API, once: its method, path, body and which part of the answer counts.

A ``Calls`` method builds a ``Call`` and hands it to ``_send``, which each client
implements with its own transport: the synchronous one returns the answer, the
asynchronous one a coroutine of it. So ``client.get(wid)`` means the same request in a
kernel, in the command line, in the Lab server extension and in the spawner.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import quote, urlencode

#: The states a workload ends in: nothing changes for it afterwards.
FINAL = ("Succeeded", "Failed", "Cancelled", "Stopped", "Preempted", "Rejected")


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    body: bytes | None = None
    #: The answer is text (a job's logs), not JSON.
    raw: bool = False
    #: The part of the answer the caller wants (a list out of its envelope).
    pick: Callable[[Any], Any] | None = None

    def read(self, payload: bytes | None):
        """The answer to this call, from the body of a successful response."""
        text = (payload or b"").decode("utf-8", "replace")
        answer = text if self.raw else json.loads(text or "null")
        return self.pick(answer) if self.pick is not None else answer


def environment() -> tuple[str, str]:
    """The API's URL and the token to call it with, as a single-user server has them (the spawner sets both)."""
    url = os.environ.get("TENANCY_API_URL") or ""
    token = os.environ.get("JUPYTERHUB_API_TOKEN") or os.environ.get("JPY_API_TOKEN") or ""
    return url.rstrip("/"), token


def headers(token: str, accept: str = "application/json") -> dict[str, str]:
    return {"Authorization": f"token {token}", "Content-Type": "application/json", "Accept": accept}


def _body(body) -> bytes | None:
    """Bytes pass as they are (the Lab page's own request, for the service to judge); anything else is JSON."""
    if body is None or isinstance(body, bytes):
        return body
    return json.dumps(body).encode()


def _name(name: str) -> str:
    """A name as one path segment: whatever it holds stays inside it (the service judges the name)."""
    return quote(str(name), safe="")


def manifest_name(manifest: dict | bytes) -> str:
    """The ``metadata.name`` of an object (JSON bytes too), "" when it has none: the service says what is wrong."""
    if isinstance(manifest, bytes):
        try:
            manifest = json.loads(manifest)
        except ValueError:
            return ""
    meta = manifest.get("metadata") if isinstance(manifest, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else ""


def _query(**params) -> str:
    given = {k: v for k, v in params.items() if v is not None and v != ""}
    return "?" + urlencode(given) if given else ""


class Calls:
    """The API's calls; ``url`` (ending in ``/api/v1``) and ``token`` are the client's."""

    url: str
    token: str

    def _send(self, call: Call):
        raise NotImplementedError("a client sends calls its own way")

    def me(self):
        """``/me``: who I am, my teams, my workloads, my notices."""
        return self._send(Call("GET", "/me"))

    def tree(self):
        """``/tree``: the quota tree and each node's use."""
        return self._send(Call("GET", "/tree"))

    def tenants(self):
        return self._send(Call("GET", "/tenants"))

    def check_group(self, group: str, properties: dict, profiles: list[str] | None = None):
        """Would ``properties`` of hub group ``group`` make a good team (admins)? ``{"valid", "errors",
        "fixes", "message"}``; ``profiles``: the hub's notebook profile slugs, to check ``tenancy.profiles``."""
        body = {"properties": properties, **({"profiles": profiles} if profiles is not None else {})}
        return self._send(Call("POST", f"/tenants/{_name(group)}/check", _body(body)))

    def room(self, body: dict):
        """What each profile would do now for a team, and the team's room."""
        return self._send(Call("POST", "/room", _body(body)))

    def submit(self, body: dict | bytes | None = None, *, dry_run: bool = False, **fields):
        """A new workload from ``body`` as it is, or from ``fields`` (those None left out).

        With ``dry_run``: what it would do now (start, wait, evict whom); nothing is stored.
        """
        if body is None:
            body = {k: v for k, v in fields.items() if v is not None}
        return self._send(Call("POST", "/workloads" + _query(dryRun="true" if dry_run else None), _body(body)))

    def dry_run(self, **fields):
        return self.submit(dry_run=True, **fields)

    def get(self, wid: str):
        return self._send(Call("GET", f"/workloads/{wid}"))

    def estimate(self, wid: str):
        """How long the waiting workload may wait, from the waits seen of its team's work of its size."""
        return self._send(Call("GET", f"/workloads/{wid}/estimate"))

    def workloads(self, **filters) -> list[dict]:
        """The workloads the caller may see, filtered as the service allows (``kind=``, ``mine=``, ``limit=``...)."""
        return self._send(Call("GET", "/workloads" + _query(**filters), pick=lambda answer: answer["workloads"]))

    def cancel(self, wid: str, *, by_spawner: bool = False):
        """Ends the workload; ``by_spawner`` (the service's own token only): its server is gone already."""
        return self._send(Call("DELETE", f"/workloads/{wid}" + _query(by="spawner" if by_spawner else None)))

    def logs(self, wid: str, pod: str | None = None) -> str:
        return self._send(Call("GET", f"/workloads/{wid}/logs" + _query(pod=pod), raw=True))

    def history_scenario(self, since: str | None = None) -> dict:
        """The recorded history of the last ``since`` (``7d``) as a scenario (admins)."""
        return self._send(Call("GET", "/history/scenario" + _query(since=since)))

    def usage(self, since: str | None = None, by: str | None = None) -> dict:
        """Usage per team (``by``: team, user or leaf) over the last ``since`` (``7d``)."""
        return self._send(Call("GET", "/usage" + _query(since=since, by=by)))

    def datasets(self) -> list[dict]:
        """The datasets the caller may see: a user's teams' ones, every one for an admin."""
        return self._send(Call("GET", "/datasets", pick=lambda answer: answer["datasets"]))

    def dataset(self, name: str):
        return self._send(Call("GET", f"/datasets/{_name(name)}"))

    def put_dataset(self, manifest: dict | bytes, *, dry_run: bool = False):
        """Declare or change a dataset (admins): the ``Dataset`` object, named by its ``metadata.name``.

        With ``dry_run``: ``{"dryRun": true, "dataset", "provision"}``, what would be made or
        refused in each namespace; nothing changes.
        """
        name = manifest_name(manifest)
        return self._send(Call("PUT", f"/datasets/{_name(name)}" + _query(dryRun="true" if dry_run else None),
                               _body(manifest)))

    def delete_dataset(self, name: str):
        return self._send(Call("DELETE", f"/datasets/{_name(name)}"))
