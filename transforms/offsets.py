"""Offsets tables from ConsumeQueue units and committed consumer offsets.

The chain ``jobs.publish_offsets`` runs, on the driver (the rows are O(queues + committed
offsets))::

    consumerOffset.json ---------- committed_rows --+
    store queues ---- request_rows(queues, committed) --> [read_queue_units] --> units
    units ------------------------ queue_rows --------------------------------> QUEUE_OFFSETS
    committed + queue rows + units -- consumer_rows --------------------------> CONSUMER_OFFSETS
    both --------------------------------- history_table ---------------------> OFFSETS_HISTORY

Each rule is written once, as a function of Arrow tables (no Spark job: publish-offsets' only
Spark work is its one Delta commit). The DataFrame functions (``committed_offsets``,
``queue_requests``, ``queue_offsets``, ``consumer_offsets``, ``history_rows``) apply the same
functions to DataFrames: they collect their inputs to the driver and return a DataFrame of the
result.

Offsets as in RocketMQ (docs/FORMAT.md §6): ``min_offset`` = the first unit whose message is still in the
CommitLog, ``max_offset`` one past the last unit written. Consumer rows and their lag are
``store.consumer_lag``'s (``mqadmin consumerProgress``), and the last consumed message is the one
at ``consumer_offset - 1``.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

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


def arrow_schema(schema: T.StructType) -> pa.Schema:
    """``schema`` as Arrow (timestamps in UTC, as the session keeps them)."""
    return to_arrow_schema(schema, timezone="UTC")


def _table(rows: list[tuple], schema: T.StructType) -> pa.Table:
    """``rows`` (tuples in ``schema``'s order; timestamps as datetimes or epoch microseconds) as
    an Arrow table of ``schema``."""
    arrow = arrow_schema(schema)
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(arrow)
    return pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, arrow, strict=True)],
                                schema=arrow)


def _micros(ms: int | None) -> int | None:
    return None if ms is None else ms * 1000


def conform(df: DataFrame, schema: T.StructType) -> DataFrame:
    """``df``'s columns named in ``schema``, in its order, cast to its types (missing ones null)."""
    return df.select([(F.col(f.name) if f.name in df.columns else F.lit(None))
                      .cast(f.dataType).alias(f.name) for f in schema.fields])


def _committed_table(rows: Iterable) -> dict[tuple[str, str], dict[int, int]]:
    """:data:`COMMITTED_SCHEMA` rows -> the offset table ({(topic, group): {queue_id: offset}})."""
    table: dict[tuple[str, str], dict[int, int]] = {}
    for c in rows:
        table.setdefault((c["topic"], c["consumer_group"]), {})[c["queue_id"]] = c["consumer_offset"]
    return table


# --- the rules, on Arrow tables -------------------------------------------------------------------
def committed_rows(table: Mapping[tuple[str, str], Mapping[int, int]]) -> pa.Table:
    """The offset table of ``store.config_files.read_consumer_offsets`` ({(topic, group):
    {queue_id: offset}}) as rows of :data:`COMMITTED_SCHEMA`."""
    return _table([(group, topic, int(q), int(o)) for (topic, group), queues in sorted(table.items())
                   for q, o in sorted(queues.items())], COMMITTED_SCHEMA)


def request_rows(queues: pa.Table, committed: pa.Table) -> pa.Table:
    """One row (:data:`REQUESTS_SCHEMA`) per queue of ``queues`` (:data:`QUEUES_SCHEMA`) with the
    queue offsets whose units the consumer rows need: each group's last consumed offset
    (``consumer_offset - 1``, when positive) in ``committed`` (:data:`COMMITTED_SCHEMA`), sorted,
    distinct."""
    wanted: dict[tuple[str, int], set[int]] = {}
    for c in committed.to_pylist():
        if c["consumer_offset"] > 0:
            wanted.setdefault((c["topic"], c["queue_id"]), set()).add(c["consumer_offset"] - 1)
    keys = dict.fromkeys(zip(queues.column("topic").to_pylist(),
                             queues.column("queue_id").to_pylist(), strict=True))
    return _table([(t, q, sorted(wanted.get((t, q), ()))) for t, q in keys], REQUESTS_SCHEMA)


def _live(size: int, commitlog_offset: int, commitlog_min_offset: int) -> bool:
    """A unit whose message is in the CommitLog: a real unit (not pre-blank) at or above its min."""
    return size > 0 and size != CQ_BLANK_UNIT_SIZE and commitlog_offset >= commitlog_min_offset


def queue_rows(units: pa.Table, commitlog_min_offset: int, store: str,
               snapshot_ts: datetime) -> pa.Table:
    """Units (``transforms.offset_units.UNIT_SCHEMA``) -> one row per queue
    (:data:`QUEUE_OFFSETS_SCHEMA`), by topic and queue id.

    ``units`` may be every unit of the queues or any subset holding each queue's first live unit
    and its last written unit (what ``read_queue_units`` returns); the result is the same.
    ``last_store_timestamp`` is the checked store time of the last unit's message (null when it is
    gone or failed the CommitLog check).
    """
    names = ("topic", "queue_id", "queue_offset", "commitlog_offset", "size", "store_timestamp")
    by_queue: dict[tuple[str, int], list[tuple]] = {}
    for t, q, *unit in zip(*(units.column(n).to_pylist() for n in names), strict=True):
        by_queue.setdefault((t, q), []).append(tuple(unit))
    rows = []
    for (topic, queue_id), found in sorted(by_queue.items()):
        last_offset, last_cl, last_size, last_ts = max(found, key=lambda u: u[0])
        live = [u for u in found if _live(u[2], u[1], commitlog_min_offset)]
        first = min(live, key=lambda u: u[0]) if live else None
        max_offset = last_offset + 1
        min_offset = first[0] if first else max_offset
        rows.append((store, topic, queue_id, min_offset, max_offset, first[1] if first else None,
                     last_cl if _live(last_size, last_cl, commitlog_min_offset) else None,
                     _micros(last_ts), max_offset - min_offset, snapshot_ts))
    return _table(rows, QUEUE_OFFSETS_SCHEMA)


def consumer_rows(committed: Mapping[tuple[str, str], Mapping[int, int]], queues: pa.Table,
                  units: pa.Table, store: str, snapshot_ts: datetime) -> pa.Table:
    """The offset table ``committed`` ({(topic, group): {queue_id: offset}}) + queue rows
    (:data:`QUEUE_OFFSETS_SCHEMA`) + units -> one row per (group, topic, queue)
    (:data:`CONSUMER_OFFSETS_SCHEMA`), as ``mqadmin consumerProgress`` reports them.

    Rows, ``max_offset`` and ``lag`` are ``store.consumer_lag``'s (the one lag rule).
    ``last_consumed_store_timestamp`` is the checked store time of the unit at
    ``consumer_offset - 1`` in ``units`` (null when there is none, as for ``consumer_offset`` 0).
    """
    maxes = dict(zip(zip(queues.column("topic").to_pylist(), queues.column("queue_id").to_pylist(),
                         strict=True), queues.column("max_offset").to_pylist(), strict=True))
    names = ("topic", "queue_id", "queue_offset", "store_timestamp")
    consumed = {(t, q, o + 1): ts for t, q, o, ts in
                zip(*(units.column(n).to_pylist() for n in names), strict=True)}
    return _table([(store, r.group, r.topic, r.queue_id, r.consumer_offset, r.max_offset, r.lag,
                    _micros(consumed.get((r.topic, r.queue_id, r.consumer_offset))), snapshot_ts)
                   for r in consumer_lag(maxes, committed)], CONSUMER_OFFSETS_SCHEMA)


def history_table(queues: pa.Table, consumers: pa.Table) -> pa.Table:
    """Queue and consumer rows of one snapshot as :data:`HISTORY_SCHEMA` rows (``kind`` tells
    which; ``snapshot_date`` is the UTC date of ``snapshot_ts``, the partition column)."""
    arrow = arrow_schema(HISTORY_SCHEMA)
    def tag(rows: pa.Table, kind: str) -> pa.Table:
        made = {"kind": pa.array([kind] * rows.num_rows, pa.string()),
                "snapshot_date": rows.column("snapshot_ts").cast(pa.date32())}
        return pa.Table.from_arrays(
            [made[f.name] if f.name in made else rows.column(f.name).cast(f.type)
             if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type) for f in arrow],
            schema=arrow)
    return pa.concat_tables([tag(queues, "queue"), tag(consumers, "consumer")])


# --- the same rules on DataFrames -----------------------------------------------------------------
def committed_offsets(spark: SparkSession, table: Mapping[tuple[str, str], Mapping[int, int]]
                      ) -> DataFrame:
    """:func:`committed_rows` as a DataFrame."""
    return spark.createDataFrame(committed_rows(table), COMMITTED_SCHEMA)


def queue_requests(queues: DataFrame, committed: DataFrame) -> DataFrame:
    """:func:`request_rows` of two DataFrames."""
    return queues.sparkSession.createDataFrame(
        request_rows(queues.toArrow(), committed.toArrow()), REQUESTS_SCHEMA)


def queue_offsets(units: DataFrame, commitlog_min_offset: int, store: str,
                  snapshot_ts: datetime) -> DataFrame:
    """:func:`queue_rows` of a DataFrame of units."""
    return units.sparkSession.createDataFrame(
        queue_rows(units.toArrow(), commitlog_min_offset, store, snapshot_ts), QUEUE_OFFSETS_SCHEMA)


def consumer_offsets(committed: DataFrame, queue_offsets: DataFrame, units: DataFrame,
                     store: str, snapshot_ts: datetime) -> DataFrame:
    """:func:`consumer_rows` of DataFrames (``committed``: :data:`COMMITTED_SCHEMA` rows)."""
    return committed.sparkSession.createDataFrame(consumer_rows(
        _committed_table(committed.toArrow().to_pylist()), queue_offsets.toArrow(),
        units.toArrow(), store, snapshot_ts), CONSUMER_OFFSETS_SCHEMA)


def history_rows(queues: DataFrame, consumers: DataFrame) -> DataFrame:
    """:func:`history_table` of two DataFrames."""
    return queues.sparkSession.createDataFrame(
        history_table(queues.toArrow(), consumers.toArrow()), HISTORY_SCHEMA)


def same_rows(a: pa.Table, b: pa.Table) -> bool:
    """True when two snapshots' rows (:data:`HISTORY_SCHEMA`, as Arrow tables) are the same but
    for their time (``snapshot_ts``, ``snapshot_date``), in any order."""
    cols = [f.name for f in HISTORY_SCHEMA.fields if f.name not in ("snapshot_ts", "snapshot_date")]
    def ordered(t: pa.Table) -> pa.Table:
        return t.select(cols).sort_by([(k, "ascending") for k in HISTORY_KEYS])
    x, y = ordered(a), ordered(b)
    return x.num_rows == y.num_rows and x.cast(y.schema).equals(y)
