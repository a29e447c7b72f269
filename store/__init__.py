"""rocketlake store: write and read Apache RocketMQ 4.9 message stores on local disk."""
from rocketlake.store.codec import (
                                    TRANSACTION_COMMIT,
                                    TRANSACTION_NOT,
                                    TRANSACTION_PREPARED,
                                    TRANSACTION_ROLLBACK,
                                    Record,
)
from rocketlake.store.config import StoreConfig, load_config
from rocketlake.store.errors import (
                                    ConfigFileError,
                                    CorruptRecordError,
                                    DataLossError,
                                    LinkedFileError,
                                    MessageNotFoundError,
                                    MessageRejected,
                                    NotAStoreError,
                                    RocketlakeError,
                                    SettingError,
                                    StoreFormatError,
                                    StoreFullError,
                                    StoreLockedError,
                                    StreamOffsetError,
                                    UnsafePathError,
)
from rocketlake.store.message import GetResult, GetStatus, Message, PutResult, PutStatus, StoredMessage
from rocketlake.store.message_store import MessageStore

__all__ = [
    "MessageStore", "Message", "PutResult", "PutStatus", "GetResult", "GetStatus", "StoredMessage",
    "Record", "StoreConfig", "load_config", "TRANSACTION_NOT", "TRANSACTION_PREPARED",
    "TRANSACTION_COMMIT", "TRANSACTION_ROLLBACK",
    "RocketlakeError", "SettingError", "MessageRejected", "MessageNotFoundError",
    "CorruptRecordError", "StoreFormatError",
    "UnsafePathError", "StoreFullError", "StoreLockedError", "ConfigFileError",
    "LinkedFileError", "NotAStoreError", "StreamOffsetError", "DataLossError",
]
