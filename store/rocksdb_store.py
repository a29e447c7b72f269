"""A 5.x broker's RocksDB databases, read-only: its ConsumeQueue (``storeType=defaultRocksDB``)
and the config it then keeps in RocksDB (docs/FORMAT.md §9.7).

With ``storeType=defaultRocksDB`` (RocketMQ 5.2+) the broker keeps no ConsumeQueue files: the
directory `<root>/consumequeue` is itself a RocksDB database (``RocksDBConsumeQueueStore``), and
topics, subscription groups and consumer offsets live in the databases `config/topics/`,
`config/subscriptionGroups/` and `config/consumerOffsets/` (``RocksDBTopicConfigManager`` ...)
instead of the JSON files. rocketlake reads them through the `rocksdict` binding (the
``rocksdb`` extra), opened read-only, never writes them, and refuses to write file queues
beside them.
"""
from __future__ import annotations

import contextlib
import json
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

from rocketlake.store.codec import CQ_UNIT_DTYPE
from rocketlake.store.errors import StoreFormatError, UnsupportedStoreError
from rocketlake.store.paths import CONSUME_QUEUE_DIR

#: a RocksDB database directory names its current MANIFEST in this file
CURRENT_FILE = "CURRENT"
#: RocketMQ's separator byte in RocksDB keys (AbstractRocksDBStorage.CTRL_1)
CTRL_1 = b"\x01"
#: ConsumeQueue value: CommitLog offset, size, tags code, store time (RocksDBConsumeQueueTable)
CQ_VALUE = struct.Struct(">qiqq")
#: offset column family value: CommitLog offset, queue offset (RocksDBConsumeQueueOffsetTable)
OFFSET_VALUE = struct.Struct(">qq")
OFFSET_CF = "offset"
#: the offset-table key holding the dispatch checkpoint, not a queue (RMQ_SYS_ROCKSDB_OFFSET_TOPIC)
CHECKPOINT_TOPIC = "CHECKPOINT_TOPIC"
#: units read per multi-get
READ_CHUNK = 4096
SETTING = "storeType=defaultRocksDB"
INSTALL = "pip install 'rocketlake[rocksdb]' (the rocksdict binding)"
#: the file rocksdict saves into every database it opens, also read-only (up to 0.3.29; not in
#: read-only modes since RocksDict pull request 186): ``open_read_only`` removes it again
ROCKSDICT_CONFIG = "rocksdict-config.json"


def is_rocksdb(path: Path) -> bool:
    """True when ``path`` is a RocksDB database directory (it holds a `CURRENT` file; a file
    ConsumeQueue directory holds only topic directories)."""
    return (Path(path) / CURRENT_FILE).is_file()


def rocksdb_consume_queue(root: Path) -> bool:
    """True when the store at ``root`` keeps its ConsumeQueues in RocksDB (``storeType=defaultRocksDB``)."""
    return is_rocksdb(Path(root) / CONSUME_QUEUE_DIR)


def open_read_only(path: Path, column_families: tuple[str, ...] = ()) -> Any:
    """The RocksDB database at ``path`` opened read-only (rocksdict ``Rdict`` in raw mode, with
    ``column_families`` besides the default), leaving every file of it as it was (the
    ``ROCKSDICT_CONFIG`` the open writes is removed, when it was not there before).
    UnsupportedStoreError naming the setting and the extra when the binding is not installed;
    StoreFormatError when RocksDB cannot open it."""
    try:
        from rocksdict import AccessType, Options, Rdict
    except ImportError:
        raise UnsupportedStoreError(
            f"{path}: a RocksDB database ({SETTING} or RocksDB config, RocketMQ 5.x) and the "
            f"RocksDB binding is not installed: {INSTALL}") from None
    config = Path(path) / ROCKSDICT_CONFIG
    made = not os.path.lexists(config)
    try:
        return Rdict(str(path), options=Options(raw_mode=True), access_type=AccessType.read_only(),
                     column_families={cf: Options(raw_mode=True) for cf in column_families})
    except Exception as e:  # rocksdict raises plain Exception for RocksDB's status
        raise StoreFormatError(f"{path}: RocksDB cannot open it read-only: {e}") from None
    finally:
        if made:
            with contextlib.suppress(FileNotFoundError):  # another reader's open removed it
                os.unlink(config)


def cq_key(topic: str, queue_id: int, queue_offset: int) -> bytes:
    """The ConsumeQueue key of one unit: topic length, topic, queue id, queue offset
    (RocksDBConsumeQueueTable.buildCQKeyByteBuffer)."""
    t = topic.encode()
    return struct.pack(">i", len(t)) + CTRL_1 + t + CTRL_1 + struct.pack(">i", queue_id) + CTRL_1 \
        + struct.pack(">q", queue_offset)


def parse_offset_key(key: bytes) -> tuple[str, str, int]:
    """(topic, "max" or "min", queue id) of an offset column family key
    (RocksDBConsumeQueueOffsetTable.buildOffsetKeyByteBuffer)."""
    (n,) = struct.unpack_from(">i", key)
    topic = key[5:5 + n].decode()
    rest = key[5 + n:]
    if len(rest) != 9 or rest[:1] != CTRL_1 or rest[4:5] != CTRL_1:
        raise StoreFormatError(f"RocksDB ConsumeQueue offset key {key!r}: not topic/max|min/queue id")
    return topic, rest[1:4].decode(), struct.unpack_from(">i", rest, 5)[0]


class RocksDBConsumeQueue:
    """One queue of a RocksDB ConsumeQueue, read-only: a ``queue_reader.QueueReader`` (units
    carry no store time, as file units do not)."""

    def __init__(self, db: _SharedDB, path: Path, topic: str, queue_id: int, min_offset: int,
                 max_offset: int) -> None:
        self.topic, self.queue_id = topic, queue_id
        self._shared = db
        self._db = db.db
        db.users += 1
        self._min, self._max = min_offset, max_offset
        self.path = path  #: the database directory
        last = self.units(max_offset - 1, 1) if max_offset > 0 else np.zeros(0, dtype=CQ_UNIT_DTYPE)
        self.max_physic_offset = int(last["commitlog_offset"][0]) + int(last["size"][0]) if len(last) else -1

    @property
    def min_offset(self) -> int:
        return self._min

    @property
    def max_offset(self) -> int:
        return self._max

    def units(self, queue_offset: int, count: int) -> np.ndarray:
        """Up to ``count`` units from ``queue_offset``, stopping at the first one missing."""
        count = max(0, min(count, self._max - queue_offset))
        rows: list[tuple[int, int, int]] = []
        for at in range(queue_offset, queue_offset + count, READ_CHUNK):
            n = min(READ_CHUNK, queue_offset + count - at)
            values = self._db.get([cq_key(self.topic, self.queue_id, at + i) for i in range(n)])
            for v in values:
                if v is None:
                    return np.array(rows, dtype=CQ_UNIT_DTYPE)
                if len(v) != CQ_VALUE.size:
                    raise StoreFormatError(f"{self.path}: {self.topic}/{self.queue_id}: a "
                                           f"ConsumeQueue value of {len(v)} bytes, not {CQ_VALUE.size}")
                rows.append(CQ_VALUE.unpack(v)[:3])
        return np.array(rows, dtype=CQ_UNIT_DTYPE)

    def all_units(self) -> np.ndarray:
        return self.units(self._min, self._max - self._min)

    def correct_min_offset(self, commitlog_min: int) -> None:
        """Set the minimum to the first unit whose record is at or above ``commitlog_min``
        (units are in CommitLog order: a binary search, as RocketMQ's getMinOffsetInQueue)."""
        lo, hi = self._min, self._max
        while lo < hi:
            mid = (lo + hi) // 2
            u = self.units(mid, 1)
            if len(u) and int(u["commitlog_offset"][0]) >= commitlog_min:
                hi = mid
            else:
                lo = mid + 1
        self._min = lo

    def hide_past(self, commitlog_end: int) -> None:
        """Leave out the tail units whose record reaches past ``commitlog_end``."""
        while self._max > self._min:
            u = self.units(self._max - 1, 1)
            if len(u) and int(u["commitlog_offset"][0]) + int(u["size"][0]) <= commitlog_end:
                break
            self._max -= 1

    def flush(self) -> None:
        """Nothing to flush: read-only."""

    def close(self) -> None:
        """Done with this queue; the database closes with its last queue."""
        self._shared.release()


class _SharedDB:
    """The one read-only database handle every queue of a store reads through."""

    def __init__(self, db: Any) -> None:
        self.db, self.users = db, 0

    def release(self) -> None:
        self.users -= 1
        if self.users == 0:
            self.db.close()


def load_rocksdb_queues(root: Path) -> dict[tuple[str, int], RocksDBConsumeQueue]:
    """Every queue of the RocksDB ConsumeQueue at `<root>/consumequeue`, by (topic, queue id),
    from its offset column family (the max entry holds the last unit's queue offset; the min
    entry, where the broker wrote one, the first)."""
    path = Path(root) / CONSUME_QUEUE_DIR
    db = open_read_only(path, (OFFSET_CF,))
    bounds: dict[tuple[str, int], dict[str, int]] = {}
    for key, value in db.get_column_family(OFFSET_CF).items():
        topic, which, queue_id = parse_offset_key(key)
        if topic == CHECKPOINT_TOPIC:
            continue
        if len(value) != OFFSET_VALUE.size:
            raise StoreFormatError(f"{path}: offset entry {key!r} of {len(value)} bytes, "
                                   f"not {OFFSET_VALUE.size}")
        bounds.setdefault((topic, queue_id), {})[which] = OFFSET_VALUE.unpack(value)[1]
    shared = _SharedDB(db)
    queues = {k: RocksDBConsumeQueue(shared, path, k[0], k[1], b.get("min", 0),
                                     b["max"] + 1 if "max" in b else 0)
              for k, b in sorted(bounds.items())}
    if not queues:
        db.close()
    return queues


def rocksdb_config(root: Path, name: str) -> tuple[Path, dict[str, Any]] | None:
    """(path, entries) of the RocksDB config database `<root>/config/<name>/` (``topics``,
    ``consumerOffsets``, ``subscriptionGroups``) where a 5.x broker keeps one (storeType
    defaultRocksDB: it then reads it, not the JSON file, which it merges in at load only when
    the file's dataVersion is newer); None when there is none."""
    path = Path(root) / "config" / name
    return (path, read_config_db(path)) if is_rocksdb(path) else None


def read_config_db(path: Path) -> dict[str, Any]:
    """A RocksDB config database (`config/topics/`, `config/consumerOffsets/`,
    `config/subscriptionGroups/`): {key: its JSON value} of the default column family
    (RocksDBConfigManager: the key a topic name, a group, or topic@group)."""
    db = open_read_only(path)
    try:
        out = {}
        for key, value in db.items():
            try:
                out[key.decode()] = json.loads(value)
            except ValueError as e:
                raise StoreFormatError(f"{path}: entry {key!r} is not JSON: {e}") from None
        return out
    finally:
        db.close()
