"""Queue ids for events that name none: round-robin over the topic's write queues, as RocketMQ's
producer picks a queue when the application gives no selector (``DefaultMQProducer.send``:
``TopicPublishInfo.selectOneMessageQueue``, the next of the topic's write queues each send).

A topic `config/topics.json` declares has its ``writeQueueNums``; any other gets the producer's
``defaultTopicQueueNums``, 4, as a broker creating the topic on its first send does (the smaller of
the producer's 4 and the broker's 8). RocketMQ's producer starts at a random queue; this starts at
queue 0, so an ingest is repeatable.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketlake.store.store_dir import store_problem
from rocketlake.store.topic_config import read_topic_configs

#: DefaultMQProducer.defaultTopicQueueNums: the queues of a topic created by a producer's send
DEFAULT_TOPIC_QUEUE_NUMS = 4


class QueueSpread:
    """Hands out queue ids round-robin per topic; ``spread`` counts the events given one."""

    def __init__(self, queue_nums: Mapping[str, int]) -> None:
        """``queue_nums``: the write queue count of each declared topic."""
        self.queue_nums = {t: n for t, n in queue_nums.items() if n > 0}
        self.next: dict[str, int] = {}
        self.spread: Counter[str] = Counter()

    @classmethod
    def for_store(cls, root: str | Path) -> QueueSpread:
        """The spread for the store at ``root`` (its topics.json; none for a store not made yet)."""
        if store_problem(root) is not None:
            return cls({})
        return cls({t: int(tc.get("writeQueueNums") or 0) for t, tc in read_topic_configs(root).items()})

    def queues_of(self, topic: str) -> int:
        return self.queue_nums.get(topic, DEFAULT_TOPIC_QUEUE_NUMS)

    def take(self, topic: str, count: int) -> np.ndarray:
        """The next ``count`` queue ids of ``topic``."""
        start = self.next.get(topic, 0)
        self.next[topic] = start + count
        self.spread[topic] += count
        return (start + np.arange(count, dtype=np.int64)) % self.queues_of(topic)

    def fill(self, table: pa.Table) -> pa.Table:
        """``table`` with a queue id in every row whose ``queue_id`` is null or absent, taken in
        row order per topic."""
        n = table.num_rows
        if "queue_id" in table.column_names:
            given = table.column("queue_id")
            missing = given.is_null().to_numpy(zero_copy_only=False)
            if not missing.any():
                return table
            ids = given.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False).copy()
        else:
            missing, ids = np.ones(n, dtype=bool), np.zeros(n, dtype=np.int64)
        topics = pc.dictionary_encode(table.column("topic")).combine_chunks()
        codes = topics.indices.to_numpy(zero_copy_only=False)
        for code, topic in enumerate(topics.dictionary.to_pylist()):
            rows = np.flatnonzero((codes == code) & missing)
            if rows.size:
                ids[rows] = self.take(topic, rows.size)
        column = pa.array(ids, type=pa.int64())
        if "queue_id" in table.column_names:
            return table.set_column(table.column_names.index("queue_id"), "queue_id", column)
        return table.append_column("queue_id", column)

    def summary(self) -> str | None:
        """What was spread, in words; None when every event named its queue."""
        if not self.spread:
            return None
        each = ", ".join(f"{t}: {n:,} over {self.queues_of(t)} queues"
                         for t, n in sorted(self.spread.items()))
        return (f"events without queue_id spread round-robin over their topic's write queues, as "
                f"RocketMQ's producer does ({each})")
