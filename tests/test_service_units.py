"""Pure pieces of the hub side: tenants from group properties, submissions, workload names."""

from __future__ import annotations

import pytest

from builders import node, tree
from hub_ext.quota import ValidationError
from hub_ext.service.workloads import check_body
from hub_ext.tenants import check_properties, refusal, tenants_from_groups, tree_with_tenants
from spawner.mixin import _workload_name

TREE = tree(node("root", {"cpu": 8}, {"cpu": 8}, children=[
    node("a", {"cpu": 4}, {"cpu": 8}, ["team-a"]), node("b", {"cpu": 4}, {"cpu": 8})]))


def group(name, users=(), **props):
    return {"name": name, "users": list(users), "properties": {f"tenancy.{k.replace('_', '-')}": v for k, v in props.items()}}


def test_groups_become_tenants_and_bad_properties_are_listed():
    tenants = {t.group: t for t in tenants_from_groups([
        group("team-a", ["alice"], namespace="team-a"),  # leaf found from the tree
        group("team-b", ["bob"], namespace="team-b", quota_leaf="b", role="admin"),
        group("team-x", namespace="team-x", quota_leaf="nope"),
        group("team-y", namespace="team-a", quota_leaf="b"),
        group("team-z", namespace="Bad_Name"),
        {"name": "other", "users": ["carol"], "properties": {"colour": "blue"}},  # not a tenant
    ], TREE, ["low-priority-dev", "high-priority-research", "critical-prod"])}
    assert set(tenants) == {"team-a", "team-b", "team-x", "team-y", "team-z"}
    assert (tenants["team-a"].leaf, tenants["team-a"].errors) == ("a", [])
    assert (tenants["team-b"].leaf, tenants["team-b"].role) == ("b", "admin")
    assert tenants["team-x"].errors == ["property tenancy.quota-leaf: 'nope' is not a node of the quota tree (leaves: a, b)"]
    assert "namespace team-a hangs on quota leaf a, not on b" in tenants["team-y"].errors
    assert "is not a valid namespace name" in tenants["team-z"].errors[0]


def test_the_tree_gets_the_tenants_namespaces_and_skips_leaves_it_lacks():
    tenants = tenants_from_groups([group("team-b", namespace="team-b", quota_leaf="b")], TREE)
    assert tree_with_tenants(TREE, tenants).leaf_of["team-b"].name == "b"
    assert "team-b" not in TREE.leaf_of  # the configured tree is not changed
    smaller = tree(node("root", {"cpu": 8}, {"cpu": 8}, children=[node("a", {"cpu": 4}, {"cpu": 8}, ["team-a"])]))
    assert "team-b" not in tree_with_tenants(smaller, tenants).leaf_of  # no KeyError: it hangs nowhere


CLASSES = ["low-priority-dev", "high-priority-research", "critical-prod"]
TEAMS = tenants_from_groups([group("team-a", namespace="team-a"), group("team-b", namespace="team-b", quota_leaf="b")],
                            TREE, CLASSES)


@pytest.mark.parametrize("name, props, errors", [
    ("team-c", {"tenancy.quota-leaf": "bb"}, ["property tenancy.quota-leaf: 'bb' is not a node of the quota tree (leaves: a, b)"]),
    ("team-b", {"tenancy.quota-leaf": "b", "tenancy.priority-classes": "critcal-prod"},
     ["property tenancy.priority-classes: no PriorityClass named critcal-prod"]),
    ("team-b", {"tenancy.quota-leaf": "b", "tenancy.profiles": "small,hughe"},
     ["property tenancy.profiles: no notebook profile named hughe"]),
    ("team-c", {"tenancy.quota-leaf": "b"}, ["quota leaf b already belongs to group team-b (a group maps 1:1 to a leaf)"]),
    ("team-c", {"tenancy.namespace": "team-b"}, ["namespace team-b already belongs to group team-b"]),
    ("team-c", {"tenancy.quota_leaf": "b"}, ["sets tenancy.quota_leaf but neither tenancy.namespace nor tenancy.quota-leaf, so it is not a team"]),
    ("team-b", {"tenancy.quota-leaf": "b", "tenancy.profiles": "small"}, []),  # its own leaf is no conflict
    ("team-c", {"colour": "blue"}, []),  # not a team, and not trying to be one
], ids=["unknown-leaf", "misspelled-class", "unknown-profile", "leaf-taken", "namespace-taken", "no-team-key",
        "right", "not-a-team"])
def test_a_groups_new_properties_are_checked_against_the_teams_as_they_run(name, props, errors):
    problems = check_properties(name, props, TEAMS, TREE, CLASSES, ["small", "large"])
    assert [e for e, _ in problems] == errors


def test_a_refusal_is_one_line_naming_the_group_the_property_and_the_fix():
    line = refusal("team-b", check_properties("team-b", {"tenancy.quota-leaf": "b", "tenancy.priority-classes": "critcal-prod"},
                                              TEAMS, TREE, CLASSES))
    assert line == ("The properties of group team-b were not saved. Property tenancy.priority-classes: no PriorityClass "
                    "named critcal-prod. List only existing classes in tenancy.priority-classes (critical-prod, "
                    "high-priority-research, low-priority-dev).")
    taken = refusal("team-c", check_properties("team-c", {"tenancy.quota-leaf": "b"}, TEAMS, TREE))
    assert "\n" not in taken and "(a group maps 1:1 to a leaf). Point tenancy.quota-leaf at a leaf no other" in taken


@pytest.mark.parametrize("body, message", [
    ({"kind": "batch"}, "kind must be notebook or training"),
    ({"command": ["python", "x\x00"]}, "must not contain NUL"),
    ({"command": ["true"], "env": {"A": "x\x00"}}, "env must not contain NUL"),
    ({"command": ["true"], "script": "print(1)"}, "exactly one of command"),
    ({"command": ["true"], "replicas": 0}, "replicas: 0 must be at least 1"),
    ({"command": ["true"], "resources": {"requests": {"cpu": "lots"}}}, "'lots' is not a quantity"),
    ({"command": ["true"], "colour": "blue"}, "unknown field 'colour'"),
    ({"kind": "notebook", "replicas": 2}, "a notebook has exactly one replica"),
], ids=["kind", "nul-command", "nul-env", "command-and-script", "replicas", "quantity", "unknown-field", "notebook-replicas"])
def test_bad_submissions_name_the_field(body, message):
    with pytest.raises(ValidationError, match=message):
        check_body(body)


@pytest.mark.parametrize("user, server, name", [
    ("alice", "", "nb-alice"), ("j.doe@example.org", "", "nb-j-doe-example-org"),
    ("Bob_Smith", "gpu box", "nb-bob-smith-gpu-box"), ("x" * 60, "", "nb-" + "x" * 37),
])
def test_workload_names_are_dns_labels_for_any_username(user, server, name):
    assert _workload_name(user, server) == name
    check_body({"kind": "notebook", "name": name})  # accepted by the service


def test_pods_made_by_others_are_followed_from_watch_events(tmp_path):
    """The Kubernetes backend's handling of the pod watch (the events as the API server sends
    them), against a real controller and engine; the watch itself runs in tests/k8s."""
    from hub_ext.backends.kubernetes.backend import KubernetesBackend
    from hub_ext.backends.local import LocalBackend
    from hub_ext.service.controller import Controller
    from hub_ext.service.store import Store

    controller = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), tree=TREE, backend=LocalBackend(
        nodes_config=[{"name": "n1", "allocatable": {"cpu": "8", "memory": "8Gi"}}], data_dir=str(tmp_path)))
    k8s = KubernetesBackend(api_client=object())  # no API call is made here
    k8s.controller = controller

    def pod(uid, cpu, node="n1", phase="Running", ns="team-a"):
        return {"metadata": {"uid": uid, "name": f"p-{uid}", "namespace": ns},
                "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
                "status": {"phase": phase}}

    def used():
        return controller.engine.quota.nodes["a"].used.get("cpu", 0), controller.engine.cluster.nodes["n1"].free["cpu"]

    k8s.foreign.event("LIST", [pod("u1", "2"), pod("u2", "1", node=None, phase="Pending")])
    assert used() == (2000, 6000)  # the unbound one holds no room yet
    k8s.foreign.event("MODIFIED", pod("u2", "1"))  # bound
    k8s.foreign.event("MODIFIED", pod("u1", "3"))  # resized in place
    assert used() == (4000, 4000) and len(controller.foreign) == 2
    k8s.foreign.event("MODIFIED", pod("u1", "3", phase="Succeeded"))  # ended: its room is free
    k8s.foreign.event("ADDED", pod("u3", "1", ns="not-a-tenant", node="elsewhere"))  # neither our node nor namespace
    assert used() == (1000, 7000) and len(controller.foreign) == 1
    k8s.foreign.event("LIST", [])  # a fresh list: what is not in it is gone
    assert used() == (0, 8000) and not controller.foreign


def test_the_collector_is_tuned_and_what_lives_at_start_is_frozen():
    import gc

    from hub_ext.service.heap import freeze_startup, tune

    before = gc.get_threshold()
    try:
        tune([20000, 20, 20])
        assert gc.get_threshold() == (20000, 20, 20)
        assert gc.get_freeze_count() == 0
        kept = [[] for _ in range(1000)]  # containers: tracked by the collector
        freeze_startup()
        assert gc.get_freeze_count() >= len(kept)
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def test_node_events_change_capacity_at_once_and_heartbeats_change_nothing(tmp_path):
    """The node watch's events as the API server sends them, against a real controller and engine:
    a node's size, cordon, taint and Ready status count at once; a heartbeat (only the conditions'
    times change) changes nothing; with no usable node left, the health says so."""
    from hub_ext.backends.kubernetes.backend import KubernetesBackend
    from hub_ext.backends.local import LocalBackend
    from hub_ext.service.controller import Controller
    from hub_ext.service.store import Store

    controller = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), tree=TREE, backend=LocalBackend(
        nodes_config=[{"name": "local", "allocatable": {"cpu": "1"}}], data_dir=str(tmp_path)))
    k8s = KubernetesBackend(api_client=object())  # no API call is made here
    k8s.controller = controller

    def node(name, cpu="4", ready="True", beat="00", unschedulable=None, taints=None):
        return {"metadata": {"name": name, "labels": {"pool": "a"}},
                "spec": {**({"unschedulable": unschedulable} if unschedulable else {}),
                         **({"taints": taints} if taints else {})},
                "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                           "conditions": [{"type": "Ready", "status": ready,
                                           "lastHeartbeatTime": f"2026-12-02T00:00:{beat}Z"}]}}

    def capacity():
        nodes = controller.engine.cluster.nodes
        return {name: (n.allocatable.get("cpu"), n.schedulable) for name, n in sorted(nodes.items()) if name != "local"}

    k8s.cluster_nodes.event("LIST", [node("n1"), node("n2", ready="False")])
    assert capacity() == {"n1": (4000, True)}  # n2 is not Ready: not counted yet
    assert "nodes" not in controller.health.problems
    k8s.cluster_nodes.event("MODIFIED", node("n2", beat="10"))  # Ready now
    assert capacity() == {"n1": (4000, True), "n2": (4000, True)}
    k8s.cluster_nodes.event("MODIFIED", node("n1", beat="10"))  # a heartbeat
    assert capacity() == {"n1": (4000, True), "n2": (4000, True)}
    k8s.cluster_nodes.event("MODIFIED", node("n1", cpu="6", beat="20"))  # resized
    assert capacity() == {"n1": (6000, True), "n2": (4000, True)}
    k8s.cluster_nodes.event("MODIFIED", node("n1", cpu="6", beat="30", unschedulable=True))  # cordoned
    assert capacity() == {"n1": (6000, False), "n2": (4000, True)}
    k8s.cluster_nodes.event("MODIFIED", node("n1", cpu="6", beat="40"))  # uncordoned
    k8s.cluster_nodes.event("MODIFIED", node("n2", beat="40", taints=[{"key": "gpu", "effect": "NoSchedule"}]))
    assert capacity() == {"n1": (6000, True), "n2": (4000, False)}
    k8s.cluster_nodes.event("MODIFIED", node("n2", beat="50", taints=[{"key": "gpu", "effect": "NoSchedule"}]))
    assert capacity() == {"n1": (6000, True), "n2": (4000, False)}  # still tainted after its heartbeat
    k8s.cluster_nodes.event("MODIFIED", node("n1", cpu="6", ready="Unknown", beat="50"))  # its kubelet is gone
    assert capacity() == {"n1": (6000, False), "n2": (4000, False)}
    assert "no Ready, schedulable Node" in controller.health.problems["nodes"].message
    k8s.cluster_nodes.event("DELETED", node("n1"))
    k8s.cluster_nodes.event("MODIFIED", node("n2", beat="59"))  # untainted
    assert capacity() == {"n2": (4000, True)}
    assert "nodes" not in controller.health.problems


def test_a_team_keeps_its_last_good_properties_while_new_ones_are_wrong_and_admins_are_told(tmp_path):
    from hub_ext.backends.local import LocalBackend
    from hub_ext.service.controller import Controller, Identity
    from hub_ext.service.store import Store

    classes = ["low-priority-dev", "high-priority-research", "critical-prod"]
    c = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), tree=TREE, backend=LocalBackend(
        nodes_config=[{"name": "n1", "allocatable": {"cpu": "8"}}], data_dir=str(tmp_path / "data")))
    c.set_tenants(tenants_from_groups([group("team-a", ["carol"], namespace="team-a", priority_classes="critical-prod")],
                                      TREE, classes))
    assert "group-properties" not in c.health.problems
    # An admin misspells the class in the hub's admin panel; dan joins meanwhile.
    c.set_tenants(tenants_from_groups([group("team-a", ["carol", "dan"], namespace="team-a",
                                             priority_classes="critcal-prod"),
                                       group("team-x", namespace="team-x", quota_leaf="nope")], TREE, classes))
    team = next(t for t in c.tenants if t.group == "team-a")
    assert team.usable and team.priority_classes == ["critical-prod"] and team.members == ["carol", "dan"]
    data = team.to_dict()
    assert data["keptLastGood"] and data["rejected"] == ["property tenancy.priority-classes: no PriorityClass named "
                                                         "critcal-prod"]
    assert data["rejectedFixes"][0].startswith("In the hub's admin panel (Groups, team-a), list only existing classes")
    problem = c.health.problems["group-properties"]
    assert not problem.blocking and c.health.status == "degraded"
    assert problem.message.startswith(
        "group team-a: property tenancy.priority-classes: no PriorityClass named critcal-prod; its members keep "
        "its last good properties until this is fixed. In the hub's admin panel (Groups, team-a), list only existing "
        "classes in tenancy.priority-classes (critical-prod, high-priority-research, low-priority-dev).")
    assert "group team-x cannot be used: property tenancy.quota-leaf: 'nope' is not a node" in problem.message
    dan = Identity(name="dan", tenants=[t for t in c.tenants if "dan" in t.members])
    row = c.submit(dan, {"command": ["true"], "priorityClassName": "critical-prod"})  # members keep working
    assert row.namespace == "team-a"
    c.set_tenants(tenants_from_groups([group("team-a", ["carol", "dan"], namespace="team-a",
                                             priority_classes="critical-prod")], TREE, classes))
    assert "group-properties" not in c.health.problems
    assert not next(t for t in c.tenants if t.group == "team-a").to_dict()["keptLastGood"]
    # A restart after the typo: the store kept the last good properties.
    again = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), tree=TREE, backend=LocalBackend(
        nodes_config=[{"name": "n1", "allocatable": {"cpu": "8"}}], data_dir=str(tmp_path / "data")))
    again.set_tenants(tenants_from_groups([group("team-a", ["carol"], namespace="team-a", priority_classes="critcal-prod")],
                                          TREE, classes))
    [team] = again.tenants
    assert team.usable and team.priority_classes == ["critical-prod"] and team.rejected and team.members == ["carol"]


@pytest.mark.asyncio
async def test_a_dry_run_names_whose_work_a_job_would_stop_and_the_lower_priority_that_waits_instead(tmp_path):
    # on a running loop, as in the service: a tick hands work to the backend as tasks
    from hub_ext.backends.local import LocalBackend
    from hub_ext.service.controller import Controller, Identity
    from hub_ext.service.store import Store

    c = Controller(store=Store(f"sqlite:///{tmp_path}/t.sqlite"), tree=TREE, backend=LocalBackend(
        nodes_config=[{"name": "n1", "allocatable": {"cpu": "16", "memory": "64Gi"}}], data_dir=str(tmp_path / "data")))
    c.set_tenants(tenants_from_groups([group("team-a", ["alice", "carol"], namespace="team-a")], TREE,
                                      ["low-priority-dev", "high-priority-research", "critical-prod"]))
    alice, carol = (Identity(name=n, tenants=list(c.tenants)) for n in ("alice", "carol"))
    c.submit(carol.as_spawner(), {"kind": "notebook", "profile": "large", "resources": {"requests": {"cpu": "4"}}})
    c.submit(alice, {"command": ["sleep", "60"], "resources": {"requests": {"cpu": "4"}}})
    c.tick()  # team-a at its max of 8
    job = {"command": ["sleep", "60"], "name": "big", "resources": {"requests": {"cpu": "4"}}}
    dry = c.preview_submit(alice, job)
    [victim] = dry["evictions"]
    assert (victim["who"], victim["user"], victim["kind"]) == ("carol's notebook (Large)", "carol", "notebook")
    assert dry["lowerPriority"] == {"priorityClassName": "low-priority-dev", "state": "Pending", "reason": "quota-max",
                                    "message": "quota a is at its max for cpu: needs 4, uses 8 of 8",
                                    "position": 1, "leafPosition": 1}
    assert c.preview_submit(alice, {**job, "priorityClassName": "low-priority-dev"})["lowerPriority"] is None
    assert len(c.rows) == 2  # nothing stored


class _Service:
    """The service's answers a client reads (the dry run's shape from the test above); records submissions."""

    def __init__(self, dry):
        self.dry, self.submitted = dry, []

    def dry_run(self, **body):
        return self.dry if body.get("priorityClassName") != "low-priority-dev" else {"evictions": []}

    def submit(self, **body):
        self.submitted.append(body)
        return {"id": "j1", "name": "big", "state": "Pending", **body}

    def me(self):
        return {"name": "alice"}


DRY = {"evictions": [
    {"kind": "notebook", "name": "nb-alice", "user": "alice", "serverName": "", "who": "alice's notebook (Small)"},
    {"kind": "notebook", "name": "nb-carol", "user": "carol", "serverName": "", "who": "carol's notebook (Large)"},
    {"kind": "training", "name": "train-1", "user": "bob", "who": "bob's job train-1"},
    {"kind": "training", "name": "train-1", "user": "bob", "who": "bob's job train-1"}],  # a gang: one job
    "lowerPriority": {"priorityClassName": "low-priority-dev", "state": "Pending", "reason": "quota-max",
                      "message": "quota a is at its max for cpu: needs 4, uses 8 of 8", "position": 2,
                      "leafPosition": 1}}


def test_a_job_that_would_stop_anybodys_work_says_whose_and_offers_the_lower_priority(monkeypatch):
    from hub_ext.client.api import TenancyError, submit_training

    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    service = _Service(DRY)
    with pytest.raises(TenancyError) as err:
        submit_training(["sleep", "60"], cpu=4, client=service, show=False)
    assert str(err.value) == (
        "This job would stop your default server (nb-alice) and carol's notebook (Large) and bob's job train-1 to "
        "make room, and unsaved work there would be lost. Submit it again with --yes (yes=True in Python) to go "
        "ahead anyway, or with --wait-instead (wait_instead=True) to submit it at low-priority-dev, where it stops "
        "nobody and it would wait (position 2 in the queue): quota a is at its max for cpu: needs 4, uses 8 of 8.")
    assert service.submitted == []
    submit_training(["sleep", "60"], cpu=4, client=service, show=False, wait_instead=True)
    assert service.submitted[-1]["priorityClassName"] == "low-priority-dev"
    asked = []
    submit_training(["sleep", "60"], cpu=4, client=service, show=False,
                    ask=lambda whose, lower: asked.append((whose, lower["priorityClassName"])) or "yes")
    assert service.submitted[-1]["priorityClassName"] is None and asked[0][1] == "low-priority-dev"
    with pytest.raises(TenancyError, match="Not submitted: nobody's work was stopped."):
        submit_training(["sleep", "60"], cpu=4, client=service, show=False, ask=lambda whose, lower: "no")
    assert len(service.submitted) == 2


def test_tenancy_submit_asks_at_a_terminal(monkeypatch, capsys):
    from hub_ext.cli import _ask_before_stopping

    monkeypatch.setattr("builtins.input", lambda prompt: print(prompt, end="") or "w")
    assert _ask_before_stopping("carol's notebook (Large)", DRY["lowerPriority"]) == "lower"
    seen = capsys.readouterr()
    assert seen.err == "This job would stop carol's notebook (Large) to make room, and unsaved work there would be lost.\n"
    assert seen.out == ("[y] go ahead, [w] submit at low-priority-dev instead (it stops nobody and would wait, "
                        "position 2 in the queue), [n] do not submit: ")
    monkeypatch.setattr("builtins.input", lambda prompt: "w")
    assert _ask_before_stopping("carol's notebook (Large)", None) == "no"  # nothing lower to wait at
