"""`rocketlake dump`, `get` and `query`: a store's records, ConsumeQueue units and index entries,
read-only, through the filters given; printed by :mod:`rocketlake.jobs.cli.output`. Options in
:mod:`rocketlake.jobs.cli`; no Spark here."""
from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Generator, Iterable, Iterator
from functools import partial
from typing import Any, TypeVar

import numpy as np

from rocketlake.jobs.cli.events import InputError
from rocketlake.jobs.cli.output import emit, emit_messages, row_text
from rocketlake.jobs.cli.reading import open_read_only, store_time
from rocketlake.jobs.cli.selection import check_ranges, check_selection
from rocketlake.jobs.exit_codes import ExitCode
from rocketlake.jobs.times import time_fields
from rocketlake.store import MessageStore, Record, codec
from rocketlake.store.batch_consume_queue import BatchConsumeQueue
from rocketlake.store.codec import INDEX_HEADER
from rocketlake.store.commitlog import CommitLog, RecordWalk
from rocketlake.store.consume_queue import ConsumeQueue
from rocketlake.store.errors import CorruptRecordError, StoreFormatError
from rocketlake.store.mapped_file import first_nonzero
from rocketlake.store.message_store import tag_filter
from rocketlake.store.queue_reader import QueueReader
from rocketlake.store.store_time import format_time

log = logging.getLogger(__name__)

#: index entries (or ConsumeQueue units) decoded at a time by `dump`: its memory is bounded by
#: this, not by the size of a file
DUMP_CHUNK = 8192
#: the default store time range of the filters: everything
_EARLIEST, _LATEST = 0, 2 ** 63 - 1
#: what `dump --max` counts, by what is dumped
_COUNTED = {"commitlog": "records", "consumequeue": "units", "index": "index entries"}

T = TypeVar("T")


class Cap:
    """At most ``limit`` (None: all) counted items of a stream (``dump --max``); ``cut`` tells
    whether one more matched."""

    def __init__(self, limit: int | None) -> None:
        self.limit, self.shown, self.cut = limit, 0, False

    def __call__(self, items: Iterable[T], counted: Callable[[T], bool] = lambda _: True) -> Iterator[T]:
        """The items up to the limit; an uncounted item (an index file's header) is held back
        until a counted one follows it."""
        held: list[T] = []
        for item in items:
            if not counted(item):
                held.append(item)
                continue
            if self.limit is not None and self.shown >= self.limit:
                self.cut = True
                return
            self.shown += 1
            yield from held
            held.clear()
            yield item
        yield from held

    def say_cut(self, a: argparse.Namespace) -> None:
        """On stderr, when the limit cut the output: how many were shown and how to see more."""
        if self.cut:
            print(f"rocketlake {a.command}: {self.shown} {_COUNTED[a.what]} shown, more match; "
                  f"--max N shows more", file=sys.stderr)


def cmd_dump(a: argparse.Namespace) -> int:
    """Print the records, units or index entries that pass every filter given (topic, queue,
    offset range [--from-offset, --to-offset), store time range [--begin, --end], tags), the
    first ``--max`` of them. InputError (exit 2) for a topic or queue the store does not have,
    or a range that cannot match."""
    if a.what == "index" and (a.topic is not None or a.queue is not None or a.tags is not None):
        raise InputError("--topic, --queue and --tags do not apply to dump index (index entries "
                         "hold key hashes, not topics); use query --key, or the offset and time "
                         "filters")
    check_ranges(a)
    cap = Cap(a.max)
    with open_read_only(a) as ms:
        if a.what == "commitlog":
            return _dump_commitlog(ms, a, cap)
        if a.what == "consumequeue":
            check_selection(ms, a.topic, a.queue)
        rows = _cq_rows(ms, a) if a.what == "consumequeue" else _index_rows(ms, a)
        try:
            emit(cap(rows, lambda row: "index_count" not in row), a)
        finally:
            rows.close()  # its views on the maps go before the store closes (also on a closed pipe)
    cap.say_cut(a)
    return 0


def _dump_commitlog(ms: MessageStore, a: argparse.Namespace, cap: Cap) -> int:
    """The records in the offset range (the walk starts at the range, not at the first file)
    that pass the filters; exit 3 when damage stops the walk before the range's end. With no
    record printed, InputError when the store has no such ``--topic``/``--queue`` (neither a
    ConsumeQueue nor a record read names it)."""
    commitlog = ms.commitlog
    stop = _LATEST if a.to_offset is None else a.to_offset  # no --to-offset: to the end of valid data
    walk = commitlog.walk_records(_walk_start(commitlog, a.from_offset), check_crc=False, stop_at=stop)
    n = 0
    seen: set[tuple[str, int]] = set()
    wanted = tag_filter(a.tags)

    def read() -> Iterator[tuple[Record, dict[str, Any]]]:
        nonlocal n
        for r in walk:
            n += 1
            seen.add((r.topic, r.queue_id))
            if (r.commitlog_offset >= a.from_offset and a.begin <= r.store_timestamp <= a.end
                    and (a.topic is None or r.topic == a.topic)
                    and (a.queue is None or r.queue_id == a.queue)
                    and (wanted is None or r.tags in wanted[1])):
                yield r, {}

    printed = emit_messages(cap(read()), a, ms.config.delay_levels_ms)
    if cap.cut:
        cap.say_cut(a)
        return 0
    why = None if walk.end >= stop else _early_stop(ms, walk)
    if why:
        mf = commitlog.files.find(walk.end)
        where = f"file {mf.path.name} @{walk.end - mf.start}" if mf else "no file"
        log.error("rocketlake dump: error: stopped after %d records at commitlog offset %d (%s): %s",
                  n, walk.end, where, why)
        return ExitCode.UNUSABLE
    if not printed:
        check_selection(ms, a.topic, a.queue, seen)
    return 0


def _walk_start(log: CommitLog, offset: int) -> int:
    """Where a walk for the records at or after ``offset`` starts: ``offset`` when a valid record
    starts there, else the start of the file holding it (every CommitLog file starts with a
    record, RocketMQ's ``CommitLog.doAppend`` rolls with a BLANK record)."""
    if offset <= log.min_offset:
        return log.min_offset
    mf = log.files.find(offset)
    if mf is None:
        return offset  # past the end: nothing to read
    try:  # not log.read: a read-only open ends the data at the first damage, maybe before offset
        r = codec.decode_record(mf.mm, offset - mf.start, mf.start, True)
    except CorruptRecordError:
        return mf.start
    return offset if isinstance(r, Record) and r.physical_offset == offset else mf.start


def _early_stop(ms: MessageStore, walk: RecordWalk) -> str | None:
    """Why a finished CommitLog walk ended before the end of the data, None at the real end
    (zeros with nothing but zeros after them)."""
    if walk.error:
        return walk.error
    if walk.end < ms.commitlog.max_offset:
        return f"zeros where a record should start, valid records follow up to {ms.commitlog.max_offset}"
    mf = ms.commitlog.files.find(walk.end)
    garbage = first_nonzero(mf, walk.end - mf.start) if mf is not None else None
    if mf is not None and garbage is not None:
        return f"zeros where a record should start, non-zero bytes follow at {mf.start + garbage}"
    return None


def _cq_rows(ms: MessageStore, a: argparse.Namespace) -> Generator[dict[str, Any], None, None]:
    """The units of the selected queues in the queue offset range, ``DUMP_CHUNK`` at a time;
    with a time range, those whose record was stored in it (each unit's record is read for its
    store time); with ``--tags``, those whose tagsCode and record's tag the expression names.
    A 5.x BatchConsumeQueue's units come with their batch size and store time, each at the first
    queue offset it covers (the unit covering ``--from-offset`` included)."""
    timed = a.begin > _EARLIEST or a.end < _LATEST
    wanted = tag_filter(a.tags)

    def passes(off: int, tcode: int) -> bool:
        return ((not timed or a.begin <= _store_time(ms, off) <= a.end)
                and (wanted is None or (tcode in wanted[0] and _tags(ms, off) in wanted[1])))

    def batch_rows(t: str, q: int, bq: BatchConsumeQueue) -> Iterator[dict[str, Any]]:
        for off, size, tcode, ts, base, batch, *_ in bq.batch_units[bq.unit_index(a.from_offset):].tolist():
            if a.to_offset is not None and base >= a.to_offset:
                return
            if passes(off, tcode):
                yield {"topic": t, "queue_id": q, "queue_offset": base, "commitlog_offset": off,
                       "size": size, "tags_code": tcode, "batch_size": batch, "store_timestamp": ts}

    def rows(t: str, q: int, cq: QueueReader) -> Iterator[dict[str, Any]]:
        # a file queue from its first file (units below its min offset are stored), a RocksDB
        # queue from its min offset
        first = cq.files.min_offset // codec.CQ_UNIT_SIZE if isinstance(cq, ConsumeQueue) else cq.min_offset
        at = max(a.from_offset, first)
        stop = cq.max_offset if a.to_offset is None else min(a.to_offset, cq.max_offset)
        while at < stop:
            units = cq.units(at, min(stop - at, DUMP_CHUNK))
            if not len(units):  # the rest of a file not written: go on at the next file
                mf = cq.files.find(at * codec.CQ_UNIT_SIZE) if isinstance(cq, ConsumeQueue) else None
                if mf is None:
                    return
                at = mf.end // codec.CQ_UNIT_SIZE
                continue
            for i, (off, size, tcode) in enumerate(units.tolist()):
                if passes(off, tcode):
                    yield {"topic": t, "queue_id": q, "queue_offset": at + i,
                           "commitlog_offset": off, "size": size, "tags_code": tcode}
            at += len(units)

    for t, q in sorted({*ms.queues, *ms.batch_queues}):
        if (a.topic is None or t == a.topic) and (a.queue is None or q == a.queue):
            cq = ms.queues.get((t, q))
            yield from rows(t, q, cq) if cq is not None else batch_rows(t, q, ms.batch_queues[(t, q)])


def _store_time(ms: MessageStore, offset: int) -> int:
    """The store time of the record at a CommitLog offset; -1 when no record is there."""
    try:
        return ms.commitlog.read(offset).store_timestamp
    except CorruptRecordError:
        return -1


def _tags(ms: MessageStore, offset: int) -> str | None:
    """The TAGS of the record at a CommitLog offset; None when it has none or no record is there."""
    try:
        return ms.commitlog.read(offset).tags
    except CorruptRecordError:
        return None


def _index_rows(ms: MessageStore, a: argparse.Namespace) -> Generator[dict[str, Any], None, None]:
    """Each index file's header, then its entries in the CommitLog offset and time ranges (an
    entry's time as RocketMQ's ``IndexFile.selectPhyOffset`` reads it: beginTimestamp +
    timeDiff seconds), ``DUMP_CHUNK`` entries at a time. With a filter, a file without a
    matching entry is left out. StoreFormatError naming the file for a header whose indexCount
    is more than the file holds."""
    if ms.index is None:
        return
    filtered = (a.from_offset > 0 or a.to_offset is not None
                or a.begin > _EARLIEST or a.end < _LATEST)
    stop = _LATEST if a.to_offset is None else a.to_offset
    for f in ms.index.files:  # all headers first: no view on a map outlives the error (close)
        count = INDEX_HEADER.unpack_from(f.mm, 0)[5]
        if not 0 <= count <= f.entry_num:
            raise StoreFormatError(f"{f.path}: the header's indexCount {count} is outside [0, "
                                   f"{f.entry_num}], the entries the file holds: the header is "
                                   f"damaged (rocketlake rebuild-index rebuilds the index)")
    for f in ms.index.files:
        bt, et, bp, ep, slots, count = INDEX_HEADER.unpack_from(f.mm, 0)
        matching = partial(_matching_entries, f.entries, bt, a.from_offset, stop, a.begin, a.end)
        chunks = [(lo, min(count, lo + DUMP_CHUNK)) for lo in range(1, count, DUMP_CHUNK)]
        if filtered:  # skip to the first chunk with a match; none: the file is left out
            chunks = chunks[next((i for i, c in enumerate(chunks) if matching(*c).size), len(chunks)):]
            if not chunks:
                continue
        yield {"file": f.path.name, "begin_timestamp": bt, "end_timestamp": et,
               "begin_phy_offset": bp, "end_phy_offset": ep, "hash_slot_count": slots,
               "index_count": count}
        for lo, hi in chunks:
            at = matching(lo, hi)
            for i, (h, phy, diff, prev) in zip(at.tolist(), f.entries[at].tolist()):
                yield {"file": f.path.name, "position": i, "key_hash": h, "slot": h % f.slot_num,
                       "phy_offset": phy, "time_diff": diff, "prev_index": prev}


def _matching_entries(entries: np.ndarray, begin_ts: int, from_offset: int, to_offset: int,
                      begin: int, end: int, lo: int, hi: int) -> np.ndarray:
    """Positions in [lo, hi) of the index ``entries`` (of a file whose beginTimestamp is
    ``begin_ts``) for CommitLog offsets in [from_offset, to_offset) stored in [begin, end]."""
    e = entries[lo:hi]
    phy, at = e["phy_offset"].astype(np.int64), begin_ts + e["time_diff"].astype(np.int64) * 1000
    keep = (from_offset <= phy) & (phy < to_offset) & (begin <= at) & (at <= end)
    return lo + np.flatnonzero(keep)


def cmd_get(a: argparse.Namespace) -> int:
    """The status line, then the messages; finding none is not an error (exit 0), but a line on
    stderr says so. A topic or queue the store does not have is (InputError, exit 2)."""
    with open_read_only(a) as ms:
        check_selection(ms, a.topic, a.queue)
        g = ms.get(a.topic, a.queue, a.offset, a.max, a.tags)
        status = {"status": g.status.value, "next_begin_offset": g.next_begin_offset,
                  "min_offset": g.min_offset, "max_offset": g.max_offset, "count": len(g.messages)}
        print(row_text(status) if a.format == "text" else json.dumps(status))
        emit_messages(((m.record, {"queue_offset": m.queue_offset, "tags_code": m.tags_code})
                        for m in g.messages), a, ms.config.delay_levels_ms)
    if not g.messages:
        tags = f" with tags '{a.tags}'" if a.tags else ""
        _nothing(a, f"no message{tags} in queue {a.topic}/{a.queue} from queue offset {a.offset}: "
                    f"{g.status.value} (the queue holds offsets [{g.min_offset}, {g.max_offset}))")
    return 0


def _nothing(a: argparse.Namespace, why: str) -> None:
    """Say on stderr that a read found nothing (not an error: the command exits 0)."""
    log.info("rocketlake %s: %s", a.command, why)


def cmd_query(a: argparse.Namespace) -> int:
    """Finding nothing is not an error (exit 0), but a line on stderr says so. A topic or queue
    the store does not have, or a time range that cannot match, is (InputError, exit 2)."""
    check_ranges(a)
    with open_read_only(a) as ms:
        if a.msg_id:
            emit_messages([(ms.lookup(a.msg_id, a.topic or None), {})], a,
                          ms.config.delay_levels_ms)
        elif a.key is not None:
            if not a.topic:
                raise InputError("--key needs --topic")
            check_selection(ms, a.topic, None)
            found = ms.query(a.topic, a.key, _LATEST, a.begin, a.end)
            shown = found[max(0, len(found) - a.max):]  # as RocketMQ: the last stored
            emit_messages(((r, {}) for r in shown), a, ms.config.delay_levels_ms)
            if not found:
                stored = ("" if (a.begin, a.end) == (_EARLIEST, _LATEST)
                          else f" stored in [{format_time(a.begin)}, {format_time(a.end)}]")
                _nothing(a, f"no message with key '{a.key}' in topic '{a.topic}'{stored}")
            elif len(shown) < len(found):
                print(f"rocketlake query: {len(shown)} of {len(found)} shown (the last stored); "
                      f"--max N shows more", file=sys.stderr)
        else:
            if not a.topic or a.queue is None:
                raise InputError("--time needs --topic and --queue")
            check_selection(ms, a.topic, a.queue)
            off = ms.offset_by_time(a.topic, a.queue, a.time)
            row = {"topic": a.topic, "queue_id": a.queue, "time": format_time(a.time),
                   "timestamp": a.time, "queue_offset": off,
                   **time_fields("store", store_time(ms, a.topic, a.queue, off))}
            print(row_text({k: v for k, v in row.items() if not k.endswith("timestamp")})
                  if a.format == "text" else json.dumps(row))
            if ms.max_offset(a.topic, a.queue) == 0:
                _nothing(a, f"no message in queue {a.topic}/{a.queue}")
    return 0
