"""Where the store is: the one ``--store`` or ``$TRACEQ_STORE`` names, else the nearest ``.traceq`` store
above the working directory, else one in the user's data folder (no third-party imports: every command
finds its store before it reads anything)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: The folder name a store is found by, walking up from the working directory (as git finds ``.git``).
DEFAULT_STORE = ".traceq"
STORE_ENV = "TRACEQ_STORE"
#: The file that marks a folder as a store.
MARKER = "traceq-store.json"


def default_store_path(cwd: str | Path | None = None) -> Path:
    """The store used when none is named: ``$TRACEQ_STORE`` if set, else the nearest ``.traceq`` store in
    the working directory or a folder above it (:func:`find_store`), else the user's data folder
    (:func:`user_store_path`)."""
    return Path(os.environ.get(STORE_ENV) or find_store(cwd) or user_store_path())


def find_store(start: str | Path | None = None) -> Path | None:
    """The nearest ``.traceq`` folder holding a store (its marker file) in ``start`` (the working
    directory) or a folder above it, as git finds its repository; None if there is none."""
    try:
        here = Path(start if start is not None else Path.cwd()).resolve()
    except OSError:  # the working directory was removed
        return None
    for folder in (here, *here.parents):
        if (folder / DEFAULT_STORE / MARKER).is_file():
            return folder / DEFAULT_STORE
    return None


def user_store_path() -> Path:
    """The store in the user's data folder: ``traceq/store`` in ``$XDG_DATA_HOME`` (``~/.local/share``) on
    Linux, in ``~/Library/Application Support`` on macOS, in ``%LOCALAPPDATA%`` on Windows."""
    home = Path.home()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    return base / "traceq" / "store"
