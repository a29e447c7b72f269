"""Spark test fixtures: one shared SparkSession, and a store the library wrote."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rocketlake.store import (TRANSACTION_COMMIT, TRANSACTION_PREPARED, TRANSACTION_ROLLBACK, Message,
                   MessageStore)

#: Small files so a few hundred messages span several CommitLog, ConsumeQueue and index files.
SMALL = {"mappedFileSizeCommitLog": 65536, "mappedFileSizeConsumeQueue": 600,
         "maxHashSlotNum": 64, "maxIndexNum": 200}


@pytest.fixture(scope="session")
def spark():
    from rocketlake.jobs.spark_session import build_session

    session = build_session("rocketlake-tests", master="local[2]", conf={
        "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC"})
    yield session
    session.stop()


BASE_TS = 1_763_800_000_000


def library_messages() -> list[Message]:
    """Messages covering the dispatch cases: tags, keys, UNIQ_KEY, transactions, delays, IPv6.
    The first 240 share one store time (index files opened in the same ms get bumped names),
    then store times step 1.5 s every 60 messages (timeDiffs differ)."""
    out = []
    for i in range(420):
        tx = (0, TRANSACTION_PREPARED, TRANSACTION_COMMIT, TRANSACTION_ROLLBACK)[i % 11 % 4] \
            if i % 11 < 4 else 0
        out.append(Message(
            topic=("orders", "payments", "audit-log")[i % 3], body=f"body-{i}".encode() * (1 + i % 7),
            queue_id=i % 4, tags=None if i % 5 == 0 else f"tag-{i % 6}",
            keys=f"cust-{i % 9} order-{i}" if i % 4 else None,
            properties={"UNIQ_KEY": f"{i:032X}"} if i % 3 == 0 else None,
            delay_level=(i % 20) if i % 13 == 0 else 0, sys_flag=tx,
            born_host="[fe80::1]:1234" if i % 7 == 0 else "10.0.0.7:4321",
            store_host="[2001:db8::5]:10911" if i % 17 == 0 else None,
            store_timestamp=BASE_TS + max(0, i // 60 - 3) * 1500))
    return out


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


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
