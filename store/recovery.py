"""Recovery on open: find the end of valid CommitLog data, cut the torn tail, catch up dispatch.

Normal (clean shutdown) and abnormal (``abort`` present) recovery as SPEC §9 describes:

- normal: scan from the third-from-last CommitLog file; abnormal: from the newest file whose first
  record is no newer than the checkpoint's minimum timestamp (the first file when none is).
- The scan stops at the first invalid record: bad magic or length, a self offset that is not its
  address, a body CRC mismatch when ``checkCRCOnRecover``, a topic / queue id no writer could have
  stored, or (for a record its ConsumeQueue has not seen) a QUEUEOFFSET that is not its queue's
  next offset. Version 1 records carry no checksum over their header, so the last rule is what
  catches a damaged QUEUEID / QUEUEOFFSET before it is dispatched. Everything after the end is
  cut and zeroed, so stale bytes never parse again.
- ConsumeQueue units pointing past the new end are cut; each queue's minimum is corrected to the
  CommitLog's minimum (files may have been deleted by retention).
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

from dataclasses import dataclass

from store import codec
from store.checkpoint import Checkpoint
from store.codec import CorruptRecordError
from store.commitlog import CommitLog
from store.consume_queue import ConsumeQueue
from store.dispatch import Dispatcher, from_record, goes_to_consume_queue
from store.index import IndexService
from store.mapped_file import MappedFile


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


def recover(log: CommitLog, queues: dict[tuple[str, int], ConsumeQueue], index: IndexService | None,
            checkpoint: Checkpoint, abnormal: bool, delay_levels_ms: tuple[int, ...],
            dispatch: Dispatcher) -> RecoveryReport:
    """Bring the CommitLog, ConsumeQueues and index back to one consistent, valid state."""
    files = log.files.files
    if abnormal:
        start = _abnormal_start(log, checkpoint.min_timestamp)
    else:
        start = files[max(0, len(files) - 3)].start if files else 0
    end, reason = _valid_end(log, start, queues)
    log.files.truncate_after(end)
    for cq in queues.values():
        cq.truncate_dirty(end)
        cq.correct_min_offset(log.min_offset)

    dropped = index.truncate(start if abnormal else end) if index is not None else 0
    if abnormal:
        dispatch_from = start
    else:
        cq_end = max((cq.max_physic_offset for cq in queues.values()), default=-1)
        dispatch_from = max(cq_end, log.min_offset)

    n = 0
    for rec in log.scan(dispatch_from, check_crc=False, stop_at=end):
        dispatch(from_record(rec, delay_levels_ms))
        n += 1
    dispatch.flush()
    log.queue_offsets = {key: cq.max_offset for key, cq in queues.items()}
    return RecoveryReport(abnormal, start, end, dispatch_from, n, reason, dropped)


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
               queues: dict[tuple[str, int], ConsumeQueue]) -> tuple[int, str | None]:
    """Where valid data ends from ``start`` on, and why it ended there (None: at zeros)."""
    seen = {key: cq.max_physic_offset for key, cq in queues.items()}
    # Next queue offset of each queue holding units; a queue without any accepts any start.
    next_q = {key: cq.max_offset for key, cq in queues.items() if cq.max_offset}
    scan = log.scan(start, stop_at=log.files.files[-1].end if log.files.files else 0)
    for rec in scan:
        at = rec.commitlog_offset
        if rec.queue_id < 0 or not codec.TOPIC_PATTERN.match(rec.topic):
            return at, f"offset {at}: topic {rec.topic!r} / queue {rec.queue_id} cannot have been written"
        key = (rec.topic, rec.queue_id)
        if goes_to_consume_queue(rec.sys_flag) and at + rec.size > seen.get(key, -1):
            want = next_q.get(key, rec.queue_offset)
            if rec.queue_offset != want:
                return at, (f"offset {at}: QUEUEOFFSET {rec.queue_offset} of {key[0]}/{key[1]} "
                            f"is not the queue's next offset {want}")
            next_q[key] = want + 1
    return scan.end, scan.error
