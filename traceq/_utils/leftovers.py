"""traceq's own temporary files and folders: named ``<prefix>.<host>.<pid>.<hex>`` so that the leftovers of
a process that died (SIGKILL, a lost machine) are recognised and removed by the next one, and nothing
else ever is: only entries of that pattern, owned by this user, never through a symbolic link."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path


def host() -> str:
    """This host's name as it appears in traceq's temporary names (no dots): the system's node name, as
    ``socket.gethostname()`` gives it (without importing the socket module, 2 ms of every command's start)."""
    if hasattr(os, "uname"):
        name = os.uname().nodename
    else:  # (Windows)
        import socket

        name = socket.gethostname()
    return name.replace(".", "-") or "localhost"


def tag() -> str:
    """``<host>.<pid>.<hex>``: the part of a temporary name that says which process made it."""
    return f"{host()}.{os.getpid()}.{os.urandom(6).hex()}"


def alive(pid: int) -> bool:
    """Whether process ``pid`` of this host is running."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # (a pid beyond the system's range: no such process)
        return False
    except (PermissionError, OSError):
        return True
    return True


#: What follows a prefix in a temporary name: host, pid, 12 hex digits.
TAG = r"(?P<host>[^./]+)\.(?P<pid>\d+)\.[0-9a-f]{12}"


def private_dir(prefix: str, parent: str | Path | None = None) -> Path:
    """A new folder ``parent/<prefix>.<tag>`` (the system's temporary folder by default; ``prefix`` is
    ``traceq-`` and a word) that only this user can read (mode 0700). The leftovers of dead processes
    (``traceq-<word>.<tag>``) are removed first."""
    base = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    remove_stale(base, re.compile(rf"traceq-[a-z]+\.{TAG}"))  # every kind of traceq's temporary folders
    folder = base / f"{prefix}.{tag()}"
    folder.mkdir(mode=0o700)
    os.chmod(folder, 0o700)  # whatever the umask
    return folder


def remove_stale(folder: Path, pattern: re.Pattern[str], foreign_stale_s: float | None = None) -> None:
    """Remove the entries of ``folder`` whose whole name matches ``pattern`` (with its ``host`` and ``pid``
    groups) and whose process is gone: on this host, a pid not running; on another host (a store shared by
    nodes), untouched for ``foreign_stale_s`` seconds (never, if None). Only entries owned by this user are
    removed, a symbolic link never, and nothing is followed out of ``folder``."""
    import time

    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    here, me = host(), os.getuid() if hasattr(os, "getuid") else None
    for entry in entries:
        m = pattern.fullmatch(entry.name)
        if m is None:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode) or (me is not None and st.st_uid != me):
            continue
        pid = int(m.group("pid"))
        if m.group("host") not in (here, None):
            if foreign_stale_s is None or time.time() - st.st_mtime <= foreign_stale_s:
                continue
        elif pid == os.getpid() or alive(pid):
            continue
        remove(Path(entry.path))


def remove(path: Path) -> None:
    """Remove a file or a folder of traceq's (a symbolic link is unlinked, never followed)."""
    try:
        st = path.lstat()
    except OSError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path, ignore_errors=True)  # never follows links inside (fd-based on Linux)
    else:
        with contextlib.suppress(OSError):
            path.unlink()
