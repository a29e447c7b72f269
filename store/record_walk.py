"""CommitLog records as column batches: the compiled walk over mapped files, for every caller
that handles records by the thousand (recovery, verify, the rebuilds, the Spark scan).

A batch holds no Python object per record: its rows are int64 columns (``RECORD_DTYPE``: head
fields and the positions of body, topic and properties in the file's bytes), and ``dispatch()``
derives the ConsumeQueue and index columns in one more compiled pass.
"""
from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from rocketlake.store.kernels import dispatch as kd
from rocketlake.store.kernels import records as kr
from rocketlake.store.mapped_file import release_pages

if TYPE_CHECKING:
    from rocketlake.store.mapped_file import MappedFile

#: rows per batch: bounds memory (each row is 184 bytes) whatever the file size
BATCH_ROWS = 1 << 16
#: zero bytes skipped per numpy check before looking for a record start
_ZERO_CHUNK = 4 << 20

Buffer = npt.NDArray[np.uint8]


def find_record_start(buf: Buffer, base: int, lo: int, hi: int) -> int:
    """``kernels.records.find_start`` (the first record start in ``[lo, hi)``, ``hi`` when none),
    skipping runs of zero bytes with numpy first: a range past the end of the data is zeros, and
    numpy reads them many times faster than the byte-by-byte search, which runs only over the
    chunks that are not all zeros. The chunks searched in vain are released (``release_pages``):
    the preallocated rest of a mapped 1 GiB file does not stay resident."""
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
    #: (start, length) in the file's bytes of each property in ``kernels.dispatch.NAMES``
    property_spans: npt.NDArray[np.int64]


@dataclass(frozen=True)
class RecordBatch:
    """Valid records of one CommitLog file, in order."""
    buf: Buffer                      # the whole file's bytes (a view on its mapping)
    raw: npt.NDArray[np.int64]       # (n, NFIELDS)

    @property
    def rows(self) -> npt.NDArray[np.void]:
        """The records as a structured array (``kernels.records.RECORD_DTYPE``)."""
        return self.raw.view(kr.RECORD_DTYPE).reshape(-1)

    def __len__(self) -> int:
        return int(self.raw.shape[0])

    def column(self, field: int) -> npt.NDArray[np.int64]:
        """One int64 column by its ``kernels.records`` index (``kr.QUEUE_ID``, ...)."""
        col: npt.NDArray[np.int64] = self.raw[:, field]
        return col

    def strings(self, start: int, length: int) -> list[str]:
        """The UTF-8 strings at columns ``start`` / ``length`` (topic, properties: the walk checked
        they decode)."""
        b, s, n = self.buf, self.raw[:, start].tolist(), self.raw[:, length].tolist()
        return [b[i:i + k].tobytes().decode() for i, k in zip(s, n)]

    @cached_property
    def topics(self) -> tuple[npt.NDArray[np.int64], list[str]]:
        """(topic id per record, topic names): ``names[ids[i]]`` is record i's topic."""
        ids, first = kd.topic_ids(self.buf, self.raw)
        start, length = self.raw[first, kr.TOPIC_START].tolist(), self.raw[first, kr.TOPIC_LEN].tolist()
        return ids, [self.buf[a:a + n].tobytes().decode() for a, n in zip(start, length)]

    def dispatch(self, delay_levels_ms: tuple[int, ...]) -> DispatchColumns:
        """ConsumeQueue and index columns of the records (``store.dispatch``'s rules)."""
        n = len(self)
        spans = np.empty((n, len(kd.NAMES), 2), dtype=np.int64)
        kd.property_spans(self.buf, self.raw, spans)
        tags_code = np.empty(n, dtype=np.int64)
        to_queue = np.empty(n, dtype=np.bool_)
        counts = np.empty(n, dtype=np.int64)
        hashes = kd.dispatch_columns(self.buf, self.raw, spans, np.asarray(delay_levels_ms, dtype=np.int64),
                                     tags_code, to_queue, counts)
        return DispatchColumns(tags_code, to_queue, counts, hashes, spans)


class Walk:
    """Batches of valid records from ``start`` to the end of valid data (or ``stop_at``).

    Afterwards ``end`` is where valid data ended (where the next record would start) and
    ``error`` says why when it ended at something other than zeros: the rules and messages of
    ``commitlog.RecordWalk``, without a Python object per record. ``check_names`` also ends valid data
    at a record whose topic or queue id no writer could have stored (recovery's rule).
    """

    def __init__(self, files: list[tuple[int, int, Buffer]], start: int, stop_at: int,
                 check_crc: bool, check_names: bool = False, batch_rows: int = BATCH_ROWS) -> None:
        """``files``: (start offset, size, bytes) of each CommitLog file, in order."""
        self.files, self.end, self.stop_at = files, start, stop_at
        self.check_crc, self.check_names, self.batch_rows = check_crc, check_names, batch_rows
        self.error: str | None = None
        self.status = kr.LIMIT

    def _file(self, offset: int) -> tuple[int, int, Buffer] | None:
        for f in self.files:
            if f[0] <= offset < f[0] + f[1]:
                return f
        return None

    def __iter__(self) -> Iterator[RecordBatch]:
        """The batches, each walked on a helper thread while the caller handles the one before
        (the kernels release the GIL, so the two overlap); ``end``, ``status`` and ``error`` are
        final once iteration ends."""
        ready: queue.Queue[RecordBatch | BaseException | None] = queue.Queue(maxsize=1)
        stop = threading.Event()

        def hand_over(item: RecordBatch | BaseException | None) -> bool:
            while not stop.is_set():
                try:
                    ready.put(item, timeout=0.05)
                    return True
                except queue.Full:
                    continue
            return False

        def produce() -> None:
            try:
                for batch in self._batches():
                    if not hand_over(batch):
                        return
            except BaseException as e:  # handed to the caller's thread, raised there
                hand_over(e)
                return
            hand_over(None)

        helper = threading.Thread(target=produce, name="record-walk", daemon=True)
        helper.start()
        try:
            while (item := ready.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            helper.join()

    def _batches(self) -> Iterator[RecordBatch]:
        """The batches; the pages of a batch are released (``release_pages``) once the caller has
        taken the batch after it: the walk's resident set stays a few batches, whatever the size
        of the files."""
        detail = np.zeros(3, dtype=np.int64)
        walked: deque[tuple[Buffer, int, int]] = deque()
        while self.end < self.stop_at:
            f = self._file(self.end)
            if f is None:
                return
            start, size, buf = f
            out = np.empty((self.batch_rows, kr.NFIELDS), dtype=np.int64)
            pos = self.end - start
            n, end, status = kr.walk(buf, start, pos, min(size, self.stop_at - start),
                                     self.check_crc, self.check_names, out, detail)
            self.end, self.status = start + end, status
            if n:
                walked.append((buf, pos, end))
                yield RecordBatch(buf, out[:n])
                # handed over: the caller took the batch before it, so is done with the one before that
                if len(walked) > 2:
                    release_pages(*walked.popleft())
            if status == kr.BLANK:
                self.end = start + size
            elif status == kr.ZEROS:
                return
            elif status != kr.LIMIT:
                self.error = kr.describe(status, self.end, detail, buf)
                return


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
