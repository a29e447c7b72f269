"""Everyday operator commands of the CLI: lag, topic-status (and the table and store opening
:mod:`offsets` uses too). No Spark; they read the store read-only.

Each prints a table (rich on a terminal, plain columns when piped) or, with ``--json``, one
JSON object per row. Their options are declared in :mod:`rocketlake.jobs.cli`.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from rocketlake.jobs.printable import printable
from rocketlake.jobs.times import time_fields
from rocketlake.store import MessageStore
from rocketlake.store.config import parse_set_options
from rocketlake.store.consumer_lag import consumer_lag
from rocketlake.store.file_sizes import reading_config
from rocketlake.store.message import GetStatus

Row = dict[str, Any]
OFFSETS_FILE = "config/consumerOffset.json"


# --- shared --------------------------------------------------------------------------------------
@contextmanager
def _open(a: argparse.Namespace) -> Iterator[MessageStore]:
    """The ``--store`` opened read-only with the ``--set`` settings; NotAStoreError (exit 2) for a
    path that is not a store."""
    settings = parse_set_options(a.set)
    with MessageStore(a.store, reading_config(a.store, settings), read_only=True) as ms:
        yield ms


def store_time(ms: MessageStore, topic: str, queue_id: int, queue_offset: int) -> int | None:
    """Store timestamp (ms) of the message at ``queue_offset``; None when there is none (negative,
    expired, past the end, unreadable). RocketMQ's DefaultMessageStore.getMessageStoreTimeStamp."""
    if queue_offset < 0:
        return None
    g = ms.get(topic, queue_id, queue_offset, 1)
    if g.status is GetStatus.FOUND and g.messages[0].queue_offset == queue_offset:
        return g.messages[0].record.store_timestamp
    return None


#: a cell this wide or narrower (a number, an ISO time) is never folded on a terminal; a longer
#: name may fold down to _FOLDED characters a line
_WHOLE, _FOLDED = 24, 8


def fit_widths(natural: Sequence[int], floor: Sequence[int], room: int) -> list[int]:
    """Column widths within ``room`` characters: each column's ``natural`` width, the widest
    narrowed first, one character at a time, never below its ``floor`` (then the sum may stay
    above ``room``)."""
    widths = list(natural)
    while sum(widths) > room:
        wide = [i for i, w in enumerate(widths) if w > floor[i]]
        if not wide:
            break
        widths[max(wide, key=lambda i: widths[i])] -= 1
    return widths


def _show(a: argparse.Namespace, rows: Sequence[Row], columns: Sequence[str], title: str) -> None:
    """``--json``: one JSON object per row. Otherwise a table of ``columns``: rich on a terminal,
    plain space-aligned columns (never wrapped) when stdout is not one; the cells
    :func:`printable`. On a terminal too narrow for the whole table nothing is cut: a number or
    a time keeps its width (its header folds), a longer name folds onto more lines of its cell."""
    out = sys.stdout
    if a.json:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
        return
    cells = [["-" if r[c] is None else printable(str(r[c])) for c in columns] for r in rows]
    numeric = [all(isinstance(r[c], int) or r[c] is None for r in rows) for c in columns]
    if out.isatty():
        console = Console(file=out)
        values = [max((cell_len(line[i]) for line in cells), default=1) for i in range(len(columns))]
        natural = [max(v, cell_len(c)) for v, c in zip(values, columns)]
        floor = [v if num or v <= _WHOLE else min(v, _FOLDED) for v, num in zip(values, numeric)]
        room = console.width - 3 * len(columns) - 1  # a border and two spaces of padding a column
        table = Table(title=Text(printable(title)))
        for c, num, width in zip(columns, numeric, fit_widths(natural, floor, room)):
            table.add_column(c, justify="right" if num else "left", overflow="fold", width=width)
        for line in cells:
            table.add_row(*map(Text, line))  # Text: a stored "[bold]" is not rich markup
        console.print(table)
        return
    widths = [max([len(c), *(len(line[i]) for line in cells)]) for i, c in enumerate(columns)]
    for line in [list(columns), *cells]:
        out.write("  ".join(v.rjust(w) if num else v.ljust(w)
                            for v, w, num in zip(line, widths, numeric)).rstrip() + "\n")


# --- lag -----------------------------------------------------------------------------------------
LAG_COLUMNS = ("consumer_group", "topic", "queue_id", "consumer_offset", "max_offset", "lag",
               "last_consumed_time")


def lag_rows(ms: MessageStore, group: str | None = None, topic: str | None = None) -> list[Row]:
    """One row per (consumer group, topic, queue) by ``store.consumer_lag`` (``mqadmin
    consumerProgress``), of the groups and topics the filters select; ``last_consumed_*`` the
    store time of the message at consumer_offset - 1 (None when consumer_offset is 0 or that
    message is gone). ValueError when the filters match no committed offsets."""
    table = {k: v for k, v in ms.consumer_offsets().items()
             if (group is None or k[1] == group) and (topic is None or k[0] == topic)}
    rows = [{"consumer_group": r.group, "topic": r.topic, "queue_id": r.queue_id,
             "consumer_offset": r.consumer_offset, "max_offset": r.max_offset, "lag": r.lag,
             **time_fields("last_consumed", store_time(ms, r.topic, r.queue_id, r.consumer_offset - 1))}
            for r in consumer_lag({k: hi for k, (_, hi) in ms.queue_ranges().items()}, table)]
    if not rows and (group is not None or topic is not None):
        wanted = " and ".join(f"{k} {v}" for k, v in (("group", group), ("topic", topic)) if v is not None)
        raise ValueError(f"{ms.root / OFFSETS_FILE}: no committed offsets for {wanted}")
    return rows


def cmd_lag(a: argparse.Namespace) -> int:
    with _open(a) as ms:
        rows = lag_rows(ms, a.group, a.topic)
    _show(a, rows, LAG_COLUMNS, f"consumer lag of {a.store}")
    if not a.json:
        print(f"total lag: {sum(r['lag'] for r in rows)}")
    return 0


# --- topic-status --------------------------------------------------------------------------------
TOPIC_COLUMNS = ("topic", "queue_id", "min_offset", "max_offset", "last_update_time")


def topic_status_rows(ms: MessageStore, topic: str | None = None) -> list[Row]:
    """One row per queue (of ``topic``), as ``mqadmin topicStatus``: min and max offset and the
    store time of the last message (at max_offset - 1; None for an empty queue). ValueError when
    the store has no queue of ``topic``."""
    rows = [{"topic": t, "queue_id": q, "min_offset": lo, "max_offset": hi,
             **time_fields("last_update", store_time(ms, t, q, hi - 1))}
            for (t, q), (lo, hi) in ms.queue_ranges().items() if topic is None or t == topic]
    if not rows and topic is not None:
        raise ValueError(f"{ms.root}: no ConsumeQueue of topic {topic!r}")
    return rows


def cmd_topic_status(a: argparse.Namespace) -> int:
    with _open(a) as ms:
        rows = topic_status_rows(ms, a.topic)
    _show(a, rows, TOPIC_COLUMNS, f"topic status of {a.store}")
    return 0
