"""BatchConsumeQueue: a 5.x BatchCQ topic's queue, read (docs/FORMAT.md §9.6).

A topic whose `config/topics.json` attributes say ``queue.type=BatchCQ`` is dispatched by a 5.x
broker into `<root>/batchconsumequeue/<topic>/<queueId>/` instead of `consumequeue/`: files named
by their first byte offset (20 digits), 46-byte units (``codec.BCQ_UNIT_DTYPE``). A unit covers
the queue offsets ``[msg_base_offset, msg_base_offset + batch_size)``: one CommitLog record, an
inner batch of ``batch_size`` messages or a single message (batch size 1). rocketlake reads these
queues; it never writes them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from rocketlake.store.codec import BCQ_UNIT_DTYPE, BCQ_UNIT_SIZE, CQ_UNIT_DTYPE
from rocketlake.store.commitlog import CommitLog
from rocketlake.store.errors import StoreFormatError
from rocketlake.store.paths import BATCH_CONSUME_QUEUE_DIR, queue_dir
from rocketlake.store.safe_files import read_file


class BatchConsumeQueue:
    """The units of `<root>/batchconsumequeue/<topic>/<queue_id>`, read once at construction up
    to the first unit that is not valid (RocketMQ's ``BatchConsumeQueue.recover``: CommitLog
    offset >= 0, size > 0, base offset >= 0, batch size > 0). StoreFormatError for a file name
    that is not an offset or a file that is empty or whose size is no multiple of 46."""

    def __init__(self, root: Path, topic: str, queue_id: int,
                 within: str = BATCH_CONSUME_QUEUE_DIR) -> None:
        self.topic, self.queue_id = topic, queue_id
        self.path = queue_dir(root, topic, queue_id, within)
        #: where its units point: None for the CommitLog, else a 5.x compaction log
        #: (``store.compaction_log``)
        self.log: CommitLog | None = None
        parts = []
        for f in sorted(self.path.iterdir()):
            if not (f.name.isdigit() and len(f.name) == 20):
                raise StoreFormatError(f"{f}: not a BatchConsumeQueue file (20-digit offset name)")
            raw = read_file(f)
            if not raw:
                raise StoreFormatError(f"{f}: 0 bytes: a broker creates each BatchConsumeQueue "
                                       f"file at its full size, so it is damaged")
            if len(raw) % BCQ_UNIT_SIZE:
                raise StoreFormatError(f"{f}: {len(raw)} bytes, no multiple of the "
                                       f"{BCQ_UNIT_SIZE}-byte BatchConsumeQueue unit")
            parts.append(np.frombuffer(raw, dtype=BCQ_UNIT_DTYPE))
        units = np.concatenate(parts) if parts else np.zeros(0, dtype=BCQ_UNIT_DTYPE)
        bad = np.flatnonzero((units["commitlog_offset"] < 0) | (units["size"] <= 0)
                             | (units["msg_base_offset"] < 0) | (units["batch_size"] <= 0))
        self.batch_units = units[:bad[0]] if len(bad) else units
        self._first = 0  # index of the first unit served (``correct_min_offset``)

    @property
    def min_offset(self) -> int:
        """First queue offset served."""
        if self._first < len(self.batch_units):
            return int(self.batch_units["msg_base_offset"][self._first])
        return self.max_offset

    @property
    def max_offset(self) -> int:
        """One past the last queue offset of the last unit."""
        if not len(self.batch_units):
            return 0
        last = self.batch_units[-1]
        return int(last["msg_base_offset"]) + int(last["batch_size"])

    def correct_min_offset(self, commitlog_min: int) -> None:
        """Serve from the first unit whose record is at or above ``commitlog_min``
        (``BatchConsumeQueue.correctMinOffset``)."""
        self._first = int(np.searchsorted(self.batch_units["commitlog_offset"], commitlog_min))

    def unit_index(self, queue_offset: int) -> int:
        """The index in ``batch_units`` of the unit holding ``queue_offset``, else of the next
        one (a compacted queue has gaps; the first served for an offset below it, ``len`` for one
        past the last)."""
        bases = self.batch_units["msg_base_offset"]
        i = int(np.searchsorted(bases, queue_offset, side="right")) - 1
        if i >= 0 and queue_offset >= bases[i] + self.batch_units["batch_size"][i]:
            i += 1
        return max(i, self._first)

    def units(self, queue_offset: int, count: int) -> np.ndarray:
        """Up to ``count`` units from the one holding ``queue_offset``, as ConsumeQueue units
        (``CQ_UNIT_DTYPE``: CommitLog offset, size, tagsCode)."""
        i = self.unit_index(queue_offset)
        picked = self.batch_units[i:i + count]
        out = np.empty(len(picked), dtype=CQ_UNIT_DTYPE)
        for name in CQ_UNIT_DTYPE.names or ():
            out[name] = picked[name]
        return out

    def unit_spans(self, queue_offset: int, count: int) -> tuple[list[int], list[int]]:
        """(first queue offset, batch size) of the ``count`` units ``units`` returns."""
        i = self.unit_index(queue_offset)
        picked = self.batch_units[i:i + count]
        return picked["msg_base_offset"].tolist(), picked["batch_size"].tolist()

    def close(self) -> None:
        """Close its compaction log, if any (the units were copied)."""
        if self.log is not None:
            self.log.close()


def load_batch_queues(root: Path) -> dict[tuple[str, int], BatchConsumeQueue]:
    """Every queue under `<root>/batchconsumequeue/<topic>/<queueId>/`, as a 5.x broker loads
    them (the directory decides; the broker refuses to start when topics.json disagrees)."""
    out: dict[tuple[str, int], BatchConsumeQueue] = {}
    base = Path(root) / BATCH_CONSUME_QUEUE_DIR
    if not base.is_dir():
        return out
    for tdir in sorted(base.iterdir()):
        if not tdir.is_dir():
            continue
        for qdir in sorted(tdir.iterdir()):
            if not qdir.name.isdigit():
                raise StoreFormatError(f"{qdir}: queue directory name is not a queue id")
            out[(tdir.name, int(qdir.name))] = BatchConsumeQueue(root, tdir.name, int(qdir.name))
    return out
