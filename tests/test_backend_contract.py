"""The backend contract: every backend has what the service may call, with the shape it calls it with."""

from __future__ import annotations

import inspect

import pytest

from hub_ext.backends import Backend, contract_problems
from hub_ext.backends.kubernetes import KubernetesBackend
from hub_ext.backends.local import LocalBackend
from idle_backend import IdleBackend

REQUIRED = {"nodes", "start", "evict", "stop", "recover", "logs"}


def _methods(cls) -> set[str]:
    return {name for name, value in vars(Backend).items()
            if not name.startswith("_") and (callable(value) or isinstance(value, classmethod))}


class _Complete(IdleBackend):
    """Every method the contract asks for (tests/idle_backend.py), each doing nothing."""


def test_the_required_methods_are_the_abstract_ones():
    assert Backend.__abstractmethods__ == REQUIRED
    assert REQUIRED < _methods(Backend)


@pytest.mark.parametrize("backend", [LocalBackend, KubernetesBackend], ids=lambda cls: cls.__name__)
def test_the_backends_keep_the_contract(backend):
    assert contract_problems(backend) == []
    assert not inspect.isabstract(backend)
    for name in _methods(Backend):
        assert callable(getattr(backend, name)), name


def test_a_complete_backend_keeps_it_and_gets_the_defaults():
    assert contract_problems(_Complete) == []
    backend = _Complete()
    assert backend.quota_tree() == (None, None) and backend.leader_elector(None, None, None) is None
    assert backend.synced is None and backend.notebook_warning_seconds is None


@pytest.mark.parametrize("missing", sorted(REQUIRED))
def test_a_backend_lacking_a_required_method_fails(missing):
    lacking = type("Lacking", (Backend,), {k: v for k, v in vars(IdleBackend).items()
                                           if k != missing and not k.startswith("__")})
    assert contract_problems(lacking) == [f"Lacking lacks {missing}()"]
    with pytest.raises(TypeError, match=missing):
        lacking()


@pytest.mark.parametrize("name, method, problem", [
    ("start", lambda self, workload, pod, row: None, "must be async"),
    ("tenants_changed", lambda self: None, "takes other arguments"),
    ("logs", lambda self, workload, row, tail: "", "takes other arguments"),
    ("stop", None, "not a method"),
], ids=["not async", "too few arguments", "one more required", "not callable"])
def test_a_method_of_another_shape_fails(name, method, problem):
    wrong = type("Wrong", (_Complete,), {name: method})
    problems = contract_problems(wrong)
    assert len(problems) == 1 and problems[0].startswith(f"Wrong.{name}: {problem}")
