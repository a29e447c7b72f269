"""QueueReader: what the readers of a store's queues (get, lag, topic-status, the reports) call
on one queue, whatever keeps it: a 4.9 ``consume_queue.ConsumeQueue``, a 5.x
``batch_consume_queue.BatchConsumeQueue`` or a queue of a 5.x RocksDB ConsumeQueue
(``rocksdb_store.RocksDBConsumeQueue``). Code that writes queues, or reads their files, takes
``ConsumeQueue`` itself (``MessageStore.file_queues``)."""
from __future__ import annotations

from typing import Protocol

import numpy as np


class QueueReader(Protocol):
    """One queue, read: its bounds in queue offsets and its units (``codec.CQ_UNIT_DTYPE``
    fields: commitlog_offset, size, tags_code)."""
    topic: str
    queue_id: int

    @property
    def min_offset(self) -> int:
        """The first queue offset served."""
        ...

    @property
    def max_offset(self) -> int:
        """One past the last queue offset."""
        ...

    def units(self, queue_offset: int, count: int) -> np.ndarray:
        """Up to ``count`` units from ``queue_offset``."""
        ...

    def correct_min_offset(self, commitlog_min: int) -> None:
        """Serve no unit whose record lies below ``commitlog_min`` (expired)."""
        ...

    def close(self) -> None:
        """Release what the queue holds open."""
        ...
