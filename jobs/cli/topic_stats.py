"""`rocketlake topic-stats`: per topic and queue, messages, bytes, messages over the last hour and
day, and the oldest and newest message's store time (as ``mqadmin statsAll`` and
``kafka-log-dirs`` answer), from the files alone (read-only).

- ``messages``: the queue's ConsumeQueue units, max offset - min offset (what a consumer can read);
  ``bytes``: the sum of those units' record sizes.
- ``last_hour`` / ``last_day``: the messages whose store time falls in the hour / day ending at
  the window's end: the newest store time of any queue of the store (so an idle or copied store
  still shows its last hour of traffic), or the clock with ``--now``. Counted by two binary
  searches by store time per queue (``MessageStore.offset_stored_from``), reading a few records,
  never every record of the queue.
- ``oldest`` / ``newest``: the store times of the messages at the min offset and at max offset - 1
  (None when there is no readable message there).

A topic's queues are followed by its total row (``queue_id`` None, ``all`` in a table: sums, the
oldest and newest of its queues). User topics come first, then system topics
(``store.topic_kinds``), each sorted by name.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rocketlake.jobs.cli.reading import open_read_only, store_time
from rocketlake.jobs.cli.tables import Row
from rocketlake.jobs.cli.topic_sections import show_apart
from rocketlake.jobs.times import time_fields
from rocketlake.store import MessageStore
from rocketlake.store.message_store import now_ms
from rocketlake.store.store_time import format_time
from rocketlake.store.topic_kinds import is_system_topic

log = logging.getLogger(__name__)

HOUR_MS, DAY_MS = 3_600_000, 86_400_000
COUNT_COLUMNS = ("topic", "queue_id", "messages", "bytes", "last_hour", "last_day")
TIME_COLUMNS = ("topic", "queue_id", "oldest_time", "newest_time")


@dataclass(frozen=True)
class QueueStats:
    """One queue's (or, with ``queue_id`` None, one topic's) numbers; times epoch ms."""
    topic: str
    queue_id: int | None
    messages: int
    bytes: int
    last_hour: int
    last_day: int
    oldest: int | None
    newest: int | None

    def row(self) -> Row:
        """The JSON row: the fields, times as ``*_time`` (ISO-8601) and ``*_timestamp`` (ms),
        and ``system`` (``store.topic_kinds.is_system_topic``)."""
        return {"topic": self.topic, "queue_id": self.queue_id, "system": is_system_topic(self.topic),
                "messages": self.messages, "bytes": self.bytes, "last_hour": self.last_hour,
                "last_day": self.last_day, **time_fields("oldest", self.oldest),
                **time_fields("newest", self.newest)}


def _unit_bytes(ms: MessageStore, topic: str, queue_id: int, lo: int, hi: int) -> int:
    """Sum of the record sizes of the queue's units in [lo, hi), read a file at a time."""
    cq, total, q = ms.queues[(topic, queue_id)], 0, lo
    while q < hi:
        units = cq.units(q, hi - q)
        if not units.size:
            break
        total += int(units["size"].sum(dtype=np.int64))
        q += units.size
    return total


def window_end(ms: MessageStore) -> int | None:
    """The newest store time of any queue's last message; None when no queue has one."""
    times = ms.store_times([(t, q, hi - 1) for (t, q), (_, hi) in ms.queue_ranges().items()])
    return max((t for t in times if t is not None), default=None)


def _in_window(ms: MessageStore, topic: str, queue_id: int, end: int, span: int) -> int:
    """Messages of the queue stored in (end - span, end]."""
    return (ms.offset_stored_from(topic, queue_id, end + 1)
            - ms.offset_stored_from(topic, queue_id, end - span + 1))


def _total(topic: str, queues: Sequence[QueueStats]) -> QueueStats:
    oldest = [s.oldest for s in queues if s.oldest is not None]
    newest = [s.newest for s in queues if s.newest is not None]
    return QueueStats(topic, None, sum(s.messages for s in queues), sum(s.bytes for s in queues),
                      sum(s.last_hour for s in queues), sum(s.last_day for s in queues),
                      min(oldest, default=None), max(newest, default=None))


def topic_stats(ms: MessageStore, end: int | None, topic: str | None = None) -> list[QueueStats]:
    """Per queue of ``topic`` (default: every topic) and per topic, the numbers of the module
    docstring, the windows ending at ``end`` (epoch ms; None: no message, empty windows), in the
    module docstring's order. ValueError when the store has no queue of ``topic``."""
    by_topic: dict[str, list[QueueStats]] = {}
    for (t, q), (lo, hi) in ms.queue_ranges().items():
        if topic is not None and t != topic:
            continue
        hour, day = ((_in_window(ms, t, q, end, HOUR_MS), _in_window(ms, t, q, end, DAY_MS))
                     if end is not None else (0, 0))
        by_topic.setdefault(t, []).append(QueueStats(
            t, q, hi - lo, _unit_bytes(ms, t, q, lo, hi), hour, day,
            store_time(ms, t, q, lo) if hi > lo else None, store_time(ms, t, q, hi - 1)))
    if topic is not None and not by_topic:
        raise ValueError(f"{ms.root}: no ConsumeQueue of topic {topic!r}")
    order = sorted(by_topic, key=lambda t: (is_system_topic(t), t))
    return [s for t in order for s in (*by_topic[t], _total(t, by_topic[t]))]


def _table_rows(stats: Sequence[QueueStats]) -> list[Row]:
    """Rows for a table: a topic's total row shows ``all`` as its queue."""
    return [{**s.row(), "queue_id": "all" if s.queue_id is None else s.queue_id} for s in stats]


def cmd_topic_stats(a: argparse.Namespace) -> int:
    with open_read_only(a) as ms:
        end = now_ms() if a.now else window_end(ms)
        stats = topic_stats(ms, end, a.topic)
    if end is not None:
        log.info("last_hour / last_day: messages stored in the hour / day up to %s (%s)",
                 format_time(end),
                 "the clock" if a.now else "the newest store time in the store; --now for the clock")
    out = sys.stdout
    if a.json:
        out.writelines(json.dumps(s.row(), ensure_ascii=False) + "\n" for s in stats)
        return 0
    show_apart(a, _table_rows(stats), (("messages and bytes", COUNT_COLUMNS),
                                       ("store times", TIME_COLUMNS)))
    return 0
