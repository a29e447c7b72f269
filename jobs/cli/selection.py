"""What the read commands select must be able to match: a topic or queue the store has, a range
whose end is not before its begin. Otherwise an InputError (exit 2) naming what exists, never a
silent empty answer."""
from __future__ import annotations

import argparse
from collections.abc import Iterable

from rocketlake.jobs.cli.events import InputError
from rocketlake.store import MessageStore
from rocketlake.store.store_time import format_time

#: topics named in an error at most; the rest are counted
_LISTED = 20


def id_ranges(ids: Iterable[int]) -> str:
    """Queue ids as runs: ``[0, 1, 2, 3, 7]`` -> ``"0-3, 7"``."""
    runs: list[list[int]] = []
    for i in sorted(set(ids)):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def check_selection(ms: MessageStore, topic: str | None, queue: int | None,
                    seen: Iterable[tuple[str, int]] = ()) -> None:
    """InputError unless ``topic`` (None: any) has a queue ``queue`` (None: any) in the store:
    among its ConsumeQueues and BatchConsumeQueues or the (topic, queue id) pairs of ``seen``
    (records read, which may include a topic with no ConsumeQueue, e.g. of PREPARED messages
    only). The error names the topics, or the topic's queues, that exist."""
    queues: dict[str, set[int]] = {}
    for t, q in [*ms.queues, *ms.batch_queues, *ms.compaction_queues, *seen]:
        queues.setdefault(t, set()).add(q)
    if topic is not None and topic not in queues:
        names = sorted(queues)
        more = f" and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
        have = f"its topics are {', '.join(names[:_LISTED])}{more}" if names else "it has no topics"
        raise InputError(f"{ms.root}: no topic {topic!r}: {have}")
    if queue is None:
        return
    if topic is not None:
        if queue not in queues[topic]:
            raise InputError(f"{ms.root}: topic {topic!r} has no queue {queue}: its queues are "
                             f"{id_ranges(queues[topic])}")
    elif not any(queue in ids for ids in queues.values()):
        ids: set[int] = set().union(*queues.values())
        raise InputError(f"{ms.root}: no topic has a queue {queue}: the queue ids are "
                         f"{id_ranges(ids) if ids else 'none'}")


def check_ranges(a: argparse.Namespace) -> None:
    """InputError for a store time range (``--begin``/``--end``, both inclusive) or an offset
    range (``--from-offset`` inclusive, ``--to-offset`` exclusive) that no record can be in."""
    if a.begin > a.end:
        raise InputError(f"--begin {format_time(a.begin)} is after --end {format_time(a.end)}: "
                         f"no store time is in that range")
    to = getattr(a, "to_offset", None)
    if to is not None and to <= a.from_offset:
        raise InputError(f"--to-offset {to} (exclusive) is not after --from-offset "
                         f"{a.from_offset}: no offset is in that range")
