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


def _units(offsets: npt.NDArray[np.int64], sizes: npt.NDArray[np.int64],
           tags_code: npt.NDArray[np.int64], rows: npt.NDArray[np.intp]) -> np.ndarray:
    """The ConsumeQueue units (``CQ_UNIT_DTYPE``) of records ``rows`` of the columns."""
    units = np.empty(rows.size, dtype=codec.CQ_UNIT_DTYPE)
    units["commitlog_offset"] = offsets[rows]
    units["size"] = sizes[rows]
    units["tags_code"] = tags_code[rows]
    return units


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

    def settle(self) -> None:
        """Wait until the ``add_columns_behind`` dispatch running is done; raise its error."""
        if self._behind is not None:
            behind, self._behind = self._behind, None
            behind.result()

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
        raw, n = batch.raw, len(batch)
        queued = consume_queue and bool(cols.to_queue.any())
        ids, names = batch.topics if queued else (np.zeros(n, dtype=np.int64), [])
        self.add_columns(ids, names, raw[:, kr.QUEUE_ID], raw[:, kr.QUEUE_OFFSET], raw[:, kr.OFFSET],
                         raw[:, kr.SIZE], raw[:, kr.STORE_TS], cols.tags_code,
                         cols.to_queue if queued else np.zeros(n, dtype=np.bool_),
                         cols.key_hashes, cols.key_counts)

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
        self._add_columns(topic_ids, topics, queue_ids, queue_offsets, offsets, sizes, store_ts,
                          tags_code, to_queue, key_hashes, key_counts)

    def add_columns_behind(self, columns: Callable[[], tuple[Any, ...]]) -> None:
        """``add_columns(*columns())`` on the dispatcher's own thread, after everything queued
        before; returns at once (``flush`` settles before it flushes). ``columns`` must not
        change the store."""
        self.settle()
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="dispatch")
        self._behind = self._thread.submit(lambda: self._add_columns(*columns()))

    def _add_columns(self, topic_ids: npt.NDArray[np.int64], topics: Sequence[str],
                     queue_ids: npt.NDArray[np.int64], queue_offsets: npt.NDArray[np.int64],
                     offsets: npt.NDArray[np.int64], sizes: npt.NDArray[np.int64],
                     store_ts: npt.NDArray[np.int64], tags_code: npt.NDArray[np.int64],
                     to_queue: npt.NDArray[np.bool_], key_hashes: npt.NDArray[np.int32],
                     key_counts: npt.NDArray[np.int64]) -> None:
        self._apply()
        sel = np.flatnonzero(to_queue)
        if sel.size and self.files is not None:
            self.files.add(topics, topic_ids[sel], queue_ids[sel], queue_offsets[sel],
                           _units(offsets, sizes, tags_code, sel))
        elif sel.size:
            group = codec.queue_key(topic_ids[sel], queue_ids[sel])
            order = np.argsort(group, kind="stable")
            sel, group = sel[order], group[order]
            starts = np.concatenate(([0], np.flatnonzero(np.diff(group)) + 1))
            queues = [self._queue(topics[t], q) for t, q in
                      zip(topic_ids[sel[starts]].tolist(), queue_ids[sel[starts]].tolist())]
            # units of records that end at or before the end of a queue's last dispatched record
            # are there already (``put_many`` skips them): only queues with others are written
            done = np.array([cq.max_physic_offset for cq in queues], dtype=np.int64)
            ends = np.append(starts[1:], sel.size)
            fresh = offsets[sel] + sizes[sel] > np.repeat(done, ends - starts)
            for k in np.flatnonzero(np.logical_or.reduceat(fresh, starts)).tolist():
                rows = sel[starts[k]:ends[k]]
                queues[k].put_many(queue_offsets[rows], _units(offsets, sizes, tags_code, rows))
        if self.index is not None and key_hashes.size:
            self.index.add_hashes(key_hashes, np.repeat(offsets, key_counts),
                                  np.repeat(store_ts, key_counts))
        if offsets.size:
            self.last_timestamp = int(store_ts[-1])

    def apply(self) -> None:
        """Write every queued ConsumeQueue unit and index key."""
        self.settle()
        self._apply()

    def _apply(self) -> None:
        units, self._units, self._pending = self._units, {}, 0
        for key, flat in units.items():
            cols = np.array(flat, dtype=np.int64).reshape(-1, 4)
            rows = np.empty(len(cols), dtype=codec.CQ_UNIT_DTYPE)
            rows["commitlog_offset"], rows["size"], rows["tags_code"] = cols[:, 1], cols[:, 2], cols[:, 3]
            self._queue(*key).put_many(cols[:, 0], rows)
        if self.index is not None:
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
            if self._thread is not None:
                self._thread.shutdown()
                self._thread = None
            for cq in self.queues.values():
                cq.close()
            if self.index is not None:
                self.index.close()
