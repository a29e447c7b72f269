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
from rocketlake.store.consume_queue import ConsumeQueue, QueueFilesWriter, write_consume_queue_files
from rocketlake.store.errors import LinkedFileError, StoreFormatError
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




def test_queue_files_writer_creates_new_queues_whole_with_their_space_reserved(tmp_path: Path) -> None:
    # files of 40,000 bytes (2,000 units): a queue starting at offset 3 gets 3 pre-blank units
    n = 5
    offsets = np.arange(3, 3 + n, dtype=np.int64)
    units = np.zeros(n, dtype=codec.CQ_UNIT_DTYPE)
    units["commitlog_offset"] = 1000 + 100 * np.arange(n)
    units["size"] = 100
    units["tags_code"] = 7
    want = _library_queue(tmp_path / "lib", offsets, units, 40000)
    w = QueueFilesWriter(tmp_path / "out", 40000, ".cq.new")
    assert w.write("t", 0, offsets[:2], units[:2]) == 2
    assert w.write("t", 0, offsets, units) == 3  # what it wrote before is skipped
    assert w.ends == {("t", 0): 3 + n}
    qdir = tmp_path / "out" / ".cq.new" / "t" / "0"
    assert {p.name: p.read_bytes() for p in qdir.iterdir()} == want
    head = want[codec.format_file_name(0)]
    assert head[:60] == codec.CQ_UNIT.pack(0, 0x7FFFFFFF, 0) * 3  # FORMAT.md §6 pre-blank
    assert len(head) == 40000 and head[160:] == bytes(39840)
    assert (qdir / codec.format_file_name(0)).stat().st_blocks * 512 >= 40000  # not sparse


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
