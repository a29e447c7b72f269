"""Nightly maintenance: expire old CommitLog files (archiving them to Delta first) and compact
keyed topics.

    spark-submit jobs/compact.py --store DIR --lake DIR|URI [--protect-unconsumed] [--dry-run]
        [--respect-delete-when [--force]] [--database NAME] [--change-data-feed]
        [--set NAME=VALUE ...]

1. Plan: RocketMQ's retention rules (`store.retention`): the leading files with mtime +
   fileReservedTime <= now, never the last file. The job's schedule picks the hour, so it expires
   whenever it runs; ``--respect-delete-when`` adds the broker's gate (only at a deleteWhen hour
   or above diskMaxUsedSpaceRatio, unless ``--force``). ``--protect-unconsumed`` keeps files
   holding messages a consumer group has not read. The plan gives a reason for every kept file.
2. Archive: a file is expired only when ``<lake>/messages_archive`` (Delta) holds every record
   of it, checked by offset against the table (per store). Without an archive stream for the
   store, the records a file lacks there go to it, one commit per file, idempotent (``txnAppId``
   per store, ``txnVersion`` = the file's start offset), never a record twice (those already
   there are left out by offset). Once ``rocketlake archive`` has a checkpoint for the store,
   archiving is the stream's alone (both would write what it has not committed yet): compact
   expires the leading files it holds whole and keeps the others, saying so in the plan. The
   table is append-only (``delta.appendOnly``); ``--database`` also registers it in the catalog.
3. Delete the archived files, then ConsumeQueue and index files wholly below the new minimum.
4. Compact: for each compaction topic, the latest message per key into `compaction/<topic>`.

A store held by a live writer is expired only through sealed files (never the last one) and read
without writing into its active files. ``--dry-run`` prints the plan and changes nothing.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rocketlake.jobs import job_support
from rocketlake.jobs.archive_stream import PROG as ARCHIVE_PROG
from rocketlake.jobs.archive_stream import has_checkpoint
from rocketlake.jobs.job_commands import job_main
from rocketlake.jobs.lake import ensure_table, register, table_exists, table_properties, table_uri
from rocketlake.jobs.lake import store_name as lake_store_name
from rocketlake.jobs.run_log import record_run
from rocketlake.jobs.spark_progress import spark_progress
from rocketlake.jobs.spark_session import build_session
from rocketlake.jobs.table_names import ARCHIVE_TABLE, RUNS_TABLE
from rocketlake.store import codec
from rocketlake.store.compaction import (
    KeptRecord,
    SegmentMeta,
    compaction_topics,
    segment_path,
    write_segment,
)
from rocketlake.store.config import StoreConfig
from rocketlake.store.config_files import read_consumer_offsets
from rocketlake.store.consumer_guard import Hold, guard, holds
from rocketlake.store.errors import CorruptRecordError
from rocketlake.store.lockfile import is_locked
from rocketlake.store.message_store import MessageStore
from rocketlake.store.retention import (
    CommitLogDecision,
    RetentionPolicy,
    apply_deletion,
    disk_used_ratio,
    plan_commitlog_deletion,
)
from rocketlake.store.store_dir import check_store
from rocketlake.store.store_files import StoreFiles
from rocketlake.transforms.archive import (
    PARTITION_COLUMNS,
    SOURCE_COLUMNS,
    archive_rows,
)
from rocketlake.transforms.commitlog_scan import (
    DEFAULT_SPLIT_BYTES,
    ScanRange,
    commitlog_files,
    plan_ranges,
)
from rocketlake.transforms.compaction import latest_per_key, with_compaction_key
from rocketlake.transforms.consume_queue_units import gets_unit
from rocketlake.transforms.rocketmq_source import planned_on_driver
from rocketlake.transforms.store_rebuild import ValidParts, valid_parts, walk_part, walk_parts

PROG = "compact"


def plan(root: Path, cfg: StoreConfig, now_ms: int, force: bool, protect: bool,
         respect_delete_when: bool = False) -> dict:
    """What expiry would delete now, and why each other CommitLog file is kept (pure reads of
    the store)."""
    names = sorted(p.name for p in (root / "commitlog").iterdir() if p.name.isdigit())
    files = [(n, (root / "commitlog" / n).stat().st_mtime_ns // 1_000_000) for n in names]
    decision = plan_commitlog_deletion(files, now_ms, RetentionPolicy.from_config(cfg),
                                       disk_used_ratio(root), force, hour_gate=respect_delete_when)
    delete: list[str] = list(decision.delete)
    guarded: dict[str, Hold] = {}
    if protect and delete:
        with StoreFiles(root, cfg) as store_files:
            delete, guarded = guard(delete, cfg.mappedFileSizeCommitLog,
                                    holds(store_files.queues, read_consumer_offsets(root)))
    live_writer = is_locked(root)
    why = {**decision.kept,
           **{name: (f"group {h.group} has not read {h.topic}/{h.queue_id} from offset "
                     f"{h.committed} (stored at {h.commitlog_offset})") for name, h in guarded.items()}}
    if live_writer and names:
        why[names[-1]] += "; a live writer holds the store"
    return {"reason": decision.reason, "delete": delete,
            "kept": {name: why[name] for name in names if name not in delete},
            "live_writer": live_writer}


def checked_walk(spark: SparkSession, root: Path, cfg: StoreConfig, start: int,
                 names: list[str] | None = None) -> tuple[list[ScanRange], ValidParts]:
    """Walk the CommitLog from ``start`` (or only the files ``names``) with CRCs checked and
    nothing built: the ranges walked, and the records before the end of valid data (where one
    walk would stop), counted per range."""
    files = commitlog_files(root, cfg)
    start = max(start, files[0][1]) if files else start
    ranges = [r for r in plan_ranges(root, cfg, DEFAULT_SPLIT_BYTES, start)
              if names is None or codec.format_file_name(r.file_start) in names]
    with spark_progress(spark, "check"):
        summaries = walk_parts(spark.sparkContext, ranges, "", cfg.delay_levels_ms, False, False)
    return ranges, valid_parts(summaries, ranges, start, lambda i, at: walk_part(
        i, ranges[i], "", cfg.delay_levels_ms, False, False, at=at))


def checked_options(cfg: StoreConfig, columns: Sequence[str]) -> dict[str, str]:
    """The ``rocketmq`` source options of the store's CommitLog with ``columns`` only, CRCs not
    checked again (:func:`checked_walk` did): readers keep to the offsets found valid."""
    return {**job_support.source_options(cfg), "checkCRC": "false", "columns": ",".join(columns)}


def checked_source(spark: SparkSession, root: Path, cfg: StoreConfig,
                   columns: Sequence[str]) -> DataFrame:
    """The ``rocketmq`` source over the store's CommitLog (:func:`checked_options`): callers
    filter it to the offsets found valid."""
    return spark.read.format("rocketmq").options(**checked_options(cfg, columns)).load(str(root))


def file_counts(spark: SparkSession, root: Path, cfg: StoreConfig, names: list[str]) -> dict[str, int]:
    """The valid records of each CommitLog file ``names``, by a light pass (CRC-checked walks,
    nothing built); valid data ending inside them (damage) raises CorruptRecordError."""
    size = cfg.mappedFileSizeCommitLog
    ranges, valid = checked_walk(spark, root, cfg, int(names[0]), names)
    last_end = int(names[-1]) + size
    if valid.end < last_end:
        raise CorruptRecordError(
            f"{root / 'commitlog'}: valid data ends at offset {valid.end} "
            f"({valid.reason or 'no valid record starts there'}), inside the files to archive "
            f"({names[0]}..{names[-1]}); nothing was archived or deleted (recover the store first)")
    counts = {name: 0 for name in names}
    for p in valid.parts:
        counts[codec.format_file_name(ranges[p.part].file_start)] += p.records
    return counts


def archived_offsets(spark: SparkSession, lake: str, store_name: str, names: list[str],
                     file_size: int) -> DataFrame | None:
    """(commitlog_file, commitlog_offset) of the store's archived records in the files ``names``
    (None: no archive table yet)."""
    uri = table_uri(lake, ARCHIVE_TABLE)
    if not table_exists(spark, uri):
        return None
    return (spark.read.format("delta").load(uri)
            .where((F.col("store") == store_name) & (F.col("commitlog_offset") >= int(names[0]))
                   & (F.col("commitlog_offset") < int(names[-1]) + file_size))
            .select("commitlog_file", "commitlog_offset"))


def held_counts(held: DataFrame | None, names: list[str]) -> dict[str, int]:
    """Distinct archived records per file of ``names`` (:func:`archived_offsets`)."""
    counts = {name: 0 for name in names}
    if held is not None:
        for r in held.groupBy("commitlog_file").agg(F.countDistinct("commitlog_offset").alias("n")).collect():
            counts[r["commitlog_file"]] = r["n"]
    return counts


def archive(spark: SparkSession, root: Path, lake: str, cfg: StoreConfig, names: list[str],
            store_name: str, counts: dict[str, int], change_data_feed: bool = False) -> dict[str, int]:
    """Write the records of the CommitLog files ``names`` (``counts``: their valid records, by
    :func:`file_counts`) the archive of the lake ``lake`` (a URI) does not hold yet, one Delta
    commit per file that lacks any: a file's records already there (the archive stream's, an
    earlier run's) are left out by offset, so no record is archived twice; a commit carries
    ``txnAppId`` per store and ``txnVersion`` = the file's start offset. Returns the records
    written per file. ``change_data_feed`` switches the table's change data feed on.

    Each file is read straight into its Delta write: bodies and heads go from the kernels' Arrow
    batches to Parquet, nothing is cached."""
    size = cfg.mappedFileSizeCommitLog
    held = archived_offsets(spark, lake, store_name, names, size)
    have = held_counts(held, names)
    uri = table_uri(lake, ARCHIVE_TABLE)
    source = checked_source(spark, root, cfg, SOURCE_COLUMNS)
    schema = archive_rows(source, store_name, size).schema
    ensure_table(spark, uri, schema, PARTITION_COLUMNS,
                 table_properties(append_only=True, change_data_feed=change_data_feed))
    for name in names:
        if have[name] >= counts[name]:
            continue
        start = int(name)
        rows = source.where((F.col("commitlog_offset") >= start)
                            & (F.col("commitlog_offset") < start + size))
        if have[name] and held is not None:
            rows = rows.join(held.where(F.col("commitlog_file") == name).select("commitlog_offset"),
                             "commitlog_offset", "left_anti")
        with spark_progress(spark, f"archive {name}"):
            (archive_rows(rows, store_name, size).write.format("delta").mode("append")
             .partitionBy(*PARTITION_COLUMNS)
             .option("mergeSchema", "true")  # an archive from before a column was added gets it
             .option("txnAppId", f"rocketlake-archive:{store_name}")
             .option("txnVersion", int(name)).save(uri))
    return {name: counts[name] - min(have[name], counts[name]) for name in names}


def archived_prefix(spark: SparkSession, lake: str, store_name: str, names: list[str],
                    counts: dict[str, int], file_size: int) -> tuple[list[str], dict[str, str]]:
    """With the archive stream running for the store (``rocketlake archive``: it archives, compact
    does not, or both would write the records it has not committed yet): the leading files of
    ``names`` the archive holds whole, and why each other one is kept."""
    have = held_counts(archived_offsets(spark, lake, store_name, names, file_size), names)
    whole = 0
    while whole < len(names) and have[names[whole]] >= counts[names[whole]]:
        whole += 1
    return names[:whole], {
        name: (f"the archive stream ({ARCHIVE_PROG}) holds {have[name]} of its {counts[name]} "
               f"records" if i == 0 else "an earlier file is kept") + "; expired once archived"
        for i, name in enumerate(names[whole:])}


def delete(root: Path, cfg: StoreConfig, reason: str, names: list[str]) -> dict:
    """Delete the planned CommitLog files and what they leave behind (store.retention's rules)."""
    with StoreFiles(root, cfg) as files:
        report = apply_deletion(files.commitlog, files.queues,
                                files.index if cfg.messageIndexEnable else None,
                                CommitLogDecision(reason, tuple(names)))
    return {"commitlog_min_offset": report.commitlog_min_offset,
            "consume_queue_files": report.consume_queue_files, "index_files": report.index_files}


def compact_topic(spark: SparkSession, root: Path, cfg: StoreConfig, topic: str) -> dict:
    """Merge the topic's records since the last compaction with its current segment, keep the
    latest per key, and swap in the new segment."""
    meta = SegmentMeta.load(root, topic)
    _, valid = checked_walk(spark, root, cfg, meta.source_end)
    first = valid.parts[0].first if valid.parts else None
    start, end = (first if first is not None else valid.end), valid.end
    # planned here, not by Spark's planner processes: a cold session's first source read
    # starts three (rocketmq_source.planned_on_driver)
    options = {**checked_options(cfg, ("commitlog_offset", "size", "topic", "queue_id",
                                        "queue_offset", "sys_flag", "properties")),
               "startingOffsets": json.dumps({"commitlogOffset": start}),
               "endingOffsets": json.dumps({"commitlogOffset": end}), "topics": topic}
    fresh = (planned_on_driver(spark, str(root), options).where(gets_unit())
             .select("topic", "queue_id", F.col("queue_offset").alias("origin_offset"),
                     "commitlog_offset", "size", "properties")
             .withColumn("source", F.lit("store")))
    old = _segment_frame(spark, root, cfg, topic, meta)
    rows = latest_per_key(with_compaction_key(fresh.unionByName(old) if old is not None else fresh)) \
        .orderBy("queue_id", "origin_offset").collect()
    kept = [KeptRecord(r["queue_id"], r["origin_offset"],
                       _read_raw(root if r["source"] == "store" else segment_path(root, topic), cfg,
                                 r["commitlog_offset"], r["size"])) for r in rows]
    rep = write_segment(root, topic, kept, end, cfg)
    return {"kept": rep.kept, "source_end": end, "translated_offsets": rep.translated_offsets}


def _segment_frame(spark: SparkSession, root: Path, cfg: StoreConfig, topic: str,
                   meta: SegmentMeta) -> DataFrame | None:
    """The current segment's records (small: one per key) as rows like the source's."""
    seg = segment_path(root, topic)
    if not seg.exists():
        return None
    rows = []
    with MessageStore(seg, cfg, read_only=True) as ms:
        for rec in ms.commitlog.walk_records():
            origin = meta.origin[rec.queue_id][rec.queue_offset]
            rows.append((rec.topic, rec.queue_id, origin, rec.commitlog_offset, rec.size,
                         rec.properties, "segment"))
    schema = ("topic string, queue_id int, origin_offset long, commitlog_offset long, size int, "
              "properties map<string,string>, source string")
    return spark.createDataFrame(rows, schema)


def _read_raw(root: Path, cfg: StoreConfig, offset: int, size: int) -> bytes:
    name = root / "commitlog" / codec.format_file_name(offset - offset % cfg.mappedFileSizeCommitLog)
    with open(name, "rb") as f:
        f.seek(offset % cfg.mappedFileSizeCommitLog)
        return f.read(size)


def maintain(root: Path, cfg: StoreConfig, lake: str, store_name: str | None = None,
             now_ms: int | None = None, *, protect_unconsumed: bool = False, force: bool = False,
             respect_delete_when: bool = False, topics: list[str] | None = None,
             dry_run: bool = False, database: str | None = None,
             change_data_feed: bool = False, master: str | None = None) -> dict:
    """The whole job on the store ``root`` (see the module doc) with the lake ``lake`` (a URI);
    returns its summary. Retention is evaluated at ``now_ms`` (default: now); ``topics`` are
    compacted besides the configured ones; ``dry_run`` only plans; ``database`` registers the
    lake's archive and run log in that catalog database; ``master`` is the Spark master of a
    session this starts."""
    started = time.time_ns() // 1_000_000
    root = check_store(root)
    job_support.refuse_5x_queues(root, PROG)
    job_support.refuse_commitlog_elsewhere(root, cfg, PROG, "expires CommitLog files by deleting them")
    store_name = lake_store_name(root, store_name)
    now = now_ms if now_ms is not None else started
    summary: dict = {"plan": plan(root, cfg, now, force, protect_unconsumed, respect_delete_when)}
    compact_topics = compaction_topics(root, topics or [])
    if dry_run:
        summary["compact_topics"] = compact_topics
        return summary
    spark = build_session(f"rocketlake-{PROG}", master=master)
    names = summary["plan"]["delete"]
    if names:
        counts = file_counts(spark, root, cfg, names)
        if has_checkpoint(spark, lake, store_name):
            names, kept = archived_prefix(spark, lake, store_name, names, counts,
                                          cfg.mappedFileSizeCommitLog)
            summary["plan"]["delete"] = names
            summary["plan"]["kept"] = dict(sorted({**summary["plan"]["kept"], **kept}.items()))
            summary["archived"] = {}
        else:
            summary["archived"] = archive(spark, root, lake, cfg, names, store_name, counts,
                                          change_data_feed)
    if names:
        summary["deleted"] = delete(root, cfg, summary["plan"]["reason"], names)
    summary["compacted"] = {t: compact_topic(spark, root, cfg, t) for t in compact_topics}
    record_run(lake, PROG, root, started, "ok", summary)
    if database:
        register(spark, database, lake, (ARCHIVE_TABLE, RUNS_TABLE))
    return summary


def run(a: argparse.Namespace) -> int:
    """``rocketlake compact`` (options in :mod:`rocketlake.jobs.job_commands`): prints the summary as JSON."""
    print(json.dumps(maintain(a.store, job_support.store_config(a), a.lake, a.store_name, a.now,
                              protect_unconsumed=a.protect_unconsumed, force=a.force,
                              respect_delete_when=a.respect_delete_when, topics=a.topic,
                              dry_run=a.dry_run, database=a.database,
                              change_data_feed=a.change_data_feed, master=a.master)))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``spark-submit jobs/compact.py [options]`` (the options of :data:`job_commands.JOBS`)."""
    return job_main(PROG, run, argv)


if __name__ == "__main__":
    sys.exit(main())
