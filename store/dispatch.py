"""What a stored record contributes to the ConsumeQueue and the index (RocketMQ's DispatchRequest).

One definition of the rules, used by the writer, by recovery and by the Spark rebuild.
"""
from __future__ import annotations

from typing import NamedTuple

from store import codec
from store.codec import Record


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
