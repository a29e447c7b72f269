"""Every exception the store library raises, under one base: ``except RocketlakeError``.

Each class also keeps the builtin base it always had (ValueError, OSError, RuntimeError), so
callers that catch those keep working.
"""
from __future__ import annotations


class RocketlakeError(Exception):
    """Base of every error the store library raises on purpose."""


class SettingError(RocketlakeError, ValueError):
    """A store setting that is unknown, of the wrong type or out of range."""


class MessageRejected(RocketlakeError, ValueError):
    """A message the store refuses; nothing of it was written.

    ``index`` is the message's position when it came in a batch (nothing of the batch was written).
    """

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


class CorruptRecordError(RocketlakeError, ValueError):
    """A CommitLog record that is not valid at the given position."""


class MessageNotFoundError(RocketlakeError, ValueError):
    """An id (offset msgId or UNIQ_KEY) that names no message in this store. A ValueError: the id
    is bad input for this store (the command line's usage exit code)."""


class StoreFormatError(RocketlakeError, ValueError):
    """A store file or directory that is not what RocketMQ would have written."""


class UnsupportedStoreError(RocketlakeError, ValueError):
    """A store rocketlake reads but does not write (a 5.x RocksDB ConsumeQueue), or one it can
    read only with an optional binding that is not installed: the message names the broker
    setting and what to install. A ValueError: the usage exit code."""


class UnsafePathError(StoreFormatError):
    """A name that cannot name a store directory, or a store path that resolves outside the store."""


class LinkedFileError(StoreFormatError):
    """A store file a command would create, write or replace that is a symbolic link (also a
    dangling one): refused, nothing is written through it (``store.safe_files``)."""


class NotAStoreError(RocketlakeError, FileNotFoundError):
    """A store path that is missing, not a directory, or a directory that is not a RocketMQ store
    (``store.store_dir``). A FileNotFoundError: the path is bad input (the usage exit code)."""


class StoreFullError(RocketlakeError, OSError):
    """No room on the file system for a new store file (ENOSPC, EDQUOT, EFBIG). Raised when the
    file is created, before anything of the write that needed it was written."""


class StoreLockedError(RocketlakeError, RuntimeError):
    """Another process (or another MessageStore) holds the store's writer lock."""


class ConfigFileError(RocketlakeError, ValueError):
    """A config JSON file that neither it nor its .bak can be read."""


class StreamOffsetError(RocketlakeError, ValueError):
    """A stream offset (a query's checkpoint, a ``startingOffsets`` JSON) that is no position of
    this store: another store's, or not where a record starts."""


class DataLossError(RocketlakeError, RuntimeError):
    """Records a stream had not read were deleted (retention) before it read them."""
