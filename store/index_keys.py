"""Verify's check that every record's index keys are found through the index, beside the
CommitLog walk: memory bounded by the batches and one byte per entry of an index file, not by
the store's records.

The rule (``IndexService.query`` over all time): each key of each record from the first entry of
the index files in use (``indexCount > 1``) to the index's last indexed CommitLog offset is found
when some file's entry that a query for its hash reaches (``kernels.index.reachable``) holds the
record's offset and the key's hash. A file puts its entries in CommitLog order, so the entries
of a batch's records are the file's entries whose phyOffset is in the batch's range, found by
a binary search of that column: each batch is matched against them (``kernels.index.found_keys``)
in every file whose [beginPhyOffset, endPhyOffset] meets the batch, and the file's pages behind
are released. The keys not found so (a record whose keys went to two files, entries out of
order, damage) are matched at the end against every whole file in use.
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rocketlake.store.codec import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from rocketlake.store.index import IndexFile, IndexService
from rocketlake.store.kernels import index as index_kernels
from rocketlake.store.mapped_file import release_pages

Ints = npt.NDArray[np.int64]
Hashes = npt.NDArray[np.int32]


@dataclass(frozen=True)
class ToMatch:
    """A batch's records with keys in the index's range, as ``IndexKeys.match`` takes them:
    their offsets, their keys' hashes (record j's from ``starts[j]`` to ``starts[j + 1]``), the
    records after the index's last offset (how many, the first one's offset), and the batch's
    last record's offset (-1: an empty batch)."""
    offsets: Ints
    starts: Ints
    hashes: Hashes
    late: int
    first_late: int
    last: int


class IndexKeys:
    """Feed ``match`` the walk's records in CommitLog order (``to_match``), then ``finish``; then
    ``missing`` is (CommitLog offset, key number within its record) of each key not found, in
    CommitLog order, ``checked`` the keys checked, and ``late`` / ``first_late`` the records with keys after
    the index's last indexed offset."""

    def __init__(self, idx: IndexService) -> None:
        used = [f for f in idx.files if f.index_count > 1]
        self.first = min((f.begin_phy for f in used), default=idx.end_phy + 1)
        self.end = idx.end_phy
        #: files a query over all time reads (``IndexService.query`` skips a negative endTimestamp)
        self.files = [f for f in used if f.end_ts >= 0]
        self.lo = np.array([f.begin_phy for f in self.files], dtype=np.int64)
        self.hi = np.array([f.end_phy for f in self.files], dtype=np.int64)
        #: per file being matched, its entries a query reaches
        self.reached: dict[int, npt.NDArray[np.bool_]] = {}
        #: keys not found in the files met so far: (offset, key number, hash) parts
        self.unfound: list[tuple[Ints, Ints, Hashes]] = []
        self.checked = self.late = 0
        self.first_late: int | None = None
        self.missing: list[tuple[int, int]] = []

    def to_match(self, offsets: Ints, key_counts: Ints, key_hashes: Hashes) -> ToMatch:
        """A batch of records (ascending ``offsets``; record i's keys are the next
        ``key_counts[i]`` of ``key_hashes``) as ``match`` takes it: changes nothing, so the
        walk's threads may call it beside ``match``."""
        offs, starts = np.empty(offsets.size, dtype=np.int64), np.empty(offsets.size + 1, dtype=np.int64)
        hashes = np.empty(key_hashes.size, dtype=np.int32)
        n, late, first_late = (index_kernels.keys_to_match(offsets, key_counts, key_hashes, self.first,
                                                           self.end, offs, starts, hashes)
                               if offsets.size else (0, 0, -1))
        return ToMatch(offs[:n], starts[:n + 1], hashes[:starts[n]] if n else hashes[:0], late, first_late,
                       int(offsets[-1]) if offsets.size else -1)

    def match(self, batch: ToMatch) -> None:
        """Take a batch's keys (``to_match``; batches in CommitLog order)."""
        if batch.last < 0:
            return
        if batch.late:
            if self.first_late is None:
                self.first_late = batch.first_late
            self.late += batch.late
        offs, starts, hashes = batch.offsets, batch.starts, batch.hashes
        n = offs.size
        if n:
            self.checked += int(hashes.size)
            found = np.zeros(hashes.size, dtype=np.bool_)
            for i in np.flatnonzero((self.lo <= offs[-1]) & (self.hi >= offs[0])).tolist():
                f, reached = self.files[i], self._reached(i)
                phy = f.entries["phy_offset"][:reached.size]
                # a binary search of the mapped column (np.searchsorted would convert all of it)
                a, b = bisect_left(phy, offs[0]), bisect_left(phy, offs[-1] + 1)
                index_kernels.found_keys(f.buf, f.slot_num, reached, a, b, offs, starts, hashes, found)
                release_pages(f.buf, 0, _entry_at(f, a))
            if not found.all():
                counts = np.diff(starts)
                self.unfound.append((np.repeat(offs, counts)[~found], _ranks(counts)[~found], hashes[~found]))
        for i in [i for i in self.reached if self.hi[i] < batch.last]:  # the walk is past them
            del self.reached[i]
            release_pages(self.files[i].buf, 0, self.files[i].buf.size)

    def _reached(self, i: int) -> npt.NDArray[np.bool_]:
        if (reached := self.reached.get(i)) is None:
            reached = self.reached[i] = _reachable(self.files[i])
        return reached

    def finish(self) -> None:
        """Match the keys not found in the files their records were met in against every file."""
        for i in list(self.reached):
            del self.reached[i]
            release_pages(self.files[i].buf, 0, self.files[i].buf.size)
        if not self.unfound:
            return
        offs, ranks, hashes = (np.concatenate([u[k] for u in self.unfound]) for k in range(3))
        records, starts = np.unique(offs, return_index=True)  # offs ascend: each record's keys together
        starts = np.append(starts, offs.size).astype(np.int64)
        found = np.zeros(hashes.size, dtype=np.bool_)
        for f in self.files:
            reached = _reachable(f)
            index_kernels.found_keys(f.buf, f.slot_num, reached, 0, reached.size, records, starts, hashes,
                                     found)
            release_pages(f.buf, 0, f.buf.size)
        self.missing = list(zip(offs[~found].tolist(), ranks[~found].tolist()))


def _ranks(counts: Ints) -> Ints:
    """0, 1, ..., counts[i] - 1 for each i, back to back."""
    return np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)


def _entry_at(f: IndexFile, position: int) -> int:
    """The byte position of entry ``position`` in ``f``."""
    return INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * f.slot_num + INDEX_ENTRY_SIZE * position


def _reachable(f: IndexFile) -> npt.NDArray[np.bool_]:
    """``kernels.index.reachable`` of one file; the slots' pages released after."""
    reached = np.empty(min(f.entry_num, f.index_count + 1), dtype=np.bool_)
    index_kernels.reachable(f.buf, f.slot_num, f.index_count, f.begin_ts, reached)
    release_pages(f.buf, 0, f.buf.size)
    return reached
