"""The cluster benchmark's stage figures and timeline (pure), and its per-core sampler (/proc/stat)."""

from __future__ import annotations

import os
import re
import time

import pytest

from hub_ext.bench import stages
from hub_ext.bench.cpu import CoreSampler

CHAIN = ("create sent", "Job created", "pod created", "Running")


def test_each_stage_is_the_wait_from_the_one_before_over_the_pods_that_reached_both():
    moments = {f"ns/p{i}": {"create sent": 100.0, "Job created": 100.0 + 0.01 * (i + 1),
                            "pod created": 100.5 + 0.01 * (i + 1), "Running": 102.0} for i in range(10)}
    del moments["ns/p9"]["pod created"]  # a pod the watch missed: not counted where that moment is needed
    figures = stages.stage_figures(moments, CHAIN)
    assert list(figures) == ["Job created", "pod created", "Running"]
    assert figures["Job created"] == {"from": "create sent", "pods": 10, "p50_ms": 60.0, "p95_ms": 100.0, "max_ms": 100.0}
    assert figures["pod created"]["pods"] == figures["Running"]["pods"] == 9
    assert figures["pod created"]["p50_ms"] == 500.0
    assert figures["Running"]["max_ms"] == pytest.approx(1490.0)
    assert stages.stage_figures({}, CHAIN)["Running"] == {"from": "pod created", "pods": 0}


def test_the_timeline_counts_pods_per_second_and_puts_each_core_sample_in_its_second():
    moments = {"a": {"create sent": 10.1, "Running": 12.2}, "b": {"create sent": 10.9, "Running": 13.0},
               "c": {"create sent": 11.5}}
    cores = [(11.0, {"cpu0": 0.5, "cpu1": 1.0}), (12.02, {"cpu0": 0.25, "cpu1": 0.0}), (20.0, {"cpu0": 0.1})]
    rows = stages.timeline(moments, ("create sent", "Running"), start=10.0, cores=cores)
    assert [r["t"] for r in rows] == [0, 1, 2, 3]  # to the last pod's last moment, not the last sample
    assert [r["entered"] for r in rows] == [{"create sent": 2}, {"create sent": 1}, {"Running": 1}, {"Running": 1}]
    assert rows[0]["cores"] == {"cpu0": 0.5, "cpu1": 1.0} and rows[1]["cores"] == {"cpu0": 0.25, "cpu1": 0.0}
    assert rows[2]["cores"] == {}
    text = "\n".join(stages.lines("plain", {"stages": stages.stage_figures(moments, ("create sent", "Running")),
                                            "timeline": rows}))
    assert "create sent -> Running" in text and "2100.0" in text  # a's and b's waits, 2.1 s each
    assert "busy %" in text and "cpu1" in text


def test_figures_add_the_reply_to_the_timeline_only_when_it_was_recorded():
    moments = {"a": {"submitted": 1.0, "answered": 1.2, "admitted": 1.1}}
    out = stages.figures(moments, ("submitted", "admitted"), start=1.0)
    assert out["timeline"][0]["entered"] == {"submitted": 1, "admitted": 1, "answered": 1}
    assert "answered" not in out["stages"]


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="no /proc/stat here")
def test_the_core_sampler_reads_each_core_each_interval():
    sampler = CoreSampler(interval=0.05).start()
    deadline = time.monotonic() + 10
    while len(sampler.samples) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    samples = sampler.stop()
    assert len(samples) >= 3
    ends = [t for t, _ in samples]
    assert ends == sorted(ends)
    for _, busy in samples:
        assert len(busy) == len(os.sched_getaffinity(0)) or len(busy) >= 1
        assert all(0.0 <= v <= 1.0 for v in busy.values()), busy


def _cluster_bench(name: str = "cluster_bench"):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity here")
def test_pin_takes_two_sets_of_this_machines_cores_and_names_what_is_wrong():
    import argparse

    bench = _cluster_bench()
    usable = sorted(os.sched_getaffinity(0))
    first, last = usable[0], usable[-1]
    assert bench.pin(f"{first}:{last}") == ({first}, {last})
    assert bench.cpu_list("0-2,5") == {0, 1, 2, 5}
    for text, message in (("0", "give two sets of cores"), ("a:0", "control plane's cores: 'a' is not a core"),
                          (f"{first}:3-1", "rest's cores: '3-1' is a range that ends before it starts"),
                          (f"{first}:{last + 1}", f"rest's cores [{last + 1}] are not among this machine's usable")):
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(message)):
            bench.pin(text)


METRICS_BEFORE = """# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",group="batch",resource="jobs",scope="resource",subresource="",verb="POST",version="v1"} 10
apiserver_request_total{code="200",component="apiserver",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 4
# TYPE apiserver_watch_events_total counter
apiserver_watch_events_total{group="",resource="pods",version="v1"} 100
# TYPE apiserver_watch_events_sizes histogram
apiserver_watch_events_sizes_bucket{group="",resource="pods",version="v1",le="+Inf"} 100
apiserver_watch_events_sizes_sum{group="",resource="pods",version="v1"} 250000
apiserver_watch_events_sizes_count{group="",resource="pods",version="v1"} 100
"""


def test_what_a_side_asked_of_the_api_server_is_the_difference_of_its_counters():
    from hub_ext.bench import apiserver

    after = METRICS_BEFORE.replace("} 10\n", "} 110\n").replace('version="v1"} 100\n# TYPE', 'version="v1"} 400\n# TYPE') \
        .replace("} 250000", "} 1000000") + \
        'apiserver_request_total{code="201",component="apiserver",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 100\n'
    asked = apiserver.difference(apiserver.parse(METRICS_BEFORE), apiserver.parse(after))
    assert asked == {"requests": {"POST jobs": 100, "POST pods/binding": 100},  # PATCH pods/status: unchanged
                     "watch_events": {"pods": 300}, "watch_bytes": {"pods": 750000}}
    assert apiserver.line(asked) == ("    API server: 200 requests (POST jobs 100, POST pods/binding 100); 300 watch "
                                     "events, 0.8 MB (pods 300 (0.8 MB))")
    assert apiserver.difference(None, apiserver.parse(after)) == {} and apiserver.line({}) is None


class _Answer:
    def __init__(self, status: int, data: bytes):
        self.status, self.data = status, data

    def read(self) -> bytes:
        return self.data


class _ProfilingServer:
    """An ApiClient whose API server answers ``/debug/pprof/profile`` with ``answer`` (or raises it)."""

    def __init__(self, answer):
        self.answer, self.asked = answer, []

    def param_serialize(self, **request):
        return (request["resource_path"], request["query_params"])

    def call_api(self, path, query, _request_timeout=None):
        self.asked.append((path, query, _request_timeout))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_the_api_servers_profile_of_a_side_is_written_or_one_line_says_why_not(tmp_path):
    from hub_ext.bench import apiserver

    server = _ProfilingServer(_Answer(200, b"pprof bytes"))
    path = tmp_path / "p-200-r0-service.pprof"
    assert apiserver.Profile(server, 7.6, str(path)).start().stop() == {"path": str(path), "seconds": 7}
    assert path.read_bytes() == b"pprof bytes" and server.asked == [("/debug/pprof/profile", [("seconds", 7)], 37)]

    refused = apiserver.Profile(_ProfilingServer(_Answer(404, b"not found")), 5, str(tmp_path / "x")).start().stop()
    assert refused == {"problem": "kube-apiserver did not give a CPU profile (404; is it started with "
                                  "--profiling=true, and is this an admin's kubeconfig?)"}
    failed = apiserver.Profile(_ProfilingServer(OSError("connection\n refused")), 5, str(tmp_path / "y")).start().stop()
    assert failed == {"problem": "kube-apiserver's CPU profile failed: connection refused"}
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
    assert apiserver.profile_line({"apiserver_profile": {"path": str(path), "seconds": 7}}) == \
        f"    kube-apiserver's CPU profile: {path} (its first 7 s; tools/bench/pprof_shares.py reads it)"
    assert apiserver.profile_line({"apiserver_profile": refused}) == \
        f"    kube-apiserver's CPU profile: none ({refused['problem']})"
    assert apiserver.profile_line({}) is None


TRACES = """File: kube-apiserver
Type: cpu
-----------+-------------------------------------------------------
      30ms   encoding/json.appendCompact
             k8s.io/apimachinery/pkg/runtime/serializer/json.(*Serializer).doEncode
             k8s.io/apiserver/pkg/endpoints/handlers.(*WatchServer).HandleHTTP
             k8s.io/apiserver/pkg/endpoints/filters.withAuthentication.func1
-----------+-------------------------------------------------------
     0.05s   runtime.mallocgc
             sigs.k8s.io/structured-merge-diff/v6/typed.handleAtom
             k8s.io/apimachinery/pkg/util/managedfields/internal.(*FieldManager).Update
             k8s.io/apiserver/pkg/storage/etcd3.(*store).GuaranteedUpdate
             k8s.io/apiserver/pkg/endpoints/filters.withAuthentication.func1
-----------+-------------------------------------------------------
      20ms   crypto/internal/fips140/nistec.p256PointDoubleAsm
             crypto/x509.(*Certificate).Verify
             k8s.io/apiserver/pkg/endpoints/filters.withAuthentication.func1
-----------+-------------------------------------------------------
      10ms   runtime.futex
             runtime.mcall
"""


def test_each_profile_sample_goes_to_the_category_its_nearest_frame_names():
    pprof_shares = _cluster_bench("pprof_shares")
    total, by = pprof_shares.shares(TRACES)
    assert round(total, 3) == 0.11
    # the filter every request passes through (authentication) names none of them: the nearer frame does
    assert {k: round(v, 3) for k, v in by.items()} == {
        "watch: serving events: JSON encode": 0.03, "managedFields (field manager)": 0.05,
        "authentication (client certificates)": 0.02, "other": 0.01}


def test_the_backends_stage_log_is_off_by_default_and_writes_a_line_per_create(tmp_path):
    import asyncio
    import json

    from hub_ext.backends.kubernetes.api import JOB
    from hub_ext.backends.kubernetes.backend import KubernetesBackend

    assert KubernetesBackend(api_client=object(), quota_tree_object="").training.stages is None
    backend = KubernetesBackend(api_client=object(), quota_tree_object="", stage_log=str(tmp_path / "stages.jsonl"))
    made = []

    def create(kind, body):  # the API server's answer, on a worker thread
        made.append((kind, body["metadata"]["name"]))
        return {"metadata": {"uid": "u1", **body["metadata"]}}

    async def main():
        backend.training.stages.started("ns", "job-1-0")
        return await backend.training.stages.create(backend.calls, create, JOB,
                                                    {"metadata": {"name": "job-1-0", "namespace": "ns"}})

    try:
        assert asyncio.run(main())["metadata"]["uid"] == "u1" and made == [(JOB, "job-1-0")]
    finally:
        backend.close()
    [line] = (tmp_path / "stages.jsonl").read_text().splitlines()
    entry = json.loads(line)
    assert entry["namespace"] == "ns" and entry["name"] == "job-1-0" and entry["kind"] == "Job"
    assert entry["queued"] <= entry["slot"] <= entry["sent"] <= entry["created"]
