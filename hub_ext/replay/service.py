"""The service's parts as a replay runs them: its clock, its controller and its Kubernetes backend.

``ReplayController`` is the service's ``Controller`` with what a replay needs
(evictions held until the virtual clock reaches their deadline, this step's
evictions and failures recorded); ``ReplayBackend`` is the ``KubernetesBackend``
making each admitted pod from the scenario's pod template, every container running
the pause image (mounting the datasets the workload uses).
"""

from __future__ import annotations

from ..backends.kubernetes.backend import KubernetesBackend
from ..scheduler.model import Phase
from ..service.controller import Controller

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
#: on replayed pods: the scenario's owner of the pod ("Deployment/notebooks"; empty for a bare Pod)
OWNER_ANNOTATION = "tenancy.jupyter.org/replay-owner"


class VirtualClock:
    """The scenario's clock: it moves only when the replay moves it."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def move_to(self, at: float) -> None:
        self.now = max(self.now, at)


class ReplayController(Controller):
    """The service's controller, with what a replay needs: an eviction the cluster has completed is held
    until the replay's clock reaches its deadline (``release``); this step's evictions and failures are
    recorded for the report; once ``close``d, what the backend still reports (its watches end a moment
    after the replay) changes nothing."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.gone: set[int] = set()  # evicted pods gone from the cluster, not yet released
        self.evictions: list = []
        self.failures: list = []  # (pod, reason) of pods that ended with an error
        self.closed = False

    def close(self) -> None:
        """From now on the backend's reports are ignored (the replay is being taken down)."""
        self.closed = True
        self.health.log = None  # the nodes it removes are no news

    def _spawn(self, coro) -> None:
        if self.closed:
            coro.close()
            return
        super()._spawn(coro)

    def eviction_done(self, uid: int) -> None:
        if self.closed:
            return
        pod = self.engine.pods.get(uid)
        if pod is not None and pod.phase is Phase.TERMINATING:
            self.gone.add(uid)
            return
        super().eviction_done(uid)

    def release(self, uids) -> None:
        for uid in uids:
            self.gone.discard(uid)
            super().eviction_done(uid)

    def _evict(self, ev, now: float) -> None:
        self.evictions.append(ev)
        super()._evict(ev, now)

    def pod_exited(self, uid: int, code: int, reason=None) -> None:
        if self.closed:
            return
        pod = self.engine.pods.get(uid)
        if pod is not None and pod.phase is Phase.RUNNING and code != 0:
            self.failures.append((pod, reason))
        super().pod_exited(uid, code, reason)


def _unless_closed(name: str):
    """``Controller.<name>``, ignored once the replay's controller is closed."""
    def method(self, *args, **kwargs):
        if not self.closed:
            return getattr(Controller, name)(self, *args, **kwargs)
    method.__name__ = method.__qualname__ = name
    return method


# The rest of what the backend reports to its controller.
for _name in ("pod_lost", "pod_observed", "node_changed", "node_removed", "add_nodes", "observe_foreign",
              "forget_foreign", "apply_object", "remove_object", "dataset_state"):
    setattr(ReplayController, _name, _unless_closed(_name))


class ReplayBackend(KubernetesBackend):
    """The Kubernetes backend, making each admitted pod from the scenario's pod template."""

    def __init__(self, templates: dict, **kwargs):
        super().__init__(**kwargs)
        self.templates = templates  # workload id -> (raw pod spec, owner ref or "")

    def manifest(self, row, pod) -> dict:
        out = super().manifest(row, pod)
        raw, owner = self.templates[row.id]
        spec = out["spec"]

        # the datasets the workload uses, as the backend mounts them (the scenario's own volumes are dropped)
        mounts = spec["containers"][0].get("volumeMounts")

        def containers(items, main: bool = False):
            return [{"name": c.get("name") or f"c{i}", "image": PAUSE_IMAGE,
                     **({"resources": c["resources"]} if c.get("resources") else {}),
                     **({"volumeMounts": mounts} if main and mounts else {})}
                    for i, c in enumerate(items or [])]

        spec["containers"] = containers(raw.get("containers"), main=True)
        if raw.get("initContainers"):
            spec["initContainers"] = containers(raw["initContainers"])
        if pod.priority_class:
            spec["priorityClassName"] = pod.priority_class
        else:
            spec.pop("priorityClassName", None)
        if raw.get("terminationGracePeriodSeconds") is not None:
            spec["terminationGracePeriodSeconds"] = raw["terminationGracePeriodSeconds"]
        spec["nodeSelector"] = {**(raw.get("nodeSelector") or {}), **(spec.get("nodeSelector") or {})}
        spec["tolerations"] = list(raw.get("tolerations") or []) + list(spec.get("tolerations") or [])
        out["metadata"]["annotations"] = {OWNER_ANNOTATION: owner}
        return out

    def job_manifest(self, row, pod) -> dict:
        out = super().job_manifest(row, pod)
        out["spec"]["template"]["metadata"]["annotations"] = {OWNER_ANNOTATION: self.templates[row.id][1]}
        return out
