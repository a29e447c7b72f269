"""The maintenance-run log: one record per job run.

Jobs call :func:`record_run` when they finish: one Delta row under ``<lake>/maintenance_runs``
(append-only, ``delta.appendOnly``; times as epoch ms and as TIMESTAMPs), written in process
(``jobs.delta_direct``: no Spark session). A job whose run already ends in one commit to another
table carries its record in that commit instead (:func:`run_record` as the commit's
``userMetadata``: publish-offsets, ``jobs.offsets_lake``), so the run costs no second commit.
:func:`read_runs` reads both, in process: the latest runs, newest first.
"""
from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from rocketlake.jobs import delta_direct
from rocketlake.jobs.lake import table_properties, table_uri
from rocketlake.jobs.table_names import OFFSETS_HISTORY, RUNS_TABLE
from rocketlake.transforms.offsets import arrow_schema, conform_arrow

RUNS_SCHEMA = StructType([
    StructField("job", StringType(), False),
    StructField("store", StringType(), False),
    StructField("started_ms", LongType(), False),
    StructField("finished_ms", LongType(), False),
    StructField("status", StringType(), False),
    StructField("summary", StringType(), True),   # JSON object
    StructField("started_ts", TimestampType(), True),
    StructField("finished_ts", TimestampType(), True),
])
#: the tables whose commits may carry run records (``userMetadata``)
RUN_CARRIERS = (OFFSETS_HISTORY,)


def run_record(job: str, store: Path, started_ms: int, status: str,
               summary: dict[str, Any]) -> dict[str, Any]:
    """One run's record: the run log's columns but the TIMESTAMPs (finished now; the summary as
    a JSON text)."""
    return {"job": job, "store": str(store), "started_ms": started_ms,
            "finished_ms": time.time_ns() // 1_000_000, "status": status,
            "summary": json.dumps(summary, default=str, sort_keys=True)}


def record_run(lake: str | Path, job: str, store: Path, started_ms: int, status: str,
               summary: dict[str, Any]) -> None:
    """Append one run (status "ok" / "failed" / "dry-run" / "unchanged") with its summary as JSON
    to the lake ``lake`` (a URI of :func:`rocketlake.jobs.lake.lake_uri`, or a local path). A run
    log from before the TIMESTAMP columns gets them (schema merge)."""
    uri = table_uri(str(lake), RUNS_TABLE)
    row = run_record(job, store, started_ms, status, summary)
    values = {**row, "started_ts": row["started_ms"] * 1000, "finished_ts": row["finished_ms"] * 1000}
    delta_direct.append(uri, pa.Table.from_pylist([values], schema=arrow_schema(RUNS_SCHEMA)),
                        delta_direct.open_table(uri), partition_by=[],
                        properties=table_properties(append_only=True), merge_schema=True)


def read_runs(lake: str, limit: int) -> list[dict[str, Any]]:
    """The ``limit`` latest runs (by ``finished_ms``, newest first) of the run log and of the run
    records the commits of :data:`RUN_CARRIERS` carry; each a dict of :data:`RUNS_SCHEMA`'s
    columns (``started_ts`` / ``finished_ts`` None in rows written before they existed, also in a
    run log whose table predates those columns)."""
    runs: list[dict[str, Any]] = []
    table = delta_direct.open_table(table_uri(lake, RUNS_TABLE))
    if table is not None:
        have = delta_direct.column_names(table)
        rows = conform_arrow(delta_direct.read_rows(table, [n for n in RUNS_SCHEMA.names if n in have]),
                             RUNS_SCHEMA)
        runs += sorted(delta_direct.collected(rows), key=lambda r: r["finished_ms"], reverse=True)[:limit]
    for name in RUN_CARRIERS:
        runs += _carried_runs(table_uri(lake, name), limit)
    return sorted(runs, key=lambda r: r["finished_ms"], reverse=True)[:limit]


def _carried_runs(uri: str, limit: int) -> list[dict[str, Any]]:
    """The run records in the ``userMetadata`` of the table's ``limit`` latest commits (commits
    without one, or with other metadata, are not runs)."""
    table = delta_direct.open_table(uri)
    runs = []
    for text in delta_direct.commit_metadata(table, limit) if table is not None else ():
        try:
            run = json.loads(text or "null")
        except ValueError:
            continue
        if isinstance(run, dict) and set(run) == {f.name for f in RUNS_SCHEMA} - {
                "started_ts", "finished_ts"}:
            runs.append({**run, **{f"{k}_ts": datetime.fromtimestamp(run[f"{k}_ms"] / 1000)
                                   for k in ("started", "finished")}})
    return runs
