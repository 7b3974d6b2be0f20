"""Checks at submission: ResourceQuota, LimitRange and PriorityClass, as the API server makes them."""

from __future__ import annotations

import pytest

from builders import PodDef as P, engine, submit
from hub_ext.quota import parse_limit_range, parse_pod_spec, parse_resource_quota
from hub_ext.quota.priorityclass import PriorityClass
from hub_ext.scheduler.model import Phase

# The first seed's quota, verbatim.
DEV_QUOTA = parse_resource_quota({
    "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "dev-quota", "namespace": "team-alpha"},
    "spec": {"hard": {"requests.cpu": "20", "requests.memory": "100Gi", "limits.cpu": "40",
                      "limits.memory": "200Gi", "requests.nvidia.com/gpu": "4", "pods": "10"}},
})
DEFAULTS = parse_limit_range({
    "apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults", "namespace": "team-alpha"},
    "spec": {"limits": [{"type": "Container", "default": {"cpu": "2", "memory": "4Gi"},
                         "defaultRequest": {"cpu": "1", "memory": "2Gi"},
                         "max": {"cpu": "8", "memory": "32Gi"}, "min": {"cpu": "100m"}}]},
})


def pod(name, requests=None, limits=None, pc=None, ns="team-alpha"):
    raw = {"containers": [{"name": "c", "resources": {"requests": requests or {}, "limits": limits or {}}}]}
    if pc:
        raw["priorityClassName"] = pc
    return ns, name, parse_pod_spec(raw, f"pod {name}")


def alpha(*objects):
    eng = engine(None, {"n1": {"cpu": 64, "memory": "256Gi", "nvidia.com/gpu": 8}})
    for obj in objects:
        (eng.apply_resource_quota if obj.__class__.__name__ == "ResourceQuota" else eng.apply_limit_range)(obj)
    return eng


def test_quota_requires_requests_like_the_api_server():
    eng = alpha(DEV_QUOTA)
    p = eng.submit(*pod("prod-training-job-1", {"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"}, "critical-prod"), 0)
    assert p.phase is Phase.REJECTED and p.reason.code == "resource-quota"
    assert p.reason.message == (
        'pods "prod-training-job-1" is forbidden: failed quota: dev-quota: must specify limits.cpu for: c; '
        "limits.memory for: c; requests.cpu for: c; requests.memory for: c")


def test_limit_range_defaults_satisfy_the_quota():
    eng = alpha(DEV_QUOTA, DEFAULTS)
    p = eng.submit(*pod("job", {"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"}, "critical-prod"), 0)
    assert p.phase is Phase.PENDING
    assert p.requests == {"cpu": 1000, "memory": 2 * 1024**3 * 1000, "nvidia.com/gpu": 1000}
    assert p.limits["cpu"] == 2000
    assert eng.rq_used[("team-alpha", "dev-quota")]["requests.cpu"] == 1000


def test_quota_counts_pending_pods_and_names_the_numbers():
    eng = alpha(DEV_QUOTA, DEFAULTS)
    pods = [eng.submit(*pod(f"p{i}", {"cpu": "6"}, {"cpu": "8"}), i) for i in range(4)]
    assert [p.phase for p in pods] == [Phase.PENDING] * 3 + [Phase.REJECTED]  # nothing scheduled yet
    assert pods[3].reason.message == (
        'pods "p3" is forbidden: exceeded quota: dev-quota, requested: requests.cpu=6, '
        "used: requests.cpu=18, limited: requests.cpu=20")


def test_quota_pod_count_and_release():
    eng = alpha(DEV_QUOTA, DEFAULTS)
    pods = [eng.submit(*pod(f"p{i}"), i) for i in range(11)]
    assert pods[10].phase is Phase.REJECTED and "pods=1" in pods[10].reason.message and "limited: pods=10" in pods[10].reason.message
    eng.schedule(11)
    eng.finish(pods[0].uid, 12)
    assert eng.resubmit(pods[10], 13) and pods[10].phase is Phase.PENDING


def test_gpu_quota_is_enforced():
    eng = alpha(DEV_QUOTA, DEFAULTS)
    ok = eng.submit(*pod("four", {"nvidia.com/gpu": "4"}, {"nvidia.com/gpu": "4"}), 0)
    over = eng.submit(*pod("one-more", {"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"}), 1)
    assert ok.phase is Phase.PENDING and over.phase is Phase.REJECTED
    assert "requests.nvidia.com/gpu=1" in over.reason.message


@pytest.mark.parametrize("requests, limits, message", [
    ({"cpu": "50m"}, {}, "minimum cpu usage per Container is 100m, but request is 50m"),
    ({}, {"cpu": "16"}, "maximum cpu usage per Container is 8, but limit is 16"),
    ({}, {"memory": "64Gi"}, "maximum memory usage per Container is 32Gi, but limit is 64Gi"),
], ids=["below min", "cpu above max", "memory above max"])
def test_limit_range_bounds(requests, limits, message):
    eng = alpha(DEFAULTS)
    p = eng.submit(*pod("x", requests, limits), 0)
    assert p.phase is Phase.REJECTED and p.reason.code == "limit-range"
    assert p.reason.message == f'pods "x" is forbidden: {message}'


def test_limit_range_ratio_and_pod_scope():
    lr = parse_limit_range({"kind": "LimitRange", "metadata": {"name": "r", "namespace": "team-alpha"}, "spec": {"limits": [
        {"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}},
        {"type": "Pod", "max": {"cpu": "3"}}]}})
    eng = alpha(lr)
    ratio = eng.submit(*pod("ratio", {"cpu": "1"}, {"cpu": "4"}), 0)
    assert "cpu max limit to request ratio per Container is 2, but provided ratio is 4.000000" in ratio.reason.message
    big = eng.submit(*pod("big", {"cpu": "2"}, {"cpu": "4"}), 0)
    assert big.phase is Phase.REJECTED


def test_priority_class_scoped_quota():
    scoped = parse_resource_quota({"kind": "ResourceQuota", "metadata": {"name": "prod-only", "namespace": "team-alpha"},
                                   "spec": {"hard": {"pods": "1"}, "scopeSelector": {"matchExpressions": [
                                       {"scopeName": "PriorityClass", "operator": "In", "values": ["critical-prod"]}]}}})
    eng = alpha(scoped)
    assert eng.submit(*pod("c1", pc="critical-prod"), 0).phase is Phase.PENDING
    assert eng.submit(*pod("c2", pc="critical-prod"), 0).phase is Phase.REJECTED
    assert eng.submit(*pod("dev", pc="low-priority-dev"), 0).phase is Phase.PENDING  # not in scope


def test_unknown_priority_class_is_refused():
    eng = alpha()
    p = eng.submit(*pod("x", pc="urgent"), 0)
    assert p.phase is Phase.REJECTED and p.reason.code == "invalid"
    assert p.reason.message == 'pods "x" is forbidden: no PriorityClass with name urgent was found'


def test_global_default_and_user_classes():
    eng = alpha()
    assert eng.submit(*pod("x"), 0).priority_class == "low-priority-dev"
    eng.apply_priority_class(PriorityClass("mine", 7, global_default=True))
    p = eng.submit(*pod("y"), 0)
    assert (p.priority_class, p.priority) == ("mine", 7)


def test_terminating_pods_count_against_quota_until_gone():
    eng = engine(None, {"n1": {"cpu": 4}})
    quota = parse_resource_quota({"kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "x"},
                                  "spec": {"hard": {"pods": "1"}}})
    eng.apply_resource_quota(quota)
    low = submit(eng, P("x/low", 4, pc="low-priority-dev"), 0)
    eng.schedule(0)
    submit(eng, P("y/crit", 4, pc="critical-prod"), 1)
    eng.schedule(1)
    assert low.phase is Phase.TERMINATING
    assert submit(eng, P("x/again", 1), 2).phase is Phase.REJECTED
    eng.complete_eviction(low.uid, 31)
    assert submit(eng, P("x/later", 1), 32).phase is Phase.PENDING


def test_request_above_the_default_limit_is_invalid():
    # The LimitRange's default limit (2 CPU) is below the request: the API server's 422.
    eng = alpha(DEFAULTS)
    p = eng.submit(*pod("big", {"cpu": "4", "memory": "1Gi"}), 0.0)
    assert p.phase is Phase.REJECTED and p.reason.code == "limit-range"
    assert p.reason.message.startswith('Pod "big" is invalid: spec.containers[0].resources.requests: '
                                       'Invalid value: "4": must be less than or equal to cpu limit of 2')
    # with its own limit it is fine
    ok = eng.submit(*pod("ok", {"cpu": "4", "memory": "1Gi"}, {"cpu": "4"}), 0.0)
    assert ok.phase is Phase.PENDING


def test_pods_made_by_others_take_room_and_quota_but_are_never_victims():
    eng = alpha(DEV_QUOTA)
    other = eng.occupy("team-alpha", "by-hand", pod("x", {"cpu": "60", "memory": "1Gi"}, {"cpu": "60", "memory": "1Gi"})[2],
                       "n1", 0.0)
    assert other.phase is Phase.RUNNING and not other.preemptible
    assert eng.cluster.nodes["n1"].free["cpu"] == 4000
    assert eng.rq_used[("team-alpha", "dev-quota")]["requests.cpu"] == 60000  # over the quota: it is there anyway
    # ours is refused by the quota the foreign pod uses up, and nothing is evicted for it
    refused = eng.submit(*pod("ours", {"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}, pc="critical-prod"), 1.0)
    assert refused.phase is Phase.REJECTED and refused.reason.code == "resource-quota"
    eng.remove_resource_quota("team-alpha", "dev-quota")
    waiting = eng.submit(*pod("ours2", {"cpu": "8", "memory": "1Gi"}, {"cpu": "8", "memory": "1Gi"}, pc="critical-prod"), 2.0)
    d = eng.schedule(2.0)
    assert not d.evictions and not d.admitted and waiting.phase is Phase.PENDING
    eng.delete(other.uid)
    assert eng.schedule(3.0).admitted == [waiting]
    # a pod on a node that is not ours still counts in its namespace
    elsewhere = eng.occupy("team-alpha", "far", pod("y", {"cpu": "1"})[2], "not-ours", 4.0)
    assert elsewhere.node is None and eng.quota.leaf_for("team-alpha").used["cpu"] == 9000
    eng.delete(elsewhere.uid)
    assert eng.quota.leaf_for("team-alpha").used["cpu"] == 8000


def test_a_dry_run_copies_pods_made_by_others_where_they_run():
    eng = alpha()
    eng.occupy("team-alpha", "by-hand", pod("x", {"cpu": "60"}, pc="system-node-critical")[2], "n1", 0.0)
    eng.occupy("team-alpha", "far", pod("y", {"cpu": "2"})[2], "not-ours", 0.0)
    copy = eng.replica(None)
    assert sorted((p.name, p.phase, p.node or "") for p in copy.pods.values()) == [
        ("by-hand", Phase.RUNNING, "n1"), ("far", Phase.RUNNING, "")]
    assert copy.cluster.nodes["n1"].free["cpu"] == 4000 and not copy.schedule(1.0)
