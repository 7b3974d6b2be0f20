"""Where workloads really run, and the contract between the service and a backend.

The service's controller drives a backend; a backend reports back through the
controller (``controller.pod_exited``, ``controller.eviction_done``, ...). ``local``
runs processes on this machine; ``kubernetes`` creates pods on a cluster (placed
by the default kube-scheduler).

``Backend`` declares every method the service may call, each docstring saying when
and what it must do: the abstract ones every backend implements, the others with a
default that does nothing (a valid answer: there is nothing to do). The service
never asks whether a backend has a method. Backends are traitlets ``Configurable``s,
so ``Backend`` is a ``HasTraits`` whose metaclass is also ``ABCMeta``: a backend
that lacks an abstract method cannot be made, and ``contract_problems`` names what a
backend class lacks or declares with another shape.
"""

from __future__ import annotations

import inspect
from abc import ABCMeta, abstractmethod

from traitlets import HasTraits, MetaHasTraits


class _BackendMeta(MetaHasTraits, ABCMeta):
    """traitlets' metaclass and ``ABCMeta`` at once (a backend is both a Configurable and an ABC)."""


class Backend(HasTraits, metaclass=_BackendMeta):
    """The interface the controller drives."""

    controller = None  # set by the controller when it is made

    #: How long an evicted notebook's user is warned before its server is stopped (the page's countdown),
    #: or None: the pod's grace period. Read when a notebook is evicted and by the spawn form.
    notebook_warning_seconds: float | None = None

    #: An ``asyncio.Event`` set once the backend has read what it must before anything is admitted (the
    #: cluster's other pods, quotas and limits), or None: nothing to wait for. The service waits for it at
    #: start, at most ``TenancyService.sync_timeout_seconds``.
    synced = None

    # -- what every backend must do --------------------------------------------------------
    @abstractmethod
    def nodes(self):
        """The cluster's nodes (``quota.nodes.NodeSpec``), read once when the controller is made."""

    @abstractmethod
    async def start(self, workload, pod, row) -> None:
        """Run an admitted pod (``row`` is its persisted record: set ``pid``/``log_path`` there).
        Called in the background after the pass that admitted it; report its end with
        ``controller.pod_exited(pod.uid, code)``."""

    @abstractmethod
    async def evict(self, workload, pod, row, grace: float, reason) -> None:
        """Stop a victim gracefully within ``grace`` seconds; call ``controller.eviction_done(pod.uid)``
        once it is gone (its room goes to the pod that preempted it only then)."""

    @abstractmethod
    async def stop(self, workload, pod, row) -> None:
        """Stop a pod now: its workload was cancelled or failed, or the pod must be gone before it may
        be admitted again (after a restart)."""

    @abstractmethod
    async def recover(self, workload, row, pod):
        """After a restart, for each pod the store says was started, how the pod of ``row`` is:
        ``"running"`` (it is adopted where it runs), ``("exited", code)`` (it ended while the service
        was away) or ``"gone"``. An exception means the backend itself failed: the restore stops."""

    @abstractmethod
    def logs(self, workload, row) -> str:
        """What the pod of ``row`` printed (the tail of it), for ``GET /api/v1/workloads/{id}/logs``."""

    # -- what a backend may do: the defaults do nothing ----------------------------------------
    @classmethod
    def leader_elector(cls, service, on_started_leading, on_change):
        """With ``TenancyService.leader_election`` on, before the backend is made: the elector that picks
        the one replica of several that acts (``start()``, ``stop()``, ``release()``; ``leader``,
        ``leading``, ``error``, ``where``; see ``kubernetes.leader.LeaderElector``). It calls
        ``on_started_leading()`` once this replica leads and ``on_change()`` whenever what it knows
        changes, both from a thread of its own. ``service`` is the ``TenancyService`` (its ``lease_*``
        settings and its config). None (the default): this backend elects no leader; one instance
        runs, guarded by the database lock."""
        return None

    def quota_tree(self):
        """At start, when neither the database nor the configuration has a tree: ``(tree, manifest)``
        of the one the cluster holds, or ``(None, None)``."""
        return None, None

    async def wait_ready(self) -> None:
        """At start, before the state is restored: return once the backend can act (its API server
        answers); retry meanwhile, never exit."""

    async def run(self) -> None:
        """The backend's background work while the service serves (watches, probes), started after the
        restore; it runs until cancelled. The default has none and returns at once."""

    def tenants_changed(self, tenants) -> None:
        """The tenants (hub groups with tenancy properties) were read again: every time, changed or not."""

    def datasets_changed(self, wanted) -> None:
        """What datasets each namespace may use was decided again (at start, when a dataset or a tenant
        changed, and every time the tenants are read): ``wanted`` maps ``(dataset name, namespace)`` to
        the ``quota.dataset.Dataset``. Make what each pair needs (claims, volumes, folders' access),
        remove what is no longer wanted once nothing running uses it (``controller.datasets.in_use``),
        and report each wanted pair's state with ``controller.dataset_state(name, namespace, state,
        message)``: ``"Bound"`` (work may mount it), ``"Pending"`` (not yet; the message says what it
        waits for) or ``"Refused"`` (it cannot be made: the message has the quota's or the API
        server's words). Called from the service's loop: start slow work in the background. The
        default makes nothing, so every wanted pair is Bound at once."""
        for name, namespace in wanted:
            self.controller.dataset_state(name, namespace, "Bound", None)

    def acceleration(self) -> str | None:
        """Whether this backend can accelerate datasets (a cache in front of each, as Fluid makes on
        Kubernetes): None when it can, else the sentence why not, which the API's 409 and the page's
        button show. Read on the service's loop whenever a dataset is shown: answer from what is known
        (no I/O). A backend that can reads the names an admin chose to accelerate from
        ``controller.datasets.accelerated`` when ``datasets_changed`` is called, makes each wanted pair's
        cache, reports it with ``controller.datasets.set_acceleration(name, namespace, state, message,
        claim)`` (``claim``: the PersistentVolumeClaim work mounts instead, once Bound) and removes a
        cache no longer chosen once nothing uses the dataset (``controller.datasets.in_use``). The
        default: this backend cannot."""
        return "this backend cannot accelerate datasets; acceleration needs Fluid on Kubernetes"

    def acceleration_objects(self, dataset, namespace: str) -> list[dict]:
        """What accelerating ``dataset`` (a ``quota.dataset.Dataset``) makes in ``namespace``, as the
        objects it would create (an accelerate's dry run shows them). No I/O. The default: nothing."""
        return []

    def admitted(self, workload, pod, row) -> None:
        """The pass that admitted ``pod`` calls this before ``start`` is scheduled (and before the
        submit that waited for the pass is answered): a backend whose pods run only once the cluster
        says so marks it Pending here (``controller.pod_observed``). The default does nothing."""

    async def forget(self, workload, pod, row) -> None:
        """A started pod was lost (its node went, it was deleted under us) and is queued again: remove
        what is left of it, never adopting it again. The default stops it."""
        await self.stop(workload, pod, row)

    def close(self) -> None:
        """The service (or a replay) is ending: stop background threads and pools."""


def contract_problems(cls) -> list[str]:
    """What keeps the backend class ``cls`` from keeping the contract: each abstract method it does not
    implement, and each method of ``Backend`` it declares with another shape (async where it must not
    be, or the reverse; not callable with the arguments the service passes). Empty: it keeps it."""
    problems = [f"{cls.__name__} lacks {name}()" for name in sorted(getattr(cls, "__abstractmethods__", ()))]
    for name, declared in vars(Backend).items():
        if not callable(declared) and not isinstance(declared, classmethod) or name.startswith("_"):
            continue
        if name in getattr(cls, "__abstractmethods__", ()):
            continue
        problem = _shape_problem(getattr(Backend, name), getattr(cls, name, None))
        if problem:
            problems.append(f"{cls.__name__}.{name}: {problem}")
    return problems


def _shape_problem(declared, found) -> str | None:
    """Why ``found`` cannot stand for ``declared`` (called as the service calls it), or None."""
    if not callable(found):
        return "not a method"
    if inspect.iscoroutinefunction(declared) != inspect.iscoroutinefunction(found):
        return "must be async" if inspect.iscoroutinefunction(declared) else "must not be async"
    want, have = inspect.signature(declared), inspect.signature(found)
    params = list(want.parameters.values())  # with ``self``: both are read from the class
    try:
        have.bind(*(None for p in params if p.default is p.empty))
        have.bind(*(None for _ in params))
    except TypeError as err:
        return f"takes other arguments ({err}); declared {want}"
    return None
