"""Retention (store.retention): RocketMQ's rules as pure decisions, and applied to a real store
whose file mtimes are set into the past with os.utime.

Expectations come from the rules docs/FORMAT.md §9.4 states, hand-computed values, and the store's
files read back with docs/FORMAT.md §6-§7 layouts, not from the code under test.
"""
from __future__ import annotations

import os
import shutil
import struct
import time
from pathlib import Path

import pytest

from rocketlake.store import GetStatus, Message, MessageStore
from rocketlake.store.config import parse_delete_when
from rocketlake.store.retention import (
    RetentionPolicy,
    consume_queue_files_below,
    expired_files,
    plan_commitlog_deletion,
    trigger,
)

HOUR = 3_600_000
NOW = 1_800_000_000_000  # ms
# diskMaxUsedSpaceRatio=100: the disk never triggers deletion unless a test asks it to.
SMALL = {"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 200,  # 10 units a file
         "maxHashSlotNum": 16, "maxIndexNum": 21, "fileReservedTime": 72, "deleteWhen": "04",
         "diskMaxUsedSpaceRatio": 100}


def local_ms(hour: int, base: float = NOW / 1000) -> int:
    """A time (ms) on ``base``'s day whose local hour is ``hour`` (deleteWhen is local time,
    as in RocketMQ)."""
    t = time.localtime(base)
    return int(time.mktime((t.tm_year, t.tm_mon, t.tm_mday, hour, 30, 0, 0, 0, -1))) * 1000


# --- the pure rules ---------------------------------------------------------------------------------
def test_delete_when_hours() -> None:
    assert parse_delete_when("04") == {4}
    assert parse_delete_when("03;04") == {3, 4}
    assert parse_delete_when("0;23") == {0, 23}
    for bad in ("4am", "24", "", "03;;04", "-1"):
        with pytest.raises(ValueError, match="deleteWhen"):
            parse_delete_when(bad)


def test_trigger() -> None:
    policy = RetentionPolicy(72, frozenset({3, 4}), 75)
    assert trigger(local_ms(4), policy, 0.10) == "deleteWhen"
    assert trigger(local_ms(3), policy, 0.10) == "deleteWhen"
    assert trigger(local_ms(5), policy, 0.10) is None
    assert trigger(local_ms(5), policy, 0.75) is None  # "passes" the ratio: strictly above
    assert trigger(local_ms(5), policy, 0.76) == "disk"
    assert trigger(local_ms(5), policy, 0.10, force=True) == "forced"
    assert trigger(local_ms(5), policy, 0.10, hour_gate=False) == "scheduled"  # the caller's schedule


def test_expired_files_are_a_leading_run_and_never_the_last() -> None:
    files = [("a", NOW - 73 * HOUR), ("b", NOW - 72 * HOUR),  # b: mtime + 72 h == now: expired
             ("c", NOW - 71 * HOUR), ("d", NOW - 100 * HOUR), ("e", NOW - 100 * HOUR)]
    assert expired_files(files, NOW, 72) == ["a", "b"]  # c is kept, so d stays too
    assert expired_files(files[3:], NOW, 72) == ["d"]  # e is the active file
    assert expired_files([("only", 0)], NOW, 72) == []
    assert expired_files(files, NOW, 0) == ["a", "b", "c", "d"]


def test_plan_runs_only_when_triggered() -> None:
    policy = RetentionPolicy(72, frozenset({4}), 75)
    files = [("0", NOW - 80 * HOUR), ("4096", NOW - 80 * HOUR), ("8192", NOW)]
    assert plan_commitlog_deletion(files, local_ms(5), policy, 0.5).delete == ()
    assert plan_commitlog_deletion(files, local_ms(5), policy, 0.5).reason is None
    plan = plan_commitlog_deletion(files, local_ms(4), policy, 0.5)
    assert (plan.reason, plan.delete) == ("deleteWhen", ("0", "4096"))


def test_consume_queue_files_below() -> None:
    assert consume_queue_files_below([100, 200, 300], 250) == 2
    assert consume_queue_files_below([100, 200, 300], 10_000) == 2  # never a queue's last file
    assert consume_queue_files_below([100, 200, 300], 200) == 1  # 200 is not below the minimum
    assert consume_queue_files_below([], 200) == 0


# --- applied to a store -----------------------------------------------------------------------------
def records(root: Path) -> list[tuple[int, int, str, int, int]]:
    """(offset, size, topic, queue id, queue offset) of every record, at docs/FORMAT.md §2 offsets."""
    out = []
    for path in sorted((root / "commitlog").iterdir()):
        data, start, pos = path.read_bytes(), int(path.name), 0
        while pos + 8 <= len(data):
            total, magic = struct.unpack_from(">iI", data, pos)
            if magic != 0xDAA320A7:
                break
            qid, = struct.unpack_from(">i", data, pos + 12)
            qoff, = struct.unpack_from(">q", data, pos + 20)
            body_len, = struct.unpack_from(">i", data, pos + 84)
            tlen = data[pos + 88 + body_len]
            topic = data[pos + 89 + body_len:pos + 89 + body_len + tlen].decode()
            out.append((start + pos, total, topic, qid, qoff))
            pos += total
    return out


def cq_files(root: Path, topic: str, qid: int) -> dict[str, list[tuple[int, int, int]]]:
    qdir = root / "consumequeue" / topic / str(qid)
    return {p.name: [struct.unpack_from(">qiq", p.read_bytes(), i) for i in range(0, 200, 20)]
            for p in sorted(qdir.iterdir())}


def index_ends(root: Path) -> dict[str, int]:
    return {p.name: struct.unpack_from(">q", p.read_bytes(), 24)[0]
            for p in sorted((root / "index").iterdir())}


def age(root: Path, names: list[str], hours: int, now_ms: int) -> None:
    """Set the files' mtime to ``hours`` before ``now_ms``."""
    for name in names:
        t = now_ms / 1000 - hours * 3600
        os.utime(root / "commitlog" / name, (t, t))


def write(ms: MessageStore, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        ms.put(Message("orders", b"o" * 90, queue_id=0, tags="TagA", keys=f"o{i}"))
        if i % 3 == 0:
            ms.put(Message("audit", b"a" * 90, queue_id=1, keys=f"a{i}"))


def expected_after(recs, min_offset: int, topic: str, qid: int) -> int:
    """Queue minimum after retention: the queue offset of its first record at or above the
    CommitLog minimum (docs/FORMAT.md §9.4)."""
    return min(q for off, _, t, i, q in recs if t == topic and i == qid and off >= min_offset)


def test_retention_on_a_store(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with MessageStore(root, **SMALL) as ms:
        write(ms, 120)
    names = sorted(p.name for p in (root / "commitlog").iterdir())
    assert len(names) >= 6
    at4, at5 = local_ms(4, time.time()), local_ms(5, time.time())
    age(root, names[:4], 100, at4)
    age(root, names[4:], 10, at4)
    cq_before = cq_files(root, "orders", 0)
    idx_before = index_ends(root)

    with MessageStore(root, **SMALL) as ms:
        nothing = ms.delete_expired_files(now=at5)  # not the deleteWhen hour
        assert (nothing.reason, nothing.commitlog_files, nothing.consume_queue_files) == (None, [], [])
        report = ms.delete_expired_files(now=at4)  # the deleteWhen hour
        assert report.reason == "deleteWhen"
        assert report.commitlog_files == names[:4]
        new_min = int(names[4])
        assert report.commitlog_min_offset == new_min
        # ConsumeQueue files whose last unit points below the new minimum, never the last file.
        cq_gone = [n for n, units in list(cq_before.items())[:-1] if units[-1][0] < new_min]
        assert [f.split("/")[-1] for f in report.consume_queue_files if f.startswith("orders/0/")] == cq_gone
        # Index files whose endPhyOffset is below the minimum, never the last one.
        assert report.index_files == [n for n, end in list(idx_before.items())[:-1] if end < new_min]
        recs = records(root)
        for topic, qid in (("orders", 0), ("audit", 1)):
            lo = expected_after(recs, new_min, topic, qid)
            assert ms.min_offset(topic, qid) == lo
            got = ms.get(topic, qid, 0)
            assert (got.status, got.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, lo)
            got = ms.get(topic, qid, lo, 1)
            assert got.status == GetStatus.FOUND
            assert got.messages[0].record.commitlog_offset == min(
                off for off, _, t, i, q in recs if t == topic and i == qid and q == lo)
        assert ms.query("orders", "o119")  # recent messages are untouched
        assert ms.query("orders", "o0") == []
    # Reopening keeps the corrected minimums.
    with MessageStore(root, **SMALL) as ms:
        assert ms.min_offset("orders", 0) == expected_after(records(root), new_min, "orders", 0)
        assert [p.name for p in sorted((root / "commitlog").iterdir())] == names[4:]


def test_active_file_is_never_deleted_and_force(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with MessageStore(root, **SMALL) as ms:
        write(ms, 60)
    names = sorted(p.name for p in (root / "commitlog").iterdir())
    age(root, names, 1000, int(time.time() * 1000))
    with MessageStore(root, **SMALL) as ms:
        report = ms.delete_expired_files(force=True)
        assert (report.reason, report.commitlog_files) == ("forced", names[:-1])
        last = records(root)[-1]
        assert ms.read(last[0]).size == last[1]
        write(ms, 5, start=1000)  # the store keeps working
        assert ms.query("orders", "o1004")


def test_disk_ratio_triggers_deletion(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with MessageStore(root, **SMALL) as ms:
        write(ms, 60)
    names = sorted(p.name for p in (root / "commitlog").iterdir())
    at5 = local_ms(5, time.time())
    age(root, names[:2], 100, at5)
    with MessageStore(root, **{**SMALL, "diskMaxUsedSpaceRatio": 0}) as ms:  # any use passes 0 %
        report = ms.delete_expired_files(now=at5)
        assert (report.reason, report.commitlog_files) == ("disk", names[:2])


def test_queue_starting_at_a_non_zero_offset(tmp_path: Path) -> None:
    """A queue rebuilt after retention starts mid-file: its first file begins with pre-blank
    units (0, 0x7FFFFFFF, 0) (docs/FORMAT.md §6); retention and reads must respect them."""
    root = tmp_path / "store"
    with MessageStore(root, **SMALL) as ms:
        for i in range(150):
            ms.put(Message("orders", b"p" * 120, queue_id=0, keys=f"p{i}"))
    names = sorted(p.name for p in (root / "commitlog").iterdir())
    age(root, names[:3], 100, int(time.time() * 1000))
    with MessageStore(root, **SMALL) as ms:
        ms.delete_expired_files(force=True)
    shutil.rmtree(root / "consumequeue")  # rebuilt from the remaining CommitLog on open
    shutil.rmtree(root / "index")
    recs = records(root)
    first_q = recs[0][4]
    assert first_q % 10, "the test needs a queue starting inside a ConsumeQueue file"
    with MessageStore(root, **SMALL) as ms:
        assert ms.min_offset("orders", 0) == first_q
        assert ms.max_offset("orders", 0) == recs[-1][4] + 1
    first_file = f"{first_q // 10 * 200:020d}"
    units = cq_files(root, "orders", 0)[first_file]
    assert units[:first_q % 10] == [(0, 0x7FFFFFFF, 0)] * (first_q % 10)
    assert units[first_q % 10] == (recs[0][0], recs[0][1], 0)

    names = sorted(p.name for p in (root / "commitlog").iterdir())
    age(root, names[:2], 100, int(time.time() * 1000))
    new_min = int(names[2])
    before = cq_files(root, "orders", 0)
    cq_gone = [n for n, u in list(before.items())[:-1] if u[-1][0] < new_min]
    assert first_file in cq_gone  # the file with the pre-blank units goes
    with MessageStore(root, **SMALL) as ms:
        report = ms.delete_expired_files(force=True)
        assert report.commitlog_files == names[:2]
        assert report.consume_queue_files == [f"orders/0/{n}" for n in cq_gone]
        lo = expected_after(records(root), new_min, "orders", 0)
        assert ms.min_offset("orders", 0) == lo
        got = ms.get("orders", 0, first_q)
        assert (got.status, got.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, lo)
        assert ms.get("orders", 0, lo, 1).messages[0].record.queue_offset == lo
