"""The service's threads under their own names in the operating system.

``top -H``, ``ps -T`` and ``/proc/<pid>/task/<tid>/comm`` show a Python thread under the
process's name unless the thread names itself; named, an operator sees which of the service's
threads uses the CPU (a watch, the pool that calls the API server), and ``tenancy bench
--cluster`` reports the service's CPU by these names. Needs ``setproctitle`` (installed with
the test extras); without it the threads keep the process's name and nothing else changes.
"""

from __future__ import annotations

import threading

#: the kernel keeps 15 bytes of a thread's name
LONGEST = 15


def short(name: str) -> str:
    """A thread's name as the kernel can keep it: without the ``tenancy-`` every one of ours
    starts with, cut to 15 bytes."""
    name = name.removeprefix("tenancy-")
    return name.encode()[:LONGEST].decode(errors="ignore")


def name_this_thread(name: str | None = None) -> None:
    """Give the calling thread ``name`` (default: its Python name) in the operating system.
    Also a ``ThreadPoolExecutor``'s ``initializer``: each worker takes its own Python name. The main
    thread is left alone: its name is the process's own (``ps``, ``pkill``)."""
    if threading.current_thread() is threading.main_thread():
        return
    try:
        from setproctitle import setthreadtitle
    except ImportError:
        return
    setthreadtitle(short(name or threading.current_thread().name))
