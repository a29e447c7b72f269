"""`rocketlake verify` finds each kind of corruption, names file and offset, and changes nothing."""
from __future__ import annotations

import base64
import hashlib
import json
import struct
from pathlib import Path

import pytest

from rocketlake.jobs import check_consistency
from rocketlake.jobs.cli import main
from rocketlake.store import Message, MessageStore
from rocketlake.store.verify import verify

SMALL = dict(mappedFileSizeCommitLog=8192, mappedFileSizeConsumeQueue=200, maxHashSlotNum=32,
             maxIndexNum=50)


@pytest.mark.parametrize("table", ['{"t0":5}', '{"t0":{"readQueueNums":"x"}}', "[]"])
def test_a_topics_json_the_writer_refuses_is_a_reported_problem(store, table):
    """A topics.json that parses but that a writer's open refuses (a TopicConfig that is no
    object, a queue count that is no integer, no table): verify said OK."""
    path = store / "config/topics.json"
    path.write_text('{"dataVersion":{"counter":1},"topicConfigTable":%s}' % table)  # noqa: UP031
    (store / "config/topics.json.bak").unlink(missing_ok=True)
    r = verify(store, **SMALL)
    assert [(p.file, p.severity) for p in r.problems] == [("config/topics.json", "error")]
    assert r.problems[0].what.startswith(f"{path}: ")


def _tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        ms.put_batch([Message(f"t{i % 2}", f"body-{i}".encode() * 3, i % 3, tags="A", keys=f"k{i}")
                      for i in range(200)])
        ms.commit_offsets("g", "t0", {0: 5})
    return root


def _flip(path: Path, at: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0x40
    path.write_bytes(bytes(raw))


def test_clean_stores_pass(store, golden_store, golden_settings):
    assert verify(store, **SMALL).ok
    r = verify(golden_store, **golden_settings)
    assert r.ok and (r.records, r.units, r.keys_checked) == (400, 374, 1161)


def test_body_bit_flip_is_found_with_file_and_offset(store):
    first = store / "commitlog/00000000000000000000"
    from rocketlake.store import codec
    rec = codec.decode_record(first.read_bytes(), 0)
    second = rec.size  # the second record starts here; flip a byte of its body
    _flip(first, second + 90)
    before = _tree_digest(store)
    r = verify(store, **SMALL)
    assert not r.ok
    crc = [p for p in r.problems if "CRC" in p.what]
    assert crc and crc[0].file == "commitlog/00000000000000000000" and crc[0].offset == second
    assert _tree_digest(store) == before  # verify is read-only


def test_garbage_after_end_of_data(store):
    last = sorted((store / "commitlog").iterdir())[-1]
    raw = bytearray(last.read_bytes())
    end = len(raw.rstrip(b"\0"))
    raw[end + 100:end + 104] = b"\x01\x02\x03\x04"
    last.write_bytes(bytes(raw))
    r = verify(store, **SMALL)
    assert any(p.offset == end + 100 and "after the end of valid data" in p.what for p in r.problems)


@pytest.mark.parametrize("where", ["after", "last byte"])
@pytest.mark.parametrize("shift", [0, 1, 7])
def test_one_garbage_byte_after_end_of_data_is_found_where_it_is(store, where, shift):
    """The end-of-data check counts 8-byte words: a single byte at any alignment, the file's
    last byte included, is found at its own offset."""
    last = sorted((store / "commitlog").iterdir())[-1]
    raw = bytearray(last.read_bytes())
    end = len(raw.rstrip(b"\0"))
    at = end + 64 + shift if where == "after" else len(raw) - 1 - shift
    raw[at] = 0x80
    last.write_bytes(bytes(raw))
    r = verify(store, **SMALL)
    assert [p.offset for p in r.problems if "after the end of valid data" in p.what] == [at]


def test_consumequeue_unit_and_missing_queue(store):
    cq = store / "consumequeue/t0/0/00000000000000000000"
    _flip(cq, 20 * 3 + 19)  # tagsCode of unit 3
    r = verify(store, **SMALL)
    assert any(p.file == "consumequeue/t0/0/00000000000000000000" and p.offset == 60 for p in r.problems)
    for f in (store / "consumequeue/t1/2").iterdir():
        f.unlink()
    (store / "consumequeue/t1/2").rmdir()
    r = verify(store, **SMALL)
    assert any(p.file == "consumequeue/t1/2" and "queue missing" in p.what for p in r.problems)


def test_index_entry_corruption_is_found(store):
    idx = sorted((store / "index").iterdir())[0]
    entries_at = 40 + 32 * 4
    raw = bytearray(idx.read_bytes())
    raw[entries_at + 20 + 4: entries_at + 20 + 12] = (10 ** 12).to_bytes(8, "big")  # entry 1's phyOffset
    idx.write_bytes(bytes(raw))
    r = verify(store, **SMALL)
    assert any(p.file == "index" and "not found through the index" in p.what for p in r.problems)


def test_checkpoint_and_config_problems(store):
    (store / "checkpoint").write_bytes(b"\0" * 100)
    (store / "config/consumerOffset.json").write_text("{nope")
    (store / "config/consumerOffset.json.bak").unlink(missing_ok=True)
    r = verify(store, **SMALL)
    whats = {(p.file, p.severity) for p in r.problems}
    assert ("checkpoint", "error") in whats
    assert ("config/consumerOffset.json", "error") in whats


def test_cli_exit_codes_and_json(store, capsys):
    sets = [arg for k, v in SMALL.items() for arg in ("--set", f"{k}={v}")]
    assert main(["verify", "--store", str(store), *sets]) == 0
    capsys.readouterr()
    _flip(store / "commitlog/00000000000000000000", 100)
    args = ["verify", "--store", str(store), "--json", *sets]
    assert main(args) == 1  # the check found problems
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["problems"][0]["file"] == "commitlog/00000000000000000000"
    assert main(["verify", "--store", str(store.parent / "nowhere")]) == 2  # not a store


@pytest.mark.parametrize("content", ["file", "empty", "missing"])
def test_a_path_that_is_not_a_store_is_refused_by_name(tmp_path, capsys, content):
    path = tmp_path / "notastore"
    if content != "missing":
        path.mkdir()
    if content == "file":
        (path / "notes.txt").write_text("hello")
    r = verify(path)
    assert not r.ok and [(p.file, p.what.split(": ")[0]) for p in r.problems] == [(".", str(path))]
    assert main(["verify", "--store", str(path)]) == 2
    out, err = capsys.readouterr()
    assert "OK" not in out and f"rocketlake verify: error: {path}: " in err
    report = tmp_path / "report.json"
    assert check_consistency.main(["--store", str(path), "--report", str(report)]) == 2
    err = capsys.readouterr().err
    assert f"check-consistency: error: {path}: " in err and "rebuild" not in err
    assert not report.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if content == "missing" else ["notastore"])


@pytest.mark.parametrize("offset", ['"abc"', "1.5", "-3", "{}", "true"])
def test_malformed_consumer_offset_is_a_reported_problem(store, offset):
    path = store / "config/consumerOffset.json"
    path.write_text('{"offsetTable":{"t0@g":{0:%s}}}' % offset)  # noqa: UP031 -- JSON braces
    (store / "config/consumerOffset.json.bak").unlink(missing_ok=True)
    r = verify(store, **SMALL)
    assert [(p.file, p.severity) for p in r.problems] == [("config/consumerOffset.json", "error")]
    assert str(path) in r.problems[0].what and "t0@g: offset" in r.problems[0].what


def _index_header(path: Path, **fields: int) -> None:
    """Overwrite fields of an index file's header (docs/FORMAT.md §7 layout)."""
    at = {"begin_ts": (0, 8), "end_ts": (8, 8), "begin_phy": (16, 8), "end_phy": (24, 8),
          "slot_count": (32, 4), "index_count": (36, 4)}
    raw = bytearray(path.read_bytes())
    for name, value in fields.items():
        pos, n = at[name]
        raw[pos:pos + n] = value.to_bytes(n, "big", signed=True)
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("damage", [
    dict(end_phy=0),                      # end before its entries: later records look unindexed
    dict(end_phy=10 ** 12),               # past every record
    dict(end_ts=1),                       # before beginTimestamp
    dict(begin_ts=12345),                 # not the first entry's store time
    dict(slot_count=60),                  # more used slots than entries / slots
    dict(index_count=-7),
    dict(begin_phy=-1),
])
def test_garbage_header_on_the_last_index_file_is_found(store, damage):
    last = sorted((store / "index").iterdir())[-1]
    _index_header(last, **damage)
    r = verify(store, **SMALL)
    assert not r.ok
    assert any(p.file == f"index/{last.name}" and p.offset == 0 and p.what.startswith("header: ")
               for p in r.problems), r.problems


def test_records_after_the_index_end_must_be_indexed(store):
    with MessageStore(store, messageIndexEnable="false", **SMALL) as ms:
        ms.put_batch([Message("t0", b"late", keys=f"late{i}") for i in range(5)])
    r = verify(store, **SMALL)
    assert not r.ok
    assert [p.what for p in r.problems if p.file.startswith("index/")] == [
        f"5 records with keys after the index's last indexed commitlog offset {_last_indexed(store)} "
        f"are not indexed (first at {_first_late(store)})"]


def _last_indexed(root: Path) -> int:
    last = sorted((root / "index").iterdir())[-1]
    return int.from_bytes(last.read_bytes()[24:32], "big")


def _first_late(root: Path) -> int:
    with MessageStore(root, read_only=True, **SMALL) as ms:
        return ms.get("t0", 0, ms.max_offset("t0", 0) - 5, 1).messages[0].record.commitlog_offset


@pytest.mark.parametrize("damage", ["flip-magic", "zero-header"])
def test_dump_commitlog_fails_where_a_damaged_header_stops_it(store, capsys, damage):
    first = store / "commitlog/00000000000000000000"
    from rocketlake.store import codec
    raw = bytearray(first.read_bytes())
    second = codec.decode_record(bytes(raw), 0).size
    if damage == "flip-magic":
        raw[second + 5] ^= 0x40
    else:
        raw[second:second + 8] = bytes(8)
    first.write_bytes(bytes(raw))
    settings = sum((["--set", f"{k}={v}"] for k, v in SMALL.items()), [])
    assert main(["dump", "commitlog", "--store", str(store), *settings]) == 3
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 1  # the one record before the damage
    assert (f"stopped after 1 records at commitlog offset {second} "
            f"(file 00000000000000000000 @{second}): ") in err


def test_a_looping_index_chain_ends_and_the_keys_behind_it_are_reported(store):
    """A prevIndex pointing back up its own chain (RocketMQ's query would loop forever): verify
    finishes and reports exactly the keys whose entries the loop cuts off."""
    import struct
    path = sorted((store / "index").iterdir())[0]
    raw = bytearray(path.read_bytes())
    entries_at = 40 + 32 * 4

    def entry(pos: int) -> tuple[int, int, int, int]:
        return struct.unpack_from(">iqii", raw, entries_at + 20 * pos)

    for slot in range(32):
        chain = [struct.unpack_from(">i", raw, 40 + 4 * slot)[0]]
        while chain[-1] > 0 and entry(chain[-1])[3] > 0:
            chain.append(entry(chain[-1])[3])
        if len(chain) >= 3:
            break
    assert len(chain) >= 3
    struct.pack_into(">i", raw, entries_at + 20 * chain[1] + 16, chain[0])  # second -> head -> second
    path.write_bytes(bytes(raw))
    r = verify(store, **SMALL)
    assert {p.kind for p in r.problems} == {"index-key-not-found"}
    assert sorted(int(p.what.split(" of the record at ")[1].split()[0]) for p in r.problems) == \
        sorted(entry(pos)[1] for pos in chain[2:])


def test_a_damaged_first_record_of_every_file_costs_only_those_records(store):
    """The first record of every CommitLog file has a damaged magic: the walk resumes at each
    file's second record (the record-start search), so only those records are missing: one unit
    per file points where no valid record starts, and each damage names what follows it."""
    files = sorted((store / "commitlog").iterdir())
    first_sizes = [struct.unpack_from(">i", f.read_bytes(), 0)[0] for f in files]  # TOTALSIZE
    for f in files:
        _flip(f, 4)
    r = verify(store, **SMALL)
    assert r.records == 200 - len(files) and not r.ok
    assert [(p.kind, p.file, p.offset) for p in r.problems[:len(files)]] == [
        ("commitlog-invalid-record", f"commitlog/{f.name}", 0) for f in files]
    assert [(d.offset, d.resumes_at) for d in r.damage] == [
        (int(f.name), int(f.name) + size) for f, size in zip(files, first_sizes)]
    # after the first damage: every record but the first of each file
    assert r.damage[0].records_after == 200 - len(files)
    bad = [p for p in r.problems if p.kind == "consumequeue-bad-unit"]
    assert r.units == 200 and len(bad) == len(files)
    assert all("where no valid record starts" in p.what for p in bad)


def test_records_hidden_below_a_queues_min_offset_are_reported(tmp_path, capsys):
    """The first 10 units of a 200-message queue zeroed while the CommitLog still starts at 0:
    the queue's min offset becomes 10 and ``get`` hides messages 0..9 behind OFFSET_TOO_SMALL,
    so verify must fail naming the queue and the 10 records."""
    root, sizes = tmp_path / "s", {**SMALL, "mappedFileSizeConsumeQueue": 6000}  # one CQ file
    with MessageStore(root, **sizes) as ms:
        ms.put_batch([Message("t", f"body-{i}".encode(), 0) for i in range(200)])
    cq = root / "consumequeue/t/0/00000000000000000000"
    raw = bytearray(cq.read_bytes())
    raw[:200] = bytes(200)  # units 0..9: 20 bytes each
    cq.write_bytes(bytes(raw))
    with MessageStore(root, read_only=True, **sizes) as ms:
        assert ms.min_offset("t", 0) == 10 and ms.commitlog.min_offset == 0
    r = verify(root, **sizes)
    assert not r.ok
    assert [(p.file, p.offset) for p in r.problems if p.severity == "error"] == [("consumequeue/t/0", 0)]
    assert r.problems[0].what.startswith("10 records still in the CommitLog")
    sets = [arg for k, v in sizes.items() for arg in ("--set", f"{k}={v}")]
    assert main(["verify", "--store", str(root), *sets]) == 1
    out = capsys.readouterr().out
    assert "consumequeue/t/0" in out and "10 records" in out and "OK" not in out


def test_query_ends_on_an_index_chain_looping_through_the_keys_hash(store):
    """Two entries of the key's hash point at each other (prevIndex): RocketMQ's walk would loop
    forever, collecting the same offsets; ``rocketlake query --key`` reads each entry once and
    answers with the message it finds, exit 0."""
    import struct
    import subprocess
    import sys

    from rocketlake.store import codec
    h = codec.index_key_hash(codec.java_hash("t1#k7"))
    entries_at = 40 + 32 * 4
    for path in sorted((store / "index").iterdir()):
        raw = bytearray(path.read_bytes())
        entries = [struct.unpack_from(">iqii", raw, entries_at + 20 * e) for e in range(50)]
        mine = [e for e in range(1, 50) if entries[e][0] == h]
        if mine:
            break
    e, f = mine[0], 1 if mine[0] != 1 else 2
    struct.pack_into(">i", raw, entries_at + 20 * f, h)  # f: the key's hash ...
    struct.pack_into(">i", raw, entries_at + 20 * f + 16, e)  # ... and f -> e -> f
    struct.pack_into(">i", raw, entries_at + 20 * e + 16, f)
    path.write_bytes(bytes(raw))
    sets = [arg for k, v in SMALL.items() for arg in ("--set", f"{k}={v}")]
    run = subprocess.run([sys.executable, "-m", "rocketlake.jobs.cli", "query", "--store", str(store),
                          "--topic", "t1", "--key", "k7", *sets], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    rows = [json.loads(line) for line in run.stdout.splitlines()]
    assert [(r["topic"], r["properties"]["KEYS"], base64.b64decode(r["body_b64"])) for r in rows] == \
        [("t1", "k7", b"body-7" * 3)]


def test_one_damaged_index_file_does_not_hide_the_geometry_of_the_others(tmp_path, capsys):
    """Index files of a non-default geometry (64 slots, 300 entries: 40 + 64*4 + 300*20 bytes)
    read without settings, one of four with a garbage header: the geometry is the one the other
    three agree with, so verify diagnoses the damaged file (exit 1) and reads work; a query
    leaves that file out with a warning naming it."""
    import random
    root = tmp_path / "s"
    with MessageStore(root, maxHashSlotNum=64, maxIndexNum=300) as ms:
        ms.put_batch([Message("t", f"body-{i}".encode(), 0, keys=f"k{i}") for i in range(1000)])
    files = sorted((root / "index").iterdir())
    assert len(files) == 4 and {p.stat().st_size for p in files} == {40 + 64 * 4 + 300 * 20}
    raw = bytearray(files[1].read_bytes())
    raw[:40] = random.Random(1).randbytes(40)
    files[1].write_bytes(bytes(raw))
    store = ["--store", str(root)]
    assert main(["verify", *store]) == 1
    out = capsys.readouterr().out
    assert f"index/{files[1].name} @0: header: indexCount" in out, out
    for args in (["get", "--topic", "t", "--queue", "0", "--offset", "0"], ["dump", "commitlog"]):
        assert main([*args, *store]) == 0, (args, capsys.readouterr().err)
    capsys.readouterr()
    assert main(["query", "--topic", "t", "--key", "k5", *store]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line)["body_b64"] for line in out.splitlines()] == \
        [base64.b64encode(b"body-5").decode()]
    assert f"warning: {files[1]}: header damaged" in err, err


def test_an_index_header_verify_reports_is_one_recovery_rebuilds(tmp_path):
    """One message with one key: indexCount 2, hashSlotCount 1 (IndexFile.putKey: one put, one
    slot filled). A hashSlotCount of 5 (within the 32 slots, but more than the one put) is a
    header verify reports and the index's open calls damaged, so a writer's recovery rebuilds
    the file: hashSlotCount is 1 again and verify is clean."""
    import struct

    from rocketlake.store.index import IndexFile
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        ms.put(Message("t", b"x", 0, keys="k"))
    path, = (root / "index").iterdir()
    raw = bytearray(path.read_bytes())
    assert struct.unpack_from(">ii", raw, 32) == (1, 2)  # hashSlotCount, indexCount
    struct.pack_into(">i", raw, 32, 5)
    path.write_bytes(bytes(raw))
    assert [p.what for p in verify(root, **SMALL).problems] == \
        ["header: hashSlotCount 5 outside [0, 1] for indexCount 2"]
    f = IndexFile(path, SMALL["maxHashSlotNum"], SMALL["maxIndexNum"])
    assert f.damage == "hashSlotCount 5 outside [0, 1] for indexCount 2"
    f.close()
    with MessageStore(root, **SMALL):
        pass
    path, = (root / "index").iterdir()
    assert struct.unpack_from(">ii", path.read_bytes(), 32) == (1, 2)
    assert verify(root, **SMALL).problems == []


def test_check_consistency_takes_sizes_from_the_files_and_refuses_a_contradicting_set(
        store: Path, tmp_path: Path, capsys) -> None:
    """The store's CommitLog files are 8192 bytes (not the default): no --set is needed, and a
    --set that disagrees with the files is an error naming both (as verify and dump)."""
    report = tmp_path / "report.json"
    assert check_consistency.main(["--store", str(store), "--report", str(report)]) == 0
    assert json.loads(report.read_text())["records"] == 200
    report.unlink()
    assert check_consistency.main(["--store", str(store), "--report", str(report),
                                   "--set", "mappedFileSizeCommitLog=16384"]) == 2
    assert (f"check-consistency: error: mappedFileSizeCommitLog=16384 was given, but the CommitLog "
            f"files under {store / 'commitlog'} are 8192 bytes") in capsys.readouterr().err
    assert not report.exists()
