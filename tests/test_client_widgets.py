"""The notebook side's pure parts: %%train's live line, the quota widget's HTML, and the
sentence naming the user's own servers a job would stop (the kernels run them in tests/hub)."""

from __future__ import annotations

from hub_ext.client.api import own_servers_evicted
from hub_ext.client.live import status_html, status_text
from hub_ext.client.render import quota_html

TREE = {"tree": {"spec": {"root": {"name": "root", "children": [{"name": "root.a.1"}]}}},
        "quota": {"root.a.1": {"min": {"cpu": "10"}, "max": {"cpu": "20"}, "used": {"cpu": "12"}},
                  "root": {"min": {"cpu": "40"}, "max": {"cpu": "40"}, "used": {"cpu": "40"}}}}


def test_the_live_line_says_where_the_job_is_and_links_its_logs(monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/alice/")
    waiting = {"id": "ab12", "name": "train-x", "state": "Pending", "position": 2, "leafPosition": 1,
               "message": "quota root.a.1 is at its max for cpu: needs 5, uses 20 of 20"}
    assert status_text(waiting) == ("train-x (ab12): queued - quota root.a.1 is at its max for cpu: needs 5, uses 20 "
                                    "of 20 [position 2 in the queue, 1 in your team]")
    done = status_html({"id": "ab12", "name": "<b>x</b>", "state": "Succeeded"})
    assert "&lt;b&gt;x&lt;/b&gt; (ab12): done" in done and 'data-state="Succeeded"' in done
    assert 'href="/user/alice/tenancy/api/workloads/ab12/logs"' in done


def test_the_widget_draws_the_path_with_borrowed_room_and_my_jobs_escaped():
    me = {"name": "alice", "tenants": [{"group": "team-a", "namespace": "team-a", "quotaLeaf": "root.a.1"}],
          "workloads": [{"id": "1", "name": "<script>", "kind": "training", "user": "alice", "state": "Pending",
                         "created": 0, "message": "waits <here>", "position": 1, "leafPosition": 1, "pods": []},
                        {"id": "2", "name": "erin-job", "kind": "training", "user": "erin", "state": "Running",
                         "created": 0, "pods": []}]}
    page = quota_html(me, TREE, now=30)
    assert "root.a.1 (your team)" in page and "CPU 12/10 (+2 borrowed) of 20" in page and "CPU 40/40 of 40" in page
    assert "&lt;script&gt;" in page and "<script>" not in page and "waits &lt;here&gt;" in page
    assert "erin-job" not in page  # my jobs, not my teammates'
    assert "waiting 30 s" in page
    down = quota_html(None, None, error="The tenancy scheduler cannot be reached right now.")
    assert "cannot be reached" in down and "Team" not in down


def test_a_dry_run_names_only_my_own_servers(monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    dry = {"evictions": [
        {"kind": "notebook", "name": "nb-alice", "user": "alice", "serverName": ""},
        {"kind": "notebook", "name": "nb-alice-gpu", "user": "alice", "serverName": "gpu"},
        {"kind": "notebook", "name": "nb-bob", "user": "bob", "serverName": ""},
        {"kind": "training", "name": "train-1", "user": "alice", "serverName": None}]}
    assert own_servers_evicted(dry, client=None) == \
        'your default server (nb-alice) and your server "gpu" (nb-alice-gpu)'
    assert own_servers_evicted({"evictions": []}, client=None) == ""
