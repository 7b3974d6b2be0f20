"""Debian's slapd as a throw-away test server: 127.0.0.1 on a free port, its database and config in
one folder, loaded from ``directory.ldif`` (people in ``ou=people``, teams as ``groupOfNames`` in
``ou=groups`` under ``dc=example,dc=org``). Not a system service: nothing in /etc or /var is used.

    with Slapd(workdir) as ldap:
        ldap.url                  # ldap://127.0.0.1:<port>
        ldap.move("alice", "data-science-alpha", "data-science-beta")
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUFFIX = "dc=example,dc=org"
ADMIN_DN = f"cn=admin,{SUFFIX}"
ADMIN_PASSWORD = "admin-pw"
SLAPD = os.environ.get("TENANCY_SLAPD") or shutil.which("slapd") or "/usr/sbin/slapd"
MODULES = "/usr/lib/ldap"
SCHEMAS = "/etc/ldap/schema"

CONFIG = """\
include {schemas}/core.schema
include {schemas}/cosine.schema
include {schemas}/inetorgperson.schema
modulepath {modules}
moduleload back_mdb
pidfile {work}/slapd.pid
database mdb
maxsize 10485760
suffix "{suffix}"
rootdn "{admin}"
rootpw {password}
directory {work}/data
access to attrs=userPassword by self read by anonymous auth by * none
access to * by * read
"""


class SlapdError(RuntimeError):
    """slapd is missing, or did not start."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def group_dn(name: str) -> str:
    return f"cn={name},ou=groups,{SUFFIX}"


def user_dn(name: str) -> str:
    return f"uid={name},ou=people,{SUFFIX}"


class Slapd:
    def __init__(self, workdir: str | os.PathLike[str], ldif: Path = HERE / "directory.ldif"):
        self.work = Path(workdir)
        self.ldif = ldif
        self.port = _free_port()
        self.url = f"ldap://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30) -> "Slapd":
        if not os.access(SLAPD, os.X_OK):
            raise SlapdError(f"no slapd at {SLAPD}: scripts/install-system-packages installs Debian's slapd")
        (self.work / "data").mkdir(parents=True, exist_ok=True)
        conf = self.work / "slapd.conf"
        conf.write_text(CONFIG.format(schemas=SCHEMAS, modules=MODULES, work=self.work, suffix=SUFFIX,
                                      admin=ADMIN_DN, password=ADMIN_PASSWORD))
        slapadd = shutil.which("slapadd") or "/usr/sbin/slapadd"
        out = subprocess.run([slapadd, "-f", str(conf), "-l", str(self.ldif)], capture_output=True, text=True)
        if out.returncode != 0:
            raise SlapdError(f"slapadd could not load {self.ldif.name}: {out.stderr.strip().splitlines()[-1:]}")
        log = open(self.work / "slapd.log", "ab")
        # -d 0: in the foreground (this process owns it), logging only what fails
        self.proc = subprocess.Popen([SLAPD, "-f", str(conf), "-h", self.url + "/", "-d", "0"],
                                     stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise SlapdError(f"slapd exited with {self.proc.returncode}: see {self.work / 'slapd.log'}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise SlapdError(f"slapd did not listen on {self.url} within {timeout:.0f} s")
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def __enter__(self) -> "Slapd":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _admin(self):
        import ldap3

        return ldap3.Connection(ldap3.Server(self.url), ADMIN_DN, ADMIN_PASSWORD, auto_bind=True)

    def move(self, user: str, old: str, new: str) -> None:
        """Take ``user`` out of group ``old`` and into ``new`` (as a directory admin would)."""
        import ldap3

        conn = self._admin()
        try:
            for group, op in ((new, ldap3.MODIFY_ADD), (old, ldap3.MODIFY_DELETE)):
                if not conn.modify(group_dn(group), {"member": [(op, [user_dn(user)])]}):
                    raise SlapdError(f"could not change group {group}: {conn.result.get('description')}")
        finally:
            conn.unbind()
