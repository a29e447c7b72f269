"""The CommitLog range a read covers, from the ``startingOffsets`` / ``endingOffsets`` /
``startingTimestamp`` / ``endingTimestamp`` options (``transforms.source_options``).

A position is a CommitLog physical offset; a read covers the records that start in ``[lo, hi)``
(the end is exclusive, as the Kafka source's ``endingOffsets``). ``earliest`` is the first byte,
``latest`` the end of valid data (the walk stops there by itself, so it bounds nothing).

A timestamp ``ts`` (epoch ms) names the position of :func:`offset_at_time`: the first record, in
CommitLog order, whose store time is >= ``ts``; a read from it takes every record after it, whatever
their store times (as Kafka takes every later offset). RocketMQ stamps a record's store time
under the CommitLog's put lock, so store times rise with the offset unless the clock steps back
(or a writer gave its own times). The search therefore skips whole files by their first record:
it walks only the file before the first file whose first record is stored at or after ``ts``, and
takes that file's first record when the walk finds none. When store times are in offset order,
that is exactly the first record stored at or after ``ts``; when they are not, a record of an
earlier file stored at or after ``ts`` is not looked for (it is read only if it lies after the
position).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from rocketlake.store.kernels import records as kr
from rocketlake.transforms.commitlog_batch import walk_range
from rocketlake.transforms.commitlog_scan import commitlog_files
from rocketlake.transforms.source_options import EARLIEST, LATEST, Position, SourceOptions

#: past every CommitLog offset: a bound that reads nothing
NOWHERE = 1 << 62
#: the bounds of a column nothing bounds
UNBOUNDED = (-(1 << 63), 1 << 63)


def _first_store_time(path: Path, start: int) -> int | None:
    """Store time of the record at the head of the file (None: no record there)."""
    buf = np.memmap(path, dtype=np.uint8, mode="r") if path.stat().st_size else None
    if buf is None:
        return None
    (s,) = walk_range(buf, start, 0, 1, check_crc=False)
    return int(s.raw[0, kr.STORE_TS]) if len(s.raw) else None


def offset_at_time(files: list[tuple[Path, int]], ts: int) -> int | None:
    """CommitLog offset of the first record stored at or after ``ts`` (epoch ms), by the rule of
    the module docstring; None when there is none. ``files``: ``commitlog_scan.commitlog_files``."""
    heads = []
    for path, start in files:
        t = _first_store_time(path, start)
        if t is None:  # zeros at a file's head: the CommitLog's data ended before it
            break
        heads.append((path, start, t))
    later = next((i for i, (_, _, t) in enumerate(heads) if t >= ts), len(heads))
    if later > 0:
        path, start, _ = heads[later - 1]
        buf = np.memmap(path, dtype=np.uint8, mode="r")
        for s in walk_range(buf, start, 0, buf.size, check_crc=False):
            hit = np.flatnonzero(s.raw[:, kr.STORE_TS] >= ts)
            if hit.size:
                return int(s.raw[hit[0], kr.OFFSET])
    return heads[later][1] if later < len(heads) else None


def _bound(position: Position, ts: int | None, files: list[tuple[Path, int]],
           unbounded: int) -> int:
    if ts is not None:
        found = offset_at_time(files, ts)
        return NOWHERE if found is None else found
    if position in (EARLIEST, LATEST):
        return unbounded
    assert not isinstance(position, str)
    return position.commitlog_offset


def offset_range(opts: SourceOptions) -> tuple[int, int]:
    """``[lo, hi)``: the CommitLog offsets of the records a batch read with ``opts`` takes (rules:
    the module docstring); unbounded ends are the widest int64 values."""
    lo_any, hi_any = UNBOUNDED
    files = commitlog_files(Path(opts.path), opts.commitlog_config()) if (
        opts.starting_timestamp is not None or opts.ending_timestamp is not None) else []
    return (_bound(opts.starting_offsets, opts.starting_timestamp, files, lo_any),
            _bound(opts.ending_offsets, opts.ending_timestamp, files, hi_any))
