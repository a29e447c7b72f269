"""``spark.readStream.format("rocketmq").load(store_root)``: a RocketMQ store as a Spark stream.

Offsets are CommitLog physical offsets, one number for the whole store:
``{"store": <identity>, "commitlogOffset": N}``, N where the next record to read starts. The
identity is the store root's real path (symbolic links resolved): a query's checkpoint names the
store it read, and a checkpoint used against another store is refused (StreamOffsetError naming
both). A query that restarts also finds its offset where a record of this store starts (or where
the store's data ends), so a store replaced by another at the same path is refused too.

A micro-batch ``[start, end)`` holds the records starting in it. ``latestOffset`` walks from
``start`` with the compiled kernels (``store.record_walk``, CRCs checked unless ``checkCRC=false``)
and never passes the end of complete, valid records: a live writer's half-written tail is read by a
later batch, once it is whole. The walk crosses a file at its BLANK record; valid data ending in
zeros or damage with records after it is damage (CorruptRecordError naming the offsets), as the
batch source says. On a 5.x store whose checkpoint sets a confirmed offset (confirmPhyOffset), no
batch passes it.

Exactly once: ``partitions(start, end)`` depends on the offsets only (the CommitLog's byte ranges
from ``start`` clipped to ``end``, ``commitlog_scan.plan_ranges``), and the bytes below ``end`` never
change once written, so a batch Spark replays after a crash (its offsets are in the checkpoint's
offset log before it runs) yields exactly the rows it yielded before; Delta's streaming sink
commits each batch id once, so the table gets every record once.

Options (besides the batch source's ``columns``, ``checkCRC``, ``splitBytes``, file sizes and
``messageDelayLevel``):

- ``startingOffsets``: ``latest`` (default, as Kafka's streams), ``earliest`` or an offset JSON
  (``store`` optional), used only when the query has no checkpoint; or ``startingTimestamp``
  (epoch ms; not with ``startingOffsets``): from the first record stored at or after it
  (``commitlog_positions.offset_at_time``).
- ``maxRecordsPerTrigger`` / ``maxBytesPerTrigger``: at most that many records / CommitLog bytes
  per batch (at least one record); ``Trigger.AvailableNow`` reads what is there when it starts, in
  batches of that size, and ends.
- ``failOnDataLoss`` (default ``true``): when retention deleted CommitLog files the query had not
  read, fail naming the lost offset range (DataLossError); ``false`` skips to the first file left
  with a WARNING, and counts the bytes skipped.

Progress: the latest offset of each batch's progress (``reportLatestOffset``) is the end of valid
data, with ``bytesBehind`` and ``recordsBehind`` (what is there beyond the batch's end) and
``lostBytes`` (skipped with ``failOnDataLoss=false``): pyspark 4.2's Python sources can report
their latest offset and nothing else (no custom metrics).
"""
from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from rocketlake.store.checkpoint import confirmed_end
from rocketlake.store.errors import CorruptRecordError, DataLossError, StreamOffsetError
from rocketlake.store.kernels import records as kr
from rocketlake.store.record_walk import Walk
from rocketlake.transforms.commitlog_positions import offset_at_time
from rocketlake.transforms.commitlog_scan import (
    ScanRange,
    commitlog_files,
    file_at,
    open_on_executor,
    plan_ranges,
    record_after,
)
from rocketlake.transforms.rocketmq_source import CommitLogReader, range_batches
from rocketlake.transforms.source_options import EARLIEST, LATEST, SourceOptions

log = logging.getLogger(__name__)

STORE, OFFSET = "store", "commitlogOffset"
Files = list[tuple[int, int, np.ndarray]]


def store_identity(root: Path) -> str:
    """What names a store in a stream offset: its root's real path."""
    return os.path.realpath(root)


@dataclass(frozen=True)
class Progress:
    """Where a walk from a batch's start ended: the batch's end (within the read limit) and the
    end of valid data, with the records between them."""
    end: int
    latest: int
    records_behind: int


@dataclass(frozen=True)
class Snapshot:
    """The store's CommitLog files at one moment: paths and start offsets, and their bytes."""
    paths: list[tuple[Path, int]]
    files: Files  #: ``record_walk.Walk``'s (start offset, size, bytes), in order

    @property
    def first(self) -> int | None:
        return self.paths[0][1] if self.paths else None


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The ``rocketmq`` source as a stream: see the module docstring."""

    def __init__(self, schema: StructType, opts: SourceOptions) -> None:
        self.options = opts
        self.scan = CommitLogReader(schema, opts)
        self.root = self.scan.root
        self.identity = store_identity(self.root)
        self.target: int | None = None        # AvailableNow: never past it
        self.known: set[int] = set()          # offsets found to be positions of this store
        self.crc_span = (0, 0)                # CRCs checked in [lo, hi) by this reader
        self.lost: dict[int, int] = {}        # skipped (failOnDataLoss=false): from -> to
        self.progress: Progress | None = None

    # --- the store's files ----------------------------------------------------------------------
    def _snapshot(self) -> Snapshot:
        paths = commitlog_files(self.root, self.scan.cfg)
        return Snapshot(paths, [(start, self.scan.file_size, np.memmap(path, dtype=np.uint8, mode="r"))
                                for path, start in paths])

    def _stop(self) -> int:
        """No walk passes this: AvailableNow's target, a 5.x controller-mode broker's confirmed
        offset (``store.checkpoint.confirmed_end``)."""
        stops = [s for s in (self.target, confirmed_end(self.root)) if s is not None]
        return min(stops) if stops else 1 << 62

    def _offset(self, n: int) -> dict:
        return {STORE: self.identity, OFFSET: n}

    def _position(self, offset: dict, what: str) -> int:
        """The CommitLog offset of a stream offset of this store (StreamOffsetError otherwise)."""
        store, n = offset.get(STORE, self.identity), offset.get(OFFSET)
        if store != self.identity:
            raise StreamOffsetError(
                f"rocketmq source: the {what} offset is of the store {store}, not of {self.identity} "
                f"(a checkpoint belongs to the store it read: give this query a new checkpoint "
                f"location)")
        if n.__class__ is not int or n < 0:
            raise StreamOffsetError(f"rocketmq source: the {what} offset {offset!r} has no "
                                    f"{OFFSET} >= 0")
        return int(n)

    def _check_boundary(self, n: int, snap: Snapshot, what: str) -> None:
        """StreamOffsetError unless ``n`` is where a record of this store starts, or where its
        data ends (offsets below the first file are data loss: :meth:`_available`)."""
        if n in self.known or snap.first is None or n < snap.first:
            return
        for start, size, buf in snap.files:
            if start <= n <= start + size:
                w = Walk([(start, size, buf)], start, n, False)
                for _ in w:
                    pass
                if w.end == n:
                    self.known.add(n)
                    return
        start, size, _ = snap.files[-1]
        raise StreamOffsetError(
            f"rocketmq source: the {what} offset {n} is not where a record of the store "
            f"{self.identity} starts (its CommitLog files span offsets {snap.first} to "
            f"{start + size}): the checkpoint or offset is another store's")

    def _available(self, n: int, snap: Snapshot, upto: int | None) -> int:
        """``n``, or the first file's start when retention deleted the files below it (before
        ``upto``, the batch's end, when known): DataLossError naming the lost range, or with
        ``failOnDataLoss=false`` a WARNING, the bytes counted once."""
        first = snap.first
        if first is None or n >= first:
            return n
        lost_end = first if upto is None else min(first, upto)
        if self.options.fail_on_data_loss:
            raise DataLossError(
                f"rocketmq source: CommitLog offsets {n} to {lost_end} of the store {self.identity} "
                f"were deleted before this query read them (the first file left starts at {first}); "
                f"set failOnDataLoss=false to skip them")
        if self.lost.get(n) != lost_end:
            log.warning("rocketmq source: CommitLog offsets %d to %d of the store %s were deleted "
                        "before this query read them; skipped (failOnDataLoss=false)", n, lost_end,
                        self.identity)
            self.lost[n] = lost_end
        return first

    # --- finding the end of valid data ----------------------------------------------------------
    def _walk(self, snap: Snapshot, start: int, admit: tuple[int, int] | None) -> Progress:
        """Walk valid records from ``start`` (a position) to the end of valid data (or
        :meth:`_stop`): where the first ``admit`` (records, bytes; None: all) of them end, where
        valid data ends, and the records between. CRCs are checked once per reader."""
        stop_at, (lo, hi) = self._stop(), self.crc_span
        covered = lo <= start < hi
        end: int | None = None
        rows = behind = 0
        at = start
        for check_crc, stop in ((False, min(hi, stop_at) if covered else start),
                                (self.scan.check_crc, stop_at)):
            if at >= stop:
                continue
            w = Walk(snap.files, at, stop, check_crc)
            for batch in w:
                if end is not None:
                    behind += len(batch)
                elif admit is not None:
                    offsets, sizes = batch.column(kr.OFFSET), batch.column(kr.SIZE)
                    fit = ((np.arange(len(batch)) + rows < admit[0])
                           & (offsets + sizes - start <= admit[1]))
                    fit[0] |= rows == 0  # at least one record
                    cut = len(batch) if fit.all() else int(np.argmin(fit))
                    rows += cut
                    if cut < len(batch):
                        end, behind = int(offsets[cut]), len(batch) - cut
            at = w.end
            if at < stop:  # valid data ends before the stop
                self._ended(snap, w, check_crc)
                break
        self.crc_span = (lo if covered else start, max(at, hi if covered else at))
        return Progress(at if end is None else end, at, behind)

    def _ended(self, snap: Snapshot, w: Walk, check_crc: bool) -> None:
        """Valid data ends at ``w.end``: the end of the store's data (a live writer's tail), or
        damage when records follow (CorruptRecordError; a writer that completed the record in
        the meantime is no damage)."""
        if w.status in (kr.LIMIT, kr.BLANK):  # past the last file
            return
        resume = record_after(snap.paths, w.end)
        if resume is None:
            return
        again = Walk(snap.files, w.end, w.end + 1, check_crc)
        if any(len(b) for b in again) or again.end > w.end:
            return
        raise CorruptRecordError(
            f"{file_at(self.root, self.scan.cfg, w.end - w.end % self.scan.file_size)}: valid data "
            f"ends at offset {w.end} "
            f"({w.error or 'zeros'}) but records follow at offset {resume}: the stream cannot pass "
            f"it (read with checkCRC=false if it is a CRC mismatch; otherwise the store needs "
            f"recovery)")

    def _data_end(self, snap: Snapshot) -> int:
        """The end of valid data now, walked from the head of the last file that has a record (a
        pre-allocated next file has none while its predecessor is written)."""
        heads = [s for s, _, b in snap.files if kr.find_start(b, s, 0, 1) == 0]
        start = heads[-1] if heads else (snap.first or 0)
        return self._walk(snap, start, None).latest

    # --- DataSourceStreamReader -----------------------------------------------------------------
    def initialOffset(self) -> dict:  # noqa: N802 (Spark's names)
        snap, o = self._snapshot(), self.options
        if o.starting_timestamp is not None:
            found = offset_at_time(snap.paths, o.starting_timestamp)
            n = self._data_end(snap) if found is None else found
        elif o.starting_offsets == EARLIEST:
            n = snap.first or 0
        elif o.starting_offsets == LATEST:
            n = self._data_end(snap)
        else:
            given = o.starting_offsets
            n = self._position({STORE: given.store or self.identity, OFFSET: given.commitlog_offset},
                               "startingOffsets")
            self._check_boundary(n, snap, "startingOffsets")
        self.known.add(n)
        return self._offset(n)

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        o = self.options
        if o.max_records_per_trigger is not None:
            return ReadMaxRows(o.max_records_per_trigger)
        if o.max_bytes_per_trigger is not None:
            return ReadMaxBytes(o.max_bytes_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:  # noqa: N802
        snap = self._snapshot()
        n = self._position(start, "start")
        self._check_boundary(n, snap, "start")
        n = self._available(n, snap, None)
        admit = None
        if not isinstance(limit, ReadAllAvailable):  # both options apply, whichever Spark passes
            rows = getattr(limit, "max_rows", self.options.max_records_per_trigger)
            size = getattr(limit, "max_bytes", self.options.max_bytes_per_trigger)
            admit = (rows or 1 << 62, size or 1 << 62)
        self.progress = self._walk(snap, n, admit) if snap.files else Progress(n, n, 0)
        self.known = {n, self.progress.end}
        return self._offset(self.progress.end)

    def reportLatestOffset(self) -> dict | None:  # noqa: N802
        p = self.progress
        if p is None:
            return None
        return {**self._offset(p.latest), "bytesBehind": p.latest - p.end,
                "recordsBehind": p.records_behind,
                "lostBytes": sum(b - a for a, b in self.lost.items())}

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self.target = self._data_end(self._snapshot())

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        lo, hi = self._position(start, "start"), self._position(end, "end")
        lo = self._available(lo, self._snapshot(), hi)
        out = []
        for r in plan_ranges(self.root, self.scan.cfg, self.scan.split_bytes, lo):
            a, b = max(r.lo, lo - r.file_start), min(r.hi, hi - r.file_start)
            if a < b:
                out.append(InputPartition(ScanRange(r.path, r.file_start, a, b)))
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        r: ScanRange | None = partition.value
        if r is None:
            return
        try:
            buf = open_on_executor(r.path)
        except FileNotFoundError:
            if not os.path.isdir(os.path.dirname(r.path)):
                raise
            if self.options.fail_on_data_loss:
                raise DataLossError(
                    f"rocketmq source: {r.path} (CommitLog offsets {r.file_start + r.lo} to "
                    f"{r.file_start + r.hi}) was deleted before this batch read it; set "
                    f"failOnDataLoss=false to skip it") from None
            log.warning("rocketmq source: %s was deleted before this batch read it; skipped "
                        "(failOnDataLoss=false)", r.path)
            return
        yield from range_batches(buf, r, self.scan.schema, self.scan.check_crc,
                                 self.scan.delay_levels_ms, self.scan.row_mask,
                                 self.scan.inflate_bodies)
