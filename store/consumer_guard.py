"""The unconsumed-data guard for retention: which CommitLog files consumers still need.

RocketMQ deletes expired files even when a consumer group has not read them. With the guard, a
file is kept while it holds a message at or beyond some group's committed offset.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rocketlake.store.consume_queue import ConsumeQueue


@dataclass(frozen=True)
class Hold:
    """A group's first unread message, and the CommitLog offset it is stored at."""
    group: str
    topic: str
    queue_id: int
    committed: int
    commitlog_offset: int


def holds(queues: dict[tuple[str, int], ConsumeQueue],
          offsets: dict[tuple[str, str], dict[int, int]]) -> list[Hold]:
    """Every (group, queue) with unread messages, earliest CommitLog offset first."""
    out = []
    for (topic, group), per_queue in offsets.items():
        for qid, committed in per_queue.items():
            cq = queues.get((topic, qid))
            if cq is None or committed >= cq.max_offset:
                continue
            at = max(committed, cq.min_offset)
            units = cq.units(at, 1)
            if units.size:
                out.append(Hold(group, topic, qid, committed, int(units[0]["commitlog_offset"])))
    return sorted(out, key=lambda h: h.commitlog_offset)


def guard(candidates: Sequence[str], file_size: int,
          hold_list: Sequence[Hold]) -> tuple[list[str], dict[str, Hold]]:
    """Split leading deletion ``candidates`` (CommitLog file names) into those safe to delete and
    those kept, each kept one with the hold that keeps it (the earliest unread message)."""
    first = hold_list[0] if hold_list else None
    delete, kept = [], {}
    for name in candidates:
        if first is not None and int(name) + file_size > first.commitlog_offset:
            kept[name] = first
        elif not kept:
            delete.append(name)
    return delete, kept
