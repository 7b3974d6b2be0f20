"""``python -m hub_ext.backends.local.runner EXIT_FILE [--cgroup FD,...] -- COMMAND...``: run a training pod's command.

With ``--cgroup``, the runner first joins the pod's cgroup through those descriptors (its
``cgroup.procs`` files, opened by the service), before the command starts: nothing of the pod
ever runs outside it. A runner that cannot join it does not run the command (status 126).

The command runs in the runner's process group, which the backend signals as a
whole (SIGTERM, then SIGKILL after the grace period). The runner outlives the
SIGTERM itself, waits for the command and writes its exit status to EXIT_FILE,
so a restarted service can learn how a pod it did not start itself ended.

The runner already runs as the pod's account, in its work folder (EXIT_FILE is
relative to it): the file is the account's own, private (umask 077), and the
service reads it as root without following links (``workdir.read_owned``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys


def main(argv: list[str]) -> int:
    fds = []
    if len(argv) >= 3 and argv[1] == "--cgroup":
        fds = [int(fd) for fd in argv[2].split(",") if fd]
        argv = argv[:1] + argv[3:]
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m hub_ext.backends.local.runner EXIT_FILE [--cgroup FD,...] -- COMMAND...",
              file=sys.stderr)
        return 2
    exit_file, command = argv[0], argv[2:]
    try:
        _join(fds)
    except OSError as err:
        print(f"tenancy: could not put this pod in its cgroup, so it does not run: {err.strerror or err}",
              file=sys.stderr, flush=True)
        code = 126
    else:
        code = _run(command)
    tmp = exit_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(code))
    os.replace(tmp, exit_file)
    return code


def _join(fds: list[int]) -> None:
    try:
        for fd in fds:
            os.write(fd, str(os.getpid()).encode())
    finally:
        for fd in fds:
            os.close(fd)


def _run(command: list[str]) -> int:
    try:
        child = subprocess.Popen(command)
    except OSError as err:
        print(f"cannot run {command[0]}: {err.strerror or err}", file=sys.stderr, flush=True)
        code = 127
    else:
        # The group's SIGTERM reached the command too; stay to record how it ends.
        # (A handler, not SIG_IGN: that would be inherited by commands started later.)
        signal.signal(signal.SIGTERM, lambda *_: None)
        signal.signal(signal.SIGINT, lambda *_: None)
        code = child.wait()
        if code < 0:  # killed by a signal: report it the shell's way
            code = 128 - code
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
