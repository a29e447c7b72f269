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

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from rocketlake.store import codec
from rocketlake.store.checkpoint import Checkpoint
from rocketlake.store.commitlog import CommitLog
from rocketlake.store.consume_queue import ConsumeQueue
from rocketlake.store.dispatch import Dispatcher
from rocketlake.store.errors import CorruptRecordError
from rocketlake.store.index import IndexService
from rocketlake.store.kernels import records as kr
from rocketlake.store.mapped_file import MappedFile
from rocketlake.store.record_walk import RecordBatch


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
            dispatch: Dispatcher) -> RecoveryReport:
    """Bring the CommitLog, ConsumeQueues and index back to one consistent, valid state."""
    files = log.files.files
    store_time = partial(_store_time, log)
    dropped = n = 0
    rebuilt: list[str] = []

    def redispatch(batch: RecordBatch) -> None:
        nonlocal n
        dispatch.add_batch(batch, batch.dispatch(delay_levels_ms))
        n += len(batch)

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
        for batch in log.walk(dispatch_from, check_crc=False, stop_at=start):
            redispatch(batch)
        end, reason = _valid_end(log, start, redispatch)
        dispatch.apply()  # every valid record's unit, so the check below sees them all
    else:
        start = files[max(0, len(files) - 3)].start if files else 0
        end, reason = _valid_end(log, start, None)
    log.files.truncate_after(end)
    queue_redo = end
    for cq in queues.values():
        bad = _first_bad_unit(cq, log, end)
        if bad is not None:
            rebuilt.append(f"{cq.files.dir}: unit {bad[0]} {bad[1]}; rebuilt from the CommitLog")
            cq.cut(bad[0])
            queue_redo = min(queue_redo, max(cq.max_physic_offset, log.min_offset))
        cq.truncate_dirty(end)
    if not abnormal:
        if index is not None:
            dropped = index.truncate(end, store_time)
        cq_end = max((cq.max_physic_offset for cq in queues.values()), default=-1)
        dispatch_from = min(max(cq_end, log.min_offset), index_redo, queue_redo)
        for batch in log.walk(dispatch_from, check_crc=False, stop_at=end):
            redispatch(batch)
    elif queue_redo < end:  # the pass above skipped the units those queues have lost since
        dispatch_from = min(dispatch_from, queue_redo)
        for batch in log.walk(queue_redo, check_crc=False, stop_at=end):
            redispatch(batch)
    for cq in queues.values():
        cq.correct_min_offset(log.min_offset)
    dispatch.flush()
    log.next_queue_offsets = {key: cq.max_offset for key, cq in queues.items()}
    return RecoveryReport(abnormal, start, end, dispatch_from, n, reason, dropped, rebuilt)


def _store_time(log: CommitLog, at: int) -> int | None:
    """Store time of the record at ``at``; None below the CommitLog's minimum (retention removed
    it: never read) or where no record reads."""
    if at < log.min_offset:
        return None
    try:
        return log.read(at).store_timestamp
    except CorruptRecordError:
        return None


def _first_bad_unit(cq: ConsumeQueue, log: CommitLog, end: int) -> tuple[int, str] | None:
    """The first unit of ``cq``'s last three files that disagrees with the CommitLog, and how:
    not a unit (offset < 0 or size <= 0), pointing past ``end`` with units inside it after it
    (units are in CommitLog order; a tail past the end is the cut data's, not damage; a unit of
    the pre-blank size after the queue's pre-blank units points past it), or, at or above the
    CommitLog's minimum (below it retention removed the records: never read), not at the head
    of a record (MAGIC v1 or v2, PHYSICALOFFSET = its address, TOTALSIZE = the unit's size).
    A record's other head fields are not compared: a damaged QUEUEOFFSET or QUEUEID in the
    CommitLog is no reason to move a unit that points at its record. Vectorised over the units:
    O(units), one gather of 36 bytes per unit."""
    first, u = cq.recent_units()
    off, size = u["commitlog_offset"], u["size"].astype(np.int64)
    unit = np.arange(first, first + u.size) >= cq.pre_blank_end()  # the rest fill the first file
    garbage = unit & ((off < 0) | (size <= 0))
    inside = np.flatnonzero(unit & ~garbage & (off + size <= end))
    before_last_inside = np.arange(u.size) < (inside[-1] if inside.size else 0)
    past = unit & ~garbage & (off + size > end) & before_last_inside
    check = inside[off[inside] >= log.min_offset]
    head = _heads(log, off[check])
    wrong = np.zeros(u.size, dtype=bool)
    wrong[check] = (~np.isin(head[:, 1], (codec.MAGIC_V1, codec.MAGIC_V2)) | (head[:, 0] != size[check])
                    | (head[:, 2] != off[check]))
    bad = [(int(np.flatnonzero(m)[0]), what) for what, m in
           (("is not a unit", garbage), ("points past the CommitLog end", past),
            ("does not point at a record head", wrong)) if m.any()]
    if not bad:
        return None
    i, what = min(bad)
    return first + i, what


def _heads(log: CommitLog, offsets: np.ndarray) -> np.ndarray:
    """(TOTALSIZE, MAGIC, PHYSICALOFFSET) of the record head at each CommitLog offset (zeros
    where none fits a file)."""
    out = np.zeros((offsets.size, 3), dtype=np.int64)
    if not offsets.size:
        return out
    which = (offsets - log.min_offset) // log.file_size
    for k in np.unique(which).tolist():
        mf = log.files.files[k]
        sel = np.flatnonzero(which == k)
        part = np.empty((sel.size, 3), dtype=np.int64)
        kr.heads_at(np.frombuffer(mf.mm, dtype=np.uint8), offsets[sel] - mf.start, part)
        out[sel] = part
    return out


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


def _valid_end(log: CommitLog, start: int,
               on_valid: Callable[[RecordBatch], None] | None) -> tuple[int, str | None]:
    """Where valid data ends from ``start`` on, and why it ended there (None: at zeros): also at a
    record whose topic or queue id no writer could have stored. ``on_valid`` is called with each
    batch of records found valid, in order."""
    walk = log.walk(start, stop_at=log.files.files[-1].end if log.files.files else 0, check_names=True)
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
