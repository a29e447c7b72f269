"""Lake maintenance: compact the small files of the lake's Delta tables, then VACUUM.

    spark-submit $(delta_submit_args) jobs/optimize_lake.py --lake DIR|URI
        [--retention-hours H [--allow-short-retention]]

``offsets_history`` gets a small append every few minutes, so it collects many small files:
OPTIMIZE rewrites them into few, Z-ordered by (topic, queue_id), the columns its readers filter
on besides the partition column ``snapshot_date``. The other tables (current offsets, archive,
run log) get a plain OPTIMIZE (bin-packing). Then VACUUM deletes the data files no version within
the retention (default: the tables' ``delta.deletedFileRetentionDuration``) uses. A retention
below that is refused unless ``--allow-short-retention`` (Delta's own safety check). OPTIMIZE
changes no data (``dataChange=false``), so it is allowed on the append-only tables. Tables the
lake does not have (yet) are skipped.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pyspark.sql import SparkSession

from rocketlake.jobs.job_commands import job_main
from rocketlake.jobs.lake import DELETED_FILE_RETENTION_DAYS, table_exists, table_uri
from rocketlake.jobs.spark_session import build_session
from rocketlake.jobs.table_names import ARCHIVE_TABLE, OFFSETS_HISTORY, OFFSETS_TABLES, RUNS_TABLE

PROG = "optimize-lake"
#: every table a job writes into a lake -> its Z-order columns (empty: plain OPTIMIZE)
LAKE_TABLES: dict[str, tuple[str, ...]] = {
    **{name: () for name in OFFSETS_TABLES}, OFFSETS_HISTORY: ("topic", "queue_id"),
    ARCHIVE_TABLE: (), RUNS_TABLE: (),
}
MIN_RETENTION_HOURS = DELETED_FILE_RETENTION_DAYS * 24
RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"


def optimize_table(spark: SparkSession, uri: str, zorder: tuple[str, ...],
                   retention_hours: int) -> dict[str, Any]:
    """OPTIMIZE (Z-ordered by ``zorder`` when given) and VACUUM the table at ``uri``; returns
    the files OPTIMIZE removed and added."""
    from delta.tables import DeltaTable

    table = DeltaTable.forPath(spark, uri)
    builder = table.optimize()
    result = builder.executeZOrderBy(*zorder) if zorder else builder.executeCompaction()
    metrics = result.select("metrics.numFilesRemoved", "metrics.numFilesAdded").first()
    table.vacuum(float(retention_hours))
    return {"files_removed": metrics[0] if metrics else 0,
            "files_added": metrics[1] if metrics else 0, "zorder": list(zorder)}


def optimize_lake(lake: str, retention_hours: int = MIN_RETENTION_HOURS,
                  allow_short_retention: bool = False) -> dict[str, dict[str, Any]]:
    """Optimize and vacuum every table of :data:`LAKE_TABLES` the lake ``lake`` (a URI) has;
    returns what was done per table. Refuses a retention below :data:`MIN_RETENTION_HOURS`
    unless ``allow_short_retention``, before anything runs."""
    if retention_hours < MIN_RETENTION_HOURS and not allow_short_retention:
        raise ValueError(f"--retention-hours {retention_hours} is below the tables' deleted-file "
                         f"retention ({MIN_RETENTION_HOURS} hours): VACUUM would delete files a "
                         f"reader of an older version may still need; give "
                         f"--allow-short-retention to do it anyway")
    spark = build_session(f"rocketlake-{PROG}")
    spark.conf.set(RETENTION_CHECK, str(not allow_short_retention).lower())
    done = {}
    for name, zorder in LAKE_TABLES.items():
        uri = table_uri(lake, name)
        if table_exists(spark, uri):
            done[name] = optimize_table(spark, uri, zorder, retention_hours)
    return done


def run(a: argparse.Namespace) -> int:
    """``rocketlake optimize-lake`` (options in :mod:`rocketlake.jobs.job_commands`): prints what was done
    per table as JSON."""
    print(json.dumps(optimize_lake(a.lake, a.retention_hours, a.allow_short_retention)))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``spark-submit jobs/optimize_lake.py [options]`` (the options of :data:`job_commands.JOBS`)."""
    return job_main(PROG, run, argv)


if __name__ == "__main__":
    sys.exit(main())
