"""The service's "Compare with last week", played in a process of its own.

``python -m hub_ext.planning.whatif_child`` reads one JSON object on stdin,
``{"scenario": <the recorded history as history.export writes it>, "tree": <the
proposed ElasticQuotaTree>}``, and writes the rows of ``tenancy whatif --json`` (a
JSON list) on stdout. The service's event loop only waits for it; the two plays
run here, in two processes of their own when there are two cores (``play_both``),
as ``tenancy whatif`` runs them. Bad input: one line on stderr, exit status 1.
"""

from __future__ import annotations

import json
import sys

from ..quota.errors import ValidationError
from ..quota.tree import parse_tree
from ..sim.scenario import parse_scenario
from .whatif import check_durations, under_both

SOURCE = "the recorded history"


def rows(job: dict) -> list[dict]:
    try:
        scenario = parse_scenario(job["scenario"])
    except ValidationError as err:
        raise err.within(SOURCE) from None
    check_durations(scenario, SOURCE)
    return under_both(scenario, parse_tree(job["tree"]))


def main() -> int:
    try:
        json.dump(rows(json.load(sys.stdin)), sys.stdout)
    except ValidationError as err:
        print(" ".join(str(err).split()), file=sys.stderr)
        return 1
    except Exception as err:  # noqa: BLE001 - the service logs this one line, never a traceback
        print(f"{type(err).__name__}: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
