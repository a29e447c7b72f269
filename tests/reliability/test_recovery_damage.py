"""Damaged ConsumeQueues and index files are rebuilt from the CommitLog on open, never cut.

A cleanly closed store is damaged in one derived file and reopened for writing, normally and
abnormally (``abort`` present). Every message must then be found again: by ``get`` at its queue
offset with the right body, by ``query`` on its key, and the next put must continue after the
highest queue offset the CommitLog holds. A rebuilt index must be byte for byte the index that
was there before the damage (the index is a pure function of the CommitLog).
"""
from __future__ import annotations

import random
import shutil
import struct
from pathlib import Path

import pytest
from durability_check import SETTINGS, message_for

from rocketlake.jobs.cli import main
from rocketlake.store import GetStatus, Message, MessageStore, codec

TOPIC = "orders"
SMALL_INDEX = {**SETTINGS, "maxIndexNum": 400}  # 399 keys a file: 3,000 keys fill 8 files


def body_of(i: int) -> bytes:
    return message_for(f"k{i}")[3]


@pytest.fixture(scope="module")
def queue_store(tmp_path_factory) -> Path:
    """250 messages in queue 0 of one topic, each followed by one in queue 1 (so another queue
    always holds the newest record), closed cleanly."""
    root = tmp_path_factory.mktemp("cq") / "store"
    with MessageStore(root, **SETTINGS) as ms:
        for i in range(250):
            assert ms.put(Message(TOPIC, body_of(i), queue_id=0, keys=f"k{i}")).queue_offset == i
            ms.put(Message(TOPIC, b"other", queue_id=1))
    return root


def damage_unit(root: Path, unit: int, kind: str) -> None:
    """Overwrite one ConsumeQueue unit's commitlog offset / size in place."""
    path = root / "consumequeue" / TOPIC / "0" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    off, size, tags = struct.unpack_from(">qiq", data, unit * 20)
    new = {"past_end": (1 << 40, size, tags),         # a record beyond the CommitLog
           "mid_record": (off + 7, size, tags),        # inside its record: no record starts there
           "zeros": (0, 0, 0),                         # a lost page
           "garbage": (-123456789, -5, 42)}[kind]
    struct.pack_into(">qiq", data, unit * 20, *new)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("abnormal", [False, True])
@pytest.mark.parametrize("kind", ["past_end", "mid_record", "zeros", "garbage"])
@pytest.mark.parametrize("unit", [5, 0, 248])
def test_damaged_unit_is_rebuilt_from_the_commitlog(queue_store: Path, tmp_path: Path, unit: int,
                                                    kind: str, abnormal: bool) -> None:
    root = tmp_path / "store"
    shutil.copytree(queue_store, root)
    damage_unit(root, unit, kind)
    if abnormal:
        (root / "abort").touch()
    with MessageStore(root, **SETTINGS) as ms:
        assert ms.recovery.rebuilt, "the damage went unreported"
        assert ms.max_offset(TOPIC, 0) == 250
        for q in range(250):
            got = ms.get(TOPIC, 0, q, 1)
            assert got.status == GetStatus.FOUND, (q, got.status)
            assert got.messages[0].record.body == body_of(q), q
            assert got.messages[0].record.queue_offset == q
        assert ms.max_offset(TOPIC, 1) == 250
        assert ms.put(Message(TOPIC, b"next", queue_id=0)).queue_offset == 250
    with MessageStore(root, **SETTINGS) as ms:  # and it stays so
        assert ms.max_offset(TOPIC, 0) == 251 and not ms.recovery.rebuilt


@pytest.fixture(scope="module")
def keyed_store(tmp_path_factory) -> tuple[Path, dict[str, bytes]]:
    """3,000 keyed messages over 8 small index files, closed cleanly; and the index files' bytes."""
    root = tmp_path_factory.mktemp("index") / "store"
    with MessageStore(root, **SMALL_INDEX) as ms:
        for i in range(3000):
            topic, qid, tags, body = message_for(f"k{i}")
            ms.put(Message(topic, body, queue_id=qid, tags=tags, keys=f"k{i}"))
    files = {p.name: p.read_bytes() for p in sorted((root / "index").iterdir())}
    assert len(files) == 8
    return root, files


@pytest.mark.parametrize("abnormal", [False, True])
@pytest.mark.parametrize("header", ["random", "zeros", "count_too_big"])
@pytest.mark.parametrize("which", [-1, 3, 0])
def test_damaged_index_header_is_rebuilt_from_the_commitlog(keyed_store, tmp_path: Path, which: int,
                                                            header: str, abnormal: bool) -> None:
    src, before = keyed_store
    root = tmp_path / "store"
    shutil.copytree(src, root)
    path = root / "index" / sorted(before)[which]
    data = bytearray(path.read_bytes())
    data[:40] = {"random": random.Random(f"{which}{abnormal}").randbytes(40),
                 "zeros": bytes(40),
                 "count_too_big": data[:36] + struct.pack(">i", 401)}[header]
    path.write_bytes(bytes(data))
    if abnormal:
        (root / "abort").touch()
    with MessageStore(root, **SMALL_INDEX) as ms:
        assert [r for r in ms.recovery.rebuilt if path.name in r], "the damage went unreported"
        for i in range(3000):
            topic, _, _, body = message_for(f"k{i}")
            assert [r.body for r in ms.query(topic, f"k{i}")] == [body], f"k{i}"
    assert {p.name: p.read_bytes() for p in sorted((root / "index").iterdir())} == before


def as_v2(raw: bytes) -> bytes:
    """A v1 record made a v2 record (docs/FORMAT.md §2): MAGIC 0xDAA320AB, a 2-byte TOPICLEN,
    TOTALSIZE + 1."""
    body_len = struct.unpack_from(">i", raw, 84)[0]  # BODYLEN of IPv4 hosts
    t = 88 + body_len
    v2 = bytearray(raw[:t] + struct.pack(">h", raw[t]) + raw[t + 1:])
    struct.pack_into(">iI", v2, 0, len(v2), 0xDAA320AB)
    return bytes(v2)


def test_v2_magic_store_is_not_damage_after_a_crash(tmp_path: Path) -> None:
    """A store of v2 records (RocketMQ 5.x), left with ``abort`` as after kill -9: every unit
    points at its record's head, so recovery reports nothing and re-dispatches nothing before its
    start file, the ConsumeQueues unchanged byte for byte."""
    v1, root = tmp_path / "v1", tmp_path / "store"
    with MessageStore(v1, **SETTINGS) as ms:
        placed = [ms.put(Message(TOPIC, body_of(i), queue_id=i % 2, keys=f"k{i}")) for i in range(1000)]
    log = b"".join(p.read_bytes() for p in sorted((v1 / "commitlog").iterdir()))
    with MessageStore(root, **SETTINGS) as ms:
        ms.put_records([as_v2(log[p.commitlog_offset:p.commitlog_offset + p.size]) for p in placed])
    files = sorted((root / "commitlog").iterdir())
    assert len(files) >= 3 and log[4:8] == bytes.fromhex("daa320a7")
    assert files[0].read_bytes()[4:8] == bytes.fromhex("daa320ab")
    queues = {p: p.read_bytes() for p in sorted((root / "consumequeue").rglob("0*")) if p.is_file()}
    (root / "abort").touch()
    with MessageStore(root, **SETTINGS) as ms:
        assert ms.recovery.rebuilt == []
        assert ms.recovery.dispatched_from == ms.recovery.scanned_from  # nothing further back
        assert ms.max_offset(TOPIC, 0) == ms.max_offset(TOPIC, 1) == 500
        got = ms.get(TOPIC, 0, 499, 1).messages[0].record
        assert got.magic == codec.MAGIC_V2 and got.body == body_of(998)
    assert {p: p.read_bytes() for p in sorted((root / "consumequeue").rglob("0*")) if p.is_file()} == queues


def test_unit_of_the_pre_blank_size_mid_queue_is_damage(tmp_path: Path) -> None:
    """34 messages in one queue, unit 17's size made Integer.MAX_VALUE (the pre-blank units'
    size; only a queue's leading units may be pre-blank). Read-only, ``get`` at 17 skips that unit
    and serves 18..33 with max offset 34 (a consumer is not stuck before 17 reachable messages);
    a writer open reports unit 17 and rebuilds it from the CommitLog."""
    root = tmp_path / "store"
    with MessageStore(root, **SETTINGS) as ms:
        for i in range(34):
            ms.put(Message(TOPIC, body_of(i), queue_id=0))
    path = root / "consumequeue" / TOPIC / "0" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    struct.pack_into(">i", data, 17 * 20 + 8, 0x7FFFFFFF)
    path.write_bytes(bytes(data))
    with MessageStore(root, read_only=True, **SETTINGS) as ms:
        got = ms.get(TOPIC, 0, 17, 32)
        assert (got.status, got.max_offset, got.next_begin_offset) == (GetStatus.FOUND, 34, 34)
        assert [m.queue_offset for m in got.messages] == list(range(18, 34))
        assert [m.record.body for m in got.messages] == [body_of(i) for i in range(18, 34)]
    with MessageStore(root, **SETTINGS) as ms:
        assert [r for r in ms.recovery.rebuilt if "unit 17 " in r], ms.recovery.rebuilt
        for q in range(34):
            assert ms.get(TOPIC, 0, q, 1).messages[0].record.body == body_of(q), q
        assert ms.put(Message(TOPIC, b"next", queue_id=0)).queue_offset == 34


def test_impossible_store_time_after_a_crash_breaks_no_command(tmp_path: Path, capsys) -> None:
    """Bit 0x40 of the top byte of record 0's STORETIMESTAMP flipped (the body CRC does not cover
    it: 2^62 ms more, a year past 9999) and ``abort`` left as after kill -9. The writer open
    that re-indexes record 0 must not name an index file by that time (no 17-digit name would
    hold it): it warns naming offset 0, every command works afterwards, and all 400 keys (and
    the one ingested after) are found."""
    settings = {**SETTINGS, "maxHashSlotNum": 64, "maxIndexNum": 300}  # 299 keys a file
    root = tmp_path / "store"
    with MessageStore(root, **settings) as ms:
        for i in range(400):
            ms.put(Message(TOPIC, body_of(i), queue_id=0, keys=f"k{i}"))
    assert len(list((root / "index").iterdir())) == 2
    log = root / "commitlog" / f"{0:020d}"
    data = bytearray(log.read_bytes())
    data[56] ^= 0x40  # STORETIMESTAMP: 4+4+4+4+4+8+8+4+8+8 bytes into an IPv4 record
    log.write_bytes(bytes(data))
    (root / "abort").touch()
    sets = [arg for k, v in settings.items() for arg in ("--set", f"{k}={v}")]
    events = tmp_path / "events.jsonl"
    events.write_text('{"topic": "orders", "body": "after", "keys": "k400"}\n')
    assert main(["ingest", "--store", str(root), *sets, str(events)]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "commitlog offset 0" in err, err
    names = sorted(p.name for p in (root / "index").iterdir())
    assert len(names) == 2 and all(len(n) == 17 and n.isdigit() for n in names), names
    store = ["--store", str(root), *sets]
    for args in (["dump", "index"], ["dump", "commitlog"], ["get", "--topic", TOPIC, "--queue", "0",
                 "--offset", "0"], ["query", "--topic", TOPIC, "--key", "k0"]):
        assert main([*args, *store]) == 0, (args, capsys.readouterr().err)
    capsys.readouterr()
    assert main(["verify", *store]) == 0  # a warning: every key is found through the index
    out = capsys.readouterr().out
    assert "commitlog-store-time" in out and "commitlog offset 0" in out, out
    with MessageStore(root, read_only=True, **settings) as ms:
        for i in range(400):
            assert [r.body for r in ms.query(TOPIC, f"k{i}")] == [body_of(i)], f"k{i}"
        assert [r.body for r in ms.query(TOPIC, "k400")] == [b"after"]


@pytest.mark.parametrize("queue", [0, 7])
def test_damaged_unit_found_among_many_queues(tmp_path: Path, queue: int) -> None:
    """8 queues of 600 units: recovery gathers the 4,800 units' record heads in shares over
    threads (``recovery._heads``); a unit pointing inside its record is found whichever share
    holds it (queue 0's units lead the first, queue 7's end the last), and rebuilt."""
    root = tmp_path / "store"
    with MessageStore(root, **SETTINGS) as ms:
        ms.put_batch([Message(TOPIC, body_of(i), queue_id=i % 8) for i in range(4800)])
    path = root / "consumequeue" / TOPIC / str(queue) / f"{300 * 20:020d}"  # units 300-599
    data = bytearray(path.read_bytes())
    off, size, tags = struct.unpack_from(">qiq", data, 250 * 20)  # unit 550
    struct.pack_into(">qiq", data, 250 * 20, off + 7, size, tags)
    path.write_bytes(bytes(data))
    (root / "abort").touch()
    with MessageStore(root, **SETTINGS) as ms:
        assert ms.recovery.rebuilt == [f"{root / 'consumequeue' / TOPIC / str(queue)}: unit "
                                       f"550 does not point at a record head; rebuilt from "
                                       f"the CommitLog"]
        got = ms.get(TOPIC, queue, 550, 1)
        assert got.messages[0].record.body == body_of(550 * 8 + queue)
