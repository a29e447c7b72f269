"""Compacted segments: byte-copied records, latest value per key, translated consumer offsets."""
from __future__ import annotations

import pytest
from store_helpers import record_bytes

from rocketlake.store import GetStatus, Message, MessageRejected, MessageStore
from rocketlake.store.compaction import (
    KeptRecord,
    SegmentMeta,
    compaction_topics,
    segment_path,
    write_segment,
)
from rocketlake.store.config_files import read_consumer_offsets, write_config

SMALL = dict(mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=200)


def test_segment_keeps_latest_per_key_and_translates_offsets(tmp_path):
    root = tmp_path / "s"
    # queue 0: keys a b a c b a -> latest: c@3, b@4, a@5 (by original queue offset)
    keys = ["a", "b", "a", "c", "b", "a"]
    with MessageStore(root, **SMALL) as ms:
        puts = ms.put_batch([Message("state", f"{k}{i}".encode(), 0, keys=k, tags="T")
                             for i, k in enumerate(keys)])
        ms.commit_offsets("g1", "state", {0: 2})   # had read a0, b1
        ms.commit_offsets("g2", "state", {0: 6})   # read everything
        raws = {p.queue_offset: record_bytes(ms, p.commitlog_offset) for p in puts}
    kept = [KeptRecord(0, q, raws[q]) for q in (3, 4, 5)]
    report = write_segment(root, "state", kept, source_end=puts[-1].commitlog_offset + puts[-1].size, **SMALL)
    assert report.kept == 3
    assert report.translated_offsets == {"g1": {0: (2, 0)}, "g2": {0: (6, 3)}}
    seg = segment_path(root, "state")
    assert seg.is_symlink()
    with MessageStore(seg, read_only=True, **SMALL) as s:
        g = s.get("state", 0, 0)
        assert g.status == GetStatus.FOUND
        assert [m.record.body for m in g.messages] == [b"c3", b"b4", b"a5"]
        assert [m.queue_offset for m in g.messages] == [0, 1, 2]
        # bytes equal the originals except QUEUEOFFSET (@20) and PHYSICALOFFSET (@28)
        for m, q in zip(g.messages, (3, 4, 5)):
            mine = record_bytes(s, m.record.commitlog_offset)
            assert mine[:20] + mine[36:] == raws[q][:20] + raws[q][36:]
        assert [r.body for r in s.query("state", "a")] == [b"a5"]
    assert read_consumer_offsets(seg) == {("state", "g1"): {0: 0}, ("state", "g2"): {0: 3}}
    assert SegmentMeta.load(root, "state").origin == {0: [3, 4, 5]}


def test_new_segment_swaps_in_and_removes_the_old(tmp_path):
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        p = ms.put(Message("state", b"v1", keys="k"))
        raw = record_bytes(ms, p.commitlog_offset)
    write_segment(root, "state", [KeptRecord(0, 0, raw)], 100, **SMALL)
    first = segment_path(root, "state").resolve()
    write_segment(root, "state", [KeptRecord(0, 0, raw)], 200, **SMALL)
    second = segment_path(root, "state").resolve()
    assert first != second and not first.exists() and second.exists()
    assert SegmentMeta.load(root, "state").source_end == 200


def test_put_records_rejects_garbage_and_writes_nothing(tmp_path):
    with MessageStore(tmp_path / "s") as ms:
        p = ms.put(Message("t", b"hello"))
        good = record_bytes(ms, p.commitlog_offset)
        bad = bytearray(good)
        bad[-10] ^= 0xFF  # in the properties/topic area -> length or UTF-8 check, or CRC if body
        corrupt_body = bytearray(good)
        corrupt_body[88] ^= 0xFF
        before = ms.commitlog.max_offset
        for raw in (b"\x00" * 100, bytes(corrupt_body), good + b"extra"):
            with pytest.raises(MessageRejected):
                ms.put_records([good, raw])
        assert ms.commitlog.max_offset == before
        r = ms.put_records([good])[0]
        assert (r.commitlog_offset, r.queue_offset) == (before, 1)


def test_compaction_topics_from_conf_and_topics_json(tmp_path):
    root = tmp_path / "s"
    write_config(root / "config/topics.json", {"topicConfigTable": {
        "user-state": {"topicName": "user-state", "attributes": {"+cleanup.policy": "COMPACTION"}},
        "orders": {"topicName": "orders", "attributes": {"cleanup.policy": "DELETE"}},
        "plain": {"topicName": "plain"}}})
    assert compaction_topics(root, ["prices"]) == ["prices", "user-state"]
    assert compaction_topics(tmp_path / "empty") == []
