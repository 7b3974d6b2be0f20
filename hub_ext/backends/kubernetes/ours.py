"""What the Kubernetes backend made on the cluster, and what the watches of it last saw.

Per engine pod: the object (Job or bare Pod) made for it, its Kubernetes uid and
kind, whether a create is in flight, whether it is being evicted, and the
``follow.Followed`` that follows it. Our pods are followed by one watch (label
``objects.OURS``), our Jobs by another, not by a poller per Job: their events
wake the follower of the object they belong to (``objects.key_of``) and whoever
waits for a pod to be gone. Thousands are kept, so only what is read of them is
(``_slim_pod``, ``_slim_job``).
"""

from __future__ import annotations

import asyncio

from .api import JOB, POD, Kind
from .follow import Followed
from .informer import Informer
from .objects import OURS, key_of


class Ours:
    """Our objects per engine pod, our pods and Jobs as the watches saw them, and who follows which."""

    def __init__(self, backend):
        self.backend = backend  # its configuration, API and monitor
        # engine uid -> the object (Job or Pod) we made for it: its Kubernetes uid and kind
        self.k8s_uids: dict[int, str] = {}
        self.kinds: dict[int, Kind] = {}
        self.creating: dict[int, asyncio.Event] = {}  # set once start() made (or gave up making) it
        self.evicting: set[int] = set()  # evict() reports these; their followers stay quiet
        self.followed: dict[int, Followed] = {}  # engine uid -> what we follow of it
        self.follows: dict[tuple[str, str], Followed] = {}  # (namespace, object name) -> the same
        self.forgotten: dict[tuple[str, str], str] = {}  # objects of lost pods being deleted: never adopted
        self.pods: dict[tuple[str, str], dict] = {}  # (namespace, pod name) -> our pod as last seen
        # the same pods by (namespace, object name) and pod uid: a start finds its object's pods in O(1)
        self.by_object: dict[tuple[str, str], dict[str, dict]] = {}
        self.gone_waiters: dict[tuple[str, str], asyncio.Event] = {}
        self.pod_watch: Informer | None = None
        self.pods_listed: asyncio.Event | None = None
        # Our Jobs as the watch last saw them ((namespace, name) -> the Job; a deleted one as a tombstone
        # {"_deleted": True, "metadata": ...}): why a Job has no pod is read here, not asked of the API
        # server once per Job and check (that GET went to etcd: ~2 per Job, the API server's busiest load).
        self.job_watch: Informer | None = None
        self.jobs: dict[tuple[str, str], dict] = {}
        self.jobs_listed = False

    async def made(self, uid: int) -> None:
        """Wait until a start() in flight for ``uid`` has made its object (or given up)."""
        creating = self.creating.get(uid)
        if creating is not None:
            await creating.wait()

    # -- the watches -----------------------------------------------------------------------
    def watch_pods(self) -> None:
        """Start the watch of our pods (once; at the first start or recover, or when serving)."""
        if self.pod_watch is None:
            backend = self.backend
            loop = asyncio.get_running_loop()
            if backend.monitor.loop is None:
                backend.monitor.loop = loop
            self.pods_listed = asyncio.Event()
            self.pod_watch = Informer(backend.api, POD, OURS, loop, self.pod_event,
                                      timeout_seconds=backend.relist_seconds, monitor=backend.monitor,
                                      log=backend.log, name="our pods").start()

    def watch_jobs(self) -> None:
        """Start the watch of our Jobs (once, at the first Job made or adopted)."""
        if self.job_watch is None:
            backend = self.backend
            self.job_watch = Informer(backend.api, JOB, OURS, asyncio.get_running_loop(), self.job_event,
                                      timeout_seconds=backend.relist_seconds, monitor=backend.monitor,
                                      log=backend.log, name="our jobs").start()

    def job_event(self, kind: str, obj) -> None:
        # Only the Jobs someone follows are kept: a finished or deleted Job nobody follows is dropped
        # (a follower registered later asks the API server once if the watch has not spoken since).
        if kind == "LIST":
            jobs = {(j["metadata"]["namespace"], j["metadata"]["name"]): j for j in obj}
            self.jobs = {key: _slim_job(jobs[key]) for key in self.follows if key in jobs}
            self.jobs_listed = True
            for f in self.follows.values():
                if f.kind is JOB:
                    f.changed.set()
            return
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace"), meta.get("name"))
        f = self.follows.get(key)
        if f is None:
            self.jobs.pop(key, None)
            return
        self.jobs[key] = {"_deleted": True, "metadata": _slim_meta(obj)} if kind == "DELETED" else _slim_job(obj)
        # The Job is read only while it has no pod of its own (``Follower.why_no_pod``); once it has one, its
        # pod's events tell everything (a Job deleted takes its pod along) and its status writes need not wake us.
        if kind == "DELETED" or f.current() is None:
            f.changed.set()

    def watched_job(self, f: Followed) -> dict | None:
        """Our Job of ``f`` as the watch saw it (a tombstone when deleted); None when the watch has not
        seen this Job (not listed yet, or only just made): then ask the API server."""
        obj = self.jobs.get((f.namespace, f.name)) if self.jobs_listed else None
        if obj is None or obj["metadata"].get("uid") != f.k8s_uid:
            return None
        return obj

    def pod_event(self, kind: str, obj) -> None:
        if kind == "LIST":
            obj = [_slim_pod(p) for p in obj]
            now = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in obj}
            for key in set(self.pods) - set(now):
                self._wake_gone(key)
            self.pods = now
            by_object: dict = {}
            for pod in obj:
                by_object.setdefault(key_of(pod), {})[pod["metadata"]["uid"]] = pod
            self.by_object = {key: dict(pods) for key, pods in by_object.items()}
            for key, f in self.follows.items():
                fresh = by_object.get(key, {})
                for puid, old in f.pods.items():
                    if puid not in fresh and not old.get("_deleted"):  # deleted while we were not watching
                        fresh[puid] = {**old, "_deleted": True}
                f.pods = fresh
                f.changed.set()
            self.pods_listed.set()
            return
        obj = _slim_pod(obj)
        meta = obj["metadata"]
        key = (meta.get("namespace"), meta.get("name"))
        owner = key_of(obj)
        if kind == "DELETED":
            self.pods.pop(key, None)
            pods = self.by_object.get(owner)
            if pods is not None:
                pods.pop(meta.get("uid"), None)
                if not pods:
                    del self.by_object[owner]
            self._wake_gone(key)
            obj = {**obj, "_deleted": True}
        else:
            self.pods[key] = obj
            self.by_object.setdefault(owner, {})[meta.get("uid")] = obj
        f = self.follows.get(owner)
        if f is not None:
            f.pods[meta.get("uid")] = obj
            f.changed.set()

    def _wake_gone(self, key) -> None:
        waiter = self.gone_waiters.pop(key, None)
        if waiter is not None:
            waiter.set()

    def watching(self, key: tuple[str, str]) -> bool:
        """Whether the watch of our pods has listed and knows this pod: then it tells when it is gone."""
        return self.pods_listed is not None and self.pods_listed.is_set() and key in self.pods

    # -- who follows what ------------------------------------------------------------------
    def register(self, f: Followed) -> Followed:
        old = self.followed.get(f.uid)
        if old is not None:
            self.unregister(old)
        self.followed[f.uid] = f
        self.follows[(f.namespace, f.name)] = f
        for pod in self.by_object.get((f.namespace, f.name), {}).values():  # what the watch saw already
            f.pods[pod["metadata"]["uid"]] = pod
        return f

    def unregister(self, f: Followed) -> None:
        if self.followed.get(f.uid) is f:
            del self.followed[f.uid]
        if self.follows.get((f.namespace, f.name)) is f:
            del self.follows[(f.namespace, f.name)]
            self.jobs.pop((f.namespace, f.name), None)
        f.changed.set()  # its loop wakes and ends

    def live(self, f: Followed) -> bool:
        """Whether ``f`` is still ours to report: not stopped, replaced or being evicted."""
        return self.followed.get(f.uid) is f and f.uid not in self.evicting and \
            self.k8s_uids.get(f.uid) == f.k8s_uid

    def watches(self) -> list[Informer]:
        return [w for w in (self.pod_watch, self.job_watch) if w is not None]


def _slim_meta(obj: dict) -> dict:
    meta = obj.get("metadata") or {}
    return {k: v for k, v in meta.items() if k != "managedFields"}


def _slim_job(job: dict) -> dict:
    """What ``Follower.why_no_pod`` reads of a Job (thousands are kept: not their pod templates)."""
    return {"metadata": _slim_meta(job), "status": job.get("status") or {}}


def _slim_pod(pod: dict) -> dict:
    """What following a pod of ours reads (``follow.judge``): thousands are kept, each walked by the
    garbage collector; their specs and managed fields were most of their objects."""
    spec = pod.get("spec") or {}
    return {"metadata": _slim_meta(pod), "spec": {"nodeName": spec.get("nodeName")} if spec.get("nodeName") else {},
            "status": pod.get("status") or {}}
