"""Publish a store's queue offsets and its consumer groups' offsets and lag as Delta tables.

    spark-submit $(delta_submit_args) jobs/publish_offsets.py --store DIR --lake DIR|URI
        [--store-name NAME] [--snapshot-time ISO-8601|EPOCH-MS] [--database NAME]
        [--change-data-feed] [--set NAME=VALUE ...]

Appends the snapshot (its queue rows and consumer rows) to ``<lake>/offsets_history``
(partitioned by ``snapshot_date``) in one Delta commit, written in process (``jobs.delta_direct``:
no Spark session unless the run needs the catalog, migrates an old lake or records an unchanged
run), which also carries the transaction id
(``rocketlake.publish-offsets/<store>``, snapshot time in ms: re-running a snapshot, also after a
killed run, never writes it twice) and the run's record (``jobs.offsets_lake``). The current
offsets are each store's newest snapshot (``jobs.offsets_lake.current_rows``). A run whose rows
equal the store's newest snapshot writes nothing (its run goes to ``<lake>/maintenance_runs``).
A lake of the layout before (``queue_offsets`` and ``consumer_offsets`` tables) is migrated on
the first run. ``offsets_history`` is append-only (``delta.appendOnly``); ``--change-data-feed``
switches on its change data feed; ``--database NAME`` registers the tables in the catalog as
``NAME.<table>``.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from rocketlake.jobs import job_support
from rocketlake.jobs.job_commands import job_main
from rocketlake.jobs.lake import store_name, table_properties
from rocketlake.jobs.offsets_lake import (
    append_snapshot,
    history_state,
    migrate,
    published_ms,
    snapshot_rows,
)
from rocketlake.jobs.run_log import run_record
from rocketlake.jobs.table_names import OFFSETS_TABLES, RUNS_TABLE
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
    QUEUES_SCHEMA,
    arrow_schema,
    committed_rows,
    consumer_rows,
    history_table,
    queue_rows,
    request_rows,
    same_rows,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROG = "publish-offsets"
log = logging.getLogger(__name__)
APP_ID = "rocketlake.publish-offsets"
MAX_REPORTED = 10


@dataclass(frozen=True)
class StoreLayout:
    """What the driver lists: the queues, the topics the store knows, the CommitLog minimum."""
    queues: list[tuple[str, int]]
    topics: frozenset[str]
    commitlog_min_offset: int


@dataclass(frozen=True)
class Snapshot:
    """One snapshot's rows (from data read once, before anything is written), as Arrow tables:
    ``queues`` (``QUEUE_OFFSETS_SCHEMA``), ``consumers`` (``CONSUMER_OFFSETS_SCHEMA``)."""
    store: str
    ts: datetime
    queues: pa.Table
    consumers: pa.Table
    commitlog_errors: list[str]
    commitlog_error_count: int

    @property
    def rows(self) -> pa.Table:
        """Both kinds as the history's rows (``HISTORY_SCHEMA``)."""
        return history_table(self.queues, self.consumers)


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


def read_snapshot(root: Path, cfg: StoreConfig, layout: StoreLayout,
                  table: dict[tuple[str, str], dict[int, int]], store: str,
                  ts: datetime) -> Snapshot:
    """Compute the snapshot's queue and consumer rows from the store's files, in process (no
    Spark).

    The units the rows need are O(queues + committed offsets): the driver reads them
    (``read_queue_units``, the store library) once, as one Arrow table, and the rows are
    ``transforms.offsets``' functions of that table and of the offset table ``table``, so every
    write of the snapshot sees the same rows."""
    queues = pa.Table.from_pylist([{"topic": t, "queue_id": q} for t, q in layout.queues],
                                  schema=arrow_schema(QUEUES_SCHEMA))
    requests = request_rows(queues, committed_rows(table))
    units = pa.Table.from_batches(
        list(read_queue_units(iter(requests.to_batches()), str(root), cfg)), UNIT_SCHEMA)
    errors = pc.drop_null(units.column("commitlog_error")).to_pylist()
    queue_table = queue_rows(units, layout.commitlog_min_offset, store, ts)
    consumers = consumer_rows(table, queue_table, units, store, ts)
    return Snapshot(store, ts, queue_table, consumers, errors[:MAX_REPORTED], len(errors))


# --- writing the lake -----------------------------------------------------------------------------
def publish(session: Callable[[], SparkSession], lake: str, snap: Snapshot, rows: pa.Table,
            run: str, change_data_feed: bool = False) -> bool:
    """Write the snapshot's history ``rows`` (``HISTORY_SCHEMA``, as Arrow) in one commit that
    carries the run's record ``run`` (``jobs.offsets_lake.append_snapshot``). False, writing
    nothing, when the store's newest published snapshot is this one or holds the same rows.
    Refuses a snapshot older than the published one. A lake of the old layout is migrated first
    (``jobs.offsets_lake.migrate``, through the Spark session ``session`` starts)."""
    app_id, version = f"{APP_ID}/{snap.store}", epoch_ms(snap.ts)
    state = history_state(lake, (app_id,))
    if migrate(session, lake, state):
        state = history_state(lake, (app_id,))
    last = published_ms(state, app_id)
    if last is not None and last > version:
        raise ValueError(f"snapshot time {format_time(version)} is older than the published "
                         f"snapshot {format_time(last)} of store {snap.store}; nothing written")
    if last is not None and (last == version or same_rows(
            snapshot_rows(lake, snap.store, datetime.fromtimestamp(last / 1000, UTC)), rows)):
        return False
    append_snapshot(lake, rows, app_id, version, run,
                    table_properties(append_only=True, change_data_feed=change_data_feed))
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
    Spark master of a session this starts (only to register, migrate or record an unchanged run:
    the snapshot is read and written in process)."""
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

    @cache
    def session() -> SparkSession:
        from rocketlake.jobs.spark_session import build_session

        return build_session(PROG, master=master)

    snap = read_snapshot(root, cfg, layout, table, store, ts)
    if snap.commitlog_error_count:
        log.warning("%s: warning: %d ConsumeQueue unit(s) disagree with the CommitLog (published "
                    "without their store times): %s", PROG, snap.commitlog_error_count,
                    "; ".join(map(str, snap.commitlog_errors)))
    rows = snap.rows
    kinds = rows.column("kind")
    queues = pc.sum(pc.equal(kinds, "queue")).as_py() or 0
    consumers = rows.num_rows - queues
    counts = f"{queues} queues, {consumers} consumer rows"
    summary = {"snapshot": format_time(epoch_ms(ts)), "queues": queues, "consumer_rows": consumers}
    run = json.dumps(run_record(PROG, root, started, "ok", summary), sort_keys=True)
    written = publish(session, lake, snap, rows, run, change_data_feed)
    if written:
        print(f"{PROG}: published store {store} snapshot {format_time(epoch_ms(ts))}: {counts}")
    else:
        print(f"{PROG}: store {store} unchanged since its published snapshot ({counts}); "
              f"nothing written")
        from rocketlake.jobs.run_log import record_run

        record_run(lake, PROG, root, started, "unchanged", summary)
    if database:
        from rocketlake.jobs.lake import register

        register(session(), database, lake, (*OFFSETS_TABLES, RUNS_TABLE))
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
