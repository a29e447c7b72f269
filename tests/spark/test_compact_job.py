"""jobs/compact.py end to end: expiry with aged files, the unconsumed guard, dry-run, the Delta
archive read back row for row, a re-run after a crash between archive and delete, and key
compaction."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from store_helpers import outside

from rocketlake.jobs import compact
from rocketlake.jobs.spark_session import delta_submit_args
from rocketlake.store import GetStatus, Message, MessageStore
from rocketlake.store.codec import decode_record
from rocketlake.store.compaction import segment_path
from rocketlake.store.config import load_config
from rocketlake.store.config_files import write_config

from .helpers import tree_bytes

ROOT = Path(__file__).resolve().parents[2]
SIZES = {"mappedFileSizeCommitLog": 16384, "mappedFileSizeConsumeQueue": 400,
         "maxHashSlotNum": 64, "maxIndexNum": 200}
SETS = [a for k, v in SIZES.items() for a in ("--set", f"{k}={v}")]
HOUR = 3600


def named(root: Path) -> list[str]:
    """``--store root`` and the store's name in the lake (``jobs.lake.store_name``)."""
    return ["--store", str(root), "--store-name", "s1"]


def _store(root: Path, n: int = 300) -> list:
    """orders (2 queues) and a keyed topic 'user-state'; every file but the last aged 80 h."""
    with MessageStore(root, **SIZES) as ms:
        puts = ms.put_batch([Message("orders" if i % 3 else "user-state", f"event-{i}".encode() * 8,
                                     i % 2, tags="T", keys=f"user-{i % 5}",
                                     born_host="[2001:db8::1]:7000" if i % 10 == 0 else None)
                             for i in range(n)])
    files = sorted((root / "commitlog").iterdir())
    old = time.time() - 80 * HOUR
    for f in files[:-1]:
        os.utime(f, (old, old))
    return puts


def _records(root: Path, names: list[str]) -> dict[int, object]:
    out = {}
    for name in names:
        raw, pos = (root / "commitlog" / name).read_bytes(), 0
        while pos < len(raw):
            try:
                r = decode_record(raw, pos, int(name))
            except ValueError:
                break
            if isinstance(r, int):
                break
            out[r.commitlog_offset] = r
            pos += r.size
    return out


def test_dry_run_prints_the_plan_and_changes_nothing(tmp_path, capsys):
    root = tmp_path / "s"
    _store(root)
    before = {p: p.stat().st_mtime for p in root.rglob("*") if p.is_file()}
    assert compact.main([*named(root), "--lake", str(tmp_path / "lake"), "--dry-run",
                         "--force", *SETS]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    names = sorted(p.name for p in (root / "commitlog").iterdir())
    assert plan["reason"] == "forced" and plan["delete"] == names[:-1]
    assert {p: p.stat().st_mtime for p in root.rglob("*") if p.is_file()} == before
    assert not (tmp_path / "lake").exists()


def _next_local(hour: int) -> int:
    """The next time (epoch ms) whose local hour is ``hour`` (deleteWhen is local time)."""
    t = time.localtime()
    at = time.mktime((t.tm_year, t.tm_mon, t.tm_mday, hour, 30, 0, 0, 0, -1))
    return int((at if at >= time.time() else time.mktime(
        (t.tm_year, t.tm_mon, t.tm_mday + 1, hour, 30, 0, 0, 0, -1))) * 1000)


def test_expires_whenever_it_runs_and_says_why_each_file_is_kept(tmp_path, capsys):
    # An Airflow retry at 05:30 with deleteWhen=04: the job still expires what is old enough.
    root = tmp_path / "s"
    _store(root, 500)
    names = sorted(p.name for p in (root / "commitlog").iterdir())
    assert len(names) >= 6
    os.utime(root / "commitlog" / names[3])          # touched now: not expired at 05:30
    gate = ["--set", "deleteWhen=04", "--set", "diskMaxUsedSpaceRatio=100", "--set", "fileReservedTime=72"]
    argv = [*named(root), "--lake", str(tmp_path / "lake"), "--dry-run",
            "--now", str(_next_local(5)), *SETS, *gate]

    def dry_plan(*extra: str) -> dict:
        assert compact.main([*argv, *extra]) == 0
        return json.loads(capsys.readouterr().out)["plan"]

    plan = dry_plan()
    assert (plan["reason"], plan["delete"]) == ("scheduled", names[:3])
    assert list(plan["kept"]) == names[3:]
    first_kept = plan["kept"][names[3]]
    assert first_kept.startswith("not expired: ") and "fileReservedTime is 72 h" in first_kept
    for name in names[4:-1]:
        assert f"leading run of expired files is deleted, and {names[3]}" in plan["kept"][name]
    assert plan["kept"][names[-1]].startswith("the last file")

    gated = dry_plan("--respect-delete-when")          # the broker's hour gate, kept as an option
    assert (gated["reason"], gated["delete"]) == (None, [])
    assert list(gated["kept"]) == names
    for name in names[:3] + names[4:-1]:
        assert "deletion waits for a deleteWhen hour (04; now 05h)" in gated["kept"][name]
    assert gated["kept"][names[3]] == plan["kept"][names[3]]
    assert dry_plan("--respect-delete-when", "--force")["delete"] == names[:3]


def test_expire_archive_guard_and_reads_below_the_minimum(spark, tmp_path, capsys):
    root, lake = tmp_path / "s", tmp_path / "lake"
    puts = _store(root)
    orders0 = [p for p in puts if p.topic == "orders" and p.queue_id == 0]
    with MessageStore(root, **SIZES) as ms:
        ms.commit_offsets("g1", "orders", {0: 60, 1: 200})
    hold = orders0[60].commitlog_offset            # g1's first unread message
    names = sorted(p.name for p in (root / "commitlog").iterdir())
    size = SIZES["mappedFileSizeCommitLog"]
    expect_deleted = [n for n in names[:-1] if int(n) + size <= hold]
    assert 0 < len(expect_deleted) < len(names) - 1  # the guard really keeps something
    archived_records = _records(root, expect_deleted)

    assert compact.main([*named(root), "--lake", str(lake), "--force",
                         "--protect-unconsumed", *SETS]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["plan"]["delete"] == expect_deleted
    kept = summary["plan"]["kept"]
    assert list(kept)[0] == names[len(expect_deleted)] and "group g1" in kept[names[len(expect_deleted)]]
    assert sorted(p.name for p in (root / "commitlog").iterdir()) == names[len(expect_deleted):]

    archive = spark.read.format("delta").load(str(lake / "messages_archive"))
    rows = {r["commitlog_offset"]: r for r in archive.collect()}
    assert sorted(rows) == sorted(archived_records)
    for off, rec in archived_records.items():
        row = rows[off]
        assert (bytes(row["body"]), row["topic"], row["queue_id"], row["queue_offset"],
                row["store_timestamp"], row["born_host"], row["store_host"], row["msg_id"],
                row["properties"], row["tags"], list(row["keys"]), row["body_crc"],
                row["commitlog_file"]) == (
            rec.body, rec.topic, rec.queue_id, rec.queue_offset, rec.store_timestamp, rec.born_host,
            rec.store_host, rec.msg_id, rec.properties, rec.tags, rec.keys, rec.body_crc,
            f"{off - off % size:020d}")
    # queryable with Spark SQL by topic, key and time range
    spark.read.format("delta").load(str(lake / "messages_archive")).createOrReplaceTempView("archive")
    stored_at = [r.store_timestamp for r in archived_records.values()]
    lo, hi = min(stored_at), max(stored_at)
    want = sorted(o for o, r in archived_records.items() if r.topic == "orders" and "user-3" in r.keys)
    got = spark.sql(f"SELECT commitlog_offset FROM archive WHERE topic = 'orders' AND "
                    f"array_contains(keys, 'user-3') AND store_timestamp BETWEEN {lo} AND {hi} "
                    f"ORDER BY commitlog_offset").collect()
    assert [r[0] for r in got] == want

    new_min = int(names[len(expect_deleted)])
    with MessageStore(root, read_only=True, **SIZES) as ms:
        lo_q = ms.min_offset("orders", 0)
        assert orders0[lo_q].commitlog_offset >= new_min > orders0[lo_q - 1].commitlog_offset
        g = ms.get("orders", 0, 0)
        assert (g.status, g.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, lo_q)
    runs = spark.read.format("delta").load(str(lake / "maintenance_runs")).collect()
    assert [(r["job"], r["status"]) for r in runs] == [("compact", "ok")]


def test_rerun_after_crash_between_archive_and_delete(spark, tmp_path, capsys):
    root, lake = tmp_path / "s", tmp_path / "lake"
    _store(root)
    cfg = load_config(SIZES)
    names = compact.plan(root, cfg, int(time.time() * 1000), True, False)["delete"]
    compact.archive(spark, root, lake, cfg, names, "s1",
                    compact.file_counts(spark, root, cfg, names))  # killed here: archived, nothing deleted
    n = spark.read.format("delta").load(str(lake / "messages_archive")).count()
    assert compact.main([*named(root), "--lake", str(lake), "--force", *SETS]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["plan"]["delete"] == names
    assert spark.read.format("delta").load(str(lake / "messages_archive")).count() == n  # no duplicates
    assert not any((root / "commitlog" / f).exists() for f in names)


#: the archive table as compact created it before the source had TIMESTAMP columns
OLD_ARCHIVE_SCHEMA = (
    "store string NOT NULL, commitlog_file string, commitlog_offset bigint NOT NULL, "
    "size int NOT NULL, magic bigint NOT NULL, body_crc int NOT NULL, queue_id int NOT NULL, "
    "flag int NOT NULL, queue_offset bigint NOT NULL, sys_flag int NOT NULL, "
    "born_timestamp bigint NOT NULL, born_host string, store_timestamp bigint NOT NULL, "
    "store_host string, reconsume_times int NOT NULL, prepared_transaction_offset bigint NOT NULL, "
    "body binary, topic string, properties map<string,string>, msg_id string, keys array<string>, "
    "tags string, store_date date NOT NULL, born_ts timestamp NOT NULL, store_ts timestamp NOT NULL")


def test_an_archive_from_before_the_timestamp_columns_takes_appends(spark, tmp_path, capsys):
    """A lake whose archive table compact created before tags / born_ts / store_ts came from the
    source's columns: the next compact appends to it, its schema unchanged, the times exact."""
    root, lake = tmp_path / "s", tmp_path / "lake"
    _store(root)
    names = compact.plan(root, load_config(SIZES), int(time.time() * 1000), True, False)["delete"]
    records = _records(root, names)
    uri = str(lake / "messages_archive")
    spark.sql(f"CREATE TABLE delta.`{uri}` ({OLD_ARCHIVE_SCHEMA}) USING DELTA "
              f"PARTITIONED BY (topic, store_date)")
    before = spark.read.format("delta").load(uri).schema
    assert compact.main([*named(root), "--lake", str(lake), "--force", *SETS]) == 0
    assert json.loads(capsys.readouterr().out)["plan"]["delete"] == names
    archive = spark.read.format("delta").load(uri)
    assert archive.schema == before
    got = archive.select("commitlog_offset", "tags", F.unix_millis("born_ts"), F.unix_millis("store_ts"),
                         F.date_format("store_date", "yyyy-MM-dd")).collect()
    utc_day = {o: datetime.fromtimestamp(r.store_timestamp / 1000, UTC).strftime("%Y-%m-%d")
               for o, r in records.items()}
    assert sorted(tuple(r) for r in got) == sorted(
        (o, r.tags, r.born_timestamp, r.store_timestamp, utc_day[o]) for o, r in records.items())


def test_a_bad_crc_in_a_file_to_expire_archives_and_deletes_nothing(spark, tmp_path, capsys):
    root, lake = tmp_path / "s", tmp_path / "lake"
    _store(root)
    names = sorted(p.name for p in (root / "commitlog").iterdir())
    victim = next(iter(_records(root, names[1:2]).values()))   # the first record of the 2nd file
    path = root / "commitlog" / names[1]
    raw = bytearray(path.read_bytes())
    at = raw.index(victim.body, victim.commitlog_offset - int(names[1]))
    raw[at] ^= 0xFF
    path.write_bytes(bytes(raw))
    os.utime(path, (time.time() - 80 * HOUR,) * 2)
    before = tree_bytes(root)
    assert compact.main([*named(root), "--lake", str(lake), "--force", *SETS]) == 3
    err = capsys.readouterr().err
    assert f"valid data ends at offset {victim.commitlog_offset}" in err and "CRC" in err
    assert "nothing was archived or deleted" in err
    assert tree_bytes(root) == before and not (lake / "messages_archive").exists()


def test_key_compaction_keeps_the_latest_value_per_key(spark, tmp_path, capsys):
    root, lake = tmp_path / "s", tmp_path / "lake"
    puts = _store(root)
    write_config(root / "config/topics.json", {"topicConfigTable": {
        "user-state": {"topicName": "user-state", "attributes": {"+cleanup.policy": "COMPACTION"}}}})
    with MessageStore(root, **SIZES) as ms:
        ms.commit_offsets("g2", "user-state", {0: 10, 1: 50})
    keep_all = ["--set", "fileReservedTime=1000"]   # nothing expires: compaction alone
    assert compact.main([*named(root), "--lake", str(lake), *SETS, *keep_all]) == 0
    capsys.readouterr()
    # independent expectation: per queue and key, the highest queue offset wins, in offset order
    latest: dict[tuple[int, str], object] = {}
    for i, p in enumerate(puts):
        if p.topic == "user-state":
            latest[(p.queue_id, f"user-{i % 5}")] = (p, i)
    with MessageStore(segment_path(root, "user-state"), read_only=True, **SIZES) as seg:
        for q in (0, 1):
            want = sorted((p.queue_offset, f"event-{i}".encode() * 8)
                          for (qq, _), (p, i) in latest.items() if qq == q)
            got = seg.get("user-state", q, 0, max_msgs=64)
            assert [m.record.body for m in got.messages] == [b for _, b in want]
        origin = {q: sorted(p.queue_offset for (qq, _), (p, _) in latest.items() if qq == q) for q in (0, 1)}
        assert seg.consumer_offsets()[("user-state", "g2")] == {
            q: sum(1 for o in origin[q] if o < c) for q, c in ((0, 10), (1, 50))}
    # a second run with a newer value for one key replaces just that value
    with MessageStore(root, **SIZES) as ms:
        ms.put(Message("user-state", b"newest", 0, keys="user-0"))
    assert compact.main([*named(root), "--lake", str(lake), *SETS, *keep_all]) == 0
    with MessageStore(segment_path(root, "user-state"), read_only=True, **SIZES) as seg:
        bodies = [m.record.body for m in seg.get("user-state", 0, 0, max_msgs=64).messages]
        assert bodies[-1] == b"newest" and len(bodies) == sum(1 for (q, _) in latest if q == 0)


def test_spark_submit_compact(tmp_path):
    root, lake = tmp_path / "s", tmp_path / "lake"
    _store(root)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    r = subprocess.run([str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]",
                        *delta_submit_args(), str(ROOT / "jobs/compact.py"), *named(root),
                        "--lake", str(lake), "--force", *SETS],
                       env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(list((root / "commitlog").iterdir())) == 1
    assert (lake / "messages_archive/_delta_log").exists()


@pytest.mark.parametrize("topic", ["../../victim", "../../victim_link", "user-state\n"])
def test_hostile_topic_is_refused_and_nothing_outside_changes(tmp_path, topic, capsys):
    root = tmp_path / "s"
    _store(root, 30)
    (tmp_path / "victim").write_bytes(b"precious")
    (tmp_path / "victim_dir").mkdir()
    (tmp_path / "victim_dir" / "keep").write_bytes(b"also precious")
    (tmp_path / "victim_link").symlink_to(tmp_path / "victim_dir")
    before, victims = tree_bytes(root), outside(tmp_path, root)
    assert compact.main([*named(root), "--lake", str(tmp_path / "lake"), "--topic", topic,
                         *SETS]) == 2
    assert f"topic {topic!r} has characters outside" in capsys.readouterr().err
    assert tree_bytes(root) == before and outside(tmp_path, root) == victims
