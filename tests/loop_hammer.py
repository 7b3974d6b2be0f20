"""A client process that hammers one endpoint of the tenancy service (for tests/test_service_loop_bounds.py).

    python loop_hammer.py URL METHOD TOKENS REQUESTS [BODY]

``TOKENS`` is a comma-separated list: one thread per token, each sending ``REQUESTS``
requests one after the other. It runs in a process of its own so that its work never
holds the service's event loop (nor the interpreter lock the service's thread needs).
Prints one JSON line: the status codes seen, and how long the slowest answer took.
"""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
from urllib.parse import urlsplit


def hammer(url: str, method: str, token: str, requests: int, body: bytes | None, out: dict, lock) -> None:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=900)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    headers = {"Authorization": f"token {token}", "Content-Type": "application/json"}
    for _ in range(requests):
        started = time.perf_counter()
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        took = time.perf_counter() - started
        with lock:
            out["codes"][str(resp.status)] = out["codes"].get(str(resp.status), 0) + 1
            out["slowest"] = max(out["slowest"], took)
    conn.close()


def main(argv: list[str]) -> None:
    url, method, tokens, requests = argv[0], argv[1], argv[2].split(","), int(argv[3])
    body = argv[4].encode() if len(argv) > 4 else None
    out, lock = {"codes": {}, "slowest": 0.0}, threading.Lock()
    threads = [threading.Thread(target=hammer, args=(url, method, t, requests, body, out, lock)) for t in tokens]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
