"""`rocketlake timers`: the timed messages a 5.x broker holds but has not delivered yet
(``store.timers``), per real topic: how many, and the earliest and latest delivery time. Read
from the files alone (read-only); a store without timers (4.9, or 5.x with none ever) has no rows.
"""
from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator

from rocketlake.jobs.cli.reading import open_read_only
from rocketlake.jobs.cli.tables import Row, show_rows
from rocketlake.jobs.times import time_fields
from rocketlake.store import MessageStore, Record
from rocketlake.store.codec import TIMER_TOPIC
from rocketlake.store.timers import PendingTimer, pending_timers

COLUMNS = ("topic", "pending", "earliest_delivery_time", "latest_delivery_time")
#: units read at a time from the timer topic's queue
_CHUNK = 4096


def timer_rows(timers: Iterable[PendingTimer]) -> list[Row]:
    """One row per real topic, by name: pending count, earliest and latest delivery time."""
    by_topic: dict[str, list[int]] = {}
    for t in timers:
        by_topic.setdefault(t.real_topic, []).append(t.deliver_ms)
    return [{"topic": topic, "pending": len(due), **time_fields("earliest_delivery", min(due)),
             **time_fields("latest_delivery", max(due))} for topic, due in sorted(by_topic.items())]


def _queued(ms: MessageStore, queue_offset: int) -> Iterator[Record]:
    """The timer topic's copies from ``queue_offset`` on (queue 0, the one the broker uses)."""
    cq = ms.queue(TIMER_TOPIC, 0)
    if cq is None:
        return
    at = max(queue_offset, cq.min_offset)
    while at < cq.max_offset:
        units = cq.units(at, _CHUNK)
        if not len(units):
            return
        for off, _, _ in units.tolist():
            yield ms.commitlog.read(off)
        at += len(units)


def cmd_timers(a: argparse.Namespace) -> int:
    with open_read_only(a) as ms:
        rows = timer_rows(pending_timers(ms.root, ms.commitlog.read, lambda n: _queued(ms, n)))
    show_rows(a, rows, COLUMNS, f"pending timer messages of {a.store}")
    return 0
