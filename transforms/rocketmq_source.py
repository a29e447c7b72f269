"""``spark.read.format("rocketmq").load(store_root)``: a RocketMQ store as a Spark table.

A Python data source (``pyspark.sql.datasource``). The driver plans partitions from file names and
sizes only; each task maps its files and builds Arrow batches with the compiled kernels
(``transforms.commitlog_batch``), so no Python object is made per message and a column nobody
asked for is never built.

Options (names are case-insensitive):

- ``kind``: ``messages`` (default; one row per CommitLog record, partitions are byte ranges of
  the CommitLog files) or ``consumequeue`` (one row per ConsumeQueue unit, a partition per queue).
- ``columns``: a comma list; only those columns exist and are built (Python data sources get no
  projection push-down, so a job that needs no bodies says so here).
- ``checkCRC``: ``true`` (default) checks every body CRC; ``false`` reads past CRC mismatches.
- ``splitBytes``: CommitLog range size (default 64 MiB); ``mappedFileSizeCommitLog`` /
  ``mappedFileSizeConsumeQueue``: file sizes (default: the size of the first file found; a
  first file no store has, empty or not whole ConsumeQueue units, is named as damage);
  ``messageDelayLevel``: the broker's delay levels, for ``tags_code`` of delayed messages.

Filters on ``commitlog_offset`` (=, <, <=, >, >=) are pushed down and skip whole ranges and
files; filters on ``store_timestamp`` are pushed down and applied to the walked records before
any column is built (store times are not ordered by offset, so no file is skipped on them).

Torn or corrupt data: rows stop where valid data ends, as the library's scan does. A task whose
walk meets zeros or damage checks whether any record follows (later in the file, or at the head
of a later file). If none does, this is the end of the CommitLog (a crashed or live broker's torn
tail): damage is logged as a WARNING naming the file, the offset and what is wrong, and rows stop
there. If records follow, other tasks would read them past the end of valid data, so the task
fails the query with a CorruptRecordError saying where valid data ends, why, and where records
resume (``checkCRC=false`` reads past a CRC mismatch; anything else needs the store recovered).

Sessions from ``jobs.spark_session.build_session`` have the source registered (:func:`register`);
on a plain SparkSession call :func:`register` first.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from rocketlake.store import codec
from rocketlake.store.config import load_config
from rocketlake.store.consume_queue import load_queues
from rocketlake.store.errors import CorruptRecordError
from rocketlake.store.file_sizes import with_commitlog_size, with_consume_queue_size
from rocketlake.store.kernels import records as kr
from rocketlake.store.store_dir import check_store
from rocketlake.transforms.commitlog_batch import (
    Stretch,
    blank_at,
    find_record_start,
    message_columns,
    walk_range,
)
from rocketlake.transforms.commitlog_scan import (
    DEFAULT_SPLIT_BYTES,
    ScanRange,
    commitlog_files,
    open_on_executor,
    plan_ranges,
    record_after,
)

log = logging.getLogger(__name__)

_LONG, _INT, _STR = LongType(), IntegerType(), StringType()
MESSAGE_SCHEMA = StructType([
    StructField("commitlog_offset", _LONG, False), StructField("size", _INT, False),
    StructField("topic", _STR), StructField("queue_id", _INT, False),
    StructField("queue_offset", _LONG, False), StructField("sys_flag", _INT, False),
    StructField("flag", _INT, False), StructField("born_timestamp", _LONG, False),
    StructField("store_timestamp", _LONG, False), StructField("born_host", _STR),
    StructField("store_host", _STR), StructField("tags_code", _LONG, False),
    StructField("keys", ArrayType(_STR)), StructField("properties", MapType(_STR, _STR)),
    StructField("body", BinaryType()), StructField("msg_id", _STR),
    StructField("magic", _LONG, False), StructField("body_crc", _INT, False),
    StructField("reconsume_times", _INT, False),
    StructField("prepared_transaction_offset", _LONG, False)])
CONSUME_QUEUE_SCHEMA = StructType([
    StructField("topic", _STR, False), StructField("queue_id", _INT, False),
    StructField("queue_offset", _LONG, False), StructField("commitlog_offset", _LONG, False),
    StructField("size", _INT, False), StructField("tags_code", _LONG, False)])
KINDS = {"messages": MESSAGE_SCHEMA, "consumequeue": CONSUME_QUEUE_SCHEMA}
#: CommitLog bytes walked per Arrow batch (plus one record)
BATCH_BYTES = 16 << 20
_UNBOUNDED = (-(1 << 63), 1 << 63)
FILTER_COLUMNS = ("commitlog_offset", "store_timestamp")


def register(spark: SparkSession) -> None:
    """Register the source on ``spark`` and enable the filter push-down it implements (Spark
    refuses a Python source with ``pushFilters`` while ``spark.sql.python.filterPushdown.enabled``
    is off)."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(RocketMQDataSource)


@dataclass(frozen=True)
class QueuePartition:
    """The files of one ConsumeQueue, as (path, start byte offset), in order."""
    topic: str
    queue_id: int
    files: tuple[tuple[str, int], ...]


class RocketMQDataSource(DataSource):
    """The ``rocketmq`` format: see the module docstring for options and behaviour."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> StructType:
        kind = self.options.get("kind", "messages").lower()
        if kind not in KINDS:
            raise ValueError(f"rocketmq source: kind {kind!r} is none of {', '.join(KINDS)}")
        full = KINDS[kind]
        wanted = self.options.get("columns")
        if wanted is None:
            return full
        names = [c.strip() for c in wanted.split(",") if c.strip()]
        unknown = [c for c in names if c not in full.fieldNames()]
        if unknown or not names:
            raise ValueError(f"rocketmq source: columns {unknown or wanted!r} not among "
                             f"{', '.join(full.fieldNames())}")
        return StructType([full[c] for c in names])

    def reader(self, schema: StructType) -> DataSourceReader:
        root = self.options.get("path")
        if not root:
            raise ValueError("rocketmq source: give the store root: .load(store_root)")
        if self.options.get("kind", "messages").lower() == "consumequeue":
            return ConsumeQueueReader(Path(root), schema, self.options)
        return CommitLogReader(Path(root), schema, self.options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 (Spark's name)
        """``spark.readStream.format("rocketmq")``: ``transforms.rocketmq_stream``."""
        from rocketlake.transforms.rocketmq_stream import RocketMQStreamReader

        root = self.options.get("path")
        if not root:
            raise ValueError("rocketmq source: give the store root: .load(store_root)")
        if self.options.get("kind", "messages").lower() != "messages":
            raise ValueError("rocketmq source: a stream reads kind=messages (CommitLog records) only")
        return RocketMQStreamReader(Path(root), schema, self.options)


#: the store.file_sizes rule of each size option the source takes
_SIZE_RULES = {"mappedFileSizeCommitLog": with_commitlog_size,
               "mappedFileSizeConsumeQueue": with_consume_queue_size}


def _file_size(options: Any, name: str, root: Path) -> int:
    """The store's ``name`` file size, from its files (``store.file_sizes``); the option, when
    given, must agree with them (SettingError naming both) and stands when there are none."""
    given = options.get(name)
    explicit = {name: given} if given is not None else {}
    return int(getattr(_SIZE_RULES[name](root, load_config(explicit), explicit), name))


def range_batches(buf: np.ndarray, r: ScanRange, schema: StructType, check_crc: bool,
                  delay_levels_ms: Sequence[int],
                  mask: Callable[[dict[str, np.ndarray]], np.ndarray | None] | None = None,
                  ) -> Generator[pa.RecordBatch, None, Stretch | None]:
    """The ``schema`` columns of the records starting in ``r`` (``buf``: its file's bytes), as
    Arrow batches, only the rows ``mask`` keeps (given the ``commitlog_offset`` and
    ``store_timestamp`` columns; None: all). Returns the walk's last stretch (where and why it
    stopped), None when no record starts in ``r``. The one reader of a range, batch and stream."""
    arrow = to_arrow_schema(schema, timezone="UTC")
    types = {f.name: f.type for f in arrow}
    pos = 0 if r.lo == 0 else find_record_start(buf, r.file_start, r.lo, r.hi)
    if pos >= r.hi:
        return None
    for s in walk_range(buf, r.file_start, pos, r.hi, check_crc, BATCH_BYTES):
        raw = s.raw
        keep = None if mask is None else mask({"commitlog_offset": raw[:, kr.OFFSET],
                                                "store_timestamp": raw[:, kr.STORE_TS]})
        if keep is not None:
            raw = raw[keep]
        if len(raw):
            cols = message_columns(buf, raw, arrow.names, types, delay_levels_ms)
            yield pa.RecordBatch.from_arrays([cols[n] for n in arrow.names], schema=arrow)
    return s


class _BoundsReader(DataSourceReader):
    """Half-open bounds ``[lo, hi)`` on integer columns, from pushed-down comparisons."""

    bounded: tuple[str, ...] = ()

    def __init__(self, schema: StructType) -> None:
        self.schema = schema
        self.bounds: dict[str, tuple[int, int]] = {}

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:  # noqa: N802 (Spark's name)
        for f in filters:
            if not self._push(f):
                yield f

    def _push(self, f: Filter) -> bool:
        column: tuple[str, ...] = getattr(f, "attribute", ())
        if len(column) != 1 or column[0] not in self.bounded:
            return False
        v = getattr(f, "value", None)
        if v.__class__ is not int:
            return False
        lo, hi = self.bounds.get(column[0], _UNBOUNDED)
        if isinstance(f, EqualTo):
            lo, hi = max(lo, v), min(hi, v + 1)
        elif isinstance(f, GreaterThan):
            lo = max(lo, v + 1)
        elif isinstance(f, GreaterThanOrEqual):
            lo = max(lo, v)
        elif isinstance(f, LessThan):
            hi = min(hi, v)
        elif isinstance(f, LessThanOrEqual):
            hi = min(hi, v + 1)
        else:
            return False
        self.bounds[column[0]] = (lo, hi)
        return True

    def _mask(self, columns: dict[str, np.ndarray]) -> np.ndarray | None:
        """Rows within every bound (None: all rows)."""
        mask = None
        for name, (lo, hi) in self.bounds.items():
            col = columns[name]
            m = (col >= lo) & (col < hi)
            mask = m if mask is None else mask & m
        return mask


class CommitLogReader(_BoundsReader):
    """One row per CommitLog record; partitions are byte ranges (``commitlog_scan.plan_ranges``)."""

    bounded = FILTER_COLUMNS

    def __init__(self, root: Path, schema: StructType, options: Any) -> None:
        super().__init__(schema)
        self.root = check_store(root)
        self.file_size = _file_size(options, "mappedFileSizeCommitLog", root)
        self.split_bytes = int(options.get("splitBytes", DEFAULT_SPLIT_BYTES))
        self.check_crc = options.get("checkCRC", "true").lower() != "false"
        levels = options.get("messageDelayLevel")
        self.delay_levels_ms = (load_config({"messageDelayLevel": levels}).delay_levels_ms
                                if levels else codec.DELAY_LEVELS_MS)

    def partitions(self) -> list[InputPartition]:
        lo, hi = self.bounds.get("commitlog_offset", _UNBOUNDED)
        return [InputPartition(r) for r in plan_ranges(self.root, self.file_size, self.split_bytes)
                if r.file_start + r.hi > lo and r.file_start + r.lo < hi]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        r: ScanRange | None = partition.value
        if r is None:  # Spark reads one empty partition when there are none
            return
        buf = open_on_executor(r.path)
        s = yield from range_batches(buf, r, self.schema, self.check_crc, self.delay_levels_ms,
                                     self._mask)
        if s is None:
            return
        end, status, error = s.end, s.status, s.error
        if status == kr.LIMIT and end < buf.size and not blank_at(buf, end):
            # The next range begins with the record at `end`: it must be one, or data ends here.
            if find_record_start(buf, r.file_start, r.hi, end) < end:
                raise CorruptRecordError(
                    f"{r.path}: bytes inside the record ending at offset {r.file_start + end} look "
                    f"like a record start; read with another splitBytes")
            (nxt,) = walk_range(buf, r.file_start, end, end + 1, self.check_crc)
            status, error = nxt.status if not len(nxt.raw) else kr.LIMIT, nxt.error
        if status in (kr.LIMIT, kr.BLANK):
            return
        self._ended(r, end, error)

    def _ended(self, r: ScanRange, pos: int, error: str | None) -> None:
        """Valid data ends at ``pos`` of ``r``'s file (zeros, or ``error``): warn, or raise when
        records follow."""
        at = r.file_start + pos
        resume = record_after(commitlog_files(self.root, self.file_size), at)
        why = error or "zeros"
        if resume is not None:
            raise CorruptRecordError(
                f"{r.path}: valid data ends at offset {at} ({why}) but records follow at offset "
                f"{resume}: the library stops at {at} (read with checkCRC=false if it is a CRC "
                f"mismatch; otherwise the store needs recovery)")
        if error is not None:
            log.warning("%s: valid data ends at offset %d: %s; rows stop there", r.path, at, error)


class ConsumeQueueReader(_BoundsReader):
    """One row per ConsumeQueue unit (the units RocketMQ's ConsumeQueue would serve: offset >= 0,
    size > 0, no pre-blank), a partition per queue."""

    bounded = ("commitlog_offset",)

    def __init__(self, root: Path, schema: StructType, options: Any) -> None:
        super().__init__(schema)
        self.root = check_store(root)
        self.file_size = _file_size(options, "mappedFileSizeConsumeQueue", root)

    def partitions(self) -> list[InputPartition]:
        queues = load_queues(self.root, self.file_size)
        try:
            return [InputPartition(QueuePartition(t, q, tuple((str(mf.path), mf.start)
                                                              for mf in cq.files.files)))
                    for (t, q), cq in sorted(queues.items())]
        finally:
            for cq in queues.values():
                cq.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        part: QueuePartition | None = partition.value
        if part is None:
            return
        arrow = to_arrow_schema(self.schema, timezone="UTC")
        for path, start in part.files:
            if not os.path.getsize(path):
                continue
            units = np.memmap(path, dtype=codec.CQ_UNIT_DTYPE, mode="r")
            offset = units["commitlog_offset"].astype(np.int64)
            size = units["size"].astype(np.int64)
            keep = (offset >= 0) & (size > 0) & (size != codec.CQ_BLANK_UNIT_SIZE)
            mask = self._mask({"commitlog_offset": offset})
            idx = np.flatnonzero(keep if mask is None else keep & mask)
            if not idx.size:
                continue
            cols = {"topic": pa.repeat(pa.scalar(part.topic, pa.string()), idx.size),
                    "queue_id": pa.array(np.full(idx.size, part.queue_id, dtype=np.int32)),
                    "queue_offset": pa.array(start // codec.CQ_UNIT_SIZE + idx.astype(np.int64)),
                    "commitlog_offset": pa.array(offset[idx]),
                    "size": pa.array(size[idx].astype(np.int32)),
                    "tags_code": pa.array(units["tags_code"][idx].astype(np.int64))}
            yield pa.RecordBatch.from_arrays([cols[n] for n in arrow.names], schema=arrow)


__all__: Sequence[str] = ("RocketMQDataSource", "register", "MESSAGE_SCHEMA", "CONSUME_QUEUE_SCHEMA")
