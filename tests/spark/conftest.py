"""Spark test fixtures: one shared SparkSession, and a store the library wrote."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rocketlake.store import MessageStore

from .helpers import SMALL, library_messages


@pytest.fixture(scope="session")
def spark():
    from rocketlake.jobs.spark_session import build_session

    session = build_session("rocketlake-tests", master="local[2]", conf={
        "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def library_store(tmp_path_factory) -> Path:
    """A store written by the library (several files of each kind). Read-only: copy it first."""
    root = tmp_path_factory.mktemp("library") / "store"
    msgs = library_messages()
    with MessageStore(root, **SMALL) as s:
        for k in range(0, len(msgs), 60):
            s.put_batch(msgs[k:k + 60])
    return root


@pytest.fixture()
def store_copy(library_store: Path, tmp_path: Path) -> Path:
    """A writable copy of :func:`library_store`."""
    dst = tmp_path / "store"
    shutil.copytree(library_store, dst)
    return dst
