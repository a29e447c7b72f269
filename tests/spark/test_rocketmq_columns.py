"""The ``rocketmq`` source's derived columns (TIMESTAMPs, tags, the real topic of delay copies,
transaction state), TIMESTAMP filter push-down, and ``consumable=true`` against what RocketMQ
4.9.8's own store serves (the peer in tests/java/peer)."""
from __future__ import annotations

import base64
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import rocketmq_peer
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql.datasource import CaseInsensitiveDict, GreaterThan, LessThan
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType, TimestampType

from rocketlake.store import (
    TRANSACTION_COMMIT,
    TRANSACTION_PREPARED,
    TRANSACTION_ROLLBACK,
    Message,
    MessageStore,
)
from rocketlake.transforms import RocketMQDataSource

from .helpers import SMALL

#: 2025-11-22 08:26:40 UTC (1_763_800_000 s since the epoch)
T0 = 1_763_800_000_000
NEW_COLUMNS = ("store_time", "born_time", "tags", "real_topic", "real_queue_id", "delay_level",
               "transaction_state")


def read(spark, root: Path, **options):
    return spark.read.format("rocketmq").options(**{k: str(v) for k, v in options.items()}).load(str(root))


def hand_built_store(root: Path) -> None:
    """One record of each case, stored at T0 + i ms (born 1 s earlier)."""
    msgs = [
        Message("orders", b"plain", 1, tags="TagA"),
        Message("orders", b"no tags", 0),
        Message("orders", b"delayed", 2, tags="TagD", delay_level=3),  # SCHEDULE_TOPIC_XXXX, queue 2
        Message("rmq_sys_wheel_timer", b"timed", 0, tags="TagT",  # 5.x's timer copy
                properties={"REAL_TOPIC": "payments", "REAL_QID": "3", "TIMER_OUT_MS": str(T0 + 60_000)}),
        Message("RMQ_SYS_TRANS_HALF_TOPIC", b"half", 0,  # REAL_TOPIC, but not a delay copy
                properties={"REAL_TOPIC": "orders", "REAL_QID": "1", "TRAN_MSG": "true"}),
        Message("orders", b"prepared", 1, sys_flag=TRANSACTION_PREPARED),
        Message("orders", b"commit", 1, sys_flag=TRANSACTION_COMMIT),
        Message("orders", b"rollback", 1, sys_flag=TRANSACTION_ROLLBACK),
    ]
    for i, m in enumerate(msgs):
        m.store_timestamp, m.born_timestamp = T0 + i, T0 + i - 1000
    with MessageStore(root, **SMALL) as s:
        s.put_batch(msgs)


def at(ms: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)


def test_new_columns_of_each_kind_of_record(spark, tmp_path: Path) -> None:
    root = tmp_path / "store"
    hand_built_store(root)
    got = read(spark, root, columns="body," + ",".join(NEW_COLUMNS)).orderBy("store_time")
    schema = StructType([StructField("body", StringType()), StructField("store_time", TimestampType()),
                         StructField("born_time", TimestampType()), StructField("tags", StringType()),
                         StructField("real_topic", StringType()),
                         StructField("real_queue_id", IntegerType()),
                         StructField("delay_level", IntegerType()),
                         StructField("transaction_state", StringType(), False)])
    rows = [("plain", "TagA", None, None, None, "NOT_TYPE"),
            ("no tags", None, None, None, None, "NOT_TYPE"),
            ("delayed", "TagD", "orders", 2, 3, "NOT_TYPE"),
            ("timed", "TagT", "payments", 3, None, "NOT_TYPE"),
            ("half", None, None, None, None, "NOT_TYPE"),
            ("prepared", None, None, None, None, "PREPARED"),
            ("commit", None, None, None, None, "COMMIT"),
            ("rollback", None, None, None, None, "ROLLBACK")]
    expected = spark.createDataFrame(
        [(body, at(T0 + i), at(T0 + i - 1000), *rest) for i, (body, *rest) in enumerate(rows)], schema)
    assert_df_equality(got.withColumn("body", F.col("body").cast("string")), expected,
                       ignore_nullable=True)
    # the TIMESTAMP is the epoch ms, exactly, rendered in UTC
    first = read(spark, root).select(F.date_format("store_time", "yyyy-MM-dd HH:mm:ss.SSS").alias("t"),
                                     F.unix_millis("store_time").alias("ms"), "store_timestamp").first()
    assert (first.t, first.ms, first.store_timestamp) == ("2025-11-22 08:26:40.000", T0, T0)


def test_store_time_filters_are_pushed_down_exactly(spark, tmp_path: Path) -> None:
    """Spark hands a TIMESTAMP filter an aware datetime: the reader takes it (the filter is not
    given back) and keeps exactly the records within it, to the microsecond."""
    root = tmp_path / "store"
    hand_built_store(root)
    ds = RocketMQDataSource(CaseInsensitiveDict({"path": str(root), "columns": "body"}))
    reader = ds.reader(ds.schema())
    filters = [GreaterThan(("store_time",), at(T0 + 1)),  # after .001
               LessThan(("store_time",), at(T0 + 5) - timedelta(microseconds=1))]  # before .005
    assert list(reader.pushFilters(filters)) == []
    bodies = [b.as_py() for p in reader.partitions() for batch in reader.read(p) for b in batch["body"]]
    assert bodies == [b"delayed", b"timed", b"half"]  # stored at T0 + 2, 3, 4 ms

    df = read(spark, root, columns="body,store_time,store_timestamp")
    got = df.where("store_time >= '2025-11-22 08:26:40.0045' and store_time <= '2025-11-22 08:26:40.006'")
    assert sorted(bytes(r.body) for r in got.collect()) == [b"commit", b"prepared"]  # T0 + 5, 6 ms
    plan = got._jdf.queryExecution().executedPlan().toString()  # Spark applies none of them again
    assert not [line for line in plan.splitlines() if "Filter" in line and "=" in line], plan
    # the epoch-ms column compared with a time string is Spark's CAST_INVALID_INPUT, as documented
    with pytest.raises(Exception, match="CAST_INVALID_INPUT"):
        df.where("store_timestamp >= '2025-11-22 08:26:40'").count()


# --- consumable=true --------------------------------------------------------------------------------
#: topics of RocketMQ's own copies and bookkeeping (TopicValidator): consumers are not served their
#: records as such; 5.x's internal topics all start with rmq_sys_
INTERNAL_TOPICS = ("SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC")
PEER_SIZES = rocketmq_peer.size_args(*SMALL.values())
COMPARED = StructType([StructField("commitlog_offset", LongType()), StructField("topic", StringType()),
                       StructField("queue_id", IntegerType()), StructField("queue_offset", LongType()),
                       StructField("sys_flag", IntegerType()), StructField("tags", StringType()),
                       StructField("body", StringType())])


def broker_like_store(root: Path) -> None:
    """What a 4.9 broker writes for delays and transactions, and the store-level transaction
    flags: plain messages; delayed ones (levels 16-18: not due while the peer serves) as
    SCHEDULE_TOPIC_XXXX copies, and one already delivered (re-put under its real topic); a
    transaction's half message, op record and COMMIT record; PREPARED, COMMIT and ROLLBACK records
    of a topic; a 5.x timer copy; trace data (a system topic consumers are served)."""
    now = int(time.time() * 1000)
    msgs = [Message(("orders", "payments")[i % 2], f"m{i}".encode(), i % 3, tags=f"T{i % 4}")
            for i in range(40)]
    msgs += [Message("orders", f"later{lv}".encode(), 1, tags="TagD", delay_level=lv)
             for lv in (16, 17, 18, 25)]
    msgs.append(Message("orders", b"delivered", 1, tags="TagD",
                        properties={"REAL_TOPIC": "orders", "REAL_QID": "1"}))  # DELAY cleared
    msgs.append(Message("RMQ_SYS_TRANS_HALF_TOPIC", b"tx", 0, tags="TagX",
                        properties={"REAL_TOPIC": "payments", "REAL_QID": "2", "TRAN_MSG": "true"}))
    msgs.append(Message("RMQ_SYS_TRANS_OP_HALF_TOPIC", b"0", 0, tags="d"))
    msgs.append(Message("payments", b"tx", 2, tags="TagX", sys_flag=TRANSACTION_COMMIT))
    msgs += [Message("audit-log", f"store-level {f}".encode(), 0, sys_flag=f)
             for f in (TRANSACTION_PREPARED, TRANSACTION_COMMIT, TRANSACTION_ROLLBACK, TRANSACTION_PREPARED)]
    msgs.append(Message("rmq_sys_wheel_timer", b"timed", 0, tags="TagT", properties={
        "REAL_TOPIC": "orders", "REAL_QID": "0", "TIMER_OUT_MS": str(now + 3_600_000)}))
    msgs.append(Message("RMQ_SYS_TRACE_TOPIC", b"trace", 0))
    with MessageStore(root, **SMALL) as s:
        for k in range(0, len(msgs), 7):  # several batches
            s.put_batch(msgs[k:k + 7])


@pytest.mark.skipif(not rocketmq_peer.available(), reason="needs a JDK (java) and Maven (mvn)")
def test_consumable_is_what_rocketmq_serves(spark, tmp_path: Path) -> None:
    """RocketMQ 4.9.8 dispatches our CommitLog itself (ConsumeQueues and checkpoint removed)
    and serves every queue; the consumable view is what it serves of every topic but its
    internal ones."""
    src = tmp_path / "ours"
    broker_like_store(src)
    consumable = read(spark, src, consumable="true", columns=",".join(COMPARED.fieldNames()))

    root = tmp_path / "peer"
    shutil.copytree(src, root)
    shutil.rmtree(root / "consumequeue")  # no index: no message has keys
    (root / "checkpoint").unlink()
    out = tmp_path / "served.jsonl"
    rocketmq_peer.run("serve", root, "--out", out, *PEER_SIZES, timeout=180)
    lines = rocketmq_peer.read_served(out)
    assert [x for x in lines if x["kind"] == "gap"] == []
    served = [m for m in lines if m["kind"] == "message"]
    assert {m["topic"] for m in served} >= {*INTERNAL_TOPICS, "rmq_sys_wheel_timer", "RMQ_SYS_TRACE_TOPIC"}
    expected = spark.createDataFrame(
        [(m["commitlog_offset"], m["topic"], m["queue_id"], m["queue_offset"], m["sys_flag"], m["tags"],
          base64.b64decode(m["body_b64"]).decode()) for m in served
         if m["topic"] not in INTERNAL_TOPICS and not m["topic"].startswith("rmq_sys_")], COMPARED)
    assert expected.count() == 40 + 1 + 1 + 1 + 1  # plain, delivered, tx commit, store-level COMMIT, trace
    assert_df_equality(consumable.withColumn("body", F.col("body").cast("string")), expected,
                       ignore_row_order=True, ignore_nullable=True)
