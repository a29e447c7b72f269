"""IndexFile slot and chain kernels over the bytes of one mapped index file (``np.uint8``).

Layout (RocketMQ's ``IndexFile``, ``IndexHeader``): a 40-byte header, ``slotNum`` big-endian int32
hash slots, then ``indexNum`` 20-byte entries (keyHash int32, phyOffset int64, timeDiff int32,
prevIndex int32). A slot holds the position of the newest entry of its keys; each entry's
prevIndex is the slot's value before it, so a slot heads a chain running back in time.

- ``place``: put keys one after the other exactly as ``IndexFile.putKey`` does, those of a range
  of slots, each at its given position (the puts of disjoint slot ranges are independent:
  tasks can share one file, each given only its slots' keys).
- ``reachable``: which entries a query for their own key finds (``IndexFile.selectPhyOffset``).
- ``keys_to_match``: the keys of a batch of records that the index should hold.
- ``found_keys``: which of a set of records' keys the found entries stand for.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rocketlake.store.codec import (
    INDEX_ENTRY_SIZE,
    INDEX_HEADER_SIZE,
    INDEX_MAX_TIME_DIFF,
    INDEX_SLOT_SIZE,
)
from rocketlake.store.kernels import kernel
from rocketlake.store.kernels.records import be_i32, be_i64
from rocketlake.store.kernels.words import put_be32, put_be64

Buffer = npt.NDArray[np.uint8]
#: records ``found_keys`` steps over before it searches instead
_STEPS = 8


@kernel
def _entry_at(slot_num: int, position: int) -> int:
    return INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * slot_num + INDEX_ENTRY_SIZE * position


@kernel
def place(buf: Buffer, slot_num: int, key_hash: npt.NDArray[np.int32], phy: npt.NDArray[np.int64],
          ts: npt.NDArray[np.int64], pos: npt.NDArray[np.int64], index_count: int, begin_ts: int,
          first_ts: int, slot_lo: int, slot_hi: int) -> int:
    """Put key ``i`` (``key_hash[i] >= 0``: ``IndexFile.indexKeyHashMethod``; its record's CommitLog
    offset and store time) at entry position ``index_count + pos[i]`` as ``IndexFile.putKey``
    does, when its slot is in ``[slot_lo, slot_hi)``. ``pos`` numbers the keys within a batch
    put in order: all of the batch's keys, or some of them with the keys of each slot in put
    order (those of a slot range, say; slot chains never cross slots, so calls over disjoint slot
    ranges write disjoint bytes and together put every key). The put: slot
    ``keyHash % slotNum``; prevIndex the slot's old value when it is in ``(0, indexCount]``, else
    0; timeDiff the seconds from the header's beginTimestamp as it is at that put: ``begin_ts``
    for the batch's first put (``pos`` 0), and for the later ones too unless the file was empty
    (``index_count <= 1``: its first put made beginTimestamp that put's store time,
    ``first_ts``); 0 when beginTimestamp is not positive, clamped to ``[0, Integer.MAX_VALUE]``;
    the slot then holds the new position. The caller checks the batch fits
    (``index_count + batch size <= indexNum``, ``index_count >= 1`` as RocketMQ's count starts)
    and updates the header. Returns how many of the puts found their slot empty (their share of
    hashSlotCount's increase)."""
    later = first_ts if index_count <= 1 else begin_ts
    filled = 0
    for i in range(key_hash.size):
        h = int(key_hash[i])
        slot = h % slot_num
        if slot_lo <= slot < slot_hi:
            count = index_count + pos[i]
            slot_at = INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * slot
            prev = be_i32(buf, slot_at)
            if prev <= 0 or prev > count:
                prev = 0
                filled += 1
            begin = begin_ts if pos[i] == 0 else later
            diff = 0
            if begin > 0:
                diff = (ts[i] - begin) // 1000 if ts[i] > begin else 0
                diff = min(diff, INDEX_MAX_TIME_DIFF)
            at = _entry_at(slot_num, count)
            put_be32(buf, at, h)
            put_be64(buf, at + 4, phy[i])
            put_be32(buf, at + 12, diff)
            put_be32(buf, at + 16, prev)
            put_be32(buf, slot_at, count)
    return filled


@kernel
def reachable(buf: Buffer, slot_num: int, index_count: int, begin_ts: int,
              found: npt.NDArray[np.bool_]) -> None:
    """``found[e]``: whether a query for entry ``e``'s own keyHash over all time (begin 0, end
    Long.MAX_VALUE) returns it, walking as ``IndexFile.selectPhyOffset`` does: from slot
    ``keyHash % slotNum`` when its value is in ``(0, indexCount]`` and ``indexCount > 1``, along
    prevIndex; an entry with a negative timeDiff ends the walk unread; the walk ends after an
    entry whose prevIndex is outside ``(0, indexCount]``, is the entry itself, or whose time is
    before the query's begin. ``found`` has a row per entry position that can be reached,
    ``min(indexNum, indexCount + 1)``: unlike RocketMQ, a walk also ends at a position past the
    file (a damaged indexCount) and where it would loop forever (a chain that runs into itself)."""
    found[:] = False
    count = index_count
    if count <= 1:
        return
    seen = np.zeros(found.size, dtype=np.int32)  # the slot (+1) whose walk last read the entry
    for s in range(slot_num):
        cur = be_i32(buf, INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * s)
        if cur <= 0 or cur > count:
            continue
        while cur < found.size and seen[cur] != s + 1:
            seen[cur] = s + 1
            at = _entry_at(slot_num, cur)
            diff = be_i32(buf, at + 12)
            if diff < 0:
                break
            t = begin_ts + diff * 1000
            h = be_i32(buf, at)
            if h >= 0 and h % slot_num == s and t >= 0:
                found[cur] = True
            prev = be_i32(buf, at + 16)
            if prev <= 0 or prev > count or prev == cur or t < 0:
                break
            cur = prev


@kernel
def found_keys(buf: Buffer, slot_num: int, found: npt.NDArray[np.bool_], first: int, end: int,
               record_offsets: npt.NDArray[np.int64], key_start: npt.NDArray[np.int64],
               key_hashes: npt.NDArray[np.int32], out: npt.NDArray[np.bool_]) -> None:
    """Set ``out[k]`` for each record key ``k`` that a ``found`` entry of the file in ``buf``
    at a position in ``[first, end)`` stands for: the entry's phyOffset is the record's offset
    and its keyHash the key's hash. Record ``r`` starts at ``record_offsets[r]`` (ascending)
    and its keys are ``key_hashes`` rows ``key_start[r]`` to ``key_start[r + 1]``.
    Entries in CommitLog order (a file's usual order) find their record by stepping on from the
    last one's; an entry out of order, or far ahead, by a binary search."""
    n = record_offsets.size
    r = 0
    for e in range(max(first, 0), min(end, found.size)):
        if not found[e]:
            continue
        at = _entry_at(slot_num, e)
        phy = be_i64(buf, at + 4)
        if r > 0 and record_offsets[r - 1] >= phy:
            r = int(np.searchsorted(record_offsets, phy))
        else:  # records before r are below phy: the first at or above it is at r or after
            step = 0
            while r < n and record_offsets[r] < phy and step < _STEPS:
                r += 1
                step += 1
            if step == _STEPS:
                r = int(np.searchsorted(record_offsets, phy))
        if r == record_offsets.size or record_offsets[r] != phy:
            continue
        h = be_i32(buf, at)
        for k in range(key_start[r], key_start[r + 1]):
            if key_hashes[k] == h:
                out[k] = True


@kernel
def keys_to_match(offsets: npt.NDArray[np.int64], key_counts: npt.NDArray[np.int64],
                  key_hashes: npt.NDArray[np.int32], first: int, end: int,
                  offs_out: npt.NDArray[np.int64], starts_out: npt.NDArray[np.int64],
                  hashes_out: npt.NDArray[np.int32]) -> tuple[int, int, int]:
    """Of records at ``offsets`` (record i's keys: the next ``key_counts[i]`` of ``key_hashes``),
    those with keys at ``first`` or after: the ones at ``end`` or before go out as
    ``offs_out[:n]``, with their keys' hashes ``hashes_out[:starts_out[n]]`` (record j's from
    ``starts_out[j]``; ``starts_out[0] = 0``); those after ``end`` are counted. Returns (n, the
    records after ``end``, the first one's offset or -1)."""
    n = late = k = 0
    first_late = -1
    starts_out[0] = 0
    for i in range(offsets.size):
        c = key_counts[i]
        o = offsets[i]
        if o >= first and c > 0:
            if o > end:
                late += 1
                if first_late < 0:
                    first_late = o
            else:
                m = starts_out[n]
                for j in range(c):
                    hashes_out[m + j] = key_hashes[k + j]
                offs_out[n] = o
                n += 1
                starts_out[n] = m + c
        k += c
    return n, late, first_late
