"""The watch that follows objects for the Kubernetes backend (``Informer``), on the real API server:
events read together are handed to the loop together, in order, and one that its handler fails on
does not take the others with it."""

from __future__ import annotations

import asyncio
import logging

import pytest

from hub_ext.backends.kubernetes.api import Api, Kind
from hub_ext.backends.kubernetes.informer import Informer
from waiting import until

CONFIG_MAP = Kind("ConfigMap", "v1", "configmaps", True)


@pytest.mark.asyncio
async def test_a_burst_of_changes_arrives_whole_and_in_order(api, namespace, caplog):
    seen: list[tuple[str, str, int]] = []
    listed = asyncio.Event()

    def on_event(kind, obj):
        if kind == "LIST":
            listed.set()
            return
        meta = obj["metadata"]
        seen.append((kind, meta["name"], int(meta["resourceVersion"])))
        if meta["name"] == "cm-7" and kind == "ADDED":
            raise RuntimeError("a handler's bug")

    loop = asyncio.get_running_loop()
    client = Api(api)
    log = logging.getLogger("test-informer")
    informer = Informer(client, CONFIG_MAP, "burst=yes", loop, on_event, timeout_seconds=30, log=log,
                        name="config maps").start()
    try:
        await asyncio.wait_for(listed.wait(), 30)

        def burst():
            for i in range(40):
                client.create(CONFIG_MAP, {"metadata": {"name": f"cm-{i}", "namespace": namespace,
                                                        "labels": {"burst": "yes"}}, "data": {"i": str(i)}})

        with caplog.at_level(logging.ERROR, logger="test-informer"):
            await asyncio.to_thread(burst)
            await until(lambda: len(seen) >= 40, "the forty config maps' events", 30, 0.1,
                        show=lambda: [name for _, name, _ in seen])
        assert [name for _, name, _ in seen] == [f"cm-{i}" for i in range(40)]
        versions = [v for _, _, v in seen]
        assert versions == sorted(versions)
        assert "handling a ADDED event of config maps failed" in caplog.text
    finally:
        informer.stop(timeout=5)
