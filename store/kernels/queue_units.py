"""Check ConsumeQueue units against the CommitLog record heads they point at, many queues in one
compiled pass (recovery's check of every queue's last three files, ``recovery._check_queues``).

Units arrive as the files' bytes (big-endian 20-byte units) of all queues back to back
(``bounds[k]:bounds[k + 1]`` are queue k's unit indexes); ``heads_in_file`` first marks, file by
file, each unit that points at the head of a record of its size (MAGIC v1 or v2, PHYSICALOFFSET
= its address, TOTALSIZE = its size), then ``check`` applies the rules per queue. The rules are
the docstring of ``recovery._check_queues``. Nothing is copied out of the units' bytes.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rocketlake.store.codec import CQ_BLANK_UNIT_SIZE, CQ_UNIT_SIZE
from rocketlake.store.kernels import kernel
from rocketlake.store.kernels.records import be_i32, be_i64
from rocketlake.store.layout import MAGIC_V1, MAGIC_V2, OFF_MAGIC, OFF_PHYSICAL_OFFSET

# --- what ``check`` found wrong with a queue's first bad unit (``BAD_WHAT[code]``) ----------------
GARBAGE, PAST_END, NO_HEAD = range(3)
BAD_WHAT = ("is not a unit", "points past the CommitLog end", "does not point at a record head")

Ints = npt.NDArray[np.int64]
Bytes = npt.NDArray[np.uint8]
#: a head is read up to PHYSICALOFFSET's end
_HEAD_SIZE = OFF_PHYSICAL_OFFSET + 8
#: a unit's fields: CommitLog offset (8 bytes), size (4), tagsCode (8)
_SIZE_AT, _TAGS_AT = 8, 12


@kernel
def unit_offset(units: Bytes, j: int) -> int:
    """CommitLog offset of unit ``j`` of ``units`` (ConsumeQueue file bytes)."""
    return be_i64(units, j * CQ_UNIT_SIZE)


@kernel
def unit_size(units: Bytes, j: int) -> int:
    """Record size of unit ``j``."""
    return be_i32(units, j * CQ_UNIT_SIZE + _SIZE_AT)


@kernel
def offset_range(units: Bytes, a: int, b: int) -> tuple[int, int]:
    """(lowest, highest) CommitLog offset of units ``a`` to ``b - 1`` ((0, -1) when none)."""
    if b <= a:
        return 0, -1
    lo = hi = unit_offset(units, a)
    for j in range(a + 1, b):
        o = unit_offset(units, j)
        lo, hi = min(lo, o), max(hi, o)
    return lo, hi


@kernel
def heads_in_file(buf: Bytes, file_start: int, units: Bytes, a: int, b: int,
                  at_head: npt.NDArray[np.bool_]) -> None:
    """For units ``a`` to ``b - 1`` whose CommitLog offset is inside this file (``buf``, starting
    at ``file_start``): ``at_head[j]``, whether a record head of the unit's size is there (MAGIC
    v1 or v2, PHYSICALOFFSET its address, TOTALSIZE the unit's size). Other units' flags are
    left as they are (False: no head)."""
    for j in range(a, b):
        off = unit_offset(units, j)
        p = off - file_start
        if 0 <= p and p + _HEAD_SIZE <= buf.size:
            magic = be_i32(buf, p + OFF_MAGIC)
            at_head[j] = ((magic == MAGIC_V1 or magic == MAGIC_V2) and be_i32(buf, p) == unit_size(units, j)
                          and be_i64(buf, p + OFF_PHYSICAL_OFFSET) == off)


@kernel
def check(units: Bytes, at_head: npt.NDArray[np.bool_], bounds: Ints, first: Ints,
          first_written: Ints, last_written: Ints, pre_blank_end: Ints, end: int, min_offset: int,
          bad_at: Ints, bad_what: Ints, settled: npt.NDArray[np.bool_], min_unit: Ints) -> None:
    """Per queue k: ``bad_at[k]``, the index among its units of the first that disagrees with
    the CommitLog (-1: none), and ``bad_what[k]`` how (GARBAGE, PAST_END, NO_HEAD);
    ``settled[k]``, whether its newest file holds units and none points past ``end``;
    ``min_unit[k]``, the index of its first unit whose record is at or above ``min_offset``
    (-1: none). ``at_head``: ``heads_in_file``'s flags. ``pre_blank_end[k]`` is the queue offset
    after its pre-blank units, or -1 when every unit of its first file was read and this pass
    finds it. ``first[k]``: the queue offset of its first unit; ``first_written`` /
    ``last_written``: units written in its first and newest file."""
    for k in range(bounds.size - 1):
        lo, n = bounds[k], bounds[k + 1] - bounds[k]
        pbe = pre_blank_end[k]
        if pbe < 0:
            pbe = first[k] + first_written[k]
            for i in range(n):
                j = lo + i
                blank = (unit_offset(units, j) == 0 and unit_size(units, j) == CQ_BLANK_UNIT_SIZE
                         and be_i64(units, j * CQ_UNIT_SIZE + _TAGS_AT) == 0)
                if not blank or i >= first_written[k]:
                    pbe = first[k] + i
                    break
        unit_from = max(pbe - first[k], 0)  # units before it are pre-blanks
        last_inside = 0
        for i in range(unit_from, n):
            off, size = unit_offset(units, lo + i), unit_size(units, lo + i)
            if off >= 0 and size > 0 and off + size <= end:
                last_inside = i
        bad_at[k], bad_what[k] = -1, -1
        for i in range(unit_from, n):
            off, size = unit_offset(units, lo + i), unit_size(units, lo + i)
            if off < 0 or size <= 0:
                bad_at[k], bad_what[k] = i, GARBAGE
            elif off + size > end:
                if i < last_inside:
                    bad_at[k], bad_what[k] = i, PAST_END
            elif off >= min_offset and not at_head[lo + i]:
                bad_at[k], bad_what[k] = i, NO_HEAD
            if bad_at[k] >= 0:
                break
        tail_beyond = False
        for i in range(max(unit_from, n - last_written[k]), n):
            off, size = unit_offset(units, lo + i), unit_size(units, lo + i)
            if off >= 0 and size > 0 and off + size > end:
                tail_beyond = True
                break
        settled[k] = last_written[k] > 0 and not tail_beyond
        min_unit[k] = -1
        for i in range(n):
            off, size = unit_offset(units, lo + i), unit_size(units, lo + i)
            if off >= min_offset and size > 0 and size != CQ_BLANK_UNIT_SIZE:
                min_unit[k] = i
                break
