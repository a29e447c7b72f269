"""CommitLog records as column batches: the compiled walk over mapped files, for every caller
that handles records by the thousand (recovery, verify, the rebuilds, the Spark scan).

A batch holds no Python object per record: its rows are int64 columns (``RECORD_DTYPE``: head
fields and the positions of body, topic and properties in the file's bytes), and ``dispatch()``
derives the ConsumeQueue and index columns in one more compiled pass.
"""
from __future__ import annotations

import dataclasses
import itertools
import queue
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt

from rocketlake.store.kernels import dispatch as kd
from rocketlake.store.kernels import records as kr
from rocketlake.store.mapped_file import release_pages

if TYPE_CHECKING:
    from rocketlake.store.mapped_file import MappedFile

#: rows per batch: bounds memory (each row is 184 bytes) whatever the file size
BATCH_ROWS = 1 << 16
#: rows a walk thread walks and dispatches at a time: their bytes, rows and columns stay in the
#: core's cache from the walk to the dispatch columns and the topic numbering
CHUNK_ROWS = 1 << 11
#: fields a walk with dispatch copies into contiguous columns (``RecordBatch.column``) while a
#: chunk's rows are in the cache: what planning the dispatch reads (``dispatch.plan_batch``)
PLAN_FIELDS = (kr.OFFSET, kr.SIZE, kr.QUEUE_ID, kr.QUEUE_OFFSET, kr.STORE_TS)
_PLAN_FIELDS = np.array(PLAN_FIELDS, dtype=np.int64)
#: zero bytes skipped per numpy check before looking for a record start
_ZERO_CHUNK = 4 << 20
#: bytes searched for a record start before the zero check (records are mostly smaller)
_NEAR = 64 << 10
#: bytes of a file one walk thread takes at a time, threads walking at once, segments in flight
SEGMENT_BYTES = 8 << 20
WORKERS = 2
AHEAD = 4

Buffer = npt.NDArray[np.uint8]
T = TypeVar("T")


def find_record_start(buf: Buffer, base: int, lo: int, hi: int) -> int:
    """``kernels.records.find_start`` (the first record start in ``[lo, hi)``, ``hi`` when none),
    skipping runs of zero bytes with numpy first: a range past the end of the data is zeros, and
    numpy reads them many times faster than the byte-by-byte search, which runs only over the
    chunks that are not all zeros. The chunks searched in vain are released (``release_pages``):
    the preallocated rest of a mapped 1 GiB file does not stay resident. Within data a start is
    near: the first ``_NEAR`` bytes are searched first, without reading the zero check's chunk."""
    if (found := int(kr.find_start(buf, base, lo, min(hi, lo + _NEAR)))) < min(hi, lo + _NEAR):
        return found
    a = lo
    while a < hi:
        b = min(hi, (a // _ZERO_CHUNK + 1) * _ZERO_CHUNK)
        if buf[a:b].any():
            found = int(kr.find_start(buf, base, max(lo, a - 8), b))
            if found < b:
                return found
        release_pages(buf, a, b)
        a = b
    return hi


@dataclass(frozen=True)
class DispatchColumns:
    """What a batch's records contribute to the ConsumeQueues and the index."""
    tags_code: npt.NDArray[np.int64]
    to_queue: npt.NDArray[np.bool_]
    #: index keys per record (UNIQ_KEY first, then KEYS tokens), and their hashes, flat
    key_counts: npt.NDArray[np.int64]
    key_hashes: npt.NDArray[np.int32]


@dataclass(frozen=True)
class RecordBatch:
    """Valid records of one CommitLog file, in order."""
    buf: Buffer                      # the whole file's bytes (a view on its mapping)
    raw: npt.NDArray[np.int64]       # (n, NFIELDS)
    #: ``dispatch()``'s columns by delay levels, once computed
    _dispatched: dict[tuple[int, ...], DispatchColumns] = field(
        default_factory=dict, repr=False, compare=False)
    #: ``prepare()``'s results by function, once computed
    _prepared: dict[Callable[[RecordBatch], Any], Any] = field(
        default_factory=dict, repr=False, compare=False)
    #: ``column()``s copied out of ``raw`` by the walk (``PLAN_FIELDS``), by field
    _columns: dict[int, npt.NDArray[np.int64]] = field(default_factory=dict, repr=False, compare=False)

    def without_rows(self) -> RecordBatch:
        """This batch without its rows (``raw`` of shape ``(n, 0)``: numpy's reads of a field
        raise IndexError, ``dispatch`` for other delay levels ValueError), keeping what was
        computed from them: its dispatch columns, ``prepare`` results, ``topics`` and walked
        ``column``s (``Walk(keep_rows=False)``)."""
        kept = dataclasses.replace(self, raw=np.empty((len(self), 0), dtype=np.int64))
        if "topics" in self.__dict__:  # the cached_property's value
            kept.__dict__["topics"] = self.__dict__["topics"]
        return kept

    @property
    def rows(self) -> npt.NDArray[np.void]:
        """The records as a structured array (``kernels.records.RECORD_DTYPE``)."""
        return self.raw.view(kr.RECORD_DTYPE).reshape(-1)

    def __len__(self) -> int:
        return int(self.raw.shape[0])

    def column(self, field: int) -> npt.NDArray[np.int64]:
        """One int64 column by its ``kernels.records`` index (``kr.QUEUE_ID``, ...), read-only:
        contiguous when the walk copied it (``PLAN_FIELDS``), else a view of ``raw``."""
        col: npt.NDArray[np.int64] | None = self._columns.get(field)
        return self.raw[:, field] if col is None else col

    def strings(self, start: int, length: int) -> list[str]:
        """The UTF-8 strings at columns ``start`` / ``length`` (topic, properties: the walk checked
        they decode)."""
        b, s, n = self.buf, self.raw[:, start].tolist(), self.raw[:, length].tolist()
        return [b[i:i + k].tobytes().decode() for i, k in zip(s, n)]

    @cached_property
    def topics(self) -> tuple[npt.NDArray[np.int64], list[str]]:
        """(topic id per record, topic names): ``names[ids[i]]`` is record i's topic."""
        return self._topic_names(*kd.topic_ids(self.buf, self.raw))

    def _topic_names(self, ids: npt.NDArray[np.int64],
                     first: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], list[str]]:
        """``topics`` of the numbering ``kernels.dispatch.topic_ids`` returns."""
        start, length = self.raw[first, kr.TOPIC_START].tolist(), self.raw[first, kr.TOPIC_LEN].tolist()
        return ids, [self.buf[a:a + n].tobytes().decode() for a, n in zip(start, length)]

    def dispatch(self, delay_levels_ms: tuple[int, ...]) -> DispatchColumns:
        """ConsumeQueue and index columns of the records (``store.dispatch``'s rules), computed
        once per ``delay_levels_ms``."""
        if (done := self._dispatched.get(delay_levels_ms)) is None:
            done = self._dispatched[delay_levels_ms] = self._dispatch(delay_levels_ms)
        return done

    def prepare(self, fn: Callable[[RecordBatch], T]) -> T:
        """``fn(self)``, computed once per ``fn`` (a walk given ``prepare=fn`` computes it in its
        threads, beside the caller's work on the batches before)."""
        if fn not in self._prepared:
            self._prepared[fn] = fn(self)
        done: T = self._prepared[fn]
        return done

    def _dispatch(self, delay_levels_ms: tuple[int, ...]) -> DispatchColumns:
        if self.raw.shape[1] != kr.NFIELDS:  # the kernels check no bounds
            raise ValueError("this batch was handed over without its rows (Walk(keep_rows=False)): "
                             "its dispatch columns are those the walk computed")
        into = _Dispatching(len(self), delay_levels_ms)
        for a in range(0, len(self), CHUNK_ROWS):
            into.rows(self.buf, self.raw, a, min(a + CHUNK_ROWS, len(self)))
        self._walked(into)
        return into.columns(len(self))

    def _walked(self, into: _Dispatching) -> None:
        """Keep what ``into`` (all rows filled) derived besides the dispatch columns: ``topics``
        and the ``PLAN_FIELDS`` columns."""
        n = len(self)
        if "topics" not in self.__dict__:  # the cached_property's value
            self.__dict__["topics"] = self._topic_names(*into.topics(n))
        self._columns.update(into.plan_columns(n))


class _Dispatching:
    """``RecordBatch.dispatch``'s columns of up to ``n`` rows, its topic numbering
    (``kernels.dispatch.number_topics``) and its ``PLAN_FIELDS`` columns, filled a range of at
    most ``CHUNK_ROWS`` rows at a time (``kernels.dispatch.dispatch_rows``); the property spans
    the dispatch columns are derived from are those of the range only (one buffer, reused)."""

    def __init__(self, n: int, delay_levels_ms: tuple[int, ...]) -> None:
        self.delay_levels_ms = np.asarray(delay_levels_ms, dtype=np.int64)
        self.spans = np.empty((min(n, CHUNK_ROWS), len(kd.NAMES), 2), dtype=np.int64)
        self.tags_code = np.empty(n, dtype=np.int64)
        self.to_queue = np.empty(n, dtype=np.bool_)
        self.counts = np.empty(n, dtype=np.int64)
        self.hashes: list[npt.NDArray[np.int32]] = []
        self.ids, self.first = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        self.count = 0
        self.table_key, self.table_id = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        self.fields = np.empty((len(PLAN_FIELDS), n), dtype=np.int64)

    def rows(self, buf: Buffer, raw: npt.NDArray[np.int64], a: int, b: int) -> None:
        """Fill rows ``a`` to ``b`` with those of the walked ``raw`` (the rows after the ones
        filled; ``raw``'s rows before ``a`` are those filled), at most ``CHUNK_ROWS`` of them."""
        if b - a > len(self.spans):  # the kernel writes the range's spans unchecked
            raise ValueError(f"{b - a} rows at once; at most {len(self.spans)}")
        hashes, self.count, self.table_key, self.table_id = kd.dispatch_rows(
            buf, raw, a, b, self.delay_levels_ms, self.spans, self.tags_code, self.to_queue, self.counts,
            self.ids, self.first, self.count, self.table_key, self.table_id, _PLAN_FIELDS, self.fields)
        self.hashes.append(hashes)

    def topics(self, n: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """``kernels.dispatch.topic_ids`` of the first ``n`` rows (all filled)."""
        return self.ids[:n], self.first[:self.count]

    def plan_columns(self, n: int) -> dict[int, npt.NDArray[np.int64]]:
        """The ``PLAN_FIELDS`` columns of the first ``n`` rows (all filled), read-only."""
        self.fields.flags.writeable = False
        return {f: self.fields[k, :n] for k, f in enumerate(PLAN_FIELDS)}

    def columns(self, n: int) -> DispatchColumns:
        """The columns of the first ``n`` rows (all filled)."""
        hashes = self.hashes[0] if len(self.hashes) == 1 else np.concatenate(
            self.hashes or [np.zeros(0, dtype=np.int32)])
        return DispatchColumns(self.tags_code[:n], self.to_queue[:n], self.counts[:n], hashes)


class Walk:
    """Batches of valid records from ``start`` to the end of valid data (or ``stop_at``).

    Afterwards ``end`` is where valid data ended (where the next record would start) and
    ``error`` says why when it ended at something other than zeros: the rules and messages of
    ``commitlog.RecordWalk``, without a Python object per record. ``check_names`` also ends valid data
    at a record whose topic or queue id no writer could have stored (recovery's rule).
    ``delay_levels_ms``, when given, has each batch's ``dispatch`` columns and ``topics``
    computed by the walk's threads too, beside the caller's work on the batches before, and
    then ``prepare`` (``RecordBatch.prepare``), when given: it must only read what the caller
    may change meanwhile. Without ``keep_rows`` (and with ``delay_levels_ms``), the batches come
    ``without_rows``: the walk threads reuse their row buffers (184 bytes a record) instead of
    handing a new one over with each batch, for a caller that needs only what is computed from
    them (recovery's re-dispatch); ``prepare`` must then keep no view of the rows (of ``raw``,
    or a ``column`` not in ``PLAN_FIELDS``): the next batch's rows overwrite them.
    """

    def __init__(self, files: list[tuple[int, int, Buffer]], start: int, stop_at: int,
                 check_crc: bool, check_names: bool = False, batch_rows: int = BATCH_ROWS,
                 delay_levels_ms: tuple[int, ...] | None = None, segment: int = SEGMENT_BYTES,
                 prepare: Callable[[RecordBatch], Any] | None = None, keep_rows: bool = True) -> None:
        """``files``: (start offset, size, bytes) of each CommitLog file, in order."""
        if not keep_rows and delay_levels_ms is None:
            raise ValueError("a walk that drops its rows must compute the dispatch columns")
        self.files, self.end, self.stop_at = files, start, stop_at
        self.check_crc, self.check_names, self.batch_rows = check_crc, check_names, batch_rows
        self.delay_levels_ms, self.segment, self.prepare = delay_levels_ms, segment, prepare
        self.keep_rows = keep_rows
        #: row buffers free for reuse (``keep_rows`` False): at most one per walk thread
        self._free_rows: queue.SimpleQueue[npt.NDArray[np.int64]] = queue.SimpleQueue()
        self.error: str | None = None
        self.status = kr.LIMIT

    def _file(self, offset: int) -> tuple[int, int, Buffer] | None:
        for f in self.files:
            if f[0] <= offset < f[0] + f[1]:
                return f
        return None

    def __iter__(self) -> Iterator[RecordBatch]:
        """The batches, in order. Each file's range is cut into segments of ``segment`` bytes,
        each starting at the first record start in its first ``segment`` bytes
        (``find_record_start``); ``WORKERS`` threads walk segments ahead of the caller, at most
        ``AHEAD`` at a time (the kernels release the GIL, so they run beside each other and
        beside the caller's work). A segment's records are taken only when the data taken so far
        ends exactly where it starts (the segment before ended at its limit): so the batches are
        the sequential walk's records, and where a cut guessed wrong (a start found inside a
        record, or past the end of the data) the segments after are dropped and the walk goes
        on from where the data taken ends. The pages of a batch are released (``release_pages``)
        once the caller has asked for the batch after the next, and the last ones when the
        iteration ends: the walk's resident set stays a few segments, whatever the size and
        number of the files. ``end``, ``status`` and ``error`` are final
        once iteration ends."""
        walked: deque[tuple[Buffer, int, int]] = deque()  # batches handed over, not released
        with ThreadPoolExecutor(WORKERS, thread_name_prefix="record-walk") as pool:
            ahead: deque[Future[_Segment]] = deque()
            try:
                while self.end < self.stop_at and (f := self._file(self.end)) is not None:
                    start, size, buf = f
                    lo, hi = self.end - start, min(size, self.stop_at - start)
                    cuts = iter(range(lo, hi, self.segment))
                    for cut in itertools.islice(cuts, AHEAD):
                        ahead.append(pool.submit(self._segment, buf, start, lo, cut, hi))
                    while ahead:
                        seg = ahead.popleft().result()
                        if seg.start != self.end - start:  # a wrong cut: go on from the end
                            break
                        self.end, self.status = start + seg.end, seg.status
                        for batch in seg.batches:
                            offsets, sizes = batch.column(kr.OFFSET), batch.column(kr.SIZE)
                            walked.append((buf, int(offsets[0]) - start,
                                           int(offsets[-1] + sizes[-1]) - start))
                            yield batch
                            # the caller asks for the next one: it is done with the one before
                            if len(walked) > 2:
                                release_pages(*walked.popleft())
                        if seg.status != kr.LIMIT or seg.end >= hi:
                            break
                        if (more := next(cuts, None)) is not None:
                            ahead.append(pool.submit(self._segment, buf, start, lo, more, hi))
                    for late in ahead:
                        late.cancel()
                    ahead.clear()
                    if self.status == kr.BLANK:
                        self.end = start + size
                    elif self.status == kr.ZEROS:
                        return
                    elif self.status != kr.LIMIT:
                        self.error = kr.describe(self.status, self.end, seg.detail, buf)
                        return
            finally:
                for late in ahead:
                    late.cancel()
                while walked:  # the last batches: the walk of the next file has a deque of its own
                    release_pages(*walked.popleft())

    def _segment(self, buf: Buffer, base: int, lo: int, cut: int, hi: int) -> _Segment:
        """Walk the segment cut at ``cut`` of the range ``[lo, hi)`` of one file (``buf``, at
        CommitLog offset ``base``): from its start (``lo`` for the first) until a record starts
        at or past the next segment's start, or valid data ends."""
        first = cut == lo
        begin = lo if first else find_record_start(buf, base, cut, min(cut + self.segment, hi))
        nxt = cut + self.segment
        limit = hi if nxt >= hi else find_record_start(buf, base, nxt, min(nxt + self.segment, hi))
        if limit == min(nxt + self.segment, hi):
            limit = hi  # no start in the next segment's first bytes: walk on past it
        batches: list[RecordBatch] = []
        detail = np.zeros(3, dtype=np.int64)
        pos, status = begin, kr.LIMIT
        if not first and begin == min(cut + self.segment, hi):
            return _Segment(-1, [], begin, status, detail)  # no record starts in it
        levels = self.delay_levels_ms
        while pos < limit:
            out = self._rows()
            into = None if levels is None else _Dispatching(self.batch_rows, levels)
            n = 0
            # a chunk of rows at a time, dispatched while its bytes and rows are in the cache
            while n < self.batch_rows and pos < limit:
                rows = out[n:n + CHUNK_ROWS]
                k, pos, status = kr.walk(buf, base, pos, limit, self.check_crc, self.check_names, rows,
                                         detail)
                if into is not None and k:
                    into.rows(buf, out, n, n + k)
                n += k
                if status != kr.LIMIT:
                    break
            if n:
                batch = RecordBatch(buf, out[:n])
                if into is not None and levels is not None:  # compiled, off the caller's thread
                    batch._dispatched[levels] = into.columns(n)
                    batch._walked(into)
                    if self.prepare is not None:
                        batch.prepare(self.prepare)
                if not self.keep_rows:
                    batch = batch.without_rows()
                batches.append(batch)
            if not self.keep_rows:
                self._free_rows.put(out)
            if status != kr.LIMIT:
                break
        return _Segment(begin, batches, pos, status, detail)

    def _rows(self) -> npt.NDArray[np.int64]:
        """A buffer for a batch's rows: a free one when the batches drop theirs, else new."""
        if not self.keep_rows:
            try:
                return self._free_rows.get_nowait()
            except queue.Empty:
                pass
        return np.empty((self.batch_rows, kr.NFIELDS), dtype=np.int64)


@dataclass(frozen=True)
class _Segment:
    """One walked segment: where it started (-1: no record start in it), its batches, where its
    valid data ended, why (``kernels.records`` STATUS) and the walk's detail of that."""
    start: int
    batches: list[RecordBatch]
    end: int
    status: int
    detail: npt.NDArray[np.int64]


@dataclass(frozen=True)
class Gap:
    """Where valid CommitLog data stops inside a file: at ``offset`` (a CommitLog offset) no
    valid record starts; ``resumes_at`` is the next record start in the same file (None: none
    follows in it). ``status`` and ``why`` say what the walk met there (``kernels.records``
    STATUS; ``why`` None for zeros)."""
    offset: int
    resumes_at: int | None
    status: int
    why: str | None


@dataclass(frozen=True)
class FileEnd:
    """The end of one CommitLog file's walk: ``pos``, the position in ``file`` where its last
    run of valid data ended, and whether that run ended at damage (``kernels.records``
    ``status``)."""
    file: MappedFile
    pos: int
    status: int
    damaged: bool
