"""The rocketmq source's Kafka-named options on a batch read: topics / topicPattern,
startingOffsets / endingOffsets, startingTimestamp / endingTimestamp, and unknown options refused.
Expected rows come from the puts of a hand-built store (offsets and store times the writer
returned), not from the source."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocketlake.store import Message, MessageStore

from .helpers import SMALL

T0 = 1_763_900_000_000
TOPICS = ("orders", "payments", "audit-log")
#: message 45's store time is out of order (older than every other): a clock stepped back
OLD = 45


@pytest.fixture(scope="module")
def puts(tmp_path_factory) -> tuple[Path, list]:
    """90 messages of ~1.5 KiB over several 64 KiB CommitLog files; message i is stored at
    T0 + 1000 i (but message 45 at T0 - 5000), topic TOPICS[i % 3]."""
    root = tmp_path_factory.mktemp("opts") / "store"
    with MessageStore(root, **SMALL) as ms:
        out = [ms.put(Message(TOPICS[i % 3], bytes([i]) * 1500, i % 2,
                              store_timestamp=T0 - 5000 if i == OLD else T0 + 1000 * i))
               for i in range(90)]
    assert len({p.commitlog_offset // SMALL["mappedFileSizeCommitLog"] for p in out}) >= 3
    return root, out


def offsets(spark, root: Path, **options: str) -> list[int]:
    df = spark.read.format("rocketmq").options(**options).load(str(root))
    return sorted(r[0] for r in df.select("commitlog_offset").collect())


def test_topics_and_topic_pattern_select_rows_of_both_kinds(spark, puts) -> None:
    root, out = puts
    orders = [p.commitlog_offset for p in out if p.topic == "orders"]
    not_audit = [p.commitlog_offset for p in out if p.topic != "audit-log"]
    assert len(orders) == 30
    assert offsets(spark, root, topics="orders") == orders
    assert offsets(spark, root, subscribe="orders, payments") == not_audit
    assert offsets(spark, root, topicPattern="(orders|pay.*)") == not_audit
    assert offsets(spark, root, subscribePattern="pay") == []  # the whole name must match
    assert offsets(spark, root, kind="consumequeue", topics="orders") == orders


def test_starting_and_ending_offsets_bound_the_commitlog(spark, puts) -> None:
    root, out = puts
    at = [p.commitlog_offset for p in out]
    got = offsets(spark, root, startingOffsets=json.dumps({"store": "s", "commitlogOffset": at[10]}),
                  endingOffsets=json.dumps({"commitlogOffset": at[50]}))
    assert got == at[10:50]  # the end is exclusive
    assert offsets(spark, root, startingOffsets="earliest", endingOffsets="latest") == at
    assert offsets(spark, root, startingOffsets=json.dumps({"commitlogOffset": at[89] + 1})) == []
    assert offsets(spark, root, kind="consumequeue",
                   endingOffsets=json.dumps({"commitlogOffset": at[3]})) == at[:3]


def test_timestamps_start_at_the_first_record_stored_at_or_after_them(spark, puts) -> None:
    root, out = puts
    at = [p.commitlog_offset for p in out]
    # from message 40 (stored at T0 + 40 s) every later record, message 45 (older) too
    assert offsets(spark, root, startingTimestamp=str(T0 + 40_000)) == at[40:]
    assert offsets(spark, root, startingTimestamp=str(T0 + 39_500)) == at[40:]
    # ending: records before the first stored at or after the time (message 45 included)
    assert offsets(spark, root, startingTimestamp=str(T0 + 30_000),
                   endingTimestamp=str(T0 + 60_000)) == at[30:60]
    assert offsets(spark, root, startingTimestamp=str(T0 + 1_000_000)) == []
    assert offsets(spark, root, startingTimestamp=str(T0 - 10_000)) == at


def test_a_file_is_skipped_by_its_first_record_time(spark, tmp_path: Path) -> None:
    """The documented rule, where store times are out of order across files: a record of an
    earlier file stored after the time is not looked for (only the file before the first file
    whose first record is stored at or after it is walked)."""
    root = tmp_path / "store"
    with MessageStore(root, **SMALL) as ms:
        out = [ms.put(Message("t", b"x" * 1500, 0, store_timestamp=T0 + 1000 * i + (
            10_000_000 if i == 2 else 0))) for i in range(90)]
    files = [p.commitlog_offset // SMALL["mappedFileSizeCommitLog"] for p in out]
    first_of_2 = files.index(2)
    ts = T0 + 1000 * (first_of_2 + 3)  # in file 2; message 2 (file 0) is stored after it too
    assert offsets(spark, root, startingTimestamp=str(ts)) == \
        [p.commitlog_offset for p in out[first_of_2 + 3:]]


def test_unknown_and_misplaced_options_are_refused(spark, puts) -> None:
    root, _ = puts
    with pytest.raises(Exception, match=r"unknown option 'startingoffset'; known options: path, "
                                        r"kind, columns"):
        offsets(spark, root, startingOffset="earliest")
    with pytest.raises(Exception, match="option maxRecordsPerTrigger is for stream queries only"):
        offsets(spark, root, maxRecordsPerTrigger="10")


def test_a_read_planned_on_the_driver_gives_the_sources_rows(spark, puts) -> None:
    """``planned_on_driver`` (the partitions planned in the driver, read through mapInArrow): the
    rows the puts put, bounded by the options, of both kinds, with the columns asked for."""
    from rocketlake.transforms.rocketmq_source import planned_on_driver

    root, out = puts
    at = [p.commitlog_offset for p in out]
    bounds = {"startingOffsets": json.dumps({"commitlogOffset": at[10]}),
              "endingOffsets": json.dumps({"commitlogOffset": at[50]}), "topics": "orders"}
    df = planned_on_driver(spark, str(root), {**bounds, "columns": "commitlog_offset,topic,body"})
    assert df.columns == ["commitlog_offset", "topic", "body"]
    rows = sorted(df.collect())
    want = [(p.commitlog_offset, "orders", bytes([i]) * 1500) for i, p in enumerate(out)
            if 10 <= i < 50 and p.topic == "orders"]
    assert [tuple(r) for r in rows] == want
    cq = planned_on_driver(spark, str(root), {"kind": "consumequeue", "topics": "payments"})
    assert sorted(r["commitlog_offset"] for r in cq.collect()) == [
        p.commitlog_offset for p in out if p.topic == "payments"]
    assert planned_on_driver(spark, str(root), {
        "startingOffsets": json.dumps({"commitlogOffset": at[89] + 1})}).count() == 0
