"""Continuous archive: a store streamed into its lake's archive table, exactly once.

    spark-submit jobs/archive_stream.py --store DIR --lake DIR|URI
        [--trigger available-now|INTERVAL] [--store-name NAME] [--database NAME]
        [--change-data-feed] [--set NAME=VALUE ...]

The ``rocketmq`` stream source (``transforms.rocketmq_stream``) over the store, turned into archive
rows (``transforms.archive.archive_rows``: the table and columns ``compact`` writes), appended to
``<lake>/messages_archive`` by Delta's streaming sink. The query's checkpoint is
``<lake>/_checkpoints/archive/<store name>``. Its first run starts where the archive of this store
ends (the end of its last archived record, or the next file's start when compact expired that
record's file, archived whole; the store's first record when none is archived), so the records
``compact`` archived before and the stream's never overlap; later runs go on from the checkpoint.

Exactly once rests on three things: a batch's offsets are written to the checkpoint before it runs;
the source yields the same rows for the same offsets (byte ranges of CommitLog data that never
changes once written); Delta's streaming sink commits each batch id at most once (a replayed batch
that was committed is skipped). A kill -9 at any point loses nothing and writes nothing twice.

``--trigger available-now`` (default) archives what the store holds when it starts, in batches,
then ends (the nightly DAG runs this before ``compact``); an interval (``30s``, ``5m``, ``1h``)
keeps the query running, a batch per interval, until the job is stopped. Once this job has a
checkpoint for a store, ``compact`` leaves archiving to it: it expires only files the archive holds.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from rocketlake.jobs import job_support
from rocketlake.jobs.job_commands import AVAILABLE_NOW, job_main
from rocketlake.jobs.lake import ensure_table, register, table_exists, table_properties, table_uri
from rocketlake.jobs.lake import store_name as lake_store_name
from rocketlake.jobs.run_log import record_run
from rocketlake.jobs.spark_session import build_session
from rocketlake.jobs.table_names import ARCHIVE_TABLE, RUNS_TABLE
from rocketlake.store.config import StoreConfig
from rocketlake.store.store_dir import check_store
from rocketlake.transforms.archive import (
    PARTITION_COLUMNS,
    SOURCE_COLUMNS,
    archive_rows,
)
from rocketlake.transforms.commitlog_scan import file_at

PROG = "archive"


def checkpoint_uri(lake: str, store_name: str) -> str:
    """Where the archive query of the store ``store_name`` keeps its checkpoint."""
    return table_uri(lake, f"_checkpoints/archive/{store_name}")


def has_checkpoint(spark: SparkSession, lake: str, store_name: str) -> bool:
    """Whether an archive query of the store has run (its checkpoint has an offset log)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(checkpoint_uri(lake, store_name) + "/offsets")
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    return bool(path.getFileSystem(conf).exists(path))


def archived_end(spark: SparkSession, lake: str, store_name: str) -> int | None:
    """Where the archive of the store ends: one past its last archived record (None: no record
    of it is archived)."""
    uri = table_uri(lake, ARCHIVE_TABLE)
    if not table_exists(spark, uri):
        return None
    row = (spark.read.format("delta").load(uri).where(F.col("store") == store_name)
           .agg(F.max(F.col("commitlog_offset") + F.col("size")).alias("end")).first())
    return None if row is None or row["end"] is None else int(row["end"])


def archive_stream(root: Path, cfg: StoreConfig, lake: str, store_name: str | None = None, *,
                   every: str = AVAILABLE_NOW, split_bytes: int | None = None,
                   database: str | None = None, change_data_feed: bool = False,
                   master: str | None = None) -> dict:
    """Stream the store ``root`` into the archive of the lake ``lake`` (a URI), a batch per
    ``every`` (Spark's processingTime, ``job_commands.trigger``) or, with ``available-now``, what
    it holds now; ``split_bytes``: CommitLog bytes per task. Returns the summary: batches, rows,
    the offset reached."""
    started = time.time_ns() // 1_000_000
    root = check_store(root)
    store_name = lake_store_name(root, store_name)
    spark = build_session(f"rocketlake-{PROG}", master=master)
    uri, checkpoint = table_uri(lake, ARCHIVE_TABLE), checkpoint_uri(lake, store_name)
    end = None if has_checkpoint(spark, lake, store_name) else archived_end(spark, lake, store_name)
    size = cfg.mappedFileSizeCommitLog
    if end is not None and end % size and \
            not file_at(root, cfg, end - end % size).exists():
        end += size - end % size  # expired once archived whole: what followed was its BLANK tail
    source = (spark.readStream.format("rocketmq")
              .options(**job_support.source_options(cfg))
              .option("columns", ",".join(SOURCE_COLUMNS))
              .options(**({} if split_bytes is None else {"splitBytes": str(split_bytes)}))
              .option("startingOffsets", "earliest" if end is None
                      else json.dumps({"commitlogOffset": end}))
              .load(str(root)))
    rows = archive_rows(source, store_name, cfg.mappedFileSizeCommitLog)
    ensure_table(spark, uri, rows.schema, PARTITION_COLUMNS,
                 table_properties(append_only=True, change_data_feed=change_data_feed))
    writer = (rows.writeStream.format("delta").queryName(f"rocketlake-archive-{store_name}")
              .partitionBy(*PARTITION_COLUMNS).option("checkpointLocation", checkpoint)
              .option("mergeSchema", "true"))
    query = (writer.trigger(availableNow=True) if every == AVAILABLE_NOW
             else writer.trigger(processingTime=every)).start(uri)
    query.awaitTermination()
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    last = query.lastProgress
    summary = {"store": store_name, "checkpoint": checkpoint, "batches": len(progress),
               "rows": sum(p["numInputRows"] for p in progress),
               "offset": json.loads(last["sources"][0]["endOffset"] or "null") if last else None}
    record_run(lake, PROG, root, started, "ok", summary)
    if database:
        register(spark, database, lake, (ARCHIVE_TABLE, RUNS_TABLE))
    return summary


def run(a: argparse.Namespace) -> int:
    """``rocketlake archive`` (options in :mod:`rocketlake.jobs.job_commands`): prints the summary
    as JSON."""
    print(json.dumps(archive_stream(a.store, job_support.store_config(a), a.lake, a.store_name,
                                    every=a.trigger, split_bytes=a.split_bytes, database=a.database,
                                    change_data_feed=a.change_data_feed, master=a.master)))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``spark-submit jobs/archive_stream.py [options]`` (the options of :data:`job_commands.JOBS`)."""
    return job_main(PROG, run, argv)


if __name__ == "__main__":
    sys.exit(main())
