"""Consumer lag: the one rule every surface (``rocketlake lag``, the report, ``publish-offsets``,
the pipeline summary) counts a consumer group's lag by. Pure Python, no Spark.

It follows ``mqadmin consumerProgress`` (RocketMQ 4.9 ``AdminBrokerProcessor.getConsumeStats``):
for each topic a group has committed offsets for, one row per queue of the topic, with the
broker offset (the queue's max offset, one past its last unit) and the committed offset (0 where
the group has none), and ``diffTotal`` = the sum of the rows' lags. Offline, a topic's queues are:

- every queue the store has for the topic (its ConsumeQueue directories), committed or not: an
  uncommitted queue counts from 0, as RocketMQ's ``queryOffset`` -1 shows as 0;
- every queue the group committed, also one the store does not have (an expired or never
  written queue, a retry topic ``%RETRY%<group>`` without messages): max offset 0.

Retry topics are topics like any other: they count when the group committed offsets for them.
Rows come by group; within a group its own topics by name, then its ``%RETRY%<group>`` and
``%DLQ%<group>`` (``store.topic_kinds.group_topic_rank``), so they sit beside its other rows.
``lag = max(0, max_offset - consumer_offset)``: a committed offset past the max (a queue that
was truncated or rebuilt shorter) is lag 0, never negative; a committed offset below the queue's
min offset (its messages expired) counts every message from the committed offset, as the broker's
diff does (they are lost to the group, not consumed).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rocketlake.store.topic_kinds import group_topic_rank


@dataclass(frozen=True)
class QueueLag:
    """One (group, topic, queue) row: committed offset, queue max offset, lag."""
    group: str
    topic: str
    queue_id: int
    consumer_offset: int
    max_offset: int
    lag: int


def consumer_lag(max_offsets: Mapping[tuple[str, int], int],
                 committed: Mapping[tuple[str, str], Mapping[int, int]]) -> list[QueueLag]:
    """Rows of every (group, topic, queue) by the rules above, in the order above (by queue
    within a topic).

    ``max_offsets``: (topic, queue_id) -> max offset of every queue the store has;
    ``committed``: consumerOffset.json's table, (topic, group) -> {queue_id: offset}."""
    queues: dict[str, set[int]] = {}
    for topic, queue_id in max_offsets:
        queues.setdefault(topic, set()).add(queue_id)
    rows = []
    for (topic, group), offsets in committed.items():
        for q in queues.get(topic, set()) | set(offsets):
            consumer, high = offsets.get(q, 0), max_offsets.get((topic, q), 0)
            rows.append(QueueLag(group, topic, q, consumer, high, max(0, high - consumer)))
    return sorted(rows, key=lambda r: (r.group, group_topic_rank(r.topic, r.group), r.topic, r.queue_id))


def lag_totals(rows: Iterable[QueueLag]) -> dict[tuple[str, str], int]:
    """(group, topic) -> the sum of its rows' lags (``diffTotal`` of ``consumerProgress -t``)."""
    totals: dict[tuple[str, str], int] = {}
    for r in rows:
        totals[(r.group, r.topic)] = totals.get((r.group, r.topic), 0) + r.lag
    return totals
