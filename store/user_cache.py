"""The per-user cache folder of rocketlake: ``$XDG_CACHE_HOME/rocketlake``, or
``~/.cache/rocketlake`` when ``XDG_CACHE_HOME`` is unset or empty (the XDG base directory rule).

What a process can fetch or compute again lives under it, shared by every checkout and working
directory of the user: compiled kernels (``store/kernels/cache.py``) and the Delta Lake jars
(``jobs/delta_jars.py``). Deleting it costs time, never data.
"""
from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/rocketlake`` (default ``~/.cache/rocketlake``); not created here."""
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(home) / "rocketlake"
