"""Where the workbench keeps things on disk."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "WORKBENCH_CACHE"


def cache_home() -> Path:
    """Root of the workbench's on-disk cache.

    ``$WORKBENCH_CACHE`` if set, else ``$XDG_CACHE_HOME/abstention-workbench``, else
    ``~/.cache/abstention-workbench``.
    """
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "abstention-workbench"


def repo_root() -> Path:
    """The checkout this package lives in (for notebooks, data and figures)."""
    return Path(__file__).resolve().parent.parent
