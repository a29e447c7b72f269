"""The store against files RocketMQ itself wrote (tests/golden, see its README)."""
from __future__ import annotations

import base64
from pathlib import Path

import pytest
from goldens import GOLDEN, GOLDEN_498, read_jsonl
from store_helpers import index_contents, record_bytes, same_tree

from rocketlake.store import Message, MessageStore
from rocketlake.store.codec import MAGIC_V1
from rocketlake.store.commitlog import CommitLog
from rocketlake.store.config import load_config
from rocketlake.store.single_process_rebuild import rebuild

SMALL_LOGS = {
    "rocketmq-pr3535": ("192.168.71.1:8123", GOLDEN / "rocketmq-pr3535/store"),
    "study": ("10.1.30.38:8123", GOLDEN / "study/unit_test_store"),
}


@pytest.mark.parametrize("name", sorted(SMALL_LOGS))
def test_small_golden_commitlog_field_for_field(name):
    store_host, root = SMALL_LOGS[name]
    log = CommitLog(root, load_config({"mappedFileSizeCommitLog": 8192}))
    log.files.load()
    scan = log.walk_records()
    recs = list(scan)
    assert len(recs) == 47
    for i, r in enumerate(recs):
        assert (r.commitlog_offset, r.physical_offset, r.size) == (i * 172, i * 172, 172)
        assert r.magic == MAGIC_V1 and r.topic == "abc" and r.queue_id == 0
        assert r.queue_offset == i
        assert r.body == b"Once, there was a chance for me!"
        assert r.born_host == "127.0.0.1:0" and r.store_host == store_host
        assert r.properties_string.endswith("\x02")  # RocketMQ <= 4.9.0 style
        p = r.properties
        assert p["0"] == "imagoodperson0" and p["TAGS"] == "TAG1" and p["KEYS"] == str(r.born_timestamp)
    # The 48th record does not fit: a BLANK at 8084 with TOTALSIZE 108, then end of data.
    raw = (root / "commitlog/00000000000000000000").read_bytes()
    assert int.from_bytes(raw[8084:8088], "big") == 108
    assert raw[8088:8092] == bytes.fromhex("CBD43194")
    assert scan.end == 8192 and scan.error is None
    log.close()


def _replay(root: Path, settings: dict) -> list:
    """Put golden messages.jsonl through our store with RocketMQ's store times and hosts."""
    msgs = read_jsonl(GOLDEN_498 / "messages.jsonl")
    results = read_jsonl(GOLDEN_498 / "results.jsonl")
    out = []
    with MessageStore(root, **settings, brokerIP1="10.0.0.7") as ms:
        for m, r in zip(msgs, results):
            out.append(ms.put(Message(
                topic=m["topic"], body=base64.b64decode(m["body_b64"]), queue_id=m["queue_id"],
                tags=m.get("tags"), keys=m.get("keys"), properties=m.get("properties"),
                delay_level=m.get("delay_level", 0), sys_flag=m.get("sys_flag", 0),
                born_timestamp=m["born_timestamp"],
                # messages.jsonl leaves out the driver's default born host
                born_host=m.get("born_host", "127.0.0.1:50000"), store_host=m.get("store_host"),
                store_timestamp=r["store_timestamp"])))
    return out


def test_replaying_golden_messages_writes_rocketmq_bytes(tmp_path, golden_settings):
    """Every CommitLog, ConsumeQueue and index byte equals what RocketMQ 4.9.8 wrote."""
    root = tmp_path / "replay"
    puts = _replay(root, golden_settings)
    for put, want in zip(puts, read_jsonl(GOLDEN_498 / "results.jsonl")):
        assert (put.msg_id, put.commitlog_offset, put.size, put.queue_offset, put.topic, put.queue_id) == (
            want["msg_id"], want["wrote_offset"], want["wrote_bytes"], want["logics_offset"],
            want["topic"], want["queue_id"])
    gold = GOLDEN_498 / "store"
    assert same_tree(gold, root, "commitlog") == []
    assert same_tree(gold, root, "consumequeue") == []
    # Index names are RocketMQ's wall clock at creation; ours are the opening message's store time.
    assert index_contents(root) == index_contents(gold)
    index_names = sorted(p.name for p in (root / "index").iterdir())
    gold_names = sorted(p.name for p in (gold / "index").iterdir())
    assert [n[:14] for n in index_names] == [n[:14] for n in gold_names]  # same second


def test_reopened_golden_store_serves_what_rocketmq_served(golden_store, golden_settings):
    lines = read_jsonl(GOLDEN_498 / "read.jsonl")
    served = [row for row in lines if "topic" in row]
    queues = [row for row in lines if "queue" in row]
    with MessageStore(golden_store, **golden_settings) as ms:
        assert ms.recovery.commitlog_end == lines[0]["max_phy_offset"]
        assert ms.recovery.dispatched == 0  # a clean store: nothing to catch up
        got = []
        for q in queues:
            assert (ms.min_offset(q["queue"], q["queue_id"]), ms.max_offset(q["queue"], q["queue_id"])) \
                == (q["min_offset"], q["max_offset"])
            offset = q["min_offset"]
            while offset < q["max_offset"]:
                g = ms.get(q["queue"], q["queue_id"], offset, 32)
                got.extend(g.messages)
                offset = g.next_begin_offset
        assert len(got) == len(served) == 374
        for m, want in zip(got, served):
            r = m.record
            assert (r.topic, r.queue_id, m.queue_offset, r.commitlog_offset, r.size, r.body_crc, r.sys_flag,
                    r.born_host, r.store_host, r.born_timestamp, r.store_timestamp, r.msg_id,
                    m.tags_code, r.properties) == (
                want["topic"], want["queue_id"], want["queue_offset"], want["commitlog_offset"],
                want["size"], want["body_crc"], want["sys_flag"], want["born_host"], want["store_host"],
                want["born_timestamp"], want["store_timestamp"], want["msg_id"], want["tags_code"],
                want["properties"])
            assert base64.b64encode(r.body).decode() == want["body_b64"]
            raw = record_bytes(ms, r.commitlog_offset)
            assert base64.b64encode(raw).decode() == want["record_b64"]


def test_key_query_matches_rocketmq(golden_store, golden_settings):
    want = [row for row in read_jsonl(GOLDEN_498 / "query-orders-cust-3.jsonl") if "msg_id" in row]
    with MessageStore(golden_store, read_only=True, **golden_settings) as ms:
        got = ms.query("orders", "cust-3", max_num=64)
        assert [(r.commitlog_offset, r.msg_id, r.queue_id, r.queue_offset, r.store_timestamp)
                for r in got] == [
            (w["commitlog_offset"], w["msg_id"], w["queue_id"], w["queue_offset"], w["store_timestamp"])
            for w in want]
        # A time range cuts the answer; maxNum caps it.
        lo, hi = want[1]["store_timestamp"], want[3]["store_timestamp"]
        assert [r.commitlog_offset for r in ms.query("orders", "cust-3", 64, lo, hi)] == [
            w["commitlog_offset"] for w in want[1:4]]
        # maxNum caps the newest-first walk: the two newest matches.
        assert [r.commitlog_offset for r in ms.query("orders", "cust-3", max_num=2)] == [
            w["commitlog_offset"] for w in want[-2:]]
        # The UNIQ_KEY is indexed too.
        assert ([r.commitlog_offset for r in ms.query("orders", want[0]["uniq_key"])]
                == [want[0]["commitlog_offset"]])
        # The same key under another topic finds that topic's messages only: RocketMQ's put results
        # for "payments" with "cust-3" among its KEYS, ROLLBACK (not indexed) left out.
        payments = [r["wrote_offset"] for r in read_jsonl(GOLDEN_498 / "results.jsonl")
                    if r["topic"] == "payments" and r["sys_flag"] & 0xC != 0xC
                    and "cust-3" in r["properties_string"].split("KEYS\x01")[1].split("\x02")[0].split(" ")]
        assert len(payments) > 1
        assert [r.commitlog_offset for r in ms.query("payments", "cust-3")] == payments


def test_lookup_by_msg_id(golden_store, golden_settings):
    results = read_jsonl(GOLDEN_498 / "results.jsonl")
    with MessageStore(golden_store, read_only=True, **golden_settings) as ms:
        for r in results[::37]:
            rec = ms.lookup(r["msg_id"])
            assert ((rec.commitlog_offset, rec.topic, rec.queue_id)
                    == (r["wrote_offset"], r["topic"], r["queue_id"]))


def test_rebuild_from_golden_commitlog_is_byte_identical(tmp_path, golden_settings):
    out = tmp_path / "out"
    stats = rebuild(GOLDEN_498 / "store", out, **golden_settings)
    assert stats.records == 400 and stats.stop_reason is None
    assert same_tree(GOLDEN_498 / "store", out, "consumequeue") == []
    assert index_contents(out) == index_contents(GOLDEN_498 / "store")
