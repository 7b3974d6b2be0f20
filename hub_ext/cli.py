"""The ``tenancy`` command: simulate, replay, validate, bench; in a hub: submit, jobs, logs, cancel, datasets.

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


REPLAY_HELP = """\
Runs a scenario (the format of `tenancy simulate`) on a real cluster through the
service's own controller and Kubernetes backend, in this process, and prints the
state after each step as `simulate` does (with --json, the same keys), read from
the API server.

Nodes: the scenario's nodes are made as kwok nodes (annotated
kwok.x-k8s.io/node=fake; the cluster must run kwok), or --node-selector picks
existing nodes instead. Each replay uses namespaces and nodes of its own
(<name>-<run id>, labelled tenancy.jupyter.org/replay=<run id>), so it may run on a
shared cluster, and removes them at the end unless --keep. The quota tree is given
to the service in-process, never created on the cluster.

Time: the scenario's clock is virtual and moves as simulate's does, never with the
wall clock (`time` in the output is the simulated one). Evictions go through the
Eviction API with the scenario's grace period; once the pod is gone from the API
server, the eviction completes at its deadline on the virtual clock. `advance N`
moves the clock N seconds, and each pod whose tenancy.jupyter.org/duration runs out
meanwhile is ended, in time order, by setting its phase to Succeeded on the API
server (as kwok does for a container that exits 0; durations need kwok nodes).
Wall-clock time is only the cluster's latency.
"""


def _replay(args) -> int:
    import asyncio
    import logging

    from .sim.output import render_step
    from .replay.run import Replay
    from .replay.cluster import ReplayError

    log = logging.getLogger("tenancy.replay")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine("tenancy replay: %(levelname)s: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.WARNING)
    log.propagate = False
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    try:
        replay = Replay(args.scenario, kubeconfig=args.kubeconfig or "", context=args.context,
                        node_selector=args.node_selector, keep=args.keep, timeout=args.timeout, log=log)

        async def run() -> None:
            asyncio.get_running_loop().set_exception_handler(
                lambda loop, context: log.error("%s", context.get("message"), exc_info=context.get("exception")))
            async for report in replay.run():
                if args.json:
                    print(json.dumps(report, sort_keys=False), flush=True)
                else:
                    print(render_step(report) + "\n", flush=True)

        asyncio.run(run())
    except ReplayError as err:
        raise ValidationError(str(err)) from None
    except ValidationError as err:
        raise err if str(err).startswith(args.scenario) else err.within(args.scenario) from None
    finally:
        log.removeHandler(handler)
    return 0


class _OneLine:
    """A logging formatter that never prints a traceback: the exception's type and text on the same line."""

    def __init__(self, fmt: str):
        import logging

        self._fmt = logging.Formatter(fmt)

    def format(self, record) -> str:
        exc = record.exc_info[1] if record.exc_info else None
        record = _copy_record(record)
        if exc is not None:
            record.msg, record.args = f"{record.getMessage()}: {type(exc).__name__}: {exc}", None
        return " ".join(self._fmt.format(record).split())


def _copy_record(record):
    import copy

    out = copy.copy(record)
    out.exc_info = out.exc_text = out.stack_info = None
    return out


def _whatif(args) -> int:
    from .planning.table import side_by_side
    from .planning.whatif import whatif

    rows = whatif(args.scenario, args.tree)
    print("\n".join(json.dumps(r) for r in rows) if args.json else side_by_side(rows))
    return 0


def _history_export(args) -> int:
    import yaml

    from .apiclient import TenancyClient
    from .planning.period import parse_since

    if args.since is not None:
        parse_since(args.since)  # a bad period is said before the service is asked
    sys.stdout.write(yaml.safe_dump(TenancyClient().history_scenario(args.since), sort_keys=False))
    return 0


def _usage(args) -> int:
    from .apiclient import TenancyClient
    from .planning.period import parse_since
    from .planning.usage_text import render

    parse_since(args.since)
    print(render(TenancyClient().usage(args.since, args.by), "json" if args.json else "csv" if args.csv else "table"))
    return 0


def _validate(args) -> int:
    from .validate import validate_file

    print(validate_file(args.file))
    return 0


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of whole numbers: {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"not a list of positive sizes: {text!r}")
    return sizes


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _bench(args) -> int:
    if args.whatif:
        from .bench.whatif import main as whatif_main

        return whatif_main(args)
    if args.cluster:
        from .bench.cluster import main as cluster_main

        return cluster_main(args)
    from .bench.runner import main as bench_main

    return bench_main(args)


def _serve(args) -> int:
    from .service.app import main as serve_main

    return serve_main(args.options)


def _client_call(fn):
    """Run a client command; the service's refusals become the one-line error."""
    from .apiclient import TenancyError

    def run(args) -> int:
        try:
            return fn(args)
        except TenancyError as err:
            raise ValidationError(str(err)) from None

    return run


@_client_call
def _submit(args) -> int:
    from .client.api import submit_training

    command, script = None, None
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if len(args.command) == 1 and args.command[0].endswith(".py"):
        try:
            with open(args.command[0], encoding="utf-8") as f:
                script = f.read()
        except OSError as err:
            raise ValidationError(f"{args.command[0]}: cannot read: {err.strerror}") from None
    elif args.command:
        command = args.command
    else:
        raise ValidationError("submit: give a script (train.py) or a command after --")
    job = submit_training(command, script=script, cpu=args.cpu, memory=args.memory, gpu=args.gpu,
                          replicas=args.replicas, priority_class=args.priority_class, tenant=args.tenant,
                          name=args.name, wait=args.wait, yes=args.yes, show=False, gang=args.gang,
                          datasets=args.data, wait_instead=args.wait_instead,
                          ask=_ask_before_stopping if sys.stdin.isatty() and sys.stderr.isatty() else None)
    print(job.status())
    return 0 if job.state != "Failed" else 1


def _ask_before_stopping(whose: str, lower: dict | None) -> str:
    """At a terminal, ``tenancy submit`` asks before it stops anybody's work: go ahead, wait at the lower
    priority the dry run offers, or give up."""
    print(f"This job would stop {whose} to make room, and unsaved work there would be lost.", file=sys.stderr)
    options = "[y] go ahead"
    if lower:
        where = f", position {lower['position']} in the queue" if lower.get("position") else ""
        then = "start now" if lower.get("state") == "Running" else f"wait{where}"
        options += f", [w] submit at {lower['priorityClassName']} instead (it stops nobody and would {then})"
    try:
        reply = input(f"{options}, [n] do not submit: ").strip().lower()
    except EOFError:
        reply = ""
    return "yes" if reply in ("y", "yes") else "lower" if lower and reply in ("w", "wait") else "no"


@_client_call
def _jobs(args) -> int:
    from .apiclient import TenancyClient
    from .vocabulary import state_word

    rows = TenancyClient().workloads(kind="training" if not args.all else None)
    print(f"{'ID':<10} {'NAME':<24} {'NAMESPACE':<16} {'STATE':<20} REASON")
    for j in rows:
        reason = j.get("message") or ""
        if j.get("position"):
            reason += f" [position {j['position']}]"
        state = state_word(j["state"], j.get("reason"))
        print(f"{j['id']:<10} {j['name'][:24]:<24} {j['namespace'][:16]:<16} {state:<20} {reason}")
    return 0


@_client_call
def _logs(args) -> int:
    from .apiclient import TenancyClient

    sys.stdout.write(TenancyClient().logs(args.id, args.pod))
    return 0


@_client_call
def _cancel(args) -> int:
    from .apiclient import TenancyClient
    from .client.live import status_text

    print(status_text(TenancyClient().cancel(args.id)))
    return 0


@_client_call
def _datasets(args) -> int:
    from .apiclient import TenancyClient
    from .client.datasets import applied_text, provision_text, read_manifests, table

    if args.action == "apply":
        manifests = read_manifests(args.file)  # a bad file is said before the service is asked
        client = TenancyClient()
        # Every dataset's dry run first: a file whose third dataset is refused changes nothing.
        dry = [client.put_dataset(m, dry_run=True) for m in manifests]
        answers = dry if args.dry_run else [client.put_dataset(m) for m in manifests]
        for answer in answers:
            print(json.dumps(answer) if args.json else provision_text(answer) if args.dry_run else applied_text(answer))
    elif args.action == "delete":
        answer = TenancyClient().delete_dataset(args.name)
        print(json.dumps(answer) if args.json else f"{answer.get('deleted', args.name)}: deleted")
    else:
        datasets = TenancyClient().datasets()
        if args.json:
            for d in datasets:
                print(json.dumps(d))
        else:
            print(table(datasets))
    return 0


DATASETS_HELP = """\
Without an action: the datasets your teams may use (an admin: every one), with each
namespace's state (ready, not ready yet, refused: with the binder's or the quota's
words) and how many running workloads mount it. `apply FILE` declares or changes the
Dataset objects of a YAML file (admins); with --dry-run it says what would be
provisioned or refused in each namespace and changes nothing. `delete NAME` removes one.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tenancy", description="Multi-tenant quota and preemption for JupyterHub.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("simulate", help="run a scenario through the scheduler and print the state after each step")
    p.add_argument("scenario", help="scenario YAML (nodes, objects, steps)")
    p.add_argument("--json", action="store_true", help="one JSON object per line, one line per step")
    p.set_defaults(func=_simulate)

    p = sub.add_parser("replay", help="run a scenario on a real cluster through the Kubernetes backend and print "
                                      "the state after each step, as simulate does",
                       description=REPLAY_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", help="scenario YAML (nodes, objects, steps)")
    p.add_argument("--kubeconfig", metavar="FILE", help="the cluster to replay on (required)")
    p.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
    p.add_argument("--json", action="store_true", help="one JSON object per line, one line per step")
    p.add_argument("--node-selector", dest="node_selector", metavar="KEY=VALUE[,...]",
                   help="use the existing nodes with these labels instead of making the scenario's nodes with kwok")
    p.add_argument("--keep", action="store_true",
                   help="leave the replay's namespaces, nodes and PriorityClasses on the cluster")
    p.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                   help="how long one step may take to settle on the cluster (default 120)")
    p.set_defaults(func=_replay)

    p = sub.add_parser("whatif", help="run a scenario's arrivals under its own quota tree and under a proposed "
                                      "one, and compare waits, evictions, borrowing and idle room per team")
    p.add_argument("scenario", help="scenario YAML whose workloads all carry tenancy.jupyter.org/duration")
    p.add_argument("--tree", required=True, metavar="PROPOSED.yaml", help="the proposed ElasticQuotaTree")
    p.add_argument("--json", action="store_true", help="one JSON object a line: per team, then the cluster")
    p.set_defaults(func=_whatif)

    p = sub.add_parser("usage", help="resource-hours used, borrowed and lent, waits and evictions per team over a "
                                     "period, from the service's history (users: their teams)")
    p.add_argument("--since", default="7d", metavar="PERIOD", help="how far back: 30m, 24h, 7d, 2w (default 7d)")
    p.add_argument("--by", choices=("team", "user", "leaf"), default="team", help="group by (default: team)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON object a line: per group, then the cluster")
    out.add_argument("--csv", action="store_true", help="CSV: one row per group and resource")
    p.set_defaults(func=_client_call(_usage))

    p = sub.add_parser("history", help="the service's recorded history (admins)")
    actions = p.add_subparsers(dest="action", metavar="{export}", required=True)
    a = actions.add_parser("export", help="write the recorded history as a scenario (YAML on stdout) that "
                                          "tenancy simulate and tenancy whatif replay")
    a.add_argument("--since", metavar="PERIOD", help="how far back: 30m, 24h, 7d, 2w (default: all that is kept)")
    a.set_defaults(func=_client_call(_history_export))

    p = sub.add_parser("validate", help="check a quota tree, manifests or a scenario")
    p.add_argument("file", help="YAML file")
    p.set_defaults(func=_validate)

    p = sub.add_parser("bench", help="benchmark the scheduler core at growing scale")
    p.add_argument("--json", action="store_true", help="one JSON object per measurement")
    p.add_argument("--quick", action="store_true", help="small sizes only (seconds, for a smoke run)")
    p.add_argument("--seed", type=int, default=1, help="random seed for the synthetic clusters")
    p.add_argument("--whatif", action="store_true",
                   help="instead: a week of 10,000 jobs over 100 leaves replayed under two trees, as tenancy whatif "
                        "does (--quick: 1,000)")
    p.add_argument("--cluster", metavar="KUBECONFIG",
                   help="instead: single-pod Jobs on this cluster, plain kube-scheduler against the service's REST "
                        "API (needs kwok there; tools/bench/cluster_bench.py starts a control plane for it)")
    p.add_argument("--pods", type=_sizes, default=[1000, 5000], help="with --cluster: sizes, e.g. 1000,5000")
    p.add_argument("--nodes", type=int, default=100, help="with --cluster: kwok nodes to make")
    p.add_argument("--rounds", type=_positive, default=3,
                   help="with --cluster: plain and service runs per size, in turns; the medians are reported")
    p.add_argument("--node-cpu", default="32")
    p.add_argument("--node-memory", default="256Gi")
    p.add_argument("--pod-cpu", default="500m")
    p.add_argument("--pod-memory", default="1Gi")
    p.add_argument("--queued", type=int, default=5000,
                   help="with --cluster: jobs left waiting before the last submits are timed (0: skip)")
    p.add_argument("--probes", type=int, default=500,
                   help="with --cluster: submits timed behind --queued, from ten users at once (and before them, "
                        "up to 100 from the backlog's user that join the queue and up to 100 from another user that "
                        "start at once, one at a time)")
    p.add_argument("--service-qps", type=float, default=500.0, help="with --cluster: KubernetesBackend.api_qps")
    p.add_argument("--service-burst", type=int, default=1000, help="with --cluster: KubernetesBackend.api_burst")
    p.add_argument("--create-concurrency", type=int, default=16,
                   help="with --cluster: KubernetesBackend.create_concurrency, and the plain run's creating threads")
    p.add_argument("--timeout", type=float, default=900.0, help="with --cluster: seconds to wait for pods to run")
    p.add_argument("--watched", action="store_true",
                   help="with --cluster: each round runs the plain side once more while a process holds the "
                        "service's watches and does nothing else (what following the cluster costs)")
    p.add_argument("--settle", type=float, default=3.0, help="with --cluster: seconds to look for duplicates")
    p.add_argument("--workdir", default=None, help="with --cluster: where the hub's and service's files go")
    p.add_argument("--profile", default=None, metavar="PREFIX",
                   help="with --cluster: py-spy flame graphs of the service, PREFIX-<pods>-<round>.svg")
    p.add_argument("--profile-format", default="flamegraph", choices=("flamegraph", "raw", "speedscope"),
                   help="with --profile: py-spy's output, a flame graph (.svg), collapsed stacks (.txt: one line "
                        "a stack and its samples, for tools/bench/pyspy_shares.py) or speedscope (.json)")
    p.add_argument("--profile-rate", type=_positive, default=50,
                   help="with --profile: py-spy's samples per second (py-spy reads the service's memory from "
                        "its own process: a higher rate costs the service nothing, and says more of short runs)")
    p.add_argument("--apiserver-profile", default=None, metavar="PREFIX",
                   help="with --cluster: kube-apiserver's CPU profile of each side, PREFIX-<pods>-<round>-<side>.pprof "
                        "(go tool pprof -top FILE); needs an admin's kubeconfig and kube-apiserver's --profiling "
                        "(tools/bench/cluster_bench.py turns it on)")
    p.add_argument("--apiserver-profile-seconds", type=_positive, default=15,
                   help="with --apiserver-profile: how long each profile runs from its side's start (keep it "
                        "under the shortest side, so that each covers work only)")
    p.set_defaults(func=_bench)

    p = sub.add_parser("submit", help="submit a training job (inside a hub notebook or terminal)")
    p.add_argument("--cpu")
    p.add_argument("--memory")
    p.add_argument("--gpu")
    p.add_argument("--replicas", type=int, default=1)
    p.add_argument("--no-gang", dest="gang", action="store_false", default=None,
                   help="let the replicas start one by one (default: all together, as one gang)")
    p.add_argument("--priority-class", dest="priority_class")
    p.add_argument("--tenant", help="team (hub group), when you are in several")
    p.add_argument("--name")
    p.add_argument("--wait", action="store_true", help="wait until the job ends")
    p.add_argument("--yes", action="store_true",
                   help="submit even if the job would stop anybody's work (your notebook servers, a colleague's "
                        "notebook or job) to make room; at a terminal it asks first")
    p.add_argument("--wait-instead", dest="wait_instead", action="store_true",
                   help="if the job would stop anybody's work, submit it at the highest lower priority class at "
                        "which it stops nobody (it waits instead)")
    p.add_argument("--data", action="append", metavar="NAME[:PATH]",
                   help="a dataset the job mounts (at PATH, else at its own mount path); repeat for several. The job "
                        "waits until each is ready. Without it: every dataset of the team that is ready")
    p.add_argument("command", nargs=argparse.REMAINDER, help="train.py, or -- COMMAND ARGS...")
    p.set_defaults(func=_submit)

    p = sub.add_parser("jobs", help="list your team's training jobs")
    p.add_argument("--all", action="store_true", help="notebooks too")
    p.set_defaults(func=_jobs)

    p = sub.add_parser("logs", help="print a job's output")
    p.add_argument("id")
    p.add_argument("--pod")
    p.set_defaults(func=_logs)

    p = sub.add_parser("cancel", help="cancel a job")
    p.add_argument("id")
    p.set_defaults(func=_cancel)

    p = sub.add_parser("datasets", help="list the datasets your teams may use; admins: apply or delete them",
                       description=DATASETS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="one JSON object per line, as the service answers")
    p.set_defaults(func=_datasets, action=None)
    actions = p.add_subparsers(dest="action", metavar="{apply,delete}")
    a = actions.add_parser("apply", help="declare or change the Dataset objects of a YAML file (admins)")
    a.add_argument("file", help="YAML with one or more Dataset objects")
    a.add_argument("--dry-run", dest="dry_run", action="store_true",
                   help="say what would be provisioned or refused in each namespace; change nothing")
    a.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="one JSON object per line, as the service answers")
    a = actions.add_parser("delete", help="remove a dataset (admins)")
    a.add_argument("name")
    a.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="the service's answer as JSON")

    p = sub.add_parser("serve", help="run the scheduler service (normally started by the hub)",
                       description="Options are traitlets: --config FILE, --port N, --ip A, --db URL, --tree FILE, "
                                   "or any --TenancyService.<trait>=... / --LocalBackend.<trait>=...")
    p.add_argument("options", nargs=argparse.REMAINDER)
    p.set_defaults(func=_serve)
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    if argv[:1] == ["serve"]:
        # Everything after "serve" is the service's own (traitlets) command line.
        args = argparse.Namespace(func=_serve, options=argv[1:])
    else:
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
