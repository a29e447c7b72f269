"""What a RocketMQ 5.x broker adds to a store, read (and kept) by rocketlake: the checkpoint's
masterFlushedOffset and confirmPhyOffset, the property CRC, BatchConsumeQueues, pending timers,
and (4.9 too) a CommitLog over several directories. Expected values are bytes built from
RocketMQ 5.3.3's layouts (docs/FORMAT.md section 9.6), independently of store/."""
from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import pytest
from reference import V2, jhash, pack, with_prop_crc

from rocketlake.jobs import cli
from rocketlake.jobs.exit_codes import ExitCode
from rocketlake.store import (
    Message,
    MessageStore,
    SettingError,
    UnsupportedStoreError,
)
from rocketlake.store.rocksdb_store import open_read_only
from rocketlake.store.verify import verify

SMALL = dict(mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=200, maxHashSlotNum=16,
             maxIndexNum=20)


# --- checkpoint (StoreCheckpoint: longs @0 physic, @8 logics, @16 index, @24 masterFlushedOffset,
# @32 confirmPhyOffset; the rest of the 4096 bytes is never written) -------------------------------
def _put(root: Path, n: int, first: int = 0) -> list:
    with MessageStore(root, **SMALL) as ms:
        return [ms.put(Message(topic="t5", body=b"b%d" % i, queue_id=0)) for i in range(first, first + n)]


def _set_checkpoint_tail(root: Path, master_flushed: int, confirm: int, trailer: bytes) -> None:
    """What a 5.x broker leaves at @24 and @32, and bytes past @40 nobody writes."""
    raw = bytearray((root / "checkpoint").read_bytes())
    struct.pack_into(">qq", raw, 24, master_flushed, confirm)
    raw[40:40 + len(trailer)] = trailer
    (root / "checkpoint").write_bytes(raw)


def test_a_writer_keeps_what_a_5x_broker_wrote_after_the_timestamps(tmp_path: Path) -> None:
    root = tmp_path / "s"
    put = _put(root, 3)
    # a broker recovering normally confirms up to the start of the last valid record
    _set_checkpoint_tail(root, 777_000, put[-1].commitlog_offset, b"\x5a" * 8)
    with MessageStore(root, **SMALL) as ms:   # opened for writing, nothing written
        ms.flush()
    raw = (root / "checkpoint").read_bytes()
    assert len(raw) == 4096
    assert struct.unpack_from(">qq", raw, 24) == (777_000, put[-1].commitlog_offset)
    assert raw[40:48] == b"\x5a" * 8


def test_appending_advances_a_set_confirm_offset_past_what_was_written(tmp_path: Path) -> None:
    root = tmp_path / "s"
    put = _put(root, 3)
    _set_checkpoint_tail(root, 777_000, put[-1].commitlog_offset, b"")
    more = _put(root, 2, first=3)
    end = more[-1].commitlog_offset + more[-1].size
    assert end == sum(p.size for p in put + more)
    assert struct.unpack_from(">qq", (root / "checkpoint").read_bytes(), 24) == (777_000, end)


def test_a_store_without_5x_offsets_keeps_them_unset(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _put(root, 3)
    _put(root, 1, first=3)
    assert (root / "checkpoint").read_bytes()[24:4096] == bytes(4096 - 24)


# --- the property CRC (enabledAppendPropCRC: properties end with __CRC32# \x01 ten digits \x02) ---
def _crc_records(n: int) -> list[bytes]:
    """Records as a 5.3.3 broker with enabledAppendPropCRC stores them, packed at offsets 0, ..."""
    out: list[bytes] = []
    at = 0
    for i in range(n):
        out.append(with_prop_crc(pack(at, topic="t5", body=b"m%d" % i, queue_offset=i, magic=V2,
                                      props="TAGS\x01a\x02__CRC32#\x010000000000\x02")))
        at += len(out[-1])
    return out


def test_copied_records_carry_a_property_crc_of_their_new_place(tmp_path: Path) -> None:
    root = tmp_path / "s"
    first = _put(root, 1)[0]
    with MessageStore(root, **SMALL) as ms:
        placed = ms.put_records(_crc_records(2))
    log = (root / "commitlog" / f"{0:020d}").read_bytes()
    for p in placed:
        rec = log[p.commitlog_offset:p.commitlog_offset + p.size]
        assert struct.unpack_from(">q", rec, 28)[0] == p.commitlog_offset > first.commitlog_offset
        assert rec == with_prop_crc(rec)   # the digits are those of the bytes it holds here
    assert verify(root, **SMALL).problems == []


def test_a_property_crc_mismatch_is_damage_at_its_offset(tmp_path: Path, capsys) -> None:
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        placed = ms.put_records(_crc_records(3))
    bad = placed[1].commitlog_offset
    path = root / "commitlog" / f"{0:020d}"
    with open(path, "r+b") as f:   # FLAG: no part of the body, covered by the property CRC only
        f.seek(bad + 19)
        b = f.read(1)
        f.seek(bad + 19)
        f.write(bytes([b[0] ^ 1]))
    problems = verify(root, **SMALL).problems
    damage = [p for p in problems if p.kind == "commitlog-invalid-record"]
    assert [(p.file, p.offset) for p in damage] == [(f"commitlog/{0:020d}", bad)]
    assert "property CRC" in damage[0].what
    # reads skip the damaged record, warning once with its offset (as for a body CRC mismatch)
    sets = [a for k, v in SMALL.items() for a in ("--set", f"{k}={v}")]
    assert cli.main(["get", "--store", str(root), "--topic", "t5", "--queue", "0", *sets]) == ExitCode.OK
    out, err = capsys.readouterr()
    assert [json.loads(line)["queue_offset"] for line in out.splitlines()[1:]] == [0, 2]
    assert f"damaged at offset {bad} (property CRC " in err


# --- BatchConsumeQueue (BatchConsumeQueue.java: 46-byte units under batchconsumequeue/<t>/<q>) -----
BCQ_UNIT = struct.Struct(">qiqqqhii")  # offset, size, tagsCode, storeTime, msgBaseOffset, batchSize,
#                                        compactedOffset (-1), reserved
INNER_BATCH = 0x80  # MessageSysFlag.INNER_BATCH_FLAG


def _batch_cq_store(root: Path) -> list[bytes]:
    """A store as a 5.x broker leaves a BatchCQ topic ``bt`` (queue 0): two single messages (queue
    offsets 0 and 1), then an inner batch of three (offsets 2-4, INNER_BASE 2, INNER_NUM 3);
    units in a 460-byte file (10 units), and a consumer group ``g`` committed at offset 2."""
    recs, at = [], 0
    for i, (props, flag) in enumerate([("TAGS\x01a", 0), ("TAGS\x01a", 0),
                                      ("TAGS\x01a\x02INNER_NUM\x013\x02INNER_BASE\x012", INNER_BATCH)]):
        recs.append(pack(at, topic="bt", body=b"x%d" % i, props=props, queue_offset=i, sys_flag=flag,
                         magic=V2, store_ts=1_700_000_000_000 + i))
        at += len(recs[-1])
    (root / "commitlog").mkdir(parents=True)
    (root / "commitlog" / f"{0:020d}").write_bytes(b"".join(recs).ljust(4096, b"\0"))
    units, at = b"", 0
    for i, (rec, base, n) in enumerate(zip(recs, (0, 1, 2), (1, 1, 3))):
        units += BCQ_UNIT.pack(at, len(rec), jhash("a"), 1_700_000_000_000 + i, base, n, -1, 0)
        at += len(rec)
    qdir = root / "batchconsumequeue" / "bt" / "0"
    qdir.mkdir(parents=True)
    (qdir / f"{0:020d}").write_bytes(units.ljust(460, b"\0"))
    (root / "config").mkdir()
    (root / "config" / "topics.json").write_text(json.dumps({"topicConfigTable": {"bt": {
        "topicName": "bt", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6,
        "attributes": {"queue.type": "BatchCQ"}}}}))
    (root / "config" / "consumerOffset.json").write_text('{"offsetTable":{"bt@g":{0:2}}}')
    return recs


def _json_lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_a_batch_consume_queue_is_read_by_get_lag_and_topic_status(tmp_path: Path, capsys) -> None:
    root = tmp_path / "s"
    recs = _batch_cq_store(root)
    store = ["--store", str(root)]
    assert cli.main(["topic-status", *store, "--json"]) == ExitCode.OK
    assert [(r["topic"], r["queue_id"], r["min_offset"], r["max_offset"])
            for r in _json_lines(capsys.readouterr().out)] == [("bt", 0, 0, 5)]
    assert cli.main(["lag", *store, "--json"]) == ExitCode.OK
    assert [(r["consumer_group"], r["consumer_offset"], r["max_offset"], r["lag"])
            for r in _json_lines(capsys.readouterr().out)] == [("g", 2, 5, 3)]
    # offset 3 is inside the batch: the whole record (queue offset 2) comes back, next is 5
    assert cli.main(["get", *store, "--topic", "bt", "--queue", "0", "--offset", "3"]) == ExitCode.OK
    head, *msgs = _json_lines(capsys.readouterr().out)
    assert (head["next_begin_offset"], head["max_offset"]) == (5, 5)
    assert [(m["queue_offset"], m["commitlog_offset"], m["body_b64"]) for m in msgs] == [
        (2, len(recs[0]) + len(recs[1]), base64.b64encode(b"x2").decode())]
    assert cli.main(["get", *store, "--topic", "bt", "--queue", "0"]) == ExitCode.OK
    head, *msgs = _json_lines(capsys.readouterr().out)
    assert head["next_begin_offset"] == 5 and [m["queue_offset"] for m in msgs] == [0, 1, 2]
    assert cli.main(["dump", "consumequeue", *store, "--topic", "bt"]) == ExitCode.OK
    assert [(r["queue_offset"], r["batch_size"], r["size"], r["store_timestamp"], r["tags_code"])
            for r in _json_lines(capsys.readouterr().out)] == [
        (0, 1, len(recs[0]), 1_700_000_000_000, 97), (1, 1, len(recs[1]), 1_700_000_000_001, 97),
        (2, 3, len(recs[2]), 1_700_000_000_002, 97)]


@pytest.mark.parametrize("unit, batch_size", [(2, 2), (0, 2)])
def test_verify_finds_a_batch_unit_whose_size_disagrees_with_its_record(tmp_path: Path, unit: int,
                                                                         batch_size: int) -> None:
    """docs/FORMAT.md: an inner batch's unit covers INNER_NUM queue offsets, a single message's 1.
    A flipped bit in batchSize (the last unit: 3 -> 2, its third message gone from the queue's
    max offset; or the first: 1 -> 2) was not checked: verify said OK."""
    root = tmp_path / "s"
    _batch_cq_store(root)
    f = root / "batchconsumequeue" / "bt" / "0" / f"{0:020d}"
    raw = bytearray(f.read_bytes())
    struct.pack_into(">h", raw, unit * BCQ_UNIT.size + 36, batch_size)
    f.write_bytes(bytes(raw))
    r = verify(root, mappedFileSizeCommitLog=4096)
    held = 3 if unit == 2 else 1
    assert [(p.file, p.kind, p.what) for p in r.problems if p.severity == "error"] == [
        ("batchconsumequeue/bt/0", "consumequeue-unit-mismatch",
         f"the unit at queue offset {unit} covers {batch_size} queue offsets, the record it points "
         f"at holds {held} message{'s' if held > 1 else ''}")]


def test_an_emptied_batch_consume_queue_file_is_refused(tmp_path: Path, capsys) -> None:
    """A BatchConsumeQueue file cut to 0 bytes (a broker creates each at its full size) was read
    as a queue without units: topic-status showed bt/0 empty (max offset 0), get found nothing,
    exit 0, its five messages silently gone."""
    root = tmp_path / "s"
    _batch_cq_store(root)
    f = root / "batchconsumequeue" / "bt" / "0" / f"{0:020d}"
    f.write_bytes(b"")
    for argv in (["topic-status"], ["get", "--topic", "bt", "--queue", "0"]):
        assert cli.main([*argv, "--store", str(root)]) == ExitCode.UNUSABLE
        assert capsys.readouterr().err.strip().splitlines()[-1] == (
            f"rocketlake {argv[0]}: error: {f}: 0 bytes: a broker creates each BatchConsumeQueue "
            f"file at its full size, so it is damaged")


# --- pending timers (TimerCheckpoint, TimerWheel slots of 32 bytes, TimerLog units of 52) --------
T = 1_700_000_000_000  # lastReadTimeMs: slots before it are delivered
DAY = 86_400_000


def _timer_store(root: Path) -> None:
    """Six copies in rmq_sys_wheel_timer (queue offsets 0-5): r0 in a delivered slot (T-3s);
    r1 (orders) and r2 (pay) due T+5s, r3 a delete of r2, all in slot T+5s; r4 (orders, due in 30
    days) rolled into slot T+60s; r5 (pay, due T+7s) still in the queue (lastTimerQueueOffset 5)."""
    copies = [("orders", T - 3000, "U0", ""), ("orders", T + 5000, "U1", ""), ("pay", T + 5000, "U2", ""),
              ("pay", T + 5000, "U3", "\x02TIMER_DEL_UNIQKEY\x01pay+U2"), ("orders", T + 30 * DAY, "U4", ""),
              ("pay", T + 7000, "U5", "")]
    recs, at = [], 0
    for i, (topic, due, uniq, more) in enumerate(copies):
        props = f"REAL_TOPIC\x01{topic}\x02REAL_QID\x010\x02TIMER_OUT_MS\x01{due}\x02UNIQ_KEY\x01{uniq}{more}"
        recs.append(pack(at, topic="rmq_sys_wheel_timer", body=b"t%d" % i, props=props, queue_offset=i,
                         magic=V2))
        at += len(recs[-1])
    offsets = [sum(len(r) for r in recs[:i]) for i in range(len(recs))]
    (root / "commitlog").mkdir(parents=True)
    (root / "commitlog" / f"{0:020d}").write_bytes(b"".join(recs).ljust(4096, b"\0"))
    cq = root / "consumequeue" / "rmq_sys_wheel_timer" / "0"
    cq.mkdir(parents=True)
    (cq / f"{0:020d}").write_bytes(b"".join(struct.pack(">qiq", o, len(r), 0)
                                            for o, r in zip(offsets, recs)).ljust(200, b"\0"))
    # TimerLog units: size, prev, magic (1 default, 2 roll, 4 delete), enqueue ms, delay, offsetPy,
    # sizePy, topic hash, reserved
    enq = T - 10_000
    units = [(-1, 1, T - 3000, 0), (-1, 1, T + 5000, 1), (52, 1, T + 5000, 2), (-1, 3, T + 60_000, 4),
             (104, 5, T + 5000, 3)]
    log = b"".join(struct.pack(">iqiqiqiiq", 52, prev, magic, enq, due - enq, offsets[r], len(recs[r]), 0, 0)
                   for prev, magic, due, r in units)
    (root / "timerlog").mkdir()
    (root / "timerlog" / f"{0:020d}").write_bytes(log.ljust(1024, b"\0"))
    wheel = bytearray(32 * 32)  # 16 slots x 2, slot index = time / 1000 % 32
    for due, first, last, num in ((T - 3000, 0, 0, 1), (T + 5000, 52, 208, 1), (T + 60_000, 156, 156, 1)):
        struct.pack_into(">qqqii", wheel, due // 1000 % 32 * 32, due // 1000, first, last, num, 0)
    (root / "timerwheel").write_bytes(bytes(wheel))
    (root / "config").mkdir()
    (root / "config" / "timercheck").write_bytes(struct.pack(">qqqq", T, len(log), 5, 0).ljust(4096, b"\0"))


def test_timers_lists_what_a_5x_broker_has_not_delivered(tmp_path: Path, capsys) -> None:
    root = tmp_path / "s"
    _timer_store(root)
    assert cli.main(["timers", "--store", str(root), "--json"]) == ExitCode.OK
    assert [(r["topic"], r["pending"], r["earliest_delivery_timestamp"], r["latest_delivery_timestamp"])
            for r in _json_lines(capsys.readouterr().out)] == [
        ("orders", 2, T + 5000, T + 30 * DAY), ("pay", 1, T + 7000, T + 7000)]


@pytest.mark.parametrize("place", ["timerlog/00000000000000000000", "timerwheel", "config/timercheck"])
def test_timers_refuse_a_directory_where_a_timer_file_belongs(tmp_path: Path, capsys, place: str) -> None:
    """A timer log file there was an IsADirectoryError traceback naming a descriptor; a
    timerwheel or timercheck there was taken for no file: no pending timer listed, exit 0."""
    root = tmp_path / "s"
    _timer_store(root)
    (root / place).unlink()
    (root / place).mkdir()
    assert cli.main(["timers", "--store", str(root), "--json"]) == ExitCode.UNUSABLE
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"rocketlake timers: error: {root / place}: is a directory where a store file belongs")


def test_timers_refuse_a_cut_timerwheel(tmp_path: Path, capsys) -> None:
    """A timerwheel cut inside a slot (the broker's TimerWheel refuses any length but its own,
    whole slots for each of its two rounds): its slots past the cut were read as none, and the
    pending timers there went unlisted, exit 0."""
    root = tmp_path / "s"
    _timer_store(root)
    wheel = root / "timerwheel"
    cut = (T + 5000) // 1000 % 32 * 32 + 8  # inside the slot of the timers due at T+5s
    wheel.write_bytes(wheel.read_bytes()[:cut])
    assert cli.main(["timers", "--store", str(root), "--json"]) == ExitCode.UNUSABLE
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"rocketlake timers: error: {wheel}: {cut} bytes, not a whole number of 64-byte slot "
        f"pairs (32-byte slots, two rounds): cut or not a timer wheel")


def test_timers_name_the_timer_log_unit_that_points_at_no_record(tmp_path: Path, capsys) -> None:
    """A flipped bit in a unit's CommitLog offset: the error named only that offset ("offset
    140737488355508: outside the CommitLog [0, 1096)"), not the timer log it came from."""
    root = tmp_path / "s"
    _timer_store(root)
    log = root / "timerlog" / f"{0:020d}"
    raw = bytearray(log.read_bytes())
    raw[52 + 28 + 6] ^= 0x80  # the second unit's offsetPy, after size, prev, magic, enqueue, delay
    log.write_bytes(bytes(raw))
    assert cli.main(["timers", "--store", str(root), "--json"]) == ExitCode.UNUSABLE
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"rocketlake timers: error: {root / 'timerlog'}: the unit at timer log "
                          f"offset 52 points at no record: offset ")


def test_a_store_without_timers_has_no_timer_rows(tmp_path: Path, capsys) -> None:
    root = tmp_path / "s"
    _put(root, 2)
    assert cli.main(["timers", "--store", str(root), "--json", "--set", "mappedFileSizeCommitLog=4096"]) == 0
    assert capsys.readouterr().out == ""


# --- multi-path CommitLog (MultiPathMappedFileQueue: storePathCommitLog "a,b", file i in the
# i % n-th of the sorted directories; readOnlyCommitLogStorePaths read as well) -----------------
def _spread(root: Path, n: int) -> list[str]:
    """A store of several 4 KiB CommitLog files, file i moved to the i % 2-th of `commitlog`,
    `commitlog2` as a broker with ``storePathCommitLog=<root>/commitlog,<root>/commitlog2`` places
    them; the messages' bodies."""
    bodies = [b"%04d" % i + b"x" * 300 for i in range(n)]
    with MessageStore(root, **SMALL) as ms:
        ms.put_batch([Message(topic="mp", body=b, queue_id=0) for b in bodies])
    (root / "commitlog2").mkdir()
    files = sorted((root / "commitlog").iterdir())
    for i, f in enumerate(files):
        if i % 2:
            f.rename(root / "commitlog2" / f.name)
    assert len(files) >= 4
    return [b.decode() for b in bodies]


def test_a_commitlog_over_several_directories_is_read_where_the_setting_names_them(
        tmp_path: Path, capsys) -> None:
    root = tmp_path / "s"
    bodies = _spread(root, 40)
    paths = f"{root / 'commitlog'},{root / 'commitlog2'}"
    store = ["--store", str(root), "--set", f"storePathCommitLog={paths}"]
    got, at = [], 0
    while at < len(bodies):  # a get ends at a ConsumeQueue file's end (10 units here)
        assert cli.main(["get", *store, "--topic", "mp", "--queue", "0", "--offset", str(at)]) == 0
        head, *msgs = _json_lines(capsys.readouterr().out)
        got += [base64.b64decode(m["body_b64"]).decode() for m in msgs]
        at = head["next_begin_offset"]
    assert got == bodies
    assert verify(root, storePathCommitLog=paths).problems == []
    # the second directory as a read-only path reads the same
    ro = ["--store", str(root), "--set", f"readOnlyCommitLogStorePaths={root / 'commitlog2'}"]
    assert cli.main(["dump", "commitlog", *ro, "--topic", "mp"]) == ExitCode.OK
    assert len(_json_lines(capsys.readouterr().out)) == len(bodies)
    # without the setting the files of commitlog2 are missing: refused naming the gap
    assert cli.main(["dump", "commitlog", "--store", str(root), "--topic", "mp"]) == ExitCode.UNUSABLE
    assert "gap after" in capsys.readouterr().err


def test_a_writer_refuses_a_commitlog_elsewhere(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _spread(root, 40)
    with pytest.raises(SettingError, match="reads but does not write"):
        MessageStore(root, storePathCommitLog=f"{root / 'commitlog'},{root / 'commitlog2'}", **SMALL)
    assert not (root / "commitlog2" / f"{0:020d}").exists()



def test_compact_refuses_a_commitlog_over_several_directories(tmp_path: Path, capsys) -> None:
    """compact expires CommitLog files by deleting them: a change to the CommitLog, which
    rocketlake makes only in <store>/commitlog (the Spark jobs that only read it take it:
    tests/spark/test_multipath_commitlog.py)."""
    root = tmp_path / "s"
    _spread(root, 40)
    before = _tree(root)
    paths = f"{root / 'commitlog'},{root / 'commitlog2'}"
    assert cli.main(["compact", "--lake", str(tmp_path / "lake"), "--store", str(root), "--set",
                     f"storePathCommitLog={paths}"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "storePathCommitLog" in err and "compact expires CommitLog files by deleting them" in err
    assert "rocketlake changes a CommitLog only in <store>/commitlog" in err
    assert _tree(root) == before
    assert not (tmp_path / "lake").exists()


def test_publish_offsets_finds_where_a_commitlog_over_several_directories_starts(
        tmp_path: Path) -> None:
    from rocketlake.jobs.publish_offsets import read_layout
    from rocketlake.store.config import load_config

    root = tmp_path / "s"
    _spread(root, 40)
    (root / "commitlog" / f"{0:020d}").unlink()  # expired: it starts with file 4096, in commitlog2
    cfg = load_config({**SMALL, "storePathCommitLog": f"{root / 'commitlog'},{root / 'commitlog2'}"})
    assert read_layout(root, cfg).commitlog_min_offset == 4096


# --- compaction topics (CompactionLog / SparseConsumeQueue: compaction/compactionLog/<t>/<q>
# holds CommitLog records at their own offsets, compaction/compactionCq/<t>/<q> 46-byte units) -----
def _compacted_store(root: Path) -> list[bytes]:
    """A store whose CommitLog has dropped everything and whose broker compacted ``ck`` queue 0
    down to the newest of keys k1 (queue offset 2) and k2 (queue offset 4): two records in the
    compaction log, two units; group g committed at 3."""
    recs, at = [], 0
    for qo, key in ((2, "k1"), (4, "k2")):
        recs.append(pack(at, topic="ck", body=key.encode(), props=f"KEYS\x01{key}", queue_offset=qo,
                         magic=V2, store_ts=1_700_000_000_000 + qo))
        at += len(recs[-1])
    (root / "commitlog").mkdir(parents=True)
    log = root / "compaction" / "compactionLog" / "ck" / "0"
    log.mkdir(parents=True)
    (log / f"{0:020d}").write_bytes(b"".join(recs).ljust(4600, b"\0"))
    cq = root / "compaction" / "compactionCq" / "ck" / "0"
    cq.mkdir(parents=True)
    units = b"".join(BCQ_UNIT.pack(off, len(r), 0, 1_700_000_000_000 + qo, qo, 1, -1, 0)
                     for off, r, qo in ((0, recs[0], 2), (len(recs[0]), recs[1], 4)))
    (cq / f"{0:020d}").write_bytes(units.ljust(460, b"\0"))
    (root / "config").mkdir()
    (root / "config" / "topics.json").write_text(json.dumps({"topicConfigTable": {"ck": {
        "topicName": "ck", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6,
        "attributes": {"cleanup.policy": "COMPACTION"}}}}))
    (root / "config" / "consumerOffset.json").write_text('{"offsetTable":{"ck@g":{0:3}}}')
    return recs


@pytest.mark.parametrize("damage", ["log-magic", "unit-offset", "log-empty"])
def test_verify_checks_the_brokers_compaction_store(tmp_path: Path, capsys, damage: str) -> None:
    """verify did not look at `compaction/` at all: a compaction log record with a flipped magic
    byte, a unit pointing into the middle of a record, an emptied log file all gave "OK", exit 0
    (an emptied log made the read commands fail with "mappedFileSizeCommitLog must be positive,
    got 0", exit 2, naming nothing)."""
    root = tmp_path / "s"
    recs = _compacted_store(root)
    log = root / "compaction" / "compactionLog" / "ck" / "0" / f"{0:020d}"
    cq = root / "compaction" / "compactionCq" / "ck" / "0" / f"{0:020d}"
    if damage == "log-magic":
        raw = bytearray(log.read_bytes())
        raw[len(recs[0]) + 5] ^= 1  # the second record's MAGIC (docs/FORMAT.md §2)
        log.write_bytes(bytes(raw))
        want = [("compaction/compactionCq/ck/0", "compaction",
                 f"the unit at queue offset 4 points at compaction log offset {len(recs[0])}, "
                 f"where no valid record starts: offset {len(recs[0])}: bad magic 0xdaa220ab")]
    elif damage == "unit-offset":
        raw = bytearray(cq.read_bytes())
        raw[7] ^= 1  # the first unit's offset: 0 -> 1
        cq.write_bytes(bytes(raw))
        magic = int.from_bytes(log.read_bytes()[5:9], "big")  # what sits where a magic would be
        want = [("compaction/compactionCq/ck/0", "compaction",
                 "the unit at queue offset 2 points at compaction log offset 1, where no valid "
                 f"record starts: offset 1: bad magic {magic:#x}")]
    else:
        log.write_bytes(b"")
        want = [("compaction/compactionCq", "compaction",
                 f"{log.parent}: compaction log files are 0 bytes: a broker creates each at its "
                 f"full size, so they are damaged")]
        assert cli.main(["topic-status", "--store", str(root)]) == ExitCode.UNUSABLE
        assert capsys.readouterr().err.strip().splitlines()[-1] == (
            f"rocketlake topic-status: error: {want[0][2]}")
    r = verify(root, mappedFileSizeCommitLog=4096)
    assert [(p.file, p.kind, p.what) for p in r.problems if p.severity == "error"] == want


def test_a_compaction_topic_is_served_from_the_brokers_compaction_log(tmp_path: Path, capsys) -> None:
    root = tmp_path / "s"
    recs = _compacted_store(root)
    store = ["--store", str(root)]
    assert cli.main(["topic-status", *store, "--json"]) == ExitCode.OK
    assert [(r["min_offset"], r["max_offset"]) for r in _json_lines(capsys.readouterr().out)] == [(2, 5)]
    assert cli.main(["get", *store, "--topic", "ck", "--queue", "0"]) == ExitCode.OK
    head, *msgs = _json_lines(capsys.readouterr().out)
    assert head["next_begin_offset"] == 5
    assert [(m["queue_offset"], m["commitlog_offset"], base64.b64decode(m["body_b64"])) for m in msgs] == [
        (2, 0, b"k1"), (4, len(recs[0]), b"k2")]
    # offset 3 fell to compaction: the next kept one is served
    assert cli.main(["get", *store, "--topic", "ck", "--queue", "0", "--offset", "3"]) == ExitCode.OK
    assert [m["queue_offset"] for m in _json_lines(capsys.readouterr().out)[1:]] == [4]
    assert cli.main(["lag", *store, "--json"]) == ExitCode.OK
    assert [(r["consumer_offset"], r["max_offset"], r["lag"])
            for r in _json_lines(capsys.readouterr().out)] == [(3, 5, 2)]


# --- Spark jobs that read ConsumeQueues as files or write them refuse 5.x queues before Spark ----
def _rocksdb_cq_store(root: Path) -> None:
    """A store whose `consumequeue/` is a RocksDB database (storeType=defaultRocksDB): a database
    directory names its MANIFEST in `CURRENT`."""
    _put(root, 3)
    for f in (root / "consumequeue" / "t5" / "0").iterdir():
        f.unlink()
    (root / "consumequeue" / "t5" / "0").rmdir()
    (root / "consumequeue" / "t5").rmdir()
    (root / "consumequeue" / "CURRENT").write_text("MANIFEST-000005\n")


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(("build", "named"), [
    (_rocksdb_cq_store, "consumequeue: a RocksDB ConsumeQueue (storeType=defaultRocksDB"),
    (_batch_cq_store, "batchconsumequeue/bt: a BatchConsumeQueue (topic 'bt' is a 5.x BatchCQ topic)")])
def test_a_writer_refuses_a_store_whose_queues_are_not_files(tmp_path: Path, build, named) -> None:
    """The writer's open and the Spark jobs ask one check (``consume_queue.not_file_queues``),
    which names the same thing for both."""
    root = tmp_path / "s"
    build(root)
    before = _tree(root)
    with pytest.raises(UnsupportedStoreError) as caught:
        MessageStore(root, **SMALL)
    assert named in str(caught.value)
    assert "rocketlake reads such a store but does not write it" in str(caught.value)
    assert "open the store read-only" in str(caught.value)
    assert _tree(root) == before


def test_reading_a_rocksdb_database_writes_nothing_into_it(tmp_path: Path, capsys) -> None:
    """rocksdict (0.3.29) saves its own `rocksdict-config.json` into a database it opens, also
    read-only and also when the open fails: `topic-status` on a store whose `consumequeue/` a
    broker made a RocksDB database wrote that file into it. A database as a broker leaves it (no
    such file) is read and left as it was; so is one RocksDB cannot open."""
    from rocksdict import Options, Rdict
    db = tmp_path / "db"
    rd = Rdict(str(db), options=Options(raw_mode=True))
    rd[b"k"] = b"v"
    rd.close()
    (db / "rocksdict-config.json").unlink()  # a Java broker's database has none
    before = _tree(db)
    with open_read_only(db) as rd:
        assert rd[b"k"] == b"v"
    assert _tree(db) == before
    root = tmp_path / "s"
    _rocksdb_cq_store(root)
    before = _tree(root)
    assert cli.main(["topic-status", "--store", str(root)]) == ExitCode.UNUSABLE
    assert "RocksDB cannot open it read-only" in capsys.readouterr().err
    assert _tree(root) == before


@pytest.mark.parametrize("command", [["publish-offsets", "--lake", "LAKE"], ["rebuild"],
                                     ["rebuild", "--incremental"], ["compact", "--lake", "LAKE"]])
@pytest.mark.parametrize(("build", "named"), [
    (_rocksdb_cq_store, "storeType=defaultRocksDB"),
    (_batch_cq_store, "batchconsumequeue/bt: a BatchConsumeQueue (topic 'bt' is a 5.x BatchCQ topic)")])
def test_jobs_on_consume_queues_refuse_5x_queues_before_spark(tmp_path: Path, capsys, command,
                                                              build, named) -> None:
    root = tmp_path / "store"
    build(root)
    before = _tree(root)
    argv = [a.replace("LAKE", str(tmp_path / "lake")) for a in command]
    assert cli.main([*argv, "--store", str(root)]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert named in err and f"{command[0]} reads and writes 4.9 ConsumeQueue files only" in err
    assert _tree(root) == before and not (tmp_path / "lake").exists()
