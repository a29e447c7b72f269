"""The offsets in the lake: one Delta table, ``<lake>/offsets_history``, one commit per snapshot.

publish-offsets appends each snapshot that differs from its store's newest published one: all its
rows (``kind`` "queue" and "consumer", ``transforms.offsets.HISTORY_SCHEMA``) in one Delta commit
(:func:`append_snapshot`, written in process by ``jobs.delta_direct``: no JVM), which also carries
- the transaction id ``rocketlake.publish-offsets/<store>`` with the snapshot time in ms as its
  version: the table's log tells the store's newest published snapshot without reading data
  (:func:`history_state`);
- the run's record as the commit's ``userMetadata`` (``jobs.run_log.run_record``), the run log of
  these runs.
The first write creates the table (its properties given as write options). The current offsets of
a store's queues and groups are the rows of its newest snapshot (:func:`current_rows`).

Lakes written before this layout also have ``queue_offsets`` and ``consumer_offsets``, current-state
tables MERGEd each run (:data:`table_names.RETIRED_TABLES`). :func:`migrate` copies into the history
any of their rows it lacks, once, in one commit carrying the transaction id
:data:`LAYOUT_APP_ID` (version :data:`LAYOUT`); the old tables are then no longer written and
are left as they are.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from rocketlake.jobs import delta_direct
from rocketlake.jobs.lake import TableState, table_uri
from rocketlake.jobs.table_names import CONSUMER_OFFSETS, OFFSETS_HISTORY, QUEUE_OFFSETS
from rocketlake.transforms.offsets import (
    CONSUMER_OFFSETS_SCHEMA,
    HISTORY_SCHEMA,
    QUEUE_OFFSETS_SCHEMA,
    arrow_schema,
    conform_arrow,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: the transaction id of the migration's commit, and the layout it brings a lake to
LAYOUT_APP_ID = "rocketlake.lake-layout"
LAYOUT = 2
#: kind -> (the retired current-state table of that kind, its schema)
KINDS = {"queue": (QUEUE_OFFSETS, QUEUE_OFFSETS_SCHEMA),
         "consumer": (CONSUMER_OFFSETS, CONSUMER_OFFSETS_SCHEMA)}


def history_uri(lake: str) -> str:
    return table_uri(lake, OFFSETS_HISTORY)


def history_state(lake: str, app_ids: Iterable[str]) -> TableState | None:
    """The history table's properties and the newest version of each of ``app_ids`` committed to
    it (and of :data:`LAYOUT_APP_ID`), from its log; None when there is no history table."""
    table = delta_direct.open_table(history_uri(lake))
    return None if table is None else delta_direct.table_state(table, (*app_ids, LAYOUT_APP_ID))


def migrate(session: Callable[[], SparkSession], lake: str, state: TableState | None) -> bool:
    """Bring a lake of the old layout to this one (``state``: the history table's, None when there
    is none): append to the history every row of the old current-state tables it lacks, in one
    commit under :data:`LAYOUT_APP_ID` (through Spark: ``session`` starts it, only when an old
    table is there). False when there was nothing to migrate (no history, the migration committed
    already, or no old table). Re-running a killed migration appends what the killed one did not."""
    if state is None or state.transactions.get(LAYOUT_APP_ID, 0) >= LAYOUT:
        return False
    old = {kind: table_uri(lake, name) for kind, (name, _) in KINDS.items()}
    old = {kind: uri for kind, uri in old.items() if delta_direct.open_table(uri) is not None}
    if not old:
        return False
    from rocketlake.transforms.offsets import conform, history_rows

    spark = session()
    def current(kind: str) -> DataFrame:
        schema = KINDS[kind][1]
        if kind in old:
            return conform(spark.read.format("delta").load(old[kind]), schema)
        return spark.createDataFrame([], schema)
    history = spark.read.format("delta").load(history_uri(lake))
    missing = history_rows(current("queue"), current("consumer")).exceptAll(
        conform(history, HISTORY_SCHEMA))
    (missing.write.format("delta").mode("append").option("txnAppId", LAYOUT_APP_ID)
     .option("txnVersion", LAYOUT).save(history_uri(lake)))
    return True


def published_ms(state: TableState | None, app_id: str) -> int | None:
    """The newest snapshot (epoch ms) committed under ``app_id``; None when there is none."""
    return None if state is None else state.transactions.get(app_id)


def snapshot_rows(lake: str, store: str, ts: datetime) -> pa.Table:
    """The history rows (``HISTORY_SCHEMA``, as Arrow) of store ``store``'s snapshot at ``ts``,
    read in process through the partition of its date (one small file)."""
    table = delta_direct.open_table(history_uri(lake))
    if table is None:
        return arrow_schema(HISTORY_SCHEMA).empty_table()
    have = delta_direct.column_names(table)
    rows = delta_direct.read_rows(table, [n for n in HISTORY_SCHEMA.names if n in have],
                                  [("snapshot_date", "=", ts.date())])
    stamp = pa.scalar(ts, rows.schema.field("snapshot_ts").type)
    return conform_arrow(rows.filter(pc.and_(pc.equal(rows.column("snapshot_ts"), stamp),
                                             pc.equal(rows.column("store"), store))), HISTORY_SCHEMA)


def append_snapshot(lake: str, rows: pa.Table, app_id: str, version: int, run: str,
                    properties: Mapping[str, str]) -> None:
    """Append one snapshot's ``rows`` (``HISTORY_SCHEMA``) in one commit under (``app_id``,
    ``version``) carrying ``run`` as its ``userMetadata``; the first write creates the table with
    ``properties``, a table that lacks some of them gets them first."""
    uri = history_uri(lake)
    delta_direct.append(uri, rows, delta_direct.open_table(uri), partition_by=["snapshot_date"],
                        properties=properties, transaction=(app_id, version), user_metadata=run)


def current_rows(spark: SparkSession, lake: str, kind: str) -> DataFrame:
    """The current offsets of kind ``kind`` ("queue": ``QUEUE_OFFSETS_SCHEMA``, "consumer":
    ``CONSUMER_OFFSETS_SCHEMA``) of every store in the lake: the rows of each store's newest
    snapshot (the view that replaces the old current-state tables)."""
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    from rocketlake.transforms.offsets import conform

    history = spark.read.format("delta").load(history_uri(lake))
    newest = F.max("snapshot_ts").over(Window.partitionBy("store"))
    return conform(history.withColumn("_newest", newest)
                   .where((F.col("snapshot_ts") == F.col("_newest")) & (F.col("kind") == kind)),
                   KINDS[kind][1])
