"""What kube-apiserver spent its CPU on, side by side: profiles from ``tenancy bench --cluster --apiserver-profile``.

    .venv/bin/python tools/bench/pprof_shares.py PREFIX-1000-r0-plain.pprof PREFIX-1000-r0-service.pprof ...

Reads each profile's samples with ``go tool pprof -traces`` and puts each sample's CPU in one
category, by the frame nearest the leaf that names one (a sample under ``WatchServer`` is watch
serving whatever its leaf does: encoding the event as JSON or protobuf, writing it out). Prints
one column per profile: the CPU-seconds the profile holds and each category's share. A flat
``go tool pprof -top`` lists the Go runtime's own functions first (allocation, garbage
collection) and does not say which request made them work.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter

WATCH = "watch: serving events"
#: (category, a regex one frame matches), in order of precedence within a frame
CATEGORIES = (
    ("garbage collection (background)", r"gcBgMarkWorker"),
    (WATCH, r"handlers\.\(\*WatchServer\)"),
    ("watch cache: dispatch, filter", r"cacher\.\(\*Cacher\)\.(dispatchEvent|processEvent)|cacheWatcher|watchCache"),
    ("managedFields (field manager)", r"managedfields|structured-merge-diff"),
    ("authentication (client certificates)", r"crypto/x509\.\(\*Certificate\)\.Verify"),
    ("TLS handshakes", r"crypto/tls\.\(\*Conn\)\.(serverHandshake|Handshake|handshake)"),
    ("etcd client", r"etcd3\.\(\*store\)\.(updateState|conditionalDelete)|clientv3|grpc"),
    ("request body decode", r"serializer/(json|protobuf)\.\(\*Serializer\)\.Decode"),
    ("response encode", r"responsewriters|serializer/(json|protobuf)\.\(\*Serializer\)\.Encode"),
    ("admission", r"admission"),
    ("connections: TLS and http2 reads/writes",
     r"crypto/tls\.\(\*Conn\)\.(Write|Read)|http2\.\(\*(Framer|serverConn|bufferedWriter|requestBody)"),
    ("metrics", r"prometheus|/metrics\."),
    ("request filters (other)", r"k8s\.io/apiserver/pkg/(endpoints|server)/filters|flowcontrol"),
)


def samples(traces: str) -> list[tuple[float, list[str]]]:
    """``go tool pprof -traces`` output as ``[(CPU seconds, frames leaf first)]``."""
    out = []
    for block in traces.split("-----------+-------------------------------------------------------")[1:]:
        lines = [line.strip() for line in block.strip("\n").splitlines() if line.strip()]
        head = re.match(r"([\d.]+)(s|ms|us|ns)\s+(.*)", lines[0]) if lines else None
        if head is None:
            continue
        seconds = float(head.group(1)) * {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[head.group(2)]
        out.append((seconds, [head.group(3), *lines[1:]]))
    return out


def category(frames: list[str]) -> str:
    """Where one sample's CPU went (see CATEGORIES); a watch's is split by what the leaf did."""
    text = "\n".join(frames)
    if re.search(dict(CATEGORIES)[WATCH], text):
        what = "JSON encode" if re.search(r"serializer/json|encoding/json", text) else \
            "protobuf encode" if re.search(r"serializer/protobuf|MarshalToSizedBuffer", text) else "the rest"
        return f"{WATCH}: {what}"
    for frame in frames:  # leaf first: the nearest frame that names a category
        for name, pattern in CATEGORIES:
            if re.search(pattern, frame):
                return name
    return "other"


def shares(traces: str) -> tuple[float, Counter]:
    """(CPU seconds in the profile, CPU seconds per category)."""
    found = samples(traces)
    by = Counter()
    for seconds, frames in found:
        by[category(frames)] += seconds
    return sum(seconds for seconds, _ in found), by


def main(paths: list[str]) -> int:
    if not paths:
        print("usage: pprof_shares.py PROFILE.pprof ...", file=sys.stderr)
        return 2
    columns = []
    for path in paths:
        done = subprocess.run(["go", "tool", "pprof", "-traces", path], capture_output=True, text=True)
        if done.returncode != 0:
            print(f"pprof_shares.py: {path}: go tool pprof could not read it: "
                  f"{' '.join(done.stderr.split())[:200]}", file=sys.stderr)
            return 1
        columns.append((path, *shares(done.stdout)))
    names = sorted(set().union(*(by for _, _, by in columns)), key=lambda n: -columns[0][2][n])
    print("kube-apiserver's CPU".ljust(46) + "".join(p.rsplit("/", 1)[-1].removesuffix(".pprof")[-24:].rjust(26)
                                                     for p, _, _ in columns))
    print("CPU seconds in the profile".ljust(46) + "".join(f"{total:26.2f}" for _, total, _ in columns))
    for name in names:
        print(name.ljust(46) + "".join(f"{by[name]:17.2f} ({100 * by[name] / total:4.1f} %)" if total else " " * 26
                                       for _, total, by in columns))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
