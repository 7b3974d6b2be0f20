"""The cluster benchmark's watcher process fails in one line, in bounded time, when it cannot follow."""

from __future__ import annotations

import socket

import pytest
import yaml

from hub_ext.bench.kube import BenchError
from hub_ext.bench.watcher import Watcher


def kubeconfig(path, server: str):
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    return str(path)


def test_an_api_server_that_never_answers_stops_the_watcher_in_bounded_time(tmp_path):
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        watcher = Watcher(kubeconfig(tmp_path / "config", f"http://127.0.0.1:{silent.getsockname()[1]}"), "r")
        with pytest.raises(BenchError, match=r"did not follow the cluster within 2 s \(is the API server answering"):
            watcher.start(timeout=2)
    assert watcher.pid is None and watcher.stop() == 0  # killed, nothing left to stop


def test_a_watcher_that_ends_at_once_says_so(tmp_path):
    watcher = Watcher(str(tmp_path / "missing-config"), "r")
    with pytest.raises(BenchError, match=r"ended before it followed the cluster \(status [1-9]"):
        watcher.start(timeout=30)
    assert watcher.pid is None
