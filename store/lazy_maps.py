"""Files mapped only while in use (ConsumeQueue files): a store of any number of queues opens
within the descriptor limit and ``vm.max_map_count``.

A ``LazyMappedFile`` is mapped on its first write (or ``mm``) and stays mapped while it is among
the ``LAZY_MAPS.limit`` most recently used; the least recently used one is unmapped when another
is mapped. Reads copy: from the live mapping when there is one, else with ``pread`` on a
descriptor open for that read only, without mapping the file. Unmapping a file written since its
last flush does not flush it: its dirty pages stay in the page cache and the file's next
``flush`` (``fdatasync`` on a fresh descriptor) writes them, so evicting costs no disk wait.
"""
from __future__ import annotations

import mmap
import os
import resource
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from rocketlake.store.errors import StoreFormatError
from rocketlake.store.mapped_file import MappedFile

#: live lazy maps when nothing else limits them: well under ``vm.max_map_count`` (65,530 by
#: default), which the CommitLog, index files and libraries also count against
MAX_LIVE_MAPS = 4096


def default_limit() -> int:
    """How many lazy maps may be live at once: ``MAX_LIVE_MAPS``; before Python 3.13, where each
    map keeps a duplicate descriptor, also at most a quarter of the soft ``RLIMIT_NOFILE``."""
    if sys.version_info >= (3, 13):
        return MAX_LIVE_MAPS
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return MAX_LIVE_MAPS
    return max(1, min(MAX_LIVE_MAPS, soft // 4))


class MapCache:
    """The live maps of lazy files, least recently used first; at most ``limit`` of them, save
    those a numpy view still holds (unmapping them is impossible: they stay, and are tried
    again at the next eviction). ``lock`` guards the maps: a map is never unmapped while
    another thread copies from or into it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.lock = threading.RLock()
        self._live: OrderedDict[LazyMappedFile, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._live)

    def use(self, mf: LazyMappedFile) -> mmap.mmap:
        """``mf``'s mapping, made now if it has none; it becomes the most recently used."""
        with self.lock:
            mm = mf._mm
            if mm is None:
                mm = mf._mm = mf._map()
            self._live[mf] = None
            self._live.move_to_end(mf)
            self._evict(keep=mf)
            return mm

    def forget(self, mf: LazyMappedFile) -> None:
        """Unmap ``mf`` (closed or deleted) and stop tracking it."""
        with self.lock:
            self._live.pop(mf, None)
            mf._unmap()

    def _evict(self, keep: LazyMappedFile) -> None:
        for _ in range(len(self._live)):  # each live map is tried at most once
            if len(self._live) <= self.limit:
                return
            victim = next(iter(self._live))
            if victim is keep:
                return
            if victim._unmap():
                del self._live[victim]
            else:  # a view of it is alive
                self._live.move_to_end(victim)


#: the one cache of every lazy map in the process
LAZY_MAPS = MapCache(default_limit())


class LazyMappedFile(MappedFile):
    """A ``MappedFile`` mapped only while in use, through ``LAZY_MAPS``. Opening it checks the
    file (its size, and no link where it may be written) without mapping it."""

    __slots__ = ()

    @classmethod
    def checked(cls, path: Path, start: int, size: int) -> LazyMappedFile:
        """The file at ``path``, which the caller has checked as opening one does (``size``
        bytes long, no link where it may be written): nothing is opened here."""
        mf = cls.__new__(cls)
        mf.path, mf.start, mf.size = path, start, size
        mf.wrote = mf.flushed = 0
        mf._mm = None
        return mf

    def _first_map(self) -> mmap.mmap | None:
        os.close(self._open_checked())
        return None

    @property
    def mapped(self) -> bool:
        """Whether the file has a live mapping now (it is among the most recently used, or a
        view of its map is still alive)."""
        return self._mm is not None

    @property
    def mm(self) -> mmap.mmap:
        """The mapping of the whole file, made if it has none. Only for a use that ends before
        another lazy file is used (a view kept longer pins the map)."""
        return LAZY_MAPS.use(self)

    def read_into(self, pos: int, out: np.ndarray) -> None:
        with LAZY_MAPS.lock:
            if self._mm is not None:
                super().read_into(pos, out)
                return
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            self._pread(fd, pos, out)
        finally:
            os.close(fd)

    def _read_with(self, fd: int, pos: int, out: np.ndarray) -> None:
        with LAZY_MAPS.lock:
            if self._mm is not None:
                super().read_into(pos, out)
                return
        self._pread(fd, pos, out)

    def _pread(self, fd: int, pos: int, out: np.ndarray) -> None:
        n = os.preadv(fd, [out.view(np.uint8).data], pos)
        if n != out.nbytes:
            raise StoreFormatError(f"{self.path}: {n} bytes at {pos}, expected {out.nbytes} "
                                   f"(the file is shorter than {self.size} bytes)")

    @contextmanager
    def writes(self) -> Iterator[Callable[[int, bytes | memoryview], None]]:
        with super().writes() as write:
            def locked(pos: int, data: bytes | memoryview) -> None:
                with LAZY_MAPS.lock:
                    write(pos, data)
            yield locked

    def close(self) -> None:
        LAZY_MAPS.forget(self)
