"""How a command opens the store it only reads: the ``--store`` read-only with the ``--set``
settings over store.conf and the file sizes of its files (``store.file_sizes``; a setting the
files contradict is an error naming both), and the one lookup of a message's store time."""
from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rocketlake.store import MessageStore, file_sizes
from rocketlake.store.config import StoreConfig, load_config, parse_set_options


def reading_config(a: argparse.Namespace) -> StoreConfig:
    """Settings to read ``a.store`` with: `--set` over store.conf, file sizes from the files."""
    return file_sizes.reading_config(a.store, parse_set_options(a.set))


@contextmanager
def open_read_only(a: argparse.Namespace) -> Iterator[MessageStore]:
    """The ``--store`` opened read-only with the settings of :func:`reading_config` (the open
    takes the file sizes from the files: they are looked up once); NotAStoreError (exit 2) for
    a path that is not a store."""
    settings: dict[str, Any] = parse_set_options(a.set)
    # the names are checked (load_config) before they are given as keywords
    with MessageStore(a.store, load_config(settings), read_only=True, **settings) as ms:
        yield ms


def store_time(ms: MessageStore, topic: str, queue_id: int, queue_offset: int) -> int | None:
    """Store timestamp (ms) of the message at ``queue_offset``; None when there is none (negative,
    expired, past the end, unreadable). RocketMQ's DefaultMessageStore.getMessageStoreTimeStamp;
    many at once: ``MessageStore.store_times``."""
    return ms.store_times([(topic, queue_id, queue_offset)])[0]
