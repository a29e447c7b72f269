"""Reading chosen topics' records through their ConsumeQueues instead of walking every CommitLog
byte: the ``rocketmq`` source's topic push-down beyond the anchor.

The driver reads the chosen topics' ConsumeQueue units and plans :class:`UnitSlice` partitions
(runs of one ConsumeQueue file's units, about ``splitBytes`` of records each). A task sorts its
units by CommitLog offset, maps each CommitLog file they point into and decodes the record at each
unit's offset (``kernels.records.walk`` of one record: the same checks as the walk), checks that
it is the record the unit names (size, queue id, topic), and builds the same Arrow columns as the
walk (``commitlog_batch.message_columns``).

When the result equals the walk's (and so when the source uses this path): a ConsumeQueue holds
exactly the records RocketMQ dispatched, which are the records a consumer is served: not the
PREPARED and ROLLBACK records (they have no unit), and nothing written after the dispatch
watermark (the end of the last dispatched record over all queues; dispatch runs in CommitLog
order, so every record before it was dispatched). So the source reads through the ConsumeQueues
only with ``consumable=true`` (whose rows are the consumer's view: without it, a topic's PREPARED
and ROLLBACK records are rows, and no file says whether a topic has any without walking it), only
for topics served as such (``store.dispatch.served_as_such``: the consumer view drops the others),
and only up to the watermark: the records after it (a live
broker's not yet dispatched tail) are walked. Units pointing below the CommitLog's first file
(expired records the walk cannot see either) are skipped; a unit that names no record, or another
record, is a CorruptRecordError naming the ConsumeQueue file (the queue is out of step with the
CommitLog: ``rebuild-consumequeue`` repairs it).

When it pays (:data:`MAX_SHARE`): the walk decodes every record once, in order; this path decodes
only the chosen ones, but each at a place of its own (a page touched per record, a record more
per kernel call, no read-ahead across the skipped bytes), and the driver reads every unit of the
chosen topics first. ``benchmarks/bench_topic_read.py`` measures both (benchmarks/RESULTS.md).
"""
from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from rocketlake.store import codec
from rocketlake.store.config import StoreConfig
from rocketlake.store.consume_queue import load_queues, read_units, valid_units
from rocketlake.store.errors import CorruptRecordError
from rocketlake.store.kernels import kernel
from rocketlake.store.kernels import records as kr
from rocketlake.transforms.commitlog_batch import message_columns, span_array
from rocketlake.transforms.commitlog_scan import file_at, open_on_executor

#: The largest share of the CommitLog's bytes (the chosen topics' records over the dispatched
#: CommitLog) read through the ConsumeQueues; above it the walk is used. The measured break-even
#: on a page-cached CommitLog lies well above it (benchmarks/RESULTS.md); a CommitLog read from
#: disk loses read-ahead on this path, so it is kept where it wins by several times.
MAX_SHARE = 0.1
#: rows decoded per kernel call and Arrow batch
BATCH_UNITS = 1 << 15


@dataclass(frozen=True)
class UnitSlice:
    """Units ``[first, first + count)`` of the ConsumeQueue file ``path`` (of ``topic`` /
    ``queue_id``), whose records in CommitLog ``[lo, hi)`` a task reads."""
    path: str
    topic: str
    queue_id: int
    first: int
    count: int
    lo: int
    hi: int


@dataclass(frozen=True)
class TopicPlan:
    """Partitions of the ConsumeQueue path (each a few slices, about ``splitBytes`` of records),
    and where the walk takes over (the watermark)."""
    parts: tuple[tuple[UnitSlice, ...], ...]
    watermark: int


def _valid(units: npt.NDArray[np.void], lo: int, hi: int) -> npt.NDArray[np.bool_]:
    """The units whose records are in the CommitLog (``lo`` at or above its first file:
    ``consume_queue.valid_units``) and start below ``hi``."""
    off = units["commitlog_offset"]
    return valid_units(off, units["size"], lo) & (off < hi)


def plan(root: Path, cq_file_size: int, commitlog_start: int, topics: Collection[str],
         lo: int, hi: int, split_bytes: int, max_share: float = MAX_SHARE) -> TopicPlan | None:
    """The ConsumeQueue path for the records of ``topics`` in CommitLog ``[lo, hi)`` (``lo``
    raised to ``commitlog_start``, the first CommitLog file's offset), or None when their
    records are more than ``max_share`` of the dispatched CommitLog bytes."""
    queues = load_queues(root, cq_file_size)
    try:
        watermark = max((cq.max_physic_offset for cq in queues.values()), default=-1)
        lo, hi = max(lo, commitlog_start), min(hi, watermark)
        budget = max_share * max(0, watermark - commitlog_start)
        parts: list[list[UnitSlice]] = [[]]
        chosen = filled = 0
        for (topic, qid), cq in sorted(queues.items()):
            if topic not in topics:
                continue
            for mf in cq.files.files:
                units = read_units(mf, 0, mf.wrote // codec.CQ_UNIT_SIZE)
                sizes = np.where(_valid(units, lo, hi), units["size"].astype(np.int64), 0)
                chosen += int(sizes.sum())
                if chosen > budget:
                    return None
                ends = filled + np.cumsum(sizes)
                # a new partition where the running total passes a multiple of split_bytes
                cuts = np.flatnonzero(np.diff(ends // split_bytes, prepend=filled // split_bytes))
                for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), units.size], strict=True):
                    if a > 0:
                        parts.append([])
                    if sizes[a:b].any():
                        parts[-1].append(UnitSlice(str(mf.path), topic, qid, a, b - a, lo, hi))
                filled = int(ends[-1]) if ends.size else filled
        return TopicPlan(tuple(tuple(p) for p in parts if p), watermark)
    finally:
        for cq in queues.values():
            cq.close()


@kernel
def _decode_at(buf: npt.NDArray[np.uint8], base: int, starts: npt.NDArray[np.int64],
               check_crc: bool, out: npt.NDArray[np.int64], detail: npt.NDArray[np.int64],
               status: npt.NDArray[np.int64]) -> int:
    """Decode the record at each buffer position ``starts[i]`` into ``out[i]``; returns the index
    of the first position holding no valid record (its ``status`` set), or ``starts.size``."""
    for i in range(starts.size):
        n, _, st = kr.walk(buf, base, starts[i], starts[i] + 1, check_crc, False, out[i:i + 1],
                           detail)
        if n != 1:
            status[0] = st
            return i
    return starts.size


def read_part(part: tuple[UnitSlice, ...], root: Path, cfg: StoreConfig,
              check_crc: bool, arrow: pa.Schema, delay_levels_ms: tuple[int, ...],
              inflate_bodies: bool = False) -> Iterator[pa.RecordBatch]:
    """The records of the units of ``part``'s slices, in CommitLog order, as Arrow batches of
    ``arrow``'s columns (rules: the module docstring; ``inflate_bodies`` as
    ``commitlog_batch.message_columns``), read from the CommitLog files of the store at ``root``
    where ``cfg`` puts them (``commitlog_scan.file_at``)."""
    got = []
    for k, s in enumerate(part):
        units = np.memmap(s.path, dtype=codec.CQ_UNIT_DTYPE, mode="r")[s.first:s.first + s.count]
        keep = np.flatnonzero(_valid(units, s.lo, s.hi))
        got.append((units["commitlog_offset"][keep].astype(np.int64),
                    units["size"][keep].astype(np.int64),
                    keep + int(Path(s.path).name) // codec.CQ_UNIT_SIZE + s.first,
                    np.full(keep.size, k, dtype=np.int64)))
    if not got:
        return
    offsets, sizes, queue_offsets, slice_of = (np.concatenate(c) for c in zip(*got, strict=True))
    order = np.argsort(offsets, kind="stable")
    offsets, sizes, queue_offsets, slice_of = (offsets[order], sizes[order], queue_offsets[order],
                                               slice_of[order])
    topics = pa.array([s.topic for s in part], pa.string())
    queue_ids = np.array([s.queue_id for s in part], dtype=np.int64)
    commitlog_file_size = cfg.mappedFileSizeCommitLog
    file_of = offsets // commitlog_file_size
    types = {f.name: f.type for f in arrow}
    for a in range(0, offsets.size, BATCH_UNITS):
        b = min(offsets.size, a + BATCH_UNITS)
        for f in np.unique(file_of[a:b]):
            at = a + np.flatnonzero(file_of[a:b] == f)
            start = int(f) * commitlog_file_size
            path = file_at(root, cfg, start)
            buf = open_on_executor(str(path))
            raw = np.empty((at.size, kr.NFIELDS), dtype=np.int64)
            detail, status = np.zeros(3, dtype=np.int64), np.zeros(1, dtype=np.int64)
            n = _decode_at(buf, start, offsets[at] - start, check_crc, raw, detail, status)
            names = span_array(buf, raw[:n, kr.TOPIC_START], raw[:n, kr.TOPIC_LEN])
            named = topics.take(pa.array(slice_of[at[:n]]))
            wrong = np.flatnonzero((raw[:n, kr.SIZE] != sizes[at[:n]])
                                   | (raw[:n, kr.QUEUE_ID] != queue_ids[slice_of[at[:n]]])
                                   | ~pc.equal(names, named).to_numpy(zero_copy_only=False))
            if n < at.size or wrong.size:
                i = int(wrong[0]) if wrong.size else n
                _out_of_step(part[int(slice_of[at[i]])], int(queue_offsets[at[i]]),
                             int(offsets[at[i]]), int(sizes[at[i]]), path,
                             kr.describe(int(status[0]), int(offsets[at[i]]), detail, buf) if i == n
                             else f"the record there is {int(raw[i, kr.SIZE])} bytes of queue "
                                  f"{int(raw[i, kr.QUEUE_ID])}")
            cols = message_columns(buf, raw, arrow.names, types, delay_levels_ms, inflate_bodies)
            yield pa.RecordBatch.from_arrays([cols[c] for c in arrow.names], schema=arrow)


def _out_of_step(s: UnitSlice, queue_offset: int, offset: int, size: int, path: Path,
                 why: str) -> None:
    raise CorruptRecordError(
        f"{s.path}: unit {queue_offset} of {s.topic}/{s.queue_id} names the record of {size} bytes "
        f"at CommitLog offset {offset} in {path}, but {why}: the ConsumeQueue is out of step with "
        f"the CommitLog (rebuild-consumequeue repairs it)")
