"""Where a py-spy profile's samples go, as shares: the top functions by inclusive share (the samples
with the function anywhere on the stack) and by self share (the function on top).

    .venv/bin/python tools/bench/pyspy_shares.py PROFILE.txt [--top 30] [--match kubernetes/]

PROFILE.txt is py-spy's ``--format raw`` (``tenancy bench --cluster ... --profile PREFIX
--profile-format raw``): one line a stack, ``frame;frame;...;frame COUNT``, each frame
``function (file:line)``. Frames are counted by function and file, lines merged, and a function
that recurses is counted once per stack (shares never pass 100 %). ``--match TEXT`` keeps in
the inclusive list only frames that contain TEXT (``kubernetes/``, ``Loop.``, say).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter

_LINE = re.compile(r":\d+\)$")


def _frame(text: str) -> str:
    """``name (path/file.py:123)`` -> ``name (path/file.py)``: a function's lines merged (py-spy already
    shortens the paths: ``asyncio/events.py``, ``handlers.py``)."""
    return _LINE.sub(")", text.strip())


def shares(lines) -> tuple[int, Counter, Counter]:
    """(samples, inclusive counts, self counts) of a raw profile's lines."""
    total, inclusive, own = 0, Counter(), Counter()
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_frame(f) for f in stack.split(";") if f.strip()]
        if not frames:
            continue
        total += n
        for frame in set(frames):
            inclusive[frame] += n
        own[frames[-1]] += n
    return total, inclusive, own


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", help="py-spy --format raw output")
    parser.add_argument("--top", type=int, default=30, help="how many functions each list shows")
    parser.add_argument("--match", default=None, help="inclusive list: only frames (function and file) that contain this")
    args = parser.parse_args(argv)
    try:
        with open(args.profile) as f:
            total, inclusive, own = shares(f)
    except OSError as err:
        print(f"pyspy_shares: cannot read {args.profile}: {err.strerror}", file=sys.stderr)
        return 1
    if not total:
        print(f"pyspy_shares: {args.profile} holds no samples (is it py-spy's --format raw?)", file=sys.stderr)
        return 1
    print(f"{total} samples")
    print("inclusive (the function anywhere on the stack):")
    shown = [(f, n) for f, n in inclusive.most_common() if args.match is None or args.match in f]
    for frame, n in shown[:args.top]:
        print(f"  {100 * n / total:5.1f} %  {frame}")
    print("self (the function on top of the stack):")
    for frame, n in own.most_common(args.top):
        print(f"  {100 * n / total:5.1f} %  {frame}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
