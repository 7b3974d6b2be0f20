"""What users submit (a notebook or a training job), checked and turned into a pod template."""

from __future__ import annotations

import re

from ..quota import meta as m
from ..quota.errors import ValidationError
from ..quota.pods import PodSpec, parse_pod_spec
from ..quota.quantity import parse_resource_list

NOTEBOOK, TRAINING = "notebook", "training"
KINDS = (NOTEBOOK, TRAINING)
_FIELDS = {"kind", "name", "tenant", "namespace", "priorityClassName", "resources", "replicas", "command",
           "script", "env", "serverName", "profile", "gracePeriodSeconds"}
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def check_body(body) -> dict:
    """The submission with its shape checked; ValidationError (a 400) names the field at fault."""
    body = m.mapping(body, "workload")
    m.unknown_keys(body, _FIELDS, "workload")
    kind = body.get("kind", TRAINING)
    if kind not in KINDS:
        raise ValidationError(f"workload: kind must be notebook or training, got {kind!r}")
    out = {"kind": kind}
    name = body.get("name")
    if name is not None:
        if not isinstance(name, str) or len(name) > 50 or not _NAME.match(name):
            raise ValidationError(f"workload: name {name!r} must be lowercase letters, digits and '-', at most 50")
        out["name"] = name
    for key in ("tenant", "namespace", "priorityClassName", "serverName", "profile"):
        if body.get(key) is not None:
            if not isinstance(body[key], str):
                raise ValidationError(f"workload: {key} must be a string")
            out[key] = body[key]
    if "namespace" in out:
        m.namespace_name(out["namespace"], "workload: namespace")
    resources = m.mapping(body.get("resources"), "workload: resources", optional=True)
    m.unknown_keys(resources, {"requests", "limits"}, "workload: resources")
    out["resources"] = {
        "requests": _quantities(resources.get("requests"), "workload: resources.requests"),
        "limits": _quantities(resources.get("limits"), "workload: resources.limits"),
    }
    out["replicas"] = m.integer(body.get("replicas", 1), "workload: replicas", minimum=1, maximum=1000)
    if kind == NOTEBOOK and out["replicas"] != 1:
        raise ValidationError("workload: a notebook has exactly one replica")
    if kind == TRAINING:
        command, script = body.get("command"), body.get("script")
        if (command is None) == (script is None):
            raise ValidationError("workload: a training job needs exactly one of command (a list of strings) or script (Python source)")
        if command is not None:
            if not isinstance(command, list) or not command or not all(isinstance(c, str) for c in command):
                raise ValidationError("workload: command must be a non-empty list of strings")
            out["command"] = command
        else:
            if not isinstance(script, str) or not script.strip():
                raise ValidationError("workload: script must be non-empty Python source")
            out["script"] = script
    for text in out.get("command", []) + [out.get("script", "")]:
        if "\x00" in text:
            raise ValidationError("workload: command and script must not contain NUL characters")
    env = m.string_map(body.get("env"), "workload: env")
    if any("\x00" in k or "\x00" in v for k, v in env.items()):
        raise ValidationError("workload: env must not contain NUL characters")
    for key in env:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise ValidationError(f"workload: env name {key!r} is not a valid variable name")
    out["env"] = env
    if body.get("gracePeriodSeconds") is not None:
        out["gracePeriodSeconds"] = m.integer(body["gracePeriodSeconds"], "workload: gracePeriodSeconds", maximum=3600)
    return out


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
