"""What the backends report, acted on: a pod ended, an eviction is done, a pod was lost or is seen
somewhere, nodes came, changed or went, pods we did not create run on the cluster.

Each report changes the engine and the rows at once and asks the loop for a pass
over the workloads it concerns. Backends call these through the controller
(``controller.pod_exited(...)``); calls between them go through it too, so that a
controller that holds some back (a replay's) sees them all.
"""

from __future__ import annotations

from ..planning.history import record_nodes
from ..quota.quantity import format_list
from ..scheduler.model import Phase, Reason
from .workloads import NOTEBOOK


class Reports:
    def __init__(self, controller):
        self.c = controller
        # The controller's containers, never replaced: read here without a hop through it.
        self.engine, self.store, self.books = controller.engine, controller.store, controller.books
        self.rows, self.owners, self.pod_rows = controller.rows, controller.owners, controller.pod_rows

    def pod_exited(self, uid: int, code: int, reason: Reason | None = None) -> None:
        """A started pod ended with ``code``; ``reason`` says why when the backend knows better than
        an exit status (the API server refused to create it, say)."""
        c = self.c
        c.observed.pop(uid, None)
        pod = self.engine.pods.get(uid)
        if pod is None:
            return
        if pod.phase is Phase.TERMINATING:
            c.eviction_done(uid)
            return
        if pod.phase is not Phase.RUNNING:
            return
        now = c.clock()
        prow = self.pod_rows.get(uid)
        row = self.rows.get(prow.workload_id) if prow else None
        if code == 0:
            self.engine.finish(uid, now)
            owner = self.owners.get(row.id) if row else None
            if owner is not None:
                owner.on_finished(pod)
                row.succeeded = owner.succeeded
            if row:
                self.store.record(now, "succeeded", f"{pod.name} finished", row.id)
        else:
            reason = reason or Reason("failed", f"{pod.name} exited with status {code}", {"exitCode": code})
            self.engine.fail(uid, now, reason)
            if row:
                self.store.record(now, "failed", reason.message, row.id, reason.details or None)
                self.books.finish_failed(row, now)
        self.books.sync_pod(pod)
        self.store.commit()
        c.loop.poke([row.id] if row else [])

    def eviction_done(self, uid: int) -> None:
        """An evicted pod is gone: what waited for its room starts; an evicted notebook ends Preempted."""
        c = self.c
        c.observed.pop(uid, None)
        pod = self.engine.pods.get(uid)
        if pod is None or pod.phase is not Phase.TERMINATING:
            return
        now = c.clock()
        started = self.engine.complete_eviction(uid, now)
        self.books.sync_pod(pod)
        loop = c.loop
        for p in started:
            loop.start(p, now)
            loop.changed.add(self.books.wid(p))
        prow = self.books.forget_pod(uid)
        self.engine.delete(uid)  # evicted: its row keeps the story; a Job's owner makes a new pod
        row = self.rows.get(prow.workload_id) if prow else None
        if row is not None and row.kind == NOTEBOOK:
            c.evicting.pop(row.id, None)
            self.books.sync(row)
            row.state, row.finished = "Preempted", now
            self.rows.pop(row.id, None)
            self.owners.pop(row.id, None)
        self.store.commit()
        if row is not None:
            c.viewer.notify([row.id])
        loop.poke([row.id] if row is not None else [])

    def warn_eviction(self, wid: str, deadline: float, message: str) -> None:
        """A backend's own warning window for an evicted notebook: its server stops at ``deadline``."""
        self.c.evicting.setdefault(wid, {}).update(deadline=deadline, message=message)

    def pod_lost(self, uid: int, why: str) -> None:
        """A started pod was lost, not failed by its program (its node went, it was deleted under us,
        it was stuck terminating): it is queued again in its old place, as a restart does for pods
        killed while the service was away. A gang goes back whole; its members elsewhere stop."""
        pod = self.engine.pods.get(uid)
        if pod is None:
            return
        if pod.phase is Phase.TERMINATING:
            self.c.eviction_done(uid)
            return
        requeued = self.engine.requeue(uid)
        self.requeued(requeued, lost={uid}, stop={p.uid for p in requeued if p.uid != uid}, why=why)

    def requeued(self, pods, *, lost: set, stop: set, why: str) -> None:
        """Book pods the engine queued again: the lost ones' objects go (never adopted), members of their
        gangs still running elsewhere are stopped; each workload's history says why."""
        c = self.c
        now, touched = c.clock(), set()
        for pod in pods:
            c.observed.pop(pod.uid, None)
            prow = self.pod_rows.get(pod.uid)
            row = self.rows.get(prow.workload_id) if prow else None
            if row is None:
                continue
            if pod.uid in lost:
                c._spawn(c.backend.forget(row, pod, prow))
                self.store.record(now, "requeued", f"{pod.name} was lost ({why}); it is queued again in its place",
                                  row.id)
            elif pod.uid in stop:
                c._spawn(c.backend.stop(row, pod, prow))
                self.store.record(now, "requeued", f"{pod.name} is stopped: its gang is queued again whole ({why})",
                                  row.id)
            self.books.sync_pod(pod)
            touched.add(row.id)
        for wid in touched:
            self.books.sync(self.rows[wid])
        self.store.commit()
        c.viewer.notify(touched)
        c.loop.poke(touched)

    def pod_observed(self, uid: int, phase: str, node: str | None, message: str | None, notify: bool = True) -> None:
        """What the cluster says of a started pod: ``Running`` on ``node``, or ``Pending`` (waiting for
        kube-scheduler or its kubelet) or ``Terminating`` with the cluster's message. Only this is
        shown as Running; the pod is counted on the node where the cluster put it. ``notify=False``:
        the listeners are told by the caller (a scheduling pass tells them of all it admitted, once)."""
        c = self.c
        pod = self.engine.pods.get(uid)
        if pod is None or pod.phase is not Phase.RUNNING:
            c.observed.pop(uid, None)
            return
        if node:
            for moved in self.engine.placed(uid, node):
                self.books.sync_pod(moved)
        c.observed[uid] = (phase, node, message)
        prow = self.pod_rows.get(uid)
        if prow is not None and notify:
            c.viewer.notify([prow.workload_id])

    # -- nodes ------------------------------------------------------------------------
    def add_nodes(self, nodes) -> None:
        """Nodes that joined the cluster: their capacity is shared out from now on."""
        for node in nodes:
            self.engine.add_node(node.name, node.allocatable, node.labels)
            self.c.log.info("node %s joined", node.name)
        if nodes:
            record_nodes(self.store, self.engine, self.c.clock(), f"node {', '.join(n.name for n in nodes)} joined")
            self.c.loop.poke([])  # only the queue: no workload of ours changed

    def node_changed(self, node, schedulable: bool = True) -> None:
        """A node was resized, relabelled, cordoned, not Ready (``schedulable=False``) or is back: the
        engine's capacity changes at once; pods nominated on a node that takes no new ones wait again."""
        c = self.c
        known = self.engine.cluster.nodes.get(node.name)
        if known is None:
            return
        was = known.schedulable
        requeued = self.engine.update_node(node.name, node.allocatable, node.labels, schedulable=schedulable)
        if was != schedulable:
            c.log.warning("node %s %s", node.name, "takes pods again" if schedulable else
                          "is cordoned, not Ready or tainted: its pods stay, no new ones go there")
        else:
            c.log.info("node %s changed: allocatable %s", node.name, format_list(known.allocatable))
        self.requeued(requeued, lost=set(), stop=set(), why=f"node {node.name} takes no new pods")
        record_nodes(self.store, self.engine, c.clock(), f"node {node.name} changed")
        c.loop.poke()

    def node_removed(self, name: str) -> None:
        """A node was deleted from the cluster: its capacity goes at once, the work that ran there is
        lost and queued again in its old place (not failed), victims terminating there are gone."""
        c = self.c
        node = self.engine.cluster.nodes.get(name)
        if node is None:
            return
        for pod in [p for p in node.residents.values() if p.phase is Phase.TERMINATING]:
            c.eviction_done(pod.uid)  # the victim went with its node
        now = c.clock()
        change = self.engine.remove_node(name, now)
        for pod in change.started:
            c.loop.start(pod, now)
        self.requeued(change.requeued, lost={p.uid for p in change.lost}, stop={p.uid for p in change.stopped},
                      why=f"its node {name} was deleted")
        c.log.warning("node %s is gone: %d pod(s) that ran there are queued again", name, len(change.lost))
        record_nodes(self.store, self.engine, now, f"node {name} is gone")
        c.loop.poke()

    # -- pods we did not create -------------------------------------------------------
    def observe_foreign(self, key: str, namespace: str, name: str, spec, node: str | None) -> None:
        """A pod on the cluster that no workload of ours made (another controller, ``kubectl``): its
        requests count as its namespace's usage while it runs. ``key`` is its cluster uid."""
        c = self.c
        if key in c.foreign:
            return
        pod = self.engine.occupy(namespace, name, spec, node, c.clock(), owner=("Foreign", name))
        c.foreign[key] = pod.uid
        c.loop.poke([])  # only the queue: no workload of ours changed

    def forget_foreign(self, key: str) -> None:
        uid = self.c.foreign.pop(key, None)
        if uid is not None:
            self.engine.delete(uid)
            self.c.loop.poke([])  # only the queue: no workload of ours changed
