"""Everyday operator commands of the CLI: lag, topic-status, offsets reset. No Spark; they read
the store read-only (``offsets reset --execute`` writes `config/consumerOffset.json` only).

Each prints a table (rich on a terminal, plain columns when piped) or, with ``--json``, one
JSON object per row. Their options are declared in :mod:`rocketlake.jobs.cli`.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import warnings
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
from rocketlake.store.config_files import ConfigFallbackWarning, write_consumer_offsets
from rocketlake.store.consumer_lag import consumer_lag
from rocketlake.store.errors import ConfigFileError, StoreLockedError
from rocketlake.store.file_sizes import reading_config
from rocketlake.store.lockfile import StoreLock, is_locked
from rocketlake.store.message import GetStatus
from rocketlake.store.store_dir import check_store

log = logging.getLogger(__name__)

Row = dict[str, Any]
_OFFSETS_FILE = "config/consumerOffset.json"


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
        raise ValueError(f"{ms.root / _OFFSETS_FILE}: no committed offsets for {wanted}")
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


# --- offsets reset -------------------------------------------------------------------------------
RESET_COLUMNS = ("consumer_group", "topic", "queue_id", "min_offset", "max_offset", "old_offset",
                 "new_offset")


def committed_offsets(ms: MessageStore, for_rewrite: bool) -> dict[tuple[str, str], dict[int, int]]:
    """`config/consumerOffset.json` as {(topic, group): {queue_id: offset}}. ``for_rewrite``
    refuses (ConfigFileError) a main file that is unreadable, where reading falls back to the
    .bak: writing would replace that .bak, the last readable copy, with the damaged file."""
    with warnings.catch_warnings():
        if for_rewrite:
            warnings.simplefilter("error", ConfigFallbackWarning)
        try:
            return ms.consumer_offsets()
        except ConfigFallbackWarning as w:
            raise ConfigFileError(f"{w}; offsets not reset: writing would replace the .bak, the "
                                  f"last readable copy (repair or move the damaged file first)") from None


def reset_rows(ms: MessageStore, table: dict[tuple[str, str], dict[int, int]], group: str,
               topic: str, *, to_time: int | None = None, to_offset: int | None = None,
               shift_by: int | None = None) -> list[Row]:
    """The new offset of every queue of ``topic`` for ``group`` (the queues it committed in
    ``table`` and the store's queues of the topic), as Kafka's ``--reset-offsets``; exactly one
    target:

    - ``to_time``: :meth:`MessageStore.offset_by_time` (RocketMQ's resetOffsetByTime uses
      getOffsetInQueueByTime);
    - ``to_offset``: that offset clamped to the queue's [min_offset, max_offset];
    - ``shift_by``: the committed offset (0 when none) plus ``shift_by``, clamped the same way.

    ``old_offset`` is None for a queue without a committed offset. ValueError when the group has
    no offsets for ``topic`` and the store has no queue of it."""
    ranges = {q: r for (t, q), r in ms.queue_ranges().items() if t == topic}
    committed = table.get((topic, group))
    if committed is None and not ranges:
        raise ValueError(f"{ms.root / _OFFSETS_FILE}: group {group!r} has no offsets for topic "
                         f"{topic!r}, and the store has no queue of that topic")
    committed = committed or {}
    rows = []
    for q in sorted(set(committed) | set(ranges)):
        lo, hi = ranges.get(q, (0, 0))
        old = committed.get(q)
        if to_time is not None:
            new = ms.offset_by_time(topic, q, to_time)
        else:
            wanted = to_offset if to_offset is not None else (old or 0) + (shift_by or 0)
            new = min(max(wanted, lo), hi)
        rows.append({"consumer_group": group, "topic": topic, "queue_id": q, "min_offset": lo,
                     "max_offset": hi, "old_offset": old, "new_offset": new})
    return rows


def cmd_offsets(a: argparse.Namespace) -> int:
    """``offsets reset``: print old and new offsets per queue; ``--execute`` writes them, holding
    the store's writer lock meanwhile (refused with StoreLockedError while a broker or another
    writer holds the store: it would overwrite them from its memory)."""
    check_store(a.store)
    lock = StoreLock(a.store) if a.execute else None
    if lock is not None:
        try:
            lock.acquire()
        except StoreLockedError as e:
            raise StoreLockedError(f"{e}; offsets not reset (stop the broker or writer, then "
                                   f"re-run)") from None
    try:
        with _open(a) as ms:
            table = committed_offsets(ms, for_rewrite=a.execute)
            rows = reset_rows(ms, table, a.group, a.topic, to_time=a.to_datetime,
                              to_offset=a.to_offset, shift_by=a.shift_by)
        _show(a, rows, RESET_COLUMNS, f"offsets reset of {a.group} on {a.topic}")
        new_group = (a.topic, a.group) not in table
        note = (f"group {a.group!r} has no offsets for topic {a.topic!r} yet: "
                f"{'created' if a.execute else 'would be created'}; ") if new_group else ""
        if a.execute:
            path = a.store / _OFFSETS_FILE
            kept = f" (previous content in {path.name}.bak)" if path.exists() else ""
            table.setdefault((a.topic, a.group), {}).update({r["queue_id"]: r["new_offset"] for r in rows})
            write_consumer_offsets(a.store, table)
            log.info("%swrote %s%s", note, path, kept)
        else:
            live = " (a writer holds the store now: --execute would be refused)" if is_locked(a.store) else ""
            log.info("%sdry run: nothing written; --execute to apply%s", note, live)
    finally:
        if lock is not None:
            lock.release()
    return 0
