"""The ``tenancy`` command: simulate, validate, bench.

Bad input ends with one line on stderr that names the culprit and a non-zero
exit (1); never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys

from .quota.errors import ValidationError

EXIT_INVALID = 1
EXIT_INTERNAL = 3


def _simulate(args) -> int:
    from .sim.output import render_step
    from .sim.scenario import load_scenario
    from .sim.simulator import Simulator

    scenario = load_scenario(args.scenario)
    try:
        for report in Simulator(scenario).run():
            if args.json:
                print(json.dumps(report, sort_keys=False), flush=True)
            else:
                print(render_step(report) + "\n", flush=True)
    except ValidationError as err:
        raise err.within(args.scenario) from None
    return 0


def _validate(args) -> int:
    from .validate import validate_file

    print(validate_file(args.file))
    return 0


def _bench(args) -> int:
    from .bench.runner import main as bench_main

    return bench_main(args)


def _serve(args) -> int:
    from .service.app import main as serve_main

    return serve_main(args.options)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tenancy", description="Multi-tenant quota and preemption for JupyterHub.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("simulate", help="run a scenario through the scheduler and print the state after each step")
    p.add_argument("scenario", help="scenario YAML (nodes, objects, steps)")
    p.add_argument("--json", action="store_true", help="one JSON object per line, one line per step")
    p.set_defaults(func=_simulate)

    p = sub.add_parser("validate", help="check a quota tree, manifests or a scenario")
    p.add_argument("file", help="YAML file")
    p.set_defaults(func=_validate)

    p = sub.add_parser("bench", help="benchmark the scheduler core at growing scale")
    p.add_argument("--json", action="store_true", help="one JSON object per measurement")
    p.add_argument("--quick", action="store_true", help="small sizes only (seconds, for a smoke run)")
    p.add_argument("--seed", type=int, default=1, help="random seed for the synthetic clusters")
    p.set_defaults(func=_bench)

    p = sub.add_parser("serve", help="run the scheduler service (normally started by the hub)",
                       description="Options are traitlets: --config FILE, --port N, --ip A, --db URL, --tree FILE, "
                                   "or any --TenancyService.<trait>=... / --LocalBackend.<trait>=...")
    p.add_argument("options", nargs=argparse.REMAINDER)
    p.set_defaults(func=_serve)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValidationError as err:
        print(f"tenancy: error: {err}", file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as err:  # noqa: BLE001 - the promise is one line, never a traceback
        print(f"tenancy: internal error: {type(err).__name__}: {err} (please report this)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
