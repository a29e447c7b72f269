"""The CommitLog: validated messages (``message_encoder``) laid out as RocketMQ records in rolling,
pre-allocated files."""
from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from rocketlake.store import codec
from rocketlake.store.codec import (
    BLANK,
    BLANK_MAGIC,
    END_FILE_MIN_BLANK_LENGTH,
    HEAD,
    MAGIC_V1,
    Record,
)
from rocketlake.store.config import StoreConfig
from rocketlake.store.errors import CorruptRecordError
from rocketlake.store.kernels import encode as ke
from rocketlake.store.kernels import records as kr
from rocketlake.store.mapped_file import MappedFile, MappedFileQueue
from rocketlake.store.message_encoder import Prepared
from rocketlake.store.record_walk import FileEnd, Gap, RecordBatch, Walk, find_record_start

if TYPE_CHECKING:
    from rocketlake.store.table_encoder import EncodedTable

_QUEUE_AND_PHYSICAL_OFFSET = struct.Struct(">qq")  # QUEUEOFFSET @20 and PHYSICALOFFSET @28
#: rows from which ``append_table`` lays a table out on two threads (below, a thread costs more)
SPLIT_ROWS = 4096
#: the share of a split table's rows the caller lays out (the first ones), the writer thread the
#: rest. Measured: the later rows of a table cost the kernel about 1.5x per row (as much on
#: either thread), so the caller's half with its other work (queue offsets and files before,
#: results after) ends with the writer's half (benchmarks/RESULTS.md, "put_table (issue 14)")
CALLER_SHARE = 0.5
#: bytes of records the encode kernel lays out at a time into a thread's reused staging buffer (in
#: its core's cache), which one ``pwrite`` then copies into the file: storing through the mapping
#: takes a page fault per fresh page, which cost 3-5x ``pwrite``'s copy on a 2-core VM
#: (benchmarks/RESULTS.md, "put_table: the layout through a staging buffer")
STAGE_BYTES = 256 * 1024
_staging = threading.local()


def commitlog_file_queue(root: Path, cfg: StoreConfig) -> MappedFileQueue:
    """The (unloaded) queue of the CommitLog files of the store at ``root``: those of every
    directory ``StoreConfig.commitlog_dirs`` names, in offset order once loaded; new files go to
    the first. The one rule for where a store's CommitLog files are, library and Spark jobs alike."""
    first, *also = cfg.commitlog_dirs(Path(root))
    return MappedFileQueue(first, cfg.mappedFileSizeCommitLog, also=also)


class CommitLog:
    """Appends records, rolls files with a BLANK record, reads and walks records."""

    def __init__(self, root: Path, cfg: StoreConfig) -> None:
        self.file_size = cfg.mappedFileSizeCommitLog
        self.files = commitlog_file_queue(root, cfg)
        self.check_crc = cfg.checkCRCOnRecover
        #: (topic, queue_id) -> next queue offset (RocketMQ's topicQueueTable)
        self.next_queue_offsets: dict[tuple[str, int], int] = {}
        self._writer: ThreadPoolExecutor | None = None  # lays out the first half of a large ``append_table``

    # --- writing --------------------------------------------------------------------------------
    def _new_files(self, count: int) -> list[MappedFile]:
        """Create the next ``count`` files, all or none: when one cannot be created (a full disk
        raises StoreFullError) the ones created before it are deleted again."""
        made: list[MappedFile] = []
        try:
            for _ in range(count):
                last = self.files.last
                made.append(self.files.create(last.end if last is not None else 0))
        except BaseException:
            for _ in made:
                self.files.files.pop().destroy()
            raise
        return made

    def _close_file(self, mf: MappedFile) -> None:
        """End a file with a BLANK record: nothing more is written to it."""
        left = self.file_size - mf.wrote
        if left >= END_FILE_MIN_BLANK_LENGTH:
            BLANK.pack_into(mf.mm, mf.wrote, left, BLANK_MAGIC)
        mf.wrote = self.file_size

    def _roll(self) -> MappedFile:
        """Start the next file and close the current one with a BLANK record. The new file is
        created first, so a full disk fails the write before anything has changed."""
        prev = self.files.last
        mf, = self._new_files(1)
        if prev is not None:
            self._close_file(prev)
        return mf

    def _next_queue_offset(self, topic: str, queue_id: int, to_queue: bool) -> int:
        if not to_queue:
            return 0  # PREPARED / ROLLBACK take no queue offset
        key = (topic, queue_id)
        q = self.next_queue_offsets.get(key, 0)
        self.next_queue_offsets[key] = q + 1
        return q

    def append(self, p: Prepared, store_ts: int) -> tuple[int, int, int]:
        """Write one record at the end of the log -> (commitlog offset, queue offset, store time)."""
        mf = self.files.last
        if mf is None or mf.wrote + p.length + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            mf = self._roll()
        pos = mf.wrote
        qoff = self._next_queue_offset(p.topic, p.queue_id, p.to_queue)
        if p.store_ts is not None:
            store_ts = p.store_ts
        head = HEAD[(len(p.born_addr) == 16, len(p.store_addr) == 16)]
        mm, offset, body = mf.mm, mf.start + pos, p.body
        head.pack_into(mm, pos, p.length, MAGIC_V1, p.crc, p.queue_id, p.flag, qoff, offset,
                       p.sys_flag, store_ts if p.born_ts is None else p.born_ts, p.born_addr,
                       p.born_port, store_ts, p.store_addr, p.store_port, p.reconsume,
                       p.prepared_offset, len(body))
        b = pos + head.size
        e = b + len(body)
        mm[b:e] = body
        mm[e:pos + p.length] = p.tail
        mf.wrote = pos + p.length
        return offset, qoff, store_ts

    def append_raw(self, raw: bytes, topic: str, queue_id: int, to_queue: bool) -> tuple[int, int]:
        """Copy a record verbatim to the end of the log, rewriting only QUEUEOFFSET and
        PHYSICALOFFSET for its new place (and a 5.x property CRC, which covers them)
        -> (commitlog offset, queue offset)."""
        mf = self.files.last
        if mf is None or mf.wrote + len(raw) + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            mf = self._roll()
        pos = mf.wrote
        qoff = self._next_queue_offset(topic, queue_id, to_queue)
        mf.mm[pos:pos + len(raw)] = raw
        _QUEUE_AND_PHYSICAL_OFFSET.pack_into(mf.mm, pos + codec.OFF_QUEUE_OFFSET, qoff, mf.start + pos)
        codec.reseal_prop_crc(mf.mm, pos, len(raw))
        mf.wrote = pos + len(raw)
        return mf.start + pos, qoff

    def append_table(self, table: EncodedTable) -> npt.NDArray[np.int64]:
        """Write a validated table's records in order: create every file they need (a full disk
        fails the whole table here, the log as it was), take their queue offsets, then lay them
        out file by file with the encode kernel, each file but the last closed by a BLANK.
        ``BORN_TS`` / ``STORE_TS`` must be set. Returns the CommitLog offsets. A table of
        ``SPLIT_ROWS`` rows or more is laid out in two parts at once, the first
        (``CALLER_SHARE``) by the caller, the rest on a writer thread (the kernel releases the
        GIL): each record's place is known from the lengths before it, so the parts write
        disjoint bytes."""
        rows = table.rows
        lens = rows[:, ke.LENGTH]
        ends = np.cumsum(lens)
        current = self.files.last
        spans = self._spans(ends, current.wrote if current is not None else self.file_size)
        targets = [current] + self._new_files(len(spans) - 1)
        queues, counts, grouped, ranks = table.queue_groups
        firsts = np.empty(len(queues), dtype=np.int64)
        for k, (key, c) in enumerate(zip(queues, counts.tolist())):
            firsts[k] = self.next_queue_offsets.get(key, 0)
            self.next_queue_offsets[key] = int(firsts[k]) + c
        rows[grouped, ke.QUEUE_OFFSET] = np.repeat(firsts, counts) + ranks
        offsets = np.empty(len(table), dtype=np.int64)
        pieces: list[tuple[MappedFile, int, int]] = []  # (file, rows lo..hi) to lay out
        for mf, (i, j) in zip(targets, spans):
            if i < j:
                assert mf is not None  # only an empty log has no current file, and its span is empty
                base = int(ends[i - 1]) if i else 0
                offsets[i:j] = mf.start + mf.wrote - base + ends[i:j] - lens[i:j]
                pieces.append((mf, i, j))
        cut = int(len(table) * CALLER_SHARE) if len(table) >= SPLIT_ROWS else 0
        if cut:
            if self._writer is None:
                self._writer = ThreadPoolExecutor(1, thread_name_prefix="commitlog-write")
            laid = self._writer.submit(_lay_out, table, offsets,
                                       [(mf, max(i, cut), j) for mf, i, j in pieces if j > cut])
            try:
                _lay_out(table, offsets, [(mf, i, min(j, cut)) for mf, i, j in pieces if i < cut])
            finally:
                laid.result()
        else:
            _lay_out(table, offsets, pieces)
        for k, (mf, (i, j)) in enumerate(zip(targets, spans)):
            if i < j:
                assert mf is not None
                mf.wrote = int(offsets[j - 1] + lens[j - 1]) - mf.start
            if mf is not None and k + 1 < len(targets):
                self._close_file(mf)
        return offsets

    def _spans(self, ends: np.ndarray, wrote: int) -> list[tuple[int, int]]:
        """Split records ending at ``ends`` (relative to the batch start) into runs ``[i, j)`` per
        file: the first run goes to the current file, at ``wrote``, each later one to a new file.
        A record fits when it ends at least 8 bytes before the end of its file."""
        spans: list[tuple[int, int]] = []
        i = 0
        while i < ends.size:
            base = int(ends[i - 1]) if i else 0
            room = self.file_size - END_FILE_MIN_BLANK_LENGTH - wrote
            j = i + int(np.searchsorted(ends[i:] - base, room, side="right"))
            spans.append((i, j))
            i, wrote = j, 0
        return spans

    # --- reading --------------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.files.min_offset

    @property
    def max_offset(self) -> int:
        return self.files.max_offset

    def read(self, offset: int, check_crc: bool = False) -> Record:
        """Decode the record at ``offset``; CorruptRecordError if none is there."""
        buf, row = self.read_row(offset, check_crc)
        return codec.record_from_row(buf, row)

    def read_row(self, offset: int, check_crc: bool = False) -> tuple[np.ndarray, list[int]]:
        """``read`` without building the Record: (the bytes of the file holding it, its walked
        row: ``kernels.records.FIELDS`` values, positions in those bytes)."""
        mf = self.files.find(offset)
        if mf is None or offset - mf.start >= mf.wrote:
            raise CorruptRecordError(f"offset {offset}: outside the CommitLog "
                                     f"[{self.min_offset}, {self.max_offset})")
        buf = np.frombuffer(mf.mm, dtype=np.uint8)
        row = codec.decode_row(buf, offset - mf.start, mf.start, check_crc)
        if isinstance(row, int):
            raise CorruptRecordError(f"offset {offset}: BLANK end-of-file record, not a message")
        return buf, row

    def walk_records(self, start: int | None = None, check_crc: bool | None = None,
                     stop_at: int | None = None) -> RecordWalk:
        """Valid records from ``start`` (default: the first file) to the end of valid data."""
        return RecordWalk(self, self.min_offset if start is None else start,
                          self.check_crc if check_crc is None else check_crc,
                          self.max_offset if stop_at is None else stop_at)

    def walk(self, start: int | None = None, check_crc: bool | None = None,
             stop_at: int | None = None, check_names: bool = False,
             delay_levels_ms: tuple[int, ...] | None = None,
             prepare: Callable[[RecordBatch], Any] | None = None, keep_rows: bool = True) -> Walk:
        """``walk_records`` as column batches (``record_walk.Walk``): the same records, end and
        error (``delay_levels_ms``: each batch's dispatch columns computed by the walk too, then
        ``prepare``; without ``keep_rows``, batches without their rows)."""
        files = [(mf.start, mf.size, np.frombuffer(mf.mm, dtype=np.uint8)) for mf in self.files.files]
        return Walk(files, self.min_offset if start is None else start,
                    self.max_offset if stop_at is None else stop_at,
                    self.check_crc if check_crc is None else check_crc, check_names,
                    delay_levels_ms=delay_levels_ms, prepare=prepare, keep_rows=keep_rows)

    def walk_past_damage(self, past_zeros: bool = False, start: int | None = None,
                         stop: int | None = None, delay_levels_ms: tuple[int, ...] | None = None,
                         prepare: Callable[[RecordBatch], Any] | None = None,
                         ) -> Iterator[RecordBatch | Gap | FileEnd]:
        """Every valid record from ``start`` (a record start; default the first) up to
        ``stop`` (default the end of the last file), CRC checked, as batches in CommitLog order,
        walking on past damage: where a file's valid data stops at an invalid record, a ``Gap`` is
        yielded and the walk resumes at the next record start in that file
        (``find_record_start``); each file walked ends with a ``FileEnd``. ``past_zeros`` also
        treats zeros inside a file's data (valid data stopping at zeros with a record start after
        them) as a gap; without it zeros end the file's data. ``delay_levels_ms``, ``prepare``: as
        ``walk``'s."""
        files = self.files.files
        begin = self.min_offset if start is None else start
        end = (files[-1].end if files else 0) if stop is None else stop
        for mf in files:
            if mf.end <= begin or mf.start >= end:
                continue
            buf = np.frombuffer(mf.mm, dtype=np.uint8)
            at, limit = max(begin, mf.start), min(mf.end, end)
            while True:
                walk = self.walk(at, check_crc=True, stop_at=limit, delay_levels_ms=delay_levels_ms,
                                 prepare=prepare)
                yield from walk
                pos = walk.end - mf.start
                if walk.error is None and not (past_zeros and walk.status == kr.ZEROS):
                    break
                found = find_record_start(buf, mf.start, pos + 1, limit - mf.start)
                if found >= limit - mf.start and walk.error is None:
                    break  # zeros up to the limit: the end of the file's data
                resumes = mf.start + found if found < limit - mf.start else None
                yield Gap(mf.start + pos, resumes, walk.status, walk.error)
                if resumes is None:
                    break
                at = resumes
            yield FileEnd(mf, pos, walk.status, walk.error is not None)

    def flush(self) -> None:
        self.files.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.shutdown()
            self._writer = None
        self.files.close()



def _lay_out(table: EncodedTable, offsets: npt.NDArray[np.int64],
             pieces: list[tuple[MappedFile, int, int]]) -> None:
    """Encode rows ``lo..hi`` of each piece into its file, at their CommitLog ``offsets``: a run
    of rows at a time (those ending within the next ``STAGE_BYTES`` of the piece, at least one)
    into this thread's staging buffer, then into the file with one write (``MappedFile.writes``)."""
    lens = table.rows[:, ke.LENGTH]
    for mf, lo, hi in pieces:
        first = int(offsets[lo])
        ends = offsets[lo:hi] + lens[lo:hi] - first
        steps = np.arange(STAGE_BYTES, int(ends[-1]), STAGE_BYTES)
        i = lo
        with mf.writes() as write:
            for j in [*(lo + np.searchsorted(ends, steps, side="right")).tolist(), hi]:
                if j <= i:
                    continue  # a step inside a record begun before it
                at = int(offsets[i])
                n = int(offsets[j - 1] + lens[j - 1]) - at
                stage = _stage(n)
                table.encode_into(stage, 0, at, i, j)
                write(at - mf.start, stage[:n].data)
                i = j


def _stage(n: int) -> npt.NDArray[np.uint8]:
    """This thread's staging buffer, at least ``n`` bytes (kept for the thread's next table: a
    ``STAGE_BYTES`` buffer, or as long as the longest run of rows it held)."""
    buf: npt.NDArray[np.uint8] | None = getattr(_staging, "buf", None)
    if buf is None or buf.size < n:
        buf = _staging.buf = np.empty(max(n, STAGE_BYTES), dtype=np.uint8)
    return buf


class RecordWalk:
    """Iterates records; afterwards ``end`` is where valid data ended, and ``error`` says why
    when it ended at something other than zeros (a ``Walk``, one Record per row)."""

    def __init__(self, log: CommitLog, start: int, check_crc: bool, stop_at: int) -> None:
        self._walk = log.walk(start, check_crc, stop_at)

    @property
    def end(self) -> int:
        return self._walk.end

    @property
    def error(self) -> str | None:
        return self._walk.error

    def __iter__(self) -> Iterator[Record]:
        for batch in self._walk:
            buf = batch.buf
            for row in batch.raw.tolist():
                yield codec.record_from_row(buf, row)
