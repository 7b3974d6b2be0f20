"""``tenancy bench --cluster KUBECONFIG``: single-pod training Jobs on a real cluster, through plain
kube-scheduler and through the tenancy service's REST API, in one run.

For each size (``--pods``): (a) ``N`` Jobs created directly in ten namespaces, scheduled by
kube-scheduler on the run's kwok nodes: pods/s from the first create to ``N`` Running; the
namespaces are deleted again. (b) A real JupyterHub and ``tenancy serve`` with the Kubernetes
backend; ten users (one team each) submit the same ``N`` jobs with their tokens: pods/s from the
first submit to ``N`` Running, and each submit's latency. Then, with the last size still running,
``--queued`` jobs wait in a team whose ResourceQuota is full, and more submits are timed behind
them. The settings that bound the figures (the controller-manager's and scheduler's client QPS,
the service's) are printed with them, and so is where each side's CPU went (``cpu_seconds``: the
control plane's processes, the service, the hub and the client, read from ``/proc``; the service's
also by thread, ``threads_cpu_seconds``, by the names its threads give themselves): on one
machine a side is as fast as the CPU the control plane is left with. With ``--watched`` each round
also runs the plain side while a process holds the service's watches and does nothing else
(``watcher.py``): the cost of following the cluster alone, a floor under the service side's.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import apiserver, stages
from .cpu import CoreSampler, CpuMeter, ThreadMeter, affinity
from .hubproc import API, HubAndService, request
from .kube import BenchError, Cluster, RunningCounter, component_qps
from .plain import run_plain
from .service_load import latency_figures, submit_all, training
from .watcher import Watcher

TEAMS = 10
STAGE_LOG = "stages.jsonl"  # the service's KubernetesBackend.stage_log, in its workdir


def measure(args) -> list[dict]:
    if args.profile and _pyspy() is None:
        raise BenchError("--profile needs py-spy (pip install py-spy) on PATH or beside this Python")
    run = secrets.token_hex(3)
    cluster = Cluster(args.cluster, run)
    settings = {"bench": "cluster-settings", "run": run, "nodes": args.nodes, "node_cpu": args.node_cpu,
                "pod_cpu": args.pod_cpu, "teams": TEAMS, "rounds": args.rounds,
                "components": component_qps(args.cluster), "affinity": affinity(kubeconfig=args.cluster),
                "service": {"api_qps": args.service_qps, "api_burst": args.service_burst,
                            "create_concurrency": args.create_concurrency}}
    yield settings
    try:
        cluster.ensure_priority_classes()
        cluster.add_kwok_nodes(args.nodes, args.node_cpu, args.node_memory)
        sizes = args.pods
        for k, size in enumerate(sizes):
            rounds, backlog = [], None
            for r in range(args.rounds):
                # Back to back, in turns (plain first, then the service first): a cluster that slows as
                # its database grows, or a busy moment, weighs on both sides alike.
                last = k == len(sizes) - 1 and r == args.rounds - 1
                if r % 2 == 0:
                    plain = _plain(cluster, size, args, f"r{r}")
                    watched = _plain(cluster, size, args, f"r{r}", watched=True) if args.watched else None
                    service, backlog = _service(cluster, size, args, f"r{r}", queued=args.queued if last else 0)
                else:
                    service, backlog = _service(cluster, size, args, f"r{r}", queued=args.queued if last else 0)
                    plain = _plain(cluster, size, args, f"r{r}")
                    watched = _plain(cluster, size, args, f"r{r}", watched=True) if args.watched else None
                rounds.append({"plain": plain, "service": service,
                               "ratio": round(service["pods_per_s"] / plain["pods_per_s"], 2)})
                if watched is not None:
                    rounds[-1].update(watched=watched,
                                      watched_ratio=round(watched["pods_per_s"] / plain["pods_per_s"], 2))
            yield summary(size, rounds)
            if backlog:
                yield backlog
    finally:
        cluster.clean()


def summary(size: int, rounds: list[dict]) -> dict:
    """One size's figures: the medians over the rounds (the ratio: the median of each round's own
    ratio, its two sides measured back to back), every round kept under ``rounds``."""
    def median(values):
        return round(statistics.median(values), 2)

    services = [r["service"] for r in rounds]

    def cpu(side: str) -> dict:  # each role's median over the rounds
        roles = {role for r in rounds for role in r[side].get("cpu_seconds", {})}
        return {role: median([r[side]["cpu_seconds"].get(role, 0.0) for r in rounds]) for role in sorted(roles)}

    names = {name for s in services for name in s.get("threads_cpu_seconds", {})}
    threads = {name: median([s.get("threads_cpu_seconds", {}).get(name, 0.0) for s in services]) for name in names}
    watched = {}
    if all("watched" in r for r in rounds):
        watched = {"watched_pods_per_s": median([r["watched"]["pods_per_s"] for r in rounds]),
                   "watched_ratio": median([r["watched_ratio"] for r in rounds]),
                   "watched_cpu_seconds": cpu("watched")}
    return {"bench": "cluster", "pods": size,
            "plain_pods_per_s": median([r["plain"]["pods_per_s"] for r in rounds]),
            "service_pods_per_s": median([s["pods_per_s"] for s in services]),
            "ratio": median([r["ratio"] for r in rounds]),
            "submit_p50_ms": median([s["submit_p50_ms"] for s in services]),
            "submit_p99_ms": median([s["submit_p99_ms"] for s in services]),
            "plain_cpu_seconds": cpu("plain"), "service_cpu_seconds": cpu("service"),
            "service_threads_cpu_seconds": dict(sorted(threads.items(), key=lambda kv: -kv[1])),
            **watched, "plain": rounds[0]["plain"], "service": rounds[0]["service"], "rounds": rounds}


def _teams(run: str, tag: str) -> dict[str, str]:
    return {f"team-{i}": f"b{run}-{tag}-t{i}" for i in range(TEAMS)}


def _plain(cluster: Cluster, size: int, args, tag: str, watched: bool = False) -> dict:
    """The plain side; ``watched``: while a process holds the service's watches (``watcher.py``)."""
    namespaces = list(_teams(cluster.run, f"{'w' if watched else 'p'}{size}{tag}").values())
    cluster.add_namespaces(namespaces)
    watcher = Watcher(cluster.kubeconfig, cluster.run).start() if watched else None
    try:
        result = run_plain(cluster, namespaces, size, cpu=args.pod_cpu, memory=args.pod_memory,
                           priority_class="high-priority-research", concurrency=args.create_concurrency,
                           timeout=args.timeout, pids={"watcher": watcher.pid} if watcher else None,
                           profile=_profile(cluster, args, size, tag, "watched" if watched else "plain"))
    finally:
        events = watcher.stop() if watcher is not None else None
        cluster.delete_namespaces(namespaces)
    if events is not None:
        result["watch_events"] = events
    return result


def _profile(cluster: Cluster, args, size: int, tag: str, side: str) -> apiserver.Profile | None:
    """With ``--apiserver-profile PREFIX``: kube-apiserver's CPU profile of this side,
    ``PREFIX-<pods>-<round>-<side>.pprof``."""
    if not getattr(args, "apiserver_profile", None):
        return None
    return apiserver.Profile(cluster.api, args.apiserver_profile_seconds,
                             f"{args.apiserver_profile}-{size}-{tag}-{side}.pprof")


def _service(cluster: Cluster, size: int, args, tag: str, queued: int) -> tuple[dict, dict | None]:
    teams = _teams(cluster.run, f"s{size}{tag}")
    if queued:
        teams["team-backlog"] = f"b{cluster.run}-s{size}{tag}-backlog"
    cluster.add_namespaces(list(teams.values()))
    if queued:  # room for one pod: the rest wait in the service's queue
        cluster.core.create_namespaced_resource_quota(teams["team-backlog"], {
            "metadata": {"name": "backlog"}, "spec": {"hard": {"requests.cpu": args.pod_cpu}}})
    workdir = Path(tempfile.mkdtemp(prefix=f"tenancy-bench-{cluster.run}-{size}-", dir=args.workdir))
    backend = {"node_label_selector": cluster.selector, "node_selector": {"tenancy-bench": cluster.run},
               "extra_labels": {"tenancy-bench": cluster.run}, "api_qps": args.service_qps,
               "api_burst": args.service_burst, "create_concurrency": args.create_concurrency,
               "stage_log": str(workdir / STAGE_LOG)}
    procs = HubAndService(workdir, args.cluster, cluster.run, teams, backend)
    profiler, ok = None, False
    try:
        procs.start()
        if args.profile:
            fmt = args.profile_format
            suffix = {"flamegraph": "svg", "raw": "txt", "speedscope": "json"}[fmt]
            profiler = subprocess.Popen([_pyspy(), "record", "-o", f"{args.profile}-{size}-{tag}.{suffix}", "--format", fmt, "--pid",
                                         str(procs.service_pid), "--rate", str(args.profile_rate), "--nonblocking", "--gil"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)
        result = _throughput(procs, cluster, teams, size, args, _profile(cluster, args, size, tag, "service"))
        backlog = _backlog(procs, teams, queued, args) if queued else None
        ok = True
        return result, backlog
    finally:
        if profiler is not None:
            profiler.send_signal(2)
            profiler.wait(60)
        procs.stop()
        cluster.delete_namespaces(list(teams.values()))
        if ok and not args.workdir:  # the logs stay when something failed
            shutil.rmtree(workdir, ignore_errors=True)


def _pyspy() -> str | None:
    beside = Path(sys.executable).with_name("py-spy")
    return shutil.which("py-spy") or (str(beside) if beside.exists() else None)


def _throughput(procs: HubAndService, cluster: Cluster, teams: dict, size: int, args,
                profile: apiserver.Profile | None = None) -> dict:
    users = [(procs.tokens[f"{g}-user"], ns) for g, ns in teams.items() if g != "team-backlog"]
    jobs = [(users[i % len(users)][0], users[i % len(users)][1], training(f"job-{i}", args.pod_cpu, args.pod_memory))
            for i in range(size)]
    counter = RunningCounter(cluster.kubeconfig, cluster.selector).start()
    try:
        roles = {"tenancy service": procs.service_pid, "jupyterhub": procs.hub_pid}
        meter = CpuMeter(roles, cluster.kubeconfig).start()
        threads = ThreadMeter(procs.service_pid).start()
        asked = apiserver.scrape(cluster.api)
        cores = CoreSampler().start()
        if profile is not None:
            profile.start()
        wall = cores.started
        submitted = asyncio.run(submit_all(procs.service_url, jobs))
        submit_s = time.monotonic() - submitted["started"]
        last = counter.wait(size, args.timeout)
        took = last - submitted["started"]
        used = meter.stop()
        by_thread = threads.stop()
        samples = cores.stop()
        asked = apiserver.difference(asked, apiserver.scrape(cluster.api))
        moments = _service_moments(procs, users, submitted["moments"], counter.seen())
        time.sleep(args.settle)  # anything made twice would show now
        made = sum(len(cluster.batch.list_namespaced_job(ns).items) for ns in teams.values())
        profiled = {"apiserver_profile": profile.stop()} if profile is not None else {}
        return {**profiled, "pods": size, "seconds": round(took, 2), "pods_per_s": round(size / took, 1),
                "submit_seconds": round(submit_s, 2), **latency_figures(submitted["latencies"]),
                "pods_made_seconds": round(counter.last_created - submitted["started"], 2),
                "running": len(counter.running), "pods_seen": len(counter.created), "jobs_created": made,
                "workloads": len(set(submitted["ids"])), "cpu_seconds": used, "threads_cpu_seconds": by_thread,
                "affinity": affinity(roles, cluster.kubeconfig), "api_server": asked,
                **stages.figures(moments, stages.SERVICE, wall, samples)}
    finally:
        counter.stop()


def _service_moments(procs: HubAndService, users: list[tuple[str, str]], submits: dict, seen: dict) -> dict:
    """Each pod's moments (stages.py), keyed "namespace/job name": its submit's (the client's), its
    admission (each user's workloads read through the API, after the run), its create's (the
    service's stage log) and what the watch saw."""
    moments: dict[str, dict[str, float]] = {}
    for token, _ in users:
        after = None
        while True:
            query = "mine=true&limit=500" + (f"&continue={after}" if after else "")
            status, body = request("GET", f"{procs.service_url}{API}/workloads?{query}", token, timeout=60)
            if status != 200:
                raise BenchError(f"the service did not list a user's workloads ({status}): {body}")
            for view in body["workloads"]:
                submit = submits.get(view["id"], {})
                for pod in view["pods"]:
                    m = moments.setdefault(f"{view['namespace']}/{pod['name']}", dict(submit))
                    if pod.get("startedAt"):
                        m["admitted"] = pod["startedAt"]
            after = body.get("continue")
            if not after:
                break
    try:
        lines = (procs.workdir / STAGE_LOG).read_text().splitlines()
    except OSError:
        lines = []
    names = {"queued": "create queued", "slot": "create slot", "sent": "create sent", "created": "Job created"}
    for line in lines:
        entry = json.loads(line)
        m = moments.get(f"{entry['namespace']}/{entry['name']}")
        if m is not None:
            m.update({stage: entry[key] for key, stage in names.items() if entry.get(key) is not None})
    for key, m in moments.items():
        m.update(seen.get(key, {}))
    return moments


def _backlog(procs: HubAndService, teams: dict, queued: int, args) -> dict:
    """``queued`` jobs waiting (the backlog team's ResourceQuota holds one), then submits timed behind
    them: the backlog user's, one after another, that join the queue (nothing starts: what a submit
    costs with that queue); another user's, one after another, that start at once (what one person
    sees, a Job and its pod made on the cluster meanwhile); then ``args.probes`` from all ten users
    at once, one connection each (the service saturated)."""
    token = procs.tokens["team-backlog-user"]
    ns = teams["team-backlog"]

    def submitted(who: list[tuple[str, str]], prefix: str, n: int, per_user: int = 1) -> dict:
        """``n`` jobs named ``prefix-i`` from ``who`` in turn ((token, namespace) each): submit_all's result."""
        return asyncio.run(submit_all(procs.service_url, [(*who[i % len(who)], training(
            f"{prefix}-{i}", args.pod_cpu, args.pod_memory)) for i in range(n)], per_user=per_user))

    started = time.monotonic()
    submitted([(token, ns)], "wait", queued, per_user=2)
    fill_s = time.monotonic() - started
    behind = submitted([(token, ns)], "behind", min(100, args.probes))
    waiting = latency_figures(behind["latencies"])
    users = [(procs.tokens[f"{g}-user"], n) for g, n in teams.items() if g != "team-backlog"]
    single = latency_figures(submitted(users[:1], "alone", min(100, args.probes))["latencies"])
    many = latency_figures(submitted(users, "probe", args.probes)["latencies"])
    return {"bench": "cluster-backlog", "queued": queued, "queue_fill_seconds": round(fill_s, 2),
            "queued_submit_p50_ms": many["submit_p50_ms"], "queued_submit_p99_ms": many["submit_p99_ms"],
            "probes": many["submits"],
            "queued_single_submit_p50_ms": single["submit_p50_ms"],
            "queued_single_submit_p99_ms": single["submit_p99_ms"], "single_submits": single["submits"],
            "queued_waiting_submit_p50_ms": waiting["submit_p50_ms"], "queued_waiting_submit_p99_ms": waiting["submit_p99_ms"],
            "waiting_submits": waiting["submits"], "waiting_submits_pending": behind["states"].count("Pending")}


def main(args) -> int:
    try:
        for row in measure(args):
            print(json.dumps(row) if args.json else _line(row), flush=True)
    except BenchError as err:
        print(f"tenancy bench: error: {err}", flush=True)
        return 1
    return 0


def _line(row: dict) -> str:
    kind = row["bench"]
    if kind == "cluster-settings":
        comps = ", ".join(f"{name} QPS {c.get('qps', '?')}/burst {c.get('burst', '?')} ({c['source']})"
                          for name, c in row["components"].items())
        svc = row["service"]
        return (f"run {row['run']}: {row['nodes']} kwok nodes of {row['node_cpu']} CPU, pods of {row['pod_cpu']} CPU, "
                f"{row['teams']} teams, {row['rounds']} round(s), medians; {comps}; service api_qps {svc['api_qps']}/burst {svc['api_burst']}, "
                f"create_concurrency {svc['create_concurrency']}"
                + (f"; cores: {', '.join(f'{k} {v}' for k, v in row['affinity'].items())}" if row.get("affinity") else ""))
    if kind == "cluster":
        return (f"{row['pods']:>6} pods  plain kube-scheduler {row['plain_pods_per_s']:>7} pods/s  "
                f"service (REST) {row['service_pods_per_s']:>7} pods/s  ratio {row['ratio']}x "
                f"(rounds: {', '.join(str(r['ratio']) for r in row['rounds'])})  "
                f"submit p50 {row['submit_p50_ms']} ms p99 {row['submit_p99_ms']} ms{_cpu_line(row)}{_watched_line(row)}"
                + "".join("\n" + line for i, r in enumerate(row["rounds"]) for side, title in (
                    ("plain", "plain kube-scheduler"), ("watched", "plain with only the service's watches"),
                    ("service", "the service (REST)")) if side in r
                          for line in _side_lines(f"round {i + 1}, {title}", r[side])))
    return (f"{row['queued']} queued: submit p50 {row['queued_submit_p50_ms']} ms p99 {row['queued_submit_p99_ms']} ms "
            f"({row['probes']} submits from ten users at once; the queue filled in {row['queue_fill_seconds']} s); "
            f"one user's submits one at a time: p50 {row['queued_single_submit_p50_ms']} ms "
            f"p99 {row['queued_single_submit_p99_ms']} ms ({row['single_submits']} submits, each starting at once); "
            f"one user's submits joining the queue: p50 {row['queued_waiting_submit_p50_ms']} ms "
            f"p99 {row['queued_waiting_submit_p99_ms']} ms ({row['waiting_submits']} submits)")


def _side_lines(title: str, side: dict) -> list[str]:
    extra = [apiserver.line(side.get("api_server") or {}), apiserver.profile_line(side)]
    return stages.lines(title, side) + [line for line in extra if line]


def _watched_line(row: dict) -> str:
    if "watched_ratio" not in row:
        return ""
    used = row["watched_cpu_seconds"]
    return (f"  plain with only the service's watches: {row['watched_pods_per_s']} pods/s ({row['watched_ratio']}x; "
            f"CPU s {used.get('all', 0)}, the watcher {used.get('watcher', 0)}, kube-apiserver "
            f"{used.get('kube-apiserver', 0)})")


def _cpu_line(row: dict) -> str:
    plain, service = row.get("plain_cpu_seconds") or {}, row.get("service_cpu_seconds") or {}
    if not plain.get("all") or not service.get("all"):
        return ""  # no /proc here
    return (f"  CPU s (medians): plain {plain['all']}, service side {service['all']} (the service "
            f"{service.get('tenancy service', 0)}, the hub {service.get('jupyterhub', 0)}; kube-apiserver "
            f"{plain.get('kube-apiserver', 0)} and {service.get('kube-apiserver', 0)}){_threads_text(row)}")


def _threads_text(row: dict) -> str:
    """"; the service's threads: main 9.1, watch-our pods 1.2, ..." (medians), or "" where not read."""
    threads = row.get("service_threads_cpu_seconds") or {}
    return "; the service's threads: " + ", ".join(f"{n} {v}" for n, v in threads.items() if v) if threads else ""
