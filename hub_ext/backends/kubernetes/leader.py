"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's ``leaderelection`` does it.

Several replicas of the service share one database; one of them, the *leader*, runs
the controller, the backend's background work and everything that acts on the
cluster. The others *follow*: they answer ``/health`` themselves and forward every
other request to the leader (``service/forward.py``). ``lease_elector`` is how the
service gets its elector from the Kubernetes backend (``Backend.leader_elector``).

The Lease (``spec``: ``holderIdentity``, ``leaseDurationSeconds``, ``acquireTime``,
``renewTime``, ``leaseTransitions``; the leader's URL in the annotation
``tenancy.jupyter.org/advertise-url``) is read and written with optimistic concurrency:
every write carries the ``resourceVersion`` it read, so of two replicas writing at
once one gets 409 and stays a follower. As in client-go:

1. A follower reads the Lease every ``retry_period``. The lease is *held* while its
   record keeps changing: a record unchanged for ``leaseDurationSeconds`` of the
   follower's own monotonic clock (from when it first saw that record; never the
   holder's wall clock) is expired, and the follower writes itself in as holder
   (``leaseTransitions`` + 1). An empty holder (a leader that let go) is free at once.
2. The leader writes ``renewTime`` every ``retry_period``. If no renewal succeeds for
   ``renew_deadline`` (counted from the *start* of the last successful request, so
   before any follower can count the lease expired: ``renew_deadline`` <
   ``lease_duration``), it stops acting at once: a thread of its own, independent of
   the event loop, ends the process (``on_lost``), and the pod restarts as a follower.
   Seeing another holder in the record ends it the same way.
3. A leader that stops on purpose (SIGTERM) writes an empty holder with a duration of
   1 s, so a follower takes over within one ``retry_period``.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import random
import threading
import time

from ...quota.errors import ValidationError
from .api import Api, Kind, KubernetesError, cluster_client

LEASE = Kind("Lease", "coordination.k8s.io/v1", "leases", True)
ADVERTISE_ANNOTATION = "tenancy.jupyter.org/advertise-url"
#: client-go's JitterFactor: a follower waits retry_period × [1, 1.2) between attempts.
JITTER = 1.2


def micro_time(when: dt.datetime) -> str:
    """A Kubernetes MicroTime: RFC 3339 with microseconds, UTC."""
    return when.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_namespace() -> str:
    """This pod's namespace (``$POD_NAMESPACE``, else the ServiceAccount's), else ``default``."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace", encoding="utf-8") as f:
            return f.read().strip() or "default"
    except OSError:
        return "default"


def api_client(kubeconfig: str = "", context: str = ""):
    """A ``kubernetes.client.ApiClient`` from a kubeconfig file, or in-cluster (as the backend makes its own)."""
    return cluster_client(kubeconfig, context, who="leader election")



def lease_elector(service, on_started_leading, on_change) -> "LeaderElector":
    """The Kubernetes backend's elector (``Backend.leader_elector``): a Lease as ``service`` (the
    ``TenancyService``) configures it (``lease_*``, ``identity``, ``advertise_url``), on the cluster of
    ``c.KubernetesBackend.kubeconfig`` (in-cluster by default)."""
    config = service.config.KubernetesBackend
    client = api_client(config.get("kubeconfig", ""), config.get("kube_context", ""))
    api = Api(client, timeout=max(1.0, min(5.0, service.renew_deadline_seconds / 2)))
    try:
        return LeaderElector(api, namespace=service.lease_namespace, name=service.lease_name,
                             identity=service.identity, advertise_url=service.advertise_url,
                             lease_duration=service.lease_duration_seconds,
                             renew_deadline=service.renew_deadline_seconds, retry_period=service.retry_period_seconds,
                             log=service.log, on_started_leading=on_started_leading, on_change=on_change)
    except ValueError as err:
        raise ValidationError(f"TenancyService: {err}") from None

class LeaderElector:
    """One replica's side of the election. ``start()`` runs it in a thread; the callbacks are called
    from that thread: ``on_started_leading()``, ``on_change()`` (``leader``, ``leader_url`` or ``error``
    changed) and ``on_lost(why)`` (default: log and end the process at once)."""

    def __init__(self, api: Api, *, namespace: str, name: str, identity: str, advertise_url: str = "",
                 lease_duration: float = 15.0, renew_deadline: float = 10.0, retry_period: float = 2.0,
                 log=None, clock=time.monotonic, wall=lambda: dt.datetime.now(dt.timezone.utc),
                 on_started_leading=None, on_change=None, on_lost=None):
        if not 0 < retry_period * JITTER < renew_deadline < lease_duration:
            raise ValueError(f"leader election needs retry_period × {JITTER} < renew_deadline < lease_duration "
                             f"(got {retry_period:g}, {renew_deadline:g}, {lease_duration:g} s)")
        self.api, self.namespace, self.name = api, namespace, name
        self.identity, self.advertise_url = identity, advertise_url
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.log = log or logging.getLogger("tenancy")
        self.clock, self.wall = clock, wall
        self.on_started_leading, self.on_change = on_started_leading, on_change
        self.on_lost = on_lost or _exit_now
        self.leading = False
        self.leader: str | None = None  # the holder last seen (None: none)
        self.leader_url: str | None = None
        self.error: str | None = None  # the last failure to read or write the Lease (None: it worked)
        self._observed: dict | None = None  # the lease record last seen, and when (our clock)
        self._observed_at = 0.0
        self._renewed_at = 0.0  # start of the last successful acquire or renew
        self._stop = threading.Event()
        self._lost = False
        self._thread: threading.Thread | None = None

    @property
    def where(self) -> str:
        return f"{self.namespace}/{self.name}"

    # -- one attempt -------------------------------------------------------------------------
    def try_acquire_or_renew(self) -> bool:
        """Read the Lease and, when it is ours or free or expired, write us in (client-go's
        ``tryAcquireOrRenew``); True when we hold it now."""
        now = self.clock()
        try:
            lease = self.api.read(LEASE, self.namespace, self.name)
            if lease is None:
                return self._write(None, now)
            spec = lease.get("spec") or {}
            record = {k: spec.get(k) for k in ("holderIdentity", "leaseDurationSeconds", "acquireTime",
                                                  "renewTime", "leaseTransitions")}
            if record != self._observed:
                self._observed, self._observed_at = record, now
            holder = spec.get("holderIdentity") or ""
            self._seen(holder or None, ((lease.get("metadata") or {}).get("annotations") or {}).get(ADVERTISE_ANNOTATION))
            duration = spec.get("leaseDurationSeconds") or self.lease_duration
            if holder and holder != self.identity and self._observed_at + duration > now:
                return False  # held by another, and not expired by our clock
            return self._write(lease, now)
        except KubernetesError as err:
            self._failed(err)
            return False

    def _write(self, lease: dict | None, now: float) -> bool:
        wall = micro_time(self.wall())
        old = (lease or {}).get("spec") or {}
        ours = old.get("holderIdentity") == self.identity
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": int(round(self.lease_duration)),
                "acquireTime": old.get("acquireTime") if ours and old.get("acquireTime") else wall,
                "renewTime": wall,
                "leaseTransitions": (old.get("leaseTransitions") or 0) + (0 if ours or lease is None else 1)}
        meta = dict((lease or {}).get("metadata") or {"name": self.name, "namespace": self.namespace})
        meta["annotations"] = {**(meta.get("annotations") or {}), ADVERTISE_ANNOTATION: self.advertise_url}
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}
        try:
            written = self.api.create(LEASE, body) if lease is None else self.api.replace(LEASE, body)
        except KubernetesError as err:
            if err.status == 409:  # another replica wrote first (or created it): we read again next time
                self._ok()
                return False
            raise
        self._ok()
        record = {k: (written.get("spec") or {}).get(k) for k in ("holderIdentity", "leaseDurationSeconds",
                                                                   "acquireTime", "renewTime", "leaseTransitions")}
        self._observed, self._observed_at = record, now
        self._renewed_at = now
        self._seen(self.identity, self.advertise_url)
        return True

    def release(self) -> bool:
        """Let go of the Lease (a follower may take it at once); True when it was ours and is released."""
        try:
            lease = self.api.read(LEASE, self.namespace, self.name)
            spec = (lease or {}).get("spec") or {}
            if lease is None or spec.get("holderIdentity") != self.identity:
                return False
            wall = micro_time(self.wall())
            lease["spec"] = {"leaseDurationSeconds": 1, "acquireTime": wall, "renewTime": wall,
                             "leaseTransitions": spec.get("leaseTransitions") or 0}
            self.api.replace(LEASE, lease)
        except KubernetesError as err:
            self.log.warning("leader election: could not release the lease %s: %s", self.where, err)
            return False
        self.log.info("leader election: %s released the lease %s", self.identity, self.where)
        return True

    # -- the loop ------------------------------------------------------------------------------
    def start(self) -> "LeaderElector":
        self._thread = threading.Thread(target=self.run, name="tenancy-leader-election", daemon=True)
        self._thread.start()
        threading.Thread(target=self._guard, name="tenancy-leader-guard", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        """Follow until we acquire the lease, then renew it until we cannot (``on_lost``) or ``stop()``."""
        while not self._stop.is_set() and not self.try_acquire_or_renew():
            self._stop.wait(self.retry_period * random.uniform(1.0, JITTER))
        if self._stop.is_set():
            return
        self.leading = True
        self.log.info("leader election: %s leads (lease %s, %s transition(s))", self.identity, self.where,
                      (self._observed or {}).get("leaseTransitions"))
        if self.on_started_leading is not None:
            self.on_started_leading()
        while not self._stop.wait(self.retry_period):
            if not self.try_acquire_or_renew() and self.leader not in (None, self.identity):
                self._lose(f"the lease {self.where} is held by {self.leader} now")
                return

    def _guard(self) -> None:
        """While leading, end at once when no renewal succeeded for ``renew_deadline`` (whatever the
        event loop or the renewal thread are doing)."""
        while not self._stop.wait(0.1):
            if self.leading and self.clock() - self._renewed_at > self.renew_deadline:
                self._lose(f"the lease {self.where} was not renewed for {self.renew_deadline:g} s"
                           + (f" ({self.error})" if self.error else ""))
                return

    def _lose(self, why: str) -> None:
        if self._lost:
            return
        self._lost = True
        self.log.critical("leader election: %s; this replica stops acting now (it exits, and starts again as a "
                          "follower)", why)
        self.on_lost(why)

    # -- what we saw ---------------------------------------------------------------------------
    def _seen(self, holder: str | None, url: str | None) -> None:
        if (holder, url) == (self.leader, self.leader_url):
            return
        self.leader, self.leader_url = holder, url or None
        if holder is not None and holder != self.identity:
            self.log.info("leader election: %s leads (at %s); this replica follows", holder, url or "no address")
        self._changed()

    def _failed(self, err: KubernetesError) -> None:
        if self.error is None:
            self.log.warning("leader election: cannot read or write the lease %s: %s", self.where, err)
        if self.error != str(err):
            self.error = str(err)
            self._changed()

    def _ok(self) -> None:
        if self.error is not None:
            self.log.warning("leader election: the lease %s can be read and written again", self.where)
            self.error = None
            self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()


def _exit_now(why: str) -> None:
    """Stop acting at once: end the process without running anything else (no clean-up may act)."""
    for handler in logging.getLogger().handlers + logging.getLogger("tenancy").handlers:
        try:
            handler.flush()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass
    os._exit(1)

