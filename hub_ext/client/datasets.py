"""Datasets in a terminal and a notebook: the table ``tenancy datasets`` prints, what a dry run would
provision, the Dataset objects of a file for ``tenancy datasets apply``, and the ``--data NAME[:PATH]``
choices a job names (Arena's flag, ``submit_training(datasets=[...])``, ``%%train --data``).

The shapes read here are the service's (``GET /api/v1/datasets``, ``PUT ...?dryRun=true``).
"""

from __future__ import annotations

from ..quota.errors import ValidationError
from ..vocabulary import dataset_state, quantity

#: The columns of ``tenancy datasets``, as wide as their widest cell (kubectl's way); the state comes last,
#: never cut. A description longer than this is cut with an ellipsis.
HEADINGS = ("NAME", "DESCRIPTION", "MOUNT PATH", "READ-ONLY", "IN USE", "STATE")
DESCRIPTION_WIDTH = 32


def data_choices(items) -> list:
    """The ``datasets`` a workload body carries, from ``NAME``, ``NAME:PATH`` or ``{"name", "mountPath"}`` items.

    Strings are checked only for what would be lost on the way (an empty name, a relative
    path); whether the dataset exists and the namespace may use it is the service's to say.
    """
    out = []
    for item in items or []:
        if isinstance(item, dict):
            out.append(item)
            continue
        if not isinstance(item, str):
            raise ValidationError(f"dataset {item!r}: give NAME or NAME:PATH")
        name, _, path = item.partition(":")
        if not name.strip():
            raise ValidationError(f"dataset {item!r}: the dataset's name is missing (NAME or NAME:PATH)")
        if _ and not path.startswith("/"):
            raise ValidationError(f"dataset {item!r}: the path {path!r} must be absolute (start it with /)")
        out.append(item.strip())
    return out


def _states(d: dict) -> str:
    """Each namespace's state that the service showed the caller (a user: their own namespaces only)."""
    status = d.get("status") or {}
    return ", ".join(f"{ns} {dataset_state((s or {}).get('state') or 'Pending')}" for ns, s in status.items()) \
        or "no namespace of yours"


def _in_use(d: dict) -> str:
    used = {ns: n for ns, n in (d.get("inUse") or {}).items() if n}
    return ", ".join(f"{ns} {n}" for ns, n in used.items()) or "none"


def _cut(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def table(datasets: list[dict]) -> str:
    """One row per dataset; under it, a line for each namespace where it is not ready, with the words why."""
    if not datasets:
        return "No dataset is declared for your teams."
    rows = [HEADINGS] + [(d["name"], _cut(d.get("description") or "", DESCRIPTION_WIDTH), d.get("mountPath") or "",
                          "yes" if d.get("readOnly") else "no", _in_use(d), _states(d)) for d in datasets]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADINGS) - 1)]
    lines = []
    for r, d in zip(rows, [None] + datasets):
        lines.append("   ".join([f"{c:<{w}}" for c, w in zip(r, widths)] + [r[-1]]))
        for ns, s in ((d or {}).get("status") or {}).items():
            if (s or {}).get("state") != "Bound" and (s or {}).get("message"):
                lines.append(f"  {ns}: {dataset_state(s['state'])}: {s['message']}")
    return "\n".join(lines)


def capacity(d: dict) -> str:
    """``10 GiB, ReadWriteMany``: what each namespace's claim holds and how it may be mounted ("" when neither)."""
    parts = [quantity("storage", d["size"])] if d.get("size") else []
    return ", ".join(parts + list(d.get("accessModes") or []))


def provision_text(answer: dict) -> str:
    """A dry run's answer as lines: each namespace's action, and the quota's words where it would be refused."""
    d = answer.get("dataset") or {}
    lines = [f"{d.get('name', '?')}: dry run, nothing changed; this would:"]
    for p in answer.get("provision") or []:
        line = f"  {p['namespace']}: {p['action']}"
        if p.get("refused"):
            line += f", refused: {p['refused']}"
        lines.append(line)
    if len(lines) == 1:
        lines.append("  provision nothing (no namespace may use it)")
    return "\n".join(lines)


def applied_text(d: dict) -> str:
    """``fashion-mnist: applied; team-a ready, team-b not ready yet``."""
    return f"{d['name']}: applied; {_states(d)}"


def read_manifests(path: str) -> list[dict]:
    """The Dataset objects of a YAML or JSON file (several documents or a List too), each checked as the
    service will; together they are checked as one set (names and mount paths unique)."""
    from ..quota.dataset import KIND, parse_datasets
    from ..quota.manifests import flatten, read_file

    docs = flatten(read_file(path), path)
    if not docs:
        raise ValidationError(f"{path}: no Dataset in it")
    for i, raw in enumerate(docs):
        if raw.get("kind") != KIND:
            what = f"a {raw['kind']}" if isinstance(raw.get("kind"), str) else "an object without a kind"
            raise ValidationError(f"{path}: document {i + 1}: {what}, not a {KIND} (kind: {KIND})")
    parse_datasets(docs, lambda i: f"{path}: document {i + 1}", str(path))
    return docs
