"""The CommitLog scan as a Spark job: byte ranges in, one row per record out (``mapInArrow``).

``plan_ranges`` splits the CommitLog files into ranges (several per file); ``parse_ranges``
parses them in parallel with ``transforms.commitlog_batch``; ``scan_end`` finds where valid
data ends across all ranges (first body CRC mismatch, first gap in the record chain, or the
end of written data), the same place the library's single-process scan stops.
"""
from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from rocketlake.store import codec
from rocketlake.store.mapped_file import MappedFileQueue, data_end
from rocketlake.transforms.commitlog_batch import CHAIN_FIELDS, batch_schema, parse_range

#: Default range size: several ranges per 1 GiB CommitLog file.
DEFAULT_SPLIT_BYTES = 64 << 20


@dataclass(frozen=True)
class ScanRange:
    """Byte range ``[lo, hi)`` (file positions) of the CommitLog file at ``path``."""
    path: str
    file_start: int
    lo: int
    hi: int


@dataclass(frozen=True)
class ScanEnd:
    """Where valid data ends, and what the scan saw on the way."""
    end: int                 # CommitLog offset one past the last valid record
    reason: str | None       # why it ended there; None for the normal end (zeros / last file end)
    records: int             # valid records before ``end``
    bad_crc: int             # records whose body CRC did not match (anywhere in the scan)
    first_bad_crc: int | None


def commitlog_files(root: Path, file_size: int) -> list[tuple[Path, int]]:
    """The store's CommitLog files as (path, start offset), checked like the store loads them."""
    q = MappedFileQueue(Path(root) / "commitlog", file_size)
    try:
        q.load()
        return [(mf.path, mf.start) for mf in q.files]
    finally:
        q.close()


def plan_ranges(root: Path, file_size: int, split_bytes: int = DEFAULT_SPLIT_BYTES,
                start: int | None = None) -> list[ScanRange]:
    """Ranges covering the CommitLog from ``start`` (default: its first byte) to its end; none
    past the end of a file's data (``mapped_file.data_end``: a pre-allocated file's unwritten tail
    holds no record, and reading it would only fault in zeros)."""
    if split_bytes <= 0:
        raise ValueError(f"split size must be positive, got {split_bytes}")
    out = []
    for path, fstart in commitlog_files(root, file_size):
        if start is not None and fstart + file_size <= start:
            continue
        lo = max(0, (start or 0) - fstart)
        for a in range(lo, min(file_size, data_end(path)), split_bytes):
            out.append(ScanRange(str(path), fstart, a, min(a + split_bytes, file_size)))
    return out


def ranges_frame(spark: SparkSession, ranges: list[ScanRange]) -> DataFrame:
    """One row and one partition per range."""
    rows = [(r.path, r.file_start, r.lo, r.hi) for r in ranges]
    schema = "path string, file_start long, lo long, hi long"
    rdd = spark.sparkContext.parallelize(rows, max(1, len(rows)))
    return spark.createDataFrame(rdd, schema)


def scan_schema():
    """Spark schema of :func:`parse_ranges` rows."""
    return from_arrow_schema(batch_schema())


def parse_ranges(ranges: DataFrame, check_crc: bool = True,
                 delay_levels_ms: tuple[int, ...] = codec.DELAY_LEVELS_MS,
                 columns: list[str] | None = None) -> DataFrame:
    """Parse every range of ``ranges`` (rows of :func:`ranges_frame`) into record rows;
    ``columns``: the string columns to build (the others stay null), default all."""

    def parse(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for r in batch.to_pylist():
                buf = open_on_executor(r["path"])
                yield parse_range(buf, r["file_start"], r["lo"], r["hi"], check_crc,
                                  delay_levels_ms, columns)
                del buf

    return ranges.mapInArrow(parse, scan_schema())


def open_on_executor(path: str) -> np.ndarray:
    """Map a CommitLog file on the executor running the scan task. The store is read where it lies:
    a file the driver listed but this host cannot see means the store is not at the same path on
    every executor, which FileNotFoundError says, naming the path and the host."""
    try:
        return np.memmap(path, dtype=np.uint8, mode="r")
    except FileNotFoundError as e:
        raise FileNotFoundError(
            f"{path}: no such CommitLog file on executor host {socket.gethostname()}; the store is "
            f"read where it lies, so it must be a path every executor sees (a shared mount, or "
            f"local[*] on the broker's host)") from e


def scan_end(records: DataFrame, start: int, files: list[tuple[Path, int]]) -> ScanEnd:
    """Walk the ranges' summaries in order from ``start`` to find the end of valid data.

    Within a range the parser already checked the chain; across ranges, each range's first
    record must start where the previous range's last record said the next one would.
    """
    summary = (records.groupBy("range_start")
               .agg(F.min("commitlog_offset").alias("first"),
                    F.min("break_at").alias("break_at"),
                    F.min_by("break_reason", "break_at").alias("reason"),
                    F.max("next_offset").alias("tail"),
                    F.count(F.lit(1)).alias("n"),
                    F.sum((~F.col("crc_ok")).cast("long")).alias("bad_crc"),
                    F.min(F.when(~F.col("crc_ok"), F.col("commitlog_offset"))).alias("first_bad"))
               .orderBy("range_start").collect())
    expected, end, reason, walked = start, None, None, 0
    for row in summary:
        if row["first"] != expected:
            end = expected
            break
        walked += 1
        if row["break_at"] is not None:
            end, reason = row["break_at"], row["reason"]
            break
        expected = row["tail"]
    if end is None:
        end = expected
    elif reason is None and not zeros_at(end, files):
        reason = f"offset {end}: no valid record starts here"
    if walked == len(summary) and (not summary or summary[-1]["tail"] <= end):
        counted = sum(r["n"] for r in summary)  # no record lies past the end
    else:
        counted = records.filter(F.col("commitlog_offset") < end).count()
    bad = [r for r in summary if r["bad_crc"]]
    return ScanEnd(end, reason, counted, sum(r["bad_crc"] for r in bad),
                   min((r["first_bad"] for r in bad), default=None))


def zeros_at(offset: int, files: list[tuple[Path, int]]) -> bool:
    """True when the 8 bytes at ``offset`` are zeros (or lie past the last file)."""
    for path, fstart in files:
        size = os.path.getsize(path)
        if fstart <= offset < fstart + size:
            with open(path, "rb") as f:
                f.seek(offset - fstart)
                return not any(f.read(8))
    return True


def valid_messages(records: DataFrame, end: int) -> DataFrame:
    """The message columns of the records before ``end`` (drops the chain bookkeeping)."""
    chain = {f.name for f in CHAIN_FIELDS}
    cols = [c for c in records.columns if c not in chain]
    return records.filter(F.col("commitlog_offset") < end).select(*cols)



@dataclass
class StoreScan:
    """A parsed CommitLog: ``records`` (persisted scan rows), ``messages`` (the valid ones'
    message columns) and where valid data ended."""
    records: DataFrame
    messages: DataFrame
    end: ScanEnd

    def close(self) -> None:
        self.records.unpersist()


def scan_store(spark: SparkSession, root: Path, file_size: int, start: int | None = None,
               split_bytes: int = DEFAULT_SPLIT_BYTES,
               delay_levels_ms: tuple[int, ...] = codec.DELAY_LEVELS_MS,
               columns: list[str] | None = None) -> StoreScan:
    """Scan the store's CommitLog from ``start`` (default: its first record), CRCs checked;
    ``columns`` keeps only those message columns (a smaller cache)."""
    files = commitlog_files(root, file_size)
    first = files[0][1] if files else 0
    start = first if start is None else max(start, first)
    ranges = plan_ranges(root, file_size, split_bytes, start)
    records = parse_ranges(ranges_frame(spark, ranges), True, delay_levels_ms, columns)
    if columns is not None:
        keep = ["commitlog_offset"] + [c for c in columns if c != "commitlog_offset"]
        records = records.select(*keep, *[f.name for f in CHAIN_FIELDS])
    records = records.persist(StorageLevel.MEMORY_AND_DISK)
    end = scan_end(records, start, files)
    return StoreScan(records, valid_messages(records, end.end), end)
