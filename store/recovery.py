"""Recovery on open: find the end of valid CommitLog data, cut the torn tail, catch up dispatch.

Normal (clean shutdown) and abnormal (``abort`` present) recovery, as RocketMQ's
``CommitLog.recoverNormally`` / ``CommitLog.recoverAbnormally`` do it:

- normal: scan from the third-from-last CommitLog file; abnormal: from the newest file whose first
  record is no newer than the checkpoint's minimum timestamp (the first file when none is).
- The scan stops at the first invalid record: bad magic or length, a self offset that is not its
  address, a body CRC mismatch when ``checkCRCOnRecover``, or a topic / queue id no writer could
  have stored (a damaged topic must never become a ConsumeQueue path). Everything after the end is
  cut and zeroed, so stale bytes never parse again. Only the CommitLog decides validity: the
  ConsumeQueues and index are derived data and never cause CommitLog data to be cut.
- ConsumeQueue units pointing past the new end are cut; each queue's minimum is corrected to the
  CommitLog's minimum (files may have been deleted by retention).
- Units and index entries below the CommitLog's minimum are what retention left: they are kept
  and never read.
- Damaged derived data is rebuilt from the CommitLog, never cut: a queue with a unit in its last
  three files that is no unit, points past the end with valid units after it, or does not point
  at the head of a record of its size (one vectorised gather) is cut at that unit and its units
  are dispatched again from the records' QUEUEOFFSETs, so the next put continues after the
  highest queue offset the CommitLog holds. An index file whose header is damaged is deleted
  with the files after it and their keys are dispatched again (``IndexService.drop_damaged``).
  Only then does the re-dispatch scan further back than the checkpoint.
- Index entries for cut data are forgotten; on abnormal recovery so is every entry from the
  start file on (it may be torn, or not yet applied). RocketMQ instead deletes whole index files
  newer than the index checkpoint, which loses the keys of older messages those files held; rolling
  the newest file back to the start point (``IndexService.truncate``) loses nothing, and keeps the
  work proportional to the data since the checkpoint.
- Records the ConsumeQueues have not seen are dispatched again (abnormal: everything from the
  start file, which re-indexes it too); dispatch skips what is already there. The work is proportional to
  the data written since the checkpoint (abnormal) or to the last three files (normal), never to
  the whole store.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from rocketlake.store import codec
from rocketlake.store.checkpoint import Checkpoint
from rocketlake.store.codec import CQ_UNIT_DTYPE, CQ_UNIT_SIZE
from rocketlake.store.commitlog import CommitLog
from rocketlake.store.consume_queue import ConsumeQueue
from rocketlake.store.dispatch import Dispatcher, Planned, plan_batch
from rocketlake.store.errors import CorruptRecordError
from rocketlake.store.index import IndexService
from rocketlake.store.kernels import dispatch as kd
from rocketlake.store.kernels import index as ki
from rocketlake.store.kernels import queue_units as kq
from rocketlake.store.kernels import records as kr
from rocketlake.store.mapped_file import MappedFile
from rocketlake.store.record_walk import WORKERS, RecordBatch

#: the kernels a recovery runs (the walk, its dispatch and plan, the index's placement, the unit
#: check): ``kernels.preload_behind`` loads them while the store's files are opened
KERNELS = (kr.walk, kr.find_start, kd.dispatch_rows, kd.plan_units, kd.key_columns, ki.place,
           kq.offset_range, kq.heads_in_file, kq.check)


class StoreTimeOutOfRange(UserWarning):
    """Recovery re-indexed records whose STORETIMESTAMP no index file can be named by (a damaged
    head: the body CRC does not cover it); their keys are indexed at ``codec.index_time``."""


@dataclass
class RecoveryReport:
    """What recovery did: where it scanned from, where valid data ends, what it re-dispatched."""
    abnormal: bool
    scanned_from: int
    commitlog_end: int
    dispatched_from: int
    dispatched: int
    #: why the scan stopped before the zeros that end a healthy log (None when it did not)
    stop_reason: str | None
    #: index entries forgotten (for cut data, or re-indexed from the start file)
    index_entries_dropped: int
    #: damaged ConsumeQueues and index files found, each rebuilt from the CommitLog
    rebuilt: list[str] = field(default_factory=list)


def recover(log: CommitLog, queues: dict[tuple[str, int], ConsumeQueue], index: IndexService | None,
            checkpoint: Checkpoint, abnormal: bool, delay_levels_ms: tuple[int, ...],
            dispatch: Dispatcher, read: Mapping[tuple[str, int], np.ndarray] | None = None,
            ) -> RecoveryReport:
    """Bring the CommitLog, ConsumeQueues and index back to one consistent, valid state.
    ``read``: units the queues' load read (``consume_queue.load_queues``), which the check of
    each queue still one file of that many written units uses instead of reading them again
    (before the check recovery only appends units)."""
    files = log.files.files
    store_time = partial(_store_time, log)
    dropped = n = 0
    rebuilt: list[str] = []
    out_of_range: set[int] = set()  # offsets of records whose store time no index can hold

    planned = partial(_planned, delay_levels_ms)  # computed by the walks' threads

    def redispatch(batch: RecordBatch) -> None:
        nonlocal n
        plan, odd = batch.prepare(planned)
        dispatch.add_planned(plan)
        n += len(batch)
        out_of_range.update(odd.tolist())

    def redispatch_range(begin: int, stop: int) -> None:
        """``redispatch`` the records from ``begin`` to ``stop`` (CRCs unchecked: only
        ``_valid_end``'s walk decides what is valid)."""
        for batch in log.walk(begin, check_crc=False, stop_at=stop, delay_levels_ms=delay_levels_ms,
                              prepare=planned, keep_rows=False):
            redispatch(batch)

    # A damaged index is rebuilt from where its damaged files began.
    index_redo = log.max_offset
    if index is not None:
        found = index.drop_damaged(store_time)
        if found is not None:
            index_redo = max(found[0], log.min_offset)
            rebuilt += found[1]
    if abnormal:
        # Everything from the start file is dispatched again while it is validated (one pass).
        # Units already in a ConsumeQueue are skipped; units past the end are cut below.
        start = _abnormal_start(log, checkpoint.min_timestamp)
        if index is not None:
            dropped = index.truncate(start, store_time)
        dispatch_from = min(start, index_redo)
        redispatch_range(dispatch_from, start)
        end, reason = _valid_end(log, start, redispatch, delay_levels_ms, planned)
        dispatch.apply()  # every valid record's unit, so the check below sees them all
    else:
        start = files[max(0, len(files) - 3)].start if files else 0
        end, reason = _valid_end(log, start, None)
    log.files.truncate_after(end)
    queue_redo = end
    checked = list(zip(queues.values(), _check_all(list(queues.values()), log, end, read or {})))
    for cq, (bad, last, _) in checked:
        if bad is not None:
            rebuilt.append(f"{cq.files.dir}: unit {bad[0]} {bad[1]}; rebuilt from the CommitLog")
            cq.cut(bad[0])
            queue_redo = min(queue_redo, max(cq.max_physic_offset, log.min_offset))
        if bad is None and last is not None:  # ``truncate_dirty`` would cut nothing
            cq.set_max_physic(last)
        else:
            cq.truncate_dirty(end)
    if not abnormal:
        if index is not None:
            dropped = index.truncate(end, store_time)
        cq_end = max((cq.max_physic_offset for cq in queues.values()), default=-1)
        dispatch_from = min(max(cq_end, log.min_offset), index_redo, queue_redo)
        redispatch_range(dispatch_from, end)
    elif queue_redo < end:  # the pass above skipped the units those queues have lost since
        dispatch_from = min(dispatch_from, queue_redo)
        redispatch_range(queue_redo, end)
    # units are only added after the ones checked: a minimum found among them stands
    for cq, (_, _, found_min) in checked:
        if found_min is not None:
            cq.min_logic_offset = found_min
        else:
            cq.correct_min_offset(log.min_offset)
    if rebuilt:
        # rebuilt from further back than the checkpoint's start point: durable before serving
        dispatch.flush()
    else:
        # re-dispatched from the checkpoint's start point on: the store's flush service flushes
        # it and only then moves the checkpoint past it (a crash before that recovers it from
        # the same point again), as after any put; RocketMQ's recovery leaves it to its flush
        # services too
        dispatch.apply()
    if out_of_range and index is not None:
        first = min(out_of_range)
        warnings.warn(StoreTimeOutOfRange(
            f"{log.files.dir}: {len(out_of_range)} records (first at commitlog offset {first}, "
            f"stored at {_store_time(log, first)}) have a store time no index file can be named "
            f"by; their keys are indexed at {codec.index_time(-1)} ms"), stacklevel=3)
    log.next_queue_offsets = {key: cq.max_offset for key, cq in queues.items()}
    return RecoveryReport(abnormal, start, end, dispatch_from, n, reason, dropped, rebuilt)


def _planned(delay_levels_ms: tuple[int, ...], batch: RecordBatch) -> tuple[Planned, np.ndarray]:
    """What recovery's re-dispatch needs of a batch, from the batch alone (a walk thread
    computes it): its dispatch plan (``dispatch.plan_batch``), and the offsets of its records
    whose store time no index file can be named by (``codec.index_time`` changes it)."""
    ts = batch.column(kr.STORE_TS)
    return (plan_batch(batch, batch.dispatch(delay_levels_ms)),
            batch.column(kr.OFFSET)[codec.index_time(ts) != ts])


def _store_time(log: CommitLog, at: int) -> int | None:
    """Store time of the record at ``at``; None below the CommitLog's minimum (retention removed
    it: never read) or where no record reads."""
    if at < log.min_offset:
        return None
    try:
        return log.read(at).store_timestamp
    except CorruptRecordError:
        return None


Checked = tuple[tuple[int, str] | None, tuple[int, int, int] | None, int | None]
#: units checked at once, over as many queues as they fill (20 MiB)
CHECK_UNITS = 1 << 20
#: units from which their heads are gathered by more than one thread
THREADED_HEADS = 1 << 12


def _check_all(queues: list[ConsumeQueue], log: CommitLog, end: int,
               read: Mapping[tuple[str, int], np.ndarray]) -> list[Checked]:
    """``_check_queues`` of every queue, in groups of at most ``CHECK_UNITS`` units (a queue's
    are never split); ``read``: as ``recover``'s."""
    out: list[Checked] = []
    group: list[ConsumeQueue] = []
    units = 0
    for cq in queues:
        n = sum(mf.wrote for mf in cq.files.files[-3:]) // CQ_UNIT_SIZE
        if group and units + n > CHECK_UNITS:
            out += _check_queues(group, log, end, read)
            group, units = [], 0
        group.append(cq)
        units += n
    return out + _check_queues(group, log, end, read)


def _recent_sources(cq: ConsumeQueue, read: Mapping[tuple[str, int], np.ndarray]
                    ) -> tuple[int, list[MappedFile] | np.ndarray]:
    """(queue offset of the first, where they are) of the units ``_check_queues`` checks: those its
    load read when the queue is still one file of that many written units (recovery has only
    appended units since), else its ``recent_files``, read there."""
    u = read.get((cq.topic, cq.queue_id))
    files = cq.files.files
    if u is not None and len(files) == 1 and files[0].wrote == u.nbytes:
        return files[0].start // CQ_UNIT_SIZE, u
    recent = cq.recent_files()
    return (recent[0].start // CQ_UNIT_SIZE if recent else 0), recent


def _check_queues(queues: list[ConsumeQueue], log: CommitLog, end: int,
                  read: Mapping[tuple[str, int], np.ndarray]) -> list[Checked]:
    """For each queue, from the units of its last three files (one compiled pass over all the
    queues, read into one buffer of their files' bytes: ``kernels.queue_units``):

    - the first unit that disagrees with the CommitLog, and how (None when none does): not a
      unit (offset < 0 or size <= 0), pointing past ``end`` with units inside it after it (units
      are in CommitLog order; a tail past the end is the cut data's, not damage; a unit of the
      pre-blank size after the queue's pre-blank units points past it), or, at or above the
      CommitLog's minimum (below it retention removed the records: never read), not at the head
      of a record (MAGIC v1 or v2, PHYSICALOFFSET = its address, TOTALSIZE = the unit's size).
      A record's other head fields are not compared: a damaged QUEUEOFFSET or QUEUEID in the
      CommitLog is no reason to move a unit that points at its record;
    - the last unit written, when ``ConsumeQueue.truncate_dirty(end)`` would cut nothing (the
      newest file holds units and none of them points past ``end``), else None;
    - when the queue has at most three files (all read), the byte offset of its first unit whose
      record is at or above the CommitLog's minimum (``correct_min_offset``), else None."""
    n = len(queues)
    recent = [_recent_sources(cq, read) for cq in queues]
    nbytes = [src.nbytes if isinstance(src, np.ndarray) else sum(mf.wrote for mf in src) for _, src in recent]
    bounds = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(nbytes, out=bounds[1:])
    units = np.empty(int(bounds[-1]), dtype=np.uint8)
    for at, (_, src) in zip(bounds.tolist(), recent):
        if isinstance(src, np.ndarray):
            units[at:at + src.nbytes] = src.view(np.uint8)
            continue
        for mf in src:
            mf.read_into(0, units[at:at + mf.wrote])
            at += mf.wrote
    bounds //= CQ_UNIT_SIZE
    first = np.array([f for f, _ in recent], dtype=np.int64)
    written = [(cq.files.files[0].wrote // CQ_UNIT_SIZE, cq.files.files[-1].wrote // CQ_UNIT_SIZE)
               if cq.files.files else (0, 0) for cq in queues]
    first_written = np.array([w for w, _ in written], dtype=np.int64)
    last_written = np.array([w for _, w in written], dtype=np.int64)
    whole = [len(cq.files.files) <= 3 and all(mf.wrote == mf.size for mf in cq.files.files[:-1])
             for cq in queues]  # every unit read, numbered without gaps
    # pre-blank units lead the first file: found by the check when read whole, else looked up
    pre_blank_end = np.array([-1 if w else cq.pre_blank_end() for cq, w in zip(queues, whole)],
                             dtype=np.int64)
    at_head = _at_head(log, units)
    bad_at, bad_what, min_unit = (np.empty(n, dtype=np.int64) for _ in range(3))
    settled = np.empty(n, dtype=np.bool_)
    kq.check(units, at_head, bounds, first, first_written, last_written, pre_blank_end, end,
             log.min_offset, bad_at, bad_what, settled, min_unit)
    as_units = units.view(CQ_UNIT_DTYPE)
    out: list[Checked] = []
    for k in range(n):
        if bad_at[k] >= 0:
            out.append(((int(first[k] + bad_at[k]), kq.BAD_WHAT[bad_what[k]]), None, None))
            continue
        out.append((None, as_units[bounds[k + 1] - 1].item() if settled[k] else None,
                    int(first[k] + min_unit[k]) * CQ_UNIT_SIZE
                    if settled[k] and whole[k] and min_unit[k] >= 0 else None))
    return out


def _at_head(log: CommitLog, units: np.ndarray) -> np.ndarray:
    """Whether each unit of ``units`` (ConsumeQueue file bytes) points at the head of a record of
    its size (``kernels.queue_units.heads_in_file``; False where no file holds its offset),
    gathered by ``record_walk.WORKERS`` threads, each over a share of the units (one cache miss
    per head: the gather is bound by memory latency, so the threads overlap their misses)."""
    n = units.size // CQ_UNIT_SIZE
    at_head = np.zeros(n, dtype=np.bool_)
    cuts = np.linspace(0, n, WORKERS + 1).astype(np.int64).tolist()

    def gather(a: int, b: int) -> None:
        lo, hi = kq.offset_range(units, a, b)
        for mf in log.files.files:
            if mf.start <= hi and mf.start + mf.size > lo:  # a file some unit points into
                kq.heads_in_file(np.frombuffer(mf.mm, dtype=np.uint8), mf.start, units, a, b, at_head)

    if n < THREADED_HEADS:
        gather(0, n)
        return at_head
    with ThreadPoolExecutor(WORKERS, thread_name_prefix="unit-heads") as pool:
        for done in [pool.submit(gather, a, b) for a, b in zip(cuts, cuts[1:])]:
            done.result()
    return at_head


def _abnormal_start(log: CommitLog, min_timestamp: int) -> int:
    """Start of the newest file whose first record's store time is <= ``min_timestamp``."""
    files = log.files.files
    for mf in reversed(files):
        ts = _first_store_timestamp(log, mf)
        if ts is not None and ts <= min_timestamp:
            return mf.start
    return files[0].start if files else 0


def _first_store_timestamp(log: CommitLog, mf: MappedFile) -> int | None:
    try:
        rec = log.read(mf.start, check_crc=True)
    except CorruptRecordError:
        return None
    return rec.store_timestamp if rec.store_timestamp > 0 else None


def _valid_end(log: CommitLog, start: int, on_valid: Callable[[RecordBatch], None] | None,
               delay_levels_ms: tuple[int, ...] | None = None,
               prepare: Callable[[RecordBatch], Any] | None = None) -> tuple[int, str | None]:
    """Where valid data ends from ``start`` on, and why it ended there (None: at zeros): also at a
    record whose topic or queue id no writer could have stored. ``on_valid`` is called with each
    batch of records found valid, in order (their dispatch columns, then ``prepare``, computed
    by the walk when ``delay_levels_ms`` is given)."""
    walk = log.walk(start, stop_at=log.files.files[-1].end if log.files.files else 0, check_names=True,
                    delay_levels_ms=delay_levels_ms, prepare=prepare,
                    keep_rows=delay_levels_ms is None)  # re-dispatched: only ``prepare``'s plan is read
    for batch in walk:
        if on_valid is not None:
            on_valid(batch)
    return walk.end, walk.error


def cut_after(log: CommitLog, queues: dict[tuple[str, int], ConsumeQueue],
              index: IndexService | None, end: int) -> None:
    """Cut the store back to CommitLog offset ``end``, a record boundary below which the
    ConsumeQueues and index agree with the CommitLog: the CommitLog truncated there and its tail
    zeroed (later files deleted), the ConsumeQueue units and index entries of records at or past
    it dropped, index files left empty deleted (as recovery cuts a torn tail)."""
    log.files.truncate_after(end)
    for cq in queues.values():
        cq.truncate_dirty(end)
    if index is not None:
        index.truncate(end, partial(_store_time, log))
    log.next_queue_offsets = {key: cq.max_offset for key, cq in queues.items()}
