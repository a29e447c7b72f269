"""The read-only handle on a store's files, and the plain-file ConsumeQueue writer that the Spark
rebuild uses: same bytes as the library's own writer (its index files are written by
``IndexFile`` itself: tests/test_store_rebuild.py)."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from rocketlake.store import MessageStore, codec
from rocketlake.store.config import load_config
from rocketlake.store.consume_queue import (
    ConsumeQueue,
    QueueFilesWriter,
    load_queues,
    write_consume_queue_files,
)
from rocketlake.store.errors import LinkedFileError, StoreFormatError, UnsafePathError
from rocketlake.store.message import Message
from rocketlake.store.store_files import StoreFiles

SMALL = {"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 100,
         "maxHashSlotNum": 8, "maxIndexNum": 10}


def _digest(root: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        for i in range(30):
            ms.put(Message(f"t{i % 2}", b"x" * 50, keys=f"k{i}", tags="A"))
    return root


def test_handle_reads_all_three_parts_and_changes_nothing(store: Path) -> None:
    before = _digest(store)
    with StoreFiles(store, load_config(SMALL)) as files:
        recs = list(files.commitlog.walk_records())
        assert len(recs) == 30
        assert sorted(files.queues) == [("t0", 0), ("t1", 0)]
        assert files.queues[("t0", 0)].max_offset == 15
        assert recs[7].commitlog_offset in files.index.query("t1#k7", 10, 0, 2 ** 63 - 1)
        with files.queue("t1", 0) as cq:
            assert cq.units(3, 1)["commitlog_offset"][0] == recs[7].commitlog_offset
    assert _digest(store) == before


def test_a_part_that_cannot_open_does_not_hide_the_others(store: Path) -> None:
    bad = store / "consumequeue" / "t0" / "x"
    bad.mkdir()
    with StoreFiles(store, load_config(SMALL)) as files:
        with pytest.raises(StoreFormatError, match=r"consumequeue/t0/x: queue directory name"):
            files.queues  # noqa: B018 -- opening the queues is what raises
        assert len(list(files.commitlog.walk_records())) == 30


def _library_queue(root: Path, offsets: np.ndarray, units: np.ndarray, file_size: int) -> dict:
    cq = ConsumeQueue(root, "t", 0, file_size)
    cq.load()
    cq.put_many(offsets, units)
    cq.close()
    d = root / "consumequeue" / "t" / "0"
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.mark.parametrize("first", [0, 3, 5, 12])
def test_consume_queue_writer_writes_the_library_bytes(tmp_path: Path, first: int) -> None:
    # 5 units per file; a queue whose first unit is mid-file gets pre-blank units before it.
    n = 9
    offsets = np.arange(first, first + n, dtype=np.int64)
    units = np.zeros(n, dtype=codec.CQ_UNIT_DTYPE)
    units["commitlog_offset"] = 1000 + 100 * np.arange(n)
    units["size"] = 100
    units["tags_code"] = np.arange(n) - 4
    want = _library_queue(tmp_path / "lib", offsets, units, 100)
    qdir = tmp_path / "job" / "t" / "0"
    assert write_consume_queue_files(qdir, offsets[:4], units[:4], 100) == 4
    assert write_consume_queue_files(qdir, offsets, units, 100, after=first + 4) == n - 4
    assert {p.name: p.read_bytes() for p in sorted(qdir.iterdir())} == want
    if first % 5:
        head = want[codec.format_file_name(first // 5 * 100)]
        assert head[:20] == codec.CQ_UNIT.pack(0, 0x7FFFFFFF, 0)  # FORMAT.md §6 pre-blank


def test_consume_queue_writer_refuses_a_gap(tmp_path: Path) -> None:
    units = np.zeros(2, dtype=codec.CQ_UNIT_DTYPE)
    with pytest.raises(StoreFormatError, match="leaves a gap after 0"):
        write_consume_queue_files(tmp_path / "q", np.array([0, 2]), units, 100)




def test_load_queues_hands_back_the_units_it_read_of_each_one_file_queue(tmp_path: Path) -> None:
    """``load_queues(read=...)`` gives each queue of one file its written units as the load
    read them (what recovery's check would read again); a queue of two files is left out."""
    root = tmp_path / "s"
    with MessageStore(root, mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=60) as ms:
        one = [ms.put(Message("A", b"x" * 10, 0)) for _ in range(2)]  # 2 of a file's 3 units
        [ms.put(Message("B", b"y", 1)) for _ in range(4)]  # 2 files
    read: dict[tuple[str, int], np.ndarray] = {}
    queues = load_queues(root, 60, read=read)
    try:
        assert sorted(read) == [("A", 0)]
        assert read[("A", 0)].tolist() == [(r.commitlog_offset, r.size, 0) for r in one]
        assert not read[("A", 0)].flags.writeable
        assert queues[("A", 0)].all_units().tolist() == read[("A", 0)].tolist()
    finally:
        for cq in queues.values():
            cq.close()


def _queue_files(root: Path, topic: str, units: list[tuple[int, int, int]], first: int = 0) -> None:
    """A queue of ``topic`` (queue 0) in files of 600 bytes (30 units) holding ``units`` from
    queue offset ``first`` (pre-blank units before it)."""
    u = np.array(units, dtype=codec.CQ_UNIT_DTYPE)
    qdir = root / "consumequeue" / topic / "0"
    write_consume_queue_files(qdir, np.arange(first, first + u.size, dtype=np.int64), u, 600)


@pytest.mark.parametrize("commitlog_min", [None, 0, 150, 10**6])
def test_load_queues_in_bulk_agrees_with_loading_each_queue(tmp_path: Path,
                                                            commitlog_min: int | None) -> None:
    """The bulk load of one-file queues (``load_queues``) finds the extent, end and minimum that
    ``ConsumeQueue.load`` finds queue by queue, on queues of every shape."""
    root = tmp_path / "s"
    _queue_files(root, "plain", [(0, 100, 1), (100, 100, 2), (200, 100, 3)])
    _queue_files(root, "preblank", [(300, 50, 0), (350, 50, 0)], first=2)
    _queue_files(root, "zeros-between", [(0, 100, 0), (0, 0, 0), (400, 100, 0)])
    _queue_files(root, "sizeless-first", [(500, 0, 7), (600, 100, 0)])
    _queue_files(root, "two-files", [(k * 10, 10, 0) for k in range(35)])
    empty = root / "consumequeue" / "empty" / "0"
    empty.mkdir(parents=True)
    (empty / codec.format_file_name(0)).write_bytes(bytes(600))
    bulk = load_queues(root, 600, commitlog_min)
    try:
        assert sorted(t for t, _ in bulk) == ["empty", "plain", "preblank", "sizeless-first", "two-files",
                                              "zeros-between"]
        for (topic, qid), cq in bulk.items():
            alone = ConsumeQueue(root, topic, qid, 600)
            alone.load(commitlog_min)
            found = (cq.min_logic_offset, cq.max_physic_offset, [mf.wrote for mf in cq.files.files])
            want = (alone.min_logic_offset, alone.max_physic_offset, [mf.wrote for mf in alone.files.files])
            assert found == want, topic
            alone.close()
        plain = bulk[("plain", 0)]
        # its first unit at or above the CommitLog's minimum; none: its end (3 units, 60 bytes)
        first_kept = {None: 0, 0: 0, 150: 40, 10**6: 60}[commitlog_min]
        assert (plain.min_logic_offset, plain.max_physic_offset, plain.files.files[0].wrote) == \
            (first_kept, 300, 60)
    finally:
        for cq in bulk.values():
            cq.close()


def test_load_queues_leaves_odd_queues_to_the_checked_load(tmp_path: Path) -> None:
    """A queue the bulk load does not take (a file that is a link, of the wrong size, a foreign
    name) is loaded the checked way, which names what is wrong and where; a queue with a
    dot-file beside its file, or with no file, loads as it does alone. (A guard: it passes
    before the bulk read too.)"""
    root = tmp_path / "s"
    _queue_files(root, "plain", [(0, 100, 1), (100, 100, 2)])
    _queue_files(root, "dotted", [(200, 100, 3)])
    (root / "consumequeue" / "dotted" / "0" / ".keep").write_bytes(b"")
    (root / "consumequeue" / "nofile" / "0").mkdir(parents=True)
    read: dict[tuple[str, int], np.ndarray] = {}
    queues = load_queues(root, 600, read=read)
    try:
        assert sorted(queues) == [("dotted", 0), ("nofile", 0), ("plain", 0)]
        assert sorted(read) == [("dotted", 0), ("plain", 0)]
        assert read[("dotted", 0)].tolist() == [(200, 100, 3)]
        assert (queues[("dotted", 0)].max_offset, queues[("nofile", 0)].files.files) == (1, [])
    finally:
        for cq in queues.values():
            cq.close()
    name = codec.format_file_name(0)
    victim = tmp_path / "victim"
    victim.write_bytes(bytes(600))
    (root / "consumequeue" / "linked" / "0").mkdir(parents=True)
    (root / "consumequeue" / "linked" / "0" / name).symlink_to(victim)
    with pytest.raises(LinkedFileError, match=f"consumequeue/linked/0/{name}: is a symbolic link"):
        load_queues(root, 600)
    (root / "consumequeue" / "linked" / "0" / name).unlink()
    (root / "consumequeue" / "linked" / "0" / name).write_bytes(bytes(599))
    with pytest.raises(StoreFormatError, match=f"linked/0/{name}: file is 599 bytes, expected 600"):
        load_queues(root, 600)
    (root / "consumequeue" / "linked" / "0" / name).unlink()
    (root / "consumequeue" / "linked" / "0" / "junk").write_bytes(bytes(600))
    with pytest.raises(StoreFormatError, match="linked/0/junk: not a store file name"):
        load_queues(root, 600)
    assert victim.read_bytes() == bytes(600)


@pytest.mark.parametrize("size", [40000, 200000])  # zeros written to the end / reserved
def test_queue_files_writer_creates_new_queues_whole_with_their_space_reserved(tmp_path: Path,
                                                                              size: int) -> None:
    # files of 2,000 or 10,000 units: a queue starting at offset 3 gets 3 pre-blank units
    n = 5
    offsets = np.arange(3, 3 + n, dtype=np.int64)
    units = np.zeros(n, dtype=codec.CQ_UNIT_DTYPE)
    units["commitlog_offset"] = 1000 + 100 * np.arange(n)
    units["size"] = 100
    units["tags_code"] = 7
    want = _library_queue(tmp_path / "lib", offsets, units, size)
    w = QueueFilesWriter(tmp_path / "out", size, ".cq.new")
    assert w.write("t", 0, offsets[:2], units[:2]) == 2
    assert w.write("t", 0, offsets, units) == 3  # what it wrote before is skipped
    assert w.ends == {("t", 0): 3 + n}
    qdir = tmp_path / "out" / ".cq.new" / "t" / "0"
    assert {p.name: p.read_bytes() for p in qdir.iterdir()} == want
    head = want[codec.format_file_name(0)]
    assert head[:60] == codec.CQ_UNIT.pack(0, 0x7FFFFFFF, 0) * 3  # FORMAT.md §6 pre-blank
    assert len(head) == size and head[160:] == bytes(size - 160)
    assert (qdir / codec.format_file_name(0)).stat().st_blocks * 512 >= size  # not sparse


def _queues(topics: int, seed: int, first: int | None = None) -> tuple[list[tuple[str, int]],
                                                                      list[np.ndarray], list[np.ndarray]]:
    """10 queues per topic, each of 1-12 units from a random queue offset below 8 (``first``:
    from that one), with random units."""
    rng = np.random.default_rng(seed)
    keys, offsets, units = [], [], []
    for t in range(topics):
        for q in range(10):
            start = int(rng.integers(0, 8)) if first is None else first
            n = int(rng.integers(1, 13))
            u = np.zeros(n, dtype=codec.CQ_UNIT_DTYPE)
            u["commitlog_offset"] = rng.integers(0, 1 << 40, n)
            u["size"] = rng.integers(1, 1000, n)
            u["tags_code"] = rng.integers(-(1 << 40), 1 << 40, n)
            keys.append((f"t{t:02d}", q))
            offsets.append(np.arange(start, start + n, dtype=np.int64))
            units.append(u)
    return keys, offsets, units


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_queue_files_writer_writes_many_queues_from_threads_as_it_writes_them_one_by_one(
        tmp_path: Path) -> None:
    """``write_many`` with two threads (600 queues: each thread a run of whole topics) writes the
    bytes ``write`` writes queue by queue: pre-blank units before a queue starting mid-file,
    queues over several files of 100 bytes (5 units); a second call continues each queue."""
    many = QueueFilesWriter(tmp_path / "many", 100, threads=2)
    one = QueueFilesWriter(tmp_path / "one", 100)
    for seed, first in ((1, None), (2, 20)):  # then each queue continues at offset 20
        keys, offsets, units = _queues(60, seed, first)
        if first is not None:  # the queues end where the first call left them
            offsets = [o - o[0] + many.ends[k] for k, o in zip(keys, offsets)]
        bounds = np.r_[0, np.cumsum([o.size for o in offsets])]
        assert many.write_many(keys, bounds, np.concatenate(offsets),
                               np.concatenate(units)) == [o.size for o in offsets]
        for (topic, qid), o, u in zip(keys, offsets, units):
            assert one.write(topic, qid, o, u) == o.size
    assert many.ends == one.ends and len(many.ends) == 600
    written = _files(tmp_path / "many")
    assert written == _files(tmp_path / "one")
    assert len(written) > 1200  # queues of several files
    assert written["consumequeue/t00/3/00000000000000000000"][:20] == \
        codec.CQ_UNIT.pack(0, 0x7FFFFFFF, 0)  # it starts at offset 1: a pre-blank unit (FORMAT.md §6)


def test_queue_files_writer_writing_many_queues_reports_the_first_problem_and_nothing_outside(
        tmp_path: Path) -> None:
    """Two threads, a gap in a queue of the first one's run and a topic directory that is a link
    in the second's: the gap is reported (the first problem in the queues' order), the link's
    target is not written."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "out" / "consumequeue").mkdir(parents=True)
    (tmp_path / "out" / "consumequeue" / "t50").symlink_to(outside, target_is_directory=True)
    keys, offsets, units = _queues(60, 3, 0)
    offsets[52] = offsets[52] * 2  # topic t05, queue 2: offsets 0, 2, 4, ...
    bounds = np.r_[0, np.cumsum([o.size for o in offsets])]
    w = QueueFilesWriter(tmp_path / "out", 100, threads=2)
    with pytest.raises(StoreFormatError, match=r"t05/2: queue offset 2 leaves a gap after 0"):
        w.write_many(keys, bounds, np.concatenate(offsets), np.concatenate(units))
    assert list(outside.iterdir()) == []
    with pytest.raises(UnsafePathError, match="outside"):
        w.write_many(keys[500:], bounds[500:] - bounds[500], np.concatenate(offsets[500:]),
                     np.concatenate(units[500:]))
    assert list(outside.iterdir()) == []


def test_queue_files_writer_refuses_a_link_in_a_queue_that_was_there(tmp_path: Path) -> None:
    qdir = tmp_path / "out" / "consumequeue" / "t" / "1"
    qdir.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_bytes(b"outside")
    (qdir / codec.format_file_name(0)).symlink_to(victim)
    units = np.zeros(1, dtype=codec.CQ_UNIT_DTYPE)
    w = QueueFilesWriter(tmp_path / "out", 100)
    with pytest.raises(LinkedFileError, match=f"{qdir / codec.format_file_name(0)}: is a symbolic link"):
        w.write("t", 1, np.array([0]), units)
    assert victim.read_bytes() == b"outside"
    assert w.write("t", 0, np.array([0]), units) == 1  # a queue of its own: made new
    assert w.ends == {("t", 0): 1}


def test_queue_files_writer_refuses_a_topic_directory_that_leads_out(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    base = tmp_path / "out" / "consumequeue"
    base.mkdir(parents=True)
    (base / "t").symlink_to(outside, target_is_directory=True)
    w = QueueFilesWriter(tmp_path / "out", 100)
    with pytest.raises(UnsafePathError, match="outside"):
        w.write("t", 0, np.array([0]), np.zeros(1, dtype=codec.CQ_UNIT_DTYPE))
    assert list(outside.iterdir()) == []
    assert w.write("u", 0, np.array([0]), np.zeros(1, dtype=codec.CQ_UNIT_DTYPE)) == 1  # made new
