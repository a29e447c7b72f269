"""Recovery on open: find the end of valid CommitLog data, cut the torn tail, catch up dispatch.

Normal (clean shutdown) and abnormal (``abort`` present) recovery as SPEC §9 describes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from store.checkpoint import Checkpoint
from store.codec import CorruptRecordError
from store.commitlog import CommitLog
from store.consume_queue import ConsumeQueue
from store.dispatch import DispatchRequest, from_record
from store.index import IndexService


@dataclass
class RecoveryReport:
    abnormal: bool
    scanned_from: int
    commitlog_end: int
    dispatched: int
    stop_reason: str | None


def _first_store_timestamp(log: CommitLog, start: int) -> int | None:
    try:
        return log.read(start).store_timestamp
    except CorruptRecordError:
        return None


def recover(log: CommitLog, queues: dict[tuple[str, int], ConsumeQueue], index: IndexService | None,
            checkpoint: Checkpoint, abnormal: bool, delay_levels_ms: tuple[int, ...],
            dispatch: Callable[[DispatchRequest], None]) -> RecoveryReport:
    """Bring the CommitLog, ConsumeQueues and index back to one consistent, valid state."""
    files = log.files.files
    if not files:
        for cq in queues.values():
            cq.truncate_dirty(0)
        return RecoveryReport(abnormal, 0, 0, 0, None)
    if abnormal:
        # Newest file whose first record is no newer than the checkpoint's safe timestamp.
        start_file = files[0]
        for mf in reversed(files):
            ts = _first_store_timestamp(log, mf.start)
            if ts is not None and ts <= checkpoint.min_timestamp:
                start_file = mf
                break
        if index is not None:
            index.drop_after(checkpoint.index)
    else:
        start_file = files[max(0, len(files) - 3)]
    scan = log.scan(start_file.start, stop_at=files[-1].end)
    for _ in scan:
        pass
    end = scan.end
    # Files before the one holding `end` are complete; cut everything after `end`.
    log.files.truncate_after(end)
    for mf in log.files.files[:-1]:
        mf.wrote = mf.flushed = mf.size
    for cq in queues.values():
        cq.truncate_dirty(end)
    # Queue offset table from the ConsumeQueues.
    log.queue_offsets = {key: cq.max_offset for key, cq in queues.items()}
    # Catch up dispatch: from where the ConsumeQueues / index stopped (normal), or from the
    # start file (abnormal). Dispatch is idempotent for records already there.
    if abnormal:
        dispatch_from = start_file.start
    else:
        cq_end = max((cq.max_physic_offset for cq in queues.values()), default=0)
        idx_end = index.end_phy if index is not None else cq_end
        dispatch_from = min(max(cq_end, log.min_offset), _after(log, idx_end))
    n = 0
    for rec in log.scan(dispatch_from, check_crc=False, stop_at=end):
        req = from_record(rec, delay_levels_ms)
        if req.to_consume_queue:
            key = (req.topic, req.queue_id)
            log.queue_offsets[key] = max(log.queue_offsets.get(key, 0), req.queue_offset + 1)
        dispatch(req)
        n += 1
    return RecoveryReport(abnormal, start_file.start, end, n, scan.error)


def _after(log: CommitLog, offset: int) -> int:
    """The offset just past the record at ``offset`` (min offset when there is none)."""
    if offset < log.min_offset:
        return log.min_offset
    try:
        return offset + log.read(offset).size
    except CorruptRecordError:
        return log.min_offset
