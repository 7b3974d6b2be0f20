"""``%%train``: run a cell as a training job on the team's quota.

Example::

    %%train --cpu 2 --gpu 1 --replicas 2 --name resnet
    import torch
    ...

Options: --cpu, --memory, --gpu, --replicas, --no-gang, --priority-class, --tenant, --name, --wait, --yes,
--wait-instead, --data NAME[:PATH] (repeatable). Several replicas start all together (one gang) unless ``--no-gang``.
``--data`` names the datasets the job mounts (Arena's flag; at PATH when given): the job
waits until they are ready. Without it, every dataset of the team that is ready.

One live status line follows the job (queued, running, done, with a link to its logs).
If the job would stop anybody's work to make room (one of your own notebook servers, a
colleague's notebook or job), it is not submitted: the line says whose, ``--yes`` goes
ahead anyway and ``--wait-instead`` submits it at the lower priority at which it stops
nobody (it waits instead). The job is kept in the
variable ``train_job`` of the notebook (``train_job.logs()``, ``train_job.cancel()``).
"""

from __future__ import annotations

import argparse
import shlex

from .api import TenancyError, submit_training


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="%%train", add_help=False)
    p.add_argument("--cpu")
    p.add_argument("--memory")
    p.add_argument("--gpu")
    p.add_argument("--replicas", type=int, default=1)
    p.add_argument("--no-gang", dest="gang", action="store_false", default=None)
    p.add_argument("--priority-class", dest="priority_class")
    p.add_argument("--tenant")
    p.add_argument("--name")
    p.add_argument("--wait", action="store_true")
    p.add_argument("--yes", action="store_true")
    p.add_argument("--wait-instead", dest="wait_instead", action="store_true")
    p.add_argument("--data", action="append", metavar="NAME[:PATH]")
    return p


def train(line: str, cell: str):
    try:
        args = _parser().parse_args(shlex.split(line))
    except SystemExit:
        print("usage: %%train [--cpu N] [--memory Q] [--gpu N] [--replicas N] [--no-gang] [--priority-class C] "
              "[--tenant T] [--name N] [--wait] [--yes] [--wait-instead] [--data NAME[:PATH]]...")
        return None
    try:
        job = submit_training(script=cell, cpu=args.cpu, memory=args.memory, gpu=args.gpu, replicas=args.replicas,
                              priority_class=args.priority_class, tenant=args.tenant, name=args.name, wait=args.wait,
                              yes=args.yes, wait_instead=args.wait_instead, show=True, gang=args.gang, datasets=args.data)
    except TenancyError as err:
        print(f"training job not submitted: {err}")
        return None
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None:
        shell.user_ns["train_job"] = job
    # Nothing returned: the live line is the one output (a returned job would show a second one).
    return None


def register(ipython) -> None:
    ipython.register_magic_function(train, magic_kind="cell", magic_name="train")
