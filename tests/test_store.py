"""MessageStore behaviour: layout, rolls, dispatch bytes, reads, bad input, lock, config files."""
from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
import reference
from goldens import GOLDEN_498

from rocketlake.store import (
    TRANSACTION_COMMIT,
    TRANSACTION_PREPARED,
    TRANSACTION_ROLLBACK,
    GetStatus,
    Message,
    MessageRejected,
    MessageStore,
    NotAStoreError,
    StoreFormatError,
    StoreLockedError,
    codec,
)
from rocketlake.store.config_files import read_config, read_consumer_offsets
from rocketlake.store.lockfile import is_locked
from rocketlake.store.message_store import DamagedRecordsSkipped

SMALL = dict(mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=200, maxHashSlotNum=16,
             maxIndexNum=20)


def _decode_all(root: Path, file_size: int):
    """Every record of the CommitLog, decoded file by file (BLANK ends a file)."""
    out = []
    for f in sorted((root / "commitlog").iterdir()):
        raw, start, pos = f.read_bytes(), int(f.name), 0
        assert len(raw) == file_size
        while pos < file_size:
            try:
                r = codec.decode_record(raw, pos, start)
            except codec.CorruptRecordError:
                assert raw[pos:pos + 8] == bytes(8), f"garbage at {start + pos}"
                break
            if isinstance(r, int):
                assert pos + r == file_size  # BLANK fills the rest of the file
                break
            out.append(r)
            pos += r.size
    return out


def _mixed_messages(n: int, seed: int = 1) -> list[Message]:
    rnd = random.Random(seed)
    msgs = []
    for i in range(n):
        kind = rnd.random()
        m = Message(topic=rnd.choice(["orders", "pay", "%RETRY%g1"]), body=os.urandom(rnd.randrange(0, 300)),
                    queue_id=rnd.randrange(3), tags=rnd.choice([None, "TagA", "TagB", "é-tag"]),
                    keys=rnd.choice([None, f"k{i}", [f"k{i}", f"c{i % 7}"], f"k{i}  c{i % 5} "]),
                    properties={"UNIQ_KEY": f"U{i:030d}"} if rnd.random() < 0.5 else None,
                    born_host=rnd.choice([None, "10.1.2.3:4567", "[2001:db8::7]:80"]),
                    store_timestamp=1_700_000_000_000 + i * 700)
        if kind < 0.1:
            m.delay_level = rnd.randrange(1, 25)  # above 18 clamps to 18
        elif kind < 0.2:
            m.sys_flag = rnd.choice([TRANSACTION_PREPARED, TRANSACTION_COMMIT, TRANSACTION_ROLLBACK])
        msgs.append(m)
    return msgs


@pytest.mark.parametrize("batched", [False, True])
def test_consumequeue_and_index_bytes_match_independent_reference(tmp_path, batched):
    root = tmp_path / "s"
    msgs = _mixed_messages(400)
    with MessageStore(root, **SMALL) as ms:
        if batched:
            for i in range(0, len(msgs), 37):
                ms.put_batch(msgs[i:i + 37])
        else:
            for m in msgs:
                ms.put(m)
    records = _decode_all(root, 4096)
    assert len(records) == 400
    want_cq = reference.consume_queues(records, 200)
    got_cq = {str(p.relative_to(root / "consumequeue")): p.read_bytes()
              for p in (root / "consumequeue").rglob("*") if p.is_file()}
    assert got_cq == want_cq
    want_index = reference.index_files(records, 16, 20)
    got_index = [(p.name, p.read_bytes()) for p in sorted((root / "index").iterdir())]
    assert [n for n, _ in got_index] == [n for n, _ in want_index]
    assert got_index == want_index
    assert len(want_index) > 10  # the index rolled many times


def test_put_and_put_batch_write_identical_bytes(tmp_path):
    msgs = _mixed_messages(300, seed=5)
    with MessageStore(tmp_path / "a", **SMALL) as a:
        one = [a.put(m) for m in msgs]
    with MessageStore(tmp_path / "b", **SMALL) as b:
        many = b.put_batch(msgs)
    assert one == many
    for sub in ("commitlog", "consumequeue", "index"):
        fa = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a" / sub).rglob("*") if p.is_file())
        fb = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b" / sub).rglob("*") if p.is_file())
        assert fa == fb
        assert all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in fa)


def test_commitlog_rolls_with_blank_exactly_when_rocketmq_would(tmp_path):
    # 91 + body + topic(1) + props(0): pick bodies so the 8-byte rule decides the roll.
    with MessageStore(tmp_path / "s", mappedFileSizeCommitLog=1000) as ms:
        r1 = ms.put(Message("t", b"x" * 408))         # 500 bytes: 0..500
        r2 = ms.put(Message("t", b"x" * 400))         # 492 bytes: ends at 992, leaves exactly 8
        r3 = ms.put(Message("t", b""))                 # 92 bytes: 992 + 92 + 8 > 1000 -> roll
    assert (r1.commitlog_offset, r1.size, r2.commitlog_offset, r2.size) == (0, 500, 500, 492)
    assert (r3.commitlog_offset, r3.size) == (1000, 92)
    raw = (tmp_path / "s/commitlog/00000000000000000000").read_bytes()
    assert raw[992:1000] == (8).to_bytes(4, "big") + bytes.fromhex("CBD43194")
    assert sorted(p.name for p in (tmp_path / "s/commitlog").iterdir()) == [
        "00000000000000000000", "00000000000000001000"]
    assert os.path.getsize(tmp_path / "s/commitlog/00000000000000001000") == 1000


def test_record_fields_msg_id_and_transactions(tmp_path):
    with MessageStore(tmp_path / "s", brokerIP1="192.168.0.9", listenPort=10911) as ms:
        r = ms.put(Message("orders", b"hello", 2, tags="TagA", keys=["k1", "k2"], flag=7,
                           born_timestamp=1234, born_host="[fe80::1]:99"))
        p = ms.put(Message("orders", b"half", 2, sys_flag=TRANSACTION_PREPARED))
        c = ms.put(Message("orders", b"commit", 2, sys_flag=TRANSACTION_COMMIT))
        rb = ms.put(Message("orders", b"rollback", 2, keys="rk", sys_flag=TRANSACTION_ROLLBACK))
        assert r.msg_id == "C0A800090000" + "2A9F" + f"{r.commitlog_offset:016X}"
        rec = ms.lookup(r.msg_id)
        assert (rec.body, rec.flag, rec.born_timestamp, rec.born_host, rec.store_host) == (
            b"hello", 7, 1234, "[fe80:0:0:0:0:0:0:1]:99", "192.168.0.9:10911")
        assert rec.sys_flag == codec.FLAG_BORNHOST_V6
        assert rec.size == 91 + 12 + 5 + 6 + 20  # IPv6 born host; properties TAGS\x01TagA\x02KEYS\x01k1 k2
        # PREPARED and ROLLBACK take queue offset 0 and no ConsumeQueue unit; COMMIT takes the next.
        assert (r.queue_offset, p.queue_offset, c.queue_offset, rb.queue_offset) == (0, 0, 1, 0)
        assert ms.max_offset("orders", 2) == 2
        assert ms.query("orders", "rk") == []  # ROLLBACK is not indexed


def test_delay_message_goes_to_schedule_topic(tmp_path):
    with MessageStore(tmp_path / "s") as ms:
        r = ms.put(Message("orders", b"later", 3, tags="TagA", delay_level=4, store_timestamp=10_000))
        clamped = ms.put(Message("orders", b"much later", 1, delay_level=99, store_timestamp=20_000))
        assert (r.topic, r.queue_id, clamped.queue_id) == ("SCHEDULE_TOPIC_XXXX", 3, 17)
        g = ms.get("SCHEDULE_TOPIC_XXXX", 3, 0)
        m = g.messages[0]
        assert m.tags_code == 10_000 + 30_000  # level 4 = 30 s
        assert m.record.properties["REAL_TOPIC"] == "orders" and m.record.properties["REAL_QID"] == "3"
        late = ms.get("SCHEDULE_TOPIC_XXXX", 17, 0).messages[0]
        assert late.tags_code == 20_000 + 7_200_000
        # CommitLog.asyncPutMessage stores the highest configured level (18 here), not 99:
        # its record: the fixed 91 bytes, a 10-byte body, the 19-byte topic and the properties
        assert late.record.properties["DELAY"] == "18"
        assert late.record.size == 91 + 10 + 19 + len("DELAY\x0118\x02REAL_TOPIC\x01orders\x02REAL_QID\x011")
        assert ms.max_offset("orders", 3) == 0


def test_get_statuses_and_next_offsets(tmp_path):
    with MessageStore(tmp_path / "s") as ms:
        assert ms.get("orders", 0, 0).status == GetStatus.NO_MATCHED_LOGIC_QUEUE
        ms.put_batch([Message("orders", f"m{i}".encode(), 0, tags="A" if i % 2 else "B") for i in range(10)])
        g = ms.get("orders", 0, 0, max_msgs=4)
        assert (g.status, g.next_begin_offset, len(g.messages)) == (GetStatus.FOUND, 4, 4)
        assert [m.queue_offset for m in g.messages] == [0, 1, 2, 3]
        g = ms.get("orders", 0, 10)
        assert (g.status, g.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 10)
        g = ms.get("orders", 0, 15)  # DefaultMessageStore.getMessage (4.9.4+): next = max, even when min == 0
        assert (g.status, g.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 10)
        g = ms.get("orders", 0, 0, tags="A")
        assert [m.record.body for m in g.messages] == [f"m{i}".encode() for i in range(1, 10, 2)]
        assert g.next_begin_offset == 10
        g = ms.get("orders", 0, 0, tags="A || B", max_msgs=3)
        assert len(g.messages) == 3
        g = ms.get("orders", 0, 9, tags="nope")
        assert (g.status, g.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 10)


def test_tag_filter_checks_the_real_tag_on_hash_collision(tmp_path):
    # "Aa" and "BB" have the same Java hashCode (2112): the tagsCode alone cannot tell them apart.
    assert codec.java_hash("Aa") == codec.java_hash("BB") == 2112  # 65*31+97 == 66*31+66
    with MessageStore(tmp_path / "s") as ms:
        ms.put_batch([Message("t", b"1", tags="Aa"), Message("t", b"2", tags="BB")])
        assert [m.record.body for m in ms.get("t", 0, 0, tags="BB").messages] == [b"2"]


def test_query_checks_real_key_and_time_range(tmp_path):
    # "Aa" and "BB" collide in the index too: the real key decides.
    with MessageStore(tmp_path / "s") as ms:
        ms.put(Message("t", b"1", keys="Aa", store_timestamp=1_000_000))
        ms.put(Message("t", b"2", keys="BB", store_timestamp=2_000_000))
        ms.put(Message("t", b"3", keys="BB", store_timestamp=3_000_000))
        assert [r.body for r in ms.query("t", "BB")] == [b"2", b"3"]
        assert [r.body for r in ms.query("t", "BB", begin=2_500_000)] == [b"3"]
        assert [r.body for r in ms.query("t", "BB", max_num=1)] == [b"3"]
        assert ms.query("other", "BB") == []


def test_offset_by_time(tmp_path):
    with MessageStore(tmp_path / "s") as ms:
        ms.put_batch([Message("t", b"x", store_timestamp=1000 * (i + 1)) for i in range(10)])
        assert ms.offset_by_time("t", 0, 3000) == 2          # exact
        assert ms.offset_by_time("t", 0, 3400) == 2          # nearer neighbour below
        assert ms.offset_by_time("t", 0, 3600) == 3          # nearer neighbour above
        assert ms.offset_by_time("t", 0, 0) == 0
        assert ms.offset_by_time("t", 0, 99_000) == 9


def test_reopen_continues_queue_offsets_and_reads(tmp_path):
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        ms.put_batch([Message("t", b"a" * 50, keys=f"k{i}") for i in range(100)])
    with MessageStore(root, **SMALL) as ms:
        r = ms.put(Message("t", b"after", keys="k-after"))
        assert r.queue_offset == 100
        assert [x.body for x in ms.query("t", "k-after")] == [b"after"]
        assert [x.body for x in ms.query("t", "k5")] == [b"a" * 50]


def test_a_full_consumequeue_file_is_unmapped_and_still_read(tmp_path):
    """A queue keeps only its last ConsumeQueue file mapped: 100 units in files of 30 (600 bytes)
    fill three files, which are unmapped once full; every unit reads back all the same."""
    with MessageStore(tmp_path / "s", mappedFileSizeConsumeQueue=600) as ms:
        ms.put_batch([Message("t", b"m%d" % i) for i in range(100)])
        files = ms.queues[("t", 0)].files.files
        assert [(mf.wrote, mf.mapped) for mf in files] == [(600, False)] * 3 + [(200, True)]
        bodies: list[bytes] = []
        while len(bodies) < 100:  # a get reads within one ConsumeQueue file, as RocketMQ's
            bodies += [m.record.body for m in ms.get("t", 0, len(bodies), 100).messages]
        assert bodies == [b"m%d" % i for i in range(100)]


# --- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize("msg, match", [
    (Message("bad topic", b"x"), "topic"),
    (Message("x" * 128, b"x"), "127"),
    (Message("t", "text"), "bytes"),
    (Message("t", b"x" * 101), "maxMessageSize"),
    (Message("t", b"x", queue_id=-1), "queue_id"),
    (Message("t", b"x", keys="a\x01b"), "separator"),
    (Message("t", b"x", tags="a\x02b"), "separator"),
    (Message("t", b"x", properties={"a\x01": "b"}), "separator"),
    (Message("t", b"x", properties={"a": "b\x02"}), "separator"),
    (Message("t", b"x", properties={"big": "v" * 33000}), "32767"),
    (Message("t", b"x", born_host="nonsense"), "host"),
    (Message("t", b"x", sys_flag=0x10), "sys_flag"),
    (Message("t", b"x", flag="1"), "flag"),
])
def test_bad_messages_are_rejected_and_nothing_is_written(tmp_path, msg, match):
    root = tmp_path / "s"
    with MessageStore(root, maxMessageSize=100) as ms:
        ms.put(Message("t", b"kept"))
        before = ms.commitlog.max_offset
        with pytest.raises(MessageRejected, match=match):
            ms.put(msg)
        with pytest.raises(MessageRejected) as e:
            ms.put_batch([Message("t", b"fine"), msg])
        assert e.value.index == 1
        assert ms.commitlog.max_offset == before
        assert [m.record.body for m in ms.get("t", 0, 0).messages] == [b"kept"]


def test_record_larger_than_a_file_is_rejected(tmp_path):
    with MessageStore(tmp_path / "s", mappedFileSizeCommitLog=512) as ms:
        with pytest.raises(MessageRejected, match="does not fit"):
            ms.put(Message("t", b"x" * 500))


def test_second_writer_gets_a_clear_error(tmp_path):
    root = tmp_path / "s"
    with MessageStore(root):
        assert is_locked(root)
        with pytest.raises(StoreLockedError, match="another writer"):
            MessageStore(root)
    assert not is_locked(root)
    assert (root / "lock").read_bytes() == b"lock" and not (root / "abort").exists()


def test_non_store_dir_missing_path_and_wrong_size_file(tmp_path):
    other = tmp_path / "photos"
    other.mkdir()
    (other / "cat.jpg").write_bytes(b"meow")
    with pytest.raises(NotAStoreError, match=f"{other}: not a RocketMQ store"):
        MessageStore(other)
    assert sorted(os.listdir(other)) == ["cat.jpg"]
    with pytest.raises(FileNotFoundError):
        MessageStore(tmp_path / "missing", create=False)
    root = tmp_path / "s"
    with MessageStore(root, mappedFileSizeCommitLog=4096) as ms:
        ms.put(Message("t", b"x"))
    raw = (root / "commitlog/00000000000000000000").read_bytes()
    with pytest.raises(StoreFormatError, match="4096 bytes, expected 8192"):
        MessageStore(root, mappedFileSizeCommitLog=8192)
    assert (root / "commitlog/00000000000000000000").read_bytes() == raw
    (root / "commitlog/junk").write_bytes(b"")
    with pytest.raises(StoreFormatError, match="20 digits"):
        MessageStore(root, mappedFileSizeCommitLog=4096)


def test_unknown_setting_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="unknown store setting 'flushDiskTyp'"):
        MessageStore(tmp_path / "s", flushDiskTyp="SYNC_FLUSH")


# --- config files ---------------------------------------------------------------------------------
def test_consumer_offsets_fastjson_round_trip_and_bak_fallback(tmp_path):
    root = tmp_path / "s"
    with MessageStore(root) as ms:
        ms.commit_offsets("g1", "TopicTest", {0: 250, 1: 249})
        ms.commit_offsets("g1", "TopicTest", {1: 250})
        ms.commit_offsets("g1", "%RETRY%g1", {0: 0})
    text = (root / "config/consumerOffset.json").read_text()
    assert text == ('{\n\t"offsetTable":{\n\t\t"TopicTest@g1":{0:250,1:250\n\t\t},'
                    '\n\t\t"%RETRY%g1@g1":{0:0\n\t\t}\n\t}\n}')
    assert read_consumer_offsets(root) == {("TopicTest", "g1"): {0: 250, 1: 250}, ("%RETRY%g1", "g1"): {0: 0}}
    (root / "config/consumerOffset.json").write_text("{broken")
    # .bak holds the file as it was before the last write (no %RETRY% entry yet)
    assert read_consumer_offsets(root) == {("TopicTest", "g1"): {0: 250, 1: 250}}


def test_reads_real_broker_config_files():
    from goldens import GOLDEN
    cfg = GOLDEN / "study/store/config"
    offsets = read_consumer_offsets(cfg.parent)
    assert offsets[("TopicTest", "please_rename_unique_group_name_4")] == {0: 250, 1: 250, 2: 250, 3: 250}
    assert read_config(cfg / "topics.json")["topicConfigTable"]["TopicTest"]["readQueueNums"] == 4


def test_cli_ingest_and_dump_round_trip(tmp_path, capsys):
    from rocketlake.jobs.cli import main
    events = tmp_path / "e.jsonl"
    events.write_text("\n".join(json.dumps(e) for e in [
        {"topic": "orders", "body": "hello", "keys": "k1 k2", "tags": "TagA", "queue_id": 1},
        {"topic": "orders", "body_b64": "AAEC", "keys": ["k3"], "properties": {"x": "y"}},
    ]) + "\n")
    store = str(tmp_path / "s")
    assert main(["ingest", "--store", store, "--create", str(events)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["messages"] == 2
    assert main(["dump", "commitlog", "--store", store]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["body_b64"] for r in rows] == ["aGVsbG8=", "AAEC"]
    assert rows[0]["properties"] == {"TAGS": "TagA", "KEYS": "k1 k2"}
    assert rows[1]["msg_id"] == "7F00000100002A9F" + f"{rows[1]['commitlog_offset']:016X}"
    assert main(["query", "--store", store, "--topic", "orders", "--key", "k3"]) == 0
    assert json.loads(capsys.readouterr().out)["body_b64"] == "AAEC"
    (tmp_path / "bad.jsonl").write_text('{"topic": "orders", "body": "ok"}\n'
                                        '{"topic": "bad topic", "body": "x"}\n')
    assert main(["ingest", "--store", store, str(tmp_path / "bad.jsonl")]) == 2
    assert "line 2" in capsys.readouterr().err
    assert main(["get", "--store", store, "--topic", "orders", "--queue", "0"]) == 0
    head = json.loads(capsys.readouterr().out.splitlines()[0])
    assert head["max_offset"] == 1  # all or nothing: the good line before the bad one was not stored


def test_an_ipv6_broker_address_is_stored_as_an_ipv6_store_host(tmp_path):
    """brokerIP1 "::1": every record carries a 16-byte STOREHOST and BORNHOST (the default born
    host is the store's address) with SYSFLAG bits 0x10 | 0x20 (docs/FORMAT.md §2, §4), and a
    56-hex-char msgId, whichever way it was put."""
    with MessageStore(tmp_path / "s", create=True, brokerIP1="::1") as ms:
        results = [ms.put(Message(topic="T", body=b"one")),
                   *ms.put_batch([Message(topic="T", body=b"two", tags="A")])]
        for r in results:
            rec = ms.read(r.commitlog_offset)
            assert rec.sys_flag & 0x30 == 0x30 and rec.size == 91 + 24 + len(rec.body) + 1 + len(
                rec.properties_string.encode())
            assert rec.store_host == "[0:0:0:0:0:0:0:1]:10911" and len(r.msg_id) == 56
            assert ms.lookup(r.msg_id).body == rec.body


def test_store_times_are_those_of_the_messages_get_returns(golden_store):
    """``store_times`` answers per (topic, queue, offset) what ``get`` returns there: the store
    times RocketMQ 4.9.8 recorded (tests/golden/rocketmq-4.9.8/read.jsonl), None for a record
    whose body CRC no longer matches, a unit pointing at another queue offset's record, a
    negative offset, the max offset and a queue the store does not have."""
    times = {(r["topic"], r["queue_id"], r["queue_offset"]): r["store_timestamp"]
             for r in map(json.loads, (GOLDEN_498 / "read.jsonl").read_text().splitlines())
             if "topic" in r}
    log = golden_store / "commitlog" / "00000000000000000000"
    with open(log, "r+b") as f:  # orders/0 offset 1: the record at 2658, its BODYCRC (bytes 8-11)
        f.seek(2658 + 8)
        crc = f.read(4)
        f.seek(2658 + 8)
        f.write(bytes(b ^ 0xFF for b in crc))
    with open(golden_store / "consumequeue" / "orders" / "0" / "00000000000000000000", "r+b") as f:
        f.seek(2 * 20)  # orders/0 offset 2 points at offset 3's record (11436, 259 bytes)
        f.write((11436).to_bytes(8, "big") + (259).to_bytes(4, "big"))
    with pytest.warns(DamagedRecordsSkipped), MessageStore(golden_store, read_only=True) as ms:
        high = ms.max_offset("orders", 0)
        got = ms.store_times([("orders", 0, 0), ("orders", 0, 1), ("orders", 0, 2), ("orders", 0, 3),
                              ("orders", 0, -1), ("orders", 0, high), ("orders", 0, high - 1),
                              ("nothing", 0, 0)])
    assert got == [times[("orders", 0, 0)], None, None, times[("orders", 0, 3)], None, None,
                   times[("orders", 0, high - 1)], None]
    assert times[("orders", 0, 0)] == 1795345574046 and times[("orders", 0, 3)] == 1795345574101
