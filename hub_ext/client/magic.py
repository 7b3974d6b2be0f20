"""``%%train``: run a cell as a training job on the team's quota.

Example::

    %%train --cpu 2 --gpu 1 --replicas 2 --name resnet
    import torch
    ...

Options: --cpu, --memory, --gpu, --replicas, --priority-class, --tenant, --name, --wait.
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
    p.add_argument("--priority-class", dest="priority_class")
    p.add_argument("--tenant")
    p.add_argument("--name")
    p.add_argument("--wait", action="store_true")
    return p


def train(line: str, cell: str):
    try:
        args = _parser().parse_args(shlex.split(line))
    except SystemExit:
        print("usage: %%train [--cpu N] [--memory Q] [--gpu N] [--replicas N] [--priority-class C] "
              "[--tenant T] [--name N] [--wait]")
        return None
    try:
        job = submit_training(script=cell, cpu=args.cpu, memory=args.memory, gpu=args.gpu, replicas=args.replicas,
                              priority_class=args.priority_class, tenant=args.tenant, name=args.name, wait=args.wait)
    except TenancyError as err:
        print(f"training job refused: {err}")
        return None
    print(job.status())
    return job


def register(ipython) -> None:
    ipython.register_magic_function(train, magic_kind="cell", magic_name="train")
