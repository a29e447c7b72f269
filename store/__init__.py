"""rocketlake store: write and read Apache RocketMQ 4.9 message stores on local disk."""
from rocketlake.store.codec import (TRANSACTION_COMMIT, TRANSACTION_NOT, TRANSACTION_PREPARED,
                         TRANSACTION_ROLLBACK, CorruptRecordError, Record)
from rocketlake.store.commitlog import MessageRejected
from rocketlake.store.config import StoreConfig, load_config
from rocketlake.store.lockfile import StoreLockedError
from rocketlake.store.mapped_file import StoreFormatError
from rocketlake.store.message import GetResult, GetStatus, Message, PutResult, PutStatus, StoredMessage
from rocketlake.store.message_store import MessageStore

__all__ = [
    "MessageStore", "Message", "PutResult", "PutStatus", "GetResult", "GetStatus", "StoredMessage",
    "Record", "StoreConfig", "load_config", "MessageRejected", "StoreFormatError",
    "StoreLockedError", "CorruptRecordError", "TRANSACTION_NOT", "TRANSACTION_PREPARED",
    "TRANSACTION_COMMIT", "TRANSACTION_ROLLBACK",
]
