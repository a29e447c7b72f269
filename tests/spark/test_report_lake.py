"""`rocketlake report` over a real lake: publish-offsets snapshots of two stores, one lake."""
from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from rocketlake.jobs import cli
from rocketlake.jobs.publish_offsets import main as publish_main
from rocketlake.store import Message, MessageStore
from rocketlake.store.config_files import write_consumer_offsets

SMALL = {"mappedFileSizeCommitLog": 65536, "mappedFileSizeConsumeQueue": 600}
SETS = [a for k, v in SMALL.items() for a in ("--set", f"{k}={v}")]
T1, T2, T3 = (datetime(2026, 11, d, 10, tzinfo=UTC) for d in (20, 21, 22))


def put(root: Path, n: int) -> None:
    with MessageStore(root, **SMALL) as s:
        s.put_batch([Message("orders", b"x" * 100) for _ in range(n)])


def publish(root: Path, lake: Path, when: datetime) -> None:
    assert publish_main(["--store", str(root), "--lake", str(lake), "--store-name", root.name, *SETS,
                         "--snapshot-time", when.isoformat()]) == 0


def test_report_judges_each_group_on_its_own_stores_history(spark, tmp_path: Path, capsys):
    lake = tmp_path / "lake"
    a, b = tmp_path / "broker-a", tmp_path / "broker-b"
    put(b, 10)
    write_consumer_offsets(b, {("orders", "g1"): {0: 10}})   # broker-b's g1 is caught up
    publish(b, lake, T1)
    put(a, 30)
    write_consumer_offsets(a, {("orders", "g1"): {0: 5}})    # broker-a's g1 never moves on
    for when in (T1, T2, T3):
        publish(a, lake, when)
        put(a, 10)
    capsys.readouterr()
    out = tmp_path / "report.html"
    assert cli.main(["report", "--store", str(a), "--lake", str(lake), *SETS, "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    # lag 25, 35, 45 at offset 5: stalled (broker-b's lag 0 in the same lake must not count)
    assert summary["groups"] == {"g1": "STALLED"} and summary["lag_points"] == 3
    page = out.read_text()
    assert ("<td>g1</td><td>orders</td><td class=STALLED>STALLED</td><td>orders/0</td><td>45</td>"
            "<td>rose by 20</td><td>3</td>") in page
    assert page.count("<li>publish-offsets at ") == 4     # the runs of both stores, in words
    # the lag now, from the store itself: 60 messages, committed 5
    assert "<td>g1</td><td>orders</td><td>0</td><td>5</td><td>60</td><td>55</td>" in page


def test_rebuild_and_verify_runs_are_listed_in_words(spark, tmp_path: Path, capsys) -> None:
    lake, store = tmp_path / "lake", tmp_path / "broker-c"
    put(store, 40)
    assert cli.main(["rebuild-consumequeue", "--store", str(store), "--output", str(tmp_path / "out"),
                     "--lake", str(lake), *SETS]) == 0
    assert cli.main(["check-consistency", "--store", str(store), "--report", str(tmp_path / "c.json"),
                     "--lake", str(lake), *SETS]) == 0
    capsys.readouterr()
    out = tmp_path / "report.html"
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup
    before = set(jobs())
    assert cli.main(["report", "--store", str(store), "--lake", str(lake), *SETS, "--out", str(out)]) == 0
    assert set(jobs()) == before                  # the run log read on the driver: no Spark job
    page = out.read_text()
    assert ": output rebuild wrote 40 units for 1 topic under " in page
    assert ": checked 40 records, 0 errors, nothing to rebuild " in page


def test_lake_facts_run_no_spark_job_and_read_what_spark_reads(spark, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    from rocketlake.jobs.cli.report import LAG_COLUMNS, MAX_RUNS, lake_facts
    from rocketlake.jobs.lake import lake_uri, table_uri

    lake, store = tmp_path / "lake", tmp_path / "broker-d"
    put(store, 30)
    write_consumer_offsets(store, {("orders", "g1"): {0: 5}, ("orders", "g2"): {0: 30}})
    for when in (T1, T2):
        publish(store, lake, when)
        put(store, 10)
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup
    before = set(jobs())
    lag, runs = lake_facts(lake_uri(str(lake)), store.name)
    assert set(jobs()) == before                  # the history and the run records: no Spark job
    # 2 snapshots x 2 groups: g1 lag 25 then 35 at offset 5, g2 lag 0 then 10 at offset 30; times
    # as Spark's collect() gives them (this machine's local time, naive)
    t1, t2 = (datetime.fromtimestamp(t.timestamp()) for t in (T1, T2))
    assert sorted((r["consumer_group"], r["snapshot_ts"], r["consumer_offset"], r["lag"])
                  for r in lag) == [("g1", t1, 5, 25), ("g1", t2, 5, 35),
                                    ("g2", t1, 30, 0), ("g2", t2, 30, 10)]
    read = (spark.read.format("delta").load(table_uri(lake_uri(str(lake)), "offsets_history"))
            .where((F.col("kind") == "consumer") & (F.col("store") == store.name)))
    assert sorted(lag, key=repr) == sorted((r.asDict() for r in read.select(*LAG_COLUMNS).collect()),
                                           key=repr)
    assert [r["job"] for r in runs] == ["publish-offsets"] * 2 and len(runs) <= MAX_RUNS
