"""Check ConsumeQueue units against the CommitLog record heads they point at, many queues in one
compiled pass (recovery's check of every queue's last three files, ``recovery._check_queues``).

Units arrive as native int64 columns of all queues back to back (``bounds[k]:bounds[k + 1]`` are
queue k's); ``heads_in_file`` first gathers, file by file, the (TOTALSIZE, MAGIC,
PHYSICALOFFSET) of the record head each unit points at, then ``check`` applies the rules per
queue. The rules are the docstring of ``recovery._check_queues``.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rocketlake.store.codec import CQ_BLANK_UNIT_SIZE
from rocketlake.store.kernels import kernel
from rocketlake.store.kernels.records import be_i32, be_i64
from rocketlake.store.layout import MAGIC_V1, MAGIC_V2, OFF_MAGIC, OFF_PHYSICAL_OFFSET

# --- what ``check`` found wrong with a queue's first bad unit (``BAD_WHAT[code]``) ----------------
GARBAGE, PAST_END, NO_HEAD = range(3)
BAD_WHAT = ("is not a unit", "points past the CommitLog end", "does not point at a record head")

Ints = npt.NDArray[np.int64]
#: a head is read up to PHYSICALOFFSET's end
_HEAD_SIZE = OFF_PHYSICAL_OFFSET + 8


@kernel
def heads_in_file(buf: npt.NDArray[np.uint8], file_start: int, offsets: Ints, out: Ints) -> None:
    """``out[i] = (TOTALSIZE, MAGIC, PHYSICALOFFSET)`` of the head at CommitLog offset
    ``offsets[i]`` for each head inside this file (``buf``, starting at ``file_start``); rows
    of other offsets are left as they are (zeros: no head)."""
    for i in range(offsets.size):
        p = offsets[i] - file_start
        if 0 <= p and p + _HEAD_SIZE <= buf.size:
            out[i, 0] = be_i32(buf, p)
            out[i, 1] = be_i32(buf, p + OFF_MAGIC)
            out[i, 2] = be_i64(buf, p + OFF_PHYSICAL_OFFSET)


@kernel
def check(off: Ints, size: Ints, tags: Ints, heads: Ints, bounds: Ints, first: Ints,
          first_written: Ints, last_written: Ints, pre_blank_end: Ints, end: int, min_offset: int,
          bad_at: Ints, bad_what: Ints, settled: npt.NDArray[np.bool_], min_unit: Ints) -> None:
    """Per queue k: ``bad_at[k]``, the index among its units of the first that disagrees with
    the CommitLog (-1: none), and ``bad_what[k]`` how (GARBAGE, PAST_END, NO_HEAD);
    ``settled[k]``, whether its newest file holds units and none points past ``end``;
    ``min_unit[k]``, the index of its first unit whose record is at or above ``min_offset``
    (-1: none). ``pre_blank_end[k]`` is the queue offset after its pre-blank units, or -1 when
    every unit of its first file was read and this pass finds it. ``first[k]``: the queue offset
    of its first unit; ``first_written`` / ``last_written``: units written in its first and
    newest file."""
    for k in range(bounds.size - 1):
        lo, n = bounds[k], bounds[k + 1] - bounds[k]
        pbe = pre_blank_end[k]
        if pbe < 0:
            pbe = first[k] + first_written[k]
            for i in range(n):
                j = lo + i
                blank = off[j] == 0 and size[j] == CQ_BLANK_UNIT_SIZE and tags[j] == 0
                if not blank or i >= first_written[k]:
                    pbe = first[k] + i
                    break
        unit_from = max(pbe - first[k], 0)  # units before it are pre-blanks
        last_inside = 0
        for i in range(unit_from, n):
            j = lo + i
            if off[j] >= 0 and size[j] > 0 and off[j] + size[j] <= end:
                last_inside = i
        bad_at[k], bad_what[k] = -1, -1
        for i in range(unit_from, n):
            j = lo + i
            if off[j] < 0 or size[j] <= 0:
                bad_at[k], bad_what[k] = i, GARBAGE
            elif off[j] + size[j] > end:
                if i < last_inside:
                    bad_at[k], bad_what[k] = i, PAST_END
            elif off[j] >= min_offset and (
                    (heads[j, 1] != MAGIC_V1 and heads[j, 1] != MAGIC_V2)
                    or heads[j, 0] != size[j] or heads[j, 2] != off[j]):
                bad_at[k], bad_what[k] = i, NO_HEAD
            if bad_at[k] >= 0:
                break
        tail_beyond = False
        for i in range(max(unit_from, n - last_written[k]), n):
            j = lo + i
            if off[j] >= 0 and size[j] > 0 and off[j] + size[j] > end:
                tail_beyond = True
                break
        settled[k] = last_written[k] > 0 and not tail_beyond
        min_unit[k] = -1
        for i in range(n):
            j = lo + i
            if off[j] >= min_offset and size[j] > 0 and size[j] != CQ_BLANK_UNIT_SIZE:
                min_unit[k] = i
                break
