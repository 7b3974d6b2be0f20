"""What a side of the cluster benchmark asked of the API server, from its own counters (``/metrics``):
requests by verb and resource, and the watch events it sent and their bytes by resource.

Two scrapes, at the start and at the end of a side's timed run, and their difference. The counters
are the API server's, so they hold every client's requests in that window (the benchmark's own
watch of the pods too, alike on both sides), and ``watch_bytes`` is what it encoded for its
watchers (``apiserver_watch_events_sizes``), whatever their encoding. Without the right to read
``/metrics`` the side has no ``api_server`` figures. ``Profile`` takes kube-apiserver's CPU profile
over a side's run (``--apiserver-profile``): where inside the API server a side's extra CPU goes.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families


def scrape(api_client) -> Counter | None:
    """``{("requests", "VERB resource[/sub]"): n, ("watch_events", resource): n, ("watch_bytes", resource): bytes}``
    from the API server's ``/metrics`` now, or None when it cannot be read."""
    try:
        resp = api_client.call_api(*api_client.param_serialize(
            method="GET", resource_path="/metrics", header_params={"Accept": "text/plain"},
            auth_settings=["BearerToken"]))
        text = resp.read().decode("utf-8", "replace")
        if not 200 <= resp.status < 300:
            return None
    except Exception:  # noqa: BLE001 - no right to read it, or no such endpoint: no figures
        return None
    return parse(text)


def parse(text: str) -> Counter:
    out: Counter = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if sample.name == "apiserver_request_total":
                what = labels.get("resource", "") + (f"/{labels['subresource']}" if labels.get("subresource") else "")
                out[("requests", f"{labels.get('verb', '?')} {what or labels.get('path', '?')}")] += sample.value
            elif sample.name == "apiserver_watch_events_total":  # labelled by resource since 1.32, kind before
                out[("watch_events", labels.get("resource") or labels.get("kind", "?"))] += sample.value
            elif sample.name == "apiserver_watch_events_sizes_sum":
                out[("watch_bytes", labels.get("resource") or labels.get("kind", "?"))] += sample.value
    return out


def difference(before: Counter | None, after: Counter | None) -> dict:
    """``{"requests": {...}, "watch_events": {...}, "watch_bytes": {...}}`` of what changed between the
    scrapes (each sorted, largest first), or {} without them."""
    if before is None or after is None:
        return {}
    out: dict = {"requests": {}, "watch_events": {}, "watch_bytes": {}}
    for (group, key), value in sorted(after.items(), key=lambda kv: -(kv[1] - before.get(kv[0], 0))):
        delta = round(value - before.get((group, key), 0))
        if delta > 0:
            out[group][key] = delta
    return out


def line(asked: dict) -> str | None:
    """One line of text: the requests (the eight most), the watch events and their bytes, by kind."""
    if not asked:
        return None
    requests, events, sizes = asked["requests"], asked["watch_events"], asked["watch_bytes"]
    top = ", ".join(f"{k} {v}" for k, v in list(requests.items())[:8])
    kinds = ", ".join(f"{k} {v} ({sizes.get(k, 0) / 1e6:.1f} MB)" for k, v in list(events.items())[:5])
    return (f"    API server: {sum(requests.values())} requests ({top}); {sum(events.values())} watch events, "
            f"{sum(sizes.values()) / 1e6:.1f} MB ({kinds})")


class Profile:
    """A CPU profile of kube-apiserver (Go's ``/debug/pprof/profile``) over a side's first ``seconds``,
    taken in a thread while the side runs and written to ``path`` (read with ``go tool pprof -top``).

    Where each side's extra CPU goes inside the API server (encoding events as JSON or protobuf, TLS,
    the watch cache, admission, etcd calls) is what its counters cannot say. It needs an admin's
    client and the API server started with ``--profiling=true`` (tools/bench/cluster_bench.py does
    so when asked for profiles); otherwise ``stop()`` says why there is none."""

    def __init__(self, api_client, seconds: float, path: str):
        self.api_client, self.seconds, self.path = api_client, max(1, int(seconds)), path
        self.problem: str | None = None
        self._thread = threading.Thread(target=self._take, name="bench-apiserver-profile", daemon=True)

    def start(self) -> "Profile":
        self._thread.start()
        return self

    def _take(self) -> None:
        try:
            resp = self.api_client.call_api(*self.api_client.param_serialize(
                method="GET", resource_path="/debug/pprof/profile", query_params=[("seconds", self.seconds)],
                header_params={"Accept": "application/octet-stream"}, auth_settings=["BearerToken"]),
                _request_timeout=self.seconds + 30)
            data = resp.read()
            if not 200 <= resp.status < 300:
                self.problem = (f"kube-apiserver did not give a CPU profile ({resp.status}; is it started with "
                                "--profiling=true, and is this an admin's kubeconfig?)")
                return
            Path(self.path).write_bytes(data)
        except Exception as err:  # noqa: BLE001 - the figures stand without it; one line says why
            self.problem = f"kube-apiserver's CPU profile failed: {' '.join(str(err).split())[:200]}"

    def stop(self) -> dict:
        """Wait for the profile (it covers its ``seconds`` whatever the side's length); what the side's
        JSON says of it: ``{"path", "seconds"}`` or ``{"problem"}``."""
        self._thread.join(self.seconds + 60)
        if self.problem is None and self._thread.is_alive():
            self.problem = "kube-apiserver's CPU profile did not come in time"
        return {"problem": self.problem} if self.problem else {"path": self.path, "seconds": self.seconds}


def profile_line(side: dict) -> str | None:
    """One line of text: where the side's kube-apiserver profile went, or why there is none."""
    taken = side.get("apiserver_profile")
    if not taken:
        return None
    if taken.get("problem"):
        return f"    kube-apiserver's CPU profile: none ({taken['problem']})"
    return (f"    kube-apiserver's CPU profile: {taken['path']} (its first {taken['seconds']} s; "
            "tools/bench/pprof_shares.py reads it)")
