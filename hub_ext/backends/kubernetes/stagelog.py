"""The cluster benchmark's record of each training create (``KubernetesBackend.stage_log``).

One JSON line per create, wall-clock seconds: ``queued`` (its task began, after the pass that
admitted the pod), ``slot`` (it got one of the ``create_concurrency`` slots), ``sent`` (a worker
thread began the call: the client's rate limiter is after this) and ``created`` (the API server
answered). Off unless the file is configured: the hot path then pays one ``is None`` per create.
"""

from __future__ import annotations

import json
import time


class StageLog:
    def __init__(self, path: str):
        self.file = open(path, "a", buffering=1, encoding="utf-8")  # a line each: readable while it runs
        self.queued: dict[tuple[str, str], float] = {}

    def started(self, namespace: str, name: str) -> None:
        self.queued[(namespace, name)] = time.time()

    async def create(self, calls, create, kind, body):
        """``create(kind, body)`` through ``calls``, its moments written as one line."""
        meta = body["metadata"]
        times = {"namespace": meta.get("namespace"), "name": meta["name"], "kind": kind.name,
                 "queued": self.queued.pop((meta.get("namespace"), meta["name"]), None), "slot": time.time()}

        def timed():
            times["sent"] = time.time()
            obj = create(kind, body)
            times["created"] = time.time()
            return obj

        obj = await calls.call(timed)
        self.file.write(json.dumps(times) + "\n")
        return obj

    def close(self) -> None:
        self.file.close()
