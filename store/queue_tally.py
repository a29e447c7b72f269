"""Verify's check of the ConsumeQueues in memory bounded by the number of queues, not of records.

The CommitLog walk hands each batch to ``QueueTally.records``: per queue, how many records, the
first one's queue offset and CommitLog offset, the highest queue offset, whether the queue
offsets rise in CommitLog order, and a count and 64-bit sum (``kernels.queue_sums``) of the
records a unit must stand for (at or above the queue's min offset; the walk starts at the
CommitLog's minimum, so every record is retained). ``units`` takes the same count and sum of
each queue's checked units (``checked_units``). A queue whose sums agree, whose offsets rise and
that has no record below its min offset has no finding: its units and those records are the
same multiset. The other queues (``troubled``) are checked exactly, with the records of only
those queues and of the records their units point at, by verify's table-based check
(``verify._Checker._exact``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rocketlake.store.codec import CQ_UNIT_DTYPE, CQ_UNIT_SIZE, queue_key
from rocketlake.store.consume_queue import ConsumeQueue, read_units
from rocketlake.store.kernels import queue_sums
from rocketlake.store.kernels import records as kr
from rocketlake.store.mapped_file import MappedFile
from rocketlake.store.record_walk import RecordBatch

Ints = npt.NDArray[np.int64]

#: per-queue columns: name -> (dtype, value of a queue not seen yet)
_COLUMNS: dict[str, tuple[Any, Any]] = {
    "min_offset": (np.int64, 0), "count": (np.int64, 0), "first_qo": (np.int64, 0),
    "first_offset": (np.int64, 0), "max_qo": (np.int64, 0), "irregular": (np.bool_, False),
    "hidden": (np.int64, 0), "record_sum": (np.uint64, 0), "record_count": (np.int64, 0)}


@dataclass(frozen=True)
class Numbered:
    """``QueueTally.numbered`` of a batch: the rows that get a unit, the queue number of each
    (-1: not known when numbered), and how many are -1."""
    rows: Ints
    queue: Ints
    missing: int


class QueueTally:
    """Per-queue counters of records and units. Queue ``k < len(queues)`` is ``queues[k]``;
    queues that have records but no ConsumeQueue files follow, numbered as the walk meets them;
    ``keys[k]`` is (topic, queue id)."""

    def __init__(self, queues: list[ConsumeQueue], cl_min: int, delay_levels_ms: tuple[int, ...]) -> None:
        self.queues, self.cl_min, self.delay_levels_ms = queues, cl_min, delay_levels_ms
        self.keys: list[tuple[str, int]] = []
        self.topic_ids: dict[str, int] = {}
        #: queue keys (``queue_key``), ascending, and the queue number of each: one attribute,
        #: replaced whole, so that ``numbered`` in another thread reads a matching pair
        self._known: tuple[Ints, Ints] = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        self.col: dict[str, npt.NDArray[Any]] = {n: np.zeros(0, dtype=d) for n, (d, _) in _COLUMNS.items()}
        self._add_queues([(cq.topic, cq.queue_id) for cq in queues])
        self.col["min_offset"][:] = [cq.min_offset for cq in queues]
        #: the units' count and sum per queue with files: apart from ``col``, which ``records``
        #: grows, so that ``units`` may run in another thread, beside ``records``
        self._min_offset = self.col["min_offset"].copy()
        self.unit_sum = np.zeros(len(queues), dtype=np.uint64)
        self.unit_count = np.zeros(len(queues), dtype=np.int64)

    def _add_queues(self, keys: list[tuple[str, int]]) -> None:
        first = len(self.keys)
        self.keys += keys
        tids = np.array([self.topic_ids.setdefault(t, len(self.topic_ids)) for t, _ in keys], dtype=np.int64)
        qids = np.array([q for _, q in keys], dtype=np.int64)
        known = np.concatenate((self._known[0], queue_key(tids, qids)))
        number = np.concatenate((self._known[1], np.arange(first, len(self.keys), dtype=np.int64)))
        order = np.argsort(known, kind="stable")
        self._known = (known[order], number[order])
        for name, (dtype, empty) in _COLUMNS.items():
            self.col[name] = np.concatenate((self.col[name], np.full(len(keys), empty, dtype=dtype)))

    def numbers(self, batch: RecordBatch, rows: Ints, grow: bool = False) -> Ints:
        """The queue number of each of ``rows`` of ``batch`` (queues not known yet are added when
        ``grow``, else their rows get -1)."""
        ids, names = batch.topics
        if grow:
            for n in names:
                self.topic_ids.setdefault(n, len(self.topic_ids))
        tids = np.array([self.topic_ids.get(n, -1) for n in names], dtype=np.int64)[ids[rows]]
        qids = batch.raw[rows, kr.QUEUE_ID]
        key = queue_key(tids, qids)
        at, hit = lookup(self._known[0], key)
        if grow and not hit.all():
            _, first = np.unique(key[~hit], return_index=True)  # one row of each, by key
            self._add_queues([(names[int(ids[rows[i]])], int(qids[i]))
                              for i in np.flatnonzero(~hit)[first].tolist()])
            at, hit = lookup(self._known[0], key)
        number = np.full(key.size, -1, dtype=np.int64)
        number[hit] = self._known[1][at[hit]]
        return number

    def numbered(self, batch: RecordBatch) -> Numbered:
        """The rows of a walked batch that get a unit, and their queue numbers as far as they are
        known now (-1: a queue, or topic, not met yet): changes nothing, so the walk's threads
        may call it beside ``records``."""
        cols = batch.dispatch(self.delay_levels_ms)
        ids, names = batch.topics
        tids = np.array([self.topic_ids.get(n, -1) for n in names], dtype=np.int64)
        rows, q = np.empty(len(batch), dtype=np.int64), np.empty(len(batch), dtype=np.int64)
        known, number = self._known
        n, missing = queue_sums.numbers(batch.raw, cols.to_queue, ids, tids, known, number, rows, q)
        return Numbered(rows[:n], q[:n], missing)

    def records(self, batch: RecordBatch, numbered: Numbered | None = None) -> None:
        """Take a walked batch (CommitLog order), with its rows ``numbered`` when they were."""
        if numbered is None:
            numbered = self.numbered(batch)
        rows, q = numbered.rows, numbered.queue
        if not rows.size:
            return
        if numbered.missing:  # queues (or topics) met for the first time
            q = self.numbers(batch, rows, grow=True)
        c = self.col
        queue_sums.records(batch.raw, rows, q, batch.dispatch(self.delay_levels_ms).tags_code, self.cl_min,
                           c["min_offset"], c["count"], c["first_qo"], c["first_offset"], c["max_qo"],
                           c["irregular"], c["hidden"], c["record_sum"], c["record_count"])

    def units(self, group: list[tuple[int, MappedFile]]) -> None:
        """Take the units of each (queue number, file) of ``group`` (a thread may do this while
        another hands ``records`` the walk's batches)."""
        if not group:
            return
        count = np.array([mf.wrote // CQ_UNIT_SIZE for _, mf in group], dtype=np.int64)
        ends = np.cumsum(count) * CQ_UNIT_SIZE
        data = np.empty(int(ends[-1]), dtype=np.uint8)
        for (_, mf), a, b in zip(group, (ends - count * CQ_UNIT_SIZE).tolist(), ends.tolist()):
            mf.read_into(0, data[a:b])
            mf.release(0, mf.wrote)
        queue_sums.units(data, np.array([k for k, _ in group], dtype=np.int64),
                         np.array([mf.start // CQ_UNIT_SIZE for _, mf in group], dtype=np.int64), count,
                         self._min_offset, self.cl_min, self.unit_sum, self.unit_count)

    @property
    def unit_total(self) -> int:
        """Units checked, all queues."""
        return int(self.unit_count.sum())

    def troubled(self) -> Ints:
        """Numbers of the queues with ConsumeQueue files whose units and records may disagree."""
        c, n = self.col, len(self.queues)
        bad = (c["irregular"][:n] | (c["record_sum"][:n] != self.unit_sum)
               | (c["record_count"][:n] != self.unit_count) | (c["hidden"][:n] > 0))
        return np.flatnonzero(bad)

    def max_offsets(self) -> dict[tuple[str, int], int]:
        """Per queue with records, the queue offset after its highest record's (at least 0)."""
        c = self.col
        return {self.keys[k]: max(0, int(c["max_qo"][k]) + 1)
                for k in np.flatnonzero(c["count"] > 0).tolist()}


def lookup(keys: Ints, values: Ints) -> tuple[Ints, npt.NDArray[np.bool_]]:
    """(position, whether present) of each value in the ascending ``keys``; position 0 where absent."""
    if not keys.size:
        return np.zeros(values.size, dtype=np.int64), np.zeros(values.size, dtype=np.bool_)
    at = np.minimum(np.searchsorted(keys, values), keys.size - 1)
    there = keys[at] == values
    return np.where(there, at, 0), there


def checked_units(group: list[tuple[int, MappedFile]], min_offset: Ints, cl_min: int
                  ) -> tuple[Ints, Ints, Ints, npt.NDArray[np.void]]:
    """The units of each (queue number k, file) of ``group`` that are checked: at or above the
    queue's min offset (``min_offset[k]``), pointing at or above the retained CommitLog
    (``cl_min``). Returns (the file's place in ``group``, queue number, queue offset, unit) of
    each. The units are copied: the files' mapped pages are released."""
    parts = [read_units(mf, 0, mf.wrote // CQ_UNIT_SIZE) for _, mf in group]
    for _, mf in group:
        mf.release(0, mf.wrote)
    counts = np.array([p.size for p in parts], dtype=np.int64)
    units = np.concatenate(parts) if parts else np.zeros(0, dtype=CQ_UNIT_DTYPE)
    fi = np.repeat(np.arange(len(group)), counts)
    qk = np.array([k for k, _ in group], dtype=np.int64)[fi]
    firsts = np.array([mf.start // CQ_UNIT_SIZE for _, mf in group], dtype=np.int64)
    q = firsts[fi] + np.arange(units.size, dtype=np.int64) - (np.cumsum(counts) - counts)[fi]
    # not ``consume_queue.valid_units``: a zeroed or size-0 unit is checked, so that it is found
    keep = (q >= min_offset[qk]) & (units["commitlog_offset"] >= cl_min)
    return fi[keep], qk[keep], q[keep], units[keep]
