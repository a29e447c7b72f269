"""Offsets tables from ConsumeQueue units and committed consumer offsets: pure DataFrame functions.

The chain ``jobs.publish_offsets`` runs::

    consumerOffset.json ---------- committed_offsets --+
    store queues ---- queue_requests(queues, committed) --> [read_queue_units] --> units
    units ------------------------ queue_offsets ------------------------------> QUEUE_OFFSETS
    committed + queue offsets + units -- consumer_offsets ---------------------> CONSUMER_OFFSETS
    both --------------------------------- history_rows -----------------------> OFFSETS_HISTORY

Offsets as in RocketMQ (docs/FORMAT.md §6): ``min_offset`` = the first unit whose message is still in the
CommitLog, ``max_offset`` one past the last unit written. Consumer rows and their lag are
``store.consumer_lag``'s (``mqadmin consumerProgress``), and the last consumed message is the one
at ``consumer_offset - 1``.
"""
from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rocketlake.store.codec import CQ_BLANK_UNIT_SIZE
from rocketlake.store.consumer_lag import consumer_lag

_STR, _INT, _LONG, _TS = T.StringType(), T.IntegerType(), T.LongType(), T.TimestampType()

QUEUES_SCHEMA = T.StructType([
    T.StructField("topic", _STR, False),
    T.StructField("queue_id", _INT, False),
])
COMMITTED_SCHEMA = T.StructType([
    T.StructField("consumer_group", _STR, False),
    T.StructField("topic", _STR, False),
    T.StructField("queue_id", _INT, False),
    T.StructField("consumer_offset", _LONG, False),
])
_LAG_SCHEMA = T.StructType([*COMMITTED_SCHEMA.fields, T.StructField("max_offset", _LONG, False),
                            T.StructField("lag", _LONG, False)])
REQUESTS_SCHEMA = T.StructType([
    T.StructField("topic", _STR, False),
    T.StructField("queue_id", _INT, False),
    T.StructField("wanted", T.ArrayType(_LONG, False), False),
])
QUEUE_OFFSETS_SCHEMA = T.StructType([
    T.StructField("store", _STR, False),
    T.StructField("topic", _STR, False),
    T.StructField("queue_id", _INT, False),
    T.StructField("min_offset", _LONG, False),
    T.StructField("max_offset", _LONG, False),
    T.StructField("min_commitlog_offset", _LONG),
    T.StructField("max_commitlog_offset", _LONG),
    T.StructField("last_store_timestamp", _TS),
    T.StructField("message_count", _LONG, False),
    T.StructField("snapshot_ts", _TS, False),
])
CONSUMER_OFFSETS_SCHEMA = T.StructType([
    T.StructField("store", _STR, False),
    T.StructField("consumer_group", _STR, False),
    T.StructField("topic", _STR, False),
    T.StructField("queue_id", _INT, False),
    T.StructField("consumer_offset", _LONG, False),
    T.StructField("max_offset", _LONG, False),
    T.StructField("lag", _LONG, False),
    T.StructField("last_consumed_store_timestamp", _TS),
    T.StructField("snapshot_ts", _TS, False),
])
#: ``kind`` is "queue" or "consumer"; the columns only the other kind has are null.
HISTORY_SCHEMA = T.StructType([
    T.StructField("snapshot_date", T.DateType(), False),
    T.StructField("snapshot_ts", _TS, False),
    T.StructField("store", _STR, False),
    T.StructField("kind", _STR, False),
    T.StructField("consumer_group", _STR),
    T.StructField("topic", _STR, False),
    T.StructField("queue_id", _INT, False),
    T.StructField("min_offset", _LONG),
    T.StructField("max_offset", _LONG, False),
    T.StructField("min_commitlog_offset", _LONG),
    T.StructField("max_commitlog_offset", _LONG),
    T.StructField("last_store_timestamp", _TS),
    T.StructField("message_count", _LONG),
    T.StructField("consumer_offset", _LONG),
    T.StructField("lag", _LONG),
    T.StructField("last_consumed_store_timestamp", _TS),
])

#: the columns that tell a snapshot's rows apart
HISTORY_KEYS = ("kind", "store", "consumer_group", "topic", "queue_id")


def conform(df: DataFrame, schema: T.StructType) -> DataFrame:
    """``df``'s columns named in ``schema``, in its order, cast to its types (missing ones null)."""
    return df.select([(F.col(f.name) if f.name in df.columns else F.lit(None))
                      .cast(f.dataType).alias(f.name) for f in schema.fields])


def committed_offsets(spark: SparkSession, table: Mapping[tuple[str, str], Mapping[int, int]]
                      ) -> DataFrame:
    """The offset table of ``store.config_files.read_consumer_offsets`` ({(topic, group):
    {queue_id: offset}}) as rows of :data:`COMMITTED_SCHEMA`."""
    rows = [(group, topic, int(q), int(o)) for (topic, group), queues in sorted(table.items())
            for q, o in sorted(queues.items())]
    return spark.createDataFrame(rows, COMMITTED_SCHEMA)


def queue_requests(queues: DataFrame, committed: DataFrame) -> DataFrame:
    """One row per queue of ``queues`` with the queue offsets whose units the consumer rows need:
    each group's last consumed offset (``consumer_offset - 1``, when positive), sorted, distinct."""
    last = committed.where(F.col("consumer_offset") > 0).select(
        "topic", "queue_id", (F.col("consumer_offset") - 1).alias("offset"))
    return conform(queues.join(last, ["topic", "queue_id"], "left")
                   .groupBy("topic", "queue_id")
                   .agg(F.array_sort(F.collect_set("offset")).alias("wanted")), REQUESTS_SCHEMA)


def _live(commitlog_min_offset: int) -> Column:
    """A unit whose message is in the CommitLog: a real unit (not pre-blank) at or above its min."""
    return ((F.col("size") > 0) & (F.col("size") != CQ_BLANK_UNIT_SIZE)
            & (F.col("commitlog_offset") >= commitlog_min_offset))


def queue_offsets(units: DataFrame, commitlog_min_offset: int, store: str,
                  snapshot_ts: datetime) -> DataFrame:
    """Units (``transforms.offset_units.UNIT_SCHEMA``) -> one row per queue
    (:data:`QUEUE_OFFSETS_SCHEMA`).

    ``units`` may be every unit of the queues or any subset holding each queue's first live unit
    and its last written unit (what ``read_queue_units`` returns); the result is the same.
    ``last_store_timestamp`` is the checked store time of the last unit's message (null when it is
    gone or failed the CommitLog check).
    """
    live = _live(commitlog_min_offset)
    last = F.max_by(F.struct(F.when(live, F.col("commitlog_offset")).alias("cl"),
                             F.col("store_timestamp").alias("ts")), F.col("queue_offset"))
    agg = units.groupBy("topic", "queue_id").agg(
        (F.max("queue_offset") + 1).alias("max_offset"),
        F.min(F.when(live, F.col("queue_offset"))).alias("min_live"),
        F.min_by("commitlog_offset", F.when(live, F.col("queue_offset"))).alias("min_cl"),
        last.alias("last"))
    out = agg.select(
        F.lit(store).alias("store"), "topic", "queue_id",
        F.coalesce("min_live", "max_offset").alias("min_offset"),
        "max_offset",
        F.when(F.col("min_live").isNotNull(), F.col("min_cl")).alias("min_commitlog_offset"),
        F.col("last.cl").alias("max_commitlog_offset"),
        F.timestamp_millis(F.col("last.ts")).alias("last_store_timestamp"),
        (F.col("max_offset") - F.coalesce("min_live", "max_offset")).alias("message_count"),
        F.lit(snapshot_ts).alias("snapshot_ts"))
    return conform(out, QUEUE_OFFSETS_SCHEMA)


def consumer_offsets(committed: DataFrame, queue_offsets: DataFrame, units: DataFrame,
                     store: str, snapshot_ts: datetime) -> DataFrame:
    """Committed offsets + queue offsets + units -> one row per (group, topic, queue)
    (:data:`CONSUMER_OFFSETS_SCHEMA`), as ``mqadmin consumerProgress`` reports them.

    Rows, ``max_offset`` and ``lag`` are ``store.consumer_lag``'s (the one lag rule), applied on
    the driver to the committed offsets and the queues' max offsets (both one row per queue:
    collected). ``last_consumed_store_timestamp`` is the checked store time of the unit at
    ``consumer_offset - 1`` in ``units`` (null when there is none, as for ``consumer_offset`` 0).
    """
    table: dict[tuple[str, str], dict[int, int]] = {}
    for c in committed.collect():
        table.setdefault((c.topic, c.consumer_group), {})[c.queue_id] = c.consumer_offset
    maxes = {(q.topic, q.queue_id): q.max_offset
             for q in queue_offsets.select("topic", "queue_id", "max_offset").collect()}
    rows = committed.sparkSession.createDataFrame(
        [(r.group, r.topic, r.queue_id, r.consumer_offset, r.max_offset, r.lag)
         for r in consumer_lag(maxes, table)], _LAG_SCHEMA)
    keys = ["consumer_group", "topic", "queue_id"]
    consumed = units.select("topic", "queue_id",
                            (F.col("queue_offset") + 1).alias("consumer_offset"),
                            F.timestamp_millis("store_timestamp").alias("last_consumed"))
    out = (rows.join(consumed, ["topic", "queue_id", "consumer_offset"], "left")
           .select(F.lit(store).alias("store"), *keys, "consumer_offset", "max_offset", "lag",
                   F.col("last_consumed").alias("last_consumed_store_timestamp"),
                   F.lit(snapshot_ts).alias("snapshot_ts")))
    return conform(out, CONSUMER_OFFSETS_SCHEMA)


def history_rows(queue_rows: DataFrame, consumer_rows: DataFrame) -> DataFrame:
    """Queue and consumer rows of one snapshot as :data:`HISTORY_SCHEMA` rows (``kind`` tells
    which; ``snapshot_date`` is the UTC date of ``snapshot_ts``, the partition column)."""
    def tag(df: DataFrame, kind: str) -> DataFrame:
        return conform(df.withColumn("kind", F.lit(kind))
                       .withColumn("snapshot_date", F.to_date("snapshot_ts")), HISTORY_SCHEMA)
    return tag(queue_rows, "queue").unionByName(tag(consumer_rows, "consumer"))


def same_rows(a: pa.Table, b: pa.Table) -> bool:
    """True when two snapshots' rows (:data:`HISTORY_SCHEMA`, as Arrow tables) are the same but
    for their time (``snapshot_ts``, ``snapshot_date``), in any order."""
    cols = [f.name for f in HISTORY_SCHEMA.fields if f.name not in ("snapshot_ts", "snapshot_date")]
    def ordered(t: pa.Table) -> pa.Table:
        return t.select(cols).sort_by([(k, "ascending") for k in HISTORY_KEYS])
    x, y = ordered(a), ordered(b)
    return x.num_rows == y.num_rows and x.cast(y.schema).equals(y)
