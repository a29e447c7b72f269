"""rocketlake: write, read and maintain Apache RocketMQ 4.9 message stores, on Spark.

This folder (``conf/``) is the root of the installed ``rocketlake`` package: it holds the
defaults the code reads (``store.conf``, read with :func:`default_file`), and ``store/``,
``transforms/`` and ``jobs/`` are installed as ``rocketlake.store``, ``rocketlake.transforms``
and ``rocketlake.jobs`` (see ``pyproject.toml``).
"""
from __future__ import annotations

from importlib import metadata, resources

try:
    __version__ = metadata.version("rocketlake")
except metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"


def default_file(name: str) -> str:
    """The text of a default shipped with the package (``store.conf``, ...)."""
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
