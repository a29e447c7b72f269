"""Compiled per-record loops: the one codec the writer, recovery, verify, rebuilds and the Spark
scan share (numba ``@njit`` over numpy ``uint8`` views of mapped files).

Each kernel is plain Python source compiled to machine code on first call. Compiled code is
cached next to the source when that directory is writable, else in numba's per-user cache
directory (``~/.cache/numba``; ``NUMBA_CACHE_DIR`` overrides both). Imported from a zip (a
wheel or package zip on ``--py-files``) there is no file to key a cache on: each Python process
compiles the kernels it calls once (Spark reuses its Python workers).
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import numba

F = TypeVar("F", bound=Callable[..., Any])

#: numba can cache only functions whose source is a real file
CACHE = Path(__file__).is_file()


def kernel(fn: F) -> F:
    """Compile ``fn`` in nopython mode, releasing the GIL, cached when possible."""
    return cast(F, numba.njit(cache=CACHE, nogil=True)(fn))
