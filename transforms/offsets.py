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
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from rocketlake.store.consume_queue import valid_units
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

#: the columns of a consumer row that ``store.consumer_lag`` gives
_LAG_SCHEMA = T.StructType([f for f in CONSUMER_OFFSETS_SCHEMA.fields if f.name in (
    "consumer_group", "topic", "queue_id", "consumer_offset", "max_offset", "lag")])

#: the columns that tell a snapshot's rows apart
HISTORY_KEYS = ("kind", "store", "consumer_group", "topic", "queue_id")


def arrow_schema(schema: T.StructType) -> pa.Schema:
    """``schema`` as Arrow (timestamps in UTC, as the session keeps them)."""
    return to_arrow_schema(schema, timezone="UTC")


def _table(rows: list[tuple], schema: T.StructType) -> pa.Table:
    """``rows`` (tuples in ``schema``'s order) as an Arrow table of ``schema``."""
    arrow = arrow_schema(schema)
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(arrow)
    return pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, arrow, strict=True)],
                                schema=arrow)


def _columns(schema: T.StructType, n: int, **columns: Any) -> pa.Table:
    """An Arrow table of ``schema`` and ``n`` rows from its columns by name (Arrow or numpy
    arrays, cast to the column's type; any other value is repeated ``n`` times)."""
    def column(value: Any, type_: pa.DataType) -> pa.Array | pa.ChunkedArray:
        if isinstance(value, pa.Array | pa.ChunkedArray):
            return value.cast(type_)
        if isinstance(value, np.ndarray):
            return pa.array(value).cast(type_)
        return pa.repeat(pa.scalar(value, type_), n)
    arrow = arrow_schema(schema)
    return pa.Table.from_arrays([column(columns[f.name], f.type) for f in arrow], schema=arrow)


def _micros(ms: pa.ChunkedArray) -> pa.ChunkedArray:
    """Epoch milliseconds (nulls kept) as epoch microseconds, the unit of the timestamp columns."""
    return pc.multiply(ms, 1000)


def conform(df: DataFrame, schema: T.StructType) -> DataFrame:
    """``df``'s columns named in ``schema``, in its order, cast to its types (missing ones null)."""
    return df.select([(F.col(f.name) if f.name in df.columns else F.lit(None))
                      .cast(f.dataType).alias(f.name) for f in schema.fields])


def conform_arrow(rows: pa.Table, schema: T.StructType) -> pa.Table:
    """:func:`conform` for an Arrow table: an Arrow table of ``schema`` (:func:`arrow_schema`)."""
    arrow = arrow_schema(schema)
    return pa.Table.from_arrays(
        [rows.column(f.name).cast(f.type) if f.name in rows.column_names
         else pa.nulls(rows.num_rows, f.type) for f in arrow], schema=arrow)


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
    """One row (:data:`REQUESTS_SCHEMA`) per queue of ``queues`` (:data:`QUEUES_SCHEMA`; a queue
    listed twice counts once, at its first place) with the queue offsets whose units the consumer
    rows need: each group's last consumed offset (``consumer_offset - 1``, when positive) in
    ``committed`` (:data:`COMMITTED_SCHEMA`), sorted, distinct."""
    keys = ["topic", "queue_id"]
    consumed = committed.filter(pc.greater(committed["consumer_offset"], 0))
    last = pa.table({"topic": consumed["topic"], "queue_id": consumed["queue_id"],
                     "wanted": pc.subtract(consumed["consumer_offset"], 1)})
    # single-threaded grouping keeps the order of the rows: each list sorted
    wanted = (last.sort_by([(k, "ascending") for k in (*keys, "wanted")])
              .group_by(keys, use_threads=False).aggregate([("wanted", "distinct")]))
    places = pa.table({"topic": queues["topic"], "queue_id": queues["queue_id"],
                       "place": np.arange(queues.num_rows)})
    places = places.group_by(keys, use_threads=False).aggregate([("place", "min")])
    lists = wanted["wanted_distinct"]  # a join carries no list column: their row numbers
    rows = places.join(wanted.select(keys).append_column("list", pa.array(np.arange(len(lists)))),
                       keys, join_type="left outer").sort_by("place_min")
    type_ = arrow_schema(REQUESTS_SCHEMA).field("wanted").type
    return _columns(REQUESTS_SCHEMA, rows.num_rows, topic=rows["topic"], queue_id=rows["queue_id"],
                    wanted=pc.fill_null(lists.take(rows["list"]).cast(type_), pa.scalar([], type_)))


def queue_rows(units: pa.Table, commitlog_min_offset: int, store: str,
               snapshot_ts: datetime) -> pa.Table:
    """Units (``transforms.offset_units.UNIT_SCHEMA``) -> one row per queue
    (:data:`QUEUE_OFFSETS_SCHEMA`), by topic and queue id.

    ``units`` may be every unit of the queues or any subset holding each queue's first live unit
    (its message in the CommitLog: ``store.consume_queue.valid_units``) and its last written unit
    (what ``read_queue_units`` returns); the result is the same. ``last_store_timestamp`` is the
    checked store time of the last unit's message (null when it is gone or failed the CommitLog
    check).
    """
    units = units.sort_by([(k, "ascending") for k in ("topic", "queue_id", "queue_offset")])
    topic, queue_id, n = units["topic"], units["queue_id"], units.num_rows
    first = np.ones(n, dtype=np.bool_)  # a queue's first unit
    if n:
        first[1:] = pc.or_(pc.not_equal(topic[1:], topic[:-1]),
                           pc.not_equal(queue_id[1:], queue_id[:-1])).to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(first)
    ends = np.append(starts[1:], n)[:starts.size] - 1  # a queue's last unit, the highest offset
    qo, cl = units["queue_offset"].to_numpy(), units["commitlog_offset"].to_numpy()
    live = valid_units(cl, units["size"].to_numpy(), commitlog_min_offset)
    live_rows = np.flatnonzero(live)
    queue, at = np.unique(np.cumsum(first)[live_rows] - 1, return_index=True)
    has_live = np.zeros(starts.size, dtype=np.bool_)
    has_live[queue] = True
    first_live = np.zeros(starts.size, dtype=np.int64)  # a queue's first live unit (0: none)
    first_live[queue] = live_rows[at]
    max_offset = qo[ends] + 1
    min_offset = np.where(has_live, qo[first_live], max_offset)
    return _columns(QUEUE_OFFSETS_SCHEMA, starts.size, store=store, topic=topic.take(starts),
                    queue_id=queue_id.take(starts), min_offset=min_offset, max_offset=max_offset,
                    min_commitlog_offset=pa.array(cl[first_live], mask=~has_live),
                    max_commitlog_offset=pa.array(cl[ends], mask=~live[ends]),
                    last_store_timestamp=_micros(units["store_timestamp"].take(ends)),
                    message_count=max_offset - min_offset, snapshot_ts=snapshot_ts)


def consumer_rows(committed: Mapping[tuple[str, str], Mapping[int, int]], queues: pa.Table,
                  units: pa.Table, store: str, snapshot_ts: datetime) -> pa.Table:
    """The offset table ``committed`` ({(topic, group): {queue_id: offset}}) + queue rows
    (:data:`QUEUE_OFFSETS_SCHEMA`) + units -> one row per (group, topic, queue)
    (:data:`CONSUMER_OFFSETS_SCHEMA`), as ``mqadmin consumerProgress`` reports them.

    Rows, ``max_offset`` and ``lag`` are ``store.consumer_lag``'s (the one lag rule).
    ``last_consumed_store_timestamp`` is the checked store time of the unit at
    ``consumer_offset - 1`` in ``units`` (null when there is none, as for ``consumer_offset`` 0).
    """
    maxes = dict(zip(zip(queues["topic"].to_pylist(), queues["queue_id"].to_pylist(), strict=True),
                     queues["max_offset"].to_pylist(), strict=True))
    lag = consumer_lag(maxes, committed)
    rows = _table([(r.group, r.topic, r.queue_id, r.consumer_offset, r.max_offset, r.lag) for r in lag],
                  _LAG_SCHEMA).append_column("place", pa.array(np.arange(len(lag))))
    consumed = pa.table({"topic": units["topic"], "queue_id": units["queue_id"],
                         "consumer_offset": pc.add(units["queue_offset"], 1),
                         "store_timestamp": units["store_timestamp"]})
    rows = rows.join(consumed, ["topic", "queue_id", "consumer_offset"], join_type="left outer"
                     ).sort_by("place")
    return _columns(CONSUMER_OFFSETS_SCHEMA, rows.num_rows, store=store,
                    **{k: rows[k] for k in ("consumer_group", "topic", "queue_id", "consumer_offset",
                                            "max_offset", "lag")},
                    last_consumed_store_timestamp=_micros(rows["store_timestamp"]),
                    snapshot_ts=snapshot_ts)


def history_table(queues: pa.Table, consumers: pa.Table) -> pa.Table:
    """Queue and consumer rows of one snapshot as :data:`HISTORY_SCHEMA` rows (``kind`` tells
    which; ``snapshot_date`` is the UTC date of ``snapshot_ts``, the partition column)."""
    def tag(rows: pa.Table, kind: str) -> pa.Table:
        return conform_arrow(rows.append_column("kind", pa.array([kind] * rows.num_rows, pa.string()))
                             .append_column("snapshot_date", rows.column("snapshot_ts").cast(pa.date32())),
                             HISTORY_SCHEMA)
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
