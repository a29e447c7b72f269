"""The maintenance-run log: one Delta row per job run, under ``<lake>/maintenance_runs``.

Jobs call :func:`record_run` when they finish; the report shows the latest runs. The table is
append-only (``delta.appendOnly``); each run has its times as epoch ms and as TIMESTAMPs.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from rocketlake.jobs.lake import ensure_table, table_exists, table_properties, table_uri
from rocketlake.jobs.table_names import RUNS_TABLE

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


def record_run(spark: SparkSession, lake: str | Path, job: str, store: Path, started_ms: int,
               status: str, summary: dict[str, Any]) -> None:
    """Append one run (status "ok" / "failed" / "dry-run") with its summary as JSON to the lake
    ``lake`` (a URI of :func:`rocketlake.jobs.lake.lake_uri`, or a local path)."""
    uri = table_uri(str(lake), RUNS_TABLE)
    ensure_table(spark, uri, RUNS_SCHEMA, (), table_properties(append_only=True))
    row = (job, str(store), started_ms, time.time_ns() // 1_000_000, status,
           json.dumps(summary, default=str, sort_keys=True), None, None)
    (spark.createDataFrame([row], RUNS_SCHEMA)
     .withColumn("started_ts", F.timestamp_millis("started_ms"))
     .withColumn("finished_ts", F.timestamp_millis("finished_ms"))
     .write.format("delta").mode("append").option("mergeSchema", "true").save(uri))


def read_runs(spark: SparkSession, lake: str) -> DataFrame | None:
    """The run log, or None when no job has recorded a run yet."""
    uri = table_uri(lake, RUNS_TABLE)
    return spark.read.format("delta").load(uri) if table_exists(spark, uri) else None
