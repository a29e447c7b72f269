"""What a stored record contributes to the ConsumeQueue and the index (RocketMQ's DispatchRequest).

One definition of the rules, used by the writer, by recovery and by the Spark rebuild.
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

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


def from_record(rec: Record, delay_levels_ms: tuple[int, ...]) -> DispatchRequest:
    """The dispatch of a decoded CommitLog record."""
    props = rec.properties
    return DispatchRequest(rec.topic, rec.queue_id, rec.queue_offset, rec.commitlog_offset,
                           rec.size, cq_tags_code(rec.topic, props, rec.store_timestamp, delay_levels_ms),
                           rec.store_timestamp, goes_to_consume_queue(rec.sys_flag),
                           index_keys(rec.topic, props, rec.sys_flag))


class Dispatcher:
    """Applies DispatchRequests to a store's ConsumeQueues and index (RocketMQ's reput step)."""

    def __init__(self, root: Path, cfg: StoreConfig, queues: dict[tuple[str, int], ConsumeQueue],
                 index: IndexService | None) -> None:
        self.root, self.cq_file_size = Path(root), cfg.mappedFileSizeConsumeQueue
        self.queues, self.index = queues, index
        self.last_timestamp = 0

    def queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            cq = self.queues[(topic, queue_id)] = ConsumeQueue(self.root, topic, queue_id,
                                                               self.cq_file_size)
        return cq

    def __call__(self, req: DispatchRequest) -> None:
        if req.to_consume_queue:
            self.queue(req.topic, req.queue_id).put(req.queue_offset, req.commitlog_offset,
                                                    req.size, req.tags_code)
        if self.index is not None and req.index_keys:
            self.index.add(req.index_keys, req.commitlog_offset, req.store_timestamp)
        self.last_timestamp = req.store_timestamp

    def flush(self) -> None:
        for cq in list(self.queues.values()):
            cq.flush()
        if self.index is not None:
            self.index.flush()

    def close(self) -> None:
        for cq in self.queues.values():
            cq.close()
        if self.index is not None:
            self.index.close()
