"""One Keycloak server for the identity tests, from the distribution ``fetch.sh`` caches.

It runs ``kc.sh start-dev`` in a work folder of its own (its ``bin`` and ``conf`` copied, the
cached ``lib``, ``providers`` and ``themes`` linked), with a file database copied from the one its
first start on this machine made (``_template``), and the realm
``realm-tenancy.json`` imported at start: users alice, bob, carol; groups data-science-alpha,
data-science-beta, marketing; a ``groups`` claim mapper; the confidential client ``jupyterhub``.
Tuned to boot fast: local caches, 127.0.0.1 only, no health or metrics endpoints, the JIT's
first tier only (a test server does little work).

    with Keycloak(workdir) as kc:
        kc.issuer                     # http://127.0.0.1:<port>/realms/tenancy
        kc.move("alice", "data-science-alpha", "data-science-beta")   # the admin REST API
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REALM_FILE = HERE / "realm-tenancy.json"
REALM = "tenancy"
CLIENT_ID, CLIENT_SECRET = "jupyterhub", "hub-client-secret"
ADMIN, ADMIN_PASSWORD = "admin", "admin-pw"
#: Measured on the CI machine: the JIT's first tier only cuts the boot of a test server.
JAVA_OPTS_APPEND = "-XX:TieredStopAtLevel=1 -Xshare:auto"


class KeycloakError(RuntimeError):
    """Keycloak could not be fetched, did not start, or its admin API refused a change."""


def fetch() -> Path:
    """The unpacked distribution (fetched and cached by ``fetch.sh`` the first time)."""
    out = subprocess.run(["bash", str(HERE / "fetch.sh")], capture_output=True, text=True)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines or not (Path(lines[-1]) / "bin" / "kc.sh").exists():
        raise KeycloakError(f"tools/keycloak/fetch.sh failed: {(out.stderr.strip().splitlines() or ['no output'])[-1]}")
    return Path(lines[-1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Keycloak:
    def __init__(self, workdir: str | os.PathLike[str], dist: Path | None = None):
        self.work = Path(workdir)
        self.dist = dist
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.issuer = f"{self.url}/realms/{REALM}"
        self.proc: subprocess.Popen | None = None
        self.boot_seconds: float | None = None

    # -- lifecycle -----------------------------------------------------------------------
    def _home(self) -> Path:
        dist = self.dist or fetch()
        home = self.work / "keycloak"
        if not home.exists():
            home.mkdir(parents=True)
            for part in ("bin", "conf"):
                shutil.copytree(dist / part, home / part)
            for part in ("lib", "providers", "themes"):
                (home / part).symlink_to(dist / part)
        (home / "data" / "import").mkdir(parents=True, exist_ok=True)
        shutil.copy(REALM_FILE, home / "data" / "import" / REALM_FILE.name)
        return home

    def _template(self) -> Path:
        """Where a database made by a first start is kept (beside the distribution): the schema
        Keycloak's Liquibase creates at a first start took 36 of its 55 s on a busy two-core machine,
        and every later start copies it instead. Keyed by the realm file: a changed realm makes a new one."""
        dist = self.dist or fetch()
        digest = hashlib.sha1(REALM_FILE.read_bytes() + dist.name.encode()).hexdigest()[:12]
        return dist.parent / f"database-{digest}"

    def start(self, timeout: float = 240) -> "Keycloak":
        if not shutil.which("java"):
            raise KeycloakError("no java on PATH: Keycloak needs Java 17+ (scripts/install-system-packages installs it)")
        template = self._template()
        if not template.exists():
            self._boot(timeout)  # the first start on this machine: schema, admin and realm made once
            self.stop()
            part = template.with_name(template.name + ".part")
            shutil.rmtree(part, ignore_errors=True)
            shutil.copytree(self.work / "keycloak" / "data" / "h2", part)
            part.rename(template)
        h2 = self._home() / "data" / "h2"
        shutil.rmtree(h2, ignore_errors=True)
        shutil.copytree(template, h2)
        return self._boot(timeout)

    def _boot(self, timeout: float) -> "Keycloak":
        home = self._home()
        env = {**os.environ, "KC_BOOTSTRAP_ADMIN_USERNAME": ADMIN, "KC_BOOTSTRAP_ADMIN_PASSWORD": ADMIN_PASSWORD,
               "JAVA_OPTS_APPEND": JAVA_OPTS_APPEND}
        cmd = ["bash", str(home / "bin" / "kc.sh"), "start-dev", "--import-realm", "--db=dev-file", "--cache=local",
               "--http-host=127.0.0.1", f"--http-port={self.port}", "--health-enabled=false",
               "--metrics-enabled=false"]
        started = time.monotonic()
        log = open(self.work / "keycloak.log", "ab")
        self.proc = subprocess.Popen(cmd, cwd=home, env=env, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        discovery = f"{self.issuer}/.well-known/openid-configuration"
        while True:
            if self.proc.poll() is not None:
                raise KeycloakError(f"Keycloak exited with {self.proc.returncode}: see {self.work / 'keycloak.log'}")
            try:
                with urllib.request.urlopen(discovery, timeout=2) as r:
                    if r.status == 200:
                        self.boot_seconds = time.monotonic() - started
                        return self
            except OSError:
                pass
            if time.monotonic() - started > timeout:
                self.stop()
                raise KeycloakError(f"Keycloak did not answer {discovery} within {timeout:.0f} s: "
                                    f"see {self.work / 'keycloak.log'}")
            time.sleep(0.25)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)  # kc.sh's java runs in the session started for it
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(5)
        self.proc = None

    def __enter__(self) -> "Keycloak":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- the admin REST API ----------------------------------------------------------------
    def _call(self, method: str, path: str, body=None, token: str | None = None, form: dict | None = None):
        data, headers = None, {}
        if form is not None:
            data = urllib.parse.urlencode(form).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        elif body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if token:
            headers["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                text = r.read().decode()
        except urllib.error.HTTPError as err:
            raise KeycloakError(f"{method} {path}: HTTP {err.code}: {err.read().decode()[:200]}") from None
        return json.loads(text) if text else None

    def admin_token(self) -> str:
        answer = self._call("POST", "/realms/master/protocol/openid-connect/token",
                            form={"grant_type": "password", "client_id": "admin-cli",
                                  "username": ADMIN, "password": ADMIN_PASSWORD})
        return answer["access_token"]

    def _ids(self, token: str, user: str, *groups: str) -> tuple[str, list[str]]:
        users = self._call("GET", f"/admin/realms/{REALM}/users?exact=true&username={urllib.parse.quote(user)}",
                           token=token)
        if not users:
            raise KeycloakError(f"no user {user} in realm {REALM}")
        known = {g["name"]: g["id"] for g in self._call("GET", f"/admin/realms/{REALM}/groups", token=token)}
        missing = [g for g in groups if g not in known]
        if missing:
            raise KeycloakError(f"no group {', '.join(missing)} in realm {REALM}")
        return users[0]["id"], [known[g] for g in groups]

    def move(self, user: str, old: str, new: str) -> None:
        """Take ``user`` out of group ``old`` and into ``new``, as an admin does in Keycloak."""
        token = self.admin_token()
        uid, (old_id, new_id) = self._ids(token, user, old, new)
        self._call("PUT", f"/admin/realms/{REALM}/users/{uid}/groups/{new_id}", token=token)
        self._call("DELETE", f"/admin/realms/{REALM}/users/{uid}/groups/{old_id}", token=token)

    def groups_of(self, user: str) -> list[str]:
        token = self.admin_token()
        uid, _ = self._ids(token, user)
        return sorted(g["name"] for g in self._call("GET", f"/admin/realms/{REALM}/users/{uid}/groups", token=token))
