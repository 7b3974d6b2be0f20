"""A training workload's work folder: its owner's alone, and safe for the service to touch.

The service (root, when users have accounts) makes ``DATA_DIR/workloads/<id>`` for the
workload's account, mode 0700, in folders that others may cross but not list (0711).
Everything inside belongs to the user, who may replace any file with a link to
something only root can read. So the service never follows a link there: it opens its
files relative to the folder, with ``O_NOFOLLOW`` and ``O_NONBLOCK`` (a FIFO does not
hang it), and uses one only if it is a regular file of the workload's own account.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_OPEN = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UnsafeFile(OSError):
    """A file in a work folder that is not a regular file of the workload's account."""


def make_workdir(root: Path, workload_id: str, uid: int, gid: int) -> Path:
    """``root/workloads/<workload_id>``, owned by ``uid``:``gid``, mode 0700; made if missing."""
    parent = root / "workloads"
    for folder in (root, parent):
        folder.mkdir(mode=0o711, parents=True, exist_ok=True)
        if folder.stat().st_uid == os.geteuid():
            os.chmod(folder, 0o711)  # others may enter their own work folders, not list them
    path = parent / workload_id
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeFile(f"{path} is not a folder")
    if st.st_uid != uid:
        if st.st_uid != os.geteuid():
            raise UnsafeFile(f"{path} belongs to uid {st.st_uid}, not to the workload's account (uid {uid})")
        os.chown(path, uid, gid)  # made just now by us (the parent is ours: nobody else could)
    os.chmod(path, 0o700)
    return path


def open_owned(folder: Path, name: str, flags: int, uid: int, gid: int) -> int:
    """An fd for ``folder/name``: created for ``uid`` (mode 0600) if missing, else only a regular
    file of ``uid``'s with one link. ``flags``: ``os.O_WRONLY | os.O_APPEND`` and the like.

    Raises:
        UnsafeFile: the name is a link, a FIFO, a device, or someone else's file.
    """
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            fd = os.open(name, flags | _OPEN | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dir_fd)
            os.fchown(fd, uid, gid)
        except FileExistsError:
            fd = os.open(name, (flags & ~os.O_TRUNC) | _OPEN, dir_fd=dir_fd)
            try:
                _check(fd, uid, f"{folder}/{name}")
            except BaseException:
                os.close(fd)
                raise
            if flags & os.O_TRUNC:
                os.ftruncate(fd, 0)
    except OSError as err:
        if isinstance(err, UnsafeFile):
            raise
        if err.errno in (getattr(os, "ELOOP", 40), getattr(os, "ENXIO", 6)):
            raise UnsafeFile(f"{folder}/{name} is a link or a FIFO, not a file") from None
        raise
    finally:
        os.close(dir_fd)
    os.set_blocking(fd, True)
    return fd


def write_owned(folder: Path, name: str, text: str, uid: int, gid: int) -> None:
    fd = open_owned(folder, name, os.O_WRONLY | os.O_TRUNC, uid, gid)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def read_owned(path: str | os.PathLike, uid: int, *, tail_bytes: int | None = None) -> bytes | None:
    """The contents (or the last ``tail_bytes``) of a regular file of ``uid``'s; None if it is
    missing or is anything else (a link, a FIFO, someone else's file)."""
    try:
        fd = os.open(path, os.O_RDONLY | _OPEN)
    except OSError:
        return None
    try:
        _check(fd, uid, str(path))
        size = os.fstat(fd).st_size
        if tail_bytes is not None and size > tail_bytes:
            os.lseek(fd, size - tail_bytes, os.SEEK_SET)
        chunks, left = [], tail_bytes if tail_bytes is not None else size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except UnsafeFile:
        return None
    finally:
        os.close(fd)


def _check(fd: int, uid: int, what: str) -> None:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFile(f"{what} is not a regular file")
    if st.st_uid != uid or st.st_nlink != 1:
        raise UnsafeFile(f"{what} is not the workload's own file (uid {st.st_uid}, {st.st_nlink} links)")
