"""Bad input through ``tenancy validate`` and ``tenancy simulate``: one line, exit 1, the culprit named.

The promise (hub_ext/cli.py, DESIGN.md "Interfaces"): bad input ends with exactly one
line on stderr, ``tenancy: error: ...``, that names what is wrong (the quota node,
the value, the field, the file), and exit code 1 -- never a traceback, never exit 3
(which means a bug).

One table; each row is a file's content (text, bytes, or MISSING / DIRECTORY), the
substrings the message must contain, and which commands it goes through. Scenario rows
run through both commands; a bare manifest is only a valid input for ``validate``.
To add a case, add a row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MISSING = object()
DIRECTORY = object()
BOTH = ("validate", "simulate")
VALIDATE = ("validate",)


def tenancy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hub_ext.cli", *args], cwd=REPO, capture_output=True, text=True, timeout=60
    )


def scenario(body: str) -> str:
    return textwrap.dedent(body)


NODE = '  - {name: n1, allocatable: {cpu: "8", memory: 32Gi}}\n'


def node_cpu(value: str) -> str:
    return f"nodes:\n  - {{name: n1, allocatable: {{cpu: {value}}}}}\n"


def tree(root: str) -> str:
    """A scenario whose only object is an ElasticQuotaTree with the given (indented) root."""
    return (
        "objects:\n"
        "  - apiVersion: scheduling.sigs.k8s.io/v1beta1\n"
        "    kind: ElasticQuotaTree\n"
        "    metadata: {name: elasticquotatree, namespace: kube-system}\n"
        "    spec:\n"
        "      root:\n" + textwrap.indent(textwrap.dedent(root), "        ")
    )


def bare_tree(root: str) -> str:
    """The same tree as a plain manifest file (what ``kubectl apply -f`` would take)."""
    return (
        "apiVersion: scheduling.sigs.k8s.io/v1beta1\n"
        "kind: ElasticQuotaTree\n"
        "metadata: {name: elasticquotatree, namespace: kube-system}\n"
        "spec:\n"
        "  root:\n" + textwrap.indent(textwrap.dedent(root), "    ")
    )


def pod_step(spec: str, name: str = "p", namespace: str = "team-a") -> str:
    return (
        "nodes:\n" + NODE + "steps:\n  - apply:\n"
        f"    - {{apiVersion: v1, kind: Pod, metadata: {{name: {name}, namespace: {namespace}}}, spec: {spec}}}\n"
    )


SUM_TOO_BIG = """\
    name: root
    min: {cpu: 20}
    max: {cpu: 20}
    children:
    - name: dept-ops
      min: {cpu: 10}
      max: {cpu: 20}
      children:
      - {name: ops-a, namespaces: [ops-a], min: {cpu: 6}}
      - {name: ops-b, namespaces: [ops-b], min: {cpu: 6}}
"""
DUPLICATE_NAMES = """\
    name: root
    min: {cpu: 20}
    children:
    - {name: dept-ops, namespaces: [a], min: {cpu: 5}}
    - {name: dept-ops, namespaces: [b], min: {cpu: 5}}
"""
NAMESPACES_ON_INNER_NODE = """\
    name: root
    min: {cpu: 20}
    children:
    - name: dept-ml
      namespaces: [ml-shared]
      min: {cpu: 10}
      children:
      - {name: ml-a, namespaces: [ml-a], min: {cpu: 5}}
"""
NAMESPACE_ON_TWO_LEAVES = """\
    name: root
    min: {cpu: 20}
    children:
    - {name: team-x, namespaces: [shared-ns], min: {cpu: 5}}
    - {name: team-y, namespaces: [shared-ns], min: {cpu: 5}}
"""
MIN_ABOVE_MAX = """\
    name: root
    min: {cpu: 20}
    children:
    - {name: team-z, namespaces: [z], min: {cpu: 12}, max: {cpu: 8}}
"""

CASES = [
    # -- not YAML --------------------------------------------------------------------
    pytest.param("nodes:\n\t- {name: n1}\n", ["invalid YAML", ":2:"], BOTH, id="yaml-tab-indent"),
    pytest.param('nodes: [ {name: n1, allocatable: {cpu: "8"}}\nsteps: []\n', ["invalid YAML", ":2:"], BOTH,
                 id="yaml-unclosed-bracket"),
    pytest.param("nodes:\n  - {name: n1, allocatable: {cpu: 8}\n", ["invalid YAML"], BOTH, id="yaml-unclosed-brace"),
    pytest.param('name: "never closed\nnodes: []\n', ["invalid YAML"], BOTH, id="yaml-unclosed-quote"),
    pytest.param("steps: *nowhere\n", ["invalid YAML", "nowhere"], BOTH, id="yaml-unknown-alias"),
    # -- bad quantities ------------------------------------------------------------------
    pytest.param(node_cpu('"10Gx"'), ["n1", "cpu", "'10Gx'"], BOTH, id="quantity-10Gx"),
    pytest.param(node_cpu('"-1"'), ["n1", "cpu", "-1", "negative"], BOTH, id="quantity-minus-1-string"),
    pytest.param(node_cpu("-1"), ["n1", "cpu", "-1", "negative"], BOTH, id="quantity-minus-1-number"),
    pytest.param(node_cpu("abc"), ["n1", "cpu", "'abc'"], BOTH, id="quantity-abc"),
    pytest.param(node_cpu("true"), ["n1", "cpu", "True"], BOTH, id="quantity-true"),
    pytest.param(node_cpu("[1, 2]"), ["n1", "cpu", "[1, 2]"], BOTH, id="quantity-list"),
    pytest.param(node_cpu("{a: 1}"), ["n1", "cpu", "{'a': 1}"], BOTH, id="quantity-mapping"),
    pytest.param(node_cpu(".nan"), ["n1", "cpu", "nan"], BOTH, id="quantity-nan"),
    pytest.param(node_cpu('"1e400"'), ["n1", "cpu", "1e400", "too large"], BOTH, id="quantity-too-large"),
    # Kubernetes' grammar is ASCII digits only, with no separators or inner spaces; the
    # client's Decimal-based helper lets all of these through.
    pytest.param(node_cpu('"1_000"'), ["n1", "cpu", "1_000"], BOTH, id="quantity-underscore"),
    pytest.param(node_cpu('"5 m"'), ["n1", "cpu", "5 m"], BOTH, id="quantity-inner-space"),
    pytest.param(node_cpu('"\uff15"'), ["n1", "cpu", "\uff15"], BOTH, id="quantity-fullwidth-digit"),
    pytest.param(node_cpu('"\u0661"'), ["n1", "cpu", "\u0661"], BOTH, id="quantity-arabic-indic-digit"),
    pytest.param(tree("name: root\nmin: {cpu: 10Gx}\n"), ["root", "min", "cpu", "10Gx"], BOTH,
                 id="quantity-in-tree-min"),
    pytest.param(scenario("""\
        objects:
          - {apiVersion: v1, kind: ResourceQuota, metadata: {name: dev-quota, namespace: team-alpha},
             spec: {hard: {requests.cpu: abc}}}
        """), ["dev-quota", "requests.cpu", "abc"], BOTH, id="quantity-in-resourcequota"),
    pytest.param(pod_step("{containers: [{name: c, resources: {requests: {cpu: 2x}}}]}"), ["team-a/p", "cpu", "2x"],
                 BOTH, id="quantity-in-pod"),
    # -- wrong types ---------------------------------------------------------------------
    pytest.param(tree("name: root\nchildren: {name: dept-ops, min: {cpu: 5}}\n"), ["root", "children", "mapping"],
                 BOTH, id="children-as-mapping"),
    pytest.param(tree("name: root\nmin: [cpu, 10]\n"), ["root", "min", "list"], BOTH, id="min-as-list"),
    pytest.param(tree("name: root\nchildren:\n- {name: team-x, namespaces: team-x}\n"),
                 ["team-x", "namespaces", "list"], BOTH, id="namespaces-as-string"),
    pytest.param(scenario("""\
        steps:
          - apply:
            - apiVersion: apps/v1
              kind: Deployment
              metadata: {name: web, namespace: team-a}
              spec: {replicas: five, template: {spec: {containers: [{name: c}]}}}
        """), ["web", "replicas", "five"], BOTH, id="replicas-five"),
    pytest.param(pod_step("{containers: busybox}"), ["team-a/p", "containers", "list"], BOTH,
                 id="containers-as-string"),
    pytest.param(pod_step("{containers: [{name: c}], terminationGracePeriodSeconds: 30s}"),
                 ["team-a/p", "terminationGracePeriodSeconds", "30s"], BOTH, id="grace-as-duration-string"),
    pytest.param("nodes: {name: n1}\n", ["nodes", "list"], BOTH, id="nodes-as-mapping"),
    pytest.param("nodes:\n  - {name: n1}\n", ["n1", "allocatable"], BOTH, id="node-without-allocatable"),
    pytest.param("steps:\n  - advance: soon\n", ["steps[0]", "advance", "soon"], BOTH, id="advance-not-a-duration"),
    pytest.param("- a\n- b\n", ["scenario"], ("simulate",), id="scenario-is-a-list"),
    # -- quota tree rules --------------------------------------------------------------------
    pytest.param(tree(SUM_TOO_BIG), ["dept-ops: children's min cpu 12 exceeds this node's min 10"], BOTH,
                 id="children-min-sum-above-parent-min"),
    pytest.param(bare_tree(SUM_TOO_BIG), ["dept-ops: children's min cpu 12 exceeds this node's min 10"], VALIDATE,
                 id="children-min-sum-above-parent-min-bare-manifest"),
    pytest.param(tree(DUPLICATE_NAMES), ["dept-ops", "more than one"], BOTH, id="duplicate-node-names"),
    pytest.param(bare_tree(DUPLICATE_NAMES), ["dept-ops", "more than one"], VALIDATE,
                 id="duplicate-node-names-bare-manifest"),
    pytest.param(tree(NAMESPACES_ON_INNER_NODE), ["dept-ml", "leaves"], BOTH, id="namespaces-on-non-leaf"),
    pytest.param(bare_tree(NAMESPACES_ON_INNER_NODE), ["dept-ml", "leaves"], VALIDATE,
                 id="namespaces-on-non-leaf-bare-manifest"),
    pytest.param(tree(NAMESPACE_ON_TWO_LEAVES), ["shared-ns", "team-x", "team-y"], BOTH,
                 id="namespace-on-two-leaves"),
    pytest.param(tree(MIN_ABOVE_MAX), ["team-z", "cpu", "12", "8"], BOTH, id="min-above-max"),
    pytest.param(bare_tree(MIN_ABOVE_MAX), ["team-z", "cpu", "12", "8"], VALIDATE, id="min-above-max-bare-manifest"),
    pytest.param(tree("min: {cpu: 1}\n"), ["spec.root", "name"], BOTH, id="node-without-name"),
    pytest.param(tree("name: root\nguaranteed: {cpu: 1}\n"), ["root", "guaranteed"], BOTH, id="unknown-node-field"),
    # -- unknown kinds, keys, actions ----------------------------------------------------------
    pytest.param(scenario("""\
        steps:
          - apply:
            - {apiVersion: v1, kind: Service, metadata: {name: web, namespace: team-a}}
        """), ["Service", "steps[0]"], BOTH, id="unknown-kind-in-apply"),
    pytest.param("objects:\n  - {apiVersion: v1, kind: ConfigMap, metadata: {name: x}}\n", ["ConfigMap", "objects[0]"],
                 BOTH, id="unknown-kind-in-objects"),
    pytest.param("apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n", ["Secret"], VALIDATE,
                 id="unknown-kind-bare-manifest"),
    pytest.param("nodes: []\nstepz: []\n", ["stepz"], BOTH, id="unknown-scenario-key"),
    pytest.param("steps:\n  - wait: 5s\n", ["steps[0]", "wait"], BOTH, id="unknown-step-key"),
    pytest.param('nodes:\n  - {name: n1, allocatable: {cpu: "8"}, cpus: 8}\n', ["cpus"], BOTH, id="unknown-node-key"),
    pytest.param(scenario("""\
        steps:
          - advance: 10s
            delete: [{kind: Pod, namespace: team-a, name: x}]
        """), ["steps[0]", "exactly one"], BOTH, id="step-with-two-actions"),
    pytest.param("steps:\n  - name: nothing to do\n", ["steps[0]", "exactly one"], BOTH, id="step-with-no-action"),
    pytest.param("steps:\n  - delete: [{kind: Deployment, namespace: team-a, name: ghost}]\n",
                 ["Deployment", "team-a/ghost", "not found"], BOTH, id="delete-missing-deployment"),
    pytest.param("steps:\n  - delete: [{kind: Pod, namespace: team-a, name: ghost}]\n", ["team-a/ghost"], BOTH,
                 id="delete-missing-pod"),
    pytest.param("steps:\n  - delete: [{kind: Gadget, name: ghost}]\n", ["Gadget"], BOTH, id="delete-unknown-kind"),
    pytest.param(scenario("""\
        steps:
          - apply: [{apiVersion: v1, kind: Pod, metadata: {name: p, namespace: team-a}, spec: {containers: [{name: c}]}}]
          - apply: [{apiVersion: v1, kind: Pod, metadata: {name: p, namespace: team-a}, spec: {containers: [{name: c}]}}]
        """), ["steps[1]", "team-a/p", "already exists"], BOTH, id="pod-applied-twice"),
    pytest.param('nodes:\n  - {name: n1, allocatable: {cpu: "8"}}\n  - {name: n1, allocatable: {cpu: "8"}}\n',
                 ["n1", "twice"], BOTH, id="node-listed-twice"),
    pytest.param(scenario("""\
        objects:
          - {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: one}, value: 1, globalDefault: true}
          - {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: two}, value: 2, globalDefault: true}
        """), ["two", "one", "global default"], BOTH, id="two-global-default-priority-classes"),
    # -- files ---------------------------------------------------------------------------------
    pytest.param(MISSING, ["does-not-exist.yaml", "cannot read"], BOTH, id="missing-file"),
    pytest.param(DIRECTORY, ["a-directory.yaml", "cannot read"], BOTH, id="directory"),
    pytest.param(b"\x7fELF\x02\x01\x01\x00\x00\x00\xff\xfe\xfd\x00\x01", ["input.yaml", "UTF-8"], BOTH,
                 id="binary-file"),
    pytest.param(b"nodes: []\x00\x01\x02\n", ["input.yaml"], BOTH, id="nul-bytes"),
    pytest.param("", ["input.yaml"], BOTH, id="empty-file"),
    pytest.param("# only a comment\n---\n", ["input.yaml"], BOTH, id="comments-only"),
    # -- found by fuzzing: today these end in "internal error" (exit 3) or are accepted ---------
    pytest.param(scenario("""\
        objects:
          - apiVersion: v1
            kind: ResourceQuota
            metadata: {name: dev-quota, namespace: team-a}
            spec: {hard: {pods: "2"}, scopes: [[BestEffort]]}
        """), ["dev-quota", "scope"], BOTH, id="resourcequota-scope-as-list"),
    pytest.param(scenario("""\
        objects:
          - apiVersion: v1
            kind: ResourceQuota
            metadata: {name: dev-quota, namespace: team-a}
            spec:
              hard: {pods: "2"}
              scopeSelector: {matchExpressions: [{scopeName: PriorityClass, operator: {In: x}}]}
        """), ["dev-quota", "operator"], BOTH, id="resourcequota-operator-as-mapping"),
    pytest.param("steps:\n  - delete: [{kind: [Pod], name: ghost}]\n", ["steps[0]", "kind"], BOTH,
                 id="delete-kind-as-list"),
    pytest.param("steps:\n  - advance: " + "9" * 400 + "\n", ["steps[0]", "advance"], BOTH,
                 id="advance-huge-number"),
    pytest.param("steps:\n  - advance: .inf\n", ["steps[0]", "advance"], BOTH, id="advance-infinite"),
    pytest.param(scenario("""\
        nodes:
          - {name: n1, allocatable: {cpu: "8"}}
        steps:
          - apply:
            - {apiVersion: v1, kind: Pod, metadata: {name: slow, namespace: team-a},
               spec: {terminationGracePeriodSeconds: 1%s, containers: [{name: c, resources: {requests: {cpu: 8}}}]}}
          - apply:
            - {apiVersion: v1, kind: Pod, metadata: {name: urgent, namespace: team-a},
               spec: {priorityClassName: critical-prod, containers: [{name: c, resources: {requests: {cpu: 8}}}]}}
        """) % ("0" * 400), ["team-a/slow", "terminationGracePeriodSeconds"], BOTH, id="grace-period-huge"),
    # -- datasets (issue 20; every message exactly: tests/test_datasets.py) ----------------------
    pytest.param(scenario("""\
        objects:
          - {apiVersion: tenancy.jupyter.org/v1alpha1, kind: Dataset, metadata: {name: mnist},
             spec: {namespaces: [team-a], source: {path: /srv/mnist, claim: mnist-pvc}}}
        """), ["objects[0]", "Dataset mnist", "exactly one of", "claim and path"], BOTH, id="dataset-two-sources"),
    pytest.param(scenario("""\
        objects:
          - {apiVersion: tenancy.jupyter.org/v1alpha1, kind: Dataset, metadata: {name: mnist},
             spec: {namespaces: [team-a], source: {path: /srv/mnist}, mountPath: /home/jovyan/mnist}}
        """), ["Dataset mnist", "/home/jovyan/mnist", "home"], BOTH, id="dataset-mount-path-in-the-home"),
    pytest.param(scenario("""\
        objects:
          - {apiVersion: tenancy.jupyter.org/v1alpha1, kind: Dataset, metadata: {name: a},
             spec: {namespaces: [team-a], source: {path: /srv/a}, mountPath: /data}}
        steps:
          - apply:
            - {apiVersion: tenancy.jupyter.org/v1alpha1, kind: Dataset, metadata: {name: b},
               spec: {namespaces: [team-a], source: {path: /srv/b}, mountPath: /data}}
        """), ["steps[0]", "Dataset b", "/data", "Dataset a"], BOTH, id="dataset-mount-path-clash"),
    pytest.param("apiVersion: tenancy.jupyter.org/v1alpha1\nkind: Dataset\nmetadata: {name: mnist}\n"
                 "spec: {namespaces: [team-a], source: {path: data/mnist}}\n",
                 ["document 1", "Dataset mnist", "data/mnist", "absolute"], VALIDATE, id="dataset-relative-path-bare"),
]


def _write(directory: Path, content) -> str:
    if content is MISSING:
        return str(directory / "does-not-exist.yaml")
    if content is DIRECTORY:
        path = directory / "a-directory.yaml"
        path.mkdir()
        return str(path)
    path = directory / "input.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return str(path)


PARAMS = [
    pytest.param(command, *case.values, id=f"{command}-{case.id}", marks=case.marks)
    for case in CASES
    for command in case.values[2]
]


@pytest.fixture(scope="module")
def outcomes(request, tmp_path_factory):
    """Every selected (command, case) run once, each in a process of its own (forked from one
    interpreter that imported the CLI once: tests/cli_batch.py), in two batches side by side."""
    selected = {
        item.callspec.id for item in request.session.items
        if getattr(item, "originalname", None) == "test_bad_input_is_one_line_exit_1_naming_the_culprit"
    }
    jobs = {}
    for param in PARAMS:
        if param.id not in selected:
            continue
        command, content = param.values[0], param.values[1]
        directory = tmp_path_factory.mktemp("case")
        jobs[param.id] = (command, _write(directory, content))
    keys = list(jobs)
    halves = [keys[0::2], keys[1::2]]
    with ThreadPoolExecutor(max_workers=2) as pool:
        batches = list(pool.map(lambda half: batch([[jobs[k][0], jobs[k][1]] for k in half]), halves))
    return {key: (jobs[key][1], proc) for half, procs in zip(halves, batches) for key, proc in zip(half, procs)}


def batch(commands: list[list[str]]) -> list[subprocess.CompletedProcess]:
    """``tenancy`` run for each argv of ``commands`` (tests/cli_batch.py), as ``tenancy(*argv)`` would."""
    if not commands:
        return []
    proc = subprocess.run([sys.executable, str(REPO / "tests" / "cli_batch.py")], input=json.dumps(commands),
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [subprocess.CompletedProcess(argv, code, out, err)
            for argv, (code, out, err) in zip(commands, json.loads(proc.stdout))]


@pytest.mark.parametrize("command,content,culprits,commands", PARAMS)
def test_bad_input_is_one_line_exit_1_naming_the_culprit(request, outcomes, command, content, culprits, commands):
    path, proc = outcomes[request.node.callspec.id]
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.returncode == 1, f"exit {proc.returncode}; stderr: {proc.stderr!r}"
    assert proc.stderr.startswith("tenancy: error: "), proc.stderr
    assert proc.stderr.endswith("\n") and proc.stderr.count("\n") == 1, f"not one line: {proc.stderr!r}"
    for culprit in culprits:
        assert culprit in proc.stderr, f"{culprit!r} not named in {proc.stderr!r}"
    if command == "validate":
        assert proc.stdout == ""


GOOD_SCENARIO = scenario("""\
    name: good
    nodes:
      - {name: n1, allocatable: {cpu: "8", memory: 32Gi}}
    objects:
      - apiVersion: scheduling.sigs.k8s.io/v1beta1
        kind: ElasticQuotaTree
        metadata: {name: elasticquotatree, namespace: kube-system}
        spec:
          root:
            name: root
            min: {cpu: 8}
            max: {cpu: 8}
            children:
            - {name: dept-ops, namespaces: [ops], min: {cpu: 4}, max: {cpu: 8}}
            - {name: dept-ml, namespaces: [ml], min: {cpu: 4}, max: {cpu: 8}}
    steps:
      - apply:
        - apiVersion: apps/v1
          kind: Deployment
          metadata: {name: web, namespace: ops}
          spec: {replicas: 2, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}
      - advance: 10s
      - delete: [{kind: Deployment, namespace: ops, name: web}]
""")


@pytest.mark.parametrize("command", ["validate", "simulate"])
def test_good_scenario_exits_0(tmp_path, command):
    path = _write(tmp_path, GOOD_SCENARIO)
    proc = tenancy(command, path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    if command == "validate":
        assert proc.stdout == f"{path}: ok: scenario with 1 node(s), 1 object(s), 3 step(s)\n"
    else:
        assert [line for line in proc.stdout.splitlines() if line.startswith("step ")] == [
            "step 1: apply Deployment ops/web", "step 2: advance 10s", "step 3: delete Deployment ops/web"]


def test_good_bare_manifests_validate(tmp_path):
    path = _write(tmp_path, bare_tree("""\
        name: root
        min: {cpu: 20}
        max: {cpu: 20}
        children:
        - {name: dept-ops, namespaces: [ops], min: {cpu: 10}}
        - {name: dept-ml, namespaces: [ml], min: {cpu: 10}}
    """) + "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: ops}\n")
    proc = tenancy("validate", path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{path}: ok: 1 ElasticQuotaTree, 2 quota node, 1 Namespace\n"
