"""``python -m hub_ext.backends.local.runner EXIT_FILE -- COMMAND...``: run a training pod's command.

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
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m hub_ext.backends.local.runner EXIT_FILE -- COMMAND...", file=sys.stderr)
        return 2
    exit_file, command = argv[0], argv[2:]
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
    tmp = exit_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(code))
    os.replace(tmp, exit_file)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
