"""How a pod mounts the datasets its workload uses: volumes, volume mounts and ``TENANCY_DATASETS``. No I/O.

``uses`` is what the service says a workload mounts (``controller.datasets.uses(row)``
for a training pod; the ``datasets`` list of the workload's JSON for a notebook):
``[{"name", "mountPath", "readOnly", "volume"}]``, ``volume`` being the pod volume
source (``quota.dataset.volume_source``: the namespace's claim, or a ``hostPath``).
Training Jobs (``training.py``) and notebook pods (``spawner/kube.py``) are given
the same three things from it, so both mount a dataset alike.
"""

from __future__ import annotations

import hashlib
import json

#: the environment variable every workload gets: a JSON object, dataset name -> where it is mounted
ENV = "TENANCY_DATASETS"
VOLUME_PREFIX = "dataset-"


def volume_name(dataset: str) -> str:
    """The pod volume that mounts ``dataset``: ``dataset-<name>``, a DNS label (hashed when too long)."""
    name = VOLUME_PREFIX + dataset
    if len(name) <= 63:
        return name
    return VOLUME_PREFIX + hashlib.sha256(dataset.encode()).hexdigest()[:16]


def volumes(uses) -> list[dict]:
    """``spec.volumes`` entries, one per dataset."""
    return [{"name": volume_name(u["name"]), **u["volume"]} for u in uses or []]


def volume_mounts(uses) -> list[dict]:
    """A container's ``volumeMounts``, read-only as each dataset says."""
    return [{"name": volume_name(u["name"]), "mountPath": u["mountPath"], "readOnly": bool(u.get("readOnly", True))}
            for u in uses or []]


def env_value(uses) -> str:
    """``TENANCY_DATASETS``: ``{"name": "/mount/path"}`` as JSON (``{}`` when the workload mounts none)."""
    return json.dumps({u["name"]: u["mountPath"] for u in uses or []}, sort_keys=True)
