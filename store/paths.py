"""Store paths built from names (topics, queue ids): they never leave the store.

A topic or queue id reaches a path from a command line, a config file or the bytes of a
CommitLog record. Every such path is built here: the name must follow RocketMQ's topic rule
(``codec.check_topic``; a queue id is an int >= 0) and the path, symlinks followed, must stay
inside the directory it was built under.
"""
from __future__ import annotations

import os
from pathlib import Path

from rocketlake.store import codec
from rocketlake.store.errors import UnsafePathError

CONSUME_QUEUE_DIR = "consumequeue"
#: a 5.x broker's BatchConsumeQueues (``store.batch_consume_queue``)
BATCH_CONSUME_QUEUE_DIR = "batchconsumequeue"


def check_topic_name(topic: str, where: Path) -> str:
    """``topic`` when it follows the topic rule; UnsafePathError naming it and ``where`` (the store
    directory it would have named a path under) otherwise."""
    try:
        codec.check_topic(topic)
    except ValueError as e:
        raise UnsafePathError(f"{where}: {e}; refusing to build a store path from it") from None
    return topic


def check_queue_id(queue_id: int, where: Path) -> int:
    """``queue_id`` when it is an int >= 0; UnsafePathError naming it and ``where`` otherwise."""
    if isinstance(queue_id, bool) or not isinstance(queue_id, int) or queue_id < 0:
        raise UnsafePathError(f"{where}: queue id {queue_id!r} is not an integer >= 0; refusing "
                              f"to build a store path from it")
    return queue_id


def resolve_inside(root: Path, path: Path) -> Path:
    """``path`` when it resolves (symlinks followed, missing parts allowed) inside ``root``'s
    resolution; UnsafePathError naming both otherwise. Returns ``path`` as given."""
    base = Path(os.path.realpath(root))
    real = Path(os.path.realpath(path))
    if real != base and base not in real.parents:
        raise UnsafePathError(f"{path}: resolves to {real}, outside {root}; refusing to use it")
    return path


def queue_dir(root: Path, topic: str, queue_id: int, within: str = CONSUME_QUEUE_DIR) -> Path:
    """``<root>/<within>/<topic>/<queueId>``: a ConsumeQueue's directory (``within``: the store's
    `consumequeue/`, or a rebuild's directory that will replace it)."""
    base = Path(root) / within
    path = base / check_topic_name(topic, base) / str(check_queue_id(queue_id, base / topic))
    return resolve_inside(root, path)

