"""The service's watches and nothing else, in a process of their own: what following the cluster costs.

``--watched`` runs the plain side a second time while this process holds the watches the tenancy
service holds (its pods and its Jobs by label, the nodes, other pods), through the same
``Informer`` as the service, every event read, parsed and handed to an event loop that only counts
it. The control plane's extra CPU and this process's own are then a floor under the service side's
cost, whatever the service does with the events.

Run as ``python -m hub_ext.bench.watcher KUBECONFIG RUN_LABEL=RUN``; it prints ``ready`` once its
lists are in, and at SIGTERM one JSON line ``{"events": n}`` before it exits.
"""

from __future__ import annotations

import asyncio
import json
import select
import signal
import subprocess
import sys

from ..backends.kubernetes.api import JOB, NODE, POD, Api
from ..backends.kubernetes.informer import Informer
from .kube import RUN_LABEL, BenchError, api_client

READY_TIMEOUT = 60.0  # seconds for its four lists to come in


async def follow(kubeconfig: str, selector: str) -> int:
    api = Api(api_client(kubeconfig))
    loop = asyncio.get_running_loop()
    events = 0

    def count(kind, obj) -> None:
        nonlocal events
        events += len(obj) if kind == "LIST" else 1

    # the service's four: its pods, its Jobs, the nodes (all three by the run's label), and the pods of others
    informers = [Informer(api, kind, sel, loop, count, name=f"{kind.plural} {sel}").start()
                 for kind, sel in ((POD, selector), (JOB, selector), (NODE, selector), (POD, f"!{RUN_LABEL}"))]
    for informer in informers:
        await asyncio.to_thread(informer.synced.wait)
    print("ready", flush=True)
    stopped = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stopped.set)
    await stopped.wait()
    for informer in informers:
        informer.stop()
    return events


def main(argv: list[str]) -> int:
    kubeconfig, selector = argv
    try:
        events = asyncio.run(follow(kubeconfig, selector))
    except Exception as err:  # noqa: BLE001 - the benchmark reports its status; one line, not a traceback
        print(f"the watcher could not follow the cluster of {kubeconfig}: {err}", file=sys.stderr, flush=True)
        return 1
    print(json.dumps({"events": events}), flush=True)
    return 0


class Watcher:
    """The watcher process of one run: ``start()`` (returns once it follows), ``stop()`` (its event count)."""

    def __init__(self, kubeconfig: str, run: str):
        self.argv = [sys.executable, "-m", "hub_ext.bench.watcher", kubeconfig, f"{RUN_LABEL}={run}"]
        self.proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self, timeout: float = READY_TIMEOUT) -> "Watcher":
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, text=True)
        # its lists come from the API server: one that stops answering must not hang the benchmark
        answered = bool(select.select([self.proc.stdout], [], [], timeout)[0])
        if answered and self.proc.stdout.readline().strip() == "ready":
            return self
        proc, self.proc = self.proc, None
        proc.kill()
        proc.communicate()
        if not answered:
            raise BenchError(f"the watcher process did not follow the cluster within {timeout:.0f} s "
                             "(is the API server answering?)")
        raise BenchError(f"the watcher process ended before it followed the cluster (status {proc.returncode})")

    def stop(self) -> int:
        if self.proc is None:
            return 0
        proc, self.proc = self.proc, None
        proc.terminate()
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return 0
        lines = [line for line in out.splitlines() if line.startswith("{")]
        return json.loads(lines[-1])["events"] if lines else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
