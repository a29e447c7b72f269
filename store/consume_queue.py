"""ConsumeQueue: one logical queue's 20-byte units (commitlog offset, size, tagsCode), as
RocketMQ's ``ConsumeQueue`` writes them."""
from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from rocketlake.store.codec import (
    CQ_BLANK_UNIT_SIZE,
    CQ_PRE_BLANK,
    CQ_UNIT_DTYPE,
    CQ_UNIT_SIZE,
    format_file_name,
    queue_key,
    queue_of_key,
)
from rocketlake.store.errors import StoreFormatError, UnsupportedStoreError
from rocketlake.store.file_data import read_one_file_dirs
from rocketlake.store.gc_pause import gc_paused
from rocketlake.store.lazy_maps import LazyMappedFile
from rocketlake.store.mapped_file import (
    FILE_NAME_DIGITS,
    MappedFile,
    MappedFileQueue,
)
from rocketlake.store.paths import (
    BATCH_CONSUME_QUEUE_DIR,
    CONSUME_QUEUE_DIR,
    check_queue_id,
    check_topic_name,
    queue_dir,
    queue_dirs,
    resolve_inside,
    topic_dir,
)
from rocketlake.store.rocksdb_store import SETTING, rocksdb_consume_queue
from rocketlake.store.safe_files import disk_error, open_file, reserve, write_at
from rocketlake.store.swap_journal import refuse_unfinished

#: units read at a time where a scan may stop early
SCAN_UNITS = 1 << 14


@overload
def valid_units(commitlog_offset: int, size: int, commitlog_min: int) -> bool: ...
@overload
def valid_units(commitlog_offset: npt.NDArray[Any], size: npt.NDArray[Any], commitlog_min: int
                ) -> npt.NDArray[np.bool_]: ...
def valid_units(commitlog_offset: npt.NDArray[Any] | int, size: npt.NDArray[Any] | int,
                commitlog_min: int) -> npt.NDArray[np.bool_] | bool:
    """Whether each unit (``commitlog_offset``, ``size``: arrays, or one unit's ints) stands for a
    record that should be in the CommitLog: not a pre-blank unit, at or above ``commitlog_min``."""
    return (commitlog_offset >= commitlog_min) & (size > 0) & (size != CQ_BLANK_UNIT_SIZE)


def read_units(mf: MappedFile, first: int, count: int) -> np.ndarray:
    """A copy of units ``first`` to ``first + count - 1`` of a ConsumeQueue file."""
    out = np.empty(count, dtype=CQ_UNIT_DTYPE)
    if count:
        mf.read_into(first * CQ_UNIT_SIZE, out)
    return out


def pre_blank(byte_offset: int, file_size: int) -> bytes:
    """What goes before the first unit of a queue whose first file is created for unit byte
    offset ``byte_offset``: a pre-blank unit (``CQ_PRE_BLANK``) for every unit of that file
    before it (RocketMQ's ``ConsumeQueue.putMessagePositionInfo`` -> ``fillPreBlank``)."""
    return CQ_PRE_BLANK * ((byte_offset % file_size) // CQ_UNIT_SIZE)


class ConsumeQueue:
    """Units at byte ``queue_offset * 20`` across files of ``file_size`` bytes, under
    ``<root>/consumequeue/<topic>/<queueId>`` (UnsafePathError for a name that cannot be one).
    Its files are mapped only while written (``store.lazy_maps``); reads copy."""

    def __init__(self, root: Path, topic: str, queue_id: int, file_size: int,
                 directory: Path | None = None) -> None:
        """``directory``: the queue's directory as ``paths.queue_dirs`` found it (checked there);
        by default it is built and checked here (``paths.queue_dir``)."""
        self.topic, self.queue_id = topic, queue_id
        self.file_size = file_size
        self.files = MappedFileQueue(queue_dir(root, topic, queue_id) if directory is None else directory,
                                     file_size, LazyMappedFile)
        self.min_logic_offset = 0  # byte offset of the first valid unit
        self.max_physic_offset = -1  # end (offset + size) of the last dispatched record

    # --- loading ----------------------------------------------------------------------------------
    def load(self, commitlog_min: int | None = None) -> None:
        """Open the files (none is mapped), then find the written extent: the first valid unit
        of the first file, and the last non-zero unit of the newest file holding one. Only the
        files' data regions are read (pre-allocated space reads as zeros); a file whose data
        holds at most ``SCAN_UNITS`` units is read once (one descriptor), whatever is asked of it.
        With ``commitlog_min``, the minimum is then ``correct_min_offset(commitlog_min)``'s."""
        self.files.load()
        files = self.files.files
        if not files:
            return
        # Extent: the newest file holding any unit ends after its last non-zero unit (zeros are
        # pre-allocated space); files after it are empty (``reserve`` creates files ahead of the
        # units), files before it are full. A damaged unit does not hide the units after it:
        # recovery finds it and rebuilds the queue from the CommitLog.
        for mf in files:
            mf.wrote = mf.flushed = mf.size
        head: tuple[int, np.ndarray] | None = None  # the first file's data tail, when read
        last = None  # the last unit written
        for mf in reversed(files):
            lo, u = _data_tail(mf)
            if mf is files[0]:
                head = lo, u
            n, last = _written_units(mf, lo, u)
            mf.wrote = mf.flushed = n * CQ_UNIT_SIZE
            if n:
                break
        self.set_max_physic(last)
        first = files[0]
        whole = head is not None and head[0] == 0  # the first file's data, read whole
        if commitlog_min is not None:
            ok = _first_valid_in(head[1][:first.wrote // CQ_UNIT_SIZE], commitlog_min) \
                if head is not None and whole else None
            if ok is None:
                self.correct_min_offset(commitlog_min)
            else:
                self.min_logic_offset = first.start + ok * CQ_UNIT_SIZE
            return
        if head is not None and whole:
            valid = _first_valid_in(head[1], 0)
        else:
            # not read: a file before the newest one holding units, full (``wrote`` is its size)
            count = head[0] + head[1].size if head is not None else first.wrote // CQ_UNIT_SIZE
            valid = self._first_valid(first, count, 0)
        self.min_logic_offset = first.start + (valid or 0) * CQ_UNIT_SIZE

    def _first_valid(self, mf: MappedFile, count: int, commitlog_min: int) -> int | None:
        """Index of the first of ``mf``'s first ``count`` units that is valid (a record at or
        above ``commitlog_min``, not a pre-blank unit), None when none is."""
        for lo in range(0, count, SCAN_UNITS):
            ok = _first_valid_in(read_units(mf, lo, min(SCAN_UNITS, count - lo)), commitlog_min)
            if ok is not None:
                return lo + ok
        return None

    def _refresh_max_physic(self) -> None:
        # The last unit written; a crash can leave the newest file empty, so look back.
        for mf in reversed(self.files.files):
            if mf.wrote:
                self.set_max_physic(read_units(mf, mf.wrote // CQ_UNIT_SIZE - 1, 1)[0].item())
                return
        self.set_max_physic(None)

    def set_max_physic(self, last: tuple[int, int, int] | None) -> None:
        """Take the end of the record of ``last``, the last unit written (offset, size, tagsCode)
        as the caller read it (None: there is none; a pre-blank unit is no record's)."""
        self.max_physic_offset = -1
        if last is not None:
            off, size, _ = last
            if size != CQ_BLANK_UNIT_SIZE:
                self.max_physic_offset = off + size

    # --- writing ----------------------------------------------------------------------------------
    def _file_at(self, byte_offset: int) -> MappedFile:
        """The file for unit byte offset ``byte_offset``, created (with pre-blank) if new."""
        mf = self.files.find(byte_offset)
        if mf is not None:
            return mf
        mf = self.files.last
        start = byte_offset - byte_offset % self.file_size
        if mf is not None and start != mf.end:
            raise StoreFormatError(f"{self.files.dir}: unit at byte {byte_offset} would leave a gap "
                                   f"after {mf.path.name}")
        first = mf is None
        mf = self.files.create(start)
        if first and byte_offset:
            blanks = pre_blank(byte_offset, self.file_size)
            mf.write(0, blanks)
            mf.wrote = len(blanks)
            self.min_logic_offset = byte_offset
        return mf

    def reserve(self, queue_offset: int, count: int) -> None:
        """Create now the files that units ``queue_offset`` to ``queue_offset + count - 1`` go
        to, so writing them only writes into files that exist, their space reserved. A full disk
        raises StoreFullError here, before the caller writes anything."""
        end = (queue_offset + count) * CQ_UNIT_SIZE
        files = self.files.files
        if files and end <= files[-1].start + self.file_size:
            return
        byte_offset = files[-1].end if files else queue_offset * CQ_UNIT_SIZE
        while byte_offset < end:
            byte_offset = self._file_at(byte_offset).end

    def put_many(self, queue_offsets: np.ndarray, units: np.ndarray) -> None:
        """Write units (CQ_UNIT_DTYPE) at consecutive ``queue_offsets``, in order.

        Units of records already dispatched (ending at or before the last dispatched record) are
        skipped, so re-dispatching after a crash is harmless. A file filled to its end is unmapped
        (its pages stay in the page cache, dirty until flushed): a queue keeps only its last file
        mapped, so writing many GiB of units does not grow the process by as much.
        """
        fresh = units["commitlog_offset"] + units["size"] > self.max_physic_offset
        if not fresh.all():
            queue_offsets, units = queue_offsets[fresh], units[fresh]
        i, n = 0, units.size
        while i < n:
            byte_offset = int(queue_offsets[i]) * CQ_UNIT_SIZE
            mf = self._file_at(byte_offset)
            pos = byte_offset - mf.start
            if pos < mf.wrote:  # already there (re-dispatch of units the queue kept)
                skip = min(n - i, (mf.wrote - pos) // CQ_UNIT_SIZE)
                i += skip
                continue
            if pos > mf.wrote:
                raise StoreFormatError(
                    f"{self.topic}/{self.queue_id}: queue offset {queue_offsets[i]} leaves a gap "
                    f"after {(mf.start + mf.wrote) // CQ_UNIT_SIZE}")
            k = min(n - i, (mf.size - pos) // CQ_UNIT_SIZE)
            mf.write(pos, units[i:i + k].tobytes())
            mf.wrote = pos + k * CQ_UNIT_SIZE
            if mf.wrote == mf.size:
                mf.close()  # full: unmapped (a lazy file maps again when used), out of the RSS
            i += k
        if n:
            last = units[-1]
            self.max_physic_offset = int(last["commitlog_offset"]) + int(last["size"])

    # --- reading ----------------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        """First valid queue offset."""
        return self.min_logic_offset // CQ_UNIT_SIZE

    @property
    def max_offset(self) -> int:
        """One past the last unit written."""
        return self.files.max_offset // CQ_UNIT_SIZE

    def units(self, queue_offset: int, count: int) -> np.ndarray:
        """Up to ``count`` units from ``queue_offset`` (stops at a file end or the written end)."""
        byte_offset = queue_offset * CQ_UNIT_SIZE
        mf = self.files.find(byte_offset)
        if mf is None:
            return np.zeros(0, dtype=CQ_UNIT_DTYPE)
        pos = byte_offset - mf.start
        n = max(0, min(count, (mf.wrote - pos) // CQ_UNIT_SIZE))
        return read_units(mf, pos // CQ_UNIT_SIZE, n)

    def all_units(self) -> np.ndarray:
        """Every written unit from the first file (pre-blank units included)."""
        parts = [read_units(mf, 0, mf.wrote // CQ_UNIT_SIZE) for mf in self.files.files]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=CQ_UNIT_DTYPE)

    def recent_files(self) -> list[MappedFile]:
        """The last three files, whose units RocketMQ's ``ConsumeQueue.recover`` checks."""
        return self.files.files[-3:]

    def cut(self, queue_offset: int) -> None:
        """Drop every unit from ``queue_offset`` on (whole later files are deleted)."""
        self.files.truncate_after(queue_offset * CQ_UNIT_SIZE)
        self._refresh_max_physic()

    def pre_blank_end(self) -> int:
        """Queue offset after the pre-blank units (``CQ_PRE_BLANK``) that lead the queue's first
        file, where RocketMQ's ``fillPreBlank`` put them; any unit from here on is a record's,
        so one of the pre-blank size (Integer.MAX_VALUE) is damage, not a pre-blank."""
        if not self.files.files:
            return 0
        first = self.files.files[0]
        written = first.wrote // CQ_UNIT_SIZE
        lo, step = 0, 1  # most queues have none: their first unit tells
        while lo < written:
            u = read_units(first, lo, min(step, written - lo))
            blank = ((u["commitlog_offset"] == 0) & (u["size"] == CQ_BLANK_UNIT_SIZE)
                     & (u["tags_code"] == 0))
            if not blank.all():
                return first.start // CQ_UNIT_SIZE + lo + int(np.argmin(blank))
            lo, step = lo + u.size, SCAN_UNITS
        return first.start // CQ_UNIT_SIZE + written

    def _units_within(self, mf: MappedFile, commitlog_end: int) -> int:
        """How many of ``mf``'s written units come before the first whose record reaches past
        ``commitlog_end`` (units are in CommitLog order; pre-blank units are no record's)."""
        u = read_units(mf, 0, mf.wrote // CQ_UNIT_SIZE)
        first = mf is self.files.files[0]  # pre-blank units lead the first file only
        lead = max(0, min(u.size, self.pre_blank_end() - mf.start // CQ_UNIT_SIZE)) if first else 0
        bad = np.flatnonzero(u["commitlog_offset"] + u["size"] > commitlog_end)
        bad = bad[bad >= lead]
        return int(bad[0]) if bad.size else u.size

    def hide_past(self, commitlog_end: int) -> None:
        """Read-only: leave out (not cut) the tail units whose record reaches past
        ``commitlog_end``; the files are not changed."""
        for mf in reversed(self.files.files):
            keep = self._units_within(mf, commitlog_end)
            mf.wrote = keep * CQ_UNIT_SIZE
            if keep:
                break
        self._refresh_max_physic()

    def truncate_dirty(self, commitlog_end: int) -> None:
        """Drop tail units whose record reaches past ``commitlog_end``."""
        while self.files.last is not None:
            mf = self.files.last
            keep = self._units_within(mf, commitlog_end)
            if keep == 0 and len(self.files.files) > 1:
                self.files.files.pop().destroy()
                continue
            if keep == 0 or keep * CQ_UNIT_SIZE < mf.wrote:  # past ``wrote`` the file is zeros
                self.files.truncate_after(mf.start + keep * CQ_UNIT_SIZE)
            break
        self._refresh_max_physic()

    def correct_min_offset(self, commitlog_min: int) -> None:
        """Set the minimum to the first unit whose record is at or above ``commitlog_min``."""
        for mf in self.files.files:
            ok = self._first_valid(mf, mf.wrote // CQ_UNIT_SIZE, commitlog_min)
            if ok is not None:
                self.min_logic_offset = mf.start + ok * CQ_UNIT_SIZE
                return
        self.min_logic_offset = self.files.max_offset

    def flush(self) -> None:
        self.files.flush()

    def close(self) -> None:
        self.files.close()


def _data_tail(mf: MappedFile) -> tuple[int, np.ndarray]:
    """(index of the first, units): ``mf``'s last up to ``SCAN_UNITS`` units before the end of
    its data (``MappedFile.read_data_tail``)."""
    pos, raw = mf.read_data_tail(CQ_UNIT_SIZE, SCAN_UNITS * CQ_UNIT_SIZE)
    return pos // CQ_UNIT_SIZE, raw.view(CQ_UNIT_DTYPE)


def _first_valid_in(u: np.ndarray, commitlog_min: int) -> int | None:
    """Index of the first of units ``u`` that is valid (a record at or above ``commitlog_min``,
    not a pre-blank unit), None when none is."""
    ok = np.flatnonzero(valid_units(u["commitlog_offset"], u["size"], commitlog_min))
    return int(ok[0]) if ok.size else None


def _written_units(mf: MappedFile, lo: int, u: np.ndarray) -> tuple[int, tuple[int, int, int] | None]:
    """How many units ``mf`` holds up to and with its last non-zero one, and that unit (None when
    none is), read back to front from ``u``, its units from ``lo`` to the end of its data."""
    while True:
        written = np.flatnonzero((u["commitlog_offset"] != 0) | (u["size"] != 0)
                                 | (u["tags_code"] != 0))
        if written.size:
            return lo + int(written[-1]) + 1, u[written[-1]].item()
        if lo == 0:
            return 0, None
        hi, lo = lo, max(0, lo - SCAN_UNITS)
        u = read_units(mf, lo, hi - lo)


def not_file_queues(root: Path, topics: Collection[str] | None = None) -> str | None:
    """Why the ConsumeQueues of the store at ``root`` (of ``topics``; None: every topic) are not
    all 4.9 ConsumeQueue files, which code that reads them as files or writes them must know: a
    5.x RocksDB ConsumeQueue (naming ``storeType=defaultRocksDB``), or a BatchConsumeQueue
    (naming its topic). None when they are."""
    if rocksdb_consume_queue(root):
        return f"{Path(root) / CONSUME_QUEUE_DIR}: a RocksDB ConsumeQueue ({SETTING}, RocketMQ 5.x)"
    base = Path(root) / BATCH_CONSUME_QUEUE_DIR
    batch = sorted(d.name for d in (base.iterdir() if base.is_dir() else ())
                   if d.is_dir() and (topics is None or d.name in topics))
    if batch:
        return (f"{base / batch[0]}: a BatchConsumeQueue (topic {batch[0]!r} is a 5.x BatchCQ "
                f"topic{f', and {len(batch) - 1} more' if len(batch) > 1 else ''})")
    return None


def refuse_writing(root: Path) -> None:
    """The guard of a writer's open: UnsupportedStoreError when the ConsumeQueues of the store at
    ``root`` are not all 4.9 ConsumeQueue files (:func:`not_file_queues` says why): a writer would
    dispatch into `consumequeue/` files beside queues the broker alone maintains (a RocksDB
    database there, or a BatchCQ topic's queues, which the broker then refuses to start with)."""
    reason = not_file_queues(root)
    if reason is not None:
        raise UnsupportedStoreError(f"{reason}; rocketlake reads such a store but does not write "
                                    f"it, nothing was written: open the store read-only")


def load_queues(root: Path, file_size: int, commitlog_min: int | None = None,
                read: dict[tuple[str, int], np.ndarray] | None = None) -> dict[tuple[str, int], ConsumeQueue]:
    """Every ConsumeQueue file queue under `<root>/consumequeue/<topic>/<queueId>/`, loaded (with
    ``commitlog_min``: their minimum corrected to it, ``ConsumeQueue.load``). ``read``, when
    given, gets the written units the load read whole, by queue: those of each queue of one file
    whose data holds at most ``SCAN_UNITS`` units (the same units ``all_units`` reads while
    the file is neither written nor cut), so a caller checking them need not read them again. A
    directory whose name is not a topic / queue id, or that resolves outside the store, is an
    error (the queues opened before it are closed again). A 5.x RocksDB ConsumeQueue there
    holds no file queue: UnsupportedStoreError naming it (its queues are read through
    ``rocksdb_store.load_rocksdb_queues``, as ``MessageStore`` does read-only)."""
    refuse_unfinished(root)
    if rocksdb_consume_queue(root):
        raise UnsupportedStoreError(
            f"{Path(root) / CONSUME_QUEUE_DIR}: a RocksDB ConsumeQueue ({SETTING}, RocketMQ 5.x), "
            f"not ConsumeQueue files; rocketlake reads its queues (get, lag, topic-status, dump) "
            f"but not as files (verify, salvage, rebuild, the Spark jobs)")
    out: dict[tuple[str, int], ConsumeQueue] = {}
    try:
        with gc_paused():  # a few objects per queue: collections took a sixth of 100,000 queues' load
            found = list(queue_dirs(root))
            small = _SmallQueues(file_size, [os.fspath(qdir) for _, _, qdir in found])
            for i, (topic, queue_id, qdir) in enumerate(found):
                cq = out[(topic, queue_id)] = ConsumeQueue(root, topic, queue_id, file_size, qdir)
                if not small.add(i, cq):
                    cq.load(commitlog_min)
            small.load(commitlog_min, read)
    except BaseException:
        for cq in out.values():
            cq.close()
        raise
    return out


class _SmallQueues:
    """``ConsumeQueue.load`` in bulk for the common queue of one file whose data holds at most
    ``SCAN_UNITS`` units: each directory of ``dirs`` (paths of queue directories, ``file_size``
    their files' size) is listed and its file opened once (checked, its data found and read)
    with plain system calls, before any object is made; the extent and minimum of all such
    queues are then found in one vectorised pass, with the results ``ConsumeQueue.load`` gives
    each. Many directories are read by this process and a helper process at once
    (``file_data.read_one_file_dirs``)."""

    def __init__(self, file_size: int, dirs: Sequence[str]) -> None:
        self.file_size = file_size
        self.queues: list[ConsumeQueue] = []
        self.data: list[bytes] = []
        self.found = read_one_file_dirs(dirs, file_size, CQ_UNIT_SIZE, SCAN_UNITS * CQ_UNIT_SIZE,
                                        FILE_NAME_DIGITS)

    def add(self, i: int, cq: ConsumeQueue) -> bool:
        """Take ``cq`` (of the ``i``-th directory) to be loaded by ``load``: True when its file was
        read or it has none; False (nothing done) for a queue this is not for, or whose file
        needs the checked open to say what is wrong with it (``ConsumeQueue.load`` then)."""
        got = self.found[i]
        if got is None:
            return False
        name, data = got
        if not name:  # no file
            return True
        cq.files.add(LazyMappedFile.checked(cq.files.dir / name, int(name), self.file_size))
        self.queues.append(cq)
        self.data.append(data)
        return True

    def load(self, commitlog_min: int | None,
             read: dict[tuple[str, int], np.ndarray] | None = None) -> None:
        """``ConsumeQueue.load(commitlog_min)`` of every queue added; into ``read`` (when given)
        each queue's written units (views of one read-only array)."""
        if not self.queues:
            return
        counts = np.array([len(d) // CQ_UNIT_SIZE for d in self.data], dtype=np.int64)
        u = np.frombuffer(b"".join(self.data), dtype=CQ_UNIT_DTYPE)  # read-only
        firsts = np.cumsum(counts) - counts
        # the non-zero units: the last of a queue ends its written units (zeros are pre-allocated
        # space, most of what a data region holds), and any valid unit is one of them
        hits = np.flatnonzero((u["commitlog_offset"] != 0) | (u["size"] != 0) | (u["tags_code"] != 0))
        qi = np.searchsorted(firsts, hits, side="right") - 1  # their queues (right: not one without units)
        pos = hits - firsts[qi]
        off, size = u["commitlog_offset"][hits], u["size"][hits]
        written = _per_queue(np.ones(hits.size, dtype=bool), qi, pos, counts.size, last=True) + 1
        valid = _per_queue(valid_units(off, size, commitlog_min or 0), qi, pos, counts.size, last=False)
        tail = u[np.maximum(firsts + written - 1, 0)] if u.size else np.zeros(counts.size, CQ_UNIT_DTYPE)
        ends = np.where((written > 0) & (tail["size"] != CQ_BLANK_UNIT_SIZE),
                        tail["commitlog_offset"] + tail["size"], -1)
        for cq, n, first, end, at in zip(self.queues, written.tolist(), valid.tolist(), ends.tolist(),
                                         firsts.tolist()):
            if read is not None:
                read[(cq.topic, cq.queue_id)] = u[at:at + n]
            mf = cq.files.files[0]
            mf.wrote = mf.flushed = n * CQ_UNIT_SIZE
            cq.max_physic_offset = end
            # none valid: corrected to a CommitLog minimum, the queue's end; else its start
            cq.min_logic_offset = mf.start + (first * CQ_UNIT_SIZE if first >= 0 else
                                              mf.wrote if commitlog_min is not None else 0)


def _per_queue(mask: np.ndarray, qi: np.ndarray, pos: np.ndarray, n: int, last: bool) -> np.ndarray:
    """For each of ``n`` queues, the index (``pos``) among its units (``qi``: the queue of each
    unit, ascending) of its first (``last``: last) unit where ``mask`` holds; -1 where none does."""
    out = np.full(n, -1, dtype=np.int64)
    hits = np.flatnonzero(mask)
    q = qi[hits]
    edge = np.ones(q.size, dtype=bool)
    if last:
        edge[:-1] = q[1:] != q[:-1]
    else:
        edge[1:] = q[1:] != q[:-1]
    out[q[edge]] = pos[hits[edge]]
    return out


#: a new ConsumeQueue file followed by at most this many bytes of zeros after what is written
#: into it is written whole, zeros included, in one write (which allocates its space) instead of
#: having its space reserved first (``safe_files.reserve``): one system call less per file
WHOLE_WRITE = 1 << 16


def write_consume_queue_files(qdir: str | os.PathLike[str], queue_offsets: np.ndarray,
                              units: np.ndarray, file_size: int, after: int = 0,
                              made: bool = False) -> int:
    """Write units (``CQ_UNIT_DTYPE``) at consecutive ``queue_offsets`` into the queue's files
    under ``qdir`` with plain file writes, the bytes ``ConsumeQueue.put_many`` would write
    (files of ``file_size`` bytes, pre-blank units before the first unit of a new queue).
    ``after``: the queue's current max offset; units below it are already there and skipped.
    ``made``: the caller has just made ``qdir`` (empty): each file is created new (``O_EXCL``),
    its space allocated (``safe_files.reserve``, or zeros written to its end: ``WHOLE_WRITE``),
    and written whole in one write.
    StoreFormatError when the offsets leave a gap; LinkedFileError for a file that is a link;
    an OSError naming the file (StoreFullError: the disk is full) when a write fails.
    Returns the number of units written."""
    keep = queue_offsets >= after
    queue_offsets, units = queue_offsets[keep], units[keep]
    if queue_offsets.size == 0:
        return 0
    gaps = np.flatnonzero(np.diff(queue_offsets) != 1)
    if gaps.size:
        g = int(gaps[0])
        raise StoreFormatError(f"{qdir}: queue offset {queue_offsets[g + 1]} leaves a gap after "
                               f"{queue_offsets[g]} (the records at CommitLog offsets "
                               f"{units['commitlog_offset'][g]} and {units['commitlog_offset'][g + 1]})")
    if after and queue_offsets[0] != after:
        raise StoreFormatError(f"{qdir}: queue offset {queue_offsets[0]} leaves a gap after "
                               f"{after - 1} (the record at CommitLog offset "
                               f"{units['commitlog_offset'][0]})")
    if not made:
        os.makedirs(qdir, exist_ok=True)
    new = made or not os.listdir(qdir)
    _write_units(os.fspath(qdir), int(queue_offsets[0]) * CQ_UNIT_SIZE,
                 units.astype(CQ_UNIT_DTYPE, copy=False).tobytes(), file_size, new, made)
    return int(queue_offsets.size)


def _write_units(qdir: str, first: int, data: bytes | memoryview, file_size: int, new: bool,
                 made: bool) -> None:
    """Write the units ``data`` at byte ``first`` of the queue in ``qdir`` (the contract of
    ``write_consume_queue_files``; ``new``: the queue has no file yet, so pre-blank units lead
    its first one)."""
    if new:
        data = pre_blank(first, file_size) + data
        first -= first % file_size
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if made else 0)
    pos = first
    while pos < first + len(data):
        start = pos - pos % file_size
        n = min(start + file_size, first + len(data)) - pos
        path = f"{qdir}/{format_file_name(start)}"
        chunk = data[pos - first:pos - first + n]
        try:
            fd = open_file(path, flags)
            try:
                if made and file_size - n <= WHOLE_WRITE:  # a new file: pos == start
                    chunk = bytes(chunk) + bytes(file_size - n)
                elif made:
                    reserve(fd, file_size)
                elif os.fstat(fd).st_size != file_size:
                    os.ftruncate(fd, file_size)
                write_at(fd, chunk, pos - start)
            finally:
                os.close(fd)
        except OSError as e:
            raise disk_error(e, path, "writing ConsumeQueue units") from None
        pos += n


class QueueFilesWriter:
    """Writes the ConsumeQueue files of many queues under ``<root>/<within>`` with plain file
    writes (``write_consume_queue_files``), as a rebuild does: ``<root>/<within>`` is checked
    once (``paths.resolve_inside``); a topic or queue directory this writer makes is new (no
    link, empty), so it needs no check and its files are created whole; one that was there
    before is checked (``paths.topic_dir``, ``paths.queue_dir``) and written where its units
    end. ``ends``: per queue written to, the queue offset after the last unit written.
    ``threads``: how many threads ``write_many`` writes with (making directories and files is
    time in the kernel, during which a thread does not hold the GIL)."""

    #: units ``add`` holds before it writes them
    BUFFER = 1 << 21
    #: queues ``write_many`` gives each thread at least
    THREAD_QUEUES = 256

    def __init__(self, root: Path, file_size: int, within: str = CONSUME_QUEUE_DIR,
                 threads: int = 1) -> None:
        self.root, self.file_size, self.within = Path(root), file_size, within
        self.threads = threads
        self.ends: dict[tuple[str, int], int] = {}
        self._base: str | None = None  # <root>/<within>, once checked
        self._topics: dict[str, str] = {}
        self._dirs: dict[tuple[str, int], str] = {}
        self._topic_no: dict[str, int] = {}
        self._held: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # queue, offsets, units
        self._held_units = 0

    def add(self, topics: Sequence[str], topic_ids: np.ndarray, queue_ids: np.ndarray,
            queue_offsets: np.ndarray, units: np.ndarray) -> None:
        """Write units of queues (``topics[topic_ids[i]]``, ``queue_ids[i]``) given in put order,
        after those added before: held until ``flush`` or until ``BUFFER`` units are held, so
        that a queue whose units come in many calls is written once per flush."""
        no = np.array([self._topic_no.setdefault(t, len(self._topic_no)) for t in topics],
                      dtype=np.int64)
        self._held.append((queue_key(no[topic_ids], queue_ids), queue_offsets, units))
        self._held_units += units.size
        if self._held_units >= self.BUFFER:
            self.flush()

    def flush(self) -> None:
        """Write every unit ``add`` holds, one ``write`` per queue (``write_many``)."""
        if not self._held:
            return
        held, self._held, self._held_units = self._held, [], 0
        group = np.concatenate([h[0] for h in held])
        order = np.argsort(group, kind="stable")  # put order kept within a queue
        group = group[order]
        starts = np.r_[0, np.flatnonzero(np.diff(group)) + 1]
        names = list(self._topic_no)
        keys = [(names[t], q) for t, q in map(queue_of_key, group[starts].tolist())]
        self.write_many(keys, np.r_[starts, group.size],
                        np.concatenate([h[1] for h in held])[order],
                        np.concatenate([h[2] for h in held])[order])

    def write(self, topic: str, queue_id: int, queue_offsets: np.ndarray, units: np.ndarray,
              after: int | None = None) -> int:
        """Write units at ``queue_offsets`` into queue (``topic``, ``queue_id``), those below
        ``after`` skipped (as ``write_consume_queue_files``; None: below ``ends``, what this
        writer wrote to the queue before); the number written."""
        qdir, made = self._queue_dir(topic, queue_id)
        start = self.ends.get((topic, queue_id), 0) if after is None else after
        n = write_consume_queue_files(qdir, queue_offsets, units, self.file_size, start, made)
        if n:
            self.ends[(topic, queue_id)] = int(queue_offsets[-1]) + 1
        return n

    def write_many(self, keys: Sequence[tuple[str, int]], bounds: np.ndarray,
                   queue_offsets: np.ndarray, units: np.ndarray,
                   after: Sequence[int] | None = None) -> list[int]:
        """``write`` of units ``[bounds[i], bounds[i + 1])`` of ``queue_offsets`` and ``units``
        into queue ``keys[i]`` (distinct queues, those of a topic best next to each other),
        those below ``after[i]`` skipped (None: below ``ends``): the same files and errors (the
        first in ``keys`` order when several threads fail), written by ``threads`` threads, each
        a run of whole topics. The number written per queue."""
        bounds = np.asarray(bounds, dtype=np.int64)
        if not keys:
            return []
        # a queue whose offsets leave a gap takes the checked path, which names the gap
        step = np.flatnonzero(np.diff(queue_offsets) != 1) + 1
        gapped = np.zeros(len(keys), dtype=bool)
        gapped[np.searchsorted(bounds, step[~np.isin(step, bounds)], side="right") - 1] = True
        data = memoryview(units.astype(CQ_UNIT_DTYPE, copy=False).tobytes())
        lows, highs = bounds[:-1].tolist(), bounds[1:].tolist()
        firsts = queue_offsets[bounds[:-1].clip(max=max(queue_offsets.size - 1, 0))].tolist()
        written = [0] * len(keys)
        failed: list[bool] = []

        def run(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                if failed:
                    return
                topic, qid = keys[i]
                start = self.ends.get(keys[i], 0) if after is None else after[i]
                a, b = lows[i], highs[i]
                qdir, made = self._queue_dir(topic, qid)
                if made and a < b and not gapped[i] and (firsts[i] == start or start == 0 <= firsts[i]):
                    _write_units(qdir, firsts[i] * CQ_UNIT_SIZE,
                                 data[a * CQ_UNIT_SIZE:b * CQ_UNIT_SIZE], self.file_size, True,
                                 True)
                    n = b - a
                else:
                    n = write_consume_queue_files(qdir, queue_offsets[a:b], units[a:b],
                                                  self.file_size, start, made)
                if n:
                    self.ends[keys[i]] = int(queue_offsets[b - 1]) + 1
                written[i] = n

        def guarded(lo: int, hi: int) -> None:
            try:
                run(lo, hi)
            except BaseException:
                failed.append(True)
                raise
        cuts = self._runs(keys)
        if len(cuts) == 2:
            run(0, len(keys))
            return written
        self._base_dir()  # checked once, before the threads
        with ThreadPoolExecutor(len(cuts) - 1) as pool:
            futures = [pool.submit(guarded, lo, hi) for lo, hi in zip(cuts[:-1], cuts[1:])]
        for f in futures:
            f.result()
        return written

    def _runs(self, keys: Sequence[tuple[str, int]]) -> list[int]:
        """Where the queues ``keys`` are cut into runs of whole topics, one per thread."""
        n = min(self.threads, len(keys) // self.THREAD_QUEUES)
        cuts = [0]
        for t in range(1, n):
            i = max(cuts[-1] + 1, len(keys) * t // n)
            while i < len(keys) and keys[i][0] == keys[i - 1][0]:
                i += 1
            if i < len(keys):
                cuts.append(i)
        return [*cuts, len(keys)]

    def _queue_dir(self, topic: str, queue_id: int) -> tuple[str, bool]:
        """The queue's directory, and whether this writer made it (new, empty when made)."""
        known = self._dirs.get((topic, queue_id))
        if known is not None:
            return known, False
        tdir = self._topic_dir(topic)
        qdir = f"{tdir}/{check_queue_id(queue_id, tdir)}"
        try:
            os.mkdir(qdir)
            made = True
        except FileExistsError:
            qdir, made = str(queue_dir(self.root, topic, queue_id, self.within)), False
        except OSError as e:
            raise disk_error(e, qdir, "making a ConsumeQueue directory") from None
        self._dirs[(topic, queue_id)] = qdir
        return qdir, made

    def _topic_dir(self, topic: str) -> str:
        """The topic's directory, made when missing (with ``<root>/<within>``)."""
        tdir = self._topics.get(topic)
        if tdir is not None:
            return tdir
        base = self._base_dir()
        tdir = os.path.join(base, check_topic_name(topic, Path(base)))
        try:
            try:
                os.mkdir(tdir)
            except FileNotFoundError:
                os.makedirs(base, exist_ok=True)
                os.mkdir(tdir)
        except FileExistsError:
            tdir = str(topic_dir(self.root, topic, self.within))
        except OSError as e:
            raise disk_error(e, tdir, "making a ConsumeQueue directory") from None
        self._topics[topic] = tdir
        return tdir

    def _base_dir(self) -> str:
        """``<root>/<within>``, checked (``paths.resolve_inside``) the first time."""
        if self._base is None:
            self._base = str(resolve_inside(self.root, self.root / self.within))
        return self._base
