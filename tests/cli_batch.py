"""Run many ``tenancy`` command lines, each in a process of its own, for the price of one start.

``python -m hub_ext.cli`` costs most of a second of imports; a table of a hundred bad inputs
paid that a hundred times. Here one interpreter imports the CLI (and what its commands load)
once, then forks a child per command line: the child runs ``sys.exit(main(argv))`` as
``python -m hub_ext.cli`` does, with its stdout and stderr in files of its own, so each run
still starts from the same clean state and cannot see another's. Reads a JSON list of argv
lists on stdin; prints a JSON list of ``[exit code, stdout, stderr]``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import hub_ext.cli as cli
import hub_ext.sim.simulator  # noqa: F401 - what simulate loads, loaded once before the forks
import hub_ext.validate  # noqa: F401


def run(argv: list[str], scratch: str) -> list:
    out_path, err_path = os.path.join(scratch, "out"), os.path.join(scratch, "err")
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: its own stdout/stderr, then the CLI as ``python -m hub_ext.cli`` runs it
        code = 3
        try:
            out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(out, 1)
            os.dup2(err, 2)
            try:
                code = cli.main(argv)
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    with open(out_path, encoding="utf-8", errors="replace") as out, open(err_path, encoding="utf-8",
                                                                         errors="replace") as err:
        return [os.waitstatus_to_exitcode(status), out.read(), err.read()]


def main() -> None:
    commands = json.load(sys.stdin)
    with tempfile.TemporaryDirectory() as scratch:
        results = [run(argv, scratch) for argv in commands]
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
