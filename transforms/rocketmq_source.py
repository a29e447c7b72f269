"""``spark.read.format("rocketmq").load(store_root)``: a RocketMQ store as a Spark table.

A Python data source (``pyspark.sql.datasource``). The driver plans partitions from file names and
sizes only; each task maps its files and builds Arrow batches with the compiled kernels
(``transforms.commitlog_batch``), so no Python object is made per message and a column nobody
asked for is never built.

Options (names are case-insensitive; parsed and checked by ``transforms.source_options``, where
an unknown one is an error listing the known ones):

- ``kind``: ``messages`` (default; one row per CommitLog record, partitions are byte ranges of
  the CommitLog files) or ``consumequeue`` (one row per ConsumeQueue unit whose record is in the
  CommitLog, a partition per queue).
- ``columns``: a comma list; only those columns exist and are built (Python data sources get no
  projection push-down, so a job that needs no bodies says so here).
- ``checkCRC``: ``true`` (default) checks every body CRC; ``false`` reads past CRC mismatches.
- ``splitBytes``: CommitLog range size (default 64 MiB); ``mappedFileSizeCommitLog`` /
  ``mappedFileSizeConsumeQueue``: file sizes (default: the size of the files, which must agree
  with each other and with the option when given; a file no store has, empty or not whole
  ConsumeQueue units, is named as damage);
  ``messageDelayLevel``: the broker's delay levels, for ``tags_code`` of delayed messages;
  ``storePathCommitLog`` / ``readOnlyCommitLogStorePaths``: a CommitLog outside
  `<path>/commitlog` or over several directories (``,`` between them), as the broker settings of
  those names (``commitlog_scan.commitlog_files``).
- ``consumable``: ``true`` keeps only what consumers are served: records with a ConsumeQueue
  unit (no PREPARED or ROLLBACK, ``store.dispatch.goes_to_consume_queue``) of topics served as
  such (``store.dispatch.served_as_such``: no SCHEDULE_TOPIC_XXXX copies, transaction half / op
  records or 5.x ``rmq_sys_`` topics). A delayed message is a row under its real topic once the
  broker re-put it; ``false`` (default) gives every record.
- ``inflateBodies``: ``true`` gives ``body`` as the producer sent it, a compressed body (SYSFLAG
  bit 0x1: clients compress bodies over 4 KiB) inflated in the task (``store.compression``);
  ``false`` (default) gives the body as stored, so a row is the record byte for byte (``size``
  and ``body_crc`` are of the stored body; the archive keeps it so). ``compressed`` says which.

Columns of ``messages`` (``MESSAGE_SCHEMA``): the record's fields, then ``store_time`` /
``born_time`` (TIMESTAMP of the epoch ms), ``tags``, ``real_topic`` / ``real_queue_id`` of
SCHEDULE_TOPIC_XXXX and ``rmq_sys_wheel_timer`` copies, ``delay_level`` of SCHEDULE_TOPIC_XXXX
copies, ``transaction_state``, ``compressed`` (``transforms.commitlog_batch.message_columns``).
- ``topics`` (Kafka's ``subscribe``; a comma list) or ``topicPattern`` (``subscribePattern``; a
  regular expression a whole topic name matches): only those topics' rows, of either kind.
- ``startingOffsets`` / ``endingOffsets`` (``earliest``, ``latest``, or JSON ``{"commitlogOffset":
  N}``) and ``startingTimestamp`` / ``endingTimestamp`` (epoch ms): the records starting in a
  CommitLog range ``[start, end)`` (``transforms.commitlog_positions`` has the exact rules).

Filters on ``commitlog_offset`` (=, <, <=, >, >=) are pushed down and skip whole ranges and
files; filters on ``store_timestamp`` and ``store_time`` (its TIMESTAMP, exact to the
microsecond) are pushed down and applied to the walked records before any column is built (store
times are not ordered by offset, so no file is skipped on them). ``store_timestamp`` is a long:
compare it with epoch ms; a time string needs ``store_time``.

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
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from rocketlake.store import codec, dispatch
from rocketlake.store.consume_queue import load_queues, not_file_queues, valid_units
from rocketlake.store.errors import CorruptRecordError, SettingError
from rocketlake.store.kernels import records as kr
from rocketlake.store.paths import CONSUME_QUEUE_DIR
from rocketlake.store.store_dir import check_store
from rocketlake.transforms import topic_reads
from rocketlake.transforms.commitlog_batch import (
    Stretch,
    blank_at,
    find_record_start,
    message_columns,
    span_array,
    topic_mask,
    walk_range,
)
from rocketlake.transforms.commitlog_positions import UNBOUNDED, offset_range
from rocketlake.transforms.commitlog_scan import (
    ScanRange,
    commitlog_files,
    open_on_executor,
    plan_ranges,
    record_after,
    zeros_at,
)
from rocketlake.transforms.source_options import SourceOptions, parse

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
    StructField("prepared_transaction_offset", _LONG, False),
    StructField("store_time", TimestampType()), StructField("born_time", TimestampType()),
    StructField("tags", _STR), StructField("real_topic", _STR), StructField("real_queue_id", _INT),
    StructField("delay_level", _INT), StructField("transaction_state", _STR, False),
    StructField("compressed", BooleanType(), False)])
CONSUME_QUEUE_SCHEMA = StructType([
    StructField("topic", _STR, False), StructField("queue_id", _INT, False),
    StructField("queue_offset", _LONG, False), StructField("commitlog_offset", _LONG, False),
    StructField("size", _INT, False), StructField("tags_code", _LONG, False)])
KINDS = {"messages": MESSAGE_SCHEMA, "consumequeue": CONSUME_QUEUE_SCHEMA}
#: CommitLog bytes walked per Arrow batch (plus one record)
BATCH_BYTES = 16 << 20
FILTER_COLUMNS = ("commitlog_offset", "store_timestamp", "store_time")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
#: transaction types whose records get a ConsumeQueue unit (``store.dispatch``)
_QUEUED_TYPES = [t for t in codec.TRANSACTION_TYPES if dispatch.goes_to_consume_queue(t)]


def register(spark: SparkSession) -> None:
    """Register the source on ``spark`` and enable the filter push-down it implements (Spark
    refuses a Python source with ``pushFilters`` while ``spark.sql.python.filterPushdown.enabled``
    is off)."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(RocketMQDataSource)


def planned_on_driver(spark: SparkSession, path: str, options: Mapping[str, str]) -> DataFrame:
    """The rows of ``spark.read.format("rocketmq").options(**options).load(path)``, with the
    partitions planned in this process and read by the executors' Python workers (``mapInArrow``).

    Spark plans a Python data source in Python processes of its own (the source, its filters, its
    partitions: a new process each on a session's first such read, each importing this module and
    numba), about 2 s of CPU on 2 cores; this plan costs none. Filters are not pushed down: bound
    the read with the options (``startingOffsets`` / ``endingOffsets``, ``topics``)."""
    source = RocketMQDataSource({**options, "path": path})
    schema = source.schema()
    reader = source.reader(schema)
    parts = reader.partitions()

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for i in batch.column(0).to_pylist():
                yield from reader.read(parts[i])

    tasks = max(1, min(len(parts), spark.sparkContext.defaultParallelism))
    return spark.range(len(parts), numPartitions=tasks).mapInArrow(read, schema)


@dataclass(frozen=True)
class QueuePartition:
    """The files of one ConsumeQueue, as (path, start byte offset), in order, and the CommitLog's
    minimum offset (its first file's start; 0 without files)."""
    topic: str
    queue_id: int
    files: tuple[tuple[str, int], ...]
    commitlog_min: int


class RocketMQDataSource(DataSource):
    """The ``rocketmq`` format: see the module docstring for options and behaviour."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> StructType:
        opts = parse(self.options, streaming=None)
        full = KINDS[opts.kind]
        if opts.columns is None:
            return full
        unknown = [c for c in opts.columns if c not in full.fieldNames()]
        if unknown:
            raise SettingError(f"rocketmq source: option columns: {', '.join(unknown)} not among "
                               f"{', '.join(full.fieldNames())}")
        return StructType([full[c] for c in opts.columns])

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = parse(self.options, streaming=False)
        if opts.kind == "consumequeue":
            return ConsumeQueueReader(schema, opts)
        return CommitLogReader(schema, opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 (Spark's name)
        """``spark.readStream.format("rocketmq")``: ``transforms.rocketmq_stream``."""
        from rocketlake.transforms.rocketmq_stream import RocketMQStreamReader

        opts = parse(self.options, streaming=True)
        if opts.kind != "messages":
            raise SettingError("rocketmq source: a stream reads kind=messages (CommitLog records) only")
        return RocketMQStreamReader(schema, opts)



def range_batches(buf: np.ndarray, r: ScanRange, schema: StructType, check_crc: bool,
                  delay_levels_ms: Sequence[int],
                  mask: Callable[[np.ndarray, np.ndarray], np.ndarray | None] | None = None,
                  inflate_bodies: bool = False) -> Generator[pa.RecordBatch, None, Stretch | None]:
    """The ``schema`` columns of the records starting in ``r`` (``buf``: its file's bytes), as
    Arrow batches, only the rows ``mask`` keeps (given ``buf`` and the walked rows
    ``kernels.records`` columns; None: all), compressed bodies inflated with ``inflate_bodies``
    (``commitlog_batch.message_columns``). Returns the walk's last stretch (where and why it
    stopped), None when no record starts in ``r``. The one reader of a range, batch and stream."""
    arrow = to_arrow_schema(schema, timezone="UTC")
    types = {f.name: f.type for f in arrow}
    pos = 0 if r.lo == 0 else find_record_start(buf, r.file_start, r.lo, r.hi)
    if pos >= r.hi:
        return None
    for s in walk_range(buf, r.file_start, pos, r.hi, check_crc, BATCH_BYTES):
        raw = s.raw
        keep = None if mask is None else mask(buf, raw)
        if keep is not None:
            raw = raw[keep]
        if len(raw):
            cols = message_columns(buf, raw, arrow.names, types, delay_levels_ms, inflate_bodies)
            yield pa.RecordBatch.from_arrays([cols[n] for n in arrow.names], schema=arrow)
    return s


class _BoundsReader(DataSourceReader):
    """Half-open bounds ``[lo, hi)`` on integer columns, from pushed-down comparisons. A
    TIMESTAMP column (Spark hands the filter an aware ``datetime``) is bounded in microseconds and
    applied to the epoch-ms column it is built from (:data:`TIMESTAMP_OF`)."""

    bounded: tuple[str, ...] = ()
    #: TIMESTAMP column -> the epoch-ms column it is built from
    TIMESTAMP_OF = {"store_time": "store_timestamp"}

    def __init__(self, schema: StructType, opts: SourceOptions) -> None:
        self.schema = schema
        self.opts = opts
        self.root = check_store(Path(opts.path))
        self.bounds: dict[str, tuple[int, int]] = {}
        lo, hi = UNBOUNDED if opts.streaming else offset_range(opts)  # a stream's come from Spark
        if (lo, hi) != UNBOUNDED:
            self.bounds["commitlog_offset"] = (lo, hi)

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:  # noqa: N802 (Spark's name)
        for f in filters:
            if not self._push(f):
                yield f

    def _push(self, f: Filter) -> bool:
        column: tuple[str, ...] = getattr(f, "attribute", ())
        if len(column) != 1 or column[0] not in self.bounded:
            return False
        v = getattr(f, "value", None)
        if column[0] in self.TIMESTAMP_OF and isinstance(v, datetime) and v.tzinfo is not None:
            v = (v - _EPOCH) // _MICROSECOND
        elif column[0] in self.TIMESTAMP_OF or v.__class__ is not int:
            return False
        lo, hi = self.bounds.get(column[0], UNBOUNDED)
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
            if name in self.TIMESTAMP_OF:  # ms * 1000 in [lo, hi) <=> ms in [ceil(lo/1000), ceil(hi/1000))
                name, lo, hi = self.TIMESTAMP_OF[name], -(-lo // 1000), -(-hi // 1000)
            col = columns[name]
            m = (col >= lo) & (col < hi)
            mask = m if mask is None else mask & m
        return mask


class CommitLogReader(_BoundsReader):
    """One row per CommitLog record; partitions are byte ranges (``commitlog_scan.plan_ranges``)."""

    bounded = FILTER_COLUMNS

    def __init__(self, schema: StructType, opts: SourceOptions) -> None:
        super().__init__(schema, opts)
        #: topics of pushed-down ``topic = x`` / ``topic IN (...)`` filters (None: none)
        self.pushed_topics: frozenset[str] | None = None
        #: where the CommitLog files are and their size (the options over the defaults)
        self.cfg = opts.commitlog_config()
        self.file_size = self.cfg.mappedFileSizeCommitLog
        self.split_bytes = opts.split_bytes
        self.check_crc = opts.check_crc
        self.delay_levels_ms = opts.delay_levels_ms
        self.consumable = opts.consumable
        self.inflate_bodies = opts.inflate_bodies

    def _push(self, f: Filter) -> bool:
        """Also ``topic = 'x'`` and ``topic IN (...)``: rows of those topics (and the
        ConsumeQueue path, ``transforms.topic_reads``)."""
        if getattr(f, "attribute", ()) == ("topic",) and isinstance(f, (EqualTo, In)):
            values = tuple(f.value) if isinstance(f, In) else (f.value,)
            if all(isinstance(t, str) for t in values):
                kept = frozenset(values)
                self.pushed_topics = kept if self.pushed_topics is None else self.pushed_topics & kept
                return True
        return super()._push(f)

    def _topics(self) -> frozenset[str] | None:
        """The topics whose rows are read (None: all), from the options and pushed filters."""
        chosen = self.opts.topics
        if self.opts.topic_pattern is not None:
            chosen = frozenset(d.name for d in (self.root / CONSUME_QUEUE_DIR).glob("*")
                               if self.opts.topic_selected(d.name))
        if self.pushed_topics is not None:
            chosen = self.pushed_topics if chosen is None else chosen & self.pushed_topics
        return chosen

    def partitions(self) -> list[InputPartition]:
        lo, hi = self.bounds.get("commitlog_offset", UNBOUNDED)
        topics, start, plan = self._topics(), None, None
        # the ConsumeQueue path reads 4.9 ConsumeQueue files: a 5.x RocksDB ConsumeQueue or a
        # BatchCQ topic (the pattern may match one without a consumequeue/ directory) is walked
        if self.opts.consumable and topics is not None and \
                all(dispatch.served_as_such(t) for t in topics) and \
                not_file_queues(self.root, None if self.opts.topic_pattern else topics) is None:
            files = commitlog_files(self.root, self.cfg)
            plan = topic_reads.plan(
                self.root, self.opts.file_size("mappedFileSizeConsumeQueue"), files[0][1], topics,
                lo, hi, self.split_bytes) if files else None
        if plan is not None:
            start = max(plan.watermark, files[0][1])
            if zeros_at(start, files):  # the CommitLog ends there: nothing to walk
                hi = min(hi, start)
        walked = [InputPartition(r)
                  for r in plan_ranges(self.root, self.cfg, self.split_bytes, start)
                  if r.file_start + r.hi > lo and r.file_start + r.lo < hi]
        return [InputPartition(p) for p in (plan.parts if plan else ())] + walked

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        r: ScanRange | tuple[topic_reads.UnitSlice, ...] | None = partition.value
        if r is None:  # Spark reads one empty partition when there are none
            return
        if isinstance(r, tuple):
            arrow = to_arrow_schema(self.schema, timezone="UTC")
            yield from topic_reads.read_part(r, self.root, self.cfg,
                                             self.check_crc, arrow, self.delay_levels_ms,
                                             self.inflate_bodies)
            return
        buf = open_on_executor(r.path)
        s = yield from range_batches(buf, r, self.schema, self.check_crc, self.delay_levels_ms,
                                     self.row_mask, self.inflate_bodies)
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

    def row_mask(self, buf: np.ndarray, raw: np.ndarray) -> np.ndarray | None:
        """The walked rows ``raw`` (of the file ``buf``) this read keeps: within the pushed-down
        bounds, of the selected topics, only what consumers are served with ``consumable``
        (None: all rows)."""
        mask = self._mask({"commitlog_offset": raw[:, kr.OFFSET],
                           "store_timestamp": raw[:, kr.STORE_TS]})
        for keep in (self._served(buf, raw) if self.consumable else None,
                     self._topic_mask(buf, raw)):
            if keep is not None:
                mask = keep if mask is None else mask & keep
        return mask

    @staticmethod
    def _served(buf: np.ndarray, raw: np.ndarray) -> np.ndarray:
        """Rows consumers are served: a ConsumeQueue unit (``dispatch.goes_to_consume_queue``) of
        a topic served as such (``dispatch.served_as_such``)."""
        return (np.isin(raw[:, kr.SYS_FLAG] & codec.TRANSACTION_MASK, _QUEUED_TYPES)
                & topic_mask(buf, raw, dispatch.served_as_such))

    def _topic_mask(self, buf: np.ndarray, raw: np.ndarray) -> np.ndarray | None:
        """Rows of the topics the ``topics`` / ``topicPattern`` option selects (None: all rows);
        each distinct topic of the batch is tested once."""
        if self.opts.topics is None and self.opts.topic_pattern is None and \
                self.pushed_topics is None:
            return None
        names = span_array(buf, raw[:, kr.TOPIC_START], raw[:, kr.TOPIC_LEN]).dictionary_encode()
        keep = np.array([self.opts.topic_selected(t) and (self.pushed_topics is None
                                                          or t in self.pushed_topics)
                         for t in names.dictionary.to_pylist()], dtype=np.bool_)
        return keep[names.indices.to_numpy()]

    def _ended(self, r: ScanRange, pos: int, error: str | None) -> None:
        """Valid data ends at ``pos`` of ``r``'s file (zeros, or ``error``): warn, or raise when
        records follow."""
        at = r.file_start + pos
        resume = record_after(commitlog_files(self.root, self.cfg), at)
        why = error or "zeros"
        if resume is not None:
            raise CorruptRecordError(
                f"{r.path}: valid data ends at offset {at} ({why}) but records follow at offset "
                f"{resume}: the library stops at {at} (read with checkCRC=false if it is a CRC "
                f"mismatch; otherwise the store needs recovery)")
        if error is not None:
            log.warning("%s: valid data ends at offset %d: %s; rows stop there", r.path, at, error)


class ConsumeQueueReader(_BoundsReader):
    """One row per ConsumeQueue unit whose record is in the CommitLog (the units RocketMQ's
    ConsumeQueue would serve: ``store.consume_queue.valid_units``), a partition per queue."""

    bounded = ("commitlog_offset",)

    def __init__(self, schema: StructType, opts: SourceOptions) -> None:
        super().__init__(schema, opts)
        self.file_size = opts.file_size("mappedFileSizeConsumeQueue")

    def partitions(self) -> list[InputPartition]:
        logs = commitlog_files(self.root, self.opts.commitlog_config())
        commitlog_min = logs[0][1] if logs else 0
        queues = load_queues(self.root, self.file_size)
        try:
            return [InputPartition(QueuePartition(t, q, tuple((str(mf.path), mf.start)
                                                              for mf in cq.files.files), commitlog_min))
                    for (t, q), cq in sorted(queues.items()) if self.opts.topic_selected(t)]
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
            keep = valid_units(offset, size, part.commitlog_min)
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


__all__: Sequence[str] = ("RocketMQDataSource", "register", "planned_on_driver", "MESSAGE_SCHEMA",
                          "CONSUME_QUEUE_SCHEMA")
