"""The maintenance-run log: one Delta row per job run, under ``<lake>/maintenance_runs``.

Jobs call :func:`record_run` when they finish; the report shows the latest runs.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType

RUNS_TABLE = "maintenance_runs"
RUNS_SCHEMA = StructType([
    StructField("job", StringType(), False),
    StructField("store", StringType(), False),
    StructField("started_ms", LongType(), False),
    StructField("finished_ms", LongType(), False),
    StructField("status", StringType(), False),
    StructField("summary", StringType(), True),   # JSON object
])


def record_run(spark: SparkSession, lake: Path, job: str, store: Path, started_ms: int,
               status: str, summary: dict[str, Any]) -> None:
    """Append one run (status "ok" / "failed" / "dry-run") with its summary as JSON."""
    row = (job, str(store), started_ms, time.time_ns() // 1_000_000, status,
           json.dumps(summary, default=str, sort_keys=True))
    spark.createDataFrame([row], RUNS_SCHEMA).write.format("delta").mode("append") \
        .save(str(Path(lake) / RUNS_TABLE))


def read_runs(spark: SparkSession, lake: Path) -> DataFrame | None:
    """The run log, or None when no job has recorded a run yet."""
    path = Path(lake) / RUNS_TABLE
    if not (path / "_delta_log").exists():
        return None
    return spark.read.format("delta").load(str(path))
