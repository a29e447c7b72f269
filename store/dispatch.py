"""What a stored record contributes to the ConsumeQueue and the index (RocketMQ's DispatchRequest).

One definition of the rules, used by the writer, by recovery and by the Spark rebuild.
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np

from store import codec
from store.codec import Record
from store.config import StoreConfig
from store.consume_queue import ConsumeQueue
from store.index import IndexService


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
    """NOT and COMMIT records get a ConsumeQueue unit; PREPARED and ROLLBACK do not (SPEC §5)."""
    return sys_flag & codec.TRANSACTION_MASK in (codec.TRANSACTION_NOT, codec.TRANSACTION_COMMIT)


def index_keys(topic: str, props: dict[str, str], sys_flag: int) -> tuple[str, ...]:
    """Index keys "topic#key": UNIQ_KEY, then each KEYS token; none for ROLLBACK (SPEC §7)."""
    if sys_flag & codec.TRANSACTION_MASK == codec.TRANSACTION_ROLLBACK:
        return ()
    uniq = props.get(codec.PROPERTY_UNIQ_KEY)
    keys = [uniq] if uniq else []
    keys.extend(codec.iter_keys(props.get(codec.PROPERTY_KEYS)))
    return tuple(f"{topic}#{k}" for k in keys)


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



def cq_tags_code_many(is_schedule: np.ndarray, tags: Sequence[str | None],
                      delays: Sequence[str | None], store_ts: np.ndarray,
                      delay_levels_ms: tuple[int, ...]) -> np.ndarray:
    """``cq_tags_code`` for many records, given each one's topic test (SCHEDULE_TOPIC_XXXX),
    TAGS value, DELAY value and store time."""
    out = np.zeros(len(tags), dtype=np.int64)
    have = [i for i, t in enumerate(tags) if t]
    if have:
        out[have] = codec.java_hash_many([tags[i] for i in have])
    for i in np.flatnonzero(is_schedule).tolist():
        props = {codec.PROPERTY_DELAY: delays[i]} if delays[i] is not None else {}
        delay = delay_of(props, delay_levels_ms)
        if delay:
            out[i] = int(store_ts[i]) + delay
    return out


def from_record(rec: Record, delay_levels_ms: tuple[int, ...]) -> DispatchRequest:
    """The dispatch of a decoded CommitLog record."""
    props = rec.properties
    return DispatchRequest(rec.topic, rec.queue_id, rec.queue_offset, rec.commitlog_offset,
                           rec.size, cq_tags_code(rec.topic, props, rec.store_timestamp, delay_levels_ms),
                           rec.store_timestamp, goes_to_consume_queue(rec.sys_flag),
                           index_keys(rec.topic, props, rec.sys_flag))


class Dispatcher:
    """Applies DispatchRequests to a store's ConsumeQueues and index (RocketMQ's reput step).

    Requests queue up and are applied in vectorised batches, as RocketMQ's reput thread applies
    them after the CommitLog write. ``apply()`` makes everything queued visible; readers call it.
    """

    BATCH = 4096

    def __init__(self, root: Path, cfg: StoreConfig, queues: dict[tuple[str, int], ConsumeQueue],
                 index: IndexService | None) -> None:
        self.root, self.cq_file_size = Path(root), cfg.mappedFileSizeConsumeQueue
        self.queues, self.index = queues, index
        self.last_timestamp = 0
        self._pending: list[DispatchRequest] = []

    def queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            cq = self.queues[(topic, queue_id)] = ConsumeQueue(self.root, topic, queue_id,
                                                               self.cq_file_size)
        return cq

    def __call__(self, req: DispatchRequest) -> None:
        self._pending.append(req)
        if len(self._pending) >= self.BATCH:
            self.apply()

    def extend(self, reqs: list[DispatchRequest]) -> None:
        self._pending.extend(reqs)
        if len(self._pending) >= self.BATCH:
            self.apply()

    def apply(self) -> None:
        """Write every queued request's ConsumeQueue unit and index keys."""
        reqs, self._pending = self._pending, []
        if not reqs:
            return
        by_queue: dict[tuple[str, int], list[DispatchRequest]] = {}
        for r in reqs:
            if r.to_consume_queue:
                by_queue.setdefault((r.topic, r.queue_id), []).append(r)
        for key, rs in by_queue.items():
            qoffs = np.fromiter((r.queue_offset for r in rs), dtype=np.int64, count=len(rs))
            units = np.array([(r.commitlog_offset, r.size, r.tags_code) for r in rs],
                             dtype=codec.CQ_UNIT_DTYPE)
            self.queue(*key).put_many(qoffs, units)
        if self.index is not None:
            self.index.add_many([r.index_keys for r in reqs], [r.commitlog_offset for r in reqs],
                                [r.store_timestamp for r in reqs])
        self.last_timestamp = reqs[-1].store_timestamp

    def flush(self) -> None:
        self.apply()
        for cq in list(self.queues.values()):
            cq.flush()
        if self.index is not None:
            self.index.flush()

    def close(self) -> None:
        for cq in self.queues.values():
            cq.close()
        if self.index is not None:
            self.index.close()
