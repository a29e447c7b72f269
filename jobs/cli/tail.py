"""`rocketlake tail`: the newest messages of a topic, then with ``--follow`` each new one as a
writer or a broker appends it: a console consumer (``kafka-console-consumer``) that needs no
broker. Read-only; options in :mod:`rocketlake.jobs.cli`.

Order: CommitLog order, the order the store appended the messages (one total order over the
topic's queues; store times follow it unless the writer's clock stepped back). The newest N come
from the ConsumeQueues' last units; following polls the CommitLog end (``MessageStore.refresh``,
which also takes in the next CommitLog file when one rolls over) and prints the topic's records
appended after what was shown, those a ConsumeQueue serves (not PREPARED / ROLLBACK halves),
each queue offset once. Ctrl-C, SIGTERM and a closed stdout end it quietly with exit 0.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from rocketlake.jobs.cli.output import emit_messages
from rocketlake.jobs.cli.reading import open_read_only
from rocketlake.jobs.cli.selection import check_selection
from rocketlake.jobs.exit_codes import ExitCode
from rocketlake.store import MessageStore, Record
from rocketlake.store.dispatch import goes_to_consume_queue

log = logging.getLogger(__name__)


def queue_records(ms: MessageStore, topic: str, queue_id: int, at: int, stop: int) -> Iterator[Record]:
    """The records of queue offsets [at, stop) of a queue, through ``MessageStore.get`` (units
    whose record is gone or damaged are skipped, as a consumer skips them)."""
    while at < stop:
        g = ms.get(topic, queue_id, at, stop - at)
        yield from (m.record for m in g.messages if m.queue_offset < stop)
        if g.next_begin_offset <= at:  # nothing readable there (yet)
            return
        at = g.next_begin_offset


def newest(ms: MessageStore, topic: str, queues: list[int],
           n: int) -> tuple[list[Record], dict[int, int], int]:
    """The newest ``n`` messages of ``topic``'s ``queues`` in CommitLog order; each queue's next
    queue offset (its max offset); and the CommitLog offset to follow from (the end of the
    queues' last records, at most the CommitLog end: what was not dispatched yet is followed)."""
    found: list[Record] = []
    nexts: dict[int, int] = {}
    start = ms.commitlog.max_offset
    for q in queues:
        cq = ms.queues[topic, q]
        lo, hi = cq.min_offset, cq.max_offset
        nexts[q] = hi
        if hi > lo and len(last := cq.units(hi - 1, 1)):
            start = min(start, int(last[0]["commitlog_offset"]) + int(last[0]["size"]))
        found += queue_records(ms, topic, q, max(lo, hi - n), hi)
    found.sort(key=lambda r: r.commitlog_offset)
    return found[max(0, len(found) - n):] if n else [], nexts, start


def appended(ms: MessageStore, topic: str, queue_id: int | None, start: int, end: int,
             nexts: dict[int, int]) -> Iterator[Record]:
    """The records of ``topic`` (of queue ``queue_id``; None: any) in the CommitLog range
    [start, end) a ConsumeQueue serves, each from its queue's next offset in ``nexts`` on
    (which it advances); ValueError naming the offset when damage ends the range early."""
    walk = ms.commitlog.walk_records(start, stop_at=end)
    for r in walk:
        if (r.topic == topic and (queue_id is None or r.queue_id == queue_id)
                and goes_to_consume_queue(r.sys_flag) and r.queue_offset >= nexts.get(r.queue_id, 0)):
            nexts[r.queue_id] = r.queue_offset + 1
            yield r
    if walk.end < end:
        raise ValueError(f"{ms.root}: the CommitLog cannot be read past offset {walk.end}: {walk.error}")


def _until(stop: threading.Event, records: Iterable[Record]) -> Iterator[tuple[Record, dict[str, Any]]]:
    """``records`` (as emit_messages takes them) until ``stop`` is set."""
    for r in records:
        if stop.is_set():
            return
        yield r, {}


def cmd_tail(a: argparse.Namespace) -> int:
    """Print the newest ``--last`` messages; with ``--follow`` keep printing new ones every
    ``--interval`` seconds until Ctrl-C or SIGTERM (they end it between two messages) or a
    closed stdout, each with exit 0."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with open_read_only(a) as ms:
            check_selection(ms, a.topic, a.queue)
            queues = sorted(q for t, q in ms.queues if t == a.topic and a.queue in (None, q))
            first, nexts, start = newest(ms, a.topic, queues, a.last)
            levels = ms.config.delay_levels_ms
            shown = emit_messages(_until(stop, first), a, levels)
            sys.stdout.flush()
            while a.follow and not stop.wait(a.interval):
                end = ms.refresh()
                shown += emit_messages(_until(stop, appended(ms, a.topic, a.queue, start, end, nexts)),
                                       a, levels)
                sys.stdout.flush()
                start = end
        if stop.is_set():
            log.info("rocketlake tail: stopped; %d messages shown", shown)
    except BrokenPipeError:  # the reader went away: no more output, not even the buffer's rest
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return ExitCode.OK
