"""Datasets on this machine: a dataset is a folder, and only the accounts of the teams allowed may read it.

Each dataset has a Unix group of its own (``tenancy-ds-<name>``) whose members are the
system accounts (``LocalAccounts``) of the members of the teams whose namespaces may use
it. Its folder is root's, in that group, mode 0750 (read-only: the group may read and
enter, nobody else anything) or 2770 (writable: the group may write, and new files stay
in the group). Another team's account then gets "Permission denied" even with the full
path: the folder itself is closed to it. Only root can make groups and give folders away:
when the service is not root, the folder is used as it is and its state says that access
cannot be enforced.

A workload sees its datasets at ``datasets/<name>`` in its working directory, links to
the folders (``link_datasets``), and in ``TENANCY_DATASETS``, name -> that path.
"""

from __future__ import annotations

import grp
import hashlib
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

from .account_python import others_can_enter

PREFIX, HASHED_PREFIX = "tenancy-ds-", "tenancy-dh-"
GROUP_MAX = 32  # longest group name groupadd accepts
LINKS = "datasets"  # the folder of links in a workload's working directory


class DatasetError(Exception):
    """A dataset's folder or group cannot be made right (the message says why)."""


def group_name(dataset: str) -> str:
    """The Unix group of ``dataset``: ``tenancy-ds-<name>``, or for a long name ``tenancy-dh-`` and a
    prefix of it with a hash of the whole (the two prefixes never meet), at most 32 characters."""
    room = GROUP_MAX - len(PREFIX)
    if len(dataset) <= room:
        return PREFIX + dataset
    digest = hashlib.sha256(dataset.encode()).hexdigest()[:10]
    return f"{HASHED_PREFIX}{dataset[: room - 11].rstrip('-')}-{digest}"


def _tool(name: str) -> str:
    found = shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
    if found is None:
        raise DatasetError(f"{name} is not installed: it makes the groups that guard datasets' folders")
    return found


def _run(cmd: list[str]) -> None:
    """Run a group tool, waiting while another holds /etc/group's lock (the hub and the service share it)."""
    for attempt in range(20):
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        if done.returncode == 0:
            return
        if "lock" in done.stderr.lower() and attempt < 19:
            time.sleep(0.1 + 0.05 * attempt)
            continue
        raise DatasetError(f"{os.path.basename(cmd[0])} failed (exit {done.returncode}): {done.stderr.strip()[:300]}")


def ensure_group(name: str) -> grp.struct_group:
    try:
        return grp.getgrnam(name)
    except KeyError:
        pass
    try:
        _run([_tool("groupadd"), "--system", name])
    except DatasetError:
        pass  # made meanwhile by the other process (the hub or the service)?
    try:
        return grp.getgrnam(name)
    except KeyError:
        raise DatasetError(f"cannot make the group {name}") from None


def set_members(group: str, accounts: set[str]) -> None:
    """The group's members are exactly ``accounts`` (written only when they differ)."""
    if set(grp.getgrnam(group).gr_mem) != accounts:
        _run([_tool("gpasswd"), "-M", ",".join(sorted(accounts)), group])


def grant(account: str, dataset: str) -> bool:
    """Add ``account`` to the group of ``dataset`` if there is one (the service made it): True if it is a
    member now. Before a workload of that account's starts, so that its process has the group."""
    name = group_name(dataset)
    try:
        members = grp.getgrnam(name).gr_mem
    except KeyError:
        return False
    if account not in members:
        _run([_tool("gpasswd"), "-a", account, name])
    return True


def guard_folder(path: str, gid: int, read_only: bool) -> None:
    """The folder is root's, in the dataset's group: 0750 read-only, 2770 writable; others nothing.
    (Looked at every few seconds: changed only when it differs.)"""
    mode = 0o750 if read_only else 0o2770
    st = os.stat(path)
    if (st.st_uid, st.st_gid) != (0, gid):
        os.chown(path, 0, gid)
    if stat.S_IMODE(st.st_mode) != mode or (st.st_uid, st.st_gid) != (0, gid):  # chown clears the setgid bit
        os.chmod(path, mode)


def folder_problem(path: str) -> str | None:
    """Why accounts cannot reach the folder ``path`` at all (None: they can, given its group)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return f"the folder {path} does not exist; make it (and put the data there)"
    except OSError as err:
        return f"the folder {path} cannot be read by this service: {err.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a folder"
    parent = os.path.dirname(os.path.realpath(path))
    if not others_can_enter(parent):
        return f"the folder {path} is inside {parent}, which other accounts cannot enter; move it where they can"
    return None


def link_datasets(workdir: Path, uses: list[dict], uid: int, gid: int) -> dict[str, str]:
    """``workdir/datasets/<name>``: a link to each folder the workload mounts; name -> that path.

    The work folder is the workload's account's: nothing in it is followed. The links are made
    relative to the folder's descriptors, and ``datasets`` is made anew if it is anything but a
    folder of the account's own.
    """
    paths: dict[str, str] = {}
    folders = [(u["name"], u["volume"].get("hostPath", {}).get("path")) for u in uses]
    folders = [(name, path) for name, path in folders if path]
    if not folders:
        return paths
    dir_fd = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            os.mkdir(LINKS, 0o700, dir_fd=dir_fd)
            os.chown(LINKS, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
        except FileExistsError:
            pass
        links_fd = os.open(LINKS, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            if os.fstat(links_fd).st_uid not in (uid, os.geteuid()):
                raise DatasetError(f"{workdir}/{LINKS} is not the workload's own folder")
            for name, target in folders:
                try:
                    os.unlink(name, dir_fd=links_fd)
                except FileNotFoundError:
                    pass
                os.symlink(target, name, dir_fd=links_fd)
                if os.geteuid() == 0:
                    os.chown(name, uid, gid, dir_fd=links_fd, follow_symlinks=False)
                paths[name] = str(workdir / LINKS / name)
        finally:
            os.close(links_fd)
    finally:
        os.close(dir_fd)
    return paths
