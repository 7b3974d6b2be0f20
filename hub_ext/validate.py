"""``tenancy validate``: check a quota tree, any manifest list, or a whole scenario."""

from __future__ import annotations

from collections import Counter

from .quota.dataset import Dataset, check_datasets
from .quota.errors import ValidationError
from .quota.manifests import flatten, parse_object, read_file
from .quota.tree import ElasticQuotaTree


def validate_file(path: str) -> str:
    """A one-line summary of what the file holds; raises ValidationError on the first problem."""
    from .sim.scenario import is_scenario, load_scenario
    from .sim.simulator import Simulator

    docs = read_file(path)
    if not docs:
        raise ValidationError(f"{path}: no YAML documents")
    if len(docs) == 1 and is_scenario(docs[0]):
        scenario = load_scenario(path)
        # Running it surfaces what only shows at a step (a pod applied twice, a missing delete target).
        try:
            for _ in Simulator(scenario).run():
                pass
        except ValidationError as err:
            raise err.within(path) from None
        return f"{path}: ok: scenario with {len(scenario.nodes)} node(s), {len(scenario.objects)} object(s), {len(scenario.steps)} step(s)"
    kinds = Counter()
    datasets = []
    for i, raw in enumerate(flatten(docs, path)):
        try:
            obj = parse_object(raw)
        except ValidationError as err:
            raise err.within(f"{path}: document {i + 1}") from None
        kinds[raw["kind"]] += 1
        if isinstance(obj, ElasticQuotaTree):
            kinds["quota node"] += len(obj.nodes) - 1
        if isinstance(obj, Dataset):
            datasets.append(obj)
    try:
        check_datasets(datasets)
    except ValidationError as err:
        raise err.within(path) from None
    summary = ", ".join(f"{n} {k}" for k, n in kinds.items())
    return f"{path}: ok: {summary}"
