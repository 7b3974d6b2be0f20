"""Following one training pod of ours: what the cluster says of it, told to the controller until it ends.

"Running" means what the cluster says: the pod's phase is Running (scheduled,
started). Otherwise it is waiting for kube-scheduler (with the scheduler's own
message from the ``PodScheduled`` condition) or for its node to start it. A pod
in a final phase has ended, and counts as ended at once, without waiting for
the Job controller to mark the Job. A pod that went with its node, was deleted
under us, or ended by a disruption (the ``DisruptionTarget`` condition: a taint,
pod garbage collection, the kubelet, kube-scheduler's own preemption) is *lost*:
its work is queued again, not failed. One stuck terminating long after its grace
period (its kubelet gone) is deleted with a zero grace period and lost too.

``judge`` and the functions under it decide from the objects alone (no I/O);
``Follower.follow`` is the loop per pod that the watches of ``ours`` wake, and
that asks the API server only what they cannot tell (why a Job has no pod).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ...scheduler.model import LIMIT_RANGE, RESOURCE_QUOTA, Reason
from ...vocabulary import time_of_day
from .api import JOB, POD, Kind, KubernetesError
from .objects import JOB_UID_LABEL

#: pod phases (``status.reason``) a kubelet or controller sets when a pod is lost, not failed by its program
LOST_REASONS = ("NodeLost", "Evicted", "Shutdown", "Terminated", "NodeShutdown", "UnexpectedAdmissionError")
#: exit code reported for a pod deleted under us (as if killed by SIGKILL)
KILLED = 137


@dataclass(eq=False)
class Followed:
    """One admitted training pod and the objects that carry it: our Job (or bare Pod), its pod."""

    uid: int  # the engine's pod
    kind: Kind
    namespace: str
    name: str  # our Job's (or Pod's) name: the engine pod's name
    k8s_uid: str | None = None  # our Job's (or Pod's) uid; None while it is being created
    pods: dict = field(default_factory=dict)  # pod uid -> the pod as the watch last saw it ("_deleted": gone)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    observed: tuple | None = None  # (phase, node, message) last reported

    def belongs(self, pod: dict) -> bool:
        """Whether ``pod`` is the pod of our current object (an older Job of the same name had others)."""
        meta = pod.get("metadata") or {}
        if self.k8s_uid is None:
            return True
        if self.kind.name == "Pod":
            return meta.get("uid") == self.k8s_uid
        labels = meta.get("labels") or {}
        owner = labels.get(JOB_UID_LABEL) or labels.get("batch.kubernetes.io/controller-uid")
        return owner == self.k8s_uid

    def current(self) -> dict | None:
        mine = [p for p in self.pods.values() if self.belongs(p)]
        return max(mine, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "") if mine else None


def exit_code(obj: dict) -> int | None:
    """The exit code of an ended pod (None while it has not ended)."""
    status = obj.get("status") or {}
    phase = status.get("phase")
    if phase not in ("Succeeded", "Failed"):
        return None
    for cs in status.get("containerStatuses") or []:
        terminated = (cs.get("state") or {}).get("terminated")
        if terminated and terminated.get("exitCode") is not None:
            code = int(terminated["exitCode"])
            if phase == "Failed" and code == 0:
                return 1
            return code
    return 0 if phase == "Succeeded" else 1


def disrupted(pod: dict) -> str | None:
    """Why a pod that ended was lost rather than failed by its program, or None."""
    status = pod.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            return f"{cond.get('reason') or 'disrupted'}: {' '.join((cond.get('message') or '').split())}".rstrip(": ")
    if status.get("reason") in LOST_REASONS:
        return f"{status['reason']}: {' '.join((status.get('message') or '').split())}".rstrip(": ")
    return None


def waiting_message(pod: dict) -> str:
    """Why a pod that is not Running yet waits, in the cluster's words."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    node = spec.get("nodeName")
    if not node:
        for cond in status.get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                text = " ".join((cond.get("message") or cond.get("reason") or "").split())
                return f"waiting for kube-scheduler: {text}" if text else "waiting for kube-scheduler"
        return "waiting for kube-scheduler: not scheduled yet"
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting:
            why = " ".join(f"{waiting.get('reason') or ''} {waiting.get('message') or ''}".split())
            return f"placed on {node}, not started yet: {why}"
    return f"placed on {node}, waiting for its kubelet to start it"


def judge(f: Followed) -> tuple[str, object]:
    """The state of a followed pod: ``("nopod", None)``, ``("pending", (node, message))``,
    ``("running", node)``, ``("terminating", deletion time)``, ``("ended", exit code)`` or
    ``("lost", why)``."""
    pod = f.current()
    if pod is None:
        return "nopod", None
    code = exit_code(pod)
    meta = pod.get("metadata") or {}
    if code is not None:
        why = disrupted(pod)
        return ("lost", why) if why else ("ended", code)
    if pod.get("_deleted"):  # gone before it ended (the watch's DELETED, or missing from a new list)
        return "lost", f"its pod {meta.get('name')} was deleted"
    if meta.get("deletionTimestamp"):
        return "terminating", _epoch(meta["deletionTimestamp"])
    node = (pod.get("spec") or {}).get("nodeName")
    if (pod.get("status") or {}).get("phase") == "Running":
        return "running", node
    return "pending", (node, waiting_message(pod))


def judge_safely(f: Followed):
    try:
        return judge(f)
    except (KeyError, TypeError, ValueError):  # a pod object of an unexpected shape: wait for the next
        return "nopod", None


def ended(kind: Kind, obj: dict) -> bool:
    """Whether our Job (any final condition) or Pod (a final phase) has ended."""
    if kind is POD:
        return exit_code(obj) is not None
    final = ("Complete", "SuccessCriteriaMet", "Failed", "FailureTarget")
    return any(c.get("type") in final and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def refusal(name: str, err: KubernetesError) -> Reason:
    """Why the API server would not create our object, as the reason the training pod failed."""
    text = str(err)
    code = RESOURCE_QUOTA if "exceeded quota" in text else LIMIT_RANGE if "LimitRange" in text or "per Container" in text \
        else "create-failed"
    return Reason(code, f"the API server refused to create {name}: {text}", {"status": err.status} if err.status else {})


def _epoch(stamp: str) -> float:
    try:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
    except (TypeError, ValueError):
        return datetime.now(timezone.utc).timestamp()


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Whether ``event`` is set within ``timeout`` seconds (None: no limit). Unlike ``asyncio.wait_for``
    before Python 3.12, a cancellation is never swallowed when the event is set at the same moment (the
    follower or the service would then go on after being told to stop)."""
    if event.is_set():
        return True
    if timeout is None:  # a cancellation reaches a plain wait as it is; no task of its own (one per pod event)
        return await event.wait()
    timed = getattr(asyncio, "timeout", None)  # Python >= 3.11
    if timed is not None:
        # One timer and no task of its own: a follower waiting for the Job controller wakes at each event of
        # its Job and waits again, thousands of times a minute under a burst, and a task plus asyncio.wait
        # each time was a third of a wake's cost (issue 24). asyncio.timeout tells its own expiry from a
        # cancellation from outside (Task.uncancel) and lets the latter through.
        try:
            async with timed(timeout):
                await event.wait()
        except TimeoutError:
            return event.is_set()
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        done, _ = await asyncio.wait({waiter}, timeout=timeout)
    finally:
        waiter.cancel()
    return bool(done)


class Follower:
    """The follow loops of a ``KubernetesBackend``'s training pods: one per pod, woken by the watches."""

    def __init__(self, backend):
        self.backend = backend  # its configuration, controller, calls, ``ours`` and ``evictions``

    def observed(self, f: Followed, phase: str, node: str | None, message: str | None) -> None:
        """Tell the controller what the cluster says of the pod (when that changed)."""
        now = (phase, node, message)
        if f.observed == now:
            return
        f.observed = now
        observe = getattr(self.backend.controller, "pod_observed", None)
        if observe is not None:
            observe(f.uid, phase, node, message)

    async def follow(self, f: Followed, since: float | None) -> None:
        """Until the pod ended (its exit status, at once), was lost (queued again) or we stopped
        following it (a stop, an eviction: those report themselves); the watch wakes us."""
        backend, ours = self.backend, self.backend.ours
        loop = asyncio.get_running_loop()
        outcome = None  # ("ended", code, reason) or ("lost", why)
        checks = 0  # times we asked why its Job has no pod
        while ours.live(f):
            if not ours.pods_listed.is_set():
                await wait_event(ours.pods_listed, 1.0)
                continue
            state, detail = judge_safely(f)
            timeout = None
            if state == "ended":
                outcome = ("ended", detail, None)
                break
            if state == "lost":
                outcome = ("lost", detail)
                break
            if state == "running":
                self.observed(f, "Running", detail, None)
            elif state == "pending":
                node, message = detail
                self.observed(f, "Pending", node, message)
            elif state == "terminating":
                deadline = detail + backend.terminating_timeout_seconds
                pod = f.current()
                if time.time() >= deadline:
                    outcome = ("lost", await self.stuck(f, pod, detail))
                    break
                self.observed(f, "Terminating", (pod.get("spec") or {}).get("nodeName"),
                              f"its pod {pod['metadata']['name']} is terminating (due to end by "
                              f"{time_of_day(detail)})")
                timeout = deadline - time.time() + 0.5
            else:  # no pod yet: the Job controller has not made it (or could not)
                self.observed(f, "Pending", None, "waiting for the Job controller to create its pod")
                waited = None if since is None else loop.time() - since
                if waited is None or waited > backend.create_failure_seconds * (2 ** checks - 1):
                    # Asked after create_failure_seconds, then at doubling intervals (at most a minute
                    # apart): a Job controller behind on a long queue is not polled once per Job and second.
                    checks += 1
                    try:
                        found = await self.why_no_pod(f, waited)
                    except KubernetesError as err:
                        backend.calls.warn("reading %s %s/%s: %s", f.kind.name, f.namespace, f.name, err=err)
                        found = None
                    if found is not None:
                        outcome = found
                        break
                timeout = min(backend.create_failure_seconds * 2 ** max(checks - 1, 0), 60.0)
            f.changed.clear()
            if ours.live(f):
                await wait_event(f.changed, timeout)
        if outcome is None or not ours.live(f):
            return  # stopped, replaced, or being evicted: someone else reports it
        ours.unregister(f)
        k8s_uid, kind = ours.k8s_uids.pop(f.uid, None), ours.kinds.pop(f.uid, None)
        controller = backend.controller
        if outcome[0] == "ended":
            code, reason = outcome[1], outcome[2]
            controller.pod_exited(f.uid, code, reason)
            return
        lost = getattr(controller, "pod_lost", None)
        if lost is None:
            controller.pod_exited(f.uid, KILLED)
            return
        lost(f.uid, outcome[1])
        # Whoever takes the object's kind from ``ours.kinds`` discards what is left of it: here, since forget()
        # (which the controller calls for the lost pod) finds nothing to take now. Left alone, the old
        # Job stayed on the cluster until the work was started again and adopted it.
        if kind is not None:
            await backend.evictions.discard(kind, f.namespace, f.name, k8s_uid)

    async def why_no_pod(self, f: Followed, waited: float | None):
        """A Job without a pod: ended (Complete, or refused by the API server: its FailedCreate events),
        lost (deleted, or failed with its pod gone before we saw it), or None (still waiting)."""
        backend, ours, calls = self.backend, self.backend.ours, self.backend.calls
        obj = ours.watched_job(f) if f.kind is JOB else None
        if obj is None and f.kind is JOB and ours.jobs_listed and waited is not None \
                and waited < backend.create_failure_seconds:
            return None  # only just made: the watch brings it (asking would cost a read per Job)
        if obj is None:
            obj = await calls.call(backend.api.read, f.kind, f.namespace, f.name)
        if obj is None or obj.get("_deleted") or obj["metadata"].get("uid") != f.k8s_uid:
            return ("lost", f"its {f.kind.name} {f.namespace}/{f.name} was deleted")
        if f.kind is POD:
            code = exit_code(obj)
            return None if code is None else ("ended", code, None)
        conditions = {c.get("type") for c in (obj.get("status") or {}).get("conditions") or []
                      if c.get("status") == "True"}
        if conditions & {"Complete", "SuccessCriteriaMet"}:
            return ("ended", 0, None)
        if conditions & {"Failed", "FailureTarget"}:
            pods = await calls.job_pods(f.namespace, f.name, f.k8s_uid)
            codes = [c for c in (exit_code(p) for p in pods) if c is not None]
            if codes:
                return ("ended", codes[-1], None)
            return ("lost", f"the pod of Job {f.namespace}/{f.name} was deleted before it ended")
        status = obj.get("status") or {}
        # No pod yet, and the Job controller has looked at it (a startTime; it writes one even when it
        # could not make the pod): it may be refused (a LimitRange, a ResourceQuota, an invalid spec).
        # Not looked at yet: it is behind, and its events would say nothing (listing them for every Job
        # of a long queue slows the API server, and so the Job controller, further).
        if waited is not None and status.get("startTime") and \
                not (status.get("active") or status.get("succeeded") or status.get("failed")):
            uid = obj["metadata"].get("uid")
            events = await calls.call(backend.api.request, "GET", f"/api/v1/namespaces/{f.namespace}/events",
                                      query={"fieldSelector": f"involvedObject.uid={uid},reason=FailedCreate"})
            for event in events.get("items") or []:
                # e.g. 'Error creating: pods "x" is forbidden: exceeded quota: ...' or '... is invalid: ...'
                message = " ".join((event.get("message") or "").split()).removeprefix("Error creating: ")
                # A quota may free up (the Job controller retries); the rest will not.
                if "exceeded quota" not in message or waited > backend.create_retry_seconds:
                    await calls.delete(f.kind, f.namespace, f.name, 0, f.k8s_uid)
                    return ("ended", 1, refusal(f.name, KubernetesError(message, None)))
        return None

    async def stuck(self, f: Followed, pod: dict, due: float) -> str:
        """A pod of ours deleted under us is still terminating long after its grace period: report it,
        delete it with a zero grace period, and let its work be queued again."""
        calls = self.backend.calls
        meta, node = pod["metadata"], (pod.get("spec") or {}).get("nodeName")
        why = (f"its pod {meta['name']} was stuck terminating on {node or 'no node'} for "
               f"{time.time() - due:.0f} s past its grace period (its kubelet does not answer?); deleted with a "
               "zero grace period")
        self.backend.log.warning("%s/%s: %s; its work is queued again", f.namespace, f.name, why)
        try:
            await calls.delete(POD, f.namespace, meta["name"], 0, meta.get("uid"))
        except KubernetesError as err:
            calls.warn("deleting %s/%s: %s", f.namespace, meta["name"], err=err)
        return why
