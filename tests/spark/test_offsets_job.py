"""publish-offsets on real stores and real Delta tables: RocketMQ's golden store, snapshots,
idempotence, a run cut short, vanished queues and groups, and the inputs it must refuse."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from delta.tables import DeltaTable
from pyspark.sql.pandas.types import from_arrow_schema

from rocketlake.jobs import cli
from rocketlake.jobs.delta_direct import collected
from rocketlake.jobs.offsets_lake import current_rows
from rocketlake.jobs.publish_offsets import main, read_layout, read_snapshot
from rocketlake.jobs.spark_session import delta_submit_args
from rocketlake.store import Message, MessageStore
from rocketlake.store.config import load_config
from rocketlake.store.config_files import read_consumer_offsets, write_consumer_offsets
from rocketlake.transforms.offset_units import UNIT_SCHEMA, read_queue_units
from rocketlake.transforms.offsets import queue_offsets

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "rocketmq-4.9.8"
SMALL = {"mappedFileSizeCommitLog": 65536, "mappedFileSizeConsumeQueue": 600}
SETS = [a for k, v in SMALL.items() for a in ("--set", f"{k}={v}")]
BASE = 1_795_000_000_000  # store time of message 0; message i is stored at BASE + i s
T1, T2, T3, T4 = (datetime(2026, 11, d, 10, tzinfo=UTC) for d in (20, 21, 22, 23))


def naive(t: datetime) -> datetime:
    """An aware time as PySpark collects a timestamp: naive, in the local time zone."""
    return datetime.fromtimestamp(t.timestamp())


def ts(i: int) -> datetime:
    """Store time of message i, as collected."""
    return datetime.fromtimestamp((BASE + i * 1000) / 1000)


def put(root: Path, first: int, last: int, topic: str = "orders", queues: int = 3) -> None:
    """Messages first..last-1: message i to queue i % queues, stored at BASE + i s, 1 KB body
    (110 of them span two 64 KiB CommitLog files; a queue's 30 units fill one CQ file)."""
    with MessageStore(root, **SMALL) as s:
        s.put_batch([Message(topic, b"%04d" % i * 250, queue_id=i % queues,
                             store_timestamp=BASE + i * 1000) for i in range(first, last)])


def commit(root: Path, table: dict[tuple[str, str], dict[int, int]]) -> None:
    write_consumer_offsets(root, table)


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    """orders/0..2 with messages 0..99, audit-log/0 with messages 100..109, two groups."""
    root = tmp_path / "broker-a"
    put(root, 0, 100)
    put(root, 100, 110, topic="audit-log", queues=1)
    commit(root, {("orders", "g1"): {0: 10, 1: 33}, ("audit-log", "g2"): {0: 4}})
    return root


def publish(root: Path, lake: Path, when: datetime, *extra: str) -> int:
    return main(["--store", str(root), "--lake", str(lake), "--store-name", "s1", *SETS,
                 "--snapshot-time", when.isoformat(), *extra])


def version(spark, lake: Path) -> int:
    """The offsets table's newest version (one per commit)."""
    return DeltaTable.forPath(spark, str(lake / "offsets_history")).history(1).first()["version"]


def queue_rows(spark, lake: Path) -> list[tuple]:
    """(topic, queue, min, max, count, last store time, snapshot) of the current queue offsets."""
    df = current_rows(spark, str(lake), "queue")
    return sorted(tuple(r) for r in df.select("topic", "queue_id", "min_offset", "max_offset",
                                              "message_count", "last_store_timestamp",
                                              "snapshot_ts").collect())


def consumer_rows(spark, lake: Path) -> list[tuple]:
    df = current_rows(spark, str(lake), "consumer")
    return sorted(tuple(r) for r in df.select(
        "consumer_group", "topic", "queue_id", "consumer_offset", "max_offset", "lag",
        "last_consumed_store_timestamp", "snapshot_ts").collect())


def history_snapshots(spark, lake: Path, **options) -> dict[datetime, int]:
    df = spark.read.format("delta").options(**options).load(str(lake / "offsets_history"))
    return {r[0]: r[1] for r in df.groupBy("snapshot_ts").count().collect()}


# --- RocketMQ's own store ------------------------------------------------------------------------
def test_golden_store_units_and_offsets_match_rocketmq(spark, golden_store: Path) -> None:
    """Units read from the store RocketMQ 4.9.8 wrote give the offsets RocketMQ served back."""
    lines = [json.loads(x) for x in (GOLDEN / "read.jsonl").read_text().splitlines()]
    served = {(m["queue"], m["queue_id"]): (m["min_offset"], m["max_offset"])
              for m in lines if "queue" in m}
    msgs = {(m["topic"], m["queue_id"], m["queue_offset"]): m for m in lines if "topic" in m}
    cfg = load_config(json.loads((GOLDEN / "settings.json").read_text()))
    requests = pa.RecordBatch.from_pylist(
        [{"topic": t, "queue_id": q, "wanted": [1, 5]} for t, q in sorted(served)])
    out = pa.Table.from_batches(list(read_queue_units(iter([requests]), str(golden_store), cfg)))
    units = out.to_pylist()
    for u in units:
        m = msgs[(u["topic"], u["queue_id"], u["queue_offset"])]
        assert (u["commitlog_offset"], u["size"], u["store_timestamp"], u["commitlog_error"]) == \
            (m["commitlog_offset"], m["size"], m["store_timestamp"], None)
    asked = {(u["topic"], u["queue_id"], u["queue_offset"]) for u in units}
    assert asked == {(t, q, o) for (t, q), (lo, hi) in served.items()
                     for o in {lo, hi - 1, 1, 5} if lo <= o < hi}

    rows = queue_offsets(spark.createDataFrame(out.to_pandas(), from_arrow_schema(UNIT_SCHEMA)),
                         0, "golden", T1).collect()
    assert len(rows) == len(served) == 28
    for r in rows:
        lo, hi = served[(r.topic, r.queue_id)]
        first, last = msgs[(r.topic, r.queue_id, lo)], msgs[(r.topic, r.queue_id, hi - 1)]
        assert (r.min_offset, r.max_offset, r.message_count) == (lo, hi, hi - lo)
        assert (r.min_commitlog_offset, r.max_commitlog_offset) == \
            (first["commitlog_offset"], last["commitlog_offset"])
        assert r.last_store_timestamp == datetime.fromtimestamp(last["store_timestamp"] / 1000)


def test_retention_moves_min_offsets_to_the_commitlog_minimum(spark, tmp_path: Path) -> None:
    """After RocketMQ-style retention deleted the first CommitLog file, a queue starts at its
    first message in the files that are left; older consumed messages have no store time."""
    root = tmp_path / "broker-r"
    with MessageStore(root, **SMALL) as s:
        results = s.put_batch([Message("orders", b"%04d" % i * 250, queue_id=i % 3,
                                       store_timestamp=BASE + i * 1000) for i in range(110)])
        s.commit_offsets("g1", "orders", {0: 2, 1: 30})
        s.delete_expired_files(now=BASE + 10 ** 10, force=True)
    assert sorted(p.name for p in (root / "commitlog").iterdir()) == ["00000000000000065536"]
    live = [r for r in results if r.commitlog_offset >= 65536]
    cfg = load_config(SMALL)
    snap = read_snapshot(root, cfg, read_layout(root, cfg), read_consumer_offsets(root), "r", T1)
    got = {(r["queue_id"]): (r["min_offset"], r["max_offset"], r["min_commitlog_offset"])
           for r in snap.queues.to_pylist()}
    assert got == {q: (min(r.queue_offset for r in live if r.queue_id == q),
                       sum(r.queue_id == q for r in results),
                       min(r.commitlog_offset for r in live if r.queue_id == q)) for q in range(3)}
    consumed = {r["queue_id"]: r["last_consumed_store_timestamp"] for r in collected(snap.consumers)}
    assert consumed == {0: None, 1: ts(3 * 29 + 1), 2: None}  # q0 offset 1 is gone; q1 offset 29


# --- snapshots, idempotence, recovery ------------------------------------------------------------
def test_snapshot_rows_are_computed_in_process(store: Path) -> None:
    """The store library computes the rows in process, with no Spark session."""
    cfg = load_config(SMALL)
    snap = read_snapshot(store, cfg, read_layout(store, cfg), read_consumer_offsets(store), "s1", T1)
    # orders/q holds messages q, q+3, ... of 0..99 (34, 33, 33); audit-log/0 10 messages
    assert sorted((r["kind"], r["topic"], r["queue_id"], r["max_offset"])
                  for r in snap.rows.to_pylist()) == [
        ("consumer", "audit-log", 0, 10), ("consumer", "orders", 0, 34),
        ("consumer", "orders", 1, 33), ("consumer", "orders", 2, 33),
        ("queue", "audit-log", 0, 10), ("queue", "orders", 0, 34), ("queue", "orders", 1, 33),
        ("queue", "orders", 2, 33)]


def test_snapshots_current_tables_history_and_idempotence(spark, store: Path, tmp_path: Path,
                                                          capsys) -> None:
    lake = tmp_path / "lake"
    # Snapshot 1. orders/q has messages i = q, q+3, ...: q0 34 (last 99), q1 33 (97), q2 33 (98).
    assert publish(store, lake, T1) == 0
    assert queue_rows(spark, lake) == [
        ("audit-log", 0, 0, 10, 10, ts(109), naive(T1)),
        ("orders", 0, 0, 34, 34, ts(99), naive(T1)),
        ("orders", 1, 0, 33, 33, ts(97), naive(T1)),
        ("orders", 2, 0, 33, 33, ts(98), naive(T1)),
    ]
    assert consumer_rows(spark, lake) == [
        ("g1", "orders", 0, 10, 34, 24, ts(27), naive(T1)),   # last consumed: q0 offset 9 = msg 27
        ("g1", "orders", 1, 33, 33, 0, ts(97), naive(T1)),
        ("g1", "orders", 2, 0, 33, 33, None, naive(T1)),      # not committed: offset 0
        ("g2", "audit-log", 0, 4, 10, 6, ts(103), naive(T1)),
    ]
    assert version(spark, lake) == 0          # the first write created the table: one commit

    # Snapshot 2: six more orders (110..115: q2, q0, q1, q2, q0, q1) and new commits.
    put(store, 110, 116)
    commit(store, {("orders", "g1"): {0: 30, 1: 35, 2: 5}, ("audit-log", "g2"): {0: 10}})
    assert publish(store, lake, T2) == 0
    assert queue_rows(spark, lake) == [
        ("audit-log", 0, 0, 10, 10, ts(109), naive(T2)),
        ("orders", 0, 0, 36, 36, ts(114), naive(T2)),
        ("orders", 1, 0, 35, 35, ts(115), naive(T2)),
        ("orders", 2, 0, 35, 35, ts(113), naive(T2)),
    ]
    assert consumer_rows(spark, lake) == [
        ("g1", "orders", 0, 30, 36, 6, ts(87), naive(T2)),   # q0 offset 29 = msg 87
        ("g1", "orders", 1, 35, 35, 0, ts(115), naive(T2)),  # q1 offset 34 = msg 115
        ("g1", "orders", 2, 5, 35, 30, ts(14), naive(T2)),   # q2 offset 4 = msg 14
        ("g2", "audit-log", 0, 10, 10, 0, ts(109), naive(T2)),
    ]
    assert history_snapshots(spark, lake) == {naive(T1): 8, naive(T2): 8}
    assert history_snapshots(spark, lake, versionAsOf=0) == {naive(T1): 8}
    partitions = sorted(p.name for p in (lake / "offsets_history").glob("snapshot_date=*"))
    assert partitions == ["snapshot_date=2026-11-20", "snapshot_date=2026-11-21"]
    assert version(spark, lake) == 1

    # A third run on the same store, as a later snapshot: nothing is written.
    capsys.readouterr()
    assert publish(store, lake, T3) == 0
    assert "unchanged" in capsys.readouterr().out
    assert version(spark, lake) == 1
    assert [r["status"] for r in spark.read.format("delta").load(str(lake / "maintenance_runs"))
            .collect()] == ["unchanged"]

    # A commit, then the same snapshot again (a re-run after its commit): written once.
    commit(store, {("orders", "g1"): {0: 31, 1: 35, 2: 5}, ("audit-log", "g2"): {0: 10}})
    assert publish(store, lake, T3) == 0
    assert consumer_rows(spark, lake)[0] == ("g1", "orders", 0, 31, 36, 5, ts(90), naive(T3))
    commit(store, {("orders", "g1"): {0: 32, 1: 35, 2: 5}, ("audit-log", "g2"): {0: 10}})
    capsys.readouterr()
    assert publish(store, lake, T3) == 0
    assert "unchanged" in capsys.readouterr().out
    assert consumer_rows(spark, lake)[0] == ("g1", "orders", 0, 31, 36, 5, ts(90), naive(T3))
    assert history_snapshots(spark, lake) == {naive(T1): 8, naive(T2): 8, naive(T3): 8}
    assert version(spark, lake) == 2

    # A snapshot older than the published one is refused.
    commit(store, {("orders", "g1"): {0: 32}})
    assert publish(store, lake, T2) == 2
    assert "older than the published snapshot" in capsys.readouterr().err

    # audit-log and its group g2 vanish: gone from the current tables, kept in history.
    shutil.rmtree(store / "consumequeue" / "audit-log")
    assert publish(store, lake, T4) == 0
    assert [r[:2] for r in queue_rows(spark, lake)] == [("orders", 0), ("orders", 1), ("orders", 2)]
    assert [r[:3] for r in consumer_rows(spark, lake)] == [
        ("g1", "orders", 0), ("g1", "orders", 1), ("g1", "orders", 2)]
    assert history_snapshots(spark, lake) == {naive(T1): 8, naive(T2): 8, naive(T3): 8,
                                              naive(T4): 6}
    audit = spark.read.format("delta").load(str(lake / "offsets_history")).where(
        "topic = 'audit-log'").count()
    assert audit == 6  # queue + g2 rows of T1, T2, T3


def test_cli_route_and_commitlog_disagreement_reported(spark, store: Path, tmp_path: Path,
                                                       capsys) -> None:
    # orders/1's last unit (offset 32 = message 97) claims a size its record does not have.
    cq = store / "consumequeue" / "orders" / "1" / "00000000000000000600"
    raw = bytearray(cq.read_bytes())
    raw[2 * 20 + 8:2 * 20 + 12] = (999).to_bytes(4, "big")
    cq.write_bytes(bytes(raw))
    lake = tmp_path / "lake"
    assert cli.main(["publish-offsets", "--store", str(store), "--lake", str(lake), *SETS,
                     "--store-name", "b1", "--snapshot-time", T1.isoformat()]) == 0
    err = capsys.readouterr().err
    assert "1 ConsumeQueue unit(s) disagree with the CommitLog" in err
    assert "orders/1 queue offset 32" in err and "the unit says size 999" in err
    rows = {r[:2]: r for r in queue_rows(spark, lake)}
    assert rows[("orders", 1)] == ("orders", 1, 0, 33, 33, None, naive(T1))
    assert rows[("orders", 0)][5] == ts(99)
    assert {r.store for r in spark.read.format("delta").load(str(lake / "offsets_history"))
            .select("store").collect()} == {"b1"}


# --- inputs it must refuse (nothing written) ------------------------------------------------------
def lake_files(lake: Path) -> list[str]:
    return sorted(str(p.relative_to(lake)) for p in lake.rglob("*"))


def test_bad_consumer_offsets_missing_store_and_vanished_topic(spark, store: Path, tmp_path: Path,
                                                               capsys) -> None:
    lake = tmp_path / "lake"
    before = lake_files(lake)
    offsets = store / "config" / "consumerOffset.json"
    good = offsets.read_text()

    # Malformed, no .bak: an error naming the file.
    assert not offsets.with_name("consumerOffset.json.bak").exists()
    offsets.write_text('{"offsetTable":{"orders@g1":{0:12,')
    assert publish(store, lake, T1) == 3  # the store is unusable: a config file it cannot read
    assert "consumerOffset.json: unreadable" in capsys.readouterr().err

    # A topic the store no longer has.
    offsets.write_text(good.replace("audit-log@g2", "gone-topic@g2"))
    assert publish(store, lake, T1) == 2
    assert "topics this store no longer has: topic gone-topic (group g2)" in \
        capsys.readouterr().err

    # A missing store, and file sizes that are not the store's.
    assert publish(tmp_path / "nowhere", lake, T1) == 2
    assert "no such store directory" in capsys.readouterr().err
    # (the sizes come from the files: a --set they contradict is a usage error naming both)
    assert main(["--store", str(store), "--lake", str(lake),
                 "--set", "mappedFileSizeConsumeQueue=6000"]) == 2
    assert (f"mappedFileSizeConsumeQueue=6000 was given, but the ConsumeQueue files under "
            f"{store / 'consumequeue'} are 600 bytes") in capsys.readouterr().err
    assert lake_files(lake) == before

    # Malformed with a good .bak: the .bak's offsets are published, with a warning.
    offsets.write_text(good)
    commit(store, {("orders", "g1"): {0: 7}})  # the good file becomes the .bak
    offsets.write_text("{not json")
    assert publish(store, lake, T1) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "using consumerOffset.json.bak" in err
    assert [r[:4] for r in consumer_rows(spark, lake)] == [
        ("g1", "orders", 0, 10), ("g1", "orders", 1, 33), ("g1", "orders", 2, 0),
        ("g2", "audit-log", 0, 4)]


# --- real spark-submit ----------------------------------------------------------------------------
def test_spark_submit_publishes_a_library_store(spark, store: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    r = subprocess.run(
        [str(Path(sys.executable).parent / "spark-submit"), *delta_submit_args(),
         "--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=2",
         "--conf", "spark.ui.enabled=false", str(ROOT / "jobs" / "publish_offsets.py"),
         "--store", str(store), "--lake", str(lake), "--store-name", "s1", *SETS, "--snapshot-time",
         T1.isoformat()],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "published store s1 snapshot 2026-11-20T10:00:00.000Z: 4 queues, " \
        "4 consumer rows" in r.stdout + r.stderr
    assert [r[:6] for r in queue_rows(spark, lake)] == [
        ("audit-log", 0, 0, 10, 10, ts(109)), ("orders", 0, 0, 34, 34, ts(99)),
        ("orders", 1, 0, 33, 33, ts(97)), ("orders", 2, 0, 33, 33, ts(98))]
    assert [r[3:6] for r in consumer_rows(spark, lake)] == [
        (10, 34, 24), (33, 33, 0), (0, 33, 33), (4, 10, 6)]
