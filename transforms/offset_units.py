"""Read the ConsumeQueue units the offsets tables need and check each against the CommitLog.

What ``jobs.publish_offsets`` reads from the store: :func:`read_queue_units` maps Arrow batches of
one row per queue (``topic``, ``queue_id``, ``wanted``: queue offsets whose units are asked for)
to units (the job runs it on the driver, the rows being few). No
Spark here: the store library maps the files, numpy parses them.

Per queue it loads the ConsumeQueue as the store does (``store.consume_queue``: the units of the
first and last file parsed as one ``CQ_UNIT_DTYPE`` array each, valid-unit masks vectorised), moves
the minimum to the first unit at or above the CommitLog's minimum offset (RocketMQ's
``correctMinOffset``), and returns the units at the queue's minimum, at ``max - 1`` and at each
wanted offset inside the written range: O(queues + wanted) rows, whatever the queue lengths.

Each returned unit whose message should still be in the CommitLog (not a pre-blank unit, at or
above the CommitLog minimum) is checked against the record at its offset: a valid record with
TOTALSIZE equal to the unit's size and the unit's topic, queue id and queue offset. A unit that
passes gets the record's ``store_timestamp``; one that does not gets ``commitlog_error`` instead.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from rocketlake.store.codec import CQ_UNIT
from rocketlake.store.commitlog import CommitLog
from rocketlake.store.config import StoreConfig
from rocketlake.store.consume_queue import valid_units
from rocketlake.store.errors import CorruptRecordError
from rocketlake.store.store_files import StoreFiles

#: What :func:`read_queue_units` returns, one row per unit.
UNIT_SCHEMA = pa.schema([
    pa.field("topic", pa.string(), False),
    pa.field("queue_id", pa.int32(), False),
    pa.field("queue_offset", pa.int64(), False),
    pa.field("commitlog_offset", pa.int64(), False),
    pa.field("size", pa.int32(), False),
    pa.field("store_timestamp", pa.int64()),   # ms; null unless checked and found
    pa.field("commitlog_error", pa.string()),  # null unless the check failed
])


def read_queue_units(batches: Iterator[pa.RecordBatch], root: str, config: StoreConfig
                     ) -> Iterator[pa.RecordBatch]:
    """Requests (topic, queue_id, wanted) -> units (:data:`UNIT_SCHEMA`), batch by batch."""
    with StoreFiles(Path(root), config) as files:
        for batch in batches:
            rows: list[tuple] = []
            for req in batch.to_pylist():
                rows += _queue_units(files, req["topic"], req["queue_id"], req["wanted"] or ())
            yield pa.RecordBatch.from_pylist(
                [dict(zip(UNIT_SCHEMA.names, r)) for r in rows], schema=UNIT_SCHEMA)


def _queue_units(files: StoreFiles, topic: str, queue_id: int, wanted) -> list[tuple]:
    commitlog = files.commitlog
    with files.queue(topic, queue_id) as cq:
        lo, hi = cq.files.min_offset // CQ_UNIT.size, cq.max_offset
        if cq.min_offset < hi and cq.units(cq.min_offset, 1)["commitlog_offset"][0] < \
                commitlog.min_offset:  # retention deleted CommitLog files under this queue's min
            cq.correct_min_offset(commitlog.min_offset)
        offsets = {o for o in wanted if lo <= o < hi}
        if cq.min_offset < hi:
            offsets.add(cq.min_offset)
        if hi > lo:
            offsets.add(hi - 1)
        out = []
        for q in sorted(offsets):
            (off, size, _), = cq.units(q, 1).tolist()
            ts, err = _check(commitlog, topic, queue_id, q, off, size)
            out.append((topic, queue_id, q, off, size, ts, err))
        return out


def _check(commitlog: CommitLog, topic: str, queue_id: int, queue_offset: int, offset: int,
           size: int) -> tuple[int | None, str | None]:
    """(store timestamp, None) when the unit's record is there, (None, why) when it is not;
    (None, None) for units whose message is gone or never was (pre-blank, below the minimum)."""
    if not valid_units(offset, size, commitlog.min_offset):
        return None, None
    where = f"{topic}/{queue_id} queue offset {queue_offset}: CommitLog offset {offset}"
    try:
        rec = commitlog.read(offset, check_crc=False)
    except CorruptRecordError as e:
        return None, f"{where}: no valid record ({e})"
    found = (rec.size, rec.topic, rec.queue_id, rec.queue_offset)
    if found != (size, topic, queue_id, queue_offset):
        return None, (f"{where}: record has size {rec.size}, topic {rec.topic}, queue "
                      f"{rec.queue_id}, queue offset {rec.queue_offset}; the unit says size {size}")
    return rec.store_timestamp, None
