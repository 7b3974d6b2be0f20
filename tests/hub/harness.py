"""Run a real JupyterHub for integration tests: no mocks.

``RealHub`` starts ``python -m jupyterhub`` as a subprocess, which starts a real
configurable-http-proxy (installed by ``scripts/install-chp``) and, on request, real
single-user servers. Everything listens on random free ports on 127.0.0.1, and all
state (sqlite db, cookie secret, homes, jupyter dirs, the log) lives in one work dir.

    from harness import RealHub

    with RealHub("jupyterhub_config.py", "/tmp/work") as hub:
        status, body = hub.api("GET", "/users")              # admin token by default
        token = hub.token_for("alice")                        # creates alice if needed
        hub.start_server("alice"); hub.wait_server_ready("alice")
        r = hub.request("GET", "/user/alice/api/status", token=token)
        session = hub.login("alice", "pw")                    # through the real login form

Only the standard library is needed to import this module; ``requests`` is used when
installed (``psutil`` too), otherwise urllib (and ``/proc``) stand in.
"""

from __future__ import annotations

import atexit
import http.cookiejar
import json as _json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
import weakref
from pathlib import Path
from typing import Any, Iterable, Mapping

try:  # pragma: no cover - depends on the environment
    import requests
except ImportError:  # pragma: no cover
    requests = None

try:  # pragma: no cover - depends on the environment
    import psutil
except ImportError:  # pragma: no cover
    psutil = None

REPO = Path(__file__).resolve().parents[2]
INSTALL_CHP = REPO / "scripts" / "install-chp"

#: Set in the environment of the hub and of everything it spawns (proxy, single-user
#: servers, managed services), so that ``stop()`` finds every process of one harness even
#: though the proxy and the spawners start their children in new sessions.
MARKER_ENV = "TENANCY_HUB_HARNESS"
#: The work dir, in the hub's environment (config files may use it).
WORKDIR_ENV = "TENANCY_HUB_WORKDIR"

#: A minimal hub config: DummyAuthenticator (any name, password "pw"), and
#: SimpleLocalProcessSpawner running jupyterhub-singleuser as this user, with homes in
#: the work dir. Write it to a file, or pass it to the ``hub_factory`` fixture.
SIMPLE_CONFIG = """\
import os
c = get_config()  # noqa: F821
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = "pw"
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = os.path.join(
    os.environ["TENANCY_HUB_WORKDIR"], "home", "{username}"
)
c.JupyterHub.allow_named_servers = True
"""

ADMIN_SERVICE = "test-admin"
ADMIN_SCOPES = [
    "admin:users",
    "admin:groups",
    "admin:servers",
    "tokens",
    "list:users",
    "read:users",
    "access:services",
    # beyond the brief's list, read-only and handy for tests of hub services:
    "list:services",
    "read:services",
]

# Variables that would make the hub or its children talk to another hub / proxy / config.
_SCRUB_PREFIXES = ("JUPYTERHUB_", "JPY_", "CONFIGPROXY_", "JUPYTER_")


class HubError(RuntimeError):
    """The hub did not start, died, or an API call the harness relies on failed."""


# --------------------------------------------------------------------------- helpers


def install_chp(env: Mapping[str, str] | None = None, timeout: float = 600) -> str:
    """Run ``scripts/install-chp`` (idempotent) and return the CHP executable's path."""
    try:
        out = subprocess.run(
            ["bash", str(INSTALL_CHP)],
            capture_output=True,
            text=True,
            env=None if env is None else {**os.environ, **env},
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise HubError(f"scripts/install-chp failed: {e}") from e
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines or not os.access(lines[-1], os.X_OK):
        raise HubError(
            f"scripts/install-chp failed (exit {out.returncode}):\n{out.stderr.strip()}"
        )
    return lines[-1]


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def q(part: str) -> str:
    """Quote one URL path segment (a user or server name)."""
    return urllib.parse.quote(part, safe="")


def get_cookie(jar: Iterable[Any], name: str) -> str | None:
    """A cookie's value from a (requests or stdlib) cookie jar; with several cookies of
    that name (several paths) the one with the longest path wins."""
    best = None
    for c in jar:
        if c.name == name or c.name == f"__Host-{name}":
            if best is None or len(c.path or "") >= len(best.path or ""):
                best = c
    return None if best is None else best.value


def body_of(response: Any) -> Any:
    """Parsed JSON body, or the text, or None when empty."""
    text = response.text
    if not text:
        return None
    try:
        return _json.loads(text)
    except ValueError:
        return text


# ------------------------------------------------------- urllib stand-in for requests


class _Response:
    def __init__(self, status: int, headers: Any, content: bytes, url: str):
        self.status_code = status
        self.headers = headers
        self.content = content
        self.url = url

    @property
    def ok(self) -> bool:
        return self.status_code < 400

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return _json.loads(self.text)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # noqa: D401 - stdlib signature
        return None


class UrllibSession:
    """The subset of ``requests.Session`` the harness and its tests use."""

    def __init__(self) -> None:
        self.cookies = http.cookiejar.CookieJar()
        self.headers: dict[str, str] = {}
        cookies = urllib.request.HTTPCookieProcessor(self.cookies)
        self._follow = urllib.request.build_opener(cookies)
        self._nofollow = urllib.request.build_opener(cookies, _NoRedirect)

    def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str] | None = None,
        json: Any = None,
        data: Any = None,
        headers: Mapping[str, str] | None = None,
        allow_redirects: bool = True,
        timeout: float | None = 30,
    ) -> _Response:
        hdrs = {**self.headers, **(headers or {})}
        body = None
        if params:
            url += ("&" if "?" in url else "?") + urllib.parse.urlencode(params)
        if json is not None:
            body = _json.dumps(json).encode()
            hdrs.setdefault("Content-Type", "application/json")
        elif data is not None:
            if isinstance(data, Mapping):
                body = urllib.parse.urlencode(data).encode()
                hdrs.setdefault("Content-Type", "application/x-www-form-urlencoded")
            else:
                body = data.encode() if isinstance(data, str) else data
        req = urllib.request.Request(url, data=body, headers=hdrs, method=method.upper())
        opener = self._follow if allow_redirects else self._nofollow
        try:
            with opener.open(req, timeout=timeout) as r:
                return _Response(r.status, r.headers, r.read(), r.url)
        except urllib.error.HTTPError as e:
            return _Response(e.code, e.headers, e.read(), e.url)

    def get(self, url: str, **kw: Any) -> _Response:
        return self.request("GET", url, **kw)

    def post(self, url: str, **kw: Any) -> _Response:
        return self.request("POST", url, **kw)

    def put(self, url: str, **kw: Any) -> _Response:
        return self.request("PUT", url, **kw)

    def patch(self, url: str, **kw: Any) -> _Response:
        return self.request("PATCH", url, **kw)

    def delete(self, url: str, **kw: Any) -> _Response:
        return self.request("DELETE", url, **kw)

    def close(self) -> None:
        pass

    def __enter__(self) -> "UrllibSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def new_session() -> Any:
    """A ``requests.Session`` if requests is installed, else a ``UrllibSession``."""
    return requests.Session() if requests is not None else UrllibSession()


# ------------------------------------------------------------------------- processes
# A process is identified by (pid, start time) so a recycled pid is never signalled.


def _proc_stat(pid: int) -> tuple[int, str, int] | None:
    """(start time, state, ppid) of a live process, or None."""
    if psutil is not None:
        try:
            p = psutil.Process(pid)
            return (int(p.create_time() * 100), p.status(), p.ppid())
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    rest = stat[stat.rfind(")") + 2 :].split()
    return (int(rest[19]), rest[0], int(rest[1]))


def _is_zombie(state: str) -> bool:
    return state in ("Z", "zombie", "X", "dead")


def proc_alive(pid: int, ident: int | None = None) -> bool:
    """Is ``pid`` running (and not a zombie)? With ``ident`` (from ``processes()``), also
    checks that it is still the same process."""
    st = _proc_stat(pid)
    if st is None or _is_zombie(st[1]):
        return False
    return ident is None or st[0] == ident


def _all_pids() -> list[int]:
    if psutil is not None:
        return psutil.pids()
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def _environ_has(pid: int, needle: bytes) -> bool:
    if psutil is not None:
        try:
            env = psutil.Process(pid).environ()
        except (psutil.Error, OSError):
            return False
        key, _, value = needle.decode().rstrip("\0").partition("=")
        return env.get(key) == value
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in b"\0" + f.read()
    except OSError:
        return False


def _cmdline(pid: int) -> list[str]:
    if psutil is not None:
        try:
            return psutil.Process(pid).cmdline()
        except (psutil.Error, OSError):
            return []
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def _descendants(root: int) -> dict[int, int]:
    """{pid: ident} of every live descendant of ``root``."""
    children: dict[int, list[int]] = {}
    idents: dict[int, int] = {}
    for pid in _all_pids():
        st = _proc_stat(pid)
        if st is None or _is_zombie(st[1]):
            continue
        idents[pid] = st[0]
        children.setdefault(st[2], []).append(pid)
    out: dict[int, int] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in out:
            out[pid] = idents[pid]
            todo.extend(children.get(pid, []))
    return out


def _signal(pid: int, ident: int, sig: int) -> None:
    if proc_alive(pid, ident):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


_LIVE: "weakref.WeakSet[RealHub]" = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:  # pragma: no cover - only on abnormal exits
    for hub in list(_LIVE):
        try:
            hub.stop(timeout=5)
        except Exception:
            pass


# ---------------------------------------------------------------------------- RealHub


class RealHub:
    """One real JupyterHub (+ CHP + single-user servers) in ``workdir``.

    ``config``: a jupyterhub_config.py (or None). It is loaded first; then the harness
    forces what makes the hub hermetic (ports, db, cookie secret, proxy, pid files), adds
    ``MARKER_ENV`` and isolated ``JUPYTER_*`` dirs (not as root) to ``c.Spawner.environment``, appends
    the admin service and its role to ``c.JupyterHub.services`` / ``load_roles`` (unless
    ``register_admin=False``: then ``admin_token`` must be one the config grants), and
    finally runs ``extra_config`` (a string or lines of Python, with ``c`` in scope).

    ``env`` is added to the hub's environment (which is otherwise the caller's, minus
    ``JUPYTERHUB_*``/``JUPYTER_*``/``CONFIGPROXY_*``, with ``HOME`` and the jupyter dirs in
    the work dir and this Python's bin dir first on PATH).
    """

    def __init__(
        self,
        config: str | os.PathLike[str] | None,
        workdir: str | os.PathLike[str],
        *,
        extra_config: str | Iterable[str] = (),
        env: Mapping[str, str] | None = None,
        chp_path: str | None = None,
        admin_token: str | None = None,
        register_admin: bool = True,
        python: str = sys.executable,
        # a hub that answers in 5 s alone took over 60 s beside the suite and other runs (load 9)
        start_timeout: float = 180,
        isolate_jupyter_dirs: bool = True,
    ) -> None:
        self.config = None if config is None else Path(config).resolve()
        self.workdir = Path(workdir).resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.extra_config = (
            extra_config if isinstance(extra_config, str) else "\n".join(extra_config)
        )
        self.extra_env = dict(env or {})
        self.chp_path = chp_path
        self.admin_token = admin_token or secrets.token_hex(32)
        self.register_admin = register_admin
        self.python = python
        self.start_timeout = start_timeout
        self.isolate_jupyter_dirs = isolate_jupyter_dirs

        self.marker = uuid.uuid4().hex
        self.proxy_auth_token = secrets.token_hex(32)
        self.log_path = self.workdir / "hub.log"
        self.config_path = self.workdir / "harness_config.py"
        self.db_path = self.workdir / "jupyterhub.sqlite"
        self.cookie_secret_path = self.workdir / "jupyterhub_cookie_secret"
        self.home_root = self.workdir / "home"
        self._pick_ports()
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_file: Any = None

    # ---- addresses

    def _pick_ports(self) -> None:
        ports: list[int] = []
        while len(ports) < 3:
            port = free_port()
            if port not in ports:
                ports.append(port)
        self.port, self.proxy_api_port, self.hub_port = ports
        self.public_url = f"http://127.0.0.1:{self.port}"
        self.hub_api_url = f"{self.public_url}/hub/api"
        self.proxy_api_url = f"http://127.0.0.1:{self.proxy_api_port}"
        self.hub_url = f"http://127.0.0.1:{self.hub_port}"  # the hub itself, not proxied

    def url(self, path: str = "") -> str:
        """Public (proxied) URL of ``path`` (absolute URLs pass through)."""
        if path.startswith(("http://", "https://")):
            return path
        return f"{self.public_url}/{path.lstrip('/')}"

    # ---- lifecycle

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> "RealHub":
        """Start the hub and wait until ``/hub/api/`` answers through the proxy."""
        if self.running:
            raise HubError("hub already running")
        if self.chp_path is None:
            self.chp_path = install_chp()
        first = not self.db_path.exists()
        for attempt in range(3):
            self._spawn()
            try:
                self._wait_up()
                return self
            except HubError as e:
                self.stop()
                # a port grabbed by someone else between free_port() and bind: retry
                # with new ports (only before any state refers to them)
                if first and attempt < 2 and re.search(
                    r"EADDRINUSE|[Aa]ddress already in use", str(e)
                ):
                    self._pick_ports()
                    continue
                raise
        raise AssertionError("unreachable")

    def _hub_env(self) -> dict[str, str]:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(_SCRUB_PREFIXES)
        }
        bindir = str(Path(self.python).parent)
        hub_home = self.workdir / "hub-home"
        hub_home.mkdir(exist_ok=True)
        env.update(
            {
                "PATH": bindir + os.pathsep + env.get("PATH", os.defpath),
                "HOME": str(hub_home),
                "PYTHONUNBUFFERED": "1",
                MARKER_ENV: self.marker,
                WORKDIR_ENV: str(self.workdir),
            }
        )
        if self.isolate_jupyter_dirs:
            jdir = self.workdir / "jupyter" / "_hub"
            env.update(
                {
                    "JUPYTER_CONFIG_DIR": str(jdir / "config"),
                    "JUPYTER_DATA_DIR": str(jdir / "data"),
                    "JUPYTER_RUNTIME_DIR": str(jdir / "runtime"),
                }
            )
        env.update(self.extra_env)
        return env

    def _write_config(self) -> None:
        w = str(self.workdir)
        lines = [
            "# Generated by tests/hub/harness.py for one test hub; rewritten on each start.",
            "import os",
            "c = get_config()  # noqa: F821",
        ]
        if self.config is not None:
            lines.append(f"load_subconfig({str(self.config)!r})  # noqa: F821")
        lines += [
            "",
            "# ---- forced by the harness",
            "c.JupyterHub.ip = '127.0.0.1'",
            f"c.JupyterHub.port = {self.port}",
            "c.JupyterHub.hub_ip = '127.0.0.1'",
            f"c.JupyterHub.hub_port = {self.hub_port}",
            f"c.ConfigurableHTTPProxy.api_url = {self.proxy_api_url!r}",
            f"c.ConfigurableHTTPProxy.command = [{self.chp_path!r}]",
            f"c.ConfigurableHTTPProxy.auth_token = {self.proxy_auth_token!r}",
            f"c.ConfigurableHTTPProxy.pid_file = {os.path.join(w, 'proxy.pid')!r}",
            f"c.JupyterHub.db_url = {'sqlite:///' + str(self.db_path)!r}",
            f"c.JupyterHub.cookie_secret_file = {str(self.cookie_secret_path)!r}",
            f"c.JupyterHub.pid_file = {os.path.join(w, 'jupyterhub.pid')!r}",
            "def _spawner_env(extra):",
            "    # Spawner and any subclass section that sets its own environment (which",
            "    # would otherwise replace the Spawner one)",
            "    c.Spawner.environment.update(extra)",
            "    for _name, _section in list(c.items()):",
            "        if _name not in ('Spawner', 'JupyterHub') and hasattr(_section, 'keys') \\",
            "                and 'environment' in _section:",
            "            _section.environment.update(extra)",
            f"_marker = {{{MARKER_ENV!r}: {self.marker!r}}}",
            "_spawner_env(_marker)",
            "if isinstance(c.JupyterHub.services, list):  # managed services, too",
            "    for _s in c.JupyterHub.services:",
            "        if isinstance(_s, dict) and _s.get('command'):",
            "            _s.setdefault('environment', {}).update(_marker)",
        ]
        # As root, servers may run as the users' own accounts, which cannot enter the work dir
        # (nor create their dirs in it); their HOME, which every local spawner sets per user,
        # keeps their Jupyter dirs apart instead.
        if self.isolate_jupyter_dirs and not (hasattr(os, "geteuid") and os.geteuid() == 0):
            jroot = os.path.join(w, "jupyter")
            lines += [
                f"_jroot = {jroot!r}",
                "def _jdir(kind):",
                "    return lambda spawner: os.path.join(",
                "        _jroot, spawner.user.name, spawner.name or '_default', kind)",
                "_spawner_env({",
                "    'JUPYTER_CONFIG_DIR': _jdir('config'),",
                "    'JUPYTER_DATA_DIR': _jdir('data'),",
                "    'JUPYTER_RUNTIME_DIR': _jdir('runtime'),",
                "})",
            ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            # jupyter-server refuses to run as root without allow_root; this config dir
            # is searched by any spawned jupyter server, whatever the spawner
            shared = self.workdir / "jupyter" / "_harness_config"
            shared.mkdir(parents=True, exist_ok=True)
            (shared / "jupyter_server_config.json").write_text(
                _json.dumps({"ServerApp": {"allow_root": True}}) + "\n"
            )
            lines.append(
                f"_spawner_env({{'JUPYTER_CONFIG_PATH': {str(shared)!r}}})"
            )
        if self.register_admin:
            service = {"name": ADMIN_SERVICE, "api_token": self.admin_token}
            role = {
                "name": ADMIN_SERVICE,
                "scopes": ADMIN_SCOPES,
                "services": [ADMIN_SERVICE],
            }
            lines += [
                f"c.JupyterHub.services.append({service!r})",
                f"c.JupyterHub.load_roles.append({role!r})",
            ]
        if self.extra_config:
            lines += ["", "# ---- extra_config", self.extra_config]
        self.config_path.write_text("\n".join(lines) + "\n")

    def _spawn(self) -> None:
        self._write_config()
        self._log_file = open(self.log_path, "ab")
        self._log_file.write(
            f"\n===== harness: starting hub at {time.strftime('%H:%M:%S')} "
            f"(public {self.public_url}) =====\n".encode()
        )
        self._log_file.flush()
        cmd = [
            self.python, "-m", "jupyterhub", "-f", str(self.config_path),
            "--ip", "127.0.0.1", "--port", str(self.port),
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            cmd,
            cwd=self.workdir,
            env=self._hub_env(),
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        _LIVE.add(self)

    def _wait_up(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        url = f"{self.hub_api_url}/"
        while True:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                raise HubError(
                    f"jupyterhub exited with status {code} during startup; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            try:
                r = self.request("GET", url, timeout=2)
                if r.status_code == 200 and isinstance(body_of(r), dict):
                    return
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise HubError(
                    f"jupyterhub did not answer {url} within {self.start_timeout:.0f} s; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(0.1)

    def processes(self) -> dict[int, int]:
        """{pid: ident} of every live process of this harness: the hub, its proxy, its
        single-user servers and managed services (found by ``MARKER_ENV`` and as
        descendants of the hub)."""
        needle = f"{MARKER_ENV}={self.marker}\0".encode()
        found: dict[int, int] = {}
        if self.proc is not None and proc_alive(self.proc.pid):
            found[self.proc.pid] = _proc_stat(self.proc.pid)[0]  # type: ignore[index]
            found.update(_descendants(self.proc.pid))
        me = os.getpid()
        for pid in _all_pids():
            if pid != me and pid not in found and _environ_has(pid, needle):
                st = _proc_stat(pid)
                if st is not None and not _is_zombie(st[1]):
                    found[pid] = st[0]
        return found

    def process_cmdlines(self) -> dict[int, list[str]]:
        """{pid: argv} of ``processes()``."""
        return {pid: _cmdline(pid) for pid in self.processes()}

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM the hub (it stops its servers and proxy), SIGKILL its process group after
        ``timeout``, then terminate/kill any leftover process of this harness."""
        procs = self.processes()
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        # The proxy and the spawned servers run in sessions of their own.
        procs.update(self.processes())
        if proc is not None:
            procs.pop(proc.pid, None)
        leftovers = {p: i for p, i in procs.items() if proc_alive(p, i)}
        for pid, ident in leftovers.items():
            _signal(pid, ident, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(
            proc_alive(p, i) for p, i in leftovers.items()
        ):
            time.sleep(0.05)
        for pid, ident in leftovers.items():
            _signal(pid, ident, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(
            proc_alive(p, i) for p, i in leftovers.items()
        ):
            time.sleep(0.05)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        _LIVE.discard(self)

    def restart(self) -> "RealHub":
        """Stop and start the same hub (same ports, db, cookie secret, tokens)."""
        self.stop()
        return self.start()

    def __enter__(self) -> "RealHub":
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    # ---- HTTP

    def request(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        session: Any = None,
        json: Any = None,
        data: Any = None,
        headers: Mapping[str, str] | None = None,
        allow_redirects: bool = False,
        timeout: float = 30,
    ) -> Any:
        """Any request through the public proxy URL; returns the response object
        (``requests.Response`` or the urllib stand-in). ``token`` → Authorization header
        (none by default); ``session`` → its cookies (default: a fresh, cookie-less one)."""
        hdrs = dict(headers or {})
        if token:
            hdrs["Authorization"] = f"token {token}"
        s = session if session is not None else new_session()
        kw: dict[str, Any] = {}
        if json is not None:
            kw["json"] = json
        if data is not None:
            kw["data"] = data
        try:
            return s.request(
                method.upper(),
                self.url(path),
                headers=hdrs,
                allow_redirects=allow_redirects,
                timeout=timeout,
                **kw,
            )
        finally:
            if session is None:
                s.close()

    def api(
        self,
        method: str,
        path: str,
        json: Any = None,
        token: str | None = None,
        *,
        session: Any = None,
        timeout: float = 30,
    ) -> tuple[int, Any]:
        """``method /hub/api{path}`` → (status, parsed JSON | text | None).

        Authenticated with the admin token unless ``token`` is given (``token=""``: none)
        or a logged-in ``session`` is (then its cookies, and its X-XSRFToken header)."""
        if token is None and session is None:
            token = self.admin_token
        r = self.request(
            method,
            f"/hub/api/{path.lstrip('/')}",
            token=token or None,
            session=session,
            json=json,
            timeout=timeout,
        )
        return r.status_code, body_of(r)

    def _check(self, what: str, status: int, body: Any, ok: Iterable[int]) -> None:
        if status not in ok:
            raise HubError(f"{what}: HTTP {status}: {body}")

    # ---- users, tokens, login

    def ensure_user(self, name: str, *, admin: bool = False) -> dict[str, Any]:
        """The user's model, creating the user first if needed."""
        status, body = self.api("GET", f"/users/{q(name)}")
        if status == 404:
            status, body = self.api("POST", f"/users/{q(name)}", {"admin": admin})
            self._check(f"create user {name}", status, body, (201,))
        else:
            self._check(f"get user {name}", status, body, (200,))
        return body

    def token_for(
        self,
        user: str,
        scopes: list[str] | None = None,
        *,
        note: str = "harness",
        expires_in: int | None = None,
    ) -> str:
        """A new API token for ``user`` (created if missing), via the admin token. Without
        ``scopes`` it has the user's own permissions."""
        self.ensure_user(user)
        req: dict[str, Any] = {"note": note}
        if scopes is not None:
            req["scopes"] = scopes
        if expires_in is not None:
            req["expires_in"] = expires_in
        status, body = self.api("POST", f"/users/{q(user)}/tokens", req)
        self._check(f"token for {user}", status, body, (200, 201))
        return body["token"]

    def login(self, username: str, password: str, *, session: Any = None) -> Any:
        """A session logged in through the real form (GET then POST /hub/login).

        The POST's redirect is not followed (it would spawn the default server). The
        returned session carries the hub cookies and an ``X-XSRFToken`` header, so it can
        also call the REST API with cookie auth (``api(..., session=s)``)."""
        s = session if session is not None else new_session()
        login_url = self.url("/hub/login")
        r = s.get(login_url, timeout=30)
        if r.status_code != 200:
            raise HubError(f"GET /hub/login: HTTP {r.status_code}")
        m = re.search(r'name="_xsrf"\s+value="([^"]+)"', r.text) or re.search(
            r'value="([^"]+)"\s+name="_xsrf"', r.text
        )
        xsrf = m.group(1) if m else get_cookie(s.cookies, "_xsrf")
        r = s.post(
            login_url,
            data={"username": username, "password": password, "_xsrf": xsrf or ""},
            allow_redirects=False,
            timeout=30,
        )
        if r.status_code not in (301, 302, 303) or not get_cookie(
            s.cookies, "jupyterhub-hub-login"
        ):
            raise HubError(f"login as {username!r} failed: HTTP {r.status_code}")
        # the xsrf token depends on the login session: a page view issues the new one
        s.get(self.url("/hub/home"), allow_redirects=False, timeout=30)
        xsrf = get_cookie(s.cookies, "_xsrf")
        if xsrf:
            s.headers["X-XSRFToken"] = xsrf
        return s

    # ---- servers

    def _server_path(self, user: str, name: str) -> str:
        return f"/users/{q(user)}/servers/{q(name)}" if name else f"/users/{q(user)}/server"

    def start_server(
        self,
        user: str,
        name: str = "",
        options: Mapping[str, Any] | None = None,
        *,
        token: str | None = None,
        check: bool = True,
    ) -> tuple[int, Any]:
        """POST the server start (user created if missing) → (status, body); 201 started,
        202 pending. With ``check`` any other status raises ``HubError``."""
        self.ensure_user(user)
        status, body = self.api(
            "POST", self._server_path(user, name), dict(options or {}), token=token
        )
        if check:
            self._check(f"start server {user}/{name}", status, body, (201, 202))
        return status, body

    def server_model(self, user: str, name: str = "") -> dict[str, Any] | None:
        """The server's model from ``GET /users/{user}`` (None if not running/pending)."""
        status, body = self.api("GET", f"/users/{q(user)}")
        self._check(f"get user {user}", status, body, (200,))
        return (body.get("servers") or {}).get(name)

    def wait_server_ready(
        self, user: str, name: str = "", timeout: float = 60
    ) -> dict[str, Any]:
        """Poll ``GET /users/{user}`` until the server is ``ready``; returns its model.
        Raises ``HubError`` (with the hub log's tail) if it vanishes or times out."""
        deadline = time.monotonic() + timeout
        while True:
            model = self.server_model(user, name)
            if model is not None and model.get("ready"):
                return model
            if model is None or not (model.get("pending") or model.get("ready")):
                raise HubError(
                    f"server {user}/{name or '(default)'} is not running or starting "
                    f"(spawn failed?): {model}\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise HubError(
                    f"server {user}/{name or '(default)'} not ready after {timeout:.0f} s: "
                    f"{model}\n{self.log_tail()}"
                )
            time.sleep(0.2)

    def server_url(self, user: str, name: str = "") -> str:
        """Public URL of a running server (ends with '/')."""
        model = self.server_model(user, name)
        if model is None:
            raise HubError(f"server {user}/{name or '(default)'} is not running")
        return self.url(model["url"])

    def stop_server(
        self, user: str, name: str = "", *, wait: bool = True, timeout: float = 60,
        check: bool = True,
    ) -> tuple[int, Any]:
        """DELETE the server (204 stopped, 202 stopping); with ``wait`` poll until gone."""
        status, body = self.api("DELETE", self._server_path(user, name))
        if check:
            self._check(f"stop server {user}/{name}", status, body, (202, 204))
        deadline = time.monotonic() + timeout
        while wait and status in (202, 204) and self.server_model(user, name) is not None:
            if time.monotonic() > deadline:
                raise HubError(f"server {user}/{name} still there after {timeout:.0f} s")
            time.sleep(0.2)
        return status, body


__all__ = [
    "ADMIN_SCOPES",
    "ADMIN_SERVICE",
    "HubError",
    "MARKER_ENV",
    "RealHub",
    "SIMPLE_CONFIG",
    "UrllibSession",
    "WORKDIR_ENV",
    "body_of",
    "free_port",
    "get_cookie",
    "install_chp",
    "new_session",
    "proc_alive",
    "q",
]
