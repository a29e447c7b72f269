"""rocketlake: write, read and maintain Apache RocketMQ 4.9 message stores, on Spark.

This folder (``conf/``) is the root of the installed ``rocketlake`` package: it holds the
defaults the code reads (``store.conf``, read with :func:`default_file`), and ``store/``,
``transforms/`` and ``jobs/`` are installed as ``rocketlake.store``, ``rocketlake.transforms``
and ``rocketlake.jobs`` (see ``pyproject.toml``).

Importing it sets one default in the process's environment, when numpy is not loaded yet and the
variable is unset: ``OPENBLAS_THREAD_TIMEOUT=4`` (child processes, Spark's Python workers among
them, inherit it). numpy's OpenBLAS starts a thread per core when numpy loads, and each spins for
about 2^28 cycles before it sleeps (0.1-0.13 s of CPU in every process here, beside the store's
own threads); rocketlake never calls BLAS. With the shortest timeout the threads sleep at once
and still wake for BLAS work, so code that does use BLAS keeps its threads (a small BLAS call
waits for them to wake).
"""
from __future__ import annotations

import functools
import os
import sys
from importlib import resources

if "numpy" not in sys.modules:
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")


@functools.cache
def version() -> str:
    """The installed distribution's version ("0+unknown" in a source tree never installed). Read
    on first use: ``importlib.metadata`` takes about 25 ms to import."""
    from importlib import metadata
    try:
        return metadata.version("rocketlake")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def __getattr__(name: str) -> str:
    """``rocketlake.__version__``: :func:`version`."""
    if name == "__version__":
        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def default_file(name: str) -> str:
    """The text of a default shipped with the package (``store.conf``, ...)."""
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
