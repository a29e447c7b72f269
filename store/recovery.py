"""Recovery on open: find the end of valid CommitLog data, cut the torn tail, catch up dispatch.

Normal (clean shutdown) and abnormal (``abort`` present) recovery as SPEC §9 describes:

- normal: scan from the third-from-last CommitLog file; abnormal: from the newest file whose first
  record is no newer than the checkpoint's minimum timestamp (the first file when none is).
- The scan stops at the first invalid record: bad magic or length, a self offset that is not its
  address, a body CRC mismatch when ``checkCRCOnRecover``, or a topic / queue id no writer could
  have stored (a damaged topic must never become a ConsumeQueue path). Everything after the end is
  cut and zeroed, so stale bytes never parse again. Only the CommitLog decides validity: the
  ConsumeQueues and index are derived data and never cause CommitLog data to be cut.
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
from typing import Callable

from rocketlake.store import codec
from rocketlake.store.checkpoint import Checkpoint
from rocketlake.store.codec import CorruptRecordError, Record
from rocketlake.store.commitlog import CommitLog
from rocketlake.store.consume_queue import ConsumeQueue
from rocketlake.store.dispatch import Dispatcher, from_record
from rocketlake.store.index import IndexService
from rocketlake.store.mapped_file import MappedFile


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
    store_time = lambda at: log.read(at).store_timestamp  # noqa: E731
    dropped = n = 0

    def redispatch(rec: Record) -> None:
        nonlocal n
        dispatch(from_record(rec, delay_levels_ms))
        n += 1

    if abnormal:
        # Everything from the start file is dispatched again while it is validated (one pass).
        # Units already in a ConsumeQueue are skipped; units past the end are cut below.
        start = dispatch_from = _abnormal_start(log, checkpoint.min_timestamp)
        if index is not None:
            dropped = index.truncate(start, store_time)
        end, reason = _valid_end(log, start, redispatch)
    else:
        start = files[max(0, len(files) - 3)].start if files else 0
        end, reason = _valid_end(log, start, None)
    log.files.truncate_after(end)
    for cq in queues.values():
        cq.truncate_dirty(end)
        cq.correct_min_offset(log.min_offset)
    if not abnormal:
        if index is not None:
            dropped = index.truncate(end, store_time)
        cq_end = max((cq.max_physic_offset for cq in queues.values()), default=-1)
        dispatch_from = max(cq_end, log.min_offset)
        for rec in log.scan(dispatch_from, check_crc=False, stop_at=end):
            redispatch(rec)
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
               on_valid: Callable[[Record], None] | None) -> tuple[int, str | None]:
    """Where valid data ends from ``start`` on, and why it ended there (None: at zeros).
    ``on_valid`` is called with each record found valid, in order."""
    scan = log.scan(start, stop_at=log.files.files[-1].end if log.files.files else 0)
    for rec in scan:
        at = rec.commitlog_offset
        if rec.queue_id < 0 or not codec.TOPIC_PATTERN.match(rec.topic):
            return at, f"offset {at}: topic {rec.topic!r} / queue {rec.queue_id} cannot have been written"
        if on_valid is not None:
            on_valid(rec)
    return scan.end, scan.error
