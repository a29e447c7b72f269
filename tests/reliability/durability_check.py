"""Independent views of a store's files for the reliability tests.

The CommitLog is decoded record by record with ``store.codec.decode_record`` straight from the
file bytes; ConsumeQueue units and index entries are read from the bytes with the layouts of
docs/FORMAT.md §6-§7, written out again on purpose (not the store's own readers). ``check_store``
asserts that all three agree and that nothing but zeros follows the last valid record.
"""
from __future__ import annotations

import collections
import struct
import zlib
from pathlib import Path

from rocketlake.store.codec import Record, decode_record
from rocketlake.store.errors import CorruptRecordError

SETTINGS = {"mappedFileSizeCommitLog": 65536, "mappedFileSizeConsumeQueue": 6000,
            "maxHashSlotNum": 512, "maxIndexNum": 2000}
TOPICS = ("orders", "payments", "audit-log")
#: docs/FORMAT.md §5: tagsCode of "TagA" is 2598919; "TagB" differs in the last UTF-16 unit (+1).
TAGS_CODE = {"TagA": 2598919, "TagB": 2598920}
BLANK_MAGIC = 0xCBD43194


def message_for(key: str) -> tuple[str, int, str, bytes]:
    """(topic, queue id, tags, body) of the message with KEYS ``key``: a pure function of the key,
    so any record found in a store can be checked against what its writer meant to write."""
    h = zlib.crc32(key.encode())
    body = (key.encode() + b"|") * (1 + h % 23)
    return TOPICS[h % 3], (h >> 8) % 3, ("TagA", "TagB")[(h >> 16) & 1], body


def java_hash(s: str) -> int:
    h = 0
    for ch in s.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(ch, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def index_key_hash(s: str) -> int:
    """docs/FORMAT.md §7: abs(javaHashCode), and 0 when that is still negative."""
    h = abs(java_hash(s))
    return 0 if h > 0x7FFFFFFF else h


def commitlog_records(root: Path, file_size: int) -> tuple[list[Record], int]:
    """Every valid record from the first CommitLog file on, and the offset where valid data ends."""
    # Hidden files are a crash's leftovers from creating a file (store.safe_files.create_file).
    files = sorted(p for p in (root / "commitlog").iterdir() if not p.name.startswith("."))
    out: list[Record] = []
    end = int(files[0].name) if files else 0
    for path in files:
        start = int(path.name)
        if start != end:
            break
        data = path.read_bytes()
        assert len(data) == file_size, f"{path.name}: {len(data)} bytes"
        pos = 0
        while pos + 8 <= file_size:
            if struct.unpack_from(">I", data, pos + 4)[0] == BLANK_MAGIC:
                pos = file_size
                break
            try:
                rec = decode_record(data, pos, start, check_crc=True)
            except CorruptRecordError:
                return out, start + pos
            out.append(rec)
            pos += rec.size
        end = start + file_size
        if pos < file_size:
            return out, start + pos
    return out, end


def cq_units(root: Path, topic: str, queue_id: int, file_size: int) -> dict[int, tuple[int, int, int]]:
    """{queue offset: (commitlog offset, size, tagsCode)} of valid units (docs/FORMAT.md §6)."""
    out = {}
    qdir = root / "consumequeue" / topic / str(queue_id)
    for path in sorted(p for p in qdir.iterdir() if not p.name.startswith(".")) if qdir.exists() else ():
        data = path.read_bytes()
        base = int(path.name) // 20
        for i in range(len(data) // 20):
            off, size, tags = struct.unpack_from(">qiq", data, i * 20)
            if size == 0x7FFFFFFF:
                continue  # pre-blank unit
            if off < 0 or size <= 0:
                return out
            out[base + i] = (off, size, tags)
    return out


def index_entries(root: Path, slot_num: int) -> collections.Counter:
    """Multiset of (keyHash, phyOffset) over every index file's used entries (docs/FORMAT.md §7)."""
    out: collections.Counter = collections.Counter()
    idir = root / "index"
    for path in sorted(p for p in idir.iterdir() if not p.name.startswith(".")) if idir.exists() else ():
        data = path.read_bytes()
        count = struct.unpack_from(">i", data, 36)[0]
        base = 40 + 4 * slot_num
        for i in range(1, count):
            h, phy = struct.unpack_from(">iq", data, base + 20 * i)
            out[(h, phy)] += 1
    return out


def check_store(root: Path, settings: dict = SETTINGS) -> dict[str, Record]:
    """Assert CommitLog, ConsumeQueues and index agree; return the records by key.

    Every record must be a message some writer meant (body, topic, queue, tags follow from its
    key), keys are unique, each queue's offsets are 0..n-1 in CommitLog order and its units point
    at exactly those records, the index holds exactly one entry per record key, and every byte after
    the last valid record in its file is zero.
    """
    cl_size = settings["mappedFileSizeCommitLog"]
    records, end = commitlog_records(root, cl_size)
    by_key: dict[str, Record] = {}
    per_queue: dict[tuple[str, int], list[Record]] = collections.defaultdict(list)
    expected_index: collections.Counter = collections.Counter()
    for r in records:
        key = r.properties["KEYS"]
        assert key not in by_key, f"{key} stored twice"
        by_key[key] = r
        topic, qid, tags, body = message_for(key)
        assert (r.topic, r.queue_id, r.tags, r.body) == (topic, qid, tags, body), key
        assert r.body_crc == zlib.crc32(r.body) & 0x7FFFFFFF
        per_queue[(topic, qid)].append(r)
        expected_index[(index_key_hash(f"{topic}#{key}"), r.commitlog_offset)] += 1
    for (topic, qid), recs in per_queue.items():
        units = cq_units(root, topic, qid, settings["mappedFileSizeConsumeQueue"])
        want = {r.queue_offset: (r.commitlog_offset, r.size, TAGS_CODE[r.tags]) for r in recs}
        assert [r.queue_offset for r in recs] == list(range(len(recs))), (topic, qid)
        assert units == want, f"{topic}/{qid}: ConsumeQueue disagrees with the CommitLog"
    for topic in TOPICS:
        for qid in range(3):
            if (topic, qid) not in per_queue:
                assert not cq_units(root, topic, qid, settings["mappedFileSizeConsumeQueue"])
    assert index_entries(root, settings["maxHashSlotNum"]) == expected_index, \
        "index entries disagree with the CommitLog"
    if end % cl_size:
        last = root / "commitlog" / f"{end - end % cl_size:020d}"
        assert not any(last.read_bytes()[end % cl_size:]), "stale bytes after the last valid record"
    return by_key
