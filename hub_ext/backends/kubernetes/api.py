"""A thin REST layer over ``kubernetes.client.ApiClient``: JSON in and out, one-line errors, discovery.

Objects are plain dicts, exactly the server's JSON: what is compared is what the
server stored, and a body is sent as written (no model round trip that could
drop or rename a field). Requests go through the ``ApiClient``'s own
serialization, authentication (bearer token with refresh, client certificates,
impersonation headers set with ``set_default_header``) and connection pool.

Every failure (an API status such as 403 or 409, a refused connection, a
timeout) raises ``KubernetesError``, whose ``str`` is one line.
``cluster_client`` makes the ``ApiClient`` from the service's credentials.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from urllib.parse import quote

import orjson
import urllib3
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError as Urllib3Error

from ...quota.errors import ValidationError


class KubernetesError(RuntimeError):
    """A failed API call, as one line. ``status`` is the HTTP status (None: the server did not answer)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(" ".join(str(message).split()))
        self.status = status

    @property
    def unreachable(self) -> bool:
        return self.status is None


def _status_error(status: int, reason: str, data: bytes | str | None) -> KubernetesError:
    """The API server's ``Status`` answer as one line: ``403 Forbidden: roles ... is forbidden: ...``."""
    message = ""
    try:
        message = json.loads(data or b"").get("message") or ""
    except (ValueError, AttributeError):
        if isinstance(data, bytes):
            data = data.decode(errors="replace")
        if data and len(data) < 300:
            message = data
    return KubernetesError(f"{status} {reason or ''}: {message}".replace(" :", ":").rstrip(": "), status)


def describe(exc: BaseException) -> KubernetesError:
    """Any exception raised by the client as a one-line ``KubernetesError``."""
    if isinstance(exc, KubernetesError):
        return exc
    if isinstance(exc, ApiException):
        if exc.status:
            return _status_error(exc.status, exc.reason, exc.body)
        return KubernetesError(exc.reason or type(exc).__name__, None)
    if isinstance(exc, (Urllib3Error, OSError)):
        reason = getattr(exc, "reason", None) or exc
        return KubernetesError(f"cannot reach the API server: {reason}", None)
    return KubernetesError(f"{type(exc).__name__}: {exc}", None)


@dataclass(frozen=True)
class Kind:
    """Where the objects of one kind live in the REST API."""

    name: str
    group_version: str  # "v1" for the core group
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        """``/apis/<gv>[/namespaces/<ns>]/<plural>[/<name>]``; without a namespace, every namespace."""
        out = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        if self.namespaced and namespace:
            out += f"/namespaces/{quote(namespace, safe='')}"
        out += f"/{self.plural}"
        if name:
            out += f"/{quote(name, safe='')}"
        return out


NAMESPACE = Kind("Namespace", "v1", "namespaces", False)
PRIORITY_CLASS = Kind("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", False)
ROLE = Kind("Role", "rbac.authorization.k8s.io/v1", "roles", True)
NODE = Kind("Node", "v1", "nodes", False)
ROLE_BINDING = Kind("RoleBinding", "rbac.authorization.k8s.io/v1", "rolebindings", True)
LIMIT_RANGE = Kind("LimitRange", "v1", "limitranges", True)
RESOURCE_QUOTA = Kind("ResourceQuota", "v1", "resourcequotas", True)
POD = Kind("Pod", "v1", "pods", True)
JOB = Kind("Job", "batch/v1", "jobs", True)

#: The kinds the provisioner manages, in the order it applies them (a namespace before
#: what it holds; the LimitRange before the ResourceQuota, so that the quota never
#: sees a namespace whose pods get no defaults).
KINDS = (NAMESPACE, PRIORITY_CLASS, ROLE, ROLE_BINDING, LIMIT_RANGE, RESOURCE_QUOTA)


class RateLimiter:
    """Client-side throttling of API requests, as client-go's QPS and Burst: a token bucket that
    holds ``burst`` tokens and refills ``qps`` per second; ``take()`` blocks until one is free.
    ``qps`` 0 turns it off. Thread-safe (requests come from worker threads)."""

    def __init__(self, qps: float, burst: int):
        self.qps, self.burst = float(qps), max(1, int(burst))
        self._tokens, self._at = float(self.burst), time.monotonic()
        self._lock = threading.Lock()

    def take(self) -> None:
        if self.qps <= 0:
            return
        while True:
            with self._lock:
                now = time.monotonic()
                self._tokens = min(self.burst, self._tokens + (now - self._at) * self.qps)
                self._at = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                wait = (1 - self._tokens) / self.qps
            time.sleep(wait)


class Api:
    """Create, read, replace, delete and list by label, raising ``KubernetesError`` only."""

    def __init__(self, api_client, timeout: float | None = None, limiter: RateLimiter | None = None):
        self.api_client = api_client
        self.timeout = timeout or None
        self.limiter = limiter

    def with_timeout(self, timeout: float) -> "Api":
        """The same client with another request timeout and no throttling (health probes)."""
        return Api(self.api_client, timeout)

    def request(self, method: str, path: str, *, query=None, body=None):
        """One request; the decoded JSON answer (``{}`` when empty)."""
        if self.limiter is not None:
            self.limiter.take()
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        query = [(k, v) for k, v in (query or {}).items() if v is not None]
        try:
            if not hasattr(self.api_client, "param_serialize"):
                # older clients ("python-legacy"): non-2xx answers raise ApiException
                resp = self.api_client.call_api(
                    path, method, query_params=query, header_params=headers, body=body,
                    auth_settings=["BearerToken"], _preload_content=False, _request_timeout=self.timeout)
                resp = resp[0] if isinstance(resp, tuple) else resp
                status, reason, data = resp.status, resp.reason, resp.data
            elif body is not None:  # kubernetes >= 35 (openapi-generator "python"): the body written by orjson
                resp = self._send_body(method, path, query, headers, body)
                status, reason, data = resp.status, resp.reason, resp.data
            else:
                request = self.api_client.param_serialize(
                    method=method, resource_path=path, query_params=query, header_params=headers,
                    auth_settings=["BearerToken"])
                resp = self.api_client.call_api(*request, _request_timeout=self.timeout)
                status, reason, data = resp.status, resp.reason, resp.read()
        except Exception as exc:  # noqa: BLE001 - every failure becomes one line
            raise describe(exc) from None
        if not 200 <= status <= 299:
            raise _status_error(status, reason, data)
        try:
            return orjson.loads(data) if data else {}
        except ValueError:
            raise KubernetesError(f"{method} {path}: the API server answered with something other than JSON") from None

    def _send_body(self, method: str, path: str, query: list, headers: dict, body):
        """A request with a JSON body (a create, replace or delete) on the ``ApiClient``'s own connection pool,
        with the URL, headers and credentials its ``param_serialize`` makes (default headers, impersonation,
        a refreshed token), the body written by orjson. The ``ApiClient``'s own path walks every value of
        the body in Python (``sanitize_for_serialization``) and then ``json.dumps`` it: 10-15 % of a Job
        create's CPU in the service, thousands of creates a minute under a burst (issue 24)."""
        _, url, headers, _, _ = self.api_client.param_serialize(
            method=method, resource_path=path, query_params=query, header_params=headers,
            auth_settings=["BearerToken"])
        timeout = self.timeout
        if isinstance(timeout, (int, float)):  # as the ApiClient's RESTClientObject does
            timeout = urllib3.Timeout(total=timeout)
        elif isinstance(timeout, tuple) and len(timeout) == 2:
            timeout = urllib3.Timeout(connect=timeout[0], read=timeout[1])
        return self.api_client.rest_client.pool_manager.request(
            method, url, body=orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS), headers=headers,
            timeout=timeout, preload_content=True)

    def read(self, kind: Kind, namespace: str | None, name: str) -> dict | None:
        """The object, or None when it does not exist."""
        try:
            return self.request("GET", kind.path(namespace, name))
        except KubernetesError as err:
            if err.status == 404:
                return None
            raise

    def create(self, kind: Kind, obj: dict) -> dict:
        return self.request("POST", kind.path(obj["metadata"].get("namespace")), body=obj)

    def replace(self, kind: Kind, obj: dict) -> dict:
        """PUT: fails with 409 when ``metadata.resourceVersion`` is stale (someone changed it meanwhile)."""
        meta = obj["metadata"]
        return self.request("PUT", kind.path(meta.get("namespace"), meta["name"]), body=obj)

    def delete(self, kind: Kind, namespace: str | None, name: str) -> None:
        """Delete (in the background); an object already gone is fine."""
        try:
            self.request("DELETE", kind.path(namespace, name), body={"propagationPolicy": "Background"})
        except KubernetesError as err:
            if err.status != 404:
                raise

    def list(self, kind: Kind, label_selector: str | None = None, namespace: str | None = None,
             limit: int | None = None) -> list[dict]:
        """Objects of every namespace (or of one), filtered by labels."""
        return self.request("GET", kind.path(namespace), query={"labelSelector": label_selector,
                                                                 "limit": limit}).get("items") or []

    def watch(self, kind: Kind, *, label_selector: str | None = None, resource_version: str | None = None,
              timeout_seconds: int = 300, stop=None, on_response=None):
        """Follow changes of ``kind`` in every namespace from ``resource_version``: yields lists of
        ``(type, object)``, type ``ADDED``, ``MODIFIED``, ``DELETED`` or ``BOOKMARK``, objects as plain
        dicts (no model round trip), one list per read from the connection: under load a read brings
        many events, and their reader hands them on together. Ends when the server ends the watch (after about
        ``timeout_seconds``); an ``ERROR`` event (410 Gone: the version is too old) raises
        ``KubernetesError`` with its status. ``stop()``, when given, is checked after each read;
        ``on_response(response)`` is handed the open urllib3 response (to shut it from another thread)."""
        if self.limiter is not None:
            self.limiter.take()
        query = [("watch", "true"), ("allowWatchBookmarks", "true"), ("timeoutSeconds", int(timeout_seconds))]
        if label_selector:
            query.append(("labelSelector", label_selector))
        if resource_version:
            query.append(("resourceVersion", resource_version))
        try:
            request = self.api_client.param_serialize(method="GET", resource_path=kind.path(), query_params=query,
                                                      header_params={"Accept": "application/json"},
                                                      auth_settings=["BearerToken"])
            # connect timeout as usual; reads may wait the whole watch (plus a margin) between events
            resp = self.api_client.call_api(*request, _request_timeout=(self.timeout or 30, timeout_seconds + 30))
        except Exception as exc:  # noqa: BLE001 - every failure becomes one line
            raise describe(exc) from None
        if not 200 <= resp.status <= 299:
            raise _status_error(resp.status, resp.reason, resp.read())
        raw = resp.response
        if on_response is not None:
            on_response(raw)
        try:
            buffer = b""
            for chunk in raw.stream(amt=None, decode_content=False):
                lines = (buffer + chunk).split(b"\n")
                buffer = lines.pop()  # the start of an event still to come
                batch = []
                for line in lines:
                    if not line.strip():
                        continue
                    event = orjson.loads(line)  # thousands of events a second under load: the fast parser
                    if event.get("type") == "ERROR":
                        obj = event.get("object") or {}
                        raise KubernetesError(f"watch of {kind.plural}: {obj.get('message') or obj}", obj.get("code"))
                    batch.append((event.get("type"), event.get("object") or {}))
                if batch:
                    yield batch
                if stop is not None and stop():
                    return
        except KubernetesError:
            raise
        except Exception as exc:  # noqa: BLE001 - a dropped connection, a read timeout
            raise describe(exc) from None
        finally:
            raw.release_conn()

    def list_with_version(self, kind: Kind, label_selector: str | None = None) -> tuple[list[dict], str | None]:
        """Every object of ``kind`` (all namespaces), read in pages of 500, and the list's resourceVersion."""
        items, token, version = [], None, None
        while True:
            page = self.request("GET", kind.path(), query={"labelSelector": label_selector, "limit": 500,
                                                           "continue": token})
            items += page.get("items") or []
            meta = page.get("metadata") or {}
            version = meta.get("resourceVersion") or version
            token = meta.get("continue")
            if not token:
                return items, version

    # ------------------------------------------------------------------ discovery
    def served_versions(self) -> dict[str, list[str]]:
        """``{group: [version, ...]}`` from the discovery API; the core group is ``""``."""
        out = {"": list(self.request("GET", "/api").get("versions") or [])}
        for group in self.request("GET", "/apis").get("groups") or []:
            out[group.get("name", "")] = [v.get("version") for v in group.get("versions") or []]
        return out

    def served_resources(self, group_version: str) -> set[str]:
        """The resources (plurals) a group version serves; empty when it is not served."""
        path = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        try:
            found = self.request("GET", path)
        except KubernetesError as err:
            if err.status == 404:
                return set()
            raise
        return {r.get("name") for r in found.get("resources") or []}


def missing_group_versions(served: dict[str, list[str]], wanted) -> dict[str, str]:
    """For each wanted ``group/version`` the server does not serve, a one-line reason."""
    out = {}
    for gv in wanted:
        group, _, version = gv.rpartition("/")
        versions = served.get(group)
        if versions is None:
            out[gv] = f"the API server does not serve {gv} (no API group {group or 'core'})"
        elif version not in versions:
            out[gv] = f"the API server does not serve {gv} (it serves {group} at {', '.join(versions) or 'no version'})"
    return out


def cluster_client(kubeconfig: str = "", context: str = "", pool_size: int = 0, who: str = "KubernetesBackend"):
    """An ``ApiClient`` with the service's credentials: ``kubeconfig`` (and its ``context``) when given, or
    outside a pod; else the pod's ServiceAccount. Its connection pool holds at least ``pool_size``; ``who``
    names the part that asked, in the one line said when there are no credentials."""
    from kubernetes import client, config

    configuration = client.Configuration()
    try:
        if kubeconfig or not os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_kube_config(config_file=kubeconfig or None, context=context or None,
                                    client_configuration=configuration)
        else:
            config.load_incluster_config(client_configuration=configuration)
    except (config.ConfigException, OSError, TypeError, ValueError) as err:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise ValidationError(f"{who}: no cluster credentials ({where}): {' '.join(str(err).split())}") from None
    configuration.retries = 0  # retried by the caller, with backoff and one line per outage (not urllib3's per call)
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, pool_size)
    return client.ApiClient(configuration)
