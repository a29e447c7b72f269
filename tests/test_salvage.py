"""`rocketlake salvage`: a store damaged at several places is copied into a new store holding
every intact record as it was written, and an empty placeholder (property SALVAGED) at each
damaged record's queue offset; the original is not changed."""
from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import rocketmq_peer

from rocketlake.jobs.cli import main
from rocketlake.store import Message, MessageStore, PutResult
from rocketlake.store.config import load_config
from rocketlake.store.errors import UnsafePathError
from rocketlake.store.message import GetStatus
from rocketlake.store.salvage import salvage

SIZES = {"mappedFileSizeCommitLog": 64 * 1024, "mappedFileSizeConsumeQueue": 600,
         "maxHashSlotNum": 64, "maxIndexNum": 400}
SETS = [a for k, v in SIZES.items() for a in ("--set", f"{k}={v}")]
TOPICS = ("orders", "payments", "audit")
N = 900
#: message indexes damaged: a body byte (CRC), a magic byte, a zeroed stretch over two
#: records, and the last record torn (its second half zeroed)
CRC, MAGIC, ZEROED, LAST = 50, 120, (200, 201), N - 1
DAMAGED = {CRC: "crc", MAGIC: "unreadable", ZEROED[0]: "unreadable", ZEROED[1]: "unreadable",
           LAST: "truncated"}
#: where a record's body starts (IPv4 hosts, SPEC §2), and where the last record's zeros start:
#: inside its body, whose bytes are not zero
BODY = 88
TORN = BODY + 4


def _messages() -> list[Message]:
    return [Message(topic=TOPICS[i % 3], body=f"event {i} ".encode() * (1 + i % 7), queue_id=i % 4,
                    tags=f"Tag{'AB'[i % 2]}", keys=[f"k{i}", f"c{i % 5}"],
                    properties={"n": str(i)}, flag=i % 3, born_timestamp=1_764_000_000_000 + i,
                    store_timestamp=1_764_000_000_500 + i, born_host=f"10.0.0.{i % 200}:4000")
            for i in range(N)]


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _patch(root: Path, offset: int, data: bytes) -> None:
    """Write ``data`` at CommitLog ``offset`` (files of SIZES' size)."""
    size = SIZES["mappedFileSizeCommitLog"]
    path = root / "commitlog" / f"{offset - offset % size:020d}"
    raw = bytearray(path.read_bytes())
    raw[offset % size:offset % size + len(data)] = data
    path.write_bytes(bytes(raw))


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Message], list[PutResult]]:
    """A clean store of N messages over three topics and four queues (several CommitLog files),
    with committed offsets, closed cleanly."""
    root = tmp_path_factory.mktemp("written") / "store"
    msgs = _messages()
    with MessageStore(root, **SIZES) as ms:
        put = ms.put_batch(msgs)
        ms.commit_offsets("billing", "orders", {0: 10, 1: 30, 2: 75, 3: 0})
    assert len(list((root / "commitlog").iterdir())) >= 2
    return root, msgs, put


@pytest.fixture
def damaged(written, tmp_path: Path) -> Path:
    """A copy of the written store with the DAMAGED records broken in place."""
    src, _, put = written
    root = tmp_path / "damaged"
    shutil.copytree(src, root)
    _patch(root, put[CRC].commitlog_offset + BODY + 2, b"\xff")
    _patch(root, put[MAGIC].commitlog_offset + 5, b"\x00")
    a, b = put[ZEROED[0]], put[ZEROED[1]]
    _patch(root, a.commitlog_offset + 40, bytes(b.commitlog_offset + 60 - a.commitlog_offset - 40))
    last = put[LAST]
    _patch(root, last.commitlog_offset + TORN, bytes(last.size - TORN))
    return root


def _salvage(capsys: pytest.CaptureFixture[str], store: Path, out: Path, *extra: str) -> tuple[int, str]:
    code = main(["salvage", "--store", str(store), "--output", str(out), *SETS, *extra])
    return code, capsys.readouterr().out


def _served(root: Path) -> dict[tuple[str, int], list]:
    """Every queue's records in queue order, as RocketMQ's getMessage serves them."""
    out = {}
    with MessageStore(root, read_only=True) as ms:
        for (topic, qid), (lo, hi) in ms.queue_ranges().items():
            got = []
            for q in range(lo, hi):
                g = ms.get(topic, qid, q, 1)
                assert g.status is GetStatus.FOUND and g.max_offset == hi, (topic, qid, q)
                got.append(g.messages[0].record)
            out[(topic, qid)] = got
    return out


def test_salvage_keeps_every_intact_record_and_a_placeholder_at_each_damaged_one(
        written, damaged, tmp_path, capsys):
    _, msgs, put = written
    before = _digest(damaged)
    out = tmp_path / "salvaged"
    code, text = _salvage(capsys, damaged, out, "--json")
    assert code == 1  # something was salvaged
    report = json.loads(text)
    assert _digest(damaged) == before  # the original is untouched

    # the lost byte ranges, in original CommitLog offsets
    last = put[LAST]
    assert [(r["offset"], r["end"], r["kind"], r["placeholders"]) for r in report["lost"]] == [
        (put[CRC].commitlog_offset, put[CRC + 1].commitlog_offset, "crc", 1),
        (put[MAGIC].commitlog_offset, put[MAGIC + 1].commitlog_offset, "unreadable", 1),
        (put[ZEROED[0]].commitlog_offset, put[ZEROED[1] + 1].commitlog_offset, "unreadable", 2),
        (last.commitlog_offset, last.commitlog_offset + TORN, "truncated", 1)]
    assert (report["records_kept"], report["placeholders"]) == (N - 5, 5)

    # every queue holds the written messages at their queue offsets, placeholders at the damaged
    expected: dict[tuple[str, int], list[int]] = {}
    for i, r in enumerate(put):
        expected.setdefault((r.topic, r.queue_id), []).append(i)
    served = _served(out)
    assert {k: len(v) for k, v in served.items()} == {k: len(v) for k, v in expected.items()}
    per_queue = {(q["topic"], q["queue_id"]): (q["kept"], q["placeholders"]) for q in report["queues"]}
    for key, indexes in expected.items():
        assert per_queue[key] == (sum(i not in DAMAGED for i in indexes),
                                  sum(i in DAMAGED for i in indexes)), key
        for q, (i, rec) in enumerate(zip(indexes, served[key])):
            m, r = msgs[i], put[i]
            assert (rec.topic, rec.queue_id, rec.queue_offset) == (r.topic, r.queue_id, q)
            if i in DAMAGED:
                assert rec.body == b"" and rec.tags is None and rec.keys == []
                assert rec.properties == {"SALVAGED": f"{DAMAGED[i]}@{r.commitlog_offset}"}
                continue
            assert (rec.body, rec.tags, rec.keys, rec.flag, rec.born_timestamp,
                    rec.store_timestamp, rec.born_host, rec.store_host) == \
                (m.body, m.tags, m.keys, m.flag, m.born_timestamp, m.store_timestamp,
                 m.born_host, "127.0.0.1:10911")
            assert rec.properties["n"] == str(i)

    # the committed offsets are the original's, and still mean the same messages
    assert (out / "config" / "consumerOffset.json").read_bytes() == \
        (damaged / "config" / "consumerOffset.json").read_bytes()
    assert main(["verify", "--store", str(out)]) == 0
    capsys.readouterr()
    # billing committed orders/1 at 30: the next message it reads is the 31st of that queue
    assert main(["get", "--store", str(out), "--topic", "orders", "--queue", "1", "--offset", "30",
                 "--max", "1"]) == 0
    status, got = map(json.loads, capsys.readouterr().out.splitlines())
    assert (status["max_offset"], got["queue_offset"], got["properties"]["n"]) == \
        (len(expected[("orders", 1)]), 30, str(expected[("orders", 1)][30]))


def test_the_text_report_names_the_ranges_and_the_queues(damaged, written, tmp_path, capsys):
    _, _, put = written
    code, text = _salvage(capsys, damaged, tmp_path / "salvaged")
    lines = text.splitlines()
    assert code == 1
    lost = put[CRC].size + put[MAGIC].size + put[200].size + put[201].size + TORN
    assert lines[0] == (f"SALVAGED: {damaged} -> {tmp_path / 'salvaged'}: {N - 5:,} records kept, "
                        f"5 placeholders, {lost:,} bytes lost in 4 damaged ranges")
    crc = put[CRC]
    assert lines[2].startswith(f"  [{crc.commitlog_offset}, {crc.commitlog_offset + crc.size}) "
                               f"{crc.size} bytes, crc: ")
    orders2 = sum(1 for r in put if (r.topic, r.queue_id) == ("orders", 2))
    assert f"  orders/2: {orders2:,} kept, 0 placeholders" in lines


def test_placeholders_from_neighbours_when_the_consumequeues_are_gone(damaged, written, tmp_path, capsys):
    """Without units pointing into the damage, a queue offset missing between two intact
    records of a queue is placed at the damage between them; the torn last record has no intact
    record after it in its queue: no placeholder, its bytes counted lost."""
    _, _, put = written
    shutil.rmtree(damaged / "consumequeue")
    code, text = _salvage(capsys, damaged, tmp_path / "salvaged", "--json")
    report = json.loads(text)
    assert (code, report["records_kept"], report["placeholders"]) == (1, N - 5, 4)
    assert [r["placeholders"] for r in report["lost"]] == [1, 1, 2, 0]
    served = _served(tmp_path / "salvaged")
    for i in (CRC, MAGIC, *ZEROED):
        r = put[i]
        rec = served[(r.topic, r.queue_id)][r.queue_offset]
        at = put[ZEROED[0]].commitlog_offset if i in ZEROED else r.commitlog_offset  # the range's start
        assert (rec.body, rec.properties) == (b"", {"SALVAGED": f"{DAMAGED[i]}@{at}"})
    last = put[LAST]
    assert len(served[(last.topic, last.queue_id)]) == last.queue_offset


def test_an_intact_store_is_copied_whole_and_exits_0(written, tmp_path, capsys):
    src, _, put = written
    code, text = _salvage(capsys, src, tmp_path / "copy", "--json")
    report = json.loads(text)
    assert (code, report["records_kept"], report["placeholders"], report["lost"]) == (0, N, 0, [])
    assert _served(tmp_path / "copy") == _served(src)


@pytest.mark.parametrize("output", ["non-empty-dir", "file"])
def test_an_existing_output_is_refused_before_anything_is_written(written, tmp_path, capsys, output):
    src, _, _ = written
    out = tmp_path / "out"
    if output == "file":
        out.write_text("keep me")
    else:
        out.mkdir()
        (out / "notes.txt").write_text("keep me")
    before = _digest(tmp_path)
    code = main(["salvage", "--store", str(src), "--output", str(out)])
    assert code == 2
    assert str(out) in capsys.readouterr().err
    assert _digest(tmp_path) == before


def test_a_topics_json_the_new_store_cannot_take_is_refused_before_anything_is_written(
        written, tmp_path, capsys):
    """salvage copies topics.json and declares the queues it writes: one a writer refuses (here
    a TopicConfig that is no object) stopped it with exit 3 after it had written the new
    CommitLog, naming the copy in the output rather than the original's file."""
    src, _, _ = written
    store = tmp_path / "store"
    shutil.copytree(src, store)
    (store / "config" / "topics.json").write_text('{"topicConfigTable":{"orders":5}}')
    (store / "config" / "topics.json.bak").unlink(missing_ok=True)
    before = _digest(tmp_path)
    code = main(["salvage", "--store", str(store), "--output", str(tmp_path / "out")])
    assert code == 3
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"rocketlake salvage: error: {store / 'config' / 'topics.json'}: topic 'orders' is not "
        f"a TopicConfig object")
    assert _digest(tmp_path) == before and not (tmp_path / "out").exists()


def test_a_record_whose_queue_offset_field_is_damaged_keeps_its_units_position(written, tmp_path, capsys):
    """QUEUEOFFSET is outside the body CRC: a flipped bit there leaves a valid record whose field
    repeats its queue successor's offset. salvage placed records by that field, and the new
    store's rebuild stopped on the duplicate (exit 3, a half-written output). The original's
    ConsumeQueue unit pointing at the record gives its queue offset, which salvage rewrites
    anyway: every message is kept and served where it was."""
    src, msgs, put = written
    store = tmp_path / "store"
    shutil.copytree(src, store)
    at = put[60]  # orders/0 (60 % 3 == 0, 60 % 4 == 0), not its queue's last
    _patch(store, at.commitlog_offset + 20, (at.queue_offset + 1).to_bytes(8, "big"))
    code, text = _salvage(capsys, store, tmp_path / "out", "--json")
    report = json.loads(text)
    assert (code, report["records_kept"], report["placeholders"], report["lost"]) == (0, N, 0, [])
    def positions(root: Path) -> dict[tuple[str, int], list[tuple[int, bytes]]]:
        return {k: [(r.queue_offset, r.body) for r in v] for k, v in _served(root).items()}

    # the undamaged original's queues: each message at its queue offset
    assert positions(tmp_path / "out") == positions(src)


@pytest.mark.parametrize("inside", ["store/commitlog/new", "link-to-consumequeue/new"])
def test_an_output_inside_the_store_is_refused_and_the_store_left_as_it_was(written, tmp_path, inside):
    """A new store written into the original's `commitlog/` would stop every open of the
    original (a directory where CommitLog files are); one reached through a link is the same.
    The library refuses it (the command line too: tests/test_cli.py)."""
    src = tmp_path / "store"
    shutil.copytree(written[0], src)
    (tmp_path / "link-to-consumequeue").symlink_to(src / "consumequeue")
    before = _digest(src)
    with pytest.raises(UnsafePathError, match=f"{tmp_path / inside}: is inside the store {src}"):
        salvage(src, tmp_path / inside, load_config(SIZES))
    assert _digest(src) == before
    assert not (src / "commitlog" / "new").exists() and not (src / "consumequeue" / "new").exists()


@pytest.mark.parametrize("given", ["missing", "empty-dir"])
def test_a_salvage_that_fails_leaves_no_part_of_a_store(written, tmp_path, given):
    """Files may grow to 32 KiB only (RLIMIT_FSIZE: writes past it fail with EFBIG, as on a full
    disk), so the new 64 KiB CommitLog file cannot be made: the error names it, and the output is
    as it was before (missing, or an empty directory), not a store a reader would open."""
    out = tmp_path / "a" / "out"
    if given == "empty-dir":
        out.mkdir(parents=True)
    code = ("import resource, sys; from rocketlake.jobs.cli import main; "
            "resource.setrlimit(resource.RLIMIT_FSIZE, (32768, 32768)); "
            "sys.exit(main(sys.argv[1:]))")
    p = subprocess.run([sys.executable, "-c", code, "salvage", "--store", str(written[0]),
                        "--output", str(out), *SETS], capture_output=True, text=True, timeout=300)
    assert p.returncode == 3, p.stderr
    assert f"{out / 'commitlog' / ('0' * 20)}: file too large" in p.stderr
    if given == "missing":
        assert not (tmp_path / "a").exists()
    else:
        assert list(out.iterdir()) == []


@pytest.mark.skipif(not rocketmq_peer.available(), reason="needs a JDK (java) and Maven (mvn)")
def test_rocketmq_serves_the_salvaged_store(damaged, written, tmp_path, capsys):
    """RocketMQ 4.9.8's own store opens the salvaged store and serves every queue up to the
    original's max offset, placeholders included."""
    _, msgs, put = written
    out = tmp_path / "salvaged"
    assert _salvage(capsys, damaged, out)[0] == 1
    rocketmq_peer.build()
    served_file = tmp_path / "served.jsonl"
    rocketmq_peer.run("serve", out, "--out", served_file,
                      *rocketmq_peer.size_args(*SIZES.values()), timeout=120)
    served = rocketmq_peer.read_served(served_file)
    assert [s for s in served if s["kind"] == "gap"] == []
    counts: dict[tuple[str, int], int] = {}
    for r in put:
        counts[(r.topic, r.queue_id)] = counts.get((r.topic, r.queue_id), 0) + 1
    assert {(s["topic"], s["queue_id"]): (s["min_offset"], s["max_offset"])
            for s in served if s["kind"] == "queue" and s["max_offset"]} == \
        {k: (0, n) for k, n in counts.items()}
    by_place = {(r.topic, r.queue_id, r.queue_offset): i for i, r in enumerate(put)}
    for s in (s for s in served if s["kind"] == "message"):
        i = by_place[(s["topic"], s["queue_id"], s["queue_offset"])]
        if i in DAMAGED:  # RocketMQ hands out an empty body as null
            assert (s["body_b64"], s["properties"]["SALVAGED"]) == \
                ("", f"{DAMAGED[i]}@{put[i].commitlog_offset}")
        else:
            assert (base64.b64decode(s["body_b64"]), s["properties"]["n"]) == (msgs[i].body, str(i))
    assert sum(s["kind"] == "message" for s in served) == N
