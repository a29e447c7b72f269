"""The lake as Delta users expect it, at a ``file://`` URI: publish-offsets, report, compact and
optimize-lake end to end; table properties (also on tables made before they were set),
TIMESTAMP columns, catalog registration."""
from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql.types import LongType, StringType, StructField, StructType

from rocketlake.jobs import cli
from rocketlake.jobs.run_log import read_runs
from rocketlake.store import Message, MessageStore
from rocketlake.store.config_files import write_consumer_offsets
from rocketlake.transforms.offsets import HISTORY_SCHEMA

SIZES = {"mappedFileSizeCommitLog": 16384, "mappedFileSizeConsumeQueue": 400}
SETS = [a for k, v in SIZES.items() for a in ("--set", f"{k}={v}")]
T1, T2, T3 = (datetime(2026, 11, 22, h, tzinfo=UTC) for h in (10, 11, 12))
APPEND_ONLY = {"delta.appendOnly": "true", "delta.logRetentionDuration": "interval 30 days",
               "delta.deletedFileRetentionDuration": "interval 7 days"}
#: the run log's schema before it had TIMESTAMP columns
OLD_RUNS_SCHEMA = StructType([StructField(n, t, n == "summary") for n, t in (
    ("job", StringType()), ("store", StringType()), ("started_ms", LongType()),
    ("finished_ms", LongType()), ("status", StringType()), ("summary", StringType()))])


def put(root: Path, first: int, last: int) -> None:
    """orders/0..1, messages first..last-1 stored at 1 795 000 000 000 + i s (~1 KB each)."""
    with MessageStore(root, **SIZES) as ms:
        ms.put_batch([Message("orders", b"m%04d" % i * 200, queue_id=i % 2,
                              store_timestamp=1_795_000_000_000 + i * 1000) for i in range(first, last)])


def publish(root: Path, lake: str, when: datetime, *extra: str) -> None:
    assert cli.main(["publish-offsets", "--store", str(root), "--lake", lake, "--store-name", "s1", *SETS,
                     "--snapshot-time", when.isoformat(), *extra]) == 0


def properties(spark, uri: str) -> dict[str, str]:
    return dict(DeltaTable.forPath(spark, uri).detail().first()["properties"])


def test_file_uri_lake_end_to_end(spark, tmp_path: Path, capsys) -> None:
    root, lake_dir = tmp_path / "broker-a", tmp_path / "my lake"
    lake = f"file://{lake_dir}"
    # tables made before the properties and TIMESTAMP columns existed: they get them
    DeltaTable.createIfNotExists(spark).location(str(lake_dir / "offsets_history")) \
        .addColumns(HISTORY_SCHEMA).partitionedBy("snapshot_date").execute()
    spark.createDataFrame([("compact", "/old", 1_000, 2_000, "ok", "{}")], OLD_RUNS_SCHEMA) \
        .write.format("delta").save(str(lake_dir / "maintenance_runs"))

    put(root, 0, 60)
    write_consumer_offsets(root, {("orders", "g1"): {0: 5, 1: 5}})
    started = time.time_ns() // 1_000_000
    publish(root, lake, T1, "--database", "rl_lake")
    put(root, 60, 80)
    publish(root, lake, T2, "--database", "rl_lake", "--change-data-feed")

    # the lake is where the URI says (a directory with a space), nothing at a literal "file:" path
    assert sorted(p.name for p in lake_dir.iterdir()) == ["maintenance_runs", "offsets_history"]
    assert not (Path.cwd() / "file:").exists()
    assert APPEND_ONLY.items() <= properties(spark, f"{lake}/offsets_history").items()
    assert properties(spark, f"{lake}/offsets_history")["delta.enableChangeDataFeed"] == "true"
    with pytest.raises(Exception, match="(?i)append"):
        spark.sql(f"DELETE FROM delta.`{lake}/offsets_history`")
    # registered in the catalog: the same rows by name
    assert spark.sql("SELECT count(*) FROM rl_lake.offsets_history").first()[0] == \
        spark.read.format("delta").load(f"{lake}/offsets_history").count() == 2 * (2 + 2)
    assert spark.sql("SELECT max(max_offset) FROM rl_lake.offsets_history WHERE kind = 'queue'"
                     ).first()[0] == 40

    # the two runs are in their own commits, the old row in the run log as it was
    runs = {r["started_ms"]: r for r in read_runs(lake, 10)}
    assert runs[1_000]["started_ts"] is None
    new = [r for ms, r in runs.items() if ms != 1_000]
    assert len(new) == 2 and all(r["started_ms"] >= started for r in new)
    assert all(r["started_ts"] == datetime.fromtimestamp(r["started_ms"] / 1000) for r in new)
    assert [json.loads(r["summary"])["snapshot"] for r in new] == [
        "2026-11-22T11:00:00.000Z", "2026-11-22T10:00:00.000Z"]        # newest first

    out = tmp_path / "report.html"
    capsys.readouterr()
    assert cli.main(["report", "--store", str(root), "--lake", lake, "--store-name", "s1", *SETS,
                     "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["lag_points"], summary["runs"]) == (4, 3)     # g1 on 2 queues x 2 snapshots

    # compact: every CommitLog file but the last aged out, archived into the same lake
    files = sorted((root / "commitlog").iterdir())
    for f in files[:-1]:
        os.utime(f, (time.time() - 80 * 3600,) * 2)
    assert cli.main(["compact", "--store", str(root), "--lake", lake, "--store-name", "s1", "--force", *SETS,
                     "--database", "rl_lake"]) == 0
    archived = json.loads(capsys.readouterr().out)["archived"]
    archive = spark.sql("SELECT * FROM rl_lake.messages_archive")
    assert archive.count() == sum(archived.values()) > 0
    for name in ("messages_archive", "maintenance_runs"):   # the run log: once compact wrote it
        assert APPEND_ONLY.items() <= properties(spark, f"{lake}/{name}").items(), name
    row = archive.orderBy("commitlog_offset").first()
    assert row["store_ts"] == datetime.fromtimestamp(1_795_000_000) and row["born_ts"] is not None


def test_optimize_lake_compacts_small_files_and_keeps_the_data(spark, tmp_path: Path, capsys) -> None:
    root, lake = tmp_path / "broker-b", f"file://{tmp_path}/lake"
    put(root, 0, 10)
    for when in (T1, T2, T3):                       # three small appends to the history
        publish(root, lake, when)
        put(root, 10, 12)

    def files_and_rows(name: str) -> tuple[int, list]:
        uri = f"{lake}/{name}"
        rows = sorted(tuple(r) for r in spark.read.format("delta").load(uri).collect())
        return DeltaTable.forPath(spark, uri).detail().first()["numFiles"], rows

    before = {n: files_and_rows(n) for n in ("offsets_history",)}
    assert before["offsets_history"][0] >= 3
    capsys.readouterr()
    assert cli.main(["optimize-lake", "--lake", lake]) == 0
    done = json.loads(capsys.readouterr().out)
    assert set(done) == {"offsets_history"}       # the runs are in its commits: no run log
    assert done["offsets_history"]["zorder"] == ["topic", "queue_id"]
    for name, (files, rows) in before.items():
        after_files, after_rows = files_and_rows(name)
        assert after_files == 1 < files, name           # one partition (one date), one file
        assert after_rows == rows, name
    assert properties(spark, f"{lake}/offsets_history")["delta.appendOnly"] == "true"


def test_table_state_reads_the_transactions_without_a_spark_job(spark, tmp_path: Path) -> None:
    from rocketlake.jobs.lake import TXN_RETENTION, table_state

    uri = f"file://{tmp_path}/t"
    for app, version in (("a", 1), ("b", 2), ("a", 5)):     # a's newest version is 5
        (spark.range(2).write.format("delta").mode("append").option("txnAppId", app)
         .option("txnVersion", version).save(uri))
    sc = spark.sparkContext
    sc.setJobGroup("table-state", "table_state")
    try:
        state = table_state(spark, uri)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert list(sc.statusTracker().getJobIdsForGroup("table-state")) == []   # the .crc lists them
    assert state is not None and state.transactions == {"a": 5, "b": 2}
    assert table_state(spark, f"file://{tmp_path}/none") is None
    # a table that expires transactions: Delta's own reading (no expiry within a year)
    spark.sql(f"ALTER TABLE delta.`{uri}` SET TBLPROPERTIES ('{TXN_RETENTION}' = 'interval 365 days')")
    state = table_state(spark, uri)
    assert state is not None and state.transactions == {"a": 5, "b": 2}
    assert state.properties[TXN_RETENTION] == "interval 365 days"
