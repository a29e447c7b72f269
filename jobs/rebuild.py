"""Rebuild a store's ConsumeQueues and IndexFiles from one CommitLog scan on Spark, byte-identical
to the library (and to RocketMQ's own rebuild).

    spark-submit jobs/rebuild.py --store DIR [--structures consumequeue,index]
        [--output DIR | --incremental] [--set NAME=VALUE ...] [--split-bytes N]

Full (default): write the structures aside, then swap the new directories in
(``store.swap_journal``: a crash meanwhile is completed by the next writer open). ``--incremental``:
scan from where the structures stop (the ConsumeQueues' max physical offset, the index's last
indexed offset) and append in place, continuing the last index file. ``--output DIR``: write
``DIR/consumequeue/`` and ``DIR/index/`` and leave the store alone. The topics of the ConsumeQueues
written are declared in ``config/topics.json`` of the store (or of ``DIR``) before their files are
written (``store.topic_config``: merged, no declared topic dropped), so a broker serves them.

The driver plans CommitLog ranges, reads each scan task's small summary, and plans the writes;
executor tasks do the rest (:mod:`rocketlake.transforms.store_rebuild`). The scan's parts live
in a staging directory next to the output, removed at the end, success or not.
"""
from __future__ import annotations

import argparse
import logging
import shutil
import sys
import time
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path

from pyspark.sql import SparkSession

from rocketlake.jobs import job_support
from rocketlake.jobs.job_commands import job_main
from rocketlake.jobs.rebuild_structures import STRUCTURES
from rocketlake.jobs.spark_progress import spark_progress
from rocketlake.store import swap_journal
from rocketlake.store.config import StoreConfig
from rocketlake.store.errors import CorruptRecordError, UnsafePathError
from rocketlake.store.safe_files import empty_directory
from rocketlake.store.store_dir import check_outside, check_store
from rocketlake.store.store_files import StoreFiles
from rocketlake.store.topic_config import declare_topics, queue_counts
from rocketlake.transforms import store_rebuild as sr
from rocketlake.transforms.commitlog_scan import (
    DEFAULT_SPLIT_BYTES,
    ScanEnd,
    commitlog_files,
    plan_ranges,
    record_after,
    zeros_at,
)

PROG = "rebuild"
log = logging.getLogger(__name__)
#: topics a rebuild's log line names with their counts (a broker may have 10,000 and more)
NAMED_TOPICS = 20
#: what a rebuild can build, by its directory in the store


@dataclass
class Rebuilt:
    """What a rebuild wrote: ConsumeQueue units and index keys per topic, and the scan's end."""
    units: dict[str, int] = field(default_factory=dict)
    keys: dict[str, int] = field(default_factory=dict)
    end: ScanEnd | None = None


@dataclass(frozen=True)
class _Start:
    """Where an incremental rebuild continues: the scan start, the ConsumeQueues' max offsets,
    the index's last indexed offset and its open file."""
    scan_from: int | None = None
    queues: dict[tuple[str, int], int] = field(default_factory=dict)
    keys_after: int = -1
    index: sr.IndexTail = sr.IndexTail()


def _incremental_start(store: Path, cfg: StoreConfig, structures: tuple[str, ...]) -> _Start:
    with StoreFiles(store, cfg) as files:
        starts: list[int | None] = []
        queues: dict[tuple[str, int], int] = {}
        if "consumequeue" in structures:
            queues = {k: cq.max_offset for k, cq in files.queues.items()}
            ends = [cq.max_physic_offset for cq in files.queues.values() if cq.max_physic_offset >= 0]
            starts.append(max(ends) if ends else None)
        keys_after, tail = -1, sr.IndexTail()
        if "index" in structures:
            svc = files.index
            keys_after = svc.end_phy
            starts.append(keys_after + files.commitlog.read(keys_after).size if keys_after >= 0 else None)
            if svc.files:
                last = svc.files[-1]
                tail = sr.IndexTail(last.path.name, last.end_phy, last.end_ts, last.free)
    scan_from = None if None in starts else min(s for s in starts if s is not None)
    return _Start(scan_from, queues, keys_after, tail)


def _check_names(parts: list[sr.PartSummary], store: Path) -> None:
    """Refuse units whose topic or queue id no writer could have stored (RocketMQ's recovery ends
    valid data at such a record): UnsafePathError naming the first one's CommitLog offset."""
    bad = min((p.bad_name for p in parts if p.bad_name is not None), default=None)
    if bad is not None:
        at, topic, qid = bad
        raise UnsafePathError(
            f"{store}: CommitLog record at offset {at} has topic {topic!r} / queue {qid}, which no "
            f"writer could have stored (valid data ends there); refusing to build a ConsumeQueue "
            f"path from it, nothing was written")


def _check_end(store: Path, files: list[tuple[Path, int]], end: int, reason: str | None) -> None:
    """Refuse a CommitLog whose valid data ends at ``end`` while records follow (damage, or zeros,
    before the end of the data): structures built up to ``end`` would cover only part of the
    store's records. CorruptRecordError naming the offset, why, and where records resume."""
    resume = record_after(files, end)
    if resume is not None:
        raise CorruptRecordError(
            f"{store}: the CommitLog's valid data ends at offset {end} ({reason or 'zeros'}) but "
            f"records follow at offset {resume}; refusing to rebuild from part of the CommitLog, "
            f"nothing was written (the store needs recovery)")


def _run_write(task: tuple[sr.IndexJob | None, sr.QueueJob | None], staging: str, root: str,
               cq_name: str, cfg: StoreConfig, aside: bool) -> tuple[dict[str, int], dict[str, int]]:
    """One write task on an executor: a share of an index file's slots and a group of queues
    (``aside``: into a new directory, ``store_rebuild.write_queues``); either may be None.
    Returns the slots its puts filled, per index file, and the units it wrote, per topic."""
    index, queues = task
    filled = {} if index is None else {
        index.path: sr.write_index_file_task(index, staging, cfg.maxHashSlotNum, cfg.maxIndexNum)}
    units = {} if queues is None else sr.write_queues(queues, staging, root, cq_name,
                                                      cfg.mappedFileSizeConsumeQueue, aside)
    return filled, units


def check_output(store: Path, output: Path | None, structures: tuple[str, ...],
                 prog: str = PROG) -> None:
    """Refuse what a rebuild of ``structures`` of ``store`` into ``output`` (None: into the store)
    cannot do (no Spark needed): an unknown structure (ValueError), an ``output`` that is the
    store or inside it (UnsafePathError: ``store_dir.check_outside``), a structure's directory
    under ``output`` that holds files (FileExistsError naming it: a rebuild never overwrites
    them), a store with 5.x queues to rebuild into (``job_support.refuse_5x_queues``)."""
    unknown = set(structures) - set(STRUCTURES)
    if unknown or not structures:
        raise ValueError(f"structures must be among {', '.join(STRUCTURES)}, got {', '.join(structures)}")
    if output is not None:
        check_outside(store, output, "the rebuild's --output")
    for name in structures:
        if output is not None and (output / name).is_dir() and any((output / name).iterdir()):
            raise FileExistsError(f"{output / name}: already exists and is not empty (a rebuild "
                                  f"never overwrites files; give a new or empty --output)")
    if output is None:
        job_support.refuse_5x_queues(store, prog)


@job_support.locks_store
def rebuild(spark: SparkSession, store: Path, cfg: StoreConfig, output: Path | None = None,
            incremental: bool = False, split_bytes: int = DEFAULT_SPLIT_BYTES,
            structures: tuple[str, ...] = STRUCTURES, prog: str = PROG) -> Rebuilt:
    """Rebuild ``structures`` of ``store`` from one scan (see the module doc); ``prog`` names the
    command in what it prints. Rebuilding into a store with a 5.x RocksDB ConsumeQueue or
    BatchConsumeQueues is refused (``job_support.refuse_5x_queues``); ``output`` elsewhere is not."""
    check_output(store, output, structures, prog)
    start = _incremental_start(store, cfg, structures) if incremental else _Start()
    files = commitlog_files(store, cfg)
    first = files[0][1] if files else 0
    scan_from = first if start.scan_from is None else max(start.scan_from, first)
    ranges = plan_ranges(store, cfg, split_bytes, scan_from)
    base = output if output is not None else store
    missing = [d for d in (base, *base.parents) if not d.exists()]
    base.mkdir(parents=True, exist_ok=True)
    staging = swap_journal.aside(base, "parts")
    made: list[Path] = missing[-1:]  # what to remove should the rebuild fail: only what it made
    emptied: list[Path] = []  # --output structure directories it was given empty: emptied again
    try:
        want_cq, want_index = "consumequeue" in structures, "index" in structures
        sc = spark.sparkContext
        buckets = sc.defaultParallelism  # the index keys are staged by slot range, one per core
        with spark_progress(spark, "scan"):
            summaries = sr.walk_parts(sc, ranges, str(staging), cfg.delay_levels_ms, want_cq,
                                      want_index, start.keys_after, cfg.maxHashSlotNum, buckets)
        valid = sr.valid_parts(summaries, ranges, scan_from, lambda i, at: sr.walk_part(
            i, ranges[i], str(staging), cfg.delay_levels_ms, want_cq, want_index, start.keys_after, at,
            cfg.maxHashSlotNum, buckets))
        reason = valid.reason
        if reason is not None and valid.gap and zeros_at(valid.end, files):
            reason = None  # zeros after the last record: the normal end
        _check_end(store, files, valid.end, reason)
        end = ScanEnd(valid.end, reason, valid.records)
        job_support.report_scan(prog, end)
        if want_cq:
            _check_names(valid.parts, store)
        result = Rebuilt(end=end)
        shares: list[sr.IndexJob] = []
        queue_jobs: list[sr.QueueJob] = []
        dirs = {name: job_support.target_dir(store, name, output, incremental) for name in structures}
        made += [d for d in dirs.values() if output is None and not incremental]
        if output is not None and not missing:
            made += [d for d in dirs.values() if not d.exists()]
            emptied = [d for d in dirs.values() if d.exists()]  # empty (check_output)
        if want_index:
            dirs["index"].mkdir(parents=True, exist_ok=True)
            index_jobs = sr.plan_index(valid.parts, staging, dirs["index"], cfg.maxIndexNum,
                                       start.index, cfg.index_zone)
            sr.create_index_files(index_jobs, cfg.maxHashSlotNum, cfg.maxIndexNum)
            per_file = -(-sc.defaultParallelism // max(1, len(index_jobs)))  # every core busy
            shares = sr.share_index(index_jobs, cfg.maxHashSlotNum, per_file, buckets)
            for p in valid.parts:
                for t, n in p.key_topics.items():
                    result.keys[t] = result.keys.get(t, 0) + n
        if want_cq:
            queue_jobs = sr.plan_queues(valid.parts, start.queues, sc.defaultParallelism)
            declare_topics(base, queue_counts((t, q) for j in queue_jobs for t, q, _, _ in j.queues))
        # one task per core where it can: task i places index share i and writes queue group i
        # (a PySpark task's own cost, 50-100 ms, and a queue group's closing file system sync
        # are paid once per core, not per piece of work)
        tasks = list(zip_longest(shares, queue_jobs))
        if tasks:
            root, cq_name = (str(dirs["consumequeue"].parent), dirs["consumequeue"].name) if want_cq \
                else ("", "")
            aside = output is not None or not incremental  # a new directory, not the live one
            with spark_progress(spark, "write"):
                done = sc.parallelize(tasks, len(tasks)).map(
                    lambda t: _run_write(t, str(staging), root, cq_name, cfg, aside)).collect()
            filled: dict[str, int] = {}
            for slots, units in done:
                for total, counts in ((filled, slots), (result.units, units)):
                    for t, n in counts.items():
                        total[t] = total.get(t, 0) + n
            if want_index:
                sr.finish_index_files(index_jobs, filled, cfg.maxHashSlotNum, cfg.maxIndexNum)
        made, emptied = [], []  # from here the new directories are the swap's (swap_journal.swap_in)
        if output is None and not incremental:
            swap_journal.swap_in(store, dirs)
        return result
    finally:
        sr.remove_staging(staging)
        for d in made:  # directories this run created (aside dirs, --output or its structures)
            shutil.rmtree(d, ignore_errors=True)
        for d in emptied:  # never half an index or queue set where a reader would take it whole
            empty_directory(d)


def report(prog: str, rebuilt: Rebuilt, structures: tuple[str, ...], target: Path,
           incremental: bool = False) -> None:
    """One line per structure: what was written where, per topic (the first ``NAMED_TOPICS`` by
    name, then how many more); an incremental rebuild that has nothing to write (its scan starts
    at the last record the structures hold) says they are up to date."""
    if incremental and rebuilt.end is not None and not any(rebuilt.units.values()) \
            and not any(rebuilt.keys.values()):
        log.info("%s: up to date: %s under %s already cover the CommitLog to offset %d; nothing "
                 "written", prog, " and ".join(structures), target, rebuilt.end.end)
        return
    for name in structures:
        counts, noun = (rebuilt.units, "units") if name == "consumequeue" else (rebuilt.keys, "index keys")
        named = sorted(counts.items())[:NAMED_TOPICS]
        more = f" and {len(counts) - len(named):,} more topics" if len(counts) > len(named) else ""
        log.info("%s: wrote %d %s for %d topic(s) under %s: %s%s", prog, sum(counts.values()), noun,
                 len(counts), target / name, ", ".join(f"{t}={n}" for t, n in named), more)


def run_structures(prog: str, structures: tuple[str, ...], args: argparse.Namespace) -> int:
    """The command of a rebuild job: build a (Delta-less) session, rebuild, report, and record the
    run in the lake when ``--lake`` is given."""
    from rocketlake.jobs.spark_session import build_session

    started = time.time_ns() // 1_000_000
    # a full or --output rebuild writes its structures anew: their damaged sizes do not stop it
    cfg = job_support.store_config(args, () if args.incremental else structures)
    store = check_store(args.store)
    check_output(store, args.output, structures, prog)  # before Spark starts
    spark = build_session(f"rocketlake {prog}", master=args.master, delta=args.lake is not None)
    rebuilt = rebuild(spark, store, cfg, args.output, args.incremental,
                      args.split_bytes or DEFAULT_SPLIT_BYTES, structures, prog=prog)
    target = args.output or store
    report(prog, rebuilt, structures, target, args.incremental)
    if args.lake is not None:
        from rocketlake.jobs.run_log import record_run

        mode = "output" if args.output else "incremental" if args.incremental else "full"
        for name in structures:
            noun, counts = (("units", rebuilt.units) if name == "consumequeue"
                            else ("index keys", rebuilt.keys))
            record_run(args.lake, prog, store, started, "ok",
                       {"mode": mode, "wrote": {"noun": noun, "per_topic": counts},
                        "target": str(target / name)})
    return 0


def run(args: argparse.Namespace) -> int:
    """``rocketlake rebuild`` (options in :mod:`rocketlake.jobs.job_commands`)."""
    return run_structures(PROG, tuple(args.structures), args)


def main(argv: list[str] | None = None) -> int:
    """``spark-submit jobs/rebuild.py [options]`` (the options of :data:`job_commands.JOBS`)."""
    return job_main(PROG, run, argv)


if __name__ == "__main__":
    sys.exit(main())
