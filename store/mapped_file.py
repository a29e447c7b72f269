"""Pre-allocated, memory-mapped store files and the ordered queue of them in one directory."""
from __future__ import annotations

import errno
import fcntl
import mmap
import os
import re
import struct
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from rocketlake.store.codec import format_file_name
from rocketlake.store.errors import StoreFormatError
from rocketlake.store.file_data import data_end_in_units, data_end_of
from rocketlake.store.safe_files import create_file, deferred, disk_error, open_file

PAGE_SIZE = mmap.PAGESIZE
#: a store file's name: its start offset in 20 digits
FILE_NAME_DIGITS = 20
FILE_NAME = re.compile(rf"^\d{{{FILE_NAME_DIGITS}}}$", re.ASCII)  # no other script's digits
#: listings ``MappedFileQueue.listed`` takes at most before it reports a gap it saw in each
LISTINGS = 5
#: writes of at least this many bytes go through ``pwrite``: the first store to each fresh page of
#: a mapping takes a page fault, ~10x the cost of ``pwrite``'s copy into the page cache
BULK_WRITE = 16 * PAGE_SIZE


class MappedFile:
    """One store file of a fixed size, mapped read-write; ``wrote`` is the append position.

    The file's descriptor is closed once it is mapped (Python 3.13+ maps without keeping one;
    before, ``mmap`` keeps a duplicate of its own for the map's life); ``flush`` and the data
    scans open the file again for the moment they need one."""

    __slots__ = ("path", "start", "size", "wrote", "flushed", "_mm")

    def __init__(self, path: Path, start: int, size: int, create: bool = False) -> None:
        self.path, self.start, self.size = path, start, size
        self.wrote = 0
        self.flushed = 0
        if create:
            os.close(create_file(path, size))
        self._mm: mmap.mmap | None = self._first_map()

    @property
    def mm(self) -> mmap.mmap:
        """The mapping of the whole file."""
        assert self._mm is not None
        return self._mm

    @property
    def end(self) -> int:
        return self.start + self.size

    def _open(self) -> int:
        """A descriptor of the file, read-write where it may be written (never through a link)."""
        return open_file(self.path, os.O_RDWR) if os.access(self.path, os.W_OK) else \
            os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)

    def _open_checked(self) -> int:
        """``_open``, StoreFormatError when the file is not ``size`` bytes long."""
        fd = self._open()
        try:
            check_size(fd, self.path, self.size)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _first_map(self) -> mmap.mmap | None:
        """The mapping made on opening: the whole file."""
        return self._map()

    def _map(self) -> mmap.mmap:
        """Map the file (StoreFormatError when it is not ``size`` bytes long)."""
        fd = self._open_checked()
        try:
            access = mmap.ACCESS_WRITE if os.access(self.path, os.W_OK) else mmap.ACCESS_READ
            if sys.version_info >= (3, 13):
                return mmap.mmap(fd, self.size, access=access, trackfd=False)
            return mmap.mmap(fd, self.size, access=access)
        finally:
            os.close(fd)

    def release(self, lo: int, hi: int) -> None:
        """``release_pages`` of bytes ``[lo, hi)`` of the file's mapping; nothing when it has
        none now (a lazy file read without one)."""
        mm = self._mm
        if mm is not None and not mm.closed:
            release_pages(np.frombuffer(mm, dtype=np.uint8), lo, hi)

    def read_into(self, pos: int, out: np.ndarray) -> None:
        """Copy the file's bytes from ``pos`` into ``out`` (a contiguous array, filled whole)."""
        n = out.nbytes
        out.view(np.uint8)[:] = np.frombuffer(self.mm, dtype=np.uint8, count=n, offset=pos)

    def read_data_tail(self, unit: int, limit: int, fd: int | None = None) -> tuple[int, np.ndarray]:
        """(where they start, a copy of them): the file's last bytes before the end of its data
        (``data_end_in_units``: the end of its ``SEEK_DATA`` regions rounded up to a whole
        ``unit``, at most the file's size), at most ``limit`` of them (a multiple of ``unit``),
        starting at a multiple of ``unit``. One descriptor
        finds the end and reads: ``fd``, a read-only descriptor of the file the caller keeps
        (by default one opened here)."""
        if fd is None:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                return self.read_data_tail(unit, limit, fd)
            finally:
                os.close(fd)
        end = data_end_in_units(fd, self.size, unit)
        pos = max(0, end - limit)
        out = np.empty(end - pos, dtype=np.uint8)
        self._read_with(fd, pos, out)
        return pos, out

    def _read_with(self, fd: int, pos: int, out: np.ndarray) -> None:
        """``read_into``, given a read-only descriptor of the file (this class reads the map)."""
        self.read_into(pos, out)

    def write(self, pos: int, data: bytes | memoryview) -> None:
        """Write ``data`` at ``pos``: through the mapping, or from ``BULK_WRITE`` bytes on with
        ``pwrite`` (the same page cache: the mapping sees the bytes; OSError naming the file)."""
        with self.writes() as write:
            write(pos, data)

    @contextmanager
    def writes(self) -> Iterator[Callable[[int, bytes | memoryview], None]]:
        """``write`` for many writes in a row: the file is opened at the first ``pwrite`` and
        closed when the block ends, not once per write."""
        fd = -1

        def write(pos: int, data: bytes | memoryview) -> None:
            nonlocal fd
            if len(data) < BULK_WRITE:
                self.mm[pos:pos + len(data)] = data
                return
            try:
                if fd < 0:
                    fd = self._open()
                view = memoryview(data)
                while view:
                    view = view[os.pwrite(fd, view, pos + len(data) - len(view)):]
            except OSError as e:
                raise disk_error(e, self.path, f"writing {len(data)} bytes at {pos}") from None

        try:
            yield write
        finally:
            if fd >= 0:
                os.close(fd)

    def flush(self, upto: int | None = None) -> None:
        """Make the bytes written so far durable (in a bulk output, ``safe_files.bulk_output``,
        they become durable with the whole output instead).

        fdatasync writes the pages dirtied through the mapping (Linux keeps one page cache for
        the file, mapped or not, so any descriptor of it will do) and, unlike ``mmap.flush``,
        releases the GIL while the disk works, so other threads keep appending (group commit
        relies on that).
        """
        upto = self.wrote if upto is None else upto
        if upto <= self.flushed:
            return
        if deferred(self.path):  # a bulk output's file: durable with the whole output
            self.flushed = upto
            return
        fd = open_file(self.path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)
        self.flushed = upto

    def _unmap(self) -> bool:
        """Unmap; False when a numpy view of the mapping is still alive (it keeps the map)."""
        if self._mm is not None and not self._mm.closed:
            try:
                self._mm.close()
            except BufferError:
                return False
        self._mm = None
        return True

    def close(self) -> None:
        """Unmap. A numpy view of the mapping that is still alive (a walked ``RecordBatch``
        someone holds) keeps the mapping until it goes."""
        self._unmap()

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class MappedFileQueue:
    """The files of one directory (and, read only, those of ``also``: a multi-path CommitLog),
    named by their 20-digit start offset, each ``file_size`` long, opened as ``file_type`` (a
    ``MappedFile`` or a subclass that maps differently). New files go to ``directory``."""

    def __init__(self, directory: Path, file_size: int,
                 file_type: type[MappedFile] = MappedFile, also: Sequence[Path] = ()) -> None:
        self.dir = directory if isinstance(directory, Path) else Path(directory)
        self.dirs = [self.dir, *(Path(d) for d in also)]
        self.file_size = file_size
        self.file_type = file_type
        self.files: list[MappedFile] = []

    def load(self) -> None:
        """Open every existing file of every directory in offset order; reject foreign names,
        wrong sizes, gaps and a name in two directories (one directory listing each)."""
        for path, start in self.listed():
            self.add(self.file_type(path, start, self.file_size))

    def add(self, mf: MappedFile) -> None:
        """Append ``mf``, an opened existing file that follows the last (``listed``), as full."""
        mf.wrote = mf.flushed = self.file_size
        self.files.append(mf)

    def listed(self) -> list[tuple[Path, int]]:
        """(path, start offset) of every existing file of every directory, in offset order;
        StoreFormatError for a foreign name, a start that is no multiple of the file size, a gap
        and a name in two directories. Nothing is opened.

        A gap is reported only when the next listing shows it again: a listing taken while a
        writer creates files may miss a file created during it and show a later one (a directory
        is read in hash order, not creation order), a gap no store has."""
        seen: str | None = None
        for _ in range(LISTINGS):
            out, gap = self._in_order(self._names())
            if gap is None or gap == seen:
                break
            seen = gap
        if gap is not None:
            raise StoreFormatError(gap)
        return out

    def _names(self) -> dict[str, Path]:
        """Each store file's name -> its directory (one directory listing each); StoreFormatError
        for a name in two directories."""
        found: dict[str, Path] = {}
        for d in self.dirs:
            try:
                names = os.listdir(d)
            except FileNotFoundError:
                continue
            for name in names:
                if name.startswith("."):
                    continue
                if name in found:
                    raise StoreFormatError(f"{d / name}: the file {name} is also in {found[name]}")
                found[name] = d
        return found

    def _in_order(self, found: dict[str, Path]) -> tuple[list[tuple[Path, int]], str | None]:
        """``found``'s files as (path, start) in offset order, and the first gap's message (None:
        no gap); StoreFormatError for a foreign name or a start off the file size."""
        out: list[tuple[Path, int]] = []
        for name in sorted(found):
            path = found[name] / name
            if not FILE_NAME.match(name):
                raise StoreFormatError(f"{path}: not a store file name (20 digits expected)")
            start = int(name)
            if start % self.file_size:
                raise StoreFormatError(
                    f"{path}: start offset is not a multiple of the file size {self.file_size}")
            last = out[-1] if out else (self.files[-1].path, self.files[-1].start) if self.files else None
            if last is not None and start != last[1] + self.file_size:
                return out, f"{path}: gap after {last[0]}"
            out.append((path, start))
        return out, None

    @property
    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def create(self, start: int) -> MappedFile:
        """Create and map the file starting at ``start`` (StoreFullError when the disk is full)."""
        mf = self.file_type(self.dir / format_file_name(start), start, self.file_size, create=True)
        self.files.append(mf)
        return mf

    def find(self, offset: int) -> MappedFile | None:
        """The file holding byte ``offset``, or None."""
        if not self.files:
            return None
        i = (offset - self.files[0].start) // self.file_size
        if 0 <= i < len(self.files):
            return self.files[i]
        return None

    @property
    def min_offset(self) -> int:
        return self.files[0].start if self.files else 0

    @property
    def max_offset(self) -> int:
        """One past the last written byte (files created ahead of need may follow it, empty)."""
        for mf in reversed(self.files):
            if mf.wrote or mf is self.files[0]:
                return mf.start + mf.wrote
        return 0

    def flush(self) -> None:
        for mf in self.files:
            if mf.wrote > mf.flushed:
                mf.flush()

    def truncate_after(self, offset: int) -> None:
        """Keep bytes below ``offset``: delete later files and zero the rest of the one holding it."""
        while self.files and self.files[-1].start >= offset:
            self.files.pop().destroy()
        mf = self.last
        if mf is not None and offset < mf.end:
            pos = offset - mf.start
            zero_tail(mf, pos)
            mf.wrote = pos
            mf.flushed = min(mf.flushed, pos)

    def delete_first(self, n: int) -> list[MappedFile]:
        gone, self.files = self.files[:n], self.files[n:]
        for mf in gone:
            mf.destroy()
        return gone

    def close(self) -> None:
        for mf in self.files:
            mf.close()


def release_pages(buf: np.ndarray, lo: int, hi: int) -> None:
    """Let this process's resident set drop the whole pages of ``buf[lo:hi]`` when ``buf`` views a
    shared file mapping (``MappedFile.mm``, ``np.memmap``): ``MADV_DONTNEED`` unmaps them from
    the process while the page cache keeps them (written ones too, still dirty), and a later read
    maps them again, so the bytes never change. Anything else (a copy in memory) is left alone.
    A walk over many GiB calls it behind itself: mapped file pages count in RSS until released."""
    mm: object = buf.base
    while mm is not None and not isinstance(mm, mmap.mmap):  # views of views, memoryviews
        mm = mm.obj if isinstance(mm, memoryview) else getattr(mm, "base", None)
    if mm is None or mm.closed:
        return
    at = buf.ctypes.data - np.frombuffer(mm, dtype=np.uint8).ctypes.data
    first = -(-(at + lo) // PAGE_SIZE) * PAGE_SIZE
    last = (at + hi) // PAGE_SIZE * PAGE_SIZE
    if last > first:
        mm.madvise(mmap.MADV_DONTNEED, first, last - first)


def zero_tail(mf: MappedFile, pos: int, chunk: int = 1 << 22) -> None:
    """Zero ``[pos, size)`` of a mapped file so no stale bytes can parse later; msync what changed."""
    lo = first_nonzero(mf, pos, chunk)
    while lo is not None:
        hi = min(mf.size, (lo // chunk + 1) * chunk)
        mf.mm[lo:hi] = bytes(hi - lo)
        start = lo - lo % PAGE_SIZE
        mf.mm.flush(start, hi - start)
        lo = first_nonzero(mf, hi, chunk)


def check_size(fd: int, path: Path, size: int) -> None:
    """StoreFormatError naming ``path`` when the file open at ``fd`` is not ``size`` bytes long."""
    actual = os.fstat(fd).st_size
    if actual != size:
        raise StoreFormatError(f"{path}: file is {actual} bytes, expected {size} "
                               f"(check the configured file size)")


def data_end(path: Path | str) -> int:
    """Where the last data region of a file ends (0: it has none); past it the file is holes or
    unwritten extents, which read as zeros (``SEEK_DATA`` / ``SEEK_HOLE``, then the extent map:
    a file system without them reports the whole file as data). A scan can stop there without
    reading the rest."""
    fd = os.open(path, os.O_RDONLY)
    try:
        end = data_end_of(fd)
        written = _written_end(fd, end)
        return end if written is None else min(end, written)
    finally:
        os.close(fd)


#: Linux's FS_IOC_FIEMAP and its structures (linux/fiemap.h)
_FIEMAP = 0xC020660B
_FIEMAP_HEAD = struct.Struct("=QQIIII")        # start, length, flags, mapped, count, reserved
_FIEMAP_EXTENT = struct.Struct("=QQQ16xI12x")  # logical, physical, length, flags
_FIEMAP_FLAG_SYNC, _EXTENT_LAST, _EXTENT_UNWRITTEN = 0x1, 0x1, 0x800
_EXTENTS_PER_CALL = 256


def _written_end(fd: int, end: int) -> int | None:
    """Where the last extent before ``end`` that is not unwritten ends, from the file's extent map
    (``FS_IOC_FIEMAP``, after writing back its dirty pages); None when the file system has no
    extent map. ``SEEK_DATA`` counts an unwritten extent (space reserved by ``fallocate``, read
    as zeros) as data once its pages are in the page cache, as after any read of them: a store
    file pre-allocated and read once would otherwise count as data to its last byte."""
    if sys.platform != "linux" or end <= 0:
        return None
    written, at = 0, 0
    while at < end:
        req = bytearray(_FIEMAP_HEAD.size + _FIEMAP_EXTENT.size * _EXTENTS_PER_CALL)
        _FIEMAP_HEAD.pack_into(req, 0, at, end - at, _FIEMAP_FLAG_SYNC, 0, _EXTENTS_PER_CALL, 0)
        try:
            fcntl.ioctl(fd, _FIEMAP, req)
        except OSError:
            return None  # no extent map here (tmpfs, network file systems): SEEK_DATA's answer
        mapped = _FIEMAP_HEAD.unpack_from(req, 0)[3]
        if mapped == 0:
            break
        for i in range(mapped):
            logical, _, length, flags = _FIEMAP_EXTENT.unpack_from(
                req, _FIEMAP_HEAD.size + i * _FIEMAP_EXTENT.size)
            if not flags & _EXTENT_UNWRITTEN:
                written = max(written, logical + length)
            at = logical + length
            if flags & _EXTENT_LAST:
                return min(written, end)
    return min(written, end)


def first_nonzero(mf: MappedFile, pos: int, chunk: int = 1 << 22) -> int | None:
    """Offset of the first non-zero byte at or after ``pos`` in a mapped file, or None.

    Only the file's data regions are read (``SEEK_DATA`` / ``SEEK_HOLE``): the unwritten extents
    of a pre-allocated file read as zeros, and faulting them in would cost more than the scan
    (recovery of a store whose last 1 GiB file is 10% full: 5 s of page faults).
    """
    fd = os.open(mf.path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return _first_nonzero(mf, fd, pos, chunk)
    finally:
        os.close(fd)


def _first_nonzero(mf: MappedFile, fd: int, pos: int, chunk: int) -> int | None:
    lo = pos
    while lo < mf.size:
        try:
            lo = os.lseek(fd, lo, os.SEEK_DATA)
            region_end = min(mf.size, os.lseek(fd, lo, os.SEEK_HOLE))
        except OSError as e:
            if e.errno == errno.ENXIO:  # no data after lo
                return None
            raise
        # No readahead while scanning: pages read ahead past the data would count as data.
        page = lo - lo % PAGE_SIZE
        mf.mm.madvise(mmap.MADV_RANDOM, page, region_end - page)
        while lo < region_end:
            hi = min(region_end, (lo // chunk + 1) * chunk)
            if _has_nonzero(mf.mm, lo, hi):
                nz = np.flatnonzero(np.frombuffer(mf.mm, dtype=np.uint8, count=hi - lo, offset=lo))
                return lo + int(nz[0])
            lo = hi
    return None


def _has_nonzero(buf: mmap.mmap, lo: int, hi: int) -> bool:
    """Whether ``buf[lo:hi]`` holds a non-zero byte: counted over 8-byte words (about twice as
    fast as a byte scan; only the chunk that has one is scanned byte by byte)."""
    words = (hi - lo) // 8
    tail = lo + 8 * words
    return bool(np.count_nonzero(np.frombuffer(buf, dtype=np.uint64, count=words, offset=lo))
                or np.count_nonzero(np.frombuffer(buf, dtype=np.uint8, count=hi - tail, offset=tail)))
