"""Timer messages a 5.x broker holds but has not delivered yet (docs/FORMAT.md §9.6), read from
its files: `config/timercheck`, `timerwheel`, `timerlog/` and the ``rmq_sys_wheel_timer`` queue.

A timed message is stored as a copy in ``rmq_sys_wheel_timer`` (REAL_TOPIC, TIMER_OUT_MS). The
broker's TimerMessageStore reads that queue up to `timercheck`'s lastTimerQueueOffset and appends
a 52-byte unit per copy to the timer log, chained per wheel slot (the slot keeps its first and
last unit; each unit the one before it in the slot). It delivers slot by slot up to
lastReadTimeMs. So what is pending is (1) every unit of a slot whose time is at or after
lastReadTimeMs, less the messages a delete unit of the same slot cancels (``realTopic+uniqKey``),
and (2) every copy in the queue from lastTimerQueueOffset on not yet in the log (its cancels
ignored). A rolled unit (a delay beyond the wheel) is pending under its message's TIMER_OUT_MS.
"""
from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rocketlake.store.codec import PROPERTY_REAL_TOPIC, PROPERTY_UNIQ_KEY, Record
from rocketlake.store.errors import CorruptRecordError, StoreFormatError
from rocketlake.store.safe_files import read_file

#: TimerCheckpoint: lastReadTimeMs, lastTimerLogFlushPos, lastTimerQueueOffset,
#: masterTimerQueueOffset (longs at 0, 8, 16, 24)
TIMER_CHECKPOINT = struct.Struct(">qqqq")
#: TimerWheel slot (``Slot.SIZE``): time / precisionMs, first unit, last unit, count, magic
TIMER_SLOT = struct.Struct(">qqqii")
#: TimerLog unit (``TimerLog.UNIT_SIZE``): size, previous unit, magic, enqueue time, delay from
#: it, CommitLog offset and size of the copy, hash of the real topic, reserved
TIMER_UNIT = struct.Struct(">iqiqiqiiq")
#: TimerMessageStore.MAGIC_ROLL / MAGIC_DELETE
MAGIC_ROLL, MAGIC_DELETE = 0x2, 0x4
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"


@dataclass(frozen=True)
class PendingTimer:
    """One timed message not delivered yet: its real topic, when it is due (ms), and its copy's
    CommitLog offset."""
    real_topic: str
    deliver_ms: int
    commitlog_offset: int


class _TimerLog:
    """The timer log's files (`timerlog/<20-digit offset>`, all one size), read on demand."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "timerlog"
        self.files = {int(f.name): f for f in self.dir.iterdir() if f.name.isdigit()} \
            if self.dir.is_dir() else {}
        self._cache: dict[int, bytes] = {}

    def unit(self, pos: int) -> tuple[int, ...]:
        """The unit at timer log offset ``pos`` (StoreFormatError where no file holds one)."""
        start = max((s for s in self.files if s <= pos), default=None)
        if start is None:
            raise StoreFormatError(f"{self.dir}: no timer log file holds offset {pos}")
        data = self._cache.get(start)
        if data is None:
            data = self._cache[start] = read_file(self.files[start])
        if pos - start + TIMER_UNIT.size > len(data):
            raise StoreFormatError(f"{self.files[start]}: offset {pos} is past the file's end")
        return TIMER_UNIT.unpack_from(data, pos - start)


def _slot_units(log: _TimerLog, last: int, first: int) -> Iterator[tuple[int, tuple[int, ...]]]:
    """A slot's units with their timer log offsets, newest first, from ``last`` back to ``first``
    (-1 ends a chain too)."""
    pos, seen = last, 0
    while pos >= 0:
        unit = log.unit(pos)
        yield pos, unit
        seen += 1
        if pos == first or seen > 1 << 24:
            return
        pos = unit[1]


def pending_timers(root: Path, read: Callable[[int], Record],
                   queued: Callable[[int], Iterator[Record]]) -> list[PendingTimer]:
    """Every pending timed message of the store at ``root`` by the module docstring; ``read``
    gives the record at a CommitLog offset, ``queued(n)`` the ``rmq_sys_wheel_timer`` copies from
    queue offset ``n`` on. Empty where the broker keeps no timers (no `config/timercheck`)."""
    check = root / "config" / "timercheck"
    if not os.path.lexists(check):
        return []
    raw = read_file(check)
    if len(raw) < TIMER_CHECKPOINT.size:
        raise StoreFormatError(f"{check}: {len(raw)} bytes, too short for a timer checkpoint")
    last_read_ms, _, queue_offset, _ = TIMER_CHECKPOINT.unpack_from(raw)
    out = []
    wheel = root / "timerwheel"
    log = _TimerLog(root)
    wheel_bytes = read_file(wheel) if os.path.lexists(wheel) else b""
    if len(wheel_bytes) % (2 * TIMER_SLOT.size):  # TimerWheel: slotsTotal * 2 slots, 32 bytes each
        raise StoreFormatError(f"{wheel}: {len(wheel_bytes)} bytes, not a whole number of "
                               f"{2 * TIMER_SLOT.size}-byte slot pairs ({TIMER_SLOT.size}-byte "
                               f"slots, two rounds): cut or not a timer wheel")
    for at in range(0, len(wheel_bytes) - TIMER_SLOT.size + 1, TIMER_SLOT.size):
        ticks, first, last, _, _ = TIMER_SLOT.unpack_from(wheel_bytes, at)
        if ticks <= 0 or last < 0:
            continue
        units = list(_slot_units(log, last, first))
        precision = (units[0][1][3] + units[0][1][4]) // ticks  # enqueue + delay = ticks * precisionMs + r
        if ticks * precision < last_read_ms:
            continue  # delivered
        deleted: set[str] = set()
        timers = []
        for pos, (_, _, magic, _, _, offset, _, _, _) in units:
            try:
                rec = read(offset)
            except CorruptRecordError as e:
                raise StoreFormatError(f"{log.dir}: the unit at timer log offset {pos} points at "
                                       f"no record: {e}") from None
            props = rec.properties
            if magic & MAGIC_DELETE and not magic & MAGIC_ROLL:
                deleted.add(props.get(PROPERTY_TIMER_DEL_UNIQKEY, ""))
            else:
                timers.append((rec, props))
        out += [_pending(rec, props) for rec, props in timers
                if f"{props.get(PROPERTY_REAL_TOPIC)}+{props.get(PROPERTY_UNIQ_KEY)}" not in deleted]
    out += [_pending(rec, rec.properties) for rec in queued(queue_offset)
            if PROPERTY_TIMER_DEL_UNIQKEY not in rec.properties]
    return out


def _pending(rec: Record, props: dict[str, str]) -> PendingTimer:
    return PendingTimer(props.get(PROPERTY_REAL_TOPIC, rec.topic),
                        int(props.get(PROPERTY_TIMER_OUT_MS, "0")), rec.commitlog_offset)
