"""A Python environment every user's account can run, like The Littlest JupyterHub's ``/opt/tljh/user``.

Notebooks and training jobs run as the users' own accounts, so the interpreter, its
standard library and the packages must be in folders those accounts may enter. An
interpreter installed under ``/root`` (pyenv, as root's own) is not. Then
``python_for_accounts()`` makes a virtual environment from a system Python of the same
version that others can run, which uses this environment's packages (one ``.pth``
line), shares its ``share/`` and ``etc/`` (kernels, Jupyter server extensions, lab
extensions) and has its console scripts (``jupyterhub-singleuser``, ``tenancy``).
It is made once, by root, in a folder only root may write (``/opt`` by default).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import sysconfig

from .accounts import running_as_root

DEFAULT_ROOT = "/opt/jupyterhub-tenancy"
_SYSTEM_BIN = ("/usr/local/bin", "/usr/bin", "/bin")


def others_can_run(path: str) -> bool:
    """Whether an account with no special rights can run ``path`` (mode bits for "others", links resolved)."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return False
    return bool(st.st_mode & stat.S_IXOTH) and others_can_enter(os.path.dirname(real)) and all(
        others_can_enter(p) for p in _interpreter_dirs(real))


def others_can_enter(folder: str) -> bool:
    """Whether every folder from ``/`` down to ``folder`` lets others through (x for "others")."""
    path = os.path.realpath(folder)
    while True:
        try:
            if not os.stat(path).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def _interpreter_dirs(real: str) -> list[str]:
    """What the running interpreter needs besides its binary, when ``real`` is it."""
    if real != os.path.realpath(sys.executable):
        return []
    return [sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"], sys.base_prefix]


def python_for_accounts(dest: str | None = None) -> str:
    """The path of a Python the users' accounts can run, with this environment's packages.

    This interpreter itself when others can run it, or when not running as root (then
    there are no other accounts). Otherwise a virtual environment at ``dest`` (default
    ``/opt/jupyterhub-tenancy/python<X.Y>-<hash of this environment's prefix>``), made
    on first use from a system ``python<X.Y>`` and brought up to date on later ones.

    Raises:
        RuntimeError: no system Python of this version that others can run.
    """
    if not running_as_root() or others_can_run(sys.executable):
        return sys.executable
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    packages = sysconfig.get_paths()["purelib"]
    if not others_can_enter(packages):
        raise RuntimeError(f"the packages in {packages} are in a folder other users cannot enter: install them "
                           "where every user's account can read them")
    if dest is None:
        digest = hashlib.sha256(sys.prefix.encode()).hexdigest()[:8]
        dest = os.path.join(DEFAULT_ROOT, f"python{version}-{digest}")
    if not _trusted(dest):
        _make(dest, _system_python(version), packages)
    _link_scripts(dest)
    return os.path.join(dest, "bin", "python")


def _system_python(version: str) -> str:
    for folder in _SYSTEM_BIN:
        candidate = os.path.join(folder, f"python{version}")
        if os.path.exists(candidate) and others_can_run(candidate):
            return candidate
    raise RuntimeError(f"this Python ({sys.executable}) is in a folder other users cannot enter, and there is no "
                       f"python{version} in {', '.join(_SYSTEM_BIN)} that they can run: install Python {version} "
                       "where every user's account can run it (e.g. the system's python3 package)")


def _trusted(dest: str) -> bool:
    """An environment made by us before: root's, and writable by nobody else (or it is not used)."""
    try:
        for path in (dest, os.path.join(dest, "pyvenv.cfg"), os.path.join(dest, "bin")):
            st = os.lstat(path)
            if st.st_uid != 0 or st.st_mode & 0o022 or stat.S_ISLNK(st.st_mode):
                return False
    except OSError:
        return False
    return True


def _make(dest: str, base: str, packages: str) -> None:
    parent = os.path.dirname(dest)
    os.makedirs(parent, mode=0o755, exist_ok=True)
    if os.stat(parent).st_uid == 0:
        os.chmod(parent, 0o755)  # whatever the umask: the accounts must get through
    tmp = f"{dest}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run([base, "-m", "venv", "--without-pip", tmp], check=True, capture_output=True, timeout=300)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = os.path.join(tmp, "lib", version, "site-packages")
    with open(os.path.join(site, "_jupyterhub_tenancy_packages.pth"), "w") as f:
        f.write(f"import site; site.addsitedir({packages!r})\n")
    for shared in ("share", "etc"):
        source = os.path.join(sys.prefix, shared)
        if os.path.isdir(source) and not os.path.lexists(os.path.join(tmp, shared)):
            os.symlink(source, os.path.join(tmp, shared))
    for root, dirs, files in os.walk(tmp):
        for name in dirs + files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o444 | (0o111 if os.path.isdir(path) else 0))
    os.chmod(tmp, 0o755)
    try:
        os.rename(tmp, dest)
    except OSError:  # made meanwhile by another process (a hub and its service start together)
        shutil.rmtree(tmp, ignore_errors=True)
        if not _trusted(dest):
            raise


def _link_scripts(dest: str) -> None:
    """This environment's console scripts, with their first line pointing to ``dest``'s Python."""
    source_bin, target_bin = os.path.join(sys.prefix, "bin"), os.path.join(dest, "bin")
    ours = ("#!" + os.path.join(sys.prefix, "bin", "python")).encode()
    python = ("#!" + os.path.join(target_bin, "python")).encode()
    for name in os.listdir(source_bin):
        path = os.path.join(source_bin, name)
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or name.startswith(("python", "activate", "Activate")):
            continue
        with open(path, "rb") as f:
            first = f.readline()
            if not first.startswith(ours):
                continue
            rest = f.read()
        text = python + first[len(ours):].lstrip(b"0123456789.") + rest
        target = os.path.join(target_bin, name)
        try:
            with open(target, "rb") as f:
                if f.read() == text:
                    continue
        except OSError:
            pass
        tmp = f"{target}.tmp-{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(text)
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
