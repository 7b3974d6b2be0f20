"""The chart's values.schema.json (helm/), checked with ``jsonschema`` alone (no helm, no cluster).

The schema is the only validation of the chart's values (z2jh's practice): helm applies it
before any template renders. Here: it is a valid draft-07 schema, ``values.yaml`` passes
it, every key of ``values.yaml`` is described in it, and a few mistakes merged over the
defaults (as helm merges ``-f`` files: maps merged, null removes a key) are refused at
their key. tests/k8s/test_helm.py checks the same through helm itself (``helm lint
--strict``, ``helm template`` refusing bad values with the key named).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

CHART = Path(__file__).resolve().parents[1] / "helm"
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)


def merged(base: dict, override: dict) -> dict:
    """``override`` over ``base`` as helm coalesces values: maps merge, null removes the key."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def errors(override: dict) -> list[tuple[str, str]]:
    return sorted((e.json_path, e.message) for e in VALIDATOR.iter_errors(merged(VALUES, override)))


def resolve(node: dict) -> dict:
    ref = node.get("$ref")
    if ref is None:
        return node
    target = SCHEMA
    for part in ref.removeprefix("#/").split("/"):
        target = target[part]
    return {**resolve(target), **{k: v for k, v in node.items() if k != "$ref"}}


def test_schema_is_draft7_and_values_yaml_passes():
    jsonschema.Draft7Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert errors({}) == []


def test_every_key_of_values_yaml_is_described():
    """Each key of values.yaml, at every depth where the schema lists properties, has its own
    entry with a description; and every top-level entry is in values.yaml (but Helm's own)."""
    missing = []

    def walk(values: dict, node: dict, path: str):
        props = resolve(node).get("properties")
        if props is None:  # an open map (labels, config by class): its keys are the user's
            return
        for key, value in values.items():
            entry = props.get(key)
            if entry is None or not resolve(entry).get("description"):
                missing.append(f"{path}{key}")
            elif isinstance(value, dict):
                walk(value, entry, f"{path}{key}.")

    walk(VALUES, SCHEMA, "")
    assert missing == []
    assert set(SCHEMA["properties"]) - set(VALUES) == {"global", "enabled"}  # from a parent chart


@pytest.mark.parametrize("override, where, says", [
    ({"service": {"port": "http"}}, "$.service.port", "is not of type 'integer'"),
    ({"replica": 2}, "$", "'replica' was unexpected"),
    ({"training": {"useJob": False}}, "$.training", "'useJob' was unexpected"),
    ({"kubernetes": {"createConcurrency": -1}}, "$.kubernetes.createConcurrency", "less than the minimum of 1"),
    ({"kubernetes": {"apiQps": -1}}, "$.kubernetes.apiQps", "less than the minimum of 0"),
    ({"quotaTree": {"storage": "nowhere"}}, "$.quotaTree.storage", "is not one of ['config', 'object']"),
    ({"pdb": {"minAvailable": "half"}}, "$.pdb.minAvailable", "does not match"),
    ({"config": {"KubernetesBackend": {"x = 1; y": 1}}}, "$.config.KubernetesBackend",
     "'x = 1; y' does not match any of the regexes"),
    ({"serviceAccount": {"create": False}}, "$.serviceAccount.name", "should be non-empty"),
    ({"replicas": 0}, "$.replicas", "less than the minimum of 1"),
    ({"replicas": 2}, "$.database", "is not valid under any of the given schemas"),  # SQLite
    ({"replicas": 3, "database": {"url": "mysql://db/t"}}, "$.database", "is not valid under any of the given schemas"),
    ({"leaderElection": {"retryPeriodSeconds": 0}}, "$.leaderElection.retryPeriodSeconds",
     "less than or equal to the minimum of 0"),
    ({"culler": {"timeout": 0}}, "$.culler.timeout", "less than the minimum of 1"),
    ({"culler": {"enabled": "yes"}}, "$.culler.enabled", "is not of type 'boolean'"),
    ({"culler": {"timout": 600}}, "$.culler", "'timout' was unexpected"),
], ids=["wrong type", "unknown key", "typo", "negative pool", "negative qps", "enum", "percentage", "trait name",
        "service account name", "no replica", "replicas on SQLite", "replicas on MySQL", "no retry period",
        "culler timeout 0", "culler on as a word", "culler typo"])
def test_mistakes_are_refused_at_their_key(override, where, says):
    found = errors(override)
    assert [path for path, _ in found] == [where], found
    assert says in found[0][1], found


def test_values_that_are_fine():
    for override in ({"pdb": {"enabled": True, "maxUnavailable": "50%"}},
                     {"kubernetes": {"apiQps": 0, "apiBurst": 1, "createConcurrency": 64}},
                     {"provision": {"resourceQuota": None, "priorityClasses": []}},
                     {"serviceAccount": {"create": False, "name": "tenancy"}},
                     {"database": {"urlSecret": {"name": "tenancy-db"}}},
                     {"grafanaDashboard": {"enabled": True, "labels": {"dashboards": "grafana"}}},
                     {"replicas": 2, "database": {"url": "postgresql://tenancy@db:5432/tenancy"}},
                     {"replicas": 2, "database": {"url": "postgresql+psycopg://tenancy@db/tenancy"}},
                     {"replicas": 3, "database": {"urlSecret": {"name": "tenancy-db"}}, "pdb": {"enabled": False}},
                     {"leaderElection": {"leaseDurationSeconds": 30, "renewDeadlineSeconds": 20.5}},
                     {"culler": {"enabled": True, "timeout": 600, "every": 60, "serviceName": "cull"}}):
        assert errors(override) == [], override
