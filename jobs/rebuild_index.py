"""Rebuild a store's IndexFiles from its CommitLog with Spark, byte-identical to the library.

    spark-submit jobs/rebuild_index.py --store DIR [--output DIR | --incremental]
        [--set NAME=VALUE ...] [--split-bytes N]

Full (default): write every index file aside, then swap the new `index/` in. ``--incremental``:
index the messages after the index's last indexed offset, continuing its last file in place.
``--output DIR``: write `DIR/index/` and leave the store alone. The scan, the key extraction and
the whole put chain run on Spark; the driver writes the placed entries into files.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from datetime import tzinfo
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from rocketlake.jobs import job_support
from rocketlake.jobs.cli import job_main
from rocketlake.jobs.spark_progress import spark_progress
from rocketlake.store import codec
from rocketlake.store.codec import INDEX_ENTRY_DTYPE
from rocketlake.store.config import StoreConfig
from rocketlake.store.index import write_index_file
from rocketlake.store.store_files import StoreFiles
from rocketlake.transforms.commitlog_scan import DEFAULT_SPLIT_BYTES, scan_store
from rocketlake.transforms.index_entries import (
    KEY_INPUT_COLUMNS,
    IndexChain,
    IndexStart,
    index_chain,
    index_keys,
)

PROG = "rebuild-index"


@dataclass(frozen=True)
class OpenFile:
    """The store's last index file, which an incremental rebuild continues."""
    path: Path
    begin_ts: int
    begin_phy: int
    slot_count: int
    full: bool


def _existing(spark: SparkSession, files: StoreFiles, cfg: StoreConfig
              ) -> tuple[IndexStart, OpenFile | None, int]:
    """(where new keys continue, the open last file, last indexed CommitLog offset)."""
    svc = files.index
    if not svc.files:
        return IndexStart(), None, -1
    last = svc.files[-1]
    full = last.index_count >= cfg.maxIndexNum
    used = np.flatnonzero(np.asarray(last.slots) != 0)
    slots = None if full or used.size == 0 else spark.createDataFrame(pa.table({
        "slot": pa.array(used.astype(np.int32)),
        "value": pa.array(np.asarray(last.slots)[used].astype(np.int32))}))
    start = IndexStart(min(last.index_count, cfg.maxIndexNum), last.begin_ts, last.end_ts, slots)
    return start, OpenFile(last.path, last.begin_ts, last.begin_phy, last.slot_count, full), svc.end_phy


def write_index_files(index_dir: Path, chain: IndexChain, slot_num: int, entry_num: int,
                      open_file: OpenFile | None, zone: tzinfo | None = None) -> list[Path]:
    """Write the placed entries into files under ``index_dir`` (file 0 continues ``open_file``
    unless it is full or absent; new files are named in ``zone``, None: local). Returns the
    files written."""
    files = chain.files.orderBy("file_no").collect()
    entries = chain.entries.toArrow().sort_by([("file_no", "ascending"), ("position", "ascending")])
    slots = chain.slots.toArrow()
    e_file = entries.column("file_no").to_numpy()
    s_file = slots.column("file_no").to_numpy()
    s_slot, s_value = slots.column("slot").to_numpy(), slots.column("value").to_numpy()
    previous = open_file.path.name if open_file is not None else None
    out = []
    index_dir.mkdir(parents=True, exist_ok=True)
    with job_support.progress_bars({"index files": len(files)}) as advance:
        for f in files:
            n = f["file_no"]
            continued = open_file if n == 0 and open_file is not None and not open_file.full else None
            path = (continued.path if continued is not None
                    else index_dir / codec.next_index_file_name(f["first_ts"], previous, zone))
            lo, hi = np.searchsorted(e_file, [n, n + 1])
            part = entries.slice(lo, hi - lo)
            rows = np.empty(part.num_rows, dtype=INDEX_ENTRY_DTYPE)
            assert INDEX_ENTRY_DTYPE.names is not None, "a structured dtype has field names"
            for name in INDEX_ENTRY_DTYPE.names:
                rows[name] = part.column(name).to_numpy()
            first_pos = part.column("position")[0].as_py()
            if continued is not None and first_pos > 1:  # the file's first put set its begin already
                begin_ts, begin_phy = continued.begin_ts, continued.begin_phy
            else:
                begin_ts, begin_phy = f["first_ts"], f["first_phy"]
            touched = s_file == n
            header = (begin_ts, f["last_ts"], begin_phy, f["last_phy"],
                      f["new_slots"] + (continued.slot_count if continued is not None else 0),
                      f["index_count"])
            write_index_file(path, slot_num, entry_num, header, s_slot[touched], s_value[touched],
                             rows, first_pos)
            out.append(path)
            previous = path.name
            advance("index files", 1)
    return out


@job_support.locks_store
def rebuild_index(spark: SparkSession, store: Path, cfg: StoreConfig, output: Path | None = None,
                  incremental: bool = False, split_bytes: int = DEFAULT_SPLIT_BYTES,
                  bucket_bytes: int | None = None) -> dict[str, int]:
    """Rebuild the index files of ``store`` (see the module doc); returns keys per topic."""
    if output is not None and (output / "index").exists() and any((output / "index").iterdir()):
        raise FileExistsError(f"{output / 'index'}: already exists and is not empty")
    start, open_file, end_phy, scan_from = IndexStart(), None, -1, None
    if incremental:
        with StoreFiles(store, cfg) as files:
            start, open_file, end_phy = _existing(spark, files, cfg)
            if end_phy >= 0:
                scan_from = end_phy + files.commitlog.read(end_phy).size
    with spark_progress(spark, "scan"):
        scan = scan_store(spark, store, cfg.mappedFileSizeCommitLog, scan_from, split_bytes,
                          delay_levels_ms=cfg.delay_levels_ms, columns=list(KEY_INPUT_COLUMNS))
    try:
        job_support.report_scan(PROG, scan.end)
        keys = index_keys(scan.messages.filter(F.col("commitlog_offset") > end_phy)).persist()
        with spark_progress(spark, "keys"):
            counts = {r["topic"]: r["n"] for r in
                      keys.groupBy("topic").agg(F.count(F.lit(1)).alias("n")).collect()}
        chain = index_chain(keys, cfg.maxHashSlotNum, cfg.maxIndexNum, start,
                            bucket_bytes or split_bytes)
        index_dir = job_support.target_dir(store, "index", output, incremental)
        with spark_progress(spark, "index"):
            write_index_files(index_dir, chain, cfg.maxHashSlotNum, cfg.maxIndexNum, open_file,
                              cfg.index_zone)
        chain.release()
        keys.unpersist()
    finally:
        scan.close()
    if output is None and not incremental:
        job_support.swap_in(store, "index", index_dir)
    return dict(counts)


def run(args: argparse.Namespace) -> int:
    """``rocketlake rebuild-index`` (options in :mod:`rocketlake.jobs.cli`)."""
    return job_support.run_rebuild(PROG, rebuild_index, "index keys", "index", args)


def main(argv: list[str] | None = None) -> int:
    return job_main(PROG, argv)


if __name__ == "__main__":
    sys.exit(main())
