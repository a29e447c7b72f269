"""Everyday operator commands of the CLI: lag and topic-status. No Spark; they read the store
read-only.

Each prints a table (rich on a terminal, plain columns when piped) or, with ``--json``, one
JSON object per row (:mod:`tables`). Their options are declared in :mod:`rocketlake.jobs.cli`.
"""
from __future__ import annotations

import argparse

from rocketlake.jobs.cli.reading import open_read_only
from rocketlake.jobs.cli.tables import Row, show_rows
from rocketlake.jobs.times import time_fields
from rocketlake.store import MessageStore
from rocketlake.store.config_files import CONSUMER_OFFSETS
from rocketlake.store.consumer_lag import consumer_lag
from rocketlake.store.topic_kinds import is_system_group

# --- lag -----------------------------------------------------------------------------------------
LAG_COLUMNS = ("consumer_group", "topic", "queue_id", "consumer_offset", "max_offset", "lag",
               "last_consumed_time")


def lag_rows(ms: MessageStore, group: str | None = None, topic: str | None = None,
             system: bool = False) -> list[Row]:
    """One row per (consumer group, topic, queue) by ``store.consumer_lag`` (``mqadmin
    consumerProgress``), of the groups and topics the filters select; ``last_consumed_*`` the
    store time of the message at consumer_offset - 1 (None when consumer_offset is 0 or that
    message is gone). The broker's own groups (``topic_kinds.is_system_group``: the transaction
    check's ``CID_RMQ_SYS_TRANS``) only when ``group`` names one or with ``system``, after the
    others. ValueError when the filters match no committed offsets."""
    table = {k: v for k, v in ms.consumer_offsets().items()
             if (k[1] == group if group is not None else system or not is_system_group(k[1]))
             and (topic is None or k[0] == topic)}
    lags = sorted(consumer_lag({k: hi for k, (_, hi) in ms.queue_ranges().items()}, table),
                  key=lambda r: is_system_group(r.group))
    times = ms.store_times([(r.topic, r.queue_id, r.consumer_offset - 1) for r in lags])
    rows = [{"consumer_group": r.group, "topic": r.topic, "queue_id": r.queue_id,
             "consumer_offset": r.consumer_offset, "max_offset": r.max_offset, "lag": r.lag,
             **time_fields("last_consumed", t)} for r, t in zip(lags, times)]
    if not rows and (group is not None or topic is not None):
        wanted = " and ".join(f"{k} {v}" for k, v in (("group", group), ("topic", topic)) if v is not None)
        raise ValueError(f"{ms.root / CONSUMER_OFFSETS}: no committed offsets for {wanted}")
    return rows


def cmd_lag(a: argparse.Namespace) -> int:
    with open_read_only(a) as ms:
        rows = lag_rows(ms, a.group, a.topic, a.system)
        hidden = sorted({g for t, g in ms.consumer_offsets() if is_system_group(g)
                         and (a.topic is None or t == a.topic)}) \
            if a.group is None and not a.system else []
    show_rows(a, rows, LAG_COLUMNS, f"consumer lag of {a.store}")
    if not a.json:
        print(f"total lag: {sum(r['lag'] for r in rows)}")
        if hidden:
            print(f"not shown: the broker's own group{'s' * (len(hidden) > 1)} "
                  f"{', '.join(hidden)} (--system shows them)")
    return 0


# --- topic-status --------------------------------------------------------------------------------
TOPIC_COLUMNS = ("topic", "queue_id", "min_offset", "max_offset", "last_update_time")


def topic_status_rows(ms: MessageStore, topic: str | None = None) -> list[Row]:
    """One row per queue (of ``topic``), as ``mqadmin topicStatus``: min and max offset and the
    store time of the last message (at max_offset - 1; None for an empty queue). ValueError when
    the store has no queue of ``topic``."""
    ranges = [(key, lo_hi) for key, lo_hi in ms.queue_ranges().items() if topic is None or key[0] == topic]
    times = ms.store_times([(t, q, hi - 1) for (t, q), (_, hi) in ranges])
    rows = [{"topic": t, "queue_id": q, "min_offset": lo, "max_offset": hi,
             **time_fields("last_update", time)} for ((t, q), (lo, hi)), time in zip(ranges, times)]
    if not rows and topic is not None:
        raise ValueError(f"{ms.root}: no ConsumeQueue of topic {topic!r}")
    return rows


def cmd_topic_status(a: argparse.Namespace) -> int:
    with open_read_only(a) as ms:
        rows = topic_status_rows(ms, a.topic)
    show_rows(a, rows, TOPIC_COLUMNS, f"topic status of {a.store}")
    return 0
