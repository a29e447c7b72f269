"""The range walk and Arrow columns of the rocketmq source (``find_record_start``, ``walk_range``,
``message_columns``) against the library's own decoder, on files the library and RocketMQ wrote."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from goldens import GOLDEN

from rocketlake.store import codec
from rocketlake.store.commitlog import CommitLog
from rocketlake.store.config import load_config
from rocketlake.store.dispatch import from_record
from rocketlake.transforms.commitlog_batch import find_record_start, message_columns, walk_range

from .helpers import SMALL, v2_record

FIELDS = ("commitlog_offset", "size", "topic", "queue_id", "queue_offset", "sys_flag",
          "store_timestamp", "born_timestamp", "tags_code", "keys", "uniq_key", "properties")


def read_range(buf: np.ndarray, base: int, lo: int, hi: int) -> list[dict]:
    """The records that start in ``[lo, hi)`` of a file starting at offset ``base``, as the
    rocketmq source reads a range: from the first record start, CRCs checked, columns FIELDS."""
    pos = find_record_start(buf, base, lo, hi)
    if pos >= hi:
        return []
    raw = np.concatenate([s.raw for s in walk_range(buf, base, pos, hi, True)])
    cols = message_columns(buf, raw, FIELDS, {})
    return [dict(zip(FIELDS, row)) for row in zip(*(cols[f].to_pylist() for f in FIELDS))]


def parse_file(path: Path, split: int) -> list[dict]:
    buf = np.fromfile(path, dtype=np.uint8)
    rows = []
    for lo in range(0, buf.size, split):
        rows += read_range(buf, int(path.name), lo, min(lo + split, buf.size))
    return rows


def parse_store(root: Path, split: int) -> list[dict]:
    return [r for p in sorted((root / "commitlog").iterdir()) for r in parse_file(p, split)]


def library_rows(root: Path) -> list[tuple]:
    cfg = load_config(SMALL)
    log = CommitLog(root, cfg)
    log.files.load()
    try:
        out = []
        for rec in log.walk_records(check_crc=True):
            d = from_record(rec, cfg.delay_levels_ms)
            out.append((rec.commitlog_offset, rec.size, rec.topic, rec.queue_id, rec.queue_offset,
                        rec.sys_flag, rec.store_timestamp, rec.born_timestamp, d.tags_code,
                        rec.keys, rec.uniq_key, rec.properties_string))
        return out
    finally:
        log.close()


def test_any_split_gives_the_library_records(library_store: Path) -> None:
    expected = library_rows(library_store)
    assert any(r[5] & codec.FLAG_BORNHOST_V6 for r in expected)
    assert any(r[5] & codec.FLAG_STOREHOST_V6 for r in expected)
    for split in (997, 4096, 65536):  # 997: most records straddle a range end
        rows = parse_store(library_store, split)
        assert [tuple(r[f] for f in FIELDS) for r in rows] == expected


def test_golden_rocketmq_store_parses_like_the_library(golden_store: Path) -> None:
    rows = parse_store(golden_store, 5000)
    assert [tuple(r[f] for f in FIELDS) for r in rows] == library_rows(golden_store)
    assert len(rows) == 400  # README: 400 records in two files


def test_pr3535_trailing_separator_and_blank() -> None:
    path = GOLDEN / "rocketmq-pr3535" / "store" / "commitlog" / "00000000000000000000"
    rows = parse_file(path, 1000)
    assert [r["commitlog_offset"] for r in rows] == [i * 172 for i in range(47)]
    assert {r["topic"] for r in rows} == {"abc"} and [r["queue_offset"] for r in rows] == list(range(47))
    assert {r["tags_code"] for r in rows} == {2567159}  # docs/FORMAT.md §5: "TAG1"
    assert all(r["keys"] == [str(r["born_timestamp"])] for r in rows)


def test_v2_magic_record() -> None:
    # A v1 record turned into v2 (magic, 2-byte topic length, TOTALSIZE + 1), checked against
    # the library's decoder.
    v2 = v2_record()
    buf = np.zeros(4096, dtype=np.uint8)
    buf[:len(v2)] = np.frombuffer(bytes(v2), dtype=np.uint8)
    rec = codec.decode_record(buf.tobytes(), 0)
    (row,) = read_range(buf, 0, 0, 4096)
    assert (row["size"], row["topic"], row["properties"], row["keys"]) == (
        rec.size, rec.topic, rec.properties_string, rec.keys)


def test_topic_length_byte_is_signed_as_in_the_codec() -> None:
    """TOPICLENGTH of a v1 record is a signed byte (FORMAT.md §2.1; RocketMQ's
    CommitLog.checkMessageAndReturnSize reads ``byteBuffer.get()``): a length byte of 200 is -56,
    so a record otherwise consistent with a 200-byte topic is no record, for both readers."""
    topic = b"a" * 200
    total = codec.record_length(0, 0, len(topic), 0)
    head = codec.HEAD[(False, False)].pack(total, codec.MAGIC_V1, 0, 0, 0, 0, 0, 0, 1, b"\x7f\0\0\1",
                                           1, 2, b"\x7f\0\0\1", 10911, 0, 0, 0)
    rec = head + bytes([len(topic)]) + topic + struct.pack(">h", 0)
    assert len(rec) == total
    buf = np.frombuffer(rec + bytes(4096 - total), dtype=np.uint8)
    with pytest.raises(codec.CorruptRecordError, match="TOPICLEN -56"):
        codec.decode_record(buf.tobytes(), 0)
    assert read_range(buf, 0, 0, buf.size) == []


def test_properties_map_reads_as_the_codec() -> None:
    """Last duplicate wins, a value keeps its \x01 bytes, empty names / values and segments
    without \x01 are dropped (``store.codec.string_to_properties``): no duplicate map key."""
    from rocketlake.transforms.commitlog_batch import properties_map
    props = ["KEYS\x01a\x02TAGS\x01T\x02KEYS\x01b", "X\x01v\x01w\x02\x01n\x02E\x01\x02junk",
             "TAGS\x01A\x02", ""]
    raw = [p.encode() for p in props]
    buf = np.frombuffer(b"".join(raw), dtype=np.uint8)
    lens = np.array([len(r) for r in raw], dtype=np.int64)
    starts = np.r_[0, np.cumsum(lens)[:-1]].astype(np.int64)
    got = [dict(m) for m in properties_map(buf, starts, lens).to_pylist()]
    assert got == [{"KEYS": "b", "TAGS": "T"}, {"X": "v\x01w"}, {"TAGS": "A"}, {}]
    assert got == [codec.string_to_properties(p) for p in props]
