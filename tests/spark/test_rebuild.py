"""Both rebuild jobs, in process on the shared session: golden store, modes, bad input."""
from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from goldens import GOLDEN_498
from store_helpers import outside, retopic

from rocketlake.jobs import cli
from rocketlake.jobs.rebuild import rebuild as rebuild_both
from rocketlake.store import Message, MessageStore, codec
from rocketlake.store.commitlog import CommitLog
from rocketlake.store.config import load_config
from rocketlake.store.lockfile import is_locked
from rocketlake.store.single_process_rebuild import rebuild
from rocketlake.store.verify import verify
from rocketlake.transforms import store_rebuild

from .helpers import SMALL, library_messages, rocketlake, sets, tree_bytes

GOLDEN_STORE = GOLDEN_498 / "store"
ROOT = Path(__file__).resolve().parents[2]
#: where a v1 record's body starts, with IPv4 hosts (docs/FORMAT.md §2)
BODY_AT = 88

#: A writer process: on each "open" line it tries to open the store; refused, it says so and
#: waits for the next line; opened, it puts 500 keyed messages (SYNC_FLUSH) and closes.
WRITER = """
import sys
from rocketlake.store import Message, MessageStore, StoreLockedError
settings = {**eval(sys.argv[2]), "flushDiskType": "SYNC_FLUSH"}
for line in sys.stdin:
    try:
        ms = MessageStore(sys.argv[1], **settings)
    except StoreLockedError:
        print("refused", flush=True)
        continue
    print("opened", flush=True)
    with ms:
        for i in range(500):
            ms.put(Message("late", b"late-%d" % i, i % 2, keys="late-%d" % i))
    print("done", flush=True)
    break
"""


def test_golden_store_rebuilds_byte_identical(spark, golden_store: Path, golden_settings: dict,
                                              tmp_path: Path) -> None:
    cfg = load_config(golden_settings)
    out = tmp_path / "out"
    for structure in ("consumequeue", "index"):  # one structure per run, as the one-structure jobs
        rebuild_both(spark, golden_store, cfg, output=out, split_bytes=20000, structures=(structure,))
    assert tree_bytes(out / "consumequeue") == tree_bytes(GOLDEN_STORE / "consumequeue")
    # RocketMQ named its index files by wall clock: compare contents in order.
    assert list(tree_bytes(out / "index").values()) == list(tree_bytes(GOLDEN_STORE / "index").values())
    assert tree_bytes(golden_store) == tree_bytes(GOLDEN_STORE)  # --output left the store alone


def test_rebuild_into_output_declares_each_topic_with_its_queues(spark, golden_store: Path,
                                                                 golden_settings: dict,
                                                                 tmp_path: Path) -> None:
    """RocketMQ 4.9.8 wrote queue ids 0-3 of each golden topic and no config/topics.json; a
    broker serves the output's queues only for topics it declares (SCHEDULE_TOPIC_XXXX it
    declares itself)."""
    out = tmp_path / "out"
    assert not (golden_store / "config" / "topics.json").exists()
    rebuild_both(spark, golden_store, load_config(golden_settings), output=out, split_bytes=20000,
                 structures=("consumequeue",))
    table = json.loads((out / "config" / "topics.json").read_text())["topicConfigTable"]
    assert {t: (tc["readQueueNums"], tc["writeQueueNums"]) for t, tc in table.items()} == \
        {"audit-log": (4, 4), "orders": (4, 4), "payments": (4, 4)}
    assert not (golden_store / "config" / "topics.json").exists()  # --output leaves the store alone


def test_full_rebuild_in_place_via_cli(spark, store_copy: Path, library_store: Path) -> None:
    shutil.rmtree(store_copy / "index")
    (store_copy / "consumequeue" / "orders" / "0" / "00000000000000000000").write_bytes(b"junk")
    os.chmod(store_copy / "consumequeue", 0o750)
    for left in (".parts.rebuild-abcd1234", ".index.rebuild-abcd1234", ".consumequeue.old-abcd1234"):
        (store_copy / left).mkdir()  # what a rebuild killed before its swap's journal leaves
    argv = ["--store", str(store_copy), "--split-bytes", "20000", *sets(SMALL)]
    assert cli.main(["rebuild-consumequeue", *argv]) == 0
    assert cli.main(["rebuild-index", *argv]) == 0
    assert tree_bytes(store_copy / "consumequeue") == tree_bytes(library_store / "consumequeue")
    assert tree_bytes(store_copy / "index") == tree_bytes(library_store / "index")
    assert not [p for p in store_copy.iterdir() if p.name.startswith(".")]  # nothing left aside
    # the replaced directory's mode; 0755 where there was none
    assert [stat.S_IMODE((store_copy / n).stat().st_mode) for n in ("consumequeue", "index")] == \
        [0o750, 0o755]


def test_incremental_continues_where_the_files_stop(spark, tmp_path: Path,
                                                    library_store: Path) -> None:
    # The library wrote the first messages; the CommitLog then grew without dispatch (the
    # ConsumeQueues and index of the half-way store are put back over the full store's).
    half = tmp_path / "half"
    msgs = library_messages()
    with MessageStore(half, **SMALL) as s:
        for k in range(0, 250, 60):
            s.put_batch(msgs[k:min(k + 60, 250)])
    full = tmp_path / "full"
    shutil.copytree(library_store, full)
    for name in ("consumequeue", "index"):
        shutil.rmtree(full / name)
        shutil.copytree(half / name, full / name)
    cfg = load_config(SMALL)
    for structure in ("consumequeue", "index"):
        rebuild_both(spark, full, cfg, incremental=True, split_bytes=20000, structures=(structure,))
    assert tree_bytes(full / "consumequeue") == tree_bytes(library_store / "consumequeue")
    assert tree_bytes(full / "index") == tree_bytes(library_store / "index")


def test_an_incremental_rebuild_with_nothing_to_do_says_up_to_date(spark, store_copy: Path,
                                                                   capsys) -> None:
    before = tree_bytes(store_copy)
    assert cli.main(["rebuild", "--store", str(store_copy), "--incremental", *sets(SMALL)]) == 0
    err = capsys.readouterr().err
    assert f"rebuild: up to date: consumequeue and index under {store_copy} already cover the " \
           f"CommitLog to offset" in err and "nothing written" in err
    assert "wrote 0" not in err
    assert tree_bytes(store_copy) == before


def flip_body_byte(store: Path, n: int) -> int:
    """Flip the first body byte of the ``n``-th CommitLog record (its body CRC no longer
    matches); returns the record's offset."""
    log = CommitLog(store, load_config(SMALL))
    log.files.load()
    victim = list(log.walk_records())[n]
    log.close()
    size = SMALL["mappedFileSizeCommitLog"]
    path = store / "commitlog" / f"{victim.commitlog_offset // size * size:020d}"
    data = bytearray(path.read_bytes())
    data[data.index(victim.body, victim.commitlog_offset % size)] ^= 0xFF
    path.write_bytes(bytes(data))
    return victim.commitlog_offset


def test_bad_crc_on_the_last_record_ends_valid_data_where_the_library_stops(
        spark, store_copy: Path, tmp_path: Path) -> None:
    cfg = load_config(SMALL)
    flip_body_byte(store_copy, -1)  # a torn tail: nothing follows the damaged record
    ref = rebuild(store_copy, tmp_path / "ref", **SMALL)
    out = tmp_path / "out"
    done = rebuild_both(spark, store_copy, cfg, output=out, split_bytes=20000)
    assert done.end is not None and (done.end.end, done.end.records) == (ref.commitlog_end, ref.records)
    assert ref.stop_reason is not None and done.end.reason == ref.stop_reason  # the CRC mismatch
    assert tree_bytes(out / "consumequeue") == tree_bytes(tmp_path / "ref" / "consumequeue")
    assert tree_bytes(out / "index") == tree_bytes(tmp_path / "ref" / "index")


def planted_body(address: int, size: int) -> bytes:
    """A body of ``size`` bytes for a record stored at ``address`` holding a record head every 200
    bytes: TOTALSIZE, MAGIC and a PHYSICALOFFSET equal to the head's own address (a producer
    learns where its next message lands from the previous offsetMsgId)."""
    body = bytearray(b"x" * size)
    for at in range(0, size - 36, 200):
        struct.pack_into(">ii", body, at, 200, codec.MAGIC_V1)
        struct.pack_into(">q", body, at + 28, address + BODY_AT + at)
    return bytes(body)


def test_record_heads_planted_in_a_body_across_split_boundaries_lose_nothing(
        tmp_path: Path) -> None:
    store, split = tmp_path / "store", 1000
    with MessageStore(store, **SMALL) as ms:
        done = [ms.put(Message("planted", b"m-%d" % i, i % 4, keys=f"k-{i}")) for i in range(100)]
        nxt = done[-1].commitlog_offset + done[-1].size
        body = planted_body(nxt, 3000)
        done.append(ms.put(Message("planted", body, 100 % 4, keys="k-100")))
        assert done[-1].commitlog_offset == nxt
        done += [ms.put(Message("planted", b"m-%d" % i, i % 4, keys=f"k-{i}")) for i in range(101, 402)]
    start = nxt % SMALL["mappedFileSizeCommitLog"] + BODY_AT
    # a split boundary falls inside the body, before one of its planted heads
    assert any(start < b < start + 3000 - 200 for b in range(0, 65536, split))
    built = {name: tree_bytes(store / name) for name in ("consumequeue", "index")}
    for name in built:
        shutil.rmtree(store / name)

    r = rocketlake("rebuild", "--store", str(store), "--split-bytes", str(split), *sets(SMALL))

    assert r.returncode == 0, r.stderr[-3000:]
    assert "scanned 402 records" in r.stderr
    assert {name: tree_bytes(store / name) for name in built} == built
    with MessageStore(store, read_only=True, **SMALL) as ms:
        assert [ms.max_offset("planted", q) for q in range(4)] == [101, 101, 100, 100]
        assert [[m.commitlog_offset for m in ms.query("planted", f"k-{i}")] for i in range(402)] == [
            [d.commitlog_offset] for d in done]


def test_damage_before_the_end_of_the_data_is_refused_and_nothing_changes(
        store_copy: Path) -> None:
    at = flip_body_byte(store_copy, 100)
    before = tree_bytes(store_copy)

    r = rocketlake("rebuild", "--store", str(store_copy), "--split-bytes", "20000", *sets(SMALL))

    assert r.returncode == 3, r.stderr[-3000:]
    error = [line for line in r.stderr.splitlines() if "error:" in line]
    assert len(error) == 1 and f"valid data ends at offset {at}" in error[0], r.stderr[-3000:]
    assert "records follow" in error[0] and "nothing was written" in error[0]
    assert "Traceback" not in r.stderr
    assert tree_bytes(store_copy) == before
    assert not [p for p in store_copy.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("job", ["rebuild-consumequeue", "rebuild-index"])
def test_refuses_a_store_a_live_writer_holds(spark, store_copy: Path, job: str, capsys) -> None:
    with MessageStore(store_copy, **SMALL):
        assert cli.main([job, "--store", str(store_copy), *sets(SMALL)]) == 3  # locked
    assert "held by a live writer" in capsys.readouterr().err


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "missing", "no such store directory"),
    (lambda p: (p / "plain").mkdir() or p / "plain", "not a RocketMQ store"),
])
def test_bad_store_paths_are_named(spark, tmp_path: Path, make, message, capsys) -> None:
    assert cli.main(["rebuild-index", "--store", str(make(tmp_path))]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("mode", [[], ["--incremental"], ["--output", "OUT"]])
def test_a_record_with_a_hostile_topic_is_refused_and_nothing_outside_changes(
        spark, tmp_path: Path, mode: list[str], capsys) -> None:
    store = tmp_path / "a" / "b" / "c" / "store"  # "../../../x" from any rebuild dir stays under tmp_path
    (tmp_path / "victim").write_bytes(b"precious")
    with MessageStore(store, **SMALL) as s:
        s.put_batch([*library_messages()[:50], Message("HOSTILE___", b"evil", 0)])
    assert retopic(store, "HOSTILE___", "../../../x") == 1
    shutil.rmtree(store / "consumequeue" / "HOSTILE___")  # so --incremental reaches the record
    before, victims = tree_bytes(store), outside(tmp_path, store)
    out = str(tmp_path / "o" / "p" / "q" / "out")
    argv = ["--store", str(store), *[out if m == "OUT" else m for m in mode]]
    assert cli.main(["rebuild-consumequeue", *argv, *sets(SMALL)]) == 2
    err = capsys.readouterr().err
    assert "has topic '../../../x' / queue 0" in err and "nothing was written" in err
    assert tree_bytes(store) == before and sorted(p.name for p in store.iterdir() if p.name[0] == ".") == []
    assert outside(tmp_path, store) == victims


@pytest.mark.parametrize("given", [[], ["index"]])
def test_a_failed_rebuild_leaves_the_output_as_it_was_given(spark, store_copy: Path, tmp_path: Path,
                                                            given: list[str], capsys) -> None:
    """--output DIR that exists (here with a directory where the rebuild declares its topics, so
    it fails after it made the index files): the index files it made are removed, as is an
    index/ it created; one given empty is left empty. It left index files holding no keys,
    which a reader would take for the rebuilt index."""
    out = tmp_path / "out"
    (out / "config" / "topics.json").mkdir(parents=True)
    (out / "config" / "topics.json" / "keep").write_text("someone's")
    for name in given:
        (out / name).mkdir()
    assert cli.main(["rebuild", "--store", str(store_copy), "--output", str(out), *sets(SMALL)]) == 3
    assert f"{out / 'config' / 'topics.json'}: unreadable" in capsys.readouterr().err
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == sorted(
        ["config", "config/topics.json", "config/topics.json/keep", *given])


@pytest.mark.parametrize("job", ["rebuild-consumequeue", "rebuild-index"])
def test_holds_the_writer_lock_for_the_whole_job(spark, store_copy: Path, job: str,
                                                 monkeypatch) -> None:
    # A writer that opens while the job runs would write into files the swap then replaces.
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(store_copy), repr(SMALL)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    refused = threading.Event()
    real = store_rebuild.valid_parts

    def paused(*args, **kwargs):  # the job has scanned and not yet written: it holds the lock
        assert refused.wait(120)
        return real(*args, **kwargs)

    monkeypatch.setattr(store_rebuild, "valid_parts", paused)
    rc: list[int] = []
    run = threading.Thread(target=lambda: rc.append(cli.main(
        [job, "--store", str(store_copy), "--split-bytes", "2000", *sets(SMALL)])))
    try:
        run.start()
        while run.is_alive() and not is_locked(store_copy):
            time.sleep(0.01)
        writer.stdin.write("open\n")
        writer.stdin.flush()
        assert writer.stdout.readline().strip() == "refused"
        assert run.is_alive()  # refused while the job ran, not after
        refused.set()
        run.join()
        assert rc == [0]
        writer.stdin.write("open\n")
        writer.stdin.flush()
        assert [writer.stdout.readline().strip() for _ in range(2)] == ["opened", "done"]
    finally:
        refused.set()
        writer.stdin.close()
        writer.wait(timeout=60)
        run.join()
    with MessageStore(store_copy, read_only=True, **SMALL) as ms:
        assert [len(ms.query("late", f"late-{i}")) for i in range(500)] == [1] * 500
        assert sum(ms.max_offset("late", q) for q in (0, 1)) == 500
    assert verify(store_copy, **SMALL).ok
