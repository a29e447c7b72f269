"""The one reader of Java properties files on the DAG side (`conf/store.conf`).

The DAG processor's environment does not have rocketlake installed (Airflow keeps its own
virtualenv, see the README), so the store library's parser (``rocketlake.store.config``) cannot be
imported here; every DAG-side read of a properties file goes through :func:`read_java_properties`,
the one place to point at the library's parser once it can be imported.
"""
from __future__ import annotations

from pathlib import Path


def read_java_properties(path: Path) -> dict[str, str]:
    """``NAME=VALUE`` lines of a Java properties file (``#`` / ``!`` comments and blank lines
    skipped; a line without ``=`` is ignored)."""
    out: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            name, _, value = line.partition("=")
            out[name.strip()] = value.strip()
    return out
