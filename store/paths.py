"""Store paths built from names (topics, queue ids): they never leave the store.

A topic or queue id reaches a path from a command line, a config file or the bytes of a
CommitLog record. Every such path is built here: the name must follow RocketMQ's topic rule
(``codec.check_topic``; a queue id is an int >= 0) and the path, symlinks followed, must stay
inside the directory it was built under.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from rocketlake.store import codec
from rocketlake.store.errors import StoreFormatError, UnsafePathError

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


def check_queue_id(queue_id: int, where: str | os.PathLike[str]) -> int:
    """``queue_id`` when it is an int >= 0; UnsafePathError naming it and ``where`` otherwise."""
    if isinstance(queue_id, bool) or not isinstance(queue_id, int) or queue_id < 0:
        raise UnsafePathError(f"{where}: queue id {queue_id!r} is not an integer >= 0; refusing "
                              f"to build a store path from it")
    return queue_id


def resolve_inside(root: Path, path: Path) -> Path:
    """``path`` when it resolves (symlinks followed, missing parts allowed) inside ``root``'s
    resolution; UnsafePathError naming both otherwise. Returns ``path`` as given."""
    real = Path(os.path.realpath(path))
    if not _inside(Path(os.path.realpath(root)), real):
        raise UnsafePathError(f"{path}: resolves to {real}, outside {root}; refusing to use it")
    return path


def _inside(base: Path, real: Path) -> bool:
    return real == base or base in real.parents


def queue_dir(root: Path, topic: str, queue_id: int, within: str = CONSUME_QUEUE_DIR) -> Path:
    """``<root>/<within>/<topic>/<queueId>``: a ConsumeQueue's directory (``within``: the store's
    `consumequeue/`, or a rebuild's directory that will replace it)."""
    base = Path(root) / within
    path = base / check_topic_name(topic, base) / str(check_queue_id(queue_id, base / topic))
    return resolve_inside(root, path)



def topic_dir(root: Path, topic: str, within: str = CONSUME_QUEUE_DIR) -> Path:
    """``<root>/<within>/<topic>``, checked as ``queue_dir`` checks a queue's directory: a
    queue directory made in it (so no link) needs no check of its own."""
    base = Path(root) / within
    return resolve_inside(root, base / check_topic_name(topic, base))


def queue_dirs(root: Path) -> Iterator[tuple[str, int, Path]]:
    """(topic, queue id, directory) of every ``<root>/consumequeue/<topic>/<queueId>``, by topic
    then queue id name; entries of `consumequeue/` that are not directories are skipped. As
    ``queue_dir`` builds them: UnsafePathError for a topic name that is not one and for a path
    that resolves outside ``root``; StoreFormatError for a queue directory name that is not a
    queue id. One ``realpath`` of `consumequeue/`: a topic or queue directory that is no link
    stays inside its parent's resolution, so only a link is resolved itself. One listing per
    topic directory (``os.scandir``, which tells a link from its entry): no path is parsed and
    nothing is stat'ed per queue."""
    base = Path(root) / CONSUME_QUEUE_DIR
    if not base.exists():
        return
    real_root = Path(os.path.realpath(root))
    base_inside = _inside(real_root, Path(os.path.realpath(base)))
    with os.scandir(base) as listing:
        topics = sorted((e.name, e.is_symlink()) for e in listing if e.is_dir())
    for topic, topic_link in topics:
        tdir = base / topic
        topic_inside: bool | None = None
        with os.scandir(tdir) as listing:
            entries = sorted((e.name, e.is_symlink()) for e in listing)
        for name, link in entries:
            qdir = tdir / name
            if not name.isdigit():
                raise StoreFormatError(f"{qdir}: queue directory name is not a queue id")
            if topic_inside is None:  # the topic's first queue: its name and place, once
                check_topic_name(topic, base)
                topic_inside = base_inside if not topic_link else \
                    _inside(real_root, Path(os.path.realpath(tdir)))
            if not topic_inside or link:
                resolve_inside(root, qdir)
            yield topic, int(name), qdir
