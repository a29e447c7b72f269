"""Publish a store's queue offsets and its consumer groups' offsets and lag as Delta tables.

    spark-submit $(delta_submit_args) jobs/publish_offsets.py --store DIR --lake DIR|URI
        [--store-name NAME] [--snapshot-time ISO-8601|EPOCH-MS] [--database NAME]
        [--change-data-feed] [--set NAME=VALUE ...]

Writes ``<lake>/queue_offsets`` and ``<lake>/consumer_offsets`` (current state, MERGE on their
keys; a row changes only for a newer snapshot; rows of queues and groups the store no longer has
are deleted) and appends to ``<lake>/offsets_history`` (partitioned by ``snapshot_date``). A run
whose rows equal the current ones writes nothing. Each write is one Delta commit carrying the
transaction id (``rocketlake.publish-offsets/<store>``, snapshot time in ms), so re-running a
snapshot, also after a killed run, never writes it twice. ``offsets_history`` is append-only
(``delta.appendOnly``); ``--change-data-feed`` switches on the tables' change data feed;
``--database NAME`` registers the tables in the catalog as ``NAME.<table>``.
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from rocketlake.jobs import job_support
from rocketlake.jobs.job_commands import job_main
from rocketlake.jobs.lake import ensure_table, register, store_name, table_properties, table_uri
from rocketlake.jobs.run_log import record_run
from rocketlake.jobs.spark_progress import spark_progress
from rocketlake.jobs.spark_session import build_session
from rocketlake.jobs.table_names import CONSUMER_OFFSETS, OFFSETS_HISTORY, QUEUE_OFFSETS, RUNS_TABLE
from rocketlake.jobs.times import to_datetime
from rocketlake.store.config import StoreConfig
from rocketlake.store.config_files import read_config, read_consumer_offsets
from rocketlake.store.errors import StoreFormatError
from rocketlake.store.file_sizes import with_commitlog_size, with_consume_queue_size
from rocketlake.store.store_dir import check_store
from rocketlake.store.store_time import format_time
from rocketlake.store.swap_journal import refuse_unfinished
from rocketlake.transforms.commitlog_scan import commitlog_files
from rocketlake.transforms.offset_units import UNIT_SCHEMA, read_queue_units
from rocketlake.transforms.offsets import (
    CONSUMER_KEYS,
    CONSUMER_OFFSETS_SCHEMA,
    HISTORY_SCHEMA,
    QUEUE_KEYS,
    QUEUE_OFFSETS_SCHEMA,
    QUEUES_SCHEMA,
    committed_offsets,
    consumer_offsets,
    history_rows,
    queue_offsets,
    queue_requests,
    same_state,
)

PROG = "publish-offsets"
log = logging.getLogger(__name__)
APP_ID = "rocketlake.publish-offsets"
#: table name -> (schema, merge keys (None: append-only), partition columns)
TABLES = {
    QUEUE_OFFSETS: (QUEUE_OFFSETS_SCHEMA, QUEUE_KEYS, ()),
    CONSUMER_OFFSETS: (CONSUMER_OFFSETS_SCHEMA, CONSUMER_KEYS, ()),
    OFFSETS_HISTORY: (HISTORY_SCHEMA, None, ("snapshot_date",)),
}
TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
MAX_REPORTED = 10


@dataclass(frozen=True)
class StoreLayout:
    """What the driver lists: the queues, the topics the store knows, the CommitLog minimum."""
    queues: list[tuple[str, int]]
    topics: frozenset[str]
    commitlog_min_offset: int


@dataclass(frozen=True)
class Snapshot:
    """One snapshot's rows (from data read once, before anything is written)."""
    store: str
    ts: datetime
    queue_rows: DataFrame
    consumer_rows: DataFrame
    commitlog_errors: list[str]
    commitlog_error_count: int


# --- reading the store ----------------------------------------------------------------------------
def read_layout(root: Path, cfg: StoreConfig) -> StoreLayout:
    """List the store's queues and topics (ConsumeQueue directories and `config/topics.json`) and
    where its CommitLog starts (``commitlog_scan.commitlog_files``: every directory ``cfg``
    names)."""
    refuse_unfinished(root)
    queues = []
    base = root / "consumequeue"
    for tdir in sorted(base.iterdir()) if base.is_dir() else ():
        for qdir in sorted(tdir.iterdir()) if tdir.is_dir() else ():
            if not qdir.name.isdigit():
                raise StoreFormatError(f"{qdir}: queue directory name is not a queue id")
            queues.append((tdir.name, int(qdir.name)))
    commitlog = commitlog_files(root, cfg)
    topics_json = read_config(root / "config" / "topics.json") or {}
    configured = topics_json.get("topicConfigTable", {}) if isinstance(topics_json, dict) else {}
    return StoreLayout(sorted(queues), frozenset({t for t, _ in queues} | set(configured)),
                       commitlog[0][1] if commitlog else 0)


def check_topics(table: dict[tuple[str, str], dict[int, int]], layout: StoreLayout) -> None:
    """Refuse consumer offsets for topics the store no longer has (no queues, not configured)."""
    gone: dict[str, list[str]] = {}
    for topic, group in sorted(table):
        if topic not in layout.topics:
            gone.setdefault(topic, []).append(group)
    if gone:
        names = "; ".join(f"topic {t} (group {', '.join(g)})" for t, g in gone.items())
        raise ValueError(f"config/consumerOffset.json has offsets for topics this store no longer "
                         f"has: {names}. Remove those entries (or restore the topics) and re-run")


def read_snapshot(spark: SparkSession, root: Path, cfg: StoreConfig, layout: StoreLayout,
                  table: dict[tuple[str, str], dict[int, int]], store: str,
                  ts: datetime) -> Snapshot:
    """Compute the snapshot's queue and consumer rows from the store's files.

    The units the rows need are O(queues + committed offsets), so the driver reads them
    (``read_queue_units``, the store library) once, as one Arrow table; the rows are Spark
    transforms of that local table and of the offset table, so recomputing them reads nothing
    again and every write of the snapshot sees the same rows."""
    committed = committed_offsets(spark, table)
    queues = spark.createDataFrame(layout.queues, QUEUES_SCHEMA)
    requests = queue_requests(queues, committed).toArrow()
    units_table = pa.Table.from_batches(
        list(read_queue_units(iter(requests.to_batches()), str(root), cfg)), UNIT_SCHEMA)
    units = spark.createDataFrame(units_table, from_arrow_schema(UNIT_SCHEMA))
    errors = pc.drop_null(units_table.column("commitlog_error")).to_pylist()
    queue_rows = queue_offsets(units, layout.commitlog_min_offset, store, ts)
    consumer_rows = consumer_offsets(committed, queue_rows, units, store, ts)
    return Snapshot(store, ts, queue_rows, consumer_rows, errors[:MAX_REPORTED], len(errors))


# --- writing the lake -----------------------------------------------------------------------------
def ensure_tables(spark: SparkSession, lake: str, change_data_feed: bool = False) -> None:
    """Create the three tables with their explicit schemas and properties where they do not exist
    yet; give existing ones the properties they lack."""
    for name, (schema, keys, partitions) in TABLES.items():
        ensure_table(spark, table_uri(lake, name), schema, partitions,
                     table_properties(append_only=keys is None, change_data_feed=change_data_feed))


def _current(spark: SparkSession, lake: str, name: str, store: str) -> DataFrame:
    return spark.read.format("delta").load(table_uri(lake, name)).where(F.col("store") == store)


@contextmanager
def _transaction(spark: SparkSession, app_id: str, version: int) -> Iterator[None]:
    """Delta's idempotent DML: a MERGE under an (app id, version) already committed is skipped."""
    spark.conf.set(TXN_APP_ID, app_id)
    spark.conf.set(TXN_VERSION, str(version))
    try:
        yield
    finally:
        spark.conf.unset(TXN_APP_ID)
        spark.conf.unset(TXN_VERSION)


def append_history(lake: str, snap: Snapshot, app_id: str, version: int) -> None:
    """Append the snapshot to ``offsets_history`` once per (app id, version)."""
    (history_rows(snap.queue_rows, snap.consumer_rows).write.format("delta").mode("append")
     .option("txnAppId", app_id).option("txnVersion", version)
     .save(table_uri(lake, OFFSETS_HISTORY)))


def merge_current(spark: SparkSession, lake: str, name: str, rows: DataFrame, snap: Snapshot,
                  app_id: str, version: int) -> None:
    """MERGE one snapshot's ``rows`` into the current-state table ``name``: insert new keys,
    update a key only from a newer snapshot, delete this store's keys the snapshot lacks."""
    from delta.tables import DeltaTable

    keys = TABLES[name][1]
    if keys is None:
        raise ValueError(f"{name} is append-only: it has no merge keys")
    on = F.col("t.store") == F.lit(snap.store)
    for k in keys:
        on &= F.col(f"t.{k}") == F.col(f"s.{k}")
    with _transaction(spark, app_id, version):
        (DeltaTable.forPath(spark, table_uri(lake, name)).alias("t").merge(rows.alias("s"), on)
         .whenMatchedUpdateAll(condition=F.col("s.snapshot_ts") > F.col("t.snapshot_ts"))
         .whenNotMatchedInsertAll()
         .whenNotMatchedBySourceDelete(condition=(F.col("t.store") == F.lit(snap.store))
                                       & (F.col("t.snapshot_ts") < F.lit(snap.ts)))
         .execute())


def publish(spark: SparkSession, lake: str, snap: Snapshot, change_data_feed: bool = False) -> bool:
    """Write the snapshot: history first, then the current tables. False when the current tables
    already hold these rows (nothing written). Refuses a snapshot older than the published one."""
    ensure_tables(spark, lake, change_data_feed)
    cur_q = _current(spark, lake, QUEUE_OFFSETS, snap.store)
    cur_c = _current(spark, lake, CONSUMER_OFFSETS, snap.store)
    if same_state(cur_q, snap.queue_rows) and same_state(cur_c, snap.consumer_rows):
        return False
    latest = F.max("snapshot_ts")
    published = cur_q.select("snapshot_ts").unionByName(cur_c.select("snapshot_ts")).agg(
        F.date_format(latest, "yyyy-MM-dd'T'HH:mm:ss.SSSXXX").alias("ts"),
        (latest > F.lit(snap.ts)).alias("newer")).first()
    assert published is not None, "a global aggregate has exactly one row"
    if published.newer:
        raise ValueError(f"snapshot time {format_time(epoch_ms(snap.ts))} is older than the published "
                         f"snapshot {published.ts} of store {snap.store}; nothing written")
    app_id, version = f"{APP_ID}/{snap.store}", epoch_ms(snap.ts)
    append_history(lake, snap, app_id, version)
    merge_current(spark, lake, QUEUE_OFFSETS, snap.queue_rows, snap, app_id, version)
    merge_current(spark, lake, CONSUMER_OFFSETS, snap.consumer_rows, snap, app_id, version)
    return True


# --- command line ---------------------------------------------------------------------------------
def epoch_ms(ts: datetime) -> int:
    return int(ts.timestamp() * 1000)


def whole_ms(ts: datetime) -> datetime:
    """``ts`` in UTC (naive means UTC), truncated to the millisecond the version id keeps."""
    ts = ts if ts.tzinfo else ts.replace(tzinfo=UTC)
    return ts.astimezone(UTC).replace(microsecond=ts.microsecond // 1000 * 1000)


def publish_store(root: Path, cfg: StoreConfig, lake: str, store: str | None = None,
                  ts: datetime | None = None, *, database: str | None = None,
                  change_data_feed: bool = False, master: str | None = None) -> bool:
    """Publish the store ``root`` (named ``store``, default ``jobs.lake.store_name``'s) into ``lake``
    (a URI) as the snapshot at ``ts`` (default: now) and record the run; False when nothing
    changed. ``database`` registers the lake's tables in that catalog database; ``master`` is the
    Spark master of a session this starts."""
    started = time.time_ns() // 1_000_000
    root = check_store(root)
    job_support.refuse_5x_queues(root, PROG)
    cfg = with_consume_queue_size(root, with_commitlog_size(root, cfg))  # the files' sizes
    store = store_name(root, store)
    ts = whole_ms(ts or datetime.now(UTC))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = read_consumer_offsets(root)
        layout = read_layout(root, cfg)
    for w in caught:
        log.warning("%s: warning: %s", PROG, w.message)
    check_topics(table, layout)
    spark = build_session(PROG, master=master)
    with spark_progress(spark, "snapshot"):
        snap = read_snapshot(spark, root, cfg, layout, table, store, ts)
    if snap.commitlog_error_count:
        log.warning("%s: warning: %d ConsumeQueue unit(s) disagree with the CommitLog (published "
                    "without their store times): %s", PROG, snap.commitlog_error_count,
                    "; ".join(map(str, snap.commitlog_errors)))
    queues, consumers = snap.queue_rows.count(), snap.consumer_rows.count()
    counts = f"{queues} queues, {consumers} consumer rows"
    with spark_progress(spark, "publish"):
        written = publish(spark, lake, snap, change_data_feed)
    if written:
        print(f"{PROG}: published store {store} snapshot {format_time(epoch_ms(ts))}: {counts}")
    else:
        print(f"{PROG}: store {store} unchanged since its published snapshot ({counts}); "
              f"nothing written")
    record_run(spark, lake, PROG, root, started, "ok" if written else "unchanged",
               {"snapshot": format_time(epoch_ms(ts)), "queues": queues, "consumer_rows": consumers})
    if database:
        register(spark, database, lake, (*TABLES, RUNS_TABLE))
    return written


def run(args: argparse.Namespace) -> int:
    """``rocketlake publish-offsets`` (options in :mod:`rocketlake.jobs.job_commands`)."""
    ts = to_datetime(args.snapshot_time) if args.snapshot_time is not None else None
    publish_store(args.store, job_support.store_config(args), args.lake, args.store_name, ts,
                  database=args.database, change_data_feed=args.change_data_feed, master=args.master)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``spark-submit jobs/publish_offsets.py [options]`` (the options of :data:`job_commands.JOBS`)."""
    return job_main(PROG, run, argv)


if __name__ == "__main__":
    sys.exit(main())
