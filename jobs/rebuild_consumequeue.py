"""Rebuild a store's ConsumeQueues from its CommitLog with Spark, byte-identical to the library.

    spark-submit jobs/rebuild_consumequeue.py --store DIR [--output DIR | --incremental]
        [--set NAME=VALUE ...] [--split-bytes N]

Full (default): write every queue aside, then swap the new `consumequeue/` in. ``--incremental``:
scan from the ConsumeQueues' current max physical offset and append in place. ``--output DIR``:
write `DIR/consumequeue/` and leave the store alone. The scan and the unit extraction run on
Spark; the driver writes the (sorted) units into files.
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from rocketlake.jobs import job_support
from rocketlake.jobs.cli import job_main
from rocketlake.jobs.spark_progress import spark_progress
from rocketlake.store import codec
from rocketlake.store.codec import CQ_UNIT_DTYPE
from rocketlake.store.config import StoreConfig
from rocketlake.store.consume_queue import write_consume_queue_files
from rocketlake.store.errors import UnsafePathError
from rocketlake.store.paths import queue_dir
from rocketlake.store.store_files import StoreFiles
from rocketlake.transforms.commitlog_scan import DEFAULT_SPLIT_BYTES, scan_store
from rocketlake.transforms.consume_queue_units import UNIT_COLUMNS, consumequeue_units

PROG = "rebuild-consumequeue"


def collect_units(units: DataFrame) -> pa.Table:
    """The units on the driver, sorted by topic, queue and queue offset."""
    return units.toArrow().sort_by([("topic", "ascending"), ("queue_id", "ascending"),
                                    ("queue_offset", "ascending")])


def check_names(table: pa.Table, store: Path) -> None:
    """Refuse units whose topic or queue id no writer could have stored (RocketMQ's recovery ends
    valid data at such a record): UnsafePathError naming the first one's CommitLog offset."""
    topic = table.column("topic")
    bad_topics = pa.array([t for t in pc.unique(topic).to_pylist() if not codec.is_topic(t)],
                          pa.string())
    bad = pc.or_(pc.is_in(topic, bad_topics), pc.less(table.column("queue_id"), 0))
    if not pc.any(bad).as_py():
        return
    first = table.filter(bad).sort_by("commitlog_offset").slice(0, 1).to_pylist()[0]
    raise UnsafePathError(
        f"{store}: CommitLog record at offset {first['commitlog_offset']} has topic "
        f"{first['topic']!r} / queue {first['queue_id']}, which no writer could have stored (valid "
        f"data ends there); refusing to build a ConsumeQueue path from it, nothing was written")


def write_units(table: pa.Table, cq_dir: Path, file_size: int,
                existing: dict[tuple[str, int], int], progress: Callable[[str, int], None]
                ) -> dict[str, int]:
    """Write sorted units into ``cq_dir/<topic>/<queueId>/`` (``store.paths.queue_dir``);
    ``existing`` maps (topic, queue) to the queue's current max offset. Returns units written
    per topic."""
    topic = table.column("topic").to_numpy(zero_copy_only=False)
    qid = table.column("queue_id").to_numpy()
    qoff = table.column("queue_offset").to_numpy()
    units = np.empty(table.num_rows, dtype=CQ_UNIT_DTYPE)
    assert CQ_UNIT_DTYPE.names is not None, "a structured dtype has field names"
    for name in CQ_UNIT_DTYPE.names:
        units[name] = table.column(name).to_numpy()
    bounds = np.flatnonzero((topic[1:] != topic[:-1]) | (qid[1:] != qid[:-1])) + 1
    written: dict[str, int] = {}
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, table.num_rows]):
        if lo == hi:
            continue
        t, q = str(topic[lo]), int(qid[lo])
        n = write_consume_queue_files(queue_dir(cq_dir.parent, t, q, cq_dir.name), qoff[lo:hi],
                                      units[lo:hi], file_size, existing.get((t, q), 0))
        written[t] = written.get(t, 0) + n
        progress(t, int(hi - lo))
    return written


@job_support.locks_store
def rebuild_consumequeue(spark: SparkSession, store: Path, cfg: StoreConfig,
                         output: Path | None = None, incremental: bool = False,
                         split_bytes: int = DEFAULT_SPLIT_BYTES) -> dict[str, int]:
    """Rebuild the ConsumeQueues of ``store`` (see the module doc); returns units per topic."""
    if output is not None and (output / "consumequeue").exists() and any((output / "consumequeue").iterdir()):
        raise FileExistsError(f"{output / 'consumequeue'}: already exists and is not empty")
    existing: dict[tuple[str, int], int] = {}
    start = None
    if incremental:
        with StoreFiles(store, cfg) as files:
            existing = {k: cq.max_offset for k, cq in files.queues.items()}
            ends = [cq.max_physic_offset for cq in files.queues.values() if cq.max_physic_offset >= 0]
        start = max(ends) if ends else None
    with spark_progress(spark, "scan"):
        scan = scan_store(spark, store, cfg.mappedFileSizeCommitLog, start, split_bytes,
                          delay_levels_ms=cfg.delay_levels_ms, columns=[*UNIT_COLUMNS, "sys_flag"])
    try:
        job_support.report_scan(PROG, scan.end)
        with spark_progress(spark, "units"):
            table = collect_units(consumequeue_units(scan.messages))
    finally:
        scan.close()
    check_names(table, store)
    counts = Counter(table.column("topic").to_pylist())
    cq_dir = job_support.target_dir(store, "consumequeue", output, incremental)
    with job_support.progress_bars(counts) as progress:
        written = write_units(table, cq_dir, cfg.mappedFileSizeConsumeQueue, existing, progress)
    if output is None and not incremental:
        job_support.swap_in(store, "consumequeue", cq_dir)
    return written


def run(args: argparse.Namespace) -> int:
    """``rocketlake rebuild-consumequeue`` (options in :mod:`rocketlake.jobs.cli`)."""
    return job_support.run_rebuild(PROG, rebuild_consumequeue, "units", "consumequeue", args)


def main(argv: list[str] | None = None) -> int:
    return job_main(PROG, argv)


if __name__ == "__main__":
    sys.exit(main())
