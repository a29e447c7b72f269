"""IndexFile: hash slots chaining 20-byte entries per key, and the service over all index files.

Layout and put rules: RocketMQ's ``IndexFile`` and ``IndexHeader``. Puts are applied in batches
by a compiled kernel (``store.kernels.index.place``) that writes exactly the bytes RocketMQ's
one-at-a-time ``IndexFile.putKey`` would.
"""
from __future__ import annotations

import mmap
import os
import stat
import threading
import warnings
from collections.abc import Callable, Sequence
from datetime import tzinfo
from pathlib import Path

import numpy as np
import numpy.typing as npt

from rocketlake.store import codec
from rocketlake.store.codec import (
    INDEX_ENTRY_DTYPE,
    INDEX_HEADER,
    INDEX_HEADER_SIZE,
)
from rocketlake.store.errors import StoreFormatError
from rocketlake.store.kernels import index as kernels
from rocketlake.store.safe_files import create_file, open_file
from rocketlake.store.swap_journal import refuse_unfinished


def header_problems(header: tuple[int, ...], slot_num: int,
                    entries: npt.NDArray[np.void]) -> list[str]:
    """What is wrong with an index file's header ``(beginTimestamp, endTimestamp, beginPhyOffset,
    endPhyOffset, hashSlotCount, indexCount)``, checked against the file's geometry (``slot_num``
    slots, ``entries`` its whole entry array) and the first and last entry it names (O(1)); empty
    when the header is sound. The rule of recovery and of verify alike, from ``IndexFile.putKey``:
    indexCount is 1 + the puts, each put fills at most one empty slot (hashSlotCount <=
    min(slots, indexCount - 1)), the first put sets the begin fields from its record (a store
    time is positive), every put the end fields. A tail of zeroed entries is not damage: that is
    a torn write, which ``IndexFile.truncate`` handles. An empty file's header may still be all
    zeros (it is first written with the first key)."""
    begin_ts, end_ts, begin_phy, end_phy, slots, count = header
    entry_num = entries.size
    if not 0 <= count <= entry_num:
        return [f"indexCount {count} outside [0, {entry_num}]"]
    wrong = []
    most = min(slot_num, max(0, count - 1))
    if not 0 <= slots <= most:
        wrong.append(f"hashSlotCount {slots} outside [0, {most}] for indexCount {count}")
    if begin_ts < 0 or end_ts < begin_ts or (count > 1 and begin_ts == 0):
        wrong.append(f"timestamps begin {begin_ts} / end {end_ts} out of order")
    if begin_phy < 0 or end_phy < begin_phy:
        wrong.append(f"phy offsets begin {begin_phy} / end {end_phy} out of order")
    first = entries[1].tolist() if entry_num > 1 else (0, 0, 0, 0)
    if count <= 1:
        if any(first):
            wrong.append("header says empty, but entries follow")
        return wrong
    if first[1] != begin_phy:
        wrong.append(f"beginPhyOffset {begin_phy} is not the first entry's {first[1]}")
    last = entries[count - 1].tolist()
    if any(last) and last[1] != end_phy:
        wrong.append(f"endPhyOffset {end_phy} is not the last entry's {last[1]}")
    return wrong


class DamagedIndexSkipped(UserWarning):
    """A query left out an index file whose header is damaged (a reader cannot rebuild it)."""


class IndexFile:
    """One index file: header in memory, slots and entries as views on the mapped bytes."""

    # The header (RocketMQ's IndexHeader), as read from the file or last written to it.
    begin_ts: int
    end_ts: int
    begin_phy: int
    end_phy: int
    slot_count: int
    index_count: int
    slots: npt.NDArray[np.int32]
    entries: npt.NDArray[np.void]  # INDEX_ENTRY_DTYPE

    def __init__(self, path: Path, slot_num: int, entry_num: int, create_from: tuple[int, int] | None = None):
        self.path, self.slot_num, self.entry_num = path, slot_num, entry_num
        size = codec.index_file_size(slot_num, entry_num)
        if create_from is not None:
            fd = create_file(path, size)
        else:
            fd = open_file(path, os.O_RDWR) if os.access(path, os.W_OK) else \
                os.open(path, os.O_RDONLY)
            if os.fstat(fd).st_size != size:
                actual = os.fstat(fd).st_size
                os.close(fd)
                raise StoreFormatError(f"{path}: index file is {actual} bytes, expected {size} "
                                       f"(maxHashSlotNum={slot_num}, maxIndexNum={entry_num})")
        access = mmap.ACCESS_WRITE if os.access(path, os.W_OK) else mmap.ACCESS_READ
        self.mm = mmap.mmap(fd, size, access=access)
        os.close(fd)
        (self.begin_ts, self.end_ts, self.begin_phy, self.end_phy, self.slot_count,
         self.index_count) = INDEX_HEADER.unpack_from(self.mm, 0)
        if create_from is not None:
            # A new file starts from the previous file's end (RocketMQ's IndexFile constructor).
            self.end_phy, self.end_ts = create_from
            self.begin_phy, self.begin_ts = create_from
        #: the whole file's bytes, for the kernels (``store.kernels.index``)
        self.buf = np.frombuffer(self.mm, dtype=np.uint8)
        self.slots = np.frombuffer(self.mm, dtype=">i4", count=slot_num, offset=INDEX_HEADER_SIZE)
        self.entries = np.frombuffer(self.mm, dtype=INDEX_ENTRY_DTYPE, count=entry_num,
                                     offset=INDEX_HEADER_SIZE + 4 * slot_num)
        #: why the header cannot describe the entries (None: it can); recovery rebuilds such a file
        self.damage = None if create_from is not None else self._header_damage()
        self.index_count = max(self.index_count, 1)

    def _header_damage(self) -> str | None:
        """What is wrong with the header read from disk (``header_problems``), None when sound."""
        wrong = header_problems(INDEX_HEADER.unpack_from(self.mm, 0), self.slot_num, self.entries)
        return "; ".join(wrong) if wrong else None

    @property
    def full(self) -> bool:
        return self.index_count >= self.entry_num

    @property
    def free(self) -> int:
        return max(0, self.entry_num - self.index_count)

    def put_batch(self, key_hash: npt.NDArray[np.int32], phy: npt.NDArray[np.int64],
                  ts: npt.NDArray[np.int64]) -> None:
        """Apply puts that fit (``len <= free``), in order; each key at its index time
        (``codec.index_time`` of ``ts``)."""
        if key_hash.size:
            filled = self.place(key_hash, phy, ts)
            self.count_placed(key_hash.size, (int(phy[0]), int(ts[0])), (int(phy[-1]), int(ts[-1])),
                              filled)

    def place(self, key_hash: npt.NDArray[np.int32], phy: npt.NDArray[np.int64],
              ts: npt.NDArray[np.int64], slots: tuple[int, int] | None = None,
              pos: npt.NDArray[np.int64] | None = None, first_ts: int | None = None) -> int:
        """Write the entries and slots of the puts of :meth:`put_batch` whose hash slot is in
        ``slots`` (``[lo, hi)``; None: all), at the positions and times the whole batch gives them
        (``kernels.index.place``). The keys given may be some of the batch's, with the keys of
        each slot in put order: ``pos`` numbers them within the batch (None: they are all of
        it, in order) and ``first_ts`` is the store time of the batch's first key (None: of
        ``ts[0]``). The header is left alone: :meth:`count_placed` updates it once every slot
        range of the batch is placed (by this object or by other processes mapping the same file
        over disjoint ranges). Returns how many of these puts found their slot empty."""
        lo, hi = slots if slots is not None else (0, self.slot_num)
        if not key_hash.size:
            return 0
        first = int(ts[0]) if first_ts is None else first_ts
        return int(kernels.place(
            self.buf, self.slot_num, np.ascontiguousarray(key_hash, dtype=np.int32),
            np.ascontiguousarray(phy, dtype=np.int64),
            np.ascontiguousarray(codec.index_time(np.asarray(ts, dtype=np.int64))),
            np.arange(key_hash.size, dtype=np.int64) if pos is None
            else np.ascontiguousarray(pos, dtype=np.int64),
            self.index_count, self.begin_ts, codec.index_time(first), lo, hi))

    def count_placed(self, n: int, first: tuple[int, int], last: tuple[int, int], filled: int) -> None:
        """Account for a batch of ``n`` puts placed by :meth:`place` (over all slot ranges):
        ``first`` and ``last`` are the (CommitLog offset, store time) of its first and last key,
        ``filled`` the sum of what the placements returned. Updates and writes the header."""
        if self.index_count <= 1:
            self.begin_phy = first[0]
        self.advance(n, first[1])
        self.slot_count += filled
        self.end_phy, self.end_ts = last[0], codec.index_time(last[1])
        self.write_header()

    def advance(self, n: int, first_ts: int) -> None:
        """Move this object's count and time base past ``n`` placed puts whose first has store
        time ``first_ts``, as the puts did (the first put of an empty file sets beginTimestamp),
        without writing the header: the next :meth:`place` then continues after them."""
        if self.index_count <= 1:
            self.begin_ts = codec.index_time(first_ts)
        self.index_count += n

    def write_header(self) -> None:
        INDEX_HEADER.pack_into(self.mm, 0, self.begin_ts, self.end_ts, self.begin_phy,
                               self.end_phy, self.slot_count, self.index_count)

    def select(self, key_hash: int, max_num: int, begin: int, end: int, out: list[int]) -> None:
        """Append phy offsets whose entry hash is ``key_hash`` and time is in [begin, end], walking
        the slot's chain as ``IndexFile.selectPhyOffset`` does (``kernels.index.reachable``).
        Unlike RocketMQ, the walk also ends where a damaged chain runs into itself: it reads each
        entry at most once, so at most ``indexCount`` entries."""
        count = min(self.index_count, self.entry_num - 1)
        cur = int(self.slots[key_hash % self.slot_num])
        if cur <= 0 or cur > count:
            return
        seen = set()
        while len(out) < max_num and cur not in seen:
            seen.add(cur)
            h, phy, diff, prev = self.entries[cur].tolist()
            if diff < 0:
                return
            t = self.begin_ts + diff * 1000
            if h == key_hash and begin <= t <= end:
                out.append(phy)
            if prev <= 0 or prev > count or prev == cur or t < begin:
                return
            cur = prev

    def flush(self) -> None:
        self.mm.flush()

    def truncate(self, offset: int, store_time: Callable[[int], int | None]) -> int:
        """Forget the entries for CommitLog offsets at or past ``offset`` (they are in CommitLog
        order); returns how many. ``store_time(phy)`` is the store time of the record at a
        CommitLog offset (the header keeps it in ms, entries only in seconds), None when that
        record is gone (retention deleted its file): the new last entry's own time, whole seconds,
        then stands for it. Slots that pointed at a forgotten entry are walked back along
        the forgotten entries' chains, work proportional to what is forgotten, or rebuilt from the
        kept entries when fewer are kept, or when the forgotten entries are torn (zeros or garbage
        after a power loss)."""
        count = self._first_dropped(offset)
        dropped = self.index_count - count
        if dropped <= 0:
            return 0
        # Walk back the dropped entries' chains, or rebuild the slots from the kept entries when
        # that is less work (vectorised, O(kept)): both give each slot its last kept entry.
        heads = self._unchain(count, offset) if dropped < count else None
        if heads is None:
            self._rebuild_slots(count)
        else:
            for slot, head in heads.items():
                self.slots[slot] = head
                self.slot_count -= head == 0
        self.entries[count:self.index_count] = 0
        self.index_count = count
        if count > 1:
            _, self.end_phy, diff, _ = self.entries[count - 1].tolist()
            ts = store_time(self.end_phy)
            self.end_ts = self.begin_ts + diff * 1000 if ts is None else codec.index_time(ts)
        else:
            self.end_phy, self.end_ts = self.begin_phy, self.begin_ts
        self.write_header()
        return dropped

    def _first_dropped(self, offset: int) -> int:
        """Binary search for the first entry at or past ``offset`` or torn (all zeros): entries
        are in CommitLog order, and only entries written after the last flush can be torn."""
        lo, hi = 1, min(self.index_count, self.entry_num)
        while lo < hi:
            mid = (lo + hi) // 2
            h, phy, diff, prev = self.entries[mid].tolist()
            if phy >= offset or h == phy == diff == prev == 0:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _unchain(self, count: int, offset: int) -> dict[int, int] | None:
        """New heads of the slots pointing at entries >= ``count``; None if a chain is torn."""
        heads: dict[int, int] = {}
        for slot in np.flatnonzero(self.slots >= count).tolist():
            cur = int(self.slots[slot])
            while cur >= count:
                if cur >= min(self.index_count, self.entry_num):
                    return None
                h, phy, _, prev = self.entries[cur].tolist()
                if h < 0 or h % self.slot_num != slot or phy < offset or not 0 <= prev < cur:
                    return None
                cur = prev
            heads[slot] = cur
        return heads

    def _rebuild_slots(self, count: int) -> None:
        """Slots from the entries below ``count`` alone: each slot holds its last entry."""
        kept = self.entries[1:count]
        slots = kept["key_hash"].astype(np.int64) % self.slot_num
        pos = np.arange(1, count, dtype=np.int64)
        order = np.lexsort((pos, slots))
        last = np.ones(order.size, dtype=bool)
        last[:-1] = slots[order][1:] != slots[order][:-1]
        self.slots[:] = 0
        self.slots[slots[order][last]] = pos[order][last]
        self.slot_count = int(np.count_nonzero(last))

    def close(self) -> None:
        """Release the map; closing a closed file does nothing."""
        if self.mm.closed:
            return
        # numpy views hold exported buffers; drop them before closing the map.
        del self.buf, self.slots, self.entries
        self.mm.close()


#: the name an index file being deleted has meanwhile: ``.<name>`` + this (``IndexService._delete``)
DELETING = ".deleting"


class IndexService:
    """All index files of a store; keys are buffered and applied in vectorised batches."""

    BATCH = 8192

    def __init__(self, root: Path, slot_num: int, entry_num: int, zone: tzinfo | None = None) -> None:
        self.dir = Path(root) / "index"
        self.slot_num, self.entry_num = slot_num, entry_num
        self.zone = zone  # new files are named in it (None: the local zone)
        self.files: list[IndexFile] = []
        # Queued keys: hashed column segments, then the newest keys still as strings (``put``).
        self._hashed: list[tuple[npt.NDArray[np.int32], npt.NDArray[np.int64], npt.NDArray[np.int64]]] = []
        self._hashed_n = 0
        self._keys: list[str] = []
        self._phy: list[int] = []
        self._ts: list[int] = []
        self._deleting: list[threading.Thread] = []  # ``_delete``'s unlinks, joined by ``close``
        self._undeleted: list[str] = []  # what they could not delete, and why

    def load(self, writer: bool = False) -> None:
        """Open the index files under `index/` (StoreFormatError for a foreign name, or while a
        rebuild's swap is unfinished: ``swap_journal.refuse_unfinished``). A ``writer`` also
        deletes the files a crash left half deleted (``_delete``): a regular file named
        ``.<an index file's name>.deleting``, nothing else."""
        refuse_unfinished(self.dir.parent)
        if not self.dir.exists():
            return
        for p in sorted(self.dir.iterdir()):
            if p.name.startswith("."):
                if writer and self._left_deleting(p):
                    self._unlink_behind(p)
                continue
            try:
                codec.index_file_time(p.name, self.zone)
            except ValueError as e:
                raise StoreFormatError(f"{p}: {e}") from None
            self.files.append(IndexFile(p, self.slot_num, self.entry_num))

    @property
    def end_phy(self) -> int:
        """Offset of the last indexed message, -1 when nothing is indexed."""
        for f in reversed(self.files):
            if f.index_count > 1:
                return f.end_phy
        return -1

    def add_many(self, keys: Sequence[tuple[str, ...]], phy: Sequence[int], ts: Sequence[int]) -> None:
        """Queue messages' index keys ("topic#key"); applied at ``BATCH`` keys or on ``build``."""
        for ks, p, t in zip(keys, phy, ts):
            if ks:
                n = len(ks)
                self._keys += ks
                self._phy += [p] * n
                self._ts += [t] * n
        if self._hashed_n + len(self._keys) >= self.BATCH:
            self.build()

    def add_hashes(self, key_hash: npt.NDArray[np.int32], phy: npt.NDArray[np.int64],
                   ts: npt.NDArray[np.int64]) -> None:
        """Queue keys already hashed (``codec.index_key_hash``), one entry per key: the CommitLog
        offset and store time of its message. Applied at ``BATCH`` keys or on ``build``."""
        if key_hash.size:
            self._seal()
            self._hashed.append((key_hash, phy, ts))
            self._hashed_n += key_hash.size
            if self._hashed_n >= self.BATCH:
                self.build()

    def _seal(self) -> None:
        """Hash the keys queued as strings (they keep their place in the queue)."""
        if self._keys:
            h = codec.index_key_hash(codec.java_hash_many(self._keys))
            self._hashed.append((h, np.array(self._phy, dtype=np.int64), np.array(self._ts, dtype=np.int64)))
            self._hashed_n += h.size
            self._keys, self._phy, self._ts = [], [], []

    def _queued(self) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Every queued key as (hash, CommitLog offset, store time) columns, in order."""
        self._seal()
        if not self._hashed:
            return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        if len(self._hashed) > 1:
            h, p, t = zip(*self._hashed)
            self._hashed = [(np.concatenate(h), np.concatenate(p), np.concatenate(t))]
        return self._hashed[0]

    def reserve(self, key_ts: Sequence[int] | npt.NDArray[np.int64]) -> None:
        """Create now the files that the queued keys plus new keys (of messages stored at
        ``key_ts``, one entry per key) will go to, so that applying them only writes into files
        that exist, their space reserved. A full disk raises StoreFullError here, before the
        caller writes the messages."""
        queued = self._hashed_n + len(self._keys)
        need = queued + len(key_ts)
        if self.files and need <= self.files[-1].free:  # the common case: the last file has room
            return
        if need > self._room():
            old_ts = self._queued()[2]
            self._make_room(need, lambda at: int(old_ts[at]) if at < queued else int(key_ts[at - queued]))

    def _first_open(self) -> int:
        """Position of the file new keys go to: the oldest of the trailing files with room
        (``reserve`` creates files ahead of need); ``len(files)`` when every file is full."""
        k = len(self.files)
        while k and not self.files[k - 1].full:
            k -= 1
        return k

    def _room(self) -> int:
        return sum(f.free for f in self.files[self._first_open():])

    def _make_room(self, need: int, ts_at: Callable[[int], int]) -> None:
        """Create files until ``need`` keys fit; the ``at``-th of them is stored at ``ts_at(at)``."""
        room = self._room()
        while room < need:  # the key at position ``room`` opens the next file
            room += self._create(ts_at(room)).free

    def build(self) -> None:
        """Apply the queued keys to the files, rolling to new files as they fill. The files are
        created first: should that fail, the keys stay queued and nothing was written."""
        if not (self._keys or self._hashed_n):
            return
        hashes, phy, ts = self._queued()
        keep = phy > self.end_phy  # a message already indexed is not indexed again
        if not keep.all():
            hashes, phy, ts = hashes[keep], phy[keep], ts[keep]
        self._make_room(phy.size, lambda at: int(ts[at]))
        self._hashed, self._hashed_n = [], 0
        i = 0
        while i < hashes.size:
            k = self._first_open()
            f = self.files[k]
            if f.index_count <= 1 and k:
                # An empty file starts where the previous one ends (RocketMQ's IndexFile
                # constructor); ``reserve`` may have created it before that file filled up.
                prev = self.files[k - 1]
                f.begin_phy = f.end_phy = prev.end_phy
                f.begin_ts = f.end_ts = prev.end_ts
            n = min(f.free, hashes.size - i)
            f.put_batch(hashes[i:i + n], phy[i:i + n], ts[i:i + n])
            i += n

    def _create(self, ts: int) -> IndexFile:
        """Create the next file, opened by a key stored at ``ts`` (StoreFullError when the disk
        is full)."""
        prev = self.files[-1] if self.files else None
        path = self.dir / codec.next_index_file_name(ts, prev.path.name if prev is not None else None,
                                                     self.zone)
        start = (prev.end_phy, prev.end_ts) if prev is not None else (0, 0)
        f = IndexFile(path, self.slot_num, self.entry_num, create_from=start)
        self.files.append(f)
        return f

    def query(self, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """Commitlog offsets of entries whose hash matches ``key`` ("topic#key"), newest file first.

        Hash matches only: the caller checks the real key.
        """
        self.build()
        h = codec.index_key_hash(codec.java_hash(key))
        out: list[int] = []
        for f in reversed(self.files):
            if len(out) >= max_num:
                break
            if f.damage is not None:  # read-only: a writer open rebuilds it
                warnings.warn(DamagedIndexSkipped(f"{f.path}: header damaged ({f.damage}); its keys "
                                                  f"are not searched (rocketlake rebuild-index "
                                                  f"rebuilds the index)"), stacklevel=3)
                continue
            if f.index_count > 1 and f.begin_ts <= end and f.end_ts >= begin:
                f.select(h, max_num, begin, end, out)
        return out

    def flush(self) -> None:
        self.build()
        for f in self.files:
            f.flush()

    def delete_below(self, min_phy: int) -> list[Path]:
        """Delete files whose endPhyOffset is below ``min_phy``, never the last one."""
        gone = []
        while len(self.files) > 1 and self.files[0].end_phy < min_phy:
            f = self.files.pop(0)
            self._delete(f)
            gone.append(f.path)
        return gone

    def drop_damaged(self, store_time: Callable[[int], int | None]) -> tuple[int, list[str]] | None:
        """Delete the first index file whose header is damaged and every later file, and forget
        the last kept file's entries of the record it ends with (a record's keys may continue in
        the next file). Returns the CommitLog offset from which the keys those files held must be
        dispatched again, and what was damaged; None when every header is sound. Re-dispatching
        from there writes the same entries again (``build`` is deterministic), so no key is lost.
        (RocketMQ's ``IndexService.load`` checks no header; after a crash it deletes the files
        newer than the index checkpoint, keys and all.)"""
        bad = next((i for i, f in enumerate(self.files) if f.damage is not None), None)
        if bad is None:
            return None
        found = [f"{self.files[bad].path}: {self.files[bad].damage}"]
        for f in self.files[bad:]:
            self._delete(f)
        del self.files[bad:]
        if not self.files:
            return 0, found
        redo = self.files[-1].end_phy
        self.files[-1].truncate(redo, store_time)
        return redo, found

    def truncate(self, offset: int, store_time: Callable[[int], int | None]) -> int:
        """Forget every entry for a CommitLog offset at or past ``offset`` (recovery re-indexes
        from there; ``store_time`` as for ``IndexFile.truncate``): newer files holding only such
        entries are deleted, the file holding the boundary is rolled back (``IndexFile.truncate``).
        Returns how many entries went."""
        self._keys, self._phy, self._ts = [], [], []
        self._hashed, self._hashed_n = [], 0
        dropped = 0
        while self.files:
            f = self.files[-1]
            if f.index_count > 1 and f.end_phy < offset:
                break
            if f._first_dropped(offset) > 1:  # it keeps entries: rolled back
                return dropped + f.truncate(offset, store_time)
            dropped += max(0, f.index_count - 1)  # it keeps none: deleted as it is
            self.files.pop()
            self._delete(f)
        return dropped

    def _delete(self, f: IndexFile) -> None:
        """Delete ``f``, which the service no longer holds: closed, renamed at once to a hidden
        name no listing reads (``.<name>.deleting``), then unlinked on a thread of its own
        (``close`` waits for it). Freeing the blocks of a file RocketMQ wrote (10 MB scattered
        over its 420 MB) keeps an unlink 0.1 s in the kernel, which neither recovery nor a put
        need wait for. A crash before the unlink leaves the hidden name, which the next writer's
        ``load`` deletes. Where that name is taken by something else than such a leftover (a
        link, a directory), ``f`` is unlinked at once instead and that name left as it is."""
        f.close()
        hidden = f.path.with_name(f".{f.path.name}{DELETING}")
        if os.path.lexists(hidden) and not self._left_deleting(hidden):
            f.path.unlink()
            return
        os.replace(f.path, hidden)
        self._unlink_behind(hidden)

    def _left_deleting(self, path: Path) -> bool:
        """Whether ``path`` is an index file ``_delete`` renamed and did not unlink: a regular
        file (no link) named ``.<an index file's name>.deleting``."""
        name = path.name
        if not (name.startswith(".") and name.endswith(DELETING)):
            return False
        try:
            codec.index_file_time(name[1:-len(DELETING)], self.zone)
            return stat.S_ISREG(path.lstat().st_mode)
        except (ValueError, OSError):
            return False

    def _unlink_behind(self, path: Path) -> None:
        self._deleting = [t for t in self._deleting if t.is_alive()]
        thread = threading.Thread(target=self._unlink, args=(path,), name=f"unlink {path.name}")
        thread.start()
        self._deleting.append(thread)

    def _unlink(self, path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError as e:
            self._undeleted.append(f"{path}: {e.strerror or e}")

    def close(self) -> None:
        """Close every file and wait until the files being deleted are gone (a warning names
        any that could not be: the next writer's ``load`` deletes them)."""
        for f in self.files:
            f.close()
        for thread in self._deleting:
            thread.join()
        self._deleting.clear()
        if self._undeleted:
            warnings.warn(f"index files left to delete at the next writer open: "
                          f"{'; '.join(self._undeleted)}", stacklevel=2)
            self._undeleted.clear()
