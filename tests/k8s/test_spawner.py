"""TenancyKubeSpawner on a real control plane, behind a real hub, admitted by the real service.

One module-wide setup: the control plane (kube-apiserver, kube-scheduler, kwok),
a kwok node, a real JupyterHub (with configurable-http-proxy) whose spawner is
``tenancy-kube`` pointed at the cluster, and the tenancy service it manages,
running the Kubernetes backend, which provisions the teams' namespaces,
ResourceQuotas, LimitRanges and PriorityClasses from the hub groups. kwok makes
the pods Running on 127.20.x.x; a stand-in kubelet (``spawner_kubelet``) runs
each notebook pod's ``jupyterhub-singleuser`` on that address, so the hub
really reaches the server.

The service runs with ``sync_cluster_limits`` off: the scheduler then does not
know the ResourceQuotas, and the API server's own 403 "exceeded quota" is what
refuses an over-quota notebook (the spawner's message for it is under test).
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import threading
import uuid
from pathlib import Path
from urllib.parse import urlparse

import pytest

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kubernetes.utils import parse_quantity

import controlplane
from hub_ext.client.api import TenancyClient, TenancyError, submit_training

from hub_ext.backends.kubernetes.objects import INSTANCE, MANAGED_BY, MANAGER, QUOTA_LEAF, TENANT, WORKLOAD_LABEL
from provision_fixtures import quota_ready, service_account_ready, wait_for
from spawner_kubelet import StandInKubelet

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "hub"))
import harness  # noqa: E402

API = "/services/tenancy/api/v1"
PROFILES = {
    "small": {"display_name": "Small: 1 CPU", "resources": {
        "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}}},
    "large": {"display_name": "Large: 3 CPU", "resources": {
        "requests": {"cpu": "3", "memory": "2Gi"}, "limits": {"cpu": "4", "memory": "4Gi"}}},
}


def hub_config(p: dict) -> str:
    """The hub's jupyterhub_config.py: tenancy-kube spawner, the managed tenancy service."""
    service = {
        "name": "tenancy", "url": f"http://127.0.0.1:{p['service_port']}",
        "command": [sys.executable, "-m", "hub_ext.cli", "serve", "--config", p["service_config"]],
        "display": False, "oauth_no_confirm": True, "environment": {"PYTHONUNBUFFERED": "1"},
    }
    lines = [
        "c = get_config()  # noqa: F821",
        "c.JupyterHub.authenticator_class = 'dummy'",
        "c.DummyAuthenticator.password = 'pw'",
        "c.JupyterHub.spawner_class = 'tenancy-kube'",
        "c.JupyterHub.allow_named_servers = True",
        "c.JupyterHub.cleanup_servers = False  # a hub restart leaves the notebook pods running",
        f"c.TenancyKubeSpawner.tenancy_service_url = {service['url'] + '/services/tenancy/'!r}",
        f"c.TenancyKubeSpawner.profiles = {PROFILES!r}",
        "c.TenancyKubeSpawner.queue_poll_seconds = 0.3",
        "c.TenancyKubeSpawner.cmd = ['jupyterhub-singleuser']",
        "c.TenancyKubeSpawner.image = 'registry.invalid/notebook:1'  # kwok pulls nothing",
        f"c.TenancyKubeSpawner.port = {p['server_port']}",
        f"c.TenancyKubeSpawner.node_selector = {p['node_labels']!r}",
        f"c.TenancyKubeSpawner.extra_labels = {p['pod_labels']!r}",
        "c.TenancyKubeSpawner.start_timeout = 180",  # a loaded machine: the server's imports take their time
        "c.TenancyKubeSpawner.http_timeout = 120",
        "c.TenancyKubeSpawner.poll_interval = 1  # notice a preempted server quickly",
        "c.JupyterHub.custom_scopes = {",
        "    'custom:tenancy:use': {'description': 'Use the scheduler.'},",
        "    'custom:tenancy:admin': {'description': 'Administer the scheduler.'}}",
        "c.JupyterHub.extra_user_scopes = {'access:services!service=tenancy', 'custom:tenancy:use!user'}",
        "c.Spawner.server_token_scopes = ['users:activity!user', 'access:servers!server',",
        "    'access:services!service=tenancy', 'custom:tenancy:use!user']",
        "c.JupyterHub.load_roles = [{'name': 'tenancy-service', 'services': ['tenancy'], 'scopes': [",
        "    'list:users', 'read:users', 'list:groups', 'read:groups', 'admin:groups', 'servers', 'read:servers']}]",
        f"c.JupyterHub.services = [{service!r}]",
    ]
    return "\n".join(lines) + "\n"


def service_config(p: dict) -> str:
    """The tenancy service's config: the Kubernetes backend on the control plane, provisioning on."""
    leaf = {"min": {"cpu": "4", "memory": "16Gi"}, "max": {"cpu": "16", "memory": "64Gi"}}
    tree = {"apiVersion": "scheduling.sigs.k8s.io/v1beta1", "kind": "ElasticQuotaTree",
            "metadata": {"name": "elasticquotatree", "namespace": "kube-system"},
            "spec": {"root": {"name": "root", "min": {"cpu": "16", "memory": "64Gi"},
                              "max": {"cpu": "16", "memory": "64Gi"},
                              "children": [{"name": f"root.{t}", **leaf} for t in "abde"]}}}
    lines = [
        "c = get_config()  # noqa: F821",
        f"c.TenancyService.db_url = {'sqlite:///' + p['workdir'] + '/tenancy.sqlite'!r}",
        f"c.TenancyService.tree = {tree!r}",
        "c.TenancyService.groups_refresh_seconds = 0.5",
        "c.TenancyService.backend_class = 'hub_ext.backends.kubernetes.KubernetesBackend'",
        f"c.KubernetesBackend.kubeconfig = {p['kubeconfig']!r}",
        f"c.KubernetesBackend.node_label_selector = {p['node_selector']!r}",
        f"c.KubernetesBackend.node_selector = {p['node_labels']!r}",
        "c.KubernetesBackend.poll_seconds = 0.3",
        "c.KubernetesBackend.quota_tree_object = ''",
        "c.KubernetesBackend.sync_cluster_limits = False  # the API server alone enforces the quotas",
        "c.KubernetesBackend.provision = True",
        f"c.Provisioner.instance = {p['instance']!r}",
        "c.Provisioner.shared_namespace = ''",
        "c.Provisioner.tenant_resource_quotas = {'team-d': {'requests.cpu': '500m'}}",
        "c.Provisioner.tenant_limit_ranges = {'team-e': [{'type': 'Container', 'max': {'cpu': '1'},",
        "    'defaultRequest': {'cpu': '500m', 'memory': '1Gi'}, 'default': {'cpu': '1', 'memory': '2Gi'}}]}",
    ]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def setup(control_plane, api, tmp_path_factory):
    if os.environ.get("TENANCY_SKIP_HUB") == "1":
        pytest.skip(reason="TENANCY_SKIP_HUB=1 asks to skip the real-hub tier")
    try:
        chp = harness.install_chp()
    except harness.HubError as err:
        pytest.fail(f"{err}\n(or set TENANCY_SKIP_HUB=1)", pytrace=False)
    sfx = uuid.uuid4().hex[:6]
    work = tmp_path_factory.mktemp("spawner")
    s = type("Setup", (), {})()
    s.sfx, s.work, s.api, s.cp = sfx, work, api, control_plane
    s.core, s.sched = client.CoreV1Api(api), client.SchedulingV1Api(api)
    s.ns = {t: f"sp-{t}-{sfx}" for t in "abde"}
    s.node = f"sp-{sfx}"
    s.instance = f"spawner-{sfx}"
    node_labels = {"tenancy-test/spawner": sfx}
    s.pod_label = ("tenancy-test/spawner-pod", sfx)
    control_plane.add_node(s.node, {"cpu": "16", "memory": "64Gi"}, labels=node_labels)
    params = {
        "service_port": harness.free_port(), "server_port": harness.free_port(), "workdir": str(work),
        "service_config": str(work / "tenancy_config.py"), "kubeconfig": str(control_plane.kubeconfig),
        "node_labels": node_labels, "node_selector": f"tenancy-test/spawner={sfx}",
        "pod_labels": dict([s.pod_label]), "instance": s.instance,
    }
    (work / "tenancy_config.py").write_text(service_config(params))
    (work / "jupyterhub_config.py").write_text(hub_config(params))
    s.hub = harness.RealHub(work / "jupyterhub_config.py", work / "hub", chp_path=chp,
                            env={"KUBECONFIG": str(control_plane.kubeconfig)})
    kubelet = StandInKubelet(api, f"{s.pod_label[0]}={sfx}", work / "pods")
    try:
        with kubelet:
            s.kubelet = kubelet
            s.hub.start()
            wait_for(lambda: s.hub.request("GET", f"{API}/health").status_code == 200, "the tenancy service", 30)
            teams = {
                "team-a": ({"tenancy.namespace": s.ns["a"], "tenancy.quota-leaf": "root.a",
                            "tenancy.profiles": "small"}, ["alice", "erin"]),
                "team-b": ({"tenancy.namespace": s.ns["b"], "tenancy.quota-leaf": "root.b"}, ["erin"]),
                "team-d": ({"tenancy.namespace": s.ns["d"], "tenancy.quota-leaf": "root.d"}, ["dave"]),
                "team-e": ({"tenancy.namespace": s.ns["e"], "tenancy.quota-leaf": "root.e"}, ["frank"]),
            }
            for name, (props, users) in teams.items():  # what an admin does in the admin panel
                for user in users:
                    s.hub.ensure_user(user)
                assert s.hub.api("POST", f"/groups/{name}")[0] in (201, 409)
                assert s.hub.api("PUT", f"/groups/{name}/properties", props)[0] == 200
                assert s.hub.api("POST", f"/groups/{name}/users", {"users": users})[0] == 200
            for ns in s.ns.values():  # provisioned by the service from the groups
                wait_for(lambda ns=ns: _exists(s.core.read_namespace, ns), f"namespace {ns}", 30)
                service_account_ready(s.core, ns)
                quota_ready(s.core, ns)
            wait_for(lambda: _exists(s.sched.read_priority_class, "low-priority-dev"), "PriorityClasses", 30)
            s.tokens = {u: s.hub.token_for(u) for u in ("alice", "erin", "dave", "frank")}
            yield s
    finally:
        s.hub.stop()
        _cleanup(s)


def _exists(read, *args):
    try:
        return read(*args)
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def _cleanup(s) -> None:
    for ns in s.ns.values():
        try:
            s.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
            s.core.delete_namespace(ns)
        except ApiException:
            pass
    selector = f"{MANAGED_BY}={MANAGER},{INSTANCE}={s.instance}"
    for pc in s.sched.list_priority_class(label_selector=selector).items:  # cluster-wide: leave none of ours
        s.sched.delete_priority_class(pc.metadata.name)
    try:
        s.core.delete_node(s.node)
    except ApiException:
        pass


def notebook_pods(s, namespace: str, user: str) -> list:
    return [p for p in s.core.list_namespaced_pod(namespace, label_selector=f"hub.jupyter.org/username={user}").items
            if p.metadata.deletion_timestamp is None]


def service(s, user: str, path: str):
    r = s.hub.request("GET", API + path, token=s.tokens[user])
    assert r.status_code == 200, r.text
    return r.json()


def spawn_error(s, user: str, options: dict) -> str:
    """Start a server that must fail; the message the hub gives (from the POST or the spawn progress)."""
    status, body = s.hub.start_server(user, "", options, token=s.tokens[user], check=False)
    if status >= 400:
        return body["message"] if isinstance(body, dict) else str(body)
    events = read_progress(s, user)
    assert events[-1].get("failed"), events
    return events[-1]["message"]


def spawn_watching(s, user: str, options: dict | None = None) -> list[dict]:
    """Start a server and read its spawn progress while it starts; the events, up to ready or failed."""
    result = {}
    starter = threading.Thread(target=lambda: result.update(r=s.hub.start_server(
        user, "", options, token=s.tokens[user], check=False)))
    starter.start()
    try:
        return wait_for(lambda: read_progress(s, user), f"the progress of {user}'s spawn", interval=0.05)
    finally:
        starter.join(60)
        assert result["r"][0] in (201, 202), result


@pytest.fixture(autouse=True)
def servers_stopped(request):
    """Each test starts from no running server: one left by a failed test stops here, so that its
    failure is the only one (not every later test's "already running")."""
    yield
    if "setup" not in request.fixturenames:
        return
    s = request.getfixturevalue("setup")
    for user in list(s.tokens):
        model = s.hub.server_model(user) or {}
        if model.get("ready") or model.get("pending"):
            s.hub.stop_server(user, timeout=60, check=False)


def read_progress(s, user: str, timeout: float = 40) -> list[dict]:
    """The spawn's progress events (``/hub/api/users/<user>/server/progress``), until ready or failed."""
    url = urlparse(s.hub.url(f"/hub/api/users/{user}/server/progress"))
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    conn.request("GET", url.path, headers={"Authorization": f"token {s.tokens[user]}"})
    resp = conn.getresponse()
    events = []
    try:
        if resp.status != 200:  # not started yet
            return events
        for raw in resp:
            line = raw.decode()
            if line.startswith("data:"):
                events.append(json.loads(line[5:]))
                if events[-1].get("ready") or events[-1].get("failed"):
                    break
    finally:
        conn.close()
    return events


def test_notebook_pod_in_team_namespace_with_priority_labels_and_profile(setup):
    s = setup
    events = spawn_watching(s, "alice")
    assert events[-1].get("ready"), events
    messages = [e.get("message", "") for e in events]
    assert "Admitted by the scheduler; starting the server" in messages, messages
    # then the pod's own events, read in the team's namespace: KubeSpawner's event reflector may
    # hear of kube-scheduler's event only after the pod is ready (on a loaded machine), and then
    # the progress stream has ended; the event is on the API server either way.
    assigned = f"Successfully assigned {s.ns['a']}/jupyter-alice to {s.node}"
    if not any(assigned in m for m in messages):
        wait_for(lambda: any(assigned in (e.message or "") for e in s.core.list_namespaced_event(s.ns["a"]).items),
                 "kube-scheduler's event for alice's pod", 20)
    s.hub.wait_server_ready("alice", timeout=180)
    # the server answers through the proxy: the hub reached it on the pod's IP
    r = s.hub.request("GET", "/user/alice/api/status", token=s.tokens["alice"])
    assert r.status_code == 200, r.text

    ns = s.ns["a"]
    [pod] = notebook_pods(s, ns, "alice")
    labels = pod.metadata.labels
    wl = service(s, "alice", f"/workloads/{labels[WORKLOAD_LABEL]}")
    assert (wl["user"], wl["namespace"], wl["state"], wl["kind"]) == ("alice", ns, "Running", "notebook")
    assert labels[TENANT] == "team-a" and labels[QUOTA_LEAF] == "root.a"
    assert pod.metadata.annotations["tenancy.jupyter.org/group"] == "team-a"
    # KubeSpawner's own labels, and the configured extra label, are kept
    assert labels["component"] == labels["app.kubernetes.io/component"] == "singleuser-server"
    assert labels["hub.jupyter.org/username"] == "alice"
    assert labels["app.kubernetes.io/managed-by"] == "kubespawner"
    assert labels[s.pod_label[0]] == s.pod_label[1]
    # the priority the cluster gives low-priority-dev, placed by kube-scheduler on our node
    assert pod.spec.priority_class_name == "low-priority-dev"
    assert pod.spec.priority == s.sched.read_priority_class("low-priority-dev").value
    assert pod.spec.node_name == s.node
    # exactly the "small" profile (team-a may use only that one)
    res = pod.spec.containers[0].resources
    assert {k: parse_quantity(v) for k, v in res.requests.items()} == {"cpu": 1, "memory": parse_quantity("1Gi")}
    assert {k: parse_quantity(v) for k, v in res.limits.items()} == {"cpu": 2, "memory": parse_quantity("2Gi")}
    env = {e.name: e.value for e in pod.spec.containers[0].env}
    assert env["TENANCY_NAMESPACE"] == ns and env["TENANCY_WORKLOAD_ID"] == wl["id"]

    # After a hub restart the spawner finds its pod in the team's namespace (state), and stops it there.
    s.hub.restart()
    wait_for(lambda: (s.hub.server_model("alice") or {}).get("ready"), "alice's server after the restart", 20)
    assert s.hub.request("GET", "/user/alice/api/status", token=s.tokens["alice"]).status_code == 200
    s.hub.stop_server("alice", timeout=30)
    assert not notebook_pods(s, ns, "alice")
    wait_for(lambda: not s.kubelet.running(ns, pod.metadata.name), "the server process to stop", 10)
    assert service(s, "alice", f"/workloads/{wl['id']}")["state"] == "Stopped"
    assert not s.kubelet.errors


def test_team_may_not_use_a_profile_it_is_not_given(setup):
    s = setup
    message = spawn_error(s, "alice", {"profile": "large"})
    assert "team team-a may not use profile large (allowed: small)" in message
    assert not notebook_pods(s, s.ns["a"], "alice")


def test_user_in_two_teams_gets_the_pod_in_the_team_picked(setup):
    s = setup
    s.hub.start_server("erin", "", {"tenant": "team-b", "profile": "large"}, token=s.tokens["erin"])
    s.hub.wait_server_ready("erin", timeout=180)
    assert not notebook_pods(s, s.ns["a"], "erin")
    [pod] = notebook_pods(s, s.ns["b"], "erin")
    assert pod.metadata.labels[TENANT] == "team-b" and pod.metadata.labels[QUOTA_LEAF] == "root.b"
    res = pod.spec.containers[0].resources
    assert parse_quantity(res.requests["cpu"]) == 3 and parse_quantity(res.limits["memory"]) == parse_quantity("4Gi")
    # The pod ends without the hub asking (deleted by hand, a node lost): the hub notices, and the
    # scheduler gives the room back.
    wid = pod.metadata.labels[WORKLOAD_LABEL]
    s.core.delete_namespaced_pod(pod.metadata.name, s.ns["b"], grace_period_seconds=0)
    wait_for(lambda: not (s.hub.server_model("erin") or {}).get("ready"), "the hub to see erin's server gone", 20)
    wait_for(lambda: service(s, "erin", f"/workloads/{wid}")["state"] == "Stopped", "the workload to be stopped", 20)
    assert not notebook_pods(s, s.ns["b"], "erin")


def test_api_server_refusals_are_one_clear_line(setup):
    s = setup
    ns = s.ns["d"]
    message = spawn_error(s, "dave", {})
    # the API server's 403 "exceeded quota", as the spawner words it: which quota, the numbers, what to do
    assert f"The ResourceQuota dev-quota of namespace {ns} refuses this server: it asks for requests.cpu=1" in message
    assert "limited" not in message and "requests.cpu=500m" in message
    assert "ask an admin to raise the quota" in message
    assert "\n" not in message and "Traceback" not in message
    assert not notebook_pods(s, ns, "dave")
    # the scheduler admitted it, then forgot it: nothing of dave's holds room
    mine = service(s, "dave", "/workloads?kind=notebook")["workloads"]
    assert mine and all(w["state"] not in ("Running", "Pending") for w in mine), mine
    # a LimitRange's 403, likewise
    message = spawn_error(s, "frank", {})
    assert message == (f"This profile breaks the LimitRange of namespace {s.ns['e']}: maximum cpu usage per Container "
                       "is 1, but limit is 2. Pick a smaller profile or ask an admin to change the limits."), message
    assert not notebook_pods(s, s.ns["e"], "frank")


def test_training_job_from_a_user_preempts_her_notebook(setup):
    """A training Job submitted with the user's token (as from a notebook cell) runs in the team's
    namespace at its PriorityClass; a second one preempts her low-priority notebook through the
    Eviction API; the hub notices and her next start says who took the room."""
    s = setup
    ns = s.ns["a"]
    s.hub.start_server("alice", "", {"profile": "small"}, token=s.tokens["alice"])
    s.hub.wait_server_ready("alice", timeout=180)
    [nb] = notebook_pods(s, ns, "alice")
    nb_wl = nb.metadata.labels[WORKLOAD_LABEL]
    me = TenancyClient(url=s.hub.url(API), token=s.tokens["alice"])
    fifteen = {"cpu": "15", "memory": "1Gi"}
    big = submit_training(["python", "train.py"], resources={"requests": fifteen, "limits": fifteen}, name="big",
                          client=me)
    wait_for(lambda: big.refresh().state == "Running", "the first job to run", 30)
    # admitted (Running for the scheduler) first, then made on the cluster
    [job] = wait_for(lambda: [j for j in client.BatchV1Api(s.api).list_namespaced_job(ns).items
                              if j.metadata.labels[WORKLOAD_LABEL] == big.id], "the Job", 20)
    assert job.spec.template.spec.priority_class_name == "high-priority-research"
    assert job.spec.template.spec.containers[0].command == ["python", "train.py"]
    # its logs, through the hub and the service, from the cluster (kwok serves them as a kubelet would)
    [pod] = wait_for(lambda: s.core.list_namespaced_pod(
        ns, label_selector=f"batch.kubernetes.io/job-name={job.metadata.name}").items, "the Job's pod", 20)
    controlplane.append_log(s.cp.set_pod_logs(ns, pod.metadata.name, s.work / "big.log"), "step 1\nstep 2")
    assert big.logs() == "step 1\nstep 2\n"
    # the node (16 CPU) and team-a's max (16) are full: one more CPU at a higher priority evicts the notebook
    one = {"cpu": "1", "memory": "1Gi"}
    # the dry run sees it would stop her own server: not without her yes
    with pytest.raises(TenancyError, match="This job would stop your default server"):
        submit_training(["python", "more.py"], resources={"requests": one, "limits": one}, name="more", client=me)
    more = submit_training(["python", "more.py"], resources={"requests": one, "limits": one}, name="more", client=me,
                           yes=True)
    wait_for(lambda: more.refresh().state == "Running", "the second job to run", 40)
    assert not notebook_pods(s, ns, "alice")
    wait_for(lambda: not (s.hub.server_model("alice") or {}).get("ready"), "the hub to see the server gone", 20)
    nb_view = service(s, "alice", f"/workloads/{nb_wl}")
    assert nb_view["state"] == "Preempted", nb_view
    notices = service(s, "alice", "/me")["notices"]
    assert any(n["workload"] == nb_wl and f"Preempted by {ns}/more-" in n["message"] for n in notices), notices
    big.cancel()
    more.cancel()
    wait_for(lambda: not [j for j in client.BatchV1Api(s.api).list_namespaced_job(ns).items
                          if j.metadata.deletion_timestamp is None], "the Jobs to be deleted", 30)
    events = spawn_watching(s, "alice", {"profile": "small"})
    notice = [e["message"] for e in events if e.get("message", "").startswith("Your previous server was stopped at")]
    assert notice and "to make room for alice's job more" in notice[0], events  # people's words, not the pod's name
    s.hub.wait_server_ready("alice", timeout=180)
    # cancelled through the scheduler's API: the hub stops the server, the pod goes
    [nb2] = notebook_pods(s, ns, "alice")
    r = s.hub.request("DELETE", f"{API}/workloads/{nb2.metadata.labels[WORKLOAD_LABEL]}", token=s.tokens["alice"])
    assert r.status_code == 200 and r.json()["state"] == "Stopped", r.text
    wait_for(lambda: not notebook_pods(s, ns, "alice"), "the notebook pod to go", 20)
    wait_for(lambda: not (s.hub.server_model("alice") or {}).get("ready"), "the hub to stop alice's server", 20)
