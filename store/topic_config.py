"""`config/topics.json`: the topics a broker serves (RocketMQ's ``TopicConfigManager``).

A broker answers a pull only for a topic this file declares (code 17 "topic[...] not exist, apply
first please!" otherwise), and only for queue ids below its ``readQueueNums``. A writer declares
the topic of every ConsumeQueue it creates, before the queue's first file exists, so whatever a
broker recovers from the store (after a clean close or a kill) is declared (docs/FORMAT.md §8).

The file is merged, never rewritten from scratch: a topic already declared (by a broker, with its
own permissions, attributes, or fields this module does not know) is kept as it is, except that
its queue counts are raised when a writer used a higher queue id; ``dataVersion`` is bumped as a
broker bumps it on every change. Nothing changed, nothing is written.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rocketlake.store import codec
from rocketlake.store.config_files import read_config, write_config
from rocketlake.store.errors import ConfigFileError
from rocketlake.store.rocksdb_store import rocksdb_config

TOPICS_JSON = Path("config") / "topics.json"
#: PermName.PERM_READ | PermName.PERM_WRITE, a new topic's permission
PERM_READ_WRITE = 6
#: PermName's bits and their letters in ``PermName.perm2String`` (inherit shows as X)
_PERM_LETTERS = ((4, "R"), (2, "W"), (1, "X"))
#: topics every broker declares itself on start, with its own queue count: left to it
BROKER_DECLARED = frozenset({codec.SCHEDULE_TOPIC})


def queue_counts(queues: Iterable[tuple[str, int]]) -> dict[str, int]:
    """{topic: highest queue id + 1} of ``(topic, queue_id)`` pairs."""
    out: dict[str, int] = {}
    for topic, queue_id in queues:
        out[topic] = max(out.get(topic, 0), queue_id + 1)
    return out


def perm_text(perm: int) -> str:
    """A topic's permission as ``PermName.perm2String``: ``RW-`` (6), ``R--`` (4), ``-W-`` (2),
    ``RWX`` (7: inheritable)."""
    return "".join(letter if perm & bit else "-" for bit, letter in _PERM_LETTERS)


def read_topic_configs(root: str | Path) -> dict[str, dict[str, Any]]:
    """`<root>/config/topics.json`'s topicConfigTable: {topic: its TopicConfig as stored}; {} when
    there is no file. ConfigFileError naming the file when it (or its ``.bak``) cannot be read or
    is not a topic table. From the RocksDB database `config/topics/` instead where a 5.x broker
    keeps one (``rocksdb_store``)."""
    in_rocksdb = rocksdb_config(Path(root), "topics")
    if in_rocksdb is not None:
        path, rows = in_rocksdb
        table: Any = rows
    else:
        path = Path(root) / TOPICS_JSON
        data = read_config(path)
        if data is None:
            return {}
        table = data.get("topicConfigTable") if isinstance(data, dict) else None
    if not isinstance(table, dict) or not all(isinstance(tc, dict) for tc in table.values()):
        raise ConfigFileError(f"{path}: not a topic config (no topicConfigTable of TopicConfig objects)")
    return {str(t): tc for t, tc in table.items()}


def topic_entry(topic: str, queue_nums: int, attributes: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A new topic's ``TopicConfig`` as a 5.x broker writes it (a 4.9 broker ignores
    ``attributes``): read and write queues ``queue_nums``, read-write, SINGLE_TAG, not ordered."""
    return {"attributes": dict(attributes or {}), "order": False, "perm": PERM_READ_WRITE,
            "readQueueNums": queue_nums, "topicFilterType": "SINGLE_TAG", "topicName": topic,
            "topicSysFlag": 0, "writeQueueNums": queue_nums}


def _topic_table(path: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(the topics.json at ``path``, its topicConfigTable, its dataVersion); a new empty one when
    there is no file. ConfigFileError naming the file when it (or its ``.bak``) cannot be read, is
    not a topic table, or holds a TopicConfig whose queue counts, or a dataVersion counter, that
    are not integers."""
    data = read_config(path)
    if data is None:
        data = {"dataVersion": {"counter": 0, "timestamp": 0}, "topicConfigTable": {}}
    table = data.get("topicConfigTable") if isinstance(data, dict) else None
    version = data.get("dataVersion", {}) if isinstance(data, dict) else None
    if not isinstance(table, dict) or not isinstance(version, dict):
        raise ConfigFileError(f"{path}: not a topic config (no topicConfigTable and dataVersion objects)")
    for topic, tc in table.items():
        if not isinstance(tc, dict):
            raise ConfigFileError(f"{path}: topic {topic!r} is not a TopicConfig object")
        for field in ("readQueueNums", "writeQueueNums"):
            have = tc.get(field, 0)
            if not isinstance(have, int) or isinstance(have, bool):
                raise ConfigFileError(f"{path}: topic {topic!r}: {field} {have!r} is not an integer")
    counter = version.get("counter", 0)
    if not isinstance(counter, int) or isinstance(counter, bool):
        raise ConfigFileError(f"{path}: dataVersion counter {counter!r} is not an integer")
    return data, table, version


def check_topics_file(root: str | Path) -> None:
    """ConfigFileError (as ``declare_topics`` raises it) when ``<root>/config/topics.json`` is
    one ``declare_topics`` would refuse: a writer's open checks it before it changes anything."""
    _topic_table(Path(root) / TOPICS_JSON)


def declare_topics(root: str | Path, queue_nums: Mapping[str, int],
                   attributes: Mapping[str, Mapping[str, str]] | None = None) -> bool:
    """Make ``<root>/config/topics.json`` declare each topic of ``queue_nums`` with at least that
    many read and write queues (a new topic with ``attributes[topic]``, if given); topics in
    BROKER_DECLARED are skipped. Written (``config_files.write_config``: whole, old one to
    ``.bak``) only when something changed; returns whether it was.

    ConfigFileError naming the file when what is there (or its ``.bak``) cannot be read or is not
    a topic table (``_topic_table``): it is then left as it is."""
    path = Path(root) / TOPICS_JSON
    data, table, version = _topic_table(path)
    changed = False
    for topic, n in sorted(queue_nums.items()):
        if topic in BROKER_DECLARED:
            continue
        tc = table.get(topic)
        if tc is None:
            table[topic] = topic_entry(topic, n, (attributes or {}).get(topic))
            changed = True
            continue
        for field in ("readQueueNums", "writeQueueNums"):
            if tc.get(field, 0) < n:
                tc[field] = n
                changed = True
    if not changed:
        return False
    version.update(counter=version.get("counter", 0) + 1, timestamp=time.time_ns() // 1_000_000)
    data["dataVersion"] = version
    write_config(path, data)
    return True
