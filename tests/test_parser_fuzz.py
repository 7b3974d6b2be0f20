"""Property tests for the parsers: bad input ends in ``ValidationError`` (one line), never anything else.

The contract (hub_ext/quota/errors.py, DESIGN.md): everything that reads user input
-- ``load_yaml``, ``parse_object``, ``parse_tree``, ``parse_scenario`` -- either
succeeds or raises ``hub_ext.quota.ValidationError`` whose text is one line. Any
other exception is a bug (the CLI turns it into "internal error", exit 3).

(a) random YAML-ish text and random nested Python structures;
(b) valid manifests with one leaf (or subtree) replaced by a value of another type;
(c) ``parse_quantity`` / ``format_milli`` round trips;
(d) mutated valid scenarios run through the simulator, whose reports must be valid JSON.

Runs are derandomized (same examples every run, so CI is not flaky); set
``TENANCY_FUZZ_RANDOM=1`` to explore new examples locally.
"""

from __future__ import annotations

import copy
import json
import math
import os
from decimal import Decimal

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hub_ext.quota import ValidationError, format_milli, load_yaml, parse_object, parse_quantity, parse_tree
from hub_ext.quota.manifests import flatten
from hub_ext.sim.scenario import parse_scenario
from hub_ext.sim.simulator import Simulator

RANDOM = os.environ.get("TENANCY_FUZZ_RANDOM") == "1"
FUZZ = settings(
    max_examples=200,
    deadline=None,
    derandomize=not RANDOM,
    database=None if not RANDOM else settings.default.database,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def only_validation_errors(fn, *args):
    """Call ``fn``; a ValidationError must be one line; any other exception propagates (a failure)."""
    try:
        return fn(*args)
    except ValidationError as err:
        text = str(err)
        assert "\n" not in text and "\r" not in text, f"multi-line error: {text!r}"
        assert text.strip(), "empty error message"
        return None


# -- building blocks -----------------------------------------------------------------

KEYS = [
    "apiVersion", "kind", "metadata", "name", "namespace", "generateName", "labels", "annotations", "spec",
    "root", "min", "max", "namespaces", "children", "attributes", "hard", "scopes", "scopeSelector",
    "matchExpressions", "scopeName", "operator", "values", "limits", "type", "default", "defaultRequest",
    "maxLimitRequestRatio", "value", "globalDefault", "preemptionPolicy", "description", "priorityClassName",
    "containers", "initContainers", "resources", "requests", "overhead", "replicas", "parallelism",
    "completions", "template", "selector", "terminationGracePeriodSeconds", "activeDeadlineSeconds",
    "nodeSelector", "nodes", "objects", "steps", "apply", "delete", "advance", "allocatable", "status",
    "capacity", "items", "cpu", "memory", "nvidia.com/gpu", "pods", "requests.cpu", "limits.memory",
    "tenancy.jupyter.org/duration", "tenancy.jupyter.org/preemptible",
]
KINDS = [
    "ElasticQuotaTree", "ResourceQuota", "LimitRange", "PriorityClass", "Namespace", "Node", "Pod",
    "Deployment", "ReplicaSet", "StatefulSet", "Job", "List", "Service", "Dataset",
]
QUANTITY_TEXT = st.sampled_from(
    ["500m", "2", "10Gi", "1.5", "0", "-1", "10Gx", "abc", "1e3", "1E18", "1e400", "1e-400", "NaN", "Infinity",
     ".5", "5.", "1Ki", "1k", "0.0001", "9223372036854775", "9223372036854776", "", " ", "30s", "5m", "1h",
     "-5s", "true", "false", "Never", "PreemptLowerPriority", "Container", "Pod", "BestEffort", "PriorityClass",
     "In", "Exists", "scheduling.sigs.k8s.io/v1beta1", "apps/v1", "v1", "team-a", "kube-system"]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([10**400, -(10**400), 2**63, 2**63 - 1, 0, 1, -1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    QUANTITY_TEXT,
    st.sampled_from(KINDS),
)
KEY = st.one_of(st.sampled_from(KEYS), st.text(max_size=8), st.integers(-3, 3), st.none(), st.booleans())


def nested(max_leaves=30):
    return st.recursive(
        SCALARS,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(KEY, inner, max_size=5),
        ),
        max_leaves=max_leaves,
    )


@st.composite
def manifest_like(draw):
    """A mapping that at least names a known kind, so the parsers go deep."""
    body = draw(st.dictionaries(st.sampled_from(KEYS), nested(20), max_size=6))
    body["kind"] = draw(st.sampled_from(KINDS))
    if draw(st.booleans()):
        body["apiVersion"] = draw(st.sampled_from(["v1", "apps/v1", "batch/v1", "scheduling.sigs.k8s.io/v1beta1", 7]))
    return body


YAML_CHARS = st.sampled_from(list("-:[]{},#&*!|>'\"%@`?\\ \t\n\r") + list("abcxyz0129.") + ["\u00e9", "\ufeff", "\x00", "\x85"])
YAML_TOKENS = st.sampled_from(
    ["\n", "  ", "- ", ": ", "{", "}", "[", "]", ", ", "&a ", "*a", "!!python/object:os.system ", "!!binary ",
     "---\n", "...\n", "? ", "|\n", ">\n", "'", '"', "#", "\t", "kind", "Pod", "metadata", "name", "spec",
     "steps", "apply", "nodes", "objects", "10Gi", "500m", "<<: *a", "~", "null", ".inf", ".nan", "0x1F", "1e3"]
)
YAMLISH = st.one_of(
    st.text(YAML_CHARS, max_size=80),
    st.lists(YAML_TOKENS, max_size=40).map("".join),
    nested(15).map(lambda v: yaml.safe_dump(v, default_flow_style=None) if _dumpable(v) else repr(v)),
)


def _dumpable(value) -> bool:
    try:
        yaml.safe_dump(value)
        return True
    except Exception:  # noqa: BLE001 - only choosing how to render a random value
        return False


# -- (a) random text and random structures -------------------------------------------------

@FUZZ
@given(YAMLISH)
def test_load_yaml_only_raises_validation_error(text):
    docs = only_validation_errors(load_yaml, text, "fuzz.yaml")
    if docs is None:
        return
    assert isinstance(docs, list)
    for doc in docs:
        only_validation_errors(parse_object, doc)
        only_validation_errors(parse_tree, doc)
        only_validation_errors(parse_scenario, doc)
        only_validation_errors(flatten, [doc], "fuzz.yaml")


@FUZZ
@given(nested(40))
def test_random_structures_only_raise_validation_error(value):
    only_validation_errors(parse_object, value)
    only_validation_errors(parse_tree, value)
    only_validation_errors(parse_scenario, value)


@FUZZ
@given(manifest_like())
def test_random_manifests_only_raise_validation_error(value):
    only_validation_errors(parse_object, value)
    only_validation_errors(parse_tree, value)
    only_validation_errors(parse_scenario, {"objects": [value]})
    only_validation_errors(parse_scenario, {"steps": [{"apply": [value]}]})


@FUZZ
@given(st.dictionaries(st.sampled_from(["name", "description", "nodes", "objects", "steps"]), nested(25), max_size=5))
def test_random_scenarios_only_raise_validation_error(value):
    only_validation_errors(parse_scenario, value)


def test_deeply_nested_lists_are_a_validation_error():
    """A Python caller (the service) may hand over anything; depth must not escape as RecursionError."""
    value = []
    for _ in range(5000):
        value = [value]
    only_validation_errors(parse_scenario, {"objects": value})


# -- (b) mutations of valid manifests ---------------------------------------------------

VALID = {
    "tree": {
        "apiVersion": "scheduling.sigs.k8s.io/v1beta1",
        "kind": "ElasticQuotaTree",
        "metadata": {"name": "elasticquotatree", "namespace": "kube-system"},
        "spec": {"root": {
            "name": "root", "max": {"cpu": 40, "memory": "40Gi", "nvidia.com/gpu": 4},
            "min": {"cpu": 40, "memory": "40Gi", "nvidia.com/gpu": 4},
            "children": [
                {"name": "root.a", "max": {"cpu": 40}, "min": {"cpu": 20}, "children": [
                    {"name": "root.a.1", "namespaces": ["namespace1"], "max": {"cpu": 20}, "min": {"cpu": 10}},
                    {"name": "root.a.2", "namespaces": ["namespace2"], "max": {"cpu": 20}, "min": {"cpu": 10}},
                ]},
                {"name": "root.b", "namespaces": ["namespace3"], "max": {"cpu": 40}, "min": {"cpu": 20},
                 "attributes": {"note": "x"}},
            ],
        }},
    },
    "resourcequota": {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "dev-quota", "namespace": "team-alpha"},
        "spec": {
            "hard": {"requests.cpu": "20", "requests.memory": "100Gi", "limits.cpu": "40", "limits.memory": "200Gi",
                     "requests.nvidia.com/gpu": "4", "pods": "10"},
            "scopes": ["NotBestEffort"],
            "scopeSelector": {"matchExpressions": [
                {"scopeName": "PriorityClass", "operator": "In", "values": ["low-priority-dev"]}]},
        },
    },
    "limitrange": {
        "apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults", "namespace": "team-alpha"},
        "spec": {"limits": [
            {"type": "Container", "defaultRequest": {"cpu": "500m"}, "default": {"cpu": "1"},
             "max": {"cpu": "8"}, "min": {"cpu": "100m"}, "maxLimitRequestRatio": {"cpu": "4"}},
            {"type": "Pod", "max": {"memory": "64Gi"}},
        ]},
    },
    "priorityclass": {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "critical-prod"},
        "value": 1000000, "globalDefault": False, "preemptionPolicy": "PreemptLowerPriority",
        "description": "用于关键的生产训练和服务工作负载。",
    },
    "namespace": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-alpha", "labels": {"a": "b"}}},
    "node": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
             "status": {"allocatable": {"cpu": "56", "memory": "256Gi", "nvidia.com/gpu": "8", "pods": "110"}}},
    "pod": {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "prod-training-job-1", "namespace": "team-alpha",
                     "annotations": {"tenancy.jupyter.org/duration": "60s", "tenancy.jupyter.org/preemptible": "true"}},
        "spec": {"priorityClassName": "critical-prod", "terminationGracePeriodSeconds": 10,
                 "activeDeadlineSeconds": 600, "nodeSelector": {"gpu": "a100"}, "overhead": {"cpu": "100m"},
                 "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "1"}}}],
                 "containers": [{"name": "training-container", "image": "pytorch/pytorch:latest",
                                 "resources": {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 1}}}]},
    },
    "deployment": {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx1", "namespace": "namespace1", "labels": {"app": "nginx1"}},
        "spec": {"replicas": 5, "selector": {"matchLabels": {"app": "nginx1"}}, "template": {
            "metadata": {"name": "nginx1", "labels": {"app": "nginx1"}},
            "spec": {"containers": [{"name": "nginx1", "image": "nginx",
                                     "resources": {"limits": {"cpu": 5}, "requests": {"cpu": 5}}}]}}},
    },
    "job": {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "team-b"},
        "spec": {"parallelism": 2, "completions": 4, "template": {
            "metadata": {"annotations": {"tenancy.jupyter.org/duration": "60s"}},
            "spec": {"priorityClassName": "high-priority-research", "restartPolicy": "Never",
                     "containers": [{"name": "t", "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": 1}}}]}}},
    },
    "dataset": {
        "apiVersion": "tenancy.jupyter.org/v1alpha1", "kind": "Dataset", "metadata": {"name": "fashion-mnist"},
        "spec": {"description": "Fashion-MNIST", "teams": ["team-a"], "namespaces": ["team-a"], "readOnly": True,
                 "source": {"persistentVolume": {"capacity": {"storage": "10Gi"}, "hostPath": {"path": "/srv"}}},
                 "mountPath": "/datasets/fashion", "size": "10Gi"},
    },
}
SCENARIO = {
    "name": "fuzz",
    "nodes": [{"name": "n1", "allocatable": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4"},
               "labels": {"gpu": "a100"}}],
    "objects": [
        {**VALID["tree"], "spec": {"root": {
            "name": "root", "min": {"cpu": 16, "nvidia.com/gpu": 4}, "max": {"cpu": 16, "nvidia.com/gpu": 4},
            "children": [
                {"name": "a", "namespaces": ["team-a"], "min": {"nvidia.com/gpu": 2}, "max": {"nvidia.com/gpu": 4}},
                {"name": "b", "namespaces": ["team-b"], "min": {"nvidia.com/gpu": 2}, "max": {"nvidia.com/gpu": 4}},
            ]}}},
        {**VALID["resourcequota"], "metadata": {"name": "dev-quota", "namespace": "team-a"}},
        {**VALID["limitrange"], "metadata": {"name": "defaults", "namespace": "team-a"}},
        VALID["priorityclass"],
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
    ],
    "steps": [
        {"name": "notebooks", "apply": [{
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nb", "namespace": "team-a"},
            "spec": {"replicas": 4, "template": {"spec": {
                "terminationGracePeriodSeconds": 5,
                "containers": [{"name": "nb", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": 1}}}]}}}}]},
        {"apply": [{**VALID["job"], "metadata": {"name": "train", "namespace": "team-b"}}]},
        {"advance": "90s"},
        {"delete": [{"kind": "Deployment", "namespace": "team-a", "name": "nb"}]},
        {"advance": 30},
    ],
}


def leaf_paths(value, path=()):
    """Paths to every scalar leaf (and every container, for subtree replacement) of a JSON-like value."""
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaf_paths(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaf_paths(v, path + (i,))


def replace_at(value, path, new):
    value = copy.deepcopy(value)
    if not path:
        return new
    target = value
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new
    return value


def _type_name(value) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float, Decimal)):
        return "number"
    return type(value).__name__


OTHER_TYPE_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.sampled_from([10**400, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=10), QUANTITY_TEXT,
    st.lists(SCALARS, max_size=3), st.dictionaries(KEY, SCALARS, max_size=3),
)


@st.composite
def mutated(draw, original):
    paths = list(leaf_paths(original))
    path = draw(st.sampled_from(paths))
    old = original
    for key in path:
        old = old[key]
    new = draw(OTHER_TYPE_VALUES.filter(lambda v: _type_name(v) != _type_name(old)))
    return replace_at(original, path, new)


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_manifests_parse(name):
    """The mutation bases themselves are valid (otherwise (b) proves nothing)."""
    parse_object(VALID[name])


def test_valid_scenario_runs():
    reports = list(Simulator(parse_scenario(SCENARIO)).run())
    assert len(reports) == len(SCENARIO["steps"])


@pytest.mark.parametrize("name", sorted(VALID))
@settings(FUZZ, max_examples=60)
@given(data=st.data())
def test_mutated_manifests_only_raise_validation_error(name, data):
    value = data.draw(mutated(VALID[name]))
    only_validation_errors(parse_object, value)
    only_validation_errors(parse_scenario, {"objects": [value]})


@FUZZ
@given(mutated(SCENARIO))
def test_mutated_scenarios_only_raise_validation_error(value):
    only_validation_errors(parse_scenario, value)


# -- (c) quantities ---------------------------------------------------------------------

# Kubernetes' quantity grammar: sign, digits with an optional fraction, then a binary
# suffix, a decimal suffix, or a decimal exponent.
SUFFIXES = ["", "m", "k", "M", "G", "T", "P", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e3", "E6", "e-3", "E0"]
LIMIT_MILLI = (2**63 // 1000) * 1000  # parse_quantity's ceiling, in milli-units


@st.composite
def quantity_text(draw):
    whole = draw(st.integers(0, 10**6))
    frac = draw(st.one_of(st.just(""), st.integers(0, 999).map(lambda f: f".{f:03d}".rstrip("0") or ".0")))
    return f"{whole}{frac}{draw(st.sampled_from(SUFFIXES))}"


RESOURCES = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "ephemeral-storage", "hugepages-2Mi", "pods",
                             "example.com/foo.memory"])


@FUZZ
@given(quantity_text(), RESOURCES)
def test_quantity_round_trips_through_format_milli(text, resource):
    assume(_k8s_exact(text) <= 2**63 // 1000)  # above that parse_quantity says "too large", by design
    milli = parse_quantity(text, "q")
    assert isinstance(milli, int) and milli >= 0
    # Never below the exact value, and less than one milli-unit above it (ceil).
    exact = Decimal(_k8s_exact(text)) * 1000
    assert milli >= exact and milli - exact < 1
    shown = format_milli(resource, milli)
    assert parse_quantity(shown, "q") == milli, (text, shown)
    assert format_milli(resource, parse_quantity(shown, "q")) == shown


@FUZZ
@given(st.integers(0, LIMIT_MILLI), RESOURCES)
def test_format_milli_then_parse_is_identity(milli, resource):
    shown = format_milli(resource, milli)
    assert parse_quantity(shown, "q") == milli, shown


@FUZZ
@given(st.one_of(st.integers(0, 2**62 // 1000), st.floats(0, 1e12, allow_nan=False)))
def test_numbers_parse_like_their_text(number):
    """YAML gives ``cpu: 5`` as an int and ``cpu: 0.5`` as a float; both mean what ``"5"`` / ``"0.5"`` mean."""
    milli = parse_quantity(number, "q")
    assert milli == math.ceil(Decimal(repr(number)) * 1000)


@FUZZ
@given(st.one_of(st.text(max_size=12), QUANTITY_TEXT, SCALARS, st.lists(st.integers(), max_size=2)))
def test_parse_quantity_only_raises_validation_error(value):
    milli = only_validation_errors(parse_quantity, value, "q")
    if milli is not None:
        assert isinstance(milli, int) and 0 <= milli <= LIMIT_MILLI


def _k8s_exact(text: str) -> Decimal:
    from kubernetes.utils.quantity import parse_quantity as k8s

    return k8s(text)


# -- (d) mutated scenarios through the simulator -------------------------------------------------

@settings(FUZZ, max_examples=80)
@given(mutated(SCENARIO))
def test_mutated_scenarios_simulate_or_raise_validation_error(value):
    scenario = only_validation_errors(parse_scenario, value)
    if scenario is None:
        return

    def run():
        for report in Simulator(scenario).run():
            # --json output must be real JSON: no NaN / Infinity.
            json.dumps(report, allow_nan=False)

    only_validation_errors(run)
