"""`offsets reset` and `offsets delete`: a consumer group's committed offsets in
`config/consumerOffset.json`, as Kafka's ``kafka-consumer-groups --reset-offsets`` /
``--delete-offsets`` and mqadmin's ``resetOffsetByTime`` / ``deleteSubGroup`` (its offsets part).

Both print the plan (a table, ``--json`` rows, or for reset ``--export``: Kafka's CSV) and write
nothing unless ``--execute``; ``--execute`` writes the file (the previous one kept as its .bak)
holding the store's writer lock, so it is refused while a broker or writer holds the store.
Their options are declared in :mod:`rocketlake.jobs.cli`.
"""
from __future__ import annotations

import argparse
import csv
import logging
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rocketlake.jobs.cli.events import InputError
from rocketlake.jobs.cli.reading import open_read_only
from rocketlake.jobs.cli.selection import id_ranges
from rocketlake.jobs.cli.tables import Row, show_rows
from rocketlake.store import MessageStore
from rocketlake.store.config_files import CONSUMER_OFFSETS, ConfigFallbackWarning, write_consumer_offsets
from rocketlake.store.errors import ConfigFileError, StoreLockedError
from rocketlake.store.lockfile import StoreLock, is_locked
from rocketlake.store.message_store import now_ms
from rocketlake.store.store_dir import check_store

log = logging.getLogger(__name__)

#: {(topic, group): {queue_id: offset}}, as `config/consumerOffset.json` holds it
Table = dict[tuple[str, str], dict[int, int]]
#: the (topic, queue id) pairs a command acts on
Queues = list[tuple[str, int]]
RESET_COLUMNS = ("consumer_group", "topic", "queue_id", "min_offset", "max_offset", "old_offset",
                 "new_offset")
DELETE_COLUMNS = ("consumer_group", "topic", "queue_id", "offset")
#: the targets of reset (exactly one), as their options are named
RESET_TARGETS = ("--to-datetime", "--by-duration", "--to-earliest", "--to-latest", "--to-current",
                 "--to-offset", "--shift-by", "--from-file")


def committed_offsets(ms: MessageStore, refusal: str | None) -> Table:
    """`config/consumerOffset.json` as {(topic, group): {queue_id: offset}}. With a ``refusal``
    (the words of a rewrite's refusal: ``offsets not reset``), a main file that is unreadable,
    where reading falls back to the .bak, is a ConfigFileError: writing would replace that .bak,
    the last readable copy, with the damaged file."""
    with warnings.catch_warnings():
        if refusal is not None:
            warnings.simplefilter("error", ConfigFallbackWarning)
        try:
            return ms.consumer_offsets()
        except ConfigFallbackWarning as w:
            raise ConfigFileError(f"{w}; {refusal}: writing would replace the .bak, the last "
                                  f"readable copy (repair or move the damaged file first)") from None


# --- what a command acts on ----------------------------------------------------------------------
def parse_topics(values: list[str]) -> dict[str, set[int] | None]:
    """``--topic`` values as Kafka takes them: ``orders`` (every queue) or ``orders:0,2`` (those
    queue ids) -> {topic: queue ids, None for every queue}. InputError for a bad queue list."""
    topics: dict[str, set[int] | None] = {}
    for value in values:
        topic, sep, ids = value.partition(":")
        parts = ids.split(",")
        if not topic or (sep and not all(p.strip().isdecimal() for p in parts)):
            raise InputError(f"--topic {value!r}: give a topic, or topic:queue ids such as orders:0,2")
        wanted = {int(p) for p in parts} if sep else None
        old = topics.get(topic, set())
        topics[topic] = None if wanted is None or old is None else old | wanted
    return topics


def _known_queues(ms: MessageStore, table: Table, group: str, topic: str) -> set[int]:
    """The queues of ``topic`` a command may set for ``group``: those the store has and those
    the group committed."""
    return set(table.get((topic, group), {})) | {q for t, q in ms.queues if t == topic}


def reset_scope(ms: MessageStore, table: Table, group: str,
                topics: dict[str, set[int] | None] | None) -> Queues:
    """The queues ``offsets reset`` sets: of each of ``topics`` (None: every topic ``group``
    committed, Kafka's ``--all-topics``) the queues named, or all the store has and the group
    committed. ValueError for a topic neither has, or a group with no offsets at all under
    ``--all-topics``; InputError naming queues the topic does not have."""
    if topics is None:
        topics = {t: None for t, g in table if g == group}
        if not topics:
            raise ValueError(f"{ms.root / CONSUMER_OFFSETS}: group {group!r} has no committed offsets "
                             f"(--all-topics resets the topics it has; name one with --topic)")
    queues: Queues = []
    for topic, wanted in sorted(topics.items()):
        known = _known_queues(ms, table, group, topic)
        if not known:
            raise ValueError(f"{ms.root / CONSUMER_OFFSETS}: group {group!r} has no offsets for topic "
                             f"{topic!r}, and the store has no queue of that topic")
        missing = (wanted or set()) - known
        if missing:
            raise InputError(f"{ms.root}: topic {topic!r} has no queue {id_ranges(missing)}: its "
                             f"queues are {id_ranges(known)}")
        queues += [(topic, q) for q in sorted(known if wanted is None else wanted)]
    return queues


def read_plan(path: Path, ms: MessageStore, table: Table, group: str) -> dict[tuple[str, int], int]:
    """A reset plan in Kafka's CSV (``--from-file``, what ``--export`` prints): one
    ``topic,queue,offset`` row a line, blank lines skipped -> {(topic, queue): offset}.
    InputError naming the file and lines for a malformed row, a repeated queue, or queues the
    store does not have and ``group`` never committed (all of them)."""
    plan: dict[tuple[str, int], int] = {}
    lines: dict[tuple[str, int], int] = {}
    problems: list[str] = []
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        for row in reader:
            n = reader.line_num
            if not "".join(row).strip():
                continue
            fields = [v.strip() for v in row]
            if len(fields) != 3 or not fields[0] or not all(v.isdecimal() for v in fields[1:]):
                raise InputError(f"{path}: line {n}: {','.join(row)!r} is not topic,queue,offset "
                                 f"(a topic, a queue id and an offset >= 0, as --export prints)")
            key = (fields[0], int(fields[1]))
            if key in lines:
                raise InputError(f"{path}: line {n}: {key[0]}:{key[1]} is on line {lines[key]} too")
            lines[key], plan[key] = n, int(fields[2])
    known = {t: _known_queues(ms, table, group, t) for t in {t for t, _ in plan}}
    for (topic, q), n in sorted(lines.items(), key=lambda item: item[1]):
        if q not in known[topic]:
            have = f"its queues are {id_ranges(known[topic])}" if known[topic] else "no such topic"
            problems.append(f"line {n}: topic {topic!r} has no queue {q} ({have})")
    if problems:
        raise InputError(f"{path}: queues that do not exist: {'; '.join(problems)}")
    return dict(sorted(plan.items()))


# --- reset ---------------------------------------------------------------------------------------
#: a reset target: (topic, queue, min offset, max offset, committed offset or None) -> new offset
Target = Callable[[str, int, int, int, int | None], int]


def reset_target(a: argparse.Namespace, ms: MessageStore, plan: dict[tuple[str, int], int]) -> Target:
    """The new offset of a queue by the one target option of ``a``, as Kafka's
    ``--reset-offsets``:

    - ``--to-datetime``: :meth:`MessageStore.offset_by_time` (RocketMQ's resetOffsetByTime uses
      getOffsetInQueueByTime: the message stored then, else the nearer neighbour);
      ``--by-duration D``: the same at now - D;
    - ``--to-earliest`` / ``--to-latest``: the queue's min / max offset;
    - ``--to-current``: the committed offset; the max offset where none is (Kafka: the log end);
    - ``--to-offset N``: N clamped to [min, max]; ``--shift-by N``: the committed offset (0 when
      none) plus N, clamped the same way;
    - ``--from-file``: the offset of ``plan``, as given."""
    if a.to_datetime is not None or a.by_duration is not None:
        at = a.to_datetime if a.to_datetime is not None else now_ms() - a.by_duration
        return lambda t, q, lo, hi, old: ms.offset_by_time(t, q, at)
    if a.to_earliest:
        return lambda t, q, lo, hi, old: lo
    if a.to_latest:
        return lambda t, q, lo, hi, old: hi
    if a.to_current:
        return lambda t, q, lo, hi, old: hi if old is None else old
    if a.from_file is not None:
        return lambda t, q, lo, hi, old: plan[t, q]
    if a.to_offset is not None:
        return lambda t, q, lo, hi, old: min(max(a.to_offset, lo), hi)
    return lambda t, q, lo, hi, old: min(max((old or 0) + a.shift_by, lo), hi)


def reset_rows(ms: MessageStore, table: Table, group: str, queues: Queues, target: Target) -> list[Row]:
    """One row per queue of ``queues``: its [min_offset, max_offset] (0, 0 for a queue the store
    does not have), ``group``'s committed offset (``old_offset``, None when none) and the
    ``target``'s ``new_offset``."""
    ranges = ms.queue_ranges()
    rows = []
    for topic, q in queues:
        lo, hi = ranges.get((topic, q), (0, 0))
        old = table.get((topic, group), {}).get(q)
        rows.append({"consumer_group": group, "topic": topic, "queue_id": q, "min_offset": lo,
                     "max_offset": hi, "old_offset": old, "new_offset": target(topic, q, lo, hi, old)})
    return rows


def _reset(a: argparse.Namespace, ms: MessageStore, table: Table) -> tuple[list[Row], Table]:
    """``offsets reset``: the rows of the plan and the table with it applied."""
    if a.from_file is not None and (a.topic or a.all_topics):
        raise InputError("--from-file resets the queues its rows name: give no --topic or --all-topics")
    if a.from_file is None and not a.topic and not a.all_topics:
        raise InputError("offsets reset: name the queues with --topic T[:Q,...] (repeatable) or "
                         "--all-topics, or give --from-file")
    plan = read_plan(a.from_file, ms, table, a.group) if a.from_file is not None else {}
    queues = list(plan) if plan else reset_scope(ms, table, a.group,
                                                 None if a.all_topics else parse_topics(a.topic))
    rows = reset_rows(ms, table, a.group, queues, reset_target(a, ms, plan))
    new = {k: dict(v) for k, v in table.items()}
    for r in rows:
        new.setdefault((r["topic"], a.group), {})[r["queue_id"]] = r["new_offset"]
    for topic in sorted({t for t, _ in queues if (t, a.group) not in table}):
        log.info("group %r has no offsets for topic %r yet: %s", a.group, topic,
                 "created" if a.execute else "would be created")
    return rows, new


# --- delete --------------------------------------------------------------------------------------
def _delete(a: argparse.Namespace, ms: MessageStore, table: Table) -> tuple[list[Row], Table]:
    """``offsets delete``: the rows of the offsets ``--group`` committed (of ``--topic``, every
    topic without it: also its %RETRY% topic, as RocketMQ's removeOffset) and the table without
    them; ValueError / InputError naming what the group has when nothing matches."""
    path = ms.root / CONSUMER_OFFSETS
    mine = {t: qs for (t, g), qs in table.items() if g == a.group}
    if not mine:
        raise ValueError(f"{path}: group {a.group!r} has no committed offsets")
    topics = parse_topics(a.topic) if a.topic else dict.fromkeys(mine)
    rows = []
    for topic, wanted in sorted(topics.items()):
        if topic not in mine:
            raise InputError(f"{path}: group {a.group!r} has no offsets for topic {topic!r}: it "
                             f"has offsets for {', '.join(sorted(mine))}")
        missing = (wanted or set()) - set(mine[topic])
        if missing:
            raise InputError(f"{path}: group {a.group!r} has no offset for queue "
                             f"{id_ranges(missing)} of topic {topic!r}: it has queues "
                             f"{id_ranges(mine[topic])}")
        rows += [{"consumer_group": a.group, "topic": topic, "queue_id": q, "offset": o}
                 for q, o in sorted(mine[topic].items()) if wanted is None or q in wanted]
    new = {k: dict(v) for k, v in table.items()}
    for r in rows:
        key = (r["topic"], a.group)
        del new[key][r["queue_id"]]
        if not new[key]:
            del new[key]
    return rows, new


# --- the command ---------------------------------------------------------------------------------
#: what a refused --execute did not do
_REFUSAL = {"reset": "offsets not reset", "delete": "offsets not deleted"}


@contextmanager
def _writer_lock(a: argparse.Namespace) -> Iterator[None]:
    """With ``--execute``: the store's writer lock held meanwhile; StoreLockedError while a
    broker or another writer holds the store (it would overwrite the file from its memory)."""
    if not a.execute:
        yield
        return
    lock = StoreLock(a.store)
    try:
        lock.acquire()
    except StoreLockedError as e:
        raise StoreLockedError(f"{e}; {_REFUSAL[a.action]} (stop the broker or writer, then "
                               f"re-run)") from None
    try:
        yield
    finally:
        lock.release()


def _given(a: argparse.Namespace, option: str) -> bool:
    """Whether ``option`` (``--to-offset``) is on the command line (its value is not the
    default None / False)."""
    value = getattr(a, option[2:].replace("-", "_"))
    return value is not None and value is not False


def cmd_offsets(a: argparse.Namespace) -> int:
    """``offsets reset`` / ``offsets delete``: print the plan (a table, ``--json`` rows, or
    ``--export`` CSV); ``--execute`` writes `config/consumerOffset.json` (nothing else)."""
    check_store(a.store)
    if a.action == "delete":
        given = [o for o in (*RESET_TARGETS, "--all-topics", "--export") if _given(a, o)]
        if given:
            raise InputError(f"offsets delete takes no {', '.join(given)} (those are reset's)")
    elif not any(_given(a, o) for o in RESET_TARGETS):
        raise InputError(f"offsets reset: give one of {', '.join(RESET_TARGETS)}")
    with _writer_lock(a):
        with open_read_only(a) as ms:
            table = committed_offsets(ms, _REFUSAL[a.action] if a.execute else None)
            rows, new = (_delete if a.action == "delete" else _reset)(a, ms, table)
        if a.export:
            sys.stdout.write("".join(f"{r['topic']},{r['queue_id']},{r['new_offset']}\n" for r in rows))
        else:
            what = "offsets reset" if a.action == "reset" else "offsets to delete"
            show_rows(a, rows, RESET_COLUMNS if a.action == "reset" else DELETE_COLUMNS,
                  f"{what} of {a.group}")
        if a.execute:
            path = a.store / CONSUMER_OFFSETS
            kept = f" (previous content in {path.name}.bak)" if path.exists() else ""
            write_consumer_offsets(a.store, new)
            log.info("wrote %s%s", path, kept)
        else:
            live = " (a writer holds the store now: --execute would be refused)" if is_locked(a.store) else ""
            log.info("dry run: nothing written; --execute to apply%s", live)
    return 0
