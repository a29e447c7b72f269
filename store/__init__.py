"""rocketlake store: write and read Apache RocketMQ 4.9 message stores on local disk.

The names below are loaded when first used (PEP 562), so importing one light module of the
package (``rocketlake.store.config``, ``rocketlake.store.errors``) does not load the whole
library and its compiled kernels: the Airflow DAGs read the store settings with the package
installed without its dependencies.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
        UnsupportedStoreError,
    )
    from rocketlake.store.message import GetResult, GetStatus, Message, PutResult, PutStatus, StoredMessage
    from rocketlake.store.message_store import MessageStore

#: each public name -> the module defining it
_HOMES = {
    **dict.fromkeys(["TRANSACTION_COMMIT", "TRANSACTION_NOT", "TRANSACTION_PREPARED",
                     "TRANSACTION_ROLLBACK", "Record"], "codec"),
    **dict.fromkeys(["StoreConfig", "load_config"], "config"),
    **dict.fromkeys(["ConfigFileError", "CorruptRecordError", "LinkedFileError", "MessageNotFoundError",
                     "MessageRejected", "NotAStoreError", "RocketlakeError", "SettingError",
                     "StoreFormatError", "StoreFullError", "StoreLockedError", "UnsafePathError",
                     "StreamOffsetError", "DataLossError", "UnsupportedStoreError"],
                    "errors"),
    **dict.fromkeys(["GetResult", "GetStatus", "Message", "PutResult", "PutStatus", "StoredMessage"],
                    "message"),
    "MessageStore": "message_store",
}

__all__ = [
    "MessageStore", "Message", "PutResult", "PutStatus", "GetResult", "GetStatus", "StoredMessage",
    "Record", "StoreConfig", "load_config", "TRANSACTION_NOT", "TRANSACTION_PREPARED",
    "TRANSACTION_COMMIT", "TRANSACTION_ROLLBACK",
    "RocketlakeError", "SettingError", "MessageRejected", "MessageNotFoundError",
    "CorruptRecordError", "StoreFormatError",
    "UnsafePathError", "StoreFullError", "StoreLockedError", "ConfigFileError",
    "LinkedFileError", "NotAStoreError", "StreamOffsetError", "DataLossError",
    "UnsupportedStoreError",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
