"""The Spark rebuild's planning (``transforms.store_rebuild``) without Spark: the record chain
across parts, the spread of queues over tasks, and which keys go to which index file."""
from __future__ import annotations

import os
from datetime import UTC
from pathlib import Path

import numpy as np
import pytest

from rocketlake.store import codec
from rocketlake.store.errors import LinkedFileError, StoreFullError
from rocketlake.store.index import IndexService
from rocketlake.transforms import store_rebuild as sr
from rocketlake.transforms.commitlog_scan import ScanRange

UTC = UTC


def part(n: int, first: int | None, tail: int, records: int = 1, stop: int | None = None,
         reason: str | None = None, keys: int = 0, queues=()) -> sr.PartSummary:
    return sr.PartSummary(n, first, tail, stop, reason, records, keys, {"t": keys} if keys else {},
                          tuple(queues), None)


def ranges(*bounds: tuple[int, int]) -> list[ScanRange]:
    return [ScanRange("f", 0, lo, hi) for lo, hi in bounds]


def no_rescan(i: int, at: int) -> sr.PartSummary:
    raise AssertionError(f"part {i} re-scanned from {at}")


def test_valid_parts_follow_the_chain_and_skip_ranges_without_a_record_start() -> None:
    parts = [part(0, 0, 150, 3), part(1, None, 0), part(2, 150, 400, 2), part(3, 400, 1000, 4)]
    v = sr.valid_parts(parts, ranges((0, 100), (100, 150), (150, 300), (300, 1000)), 0, no_rescan)
    assert ([p.part for p in v.parts], v.end, v.reason, v.records, v.gap) == ([0, 2, 3], 1000, None, 9, False)


def test_valid_data_ends_at_a_chain_gap() -> None:
    # no range holds offset 150, where part 0's last record said the next would start
    v = sr.valid_parts([part(0, 0, 150, 3), part(1, 170, 300, 2)], ranges((0, 100), (160, 300)), 0,
                       no_rescan)
    assert ([p.part for p in v.parts], v.end, v.records, v.gap) == ([0], 150, 3, True)
    assert v.reason == "offset 150: no valid record starts here"


def test_a_part_that_started_inside_a_record_is_rescanned_from_the_chain() -> None:
    # part 1's scan started at 120, bytes inside the record [0, 130) that look like a record
    # head; part 2 lies wholly inside the record [130, 450), part 3 starts inside it
    calls = []

    def rescan(i: int, at: int) -> sr.PartSummary:
        calls.append((i, at))
        return {1: part(1, 130, 450, 2), 3: part(3, 450, 500, 1)}[i]

    parts = [part(0, 0, 130, 3), part(1, 120, 240, 9), part(2, 260, 300, 1), part(3, 420, 430, 1)]
    v = sr.valid_parts(parts, ranges((0, 100), (100, 200), (200, 400), (400, 500)), 0, rescan)
    assert calls == [(1, 130), (3, 450)]
    assert ([p.part for p in v.parts], [p.first for p in v.parts], v.end, v.records, v.gap) == (
        [0, 1, 3], [0, 130, 450], 500, 6, False)


def test_valid_data_ends_where_a_part_stopped_early() -> None:
    parts = [part(0, 0, 150, 3), part(1, 150, 200, 1, stop=200, reason="bad CRC"), part(2, 260, 300)]
    v = sr.valid_parts(parts, ranges((0, 100), (100, 200), (200, 300)), 0, no_rescan)
    assert ([p.part for p in v.parts], v.end, v.reason, v.records) == ([0, 1], 200, "bad CRC", 4)
    assert not v.gap


def test_queues_spread_over_tasks_in_topic_order_by_weight() -> None:
    q = sr.QueueRows
    parts = [part(0, 0, 10, queues=[q("c", 1, 60, 90), q("a", 0, 0, 50), q("b", 0, 50, 60)]),
             part(1, 10, 20, queues=[q("a", 0, 0, 10), q("d", 2, 10, 30)])]
    jobs = sr.plan_queues(parts, {("b", 0): 7}, tasks=2)
    # weights a 60+W, b 10+W, c 30+W, d 20+W (W = QUEUE_WEIGHT): in topic order, each queue in
    # the half its midpoint falls in
    assert [[(t, qid, after, s) for t, qid, after, s in j.queues] for j in jobs] == [
        [("a", 0, 0, [(0, 0, 50), (1, 0, 10)]), ("b", 0, 7, [(0, 50, 60)])],
        [("c", 1, 0, [(0, 60, 90)]), ("d", 2, 0, [(1, 10, 30)])]]
    assert [j.units for j in jobs] == [70, 50]


def test_a_topics_queues_share_a_write_task() -> None:
    q = sr.QueueRows
    parts = [part(0, 0, 10, queues=[q(t, i, 3 * k, 3 * k + 3)
                                     for k, (t, i) in enumerate((t, i) for i in range(10) for t in "uvwt")])]
    jobs = sr.plan_queues(parts, {}, tasks=4)
    assert [sorted({t for t, *_ in j.queues}) for j in jobs] == [["t"], ["u"], ["v"], ["w"]]
    assert [[qid for _, qid, _, _ in j.queues] for j in jobs] == [list(range(10))] * 4
    assert sr.plan_queues([part(0, 0, 10)], {}, tasks=4) == []


def save_keys(staging: Path, n: int, ts: list[int]) -> None:
    k = np.zeros(len(ts), dtype=sr.KEY_DTYPE)
    k["phy"] = np.arange(len(ts)) * 100 + n * 10_000
    k["ts"] = ts
    sr.save_keys(staging, n, k, 4, 1)


def test_index_files_take_entry_num_minus_one_keys_each(tmp_path: Path) -> None:
    # 3 + 4 keys over two parts, 3 keys per file (entry_num 4): files of keys 0-2, 3-5, 6
    save_keys(tmp_path, 0, [1000, 1000, 2000])
    save_keys(tmp_path, 1, [3000, 4000, 5000, 6000])
    parts = [part(0, 0, 1, keys=3), part(1, 1, 2, keys=4)]
    jobs = sr.plan_index(parts, tmp_path, Path("idx"), entry_num=4, zone=UTC)
    names = [Path(j.path).name for j in jobs]
    assert names == [codec.index_file_name(t, UTC) for t in (1000, 3000, 6000)]
    assert [j.slices for j in jobs] == [[(0, 0, 3)], [(1, 0, 3)], [(1, 3, 4)]]
    # a new file starts from the previous file's last key (RocketMQ's IndexFile constructor)
    assert [j.create_from for j in jobs] == [(0, 0), (200, 2000), (10_200, 5000)]
    # the (offset, store time) of each file's first and last key, for its header
    assert [(j.first, j.last) for j in jobs] == [((0, 1000), (200, 2000)),
                                                 ((10_000, 3000), (10_200, 5000)),
                                                 ((10_300, 6000), (10_300, 6000))]


def test_index_continues_the_open_file_then_names_after_it(tmp_path: Path) -> None:
    save_keys(tmp_path, 0, [500, 500, 700])
    tail = sr.IndexTail(codec.index_file_name(900, UTC), 77, 400, free=2)
    jobs = sr.plan_index([part(0, 0, 1, keys=3)], tmp_path, Path("idx"), 4, tail, UTC)
    assert [(Path(j.path).name, j.create_from, j.slices) for j in jobs] == [
        (tail.name, None, [(0, 0, 2)]),
        # key 2 was stored at 700 ms, before the open file's name: the name is bumped past it
        (codec.index_file_name(901, UTC), (100, 500), [(0, 2, 3)])]


def test_keys_are_staged_by_slot_range_and_a_task_reads_only_its_own(tmp_path: Path) -> None:
    # 4 slots in 2 ranges, slots 0-1 and 2-3; slot = hash % 4
    k = np.zeros(6, dtype=sr.KEY_DTYPE)
    k["key_hash"] = [5, 2, 7, 0, 3, 6]  # slots 1, 2, 3, 0, 3, 2: ranges 0, 1, 1, 0, 1, 1
    k["phy"] = [10, 11, 12, 13, 14, 15]
    sr.save_keys(tmp_path, 0, k, 4, 2)
    staged = np.load(sr.part_path(tmp_path, 0, "keys"))
    assert staged["key_hash"].tolist() == [5, 0, 2, 7, 3, 6]  # range 0's keys, then range 1's
    assert np.load(sr.part_path(tmp_path, 0, "keypos")).tolist() == [0, 3, 1, 2, 4, 5]
    assert np.load(sr.part_path(tmp_path, 0, "keybounds")).tolist() == [0, 2, 6]
    # keys 1-4 of slots 2-3: keys 1, 2 and 4 (key 3 has slot 0)
    got = list(sr.share_keys(tmp_path, 0, 1, 5, 4, (2, 4)))
    assert [(r["phy"].tolist(), p.tolist()) for r, p in got] == [([11, 12, 14], [1, 2, 4])]
    assert [p.tolist() for _, p in sr.share_keys(tmp_path, 0, 0, 6, 4, (0, 4))] == [[0, 3], [1, 2, 4, 5]]
    with pytest.raises(ValueError, match="not a union of the slot ranges"):
        list(sr.share_keys(tmp_path, 0, 0, 6, 4, (1, 4)))


@pytest.mark.parametrize("put_keys, buckets", [(1 << 20, 2), (3, 2), (1 << 20, 4), (3, 4)])
def test_index_tasks_over_slot_ranges_write_the_library_bytes(tmp_path: Path, put_keys: int,
                                                             buckets: int,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The library's bytes whether each task places its keys at once or a few at a time, and
    whether its slots are one staged slot range or two."""
    monkeypatch.setattr(sr, "PUT_KEYS", put_keys)
    rng = np.random.default_rng(3)
    hashes = rng.integers(0, 1 << 31, 10).astype(np.int32)
    phy, ts = np.arange(10, dtype=np.int64) * 64, 1_700_000_000_000 + np.arange(10, dtype=np.int64) * 900
    lib = IndexService(tmp_path / "lib", 4, 5, UTC)
    lib.add_hashes(hashes, phy, ts)
    lib.build()
    lib.close()
    k = np.zeros(10, dtype=sr.KEY_DTYPE)
    k["key_hash"], k["phy"], k["ts"] = hashes, phy, ts
    sr.save_keys(tmp_path, 0, k, 4, buckets)
    out = tmp_path / "spark" / "index"
    out.mkdir(parents=True)
    jobs = sr.plan_index([part(0, 0, 1, keys=10)], tmp_path, out, 5, zone=UTC)
    sr.create_index_files(jobs, 4, 5)
    shares = sr.share_index(jobs, 4, 2, buckets)  # each file by two tasks: slots 0-1 and 2-3
    assert [(Path(j.path).name, j.slots) for j in shares] == [
        (Path(j.path).name, s) for j in jobs for s in ((0, 2), (2, 4))]
    filled: dict[str, int] = {}
    for j in reversed(shares):  # in any order
        filled[j.path] = filled.get(j.path, 0) + sr.write_index_file_task(j, str(tmp_path), 4, 5)
    sr.finish_index_files(jobs, filled, 4, 5)
    expected = sorted((tmp_path / "lib" / "index").iterdir())
    assert [p.name for p in sorted(out.iterdir())] == [p.name for p in expected]
    assert [p.read_bytes() for p in sorted(out.iterdir())] == [p.read_bytes() for p in expected]


def test_walk_part_of_a_range_without_a_record_start(tmp_path: Path) -> None:
    log = tmp_path / "00000000000000000000"
    log.write_bytes(bytes(4096))
    s = sr.walk_part(5, ScanRange(str(log), 0, 1024, 2048), str(tmp_path), (), True, True)
    assert (s.part, s.first, s.records, s.keys, s.queues) == (5, None, 0, 0, ())


@pytest.mark.parametrize("units, keys", [(True, False), (False, True)])
def test_walk_part_writes_only_what_is_asked(tmp_path: Path, units: bool, keys: bool) -> None:
    from rocketlake.store import Message, MessageStore
    store = tmp_path / "store"
    with MessageStore(store, mappedFileSizeCommitLog=65536) as s:
        s.put_batch([Message("t", b"x" * 10, i % 2, keys=f"k{i}") for i in range(20)])
    log = store / "commitlog" / "00000000000000000000"
    staging = tmp_path / "parts"
    staging.mkdir()
    summary = sr.walk_part(0, ScanRange(str(log), 0, 0, 65536), str(staging), codec.DELAY_LEVELS_MS,
                           units, keys)
    assert summary.records == 20 and summary.stop is not None and summary.reason is None  # zeros
    assert sorted(p.name.split(".")[1] for p in staging.iterdir()) == (
        ["qoff", "units"] if units else ["keybounds", "keypos", "keys"])
    if units:
        assert [(q.topic, q.queue_id, q.hi - q.lo) for q in summary.queues] == [("t", 0, 10), ("t", 1, 10)]
    else:
        assert summary.keys == 20 and summary.key_topics == {"t": 20}  # one KEYS token each, no UNIQ_KEY


def test_a_scan_part_the_disk_cannot_hold_is_a_full_disk_naming_it(small_fs: Path) -> None:
    """A scan part (the Spark rebuild's staged units and keys) written on a disk with 8 KiB
    left: a StoreFullError naming the part and saying the device has no space left, as every
    other full-disk error says it (numpy's own save reported "... requested and ... written",
    without the errno); a part that fits reads back as the array it was."""
    fd = os.open(small_fs / "filler", os.O_WRONLY | os.O_CREAT)
    st = os.statvfs(small_fs)
    os.write(fd, bytes(st.f_bavail * st.f_frsize - 8192))
    os.close(fd)
    small = np.arange(100, dtype=np.int64)
    sr._save(small_fs / "small.npy", small)
    assert np.array_equal(np.load(small_fs / "small.npy"), small)
    part = small_fs / "000000.units.npy"
    with pytest.raises(StoreFullError) as e:
        sr._save(part, np.zeros(200_000, dtype=codec.CQ_UNIT_DTYPE))  # 4 MB
    assert str(e.value).startswith(f"[Errno 28] {part}: no space left on device writing a "
                                   f"rebuild's scan part")


def test_a_scan_part_is_never_written_through_a_link(tmp_path: Path) -> None:
    """A link at a scan part's name (to a file outside the staging folder) is refused, naming
    the part, and the link's target keeps its bytes."""
    target = tmp_path / "someone.txt"
    target.write_bytes(b"not ours")
    (tmp_path / "000000.units.npy").symlink_to(target)
    with pytest.raises(LinkedFileError, match="000000.units.npy: is a symbolic link"):
        sr._save(tmp_path / "000000.units.npy", np.arange(4, dtype=np.int64))
    assert target.read_bytes() == b"not ours"
