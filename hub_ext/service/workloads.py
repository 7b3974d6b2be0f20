"""What users submit (a notebook or a training job), checked and turned into a pod template."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..quota import meta as m
from ..quota.dataset import mount_path, paths_clash
from ..quota.errors import ValidationError
from ..quota.pods import PodSpec, parse_pod_spec
from ..quota.quantity import _show, format_milli, parse_quantity, parse_resource_list
from .text import check_text

NOTEBOOK, TRAINING = "notebook", "training"
KINDS = (NOTEBOOK, TRAINING)
#: The states a workload ends in.
FINAL = ("Succeeded", "Failed", "Cancelled", "Stopped", "Preempted", "Rejected")
_FIELDS = {"kind", "name", "tenant", "namespace", "priorityClassName", "resources", "replicas", "command",
           "script", "env", "serverName", "profile", "gracePeriodSeconds", "gang", "datasets"}
#: Most datasets one workload may name.
MAX_DATASETS = 32
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: The least each pod is charged (``TenancyService.min_requests``).
MIN_REQUESTS = {"cpu": "100m", "memory": "64Mi"}


@dataclass(frozen=True)
class Bounds:
    """How much one submission may carry, and the least it is charged (the service's traitlets set them)."""

    max_replicas: int = 64
    max_command_bytes: int = 64 * 1024
    max_script_bytes: int = 256 * 1024
    max_env_bytes: int = 64 * 1024
    max_env_entries: int = 128
    min_requests: dict = field(default_factory=lambda: dict(MIN_REQUESTS))


def check_body(body, bounds: Bounds = Bounds()) -> dict:
    """The submission with its shape checked; ValidationError (a 400) names the field at fault."""
    body = m.mapping(body, "workload")
    check_text(body, "workload")  # before any of it is measured in bytes, stored or run
    m.unknown_keys(body, _FIELDS, "workload")
    kind = body.get("kind", TRAINING)
    if kind not in KINDS:
        raise ValidationError(f"workload: kind must be notebook or training, got {_show(kind)}")
    out = {"kind": kind}
    name = body.get("name")
    if name is not None:
        if not isinstance(name, str) or len(name) > 50 or not _NAME.match(name):
            raise ValidationError(f"workload: name {_show(name)} must be lowercase letters, digits and '-', at most 50")
        out["name"] = name
    for key in ("tenant", "namespace", "priorityClassName", "serverName", "profile"):
        if body.get(key) is not None:
            if not isinstance(body[key], str) or len(body[key]) > 255:
                raise ValidationError(f"workload: {key} must be a string of at most 255 characters")
            out[key] = body[key]
    if "namespace" in out:
        m.namespace_name(out["namespace"], "workload: namespace")
    resources = m.mapping(body.get("resources"), "workload: resources", optional=True)
    m.unknown_keys(resources, {"requests", "limits"}, "workload: resources")
    out["resources"] = {
        "requests": _quantities(resources.get("requests"), "workload: resources.requests"),
        "limits": _quantities(resources.get("limits"), "workload: resources.limits"),
    }
    out["replicas"] = m.integer(body.get("replicas", 1), "workload: replicas", minimum=1)
    if out["replicas"] > bounds.max_replicas:
        raise ValidationError(f"workload: replicas {out['replicas']} is more than the {bounds.max_replicas} "
                              "allowed in one job; ask an admin if you need more")
    if kind == NOTEBOOK and out["replicas"] != 1:
        raise ValidationError("workload: a notebook has exactly one replica")
    # Several replicas of a training job (DDP, MPI) are useless apart: one gang unless told otherwise.
    out["gang"] = m.boolean(body.get("gang", kind == TRAINING and out["replicas"] > 1), "workload: gang")
    if out["gang"] and kind == NOTEBOOK:
        raise ValidationError("workload: a notebook cannot be a gang")
    if kind == TRAINING:
        command, script = body.get("command"), body.get("script")
        if (command is None) == (script is None):
            raise ValidationError("workload: a training job needs exactly one of command (a list of strings) or script (Python source)")
        if command is not None:
            if not isinstance(command, list) or not command or not all(isinstance(c, str) for c in command):
                raise ValidationError("workload: command must be a non-empty list of strings")
            _at_most(sum(len(c.encode()) + 1 for c in command), bounds.max_command_bytes, "command")
            out["command"] = command
        else:
            if not isinstance(script, str) or not script.strip():
                raise ValidationError("workload: script must be non-empty Python source")
            _at_most(len(script.encode()), bounds.max_script_bytes, "script")
            out["script"] = script
    for text in out.get("command", []) + [out.get("script", "")]:
        if "\x00" in text:
            raise ValidationError("workload: command and script must not contain NUL characters")
    env = m.string_map(body.get("env"), "workload: env")
    if len(env) > bounds.max_env_entries:
        raise ValidationError(f"workload: env has {len(env)} variables, more than the {bounds.max_env_entries} allowed")
    _at_most(sum(len(k.encode()) + len(v.encode()) + 2 for k, v in env.items()), bounds.max_env_bytes, "env")
    if any("\x00" in k or "\x00" in v for k, v in env.items()):
        raise ValidationError("workload: env must not contain NUL characters")
    for key in env:
        if not _ENV_NAME.match(key):
            raise ValidationError(f"workload: env name {_show(key)} is not a valid variable name")
    out["env"] = env
    if body.get("gracePeriodSeconds") is not None:
        out["gracePeriodSeconds"] = m.integer(body["gracePeriodSeconds"], "workload: gracePeriodSeconds", maximum=3600)
    if body.get("datasets") is not None:
        out["datasets"] = check_datasets_field(body["datasets"])
    return out


def check_datasets_field(value) -> list[dict]:
    """The datasets a workload names, each ``{"name"}`` or ``{"name", "mountPath"}``: from strings
    ``"NAME"`` and ``"NAME:PATH"`` (Arena's ``--data``) or objects ``{"name", "mountPath"}``.
    Each name once; the paths given absolute, never over the home, never on or inside another's."""
    items = m.sequence(value, "workload: datasets")
    if len(items) > MAX_DATASETS:
        raise ValidationError(f"workload: datasets names {len(items)} datasets, more than the {MAX_DATASETS} allowed")
    out: list[dict] = []
    for i, item in enumerate(items):
        what = f"workload: datasets[{i}]"
        if isinstance(item, str):
            name, sep, path = item.partition(":")
            item = {"name": name, **({"mountPath": path} if sep else {})}
        item = m.mapping(item, what)
        m.unknown_keys(item, {"name", "mountPath"}, what)
        name = m.label_name(item.get("name"), f"{what}.name", "dataset name")
        entry = {"name": name}
        if item.get("mountPath") is not None:
            entry["mountPath"] = mount_path(item["mountPath"], f"{what}.mountPath", name)
        for other in out:
            if other["name"] == name:
                raise ValidationError(f"workload: datasets names {name} twice")
            if "mountPath" in entry and "mountPath" in other and paths_clash(entry["mountPath"], other["mountPath"]):
                raise ValidationError(f"workload: datasets: {name}'s mountPath {entry['mountPath']} clashes with "
                                      f"{other['name']}'s {other['mountPath']}")
        out.append(entry)
    return out


def _at_most(size: int, limit: int, field: str) -> None:
    if size > limit:
        raise ValidationError(f"workload: {field} is {size:,} bytes, more than the {limit:,} allowed; "
                              "put large inputs in a file of your team's storage instead")


def with_default_requests(spec: dict, defaults: dict[str, str], limit_ranges) -> dict:
    """``spec`` with ``defaults`` filled in for the resources it leaves open.

    A resource is open when the submission neither requests nor limits it (a limit
    alone is the request, as in Kubernetes) and no LimitRange of the namespace gives
    it a default: the LimitRange is the namespace's own answer and wins.
    """
    resources = spec["resources"]
    given = set(resources["requests"]) | set(resources["limits"])
    by_range = {res for lr in limit_ranges for item in lr.items for res in item.default_request}
    filled = {res: str(amount) for res, amount in defaults.items() if res not in given and res not in by_range}
    if not filled:
        return spec
    return {**spec, "resources": {**resources, "requests": {**resources["requests"], **filled}}}


def with_floor(spec: dict, floor: dict[str, str], limit_ranges) -> tuple[dict, list[str]]:
    """``spec`` with every request below ``floor`` raised to it, and a sentence for each raised.

    Without a floor a request of ``0`` (or ``1e-30``, charged one milli-unit) lets any number
    of pods run uncharged. The request compared is the one Kubernetes would use (a limit alone
    is the request); a limit below the floor is raised with it, so the request never exceeds
    the limit. A resource the submission leaves open that a LimitRange of its namespace fills
    is the namespace's own answer and is left to it.
    """
    resources = spec["resources"]
    requests, limits = dict(resources["requests"]), dict(resources["limits"])
    by_range = {res for lr in limit_ranges for item in lr.items for res in item.default_request}
    raised = []
    for res, least in floor.items():
        least_milli = parse_quantity(least, f"the floor of {res}")
        asked = requests.get(res, limits.get(res))
        if asked is None and res in by_range:
            continue
        if asked is not None and parse_quantity(asked, res) >= least_milli:
            continue
        requests[res] = least
        if res in limits and parse_quantity(limits[res], res) < least_milli:
            limits[res] = least
        given = "left open" if asked is None else f"{'request' if res in resources['requests'] else 'limit'} {asked}"
        raised.append(f"{res} {given} raised to the least a pod is charged, {format_milli(res, least_milli)}")
    if not raised:
        return spec, []
    return {**spec, "resources": {**resources, "requests": requests, "limits": limits}}, raised


def _quantities(raw, what: str) -> dict[str, str]:
    parse_resource_list(raw, what)  # the check; the text is kept as written
    return {k: str(v) for k, v in (raw or {}).items()}


def pod_template(spec: dict, priority_class: str, grace: int | None) -> PodSpec:
    raw = {
        "priorityClassName": priority_class,
        "containers": [{"name": spec["kind"], "resources": spec["resources"]}],
    }
    if grace is not None:
        raw["terminationGracePeriodSeconds"] = grace
    return parse_pod_spec(raw, f"{spec['kind']} {spec.get('name', '')}".strip())
