"""A lake written before the one-table layout, migrated in place by the next publish-offsets.

``tests/golden/lake-layout1`` is what publish-offsets wrote before (the ``queue_offsets`` and
``consumer_offsets`` current-state tables MERGEd each run, ``offsets_history``, ``maintenance_runs``):
the store of ``test_offsets_job``'s ``store`` fixture published as store ``s1`` at T1, then with
messages 110..115 and new commits at T2 (the rows ``test_offsets_job`` hand-computes)."""
from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

from delta.tables import DeltaTable

from rocketlake.jobs.lake import table_state
from rocketlake.jobs.offsets_lake import (
    LAYOUT,
    LAYOUT_APP_ID,
    current_rows,
    history_state,
    history_uri,
    migrate,
)
from rocketlake.transforms.offsets import CONSUMER_OFFSETS_SCHEMA

from .test_offsets_job import T2, T3, T4, commit, naive, publish, put, ts

GOLDEN_LAKE = Path(__file__).resolve().parents[1] / "golden" / "lake-layout1"
OLD_TABLES = ("queue_offsets", "consumer_offsets")
#: the T2 snapshot, hand-computed (test_offsets_job): queue and consumer rows
T2_QUEUES = [("audit-log", 0, 0, 10, 10, ts(109), naive(T2)), ("orders", 0, 0, 36, 36, ts(114), naive(T2)),
             ("orders", 1, 0, 35, 35, ts(115), naive(T2)), ("orders", 2, 0, 35, 35, ts(113), naive(T2))]
T2_CONSUMERS = [("g1", "orders", 0, 30, 36, 6, ts(87), naive(T2)),
                ("g1", "orders", 1, 35, 35, 0, ts(115), naive(T2)),
                ("g1", "orders", 2, 5, 35, 30, ts(14), naive(T2)),
                ("g2", "audit-log", 0, 10, 10, 0, ts(109), naive(T2))]
QUEUE_COLUMNS = ("topic", "queue_id", "min_offset", "max_offset", "message_count",
                 "last_store_timestamp", "snapshot_ts")
CONSUMER_COLUMNS = ("consumer_group", "topic", "queue_id", "consumer_offset", "max_offset", "lag",
                    "last_consumed_store_timestamp", "snapshot_ts")


def t2_store(tmp_path: Path) -> Path:
    """The store the golden lake was published from, as it was at T2."""
    root = tmp_path / "broker-a"
    put(root, 0, 100)
    put(root, 100, 110, topic="audit-log", queues=1)
    put(root, 110, 116)
    commit(root, {("orders", "g1"): {0: 30, 1: 35, 2: 5}, ("audit-log", "g2"): {0: 10}})
    return root


def old_lake(tmp_path: Path) -> Path:
    lake = tmp_path / "lake"
    shutil.copytree(GOLDEN_LAKE, lake)
    return lake


def rows(df, columns) -> list[tuple]:
    return sorted(tuple(r) for r in df.select(*columns).collect())


def table_rows(spark, uri: str, columns) -> list[tuple]:
    return rows(spark.read.format("delta").load(uri), columns)


def history_counts(spark, lake: Path) -> dict[datetime, int]:
    df = spark.read.format("delta").load(str(lake / "offsets_history"))
    return {r[0]: r[1] for r in df.groupBy("snapshot_ts").count().collect()}


def test_golden_old_lake_holds_the_hand_computed_rows(spark, tmp_path: Path) -> None:
    """The golden lake is what the old layout wrote: its current tables hold the T2 rows."""
    lake = old_lake(tmp_path)
    assert table_rows(spark, str(lake / "queue_offsets"), QUEUE_COLUMNS) == T2_QUEUES
    assert table_rows(spark, str(lake / "consumer_offsets"), CONSUMER_COLUMNS) == T2_CONSUMERS
    assert history_counts(spark, lake) == {naive(datetime(2026, 11, 20, 10, tzinfo=UTC)): 8,
                                           naive(T2): 8}


def test_next_publish_migrates_an_old_lake_in_place(spark, tmp_path: Path, capsys) -> None:
    lake, store = old_lake(tmp_path), t2_store(tmp_path)
    old_versions = {n: DeltaTable.forPath(spark, str(lake / n)).history(1).first()["version"]
                    for n in OLD_TABLES}
    capsys.readouterr()
    assert publish(store, lake, T3) == 0
    assert "unchanged" in capsys.readouterr().out         # the same rows as the old lake's T2
    state = table_state(spark, history_uri(str(lake)))
    assert state is not None and state.transactions[LAYOUT_APP_ID] == LAYOUT
    assert history_counts(spark, lake)[naive(T2)] == 8     # nothing was missing: nothing copied
    assert rows(current_rows(spark, str(lake), "queue"), QUEUE_COLUMNS) == T2_QUEUES
    assert rows(current_rows(spark, str(lake), "consumer"), CONSUMER_COLUMNS) == T2_CONSUMERS
    # the old tables are left as they were; later snapshots go to the history only
    put(store, 116, 119)                                   # 116..118: q2, q0, q1
    assert publish(store, lake, T4) == 0
    assert [r[:4] for r in rows(current_rows(spark, str(lake), "queue"), QUEUE_COLUMNS)] == [
        ("audit-log", 0, 0, 10), ("orders", 0, 0, 37), ("orders", 1, 0, 36), ("orders", 2, 0, 36)]
    assert {n: DeltaTable.forPath(spark, str(lake / n)).history(1).first()["version"]
            for n in OLD_TABLES} == old_versions
    assert table_rows(spark, str(lake / "queue_offsets"), QUEUE_COLUMNS) == T2_QUEUES


def test_migration_copies_rows_only_the_old_tables_have_once(spark, tmp_path: Path) -> None:
    lake = old_lake(tmp_path)
    extra = ("s1", "g3", "orders", 0, 7, 36, 29, None, T2)  # in consumer_offsets, not in the history
    spark.createDataFrame([extra], CONSUMER_OFFSETS_SCHEMA).write.format("delta").mode("append") \
        .save(str(lake / "consumer_offsets"))
    assert migrate(lambda: spark, str(lake), history_state(str(lake), ()))
    assert history_counts(spark, lake)[naive(T2)] == 9
    copied = spark.read.format("delta").load(str(lake / "offsets_history")).where(
        "consumer_group = 'g3'")
    assert rows(copied, ("kind", "snapshot_date", *CONSUMER_COLUMNS)) == [
        ("consumer", T2.date(), "g3", "orders", 0, 7, 36, 29, None, naive(T2))]
    assert ("g3", "orders", 0, 7, 36, 29, None, naive(T2)) in rows(
        current_rows(spark, str(lake), "consumer"), CONSUMER_COLUMNS)
    assert not migrate(lambda: spark, str(lake), history_state(str(lake), ()))   # once: the marker is there
    assert history_counts(spark, lake)[naive(T2)] == 9
