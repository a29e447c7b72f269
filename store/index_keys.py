"""Verify's check that every record's index keys are found through the index, one index file at
a time, beside the CommitLog walk (memory bounded by an index file's keys, not the store's).

The rule (``IndexService.query`` over all time): each key of each record from the first entry of
the index files in use (``indexCount > 1``) to the index's last indexed CommitLog offset is found
when some file's entry that a query for its hash reaches (``kernels.index.reachable``) holds the
record's offset and the key's hash. The walk's records that have keys go to the file whose
[beginPhyOffset, endPhyOffset] holds them; once the walk is past that range, they are matched
against that file's reachable entries (``kernels.index.found_keys``) and its pages released. The
keys not found there (a record whose keys were split over two files, damage) are matched at
the end against every file in use.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rocketlake.store.index import IndexFile, IndexService
from rocketlake.store.kernels import index as index_kernels
from rocketlake.store.mapped_file import release_pages

Ints = npt.NDArray[np.int64]


class IndexKeys:
    """Feed ``add`` the walk's records in CommitLog order, then ``finish``; then ``missing`` is
    (CommitLog offset, key number within its record) of each key not found, in CommitLog order,
    ``checked`` the keys checked, and ``late`` / ``first_late`` the records with keys after
    the index's last indexed offset."""

    def __init__(self, idx: IndexService) -> None:
        used = [f for f in idx.files if f.index_count > 1]
        self.first = min((f.begin_phy for f in used), default=idx.end_phy + 1)
        self.end = idx.end_phy
        #: files a query over all time reads (``IndexService.query`` skips a negative endTimestamp)
        self.files = [f for f in used if f.end_ts >= 0]
        self.lo = np.array([f.begin_phy for f in self.files], dtype=np.int64)
        self.hi = np.array([f.end_phy for f in self.files], dtype=np.int64)
        self.pending: dict[int, list[tuple[Ints, Ints, npt.NDArray[np.int32]]]] = {}
        #: keys not found in their file: (offset, key number, hash) parts
        self.unfound: list[tuple[Ints, Ints, npt.NDArray[np.int32]]] = []
        self.checked = self.late = 0
        self.first_late: int | None = None
        self.missing: list[tuple[int, int]] = []

    def add(self, offsets: Ints, key_counts: Ints, key_hashes: npt.NDArray[np.int32]) -> None:
        """Take a batch of records (ascending ``offsets``; record i's keys are the next
        ``key_counts[i]`` of ``key_hashes``)."""
        if not offsets.size:
            return
        keyed = (offsets >= self.first) & (key_counts > 0)
        late = keyed & (offsets > self.end)
        if late.any():
            if self.first_late is None:
                self.first_late = int(offsets[np.argmax(late)])
            self.late += int(np.count_nonzero(late))
        rows = np.flatnonzero(keyed & ~late)
        if rows.size:
            ends = np.cumsum(key_counts)
            counts = key_counts[rows]
            self.checked += int(counts.sum())
            # the hashes of the rows' keys, and each row's first key among them
            take = np.repeat(ends[rows] - counts, counts) + _ranks(counts)
            offs, hashes = offsets[rows], key_hashes[take]
            starts = np.concatenate(([0], np.cumsum(counts)))
            covered = np.zeros(rows.size, dtype=np.bool_)
            near = np.flatnonzero((self.lo <= offs[-1]) & (self.hi >= offs[0]))
            for i in near.tolist():
                a, b = np.searchsorted(offs, [self.lo[i], self.hi[i] + 1])
                if a < b:
                    covered[a:b] = True
                    self.pending.setdefault(i, []).append(
                        (offs[a:b], counts[a:b], hashes[starts[a]:starts[b]]))
            if not covered.all():
                self._unfound(offs[~covered], counts[~covered],
                              hashes[np.repeat(~covered, counts)])
        for i in [i for i in self.pending if self.hi[i] < offsets[-1]]:
            self._match(i)

    def _unfound(self, offs: Ints, counts: Ints, hashes: npt.NDArray[np.int32]) -> None:
        self.unfound.append((np.repeat(offs, counts), _ranks(counts), hashes))

    def _match(self, i: int) -> None:
        """Match the records pending for file ``i`` against its reachable entries."""
        parts = self.pending.pop(i)
        offs, counts, hashes = (np.concatenate([p[k] for p in parts]) for k in range(3))
        starts = np.concatenate(([0], np.cumsum(counts)))
        found = np.zeros(hashes.size, dtype=np.bool_)
        _found_keys(self.files[i], offs, starts, hashes, found)
        if not found.all():
            self.unfound.append((np.repeat(offs, counts)[~found], _ranks(counts)[~found], hashes[~found]))

    def finish(self) -> None:
        """Match what is pending, then the keys not found in their file against every file."""
        for i in list(self.pending):
            self._match(i)
        if not self.unfound:
            return
        offs = np.concatenate([u[0] for u in self.unfound])
        ranks = np.concatenate([u[1] for u in self.unfound])
        hashes = np.concatenate([u[2] for u in self.unfound])
        order = np.lexsort((ranks, offs))
        offs, ranks, hashes = offs[order], ranks[order], hashes[order]
        first = np.ones(offs.size, dtype=np.bool_)
        first[1:] = (offs[1:] != offs[:-1]) | (ranks[1:] != ranks[:-1])
        offs, ranks, hashes = offs[first], ranks[first], hashes[first]
        records, starts = np.unique(offs, return_index=True)
        starts = np.append(starts, offs.size).astype(np.int64)
        found = np.zeros(hashes.size, dtype=np.bool_)
        for f in self.files:
            _found_keys(f, records, starts, hashes, found)
        self.missing = list(zip(offs[~found].tolist(), ranks[~found].tolist()))


def _ranks(counts: Ints) -> Ints:
    """0, 1, ..., counts[i] - 1 for each i, back to back."""
    return np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)


def _found_keys(f: IndexFile, offsets: Ints, key_start: Ints, key_hash: npt.NDArray[np.int32],
                out: npt.NDArray[np.bool_]) -> None:
    """``kernels.index.found_keys`` for one file, then its pages released."""
    reached = np.empty(min(f.entry_num, f.index_count + 1), dtype=np.bool_)
    index_kernels.reachable(f.buf, f.slot_num, f.index_count, f.begin_ts, reached)
    index_kernels.found_keys(f.buf, f.slot_num, reached, offsets, key_start, key_hash, out)
    release_pages(f.buf, 0, f.buf.size)
