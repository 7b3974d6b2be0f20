"""Run code in a real single-user server's kernel, over the Jupyter server's REST + websocket API."""

from __future__ import annotations

import asyncio
import json
import uuid

from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect


def run_code(hub, user: str, token: str, code: str, *, server: str = "", timeout: float = 60) -> str:
    """Start a kernel in ``user``'s server, run ``code``, return its stdout; raise on an error."""
    base = hub.server_url(user, server).rstrip("/")
    r = hub.request("POST", f"{base}/api/kernels", token=token, json={"name": "python3"})
    assert r.status_code == 201, (r.status_code, r.text)
    kernel = r.json()["id"]
    try:
        return asyncio.run(_execute(base, kernel, token, code, timeout))
    finally:
        hub.request("DELETE", f"{base}/api/kernels/{kernel}", token=token)


async def _execute(base: str, kernel: str, token: str, code: str, timeout: float) -> str:
    url = base.replace("http://", "ws://") + f"/api/kernels/{kernel}/channels"
    conn = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {token}"}))
    msg_id = uuid.uuid4().hex
    conn.write_message(json.dumps({
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "test", "session": uuid.uuid4().hex,
                   "version": "5.3"},
        "parent_header": {}, "metadata": {}, "channel": "shell",
        "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True},
    }))
    out, error = [], None
    async def collect():
        # Done when the reply (shell) came and the kernel went idle (iopub): the two channels
        # are not ordered with each other, and the last output may follow the reply.
        nonlocal error
        replied = idle = False
        while not (replied and idle):
            raw = await conn.read_message()
            if raw is None:
                raise AssertionError("kernel websocket closed")
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["header"]["msg_type"]
            if kind == "stream":
                out.append(msg["content"]["text"])
            elif kind == "error":
                error = "\n".join(msg["content"]["traceback"])
            elif kind == "execute_reply":
                replied = True
            elif kind == "status" and msg["content"].get("execution_state") == "idle":
                idle = True
    try:
        await asyncio.wait_for(collect(), timeout)
    finally:
        conn.close()
    if error:
        raise AssertionError(f"the kernel raised:\n{error}")
    return "".join(out)
