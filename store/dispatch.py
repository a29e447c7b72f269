"""What a stored record contributes to the ConsumeQueue and the index (RocketMQ's DispatchRequest).

One definition of the rules, used by the writer, by recovery and by the Spark rebuild.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from rocketlake.store import codec
from rocketlake.store.codec import Record
from rocketlake.store.config import StoreConfig
from rocketlake.store.consume_queue import ConsumeQueue, QueueFilesWriter
from rocketlake.store.index import IndexService
from rocketlake.store.kernels import dispatch as kd
from rocketlake.store.kernels import records as kr
from rocketlake.store.record_walk import DispatchColumns, RecordBatch
from rocketlake.store.topic_config import declare_topics, queue_counts


class DispatchRequest(NamedTuple):
    topic: str
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    to_consume_queue: bool
    index_keys: tuple[str, ...]


def goes_to_consume_queue(sys_flag: int) -> bool:
    """NOT and COMMIT records get a ConsumeQueue unit; PREPARED, ROLLBACK do not (docs/FORMAT.md §5)."""
    return sys_flag & codec.TRANSACTION_MASK in (codec.TRANSACTION_NOT, codec.TRANSACTION_COMMIT)


def served_as_such(topic: str) -> bool:
    """Whether consumers are served ``topic``'s ConsumeQueue records as messages of that topic:
    not the broker's own copies and bookkeeping (SCHEDULE_TOPIC_XXXX copies before delivery,
    transaction half and op records, 5.x's ``rmq_sys_`` topics such as the timer wheel). A delayed
    or committed message is served under its real topic by a record of its own."""
    return (topic not in (codec.SCHEDULE_TOPIC, codec.TRANS_HALF_TOPIC, codec.TRANS_OP_HALF_TOPIC)
            and not topic.startswith(codec.SYSTEM_TOPIC_PREFIX))


def index_keys(topic: str, props: dict[str, str], sys_flag: int) -> tuple[str, ...]:
    """Index keys "topic#key": UNIQ_KEY, then each KEYS token, none for ROLLBACK (docs/FORMAT.md §7)."""
    if sys_flag & codec.TRANSACTION_MASK == codec.TRANSACTION_ROLLBACK:
        return ()
    return codec.index_keys(topic, props.get(codec.PROPERTY_UNIQ_KEY), props.get(codec.PROPERTY_KEYS))


def delay_of(props: dict[str, str], delay_levels_ms: tuple[int, ...]) -> int:
    """Delay in ms of a SCHEDULE_TOPIC_XXXX record's DELAY level (clamped), 0 when none."""
    try:
        level = int(props.get(codec.PROPERTY_DELAY, "0"))
    except ValueError:
        return 0
    level = min(level, len(delay_levels_ms))
    return delay_levels_ms[level - 1] if level > 0 else 0


def cq_tags_code(topic: str, props: dict[str, str], store_ts: int,
                 delay_levels_ms: tuple[int, ...]) -> int:
    """tagsCode: the delivery time for a delayed record with a DELAY level, else hash of TAGS."""
    if topic == codec.SCHEDULE_TOPIC:
        delay = delay_of(props, delay_levels_ms)
        if delay:
            return store_ts + delay
    return codec.tags_code(props.get(codec.PROPERTY_TAGS))


def from_record(rec: Record, delay_levels_ms: tuple[int, ...]) -> DispatchRequest:
    """The dispatch of a decoded CommitLog record."""
    props = rec.properties
    return DispatchRequest(rec.topic, rec.queue_id, rec.queue_offset, rec.commitlog_offset,
                           rec.size, cq_tags_code(rec.topic, props, rec.store_timestamp, delay_levels_ms),
                           rec.store_timestamp, goes_to_consume_queue(rec.sys_flag),
                           index_keys(rec.topic, props, rec.sys_flag))


class Planned(NamedTuple):
    """What dispatching records given as columns writes, worked out from the columns alone
    (``plan``: no store state, so a walk thread can, ``RecordBatch.prepare``)."""
    #: names of the topic ids in ``unit_topics`` / ``queues``
    topics: Sequence[str]
    #: the units of the records that get one, and their queue offsets: grouped by queue (queue
    #: ``k``'s are ``starts[k]:ends[k]``, in CommitLog order) when planned ``by_queue``, else in
    #: CommitLog order with each one's topic id and queue id
    units: np.ndarray
    queue_offsets: npt.NDArray[np.int64]
    unit_topics: npt.NDArray[np.int64]
    unit_queues: npt.NDArray[np.int64]
    #: by queue: (topic id, queue id) of each queue, where its units start and end, and the
    #: CommitLog end of its last record (a queue whose last dispatched record ends there or
    #: later has them all)
    queues: list[tuple[int, int]]
    starts: list[int]
    ends: list[int]
    last_end: npt.NDArray[np.int64]
    #: the index keys: hash, CommitLog offset and store time of each key's record
    key_hashes: npt.NDArray[np.int32]
    key_offsets: npt.NDArray[np.int64]
    key_ts: npt.NDArray[np.int64]
    #: store time of the last record, None when there are none
    last_ts: int | None
    by_queue: bool


def plan(topic_ids: npt.NDArray[np.int64], topics: Sequence[str], queue_ids: npt.NDArray[np.int64],
         queue_offsets: npt.NDArray[np.int64], offsets: npt.NDArray[np.int64],
         sizes: npt.NDArray[np.int64], store_ts: npt.NDArray[np.int64],
         tags_code: npt.NDArray[np.int64], to_queue: npt.NDArray[np.bool_],
         key_hashes: npt.NDArray[np.int32], key_counts: npt.NDArray[np.int64], *,
         by_queue: bool = True) -> Planned:
    """``Planned`` of records given as ``Dispatcher.add_columns`` takes them; ``by_queue``: the
    units grouped by queue (``Dispatcher`` writes them into its queues), else left in CommitLog
    order (into a ``QueueFilesWriter``)."""
    no = np.zeros(0, dtype=np.int64)
    offsets, sizes, queue_ids, queue_offsets, store_ts, topic_ids, tags_code = (
        np.ascontiguousarray(c, dtype=np.int64)
        for c in (offsets, sizes, queue_ids, queue_offsets, store_ts, topic_ids, tags_code))
    rows, units, unit_queue_offsets, first, last_end = kd.plan_units(
        offsets, sizes, queue_ids, queue_offsets, topic_ids, tags_code,
        np.ascontiguousarray(to_queue, dtype=np.bool_), by_queue)
    queues = list(zip(topic_ids[rows[first]].tolist(), queue_ids[rows[first]].tolist()))
    key_offsets, key_ts = kd.key_columns(offsets, store_ts, key_counts, key_hashes.size)
    return Planned(topics, units.view(codec.CQ_UNIT_DTYPE), unit_queue_offsets,
                   no if by_queue else topic_ids[rows], no if by_queue else queue_ids[rows],
                   queues, first.tolist(), first[1:].tolist() + ([rows.size] if first.size else []),
                   last_end, key_hashes, key_offsets, key_ts,
                   int(store_ts[-1]) if store_ts.size else None, by_queue)


def plan_batch(batch: RecordBatch, cols: DispatchColumns, consume_queue: bool = True,
               by_queue: bool = True) -> Planned:
    """``plan`` of a walked batch (``cols``: its dispatch columns): the units of its records
    that go to a ConsumeQueue (unless not ``consume_queue``) and its index keys."""
    n = len(batch)
    queued = consume_queue and bool(cols.to_queue.any())
    ids, names = batch.topics if queued else (np.zeros(n, dtype=np.int64), [])
    col = batch.column
    return plan(ids, names, col(kr.QUEUE_ID), col(kr.QUEUE_OFFSET), col(kr.OFFSET), col(kr.SIZE),
                col(kr.STORE_TS), cols.tags_code, cols.to_queue if queued else np.zeros(n, dtype=np.bool_),
                cols.key_hashes, cols.key_counts, by_queue=by_queue)


class Dispatcher:
    """Applies dispatches to a store's ConsumeQueues and index (RocketMQ's reput step).

    Dispatches queue up in flat per-queue lists and are applied in vectorised batches, as
    RocketMQ's reput thread applies them after the CommitLog write. ``apply()`` makes everything
    queued visible; readers call it. ``add_columns_behind`` dispatches on the dispatcher's own
    thread: every other method first waits for it to end (``settle``).
    """

    BATCH = 4096

    def __init__(self, root: Path, cfg: StoreConfig, queues: dict[tuple[str, int], ConsumeQueue],
                 index: IndexService | None, files: QueueFilesWriter | None = None) -> None:
        """``files``: write the units of ``add_columns`` into new ConsumeQueue files with plain
        writes (a rebuild's output) instead of through ``queues``."""
        self.root, self.cq_file_size = Path(root), cfg.mappedFileSizeConsumeQueue
        self.queues, self.index, self.files = queues, index, files
        self.last_timestamp = 0
        self._units: dict[tuple[str, int], list[int]] = {}  # queue_offset, offset, size, tags_code ...
        self._pending = 0
        self._thread: ThreadPoolExecutor | None = None  # runs ``add_columns_behind``
        self._behind: Future[None] | None = None
        self._index_thread: ThreadPoolExecutor | None = None  # places index keys (``_indexing``)
        self._index_work: list[Future[None]] = []
        self._index_error: BaseException | None = None

    def settle(self) -> None:
        """Wait until the ``add_columns_behind`` dispatch running and the index work queued are
        done; raise their error."""
        behind, self._behind = self._behind, None
        try:
            if behind is not None:
                behind.result()
        finally:
            self._settle_index()

    def _settle_index(self) -> None:
        """Wait until the index work queued on the index thread is done; raise its error."""
        work, self._index_work = self._index_work, []
        for done in work:
            done.result()
        if (error := self._index_error) is not None:
            self._index_error = None
            raise error

    def queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The (topic, queue_id) ConsumeQueue, created when new (``store.paths`` checks the names)."""
        self.settle()
        return self._queue(topic, queue_id)

    def _queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            cq = self.queues[(topic, queue_id)] = ConsumeQueue(self.root, topic, queue_id,
                                                               self.cq_file_size)
        return cq

    def reserve(self, topics: Sequence[str], queue_ids: Sequence[int], to_queue: Sequence[bool],
                next_offsets: dict[tuple[str, int], int], index_keys: Sequence[tuple[str, ...]],
                timestamps: Sequence[int]) -> None:
        """Create now every ConsumeQueue and index file that the queued dispatches and those of
        the records about to be written (columns as for ``add_many``; their queue offsets start
        at ``next_offsets``, the CommitLog's table) will write to. Applying them then never
        creates a file, so it cannot fail on a full disk: this raises StoreFullError instead,
        before the caller writes anything."""
        counts: dict[tuple[str, int], int] = {}
        for t, q, queued in zip(topics, queue_ids, to_queue):
            if queued:
                counts[(t, q)] = counts.get((t, q), 0) + 1
        self.reserve_counts(counts, next_offsets, [t for ks, t in zip(index_keys, timestamps) for _ in ks])

    def reserve_counts(self, counts: dict[tuple[str, int], int], next_offsets: dict[tuple[str, int], int],
                       key_ts: Sequence[int] | npt.NDArray[np.int64]) -> None:
        """``reserve`` for ``counts[(topic, queue_id)]`` new units per queue and new index keys of
        messages stored at ``key_ts`` (one entry per key). The topics of queues new to the store
        are declared in `config/topics.json` first (``store.topic_config``): a queue is never on
        disk, nor a record of it in the CommitLog, before a broker would serve it."""
        self.settle()
        new = [key for key in counts if key not in self.queues]
        if new:
            declare_topics(self.root, queue_counts(new))
        for key, n in counts.items():
            cq = self.queues.get(key)
            if cq is not None:
                cq.reserve(next_offsets.get(key, 0), n)
                continue
            cq = ConsumeQueue(self.root, key[0], key[1], self.cq_file_size)
            try:
                cq.reserve(next_offsets.get(key, 0), n)
            finally:
                if cq.files.files:  # a queue is known once it has a file
                    self.queues[key] = cq
        if self.index is not None:
            self.index.reserve(key_ts)

    def __call__(self, req: DispatchRequest) -> None:
        """Queue one dispatch."""
        self.add_many((req.topic,), (req.queue_id,), (req.queue_offset,), (req.commitlog_offset,),
                      (req.size,), (req.tags_code,), (req.store_timestamp,), (req.to_consume_queue,),
                      (req.index_keys,))

    def add_many(self, topics: Sequence[str], queue_ids: Sequence[int], queue_offsets: Sequence[int],
                 offsets: Sequence[int], sizes: Sequence[int], tags_codes: Sequence[int],
                 timestamps: Sequence[int], to_queue: Sequence[bool],
                 index_keys: Sequence[tuple[str, ...]]) -> None:
        """Queue the dispatches of records given column by column, in CommitLog order."""
        self.settle()
        units = self._units
        for t, q, qo, off, size, tc, cq in zip(topics, queue_ids, queue_offsets, offsets, sizes,
                                               tags_codes, to_queue):
            if cq:
                u = units.get((t, q))
                if u is None:
                    u = units[(t, q)] = []
                u += (qo, off, size, tc)
        if self.index is not None:
            self.index.add_many(index_keys, offsets, timestamps)
        if timestamps:
            self.last_timestamp = timestamps[-1]
        self._pending += len(offsets)
        if self._pending >= self.BATCH:
            self._apply()

    def add_batch(self, batch: RecordBatch, cols: DispatchColumns, consume_queue: bool = True) -> None:
        """Dispatch a walked batch of records (after everything queued before it): the units of
        its records that go to a ConsumeQueue (unless not ``consume_queue``) and its index keys."""
        self.add_planned(plan_batch(batch, cols, consume_queue, self.files is None))

    def add_planned(self, planned: Planned) -> None:
        """Dispatch what ``plan`` worked out, after everything queued before it: planned by queue
        unless this dispatcher writes into a ``QueueFilesWriter`` (ValueError)."""
        if planned.by_queue != (self.files is None):
            raise ValueError("a plan by queue is for a dispatcher of ConsumeQueues, one in CommitLog "
                             "order for a QueueFilesWriter")
        self.settle()
        self._write(planned)

    def add_columns(self, topic_ids: npt.NDArray[np.int64], topics: Sequence[str],
                    queue_ids: npt.NDArray[np.int64], queue_offsets: npt.NDArray[np.int64],
                    offsets: npt.NDArray[np.int64], sizes: npt.NDArray[np.int64],
                    store_ts: npt.NDArray[np.int64], tags_code: npt.NDArray[np.int64],
                    to_queue: npt.NDArray[np.bool_], key_hashes: npt.NDArray[np.int32],
                    key_counts: npt.NDArray[np.int64]) -> None:
        """Dispatch records given as columns, in CommitLog order, after everything queued before
        them: a unit for each record ``to_queue`` (in queue ``topics[topic_ids[i]]``,
        ``queue_ids[i]``), and ``key_counts[i]`` index keys (``key_hashes``, flat, index hashes)."""
        self.settle()
        self._write(plan(topic_ids, topics, queue_ids, queue_offsets, offsets, sizes, store_ts,
                         tags_code, to_queue, key_hashes, key_counts, by_queue=self.files is None))

    def add_columns_behind(self, columns: Callable[[], tuple[Any, ...]]) -> None:
        """``add_columns(*columns())`` on the dispatcher's own thread, after everything queued
        before; returns at once (``flush`` settles before it flushes). ``columns`` must not
        change the store."""
        self.settle()
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="dispatch")
        self._behind = self._thread.submit(
            lambda: self._write(plan(*columns(), by_queue=self.files is None)))

    def _write(self, p: Planned) -> None:
        """Write a plan's units, and queue its index keys on the index thread."""
        self._apply()
        if p.units.size and self.files is not None:
            self.files.add(p.topics, p.unit_topics, p.unit_queues, p.queue_offsets, p.units)
        elif p.units.size:
            queues = [self._queue(p.topics[t], q) for t, q in p.queues]
            # units of records that end at or before the end of a queue's last dispatched record
            # are there already (``put_many`` skips them): only queues with others are written
            done = np.array([cq.max_physic_offset for cq in queues], dtype=np.int64)
            for k in np.flatnonzero(p.last_end > done).tolist():
                a, b = p.starts[k], p.ends[k]
                queues[k].put_many(p.queue_offsets[a:b], p.units[a:b])
        if self.index is not None and p.key_hashes.size:
            self._indexing(self.index.add_hashes, p.key_hashes, p.key_offsets, p.key_ts)
        if p.last_ts is not None:
            self.last_timestamp = p.last_ts

    def _indexing(self, fn: Callable[..., None], *args: Any) -> None:
        """``fn(*args)`` on the index thread, after the index work queued before (the index is
        placed beside the ConsumeQueue writes); ``settle`` waits for it. After a failure the
        rest is skipped: ``settle`` raises it."""
        if self._index_thread is None:
            self._index_thread = ThreadPoolExecutor(1, thread_name_prefix="dispatch-index")

        def run() -> None:
            if self._index_error is None:
                try:
                    fn(*args)
                except BaseException as e:
                    self._index_error = e

        self._index_work.append(self._index_thread.submit(run))

    def apply(self) -> None:
        """Write every queued ConsumeQueue unit and index key."""
        self.settle()
        self._apply()
        self._settle_index()

    def _apply(self) -> None:
        units, self._units, self._pending = self._units, {}, 0
        for key, flat in units.items():
            cols = np.array(flat, dtype=np.int64).reshape(-1, 4)
            rows = np.empty(len(cols), dtype=codec.CQ_UNIT_DTYPE)
            rows["commitlog_offset"], rows["size"], rows["tags_code"] = cols[:, 1], cols[:, 2], cols[:, 3]
            self._queue(*key).put_many(cols[:, 0], rows)
        if self.index is not None:
            if self._index_work:  # after the keys queued on the index thread
                self._indexing(self.index.build)
            else:
                self.index.build()

    def flush(self) -> None:
        self.apply()
        if self.files is not None:
            self.files.flush()
        for cq in list(self.queues.values()):
            cq.flush()
        if self.index is not None:
            self.index.flush()

    def close(self) -> None:
        try:
            self.settle()
        finally:
            for pool in (self._thread, self._index_thread):
                if pool is not None:
                    pool.shutdown()
            self._thread = self._index_thread = None
            for cq in self.queues.values():
                cq.close()
            if self.index is not None:
                self.index.close()
