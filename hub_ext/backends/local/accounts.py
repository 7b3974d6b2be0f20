"""System accounts for hub users: ``jupyter-<name>``, created on demand, as The Littlest JupyterHub does.

The spawner (notebooks, in the hub) and the local backend (training jobs, in the
scheduler service) both run a user's processes as the account named here, so a user's
notebooks and jobs share their files with each other and with nobody else. Both read
``c.LocalAccounts`` from their own configuration file: set the same values in both.

Accounts are made with ``useradd`` when the process runs as root (``create``), with a
home that only the account may enter (mode 0700).
"""

from __future__ import annotations

import hashlib
import os
import pwd
import re
import shutil
import stat
import subprocess
import threading
import time

from traitlets import Bool, Unicode
from traitlets.config import LoggingConfigurable

#: Longest account name ``useradd`` accepts on Linux.
NAME_MAX = 32
#: Hub names that go in unchanged: lowercase letters and digits, single ``-`` or ``_`` between them.
#: They never contain ``--``, which marks the hashed form, so the two forms never collide.
_PLAIN = re.compile(r"[a-z0-9]+(?:[-_][a-z0-9]+)*\Z")
#: What ``useradd`` accepts everywhere (shadow's default check).
_VALID = re.compile(r"[a-z_][a-z0-9_-]*\Z")
_HASH_DIGITS = 10


class AccountError(Exception):
    """A user's system account is missing, cannot be made, or is not fit to use (the message says why)."""


def running_as_root() -> bool:
    return os.geteuid() == 0


def account_name(username: str, template: str = "jupyter-{username}") -> str:
    """The system account of hub user ``username``: the same every time, and never another user's.

    A hub name made of lowercase letters and digits with single ``-`` or ``_`` between
    them, short enough, goes in unchanged: ``alice`` -> ``jupyter-alice``. Any other name
    (``j.doe@example.org``, ``Alice``, ``a--b``, one too long) becomes a lowercase slug of
    it, ``--`` and the first 10 hex digits of the SHA-256 of the full name:
    ``jupyter-j-doe-example-org--<hash>``. Unchanged names never contain ``--``, so the
    two forms cannot meet, and two hashed names differ unless their hashes do not.
    """
    room = NAME_MAX - len(template.format(username=""))
    if room < _HASH_DIGITS + 3:
        raise AccountError(f"LocalAccounts.name_template {template!r} leaves no room for user names "
                           f"(accounts have at most {NAME_MAX} characters)")
    if _PLAIN.match(username) and len(username) <= room:
        part = username
    else:
        digest = hashlib.sha256(username.encode("utf-8")).hexdigest()[:_HASH_DIGITS]
        slug = re.sub(r"[^a-z0-9]+", "-", username.lower()).strip("-")
        slug = slug[: room - _HASH_DIGITS - 2].rstrip("-") or "user"
        part = f"{slug}--{digest}"
    name = template.format(username=part)
    if not _VALID.match(name):
        raise AccountError(f"LocalAccounts.name_template {template!r} makes {name!r} for user {username!r}, "
                           "which is not a valid system account name (start it with a letter, e.g. 'jupyter-{username}')")
    return name


class LocalAccounts(LoggingConfigurable):
    """Finds, and when allowed creates, the system account of each hub user."""

    name_template = Unicode(
        "jupyter-{username}",
        help="""
        The system account of a hub user. ``{username}`` is the hub name when it is a valid
        system name (lowercase letters, digits, single ``-``/``_`` between them), otherwise
        a slug of it with ``--`` and a hash, so that ``j.doe@example.org`` gets
        ``jupyter-j-doe-example-org--<10 hex digits>``: the same every time, never another
        user's, at most 32 characters. Set the same template for the hub (the spawner) and
        the scheduler service (the local backend).

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    create = Bool(
        True,
        help="""
        Create a missing account with ``useradd`` (with a home and a group of its own) when
        running as root. False: every account must exist already (made by you or by your
        identity management); a user without one cannot start a notebook or a job, and the
        error names the account.
        """,
    ).tag(config=True)

    home_dir_template = Unicode(
        "/home/{account}",
        help="""
        Home of a created account (``{account}`` and ``{username}`` are expanded). The home is
        made private to its account (mode 0700) whenever the account is used.
        """,
    ).tag(config=True)

    shell = Unicode("/bin/bash", help="Login shell of a created account.").tag(config=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._lock = threading.Lock()

    def name(self, username: str) -> str:
        return account_name(username, self.name_template)

    def ensure(self, username: str) -> pwd.struct_passwd:
        """The account of ``username`` (created if missing and allowed), its home present and private.

        Blocking (``useradd``): call it from a thread in async code.

        Raises:
            AccountError: with a sentence that says what is wrong and what to do.
        """
        account = self.name(username)
        with self._lock:
            try:
                entry = pwd.getpwnam(account)
            except KeyError:
                entry = self._create(account, username)
            self._private_home(entry)
        return entry

    def _create(self, account: str, username: str) -> pwd.struct_passwd:
        if not self.create:
            raise AccountError(f"there is no system account {account} for hub user {username}: create it "
                               f"(useradd --create-home {account}) or set c.LocalAccounts.create = True")
        if not running_as_root():
            raise AccountError(f"cannot create the system account {account} for hub user {username}: only root can")
        useradd = shutil.which("useradd", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
        if useradd is None:
            raise AccountError(f"cannot create the system account {account}: useradd is not installed")
        home = self.home_dir_template.format(account=account, username=username)
        os.makedirs(os.path.dirname(home.rstrip("/")) or "/", mode=0o755, exist_ok=True)
        comment = re.sub(r"[:,\n\r\\]", " ", f"JupyterHub user {username}")[:200]
        cmd = [useradd, "--create-home", "--home-dir", home, "--shell", self.shell, "--user-group",
               "--comment", comment, account]
        for attempt in range(20):
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
            if done.returncode == 10 and attempt < 19:  # /etc/passwd is locked by another useradd: wait
                time.sleep(0.1 + 0.05 * attempt)
                continue
            break
        try:
            entry = pwd.getpwnam(account)  # made now, or by someone else meanwhile (useradd exits 9 then)
        except KeyError:
            raise AccountError(f"useradd could not create the system account {account} for hub user {username} "
                               f"(exit {done.returncode}): {done.stderr.strip()[:300]}") from None
        if done.returncode == 0:
            self.log.info("created the system account %s for hub user %s (home %s)", account, username, home)
        return entry

    def _private_home(self, entry: pwd.struct_passwd) -> None:
        home = entry.pw_dir
        if not home or not os.path.isabs(home):
            raise AccountError(f"the system account {entry.pw_name} has no usable home ({home!r})")
        try:
            st = os.lstat(home)
        except FileNotFoundError:
            if not running_as_root():
                raise AccountError(f"the home {home} of {entry.pw_name} does not exist") from None
            os.makedirs(os.path.dirname(home.rstrip("/")) or "/", mode=0o755, exist_ok=True)
            os.mkdir(home, 0o700)
            os.chown(home, entry.pw_uid, entry.pw_gid)
            st = os.lstat(home)
        if not stat.S_ISDIR(st.st_mode):
            raise AccountError(f"the home {home} of {entry.pw_name} is not a folder")
        if st.st_uid != entry.pw_uid:
            raise AccountError(f"the home {home} of {entry.pw_name} belongs to uid {st.st_uid}, not to the account: "
                               f"give it to the account (chown) or remove it")
        if stat.S_IMODE(st.st_mode) & 0o077 and running_as_root():
            os.chmod(home, 0o700)


def groups_of(entry: pwd.struct_passwd) -> list[int]:
    """The account's own groups (primary first), for ``setgroups``: never the caller's."""
    return os.getgrouplist(entry.pw_name, entry.pw_gid)
