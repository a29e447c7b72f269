"""Per-queue tallies that let verify check every ConsumeQueue against the CommitLog without a
table of the records: a queue's units are right when, as multisets, its units' (queue offset,
CommitLog offset, size, tagsCode) equal its records' (a count and a sum of a 64-bit mix of each,
compared at the end: ``units`` for ConsumeQueue bytes, ``records`` for walked records, which also
checks that the records' queue offsets rise in CommitLog order).

Sums wrap at 2**64; equal sums of different multisets need a 64-bit collision of the mix.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rocketlake.store.codec import CQ_UNIT_SIZE
from rocketlake.store.kernels import kernel
from rocketlake.store.kernels.records import OFFSET, QUEUE_ID, QUEUE_OFFSET, SIZE, be_i32, be_i64, queue_key

Ints = npt.NDArray[np.int64]
UInts = npt.NDArray[np.uint64]


@kernel
def _mix(queue_offset: int, offset: int, size: int, tags_code: int) -> np.uint64:
    """A 64-bit mix of one (queue offset, CommitLog offset, size, tagsCode) (splitmix64's
    finaliser over a combination of the four)."""
    z = (np.uint64(queue_offset) * np.uint64(0x9E3779B97F4A7C15)
         + np.uint64(offset) * np.uint64(0xC2B2AE3D27D4EB4F)
         + np.uint64(size) * np.uint64(0x165667B19E3779F9)
         + np.uint64(tags_code) * np.uint64(0xD6E8FEB86659FD93))
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@kernel
def numbers(raw: Ints, to_queue: npt.NDArray[np.bool_], topic: Ints, topic_number: Ints, known: Ints,
            number: Ints, rows: Ints, queue: Ints) -> tuple[int, int]:
    """The walked rows ``raw`` (``kernels.records`` rows) that get a unit (``to_queue``) go out as
    ``rows[:n]``, with their queue numbers ``queue[:n]``: row i's queue key is ``codec.queue_key``
    of (``topic_number[topic[i]]``, its queue id), and its number ``number[j]`` where
    ``known[j]`` (ascending) is that key, -1 where none is. Returns (n, how many got -1)."""
    n = missing = 0
    last_key, last = -1, -1
    for i in range(raw.shape[0]):
        if not to_queue[i]:
            continue
        key = queue_key(topic_number[topic[i]], raw[i, QUEUE_ID])
        if n == 0 or key != last_key:
            j = np.searchsorted(known, key)
            last_key, last = key, number[j] if j < known.size and known[j] == key else -1
        rows[n], queue[n] = i, last
        missing += last < 0
        n += 1
    return n, missing


@kernel
def units(data: npt.NDArray[np.uint8], queue: Ints, first: Ints, count: Ints, min_offset: Ints,
          cl_min: int, sums: UInts, counts: Ints) -> None:
    """Count and sum (the mix) per queue the ConsumeQueue units read from their bytes: ``data``
    holds, back to back, the ``count[f]`` units (20 big-endian bytes each: CommitLog offset,
    size, tagsCode) of file ``f`` of queue ``queue[f]``, whose first unit has queue offset
    ``first[f]``. Only units at or above the queue's ``min_offset`` that point at or above
    ``cl_min`` are taken (the units ``queue_tally.checked_units`` keeps)."""
    p = 0
    for f in range(queue.size):
        q, lo = queue[f], min_offset[queue[f]]
        for u in range(count[f]):
            qo, off = first[f] + u, be_i64(data, p)
            if qo >= lo and off >= cl_min:
                counts[q] += 1
                sums[q] += _mix(qo, off, be_i32(data, p + 8), be_i64(data, p + 12))
            p += CQ_UNIT_SIZE


@kernel
def records(raw: Ints, rows: Ints, queue: Ints, tags_code: Ints, cl_min: int, min_offset: Ints,
            count: Ints, first_qo: Ints, first_offset: Ints, max_qo: Ints,
            irregular: npt.NDArray[np.bool_], hidden: Ints, sums: UInts, counts: Ints) -> None:
    """Take the walked records ``raw[rows[j]]`` (``kernels.records`` rows, CommitLog order) of
    queue ``queue[j]``, with ``tags_code`` per row of ``raw``. Per queue: ``count`` of records, the
    first one's queue offset and CommitLog offset (``first_qo``, ``first_offset``: set when
    ``count`` was 0), the highest queue offset (``max_qo``), and ``irregular`` once a record's
    queue offset is not above every earlier one's (a repeated or out-of-order queue offset). Of
    the records at or above ``cl_min`` (the retained CommitLog): those at or above the queue's
    ``min_offset`` go into ``counts`` and ``sums`` as ``units`` takes units, the others into
    ``hidden``."""
    for j in range(rows.size):
        i = rows[j]
        q = queue[j]
        qo = raw[i, QUEUE_OFFSET]
        off = raw[i, OFFSET]
        if count[q] == 0:
            first_qo[q], first_offset[q], max_qo[q] = qo, off, qo
        elif qo <= max_qo[q]:
            irregular[q] = True
        else:
            max_qo[q] = qo
        count[q] += 1
        if off >= cl_min:
            if qo >= min_offset[q]:
                counts[q] += 1
                sums[q] += _mix(qo, off, raw[i, SIZE], tags_code[i])
            else:
                hidden[q] += 1
