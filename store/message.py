"""What goes into the store and what comes back: Message, put and get results, statuses."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from rocketlake.store.codec import Record, create_msg_id


@dataclass(slots=True)
class Message:
    """A message to put. Field names follow RocketMQ's Message / MessageExtBrokerInner.

    ``keys`` is a list (or tuple) of keys or one space-separated string. ``sys_flag`` carries the
    transaction type (``TRANSACTION_PREPARED`` / ``COMMIT`` / ``ROLLBACK``) and the compressed
    bit; the host bits are set by the store. ``store_host`` and ``store_timestamp`` default to the
    store's host and the time of the put; set them only to replay messages another broker stored.
    """
    topic: str
    body: bytes
    queue_id: int = 0
    tags: str | None = None
    keys: list[str] | tuple[str, ...] | str | None = None
    properties: dict[str, str] | None = None
    flag: int = 0
    delay_level: int = 0
    sys_flag: int = 0
    born_timestamp: int | None = None
    born_host: str | None = None
    store_host: str | None = None
    store_timestamp: int | None = None
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0


class PutStatus(str, Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"


class PutResult(NamedTuple):
    """Where a put landed. ``msg_id`` is RocketMQ's offset msgId (store host + offset)."""
    status: PutStatus
    commitlog_offset: int
    size: int
    queue_offset: int
    store_timestamp: int
    topic: str
    queue_id: int
    store_addr: bytes
    store_port: int

    @property
    def msg_id(self) -> str:
        return create_msg_id(self.store_addr, self.store_port, self.commitlog_offset)


@dataclass(frozen=True)
class TablePutResult:
    """Where the rows of a ``put_table`` landed, one array entry per row (no object per message).

    Row i was stored under topic ``topics[topic[i]]``, queue ``queue_id[i]`` (for a delayed
    message: SCHEDULE_TOPIC_XXXX and its level's queue); ``store_addrs[store_host[i]]`` and
    ``store_port[i]`` are its STOREHOST."""
    status: PutStatus
    commitlog_offset: npt.NDArray[np.int64]
    size: npt.NDArray[np.int64]
    queue_offset: npt.NDArray[np.int64]
    store_timestamp: npt.NDArray[np.int64]
    topic: npt.NDArray[np.int64]
    topics: list[str]
    queue_id: npt.NDArray[np.int64]
    store_host: npt.NDArray[np.int64]
    store_port: npt.NDArray[np.int64]
    store_addrs: list[bytes]

    def __len__(self) -> int:
        return int(self.commitlog_offset.size)

    def msg_ids(self) -> list[str]:
        """RocketMQ's offset msgId of each row (store host + CommitLog offset)."""
        addrs = self.store_addrs
        return [create_msg_id(addrs[h], p, o) for h, p, o in zip(
            self.store_host.tolist(), self.store_port.tolist(), self.commitlog_offset.tolist())]


class GetStatus(str, Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message served by a read: the record plus where the ConsumeQueue placed it."""
    record: Record
    queue_offset: int
    tags_code: int


@dataclass(frozen=True, slots=True)
class GetResult:
    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[StoredMessage] = field(default_factory=list)
