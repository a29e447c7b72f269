"""verify's per-queue ConsumeQueue check (``store.queue_tally``): a queue whose units and records
agree costs no table of records; a damaged one is named exactly, with the problems verify has
always reported for it."""
from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from store_helpers import retopic

from rocketlake.store import Message, MessageStore
from rocketlake.store.config import load_config
from rocketlake.store.queue_tally import QueueTally
from rocketlake.store.store_files import StoreFiles
from rocketlake.store.verify import verify

SIZES = dict(mappedFileSizeCommitLog=1 << 20, mappedFileSizeConsumeQueue=6000)  # one CQ file per queue
CQ0 = "consumequeue/t/0/00000000000000000000"
UNIT = struct.Struct(">qiq")  # commitlog offset, size, tagsCode: 20 bytes


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    """12 messages to topic t, alternately queue 0 and 1: each queue has queue offsets 0..5."""
    root = tmp_path / "s"
    with MessageStore(root, **SIZES) as ms:
        ms.put_batch([Message("t", f"body-{i}".encode(), i % 2, tags="A") for i in range(12)])
    return root


def _units(root: Path, queue: int) -> list[tuple[int, int, int]]:
    raw = (root / f"consumequeue/t/{queue}/00000000000000000000").read_bytes()
    return [UNIT.unpack_from(raw, 20 * i) for i in range(6)]


def _put_unit(root: Path, position: int, unit: tuple[int, int, int]) -> None:
    path = root / CQ0
    raw = bytearray(path.read_bytes())
    raw[20 * position:20 * position + 20] = UNIT.pack(*unit)
    path.write_bytes(bytes(raw))


def _errors(root: Path) -> list[tuple[str, str, int | None, str]]:
    return [(p.kind, p.file, p.offset, p.what) for p in verify(root, **SIZES).problems
            if p.severity == "error"]


def _troubled(root: Path) -> list[tuple[str, int]]:
    """The queues the sums of ``QueueTally`` send to the exact check."""
    with StoreFiles(root.resolve(), load_config(SIZES), sizes_from_files=True) as files:
        log = files.commitlog
        queues = [cq for _, cq in sorted(files.queues.items())]
        tally = QueueTally(queues, log.min_offset, files.cfg.delay_levels_ms)
        for batch in log.walk(log.min_offset, True, log.max_offset):
            tally.records(batch)
        for k, cq in enumerate(queues):
            tally.units([(k, mf) for mf in cq.files.files])
        return [tally.keys[k] for k in tally.troubled().tolist()]


def test_a_clean_store_has_no_troubled_queue(root):
    assert _troubled(root) == [] and _errors(root) == []


def test_a_unit_pointing_at_another_queues_record(root):
    """Unit 2 of t/0 points at t/1's first record: that unit is wrong; t/0's record for queue
    offset 2 still has a unit position, so nothing is missing."""
    other = _units(root, 1)[0]
    _put_unit(root, 2, other)
    assert _troubled(root) == [("t", 0)]
    assert _errors(root) == [("consumequeue-bad-unit", CQ0, 40,
                              f"unit 2 points at the record at {other[0]} (t/1 queue offset 0)")]


def test_a_unit_repeating_the_one_before(root):
    units = _units(root, 0)
    _put_unit(root, 3, units[2])
    assert _troubled(root) == [("t", 0)]
    assert _errors(root) == [("consumequeue-bad-unit", CQ0, 60,
                              f"unit 3 points at the record at {units[2][0]} (t/0 queue offset 2)")]


def test_two_records_claiming_one_queue_offset(root):
    """t/0's record with queue offset 3 rewritten to claim 2 (QUEUEOFFSET, at byte 20 of a
    record, is not under the body CRC): the later record stands for queue offset 2, so unit 2
    points at a record that no longer stands for it, and unit 3 at one of queue offset 2."""
    units = _units(root, 0)
    log = root / "commitlog/00000000000000000000"
    raw = bytearray(log.read_bytes())
    raw[units[3][0] + 20:units[3][0] + 28] = struct.pack(">q", 2)
    log.write_bytes(bytes(raw))
    assert _troubled(root) == [("t", 0)]
    assert _errors(root) == [
        ("consumequeue-bad-unit", CQ0, 20 * u,
         f"unit {u} points at the record at {units[u][0]} (t/0 queue offset 2)") for u in (2, 3)]


def test_a_unit_past_the_end_of_the_commitlog(root):
    end = sum(size for units in (_units(root, 0), _units(root, 1)) for _, size, _ in units)
    _put_unit(root, 6, (end + 1000, 100, 0))
    assert _troubled(root) == [("t", 0)]
    what = f"unit 6 points at commitlog offset {end + 1000}, where no valid record starts"
    assert _errors(root) == [("consumequeue-bad-unit", CQ0, 120, what)]


def test_the_last_units_missing(root):
    """Units 4 and 5 of t/0 zeroed: the queue ends after unit 3, and its records of queue
    offsets 4 and 5 have no unit."""
    units = _units(root, 0)
    path = root / CQ0
    raw = bytearray(path.read_bytes())
    raw[80:120] = bytes(40)
    path.write_bytes(bytes(raw))
    assert _troubled(root) == [("t", 0)]
    assert _errors(root) == [
        ("consumequeue-missing-unit", "consumequeue/t/0", 20 * q,
         f"no unit for queue offset {q} (record at {units[q][0]})") for q in (4, 5)]


def test_records_of_a_non_ascii_topic_without_queue_files(tmp_path):
    """Records of topic "tópic" (UTF-8: 6 bytes, as "topic1" it replaces; a name no ConsumeQueue
    directory may have) keep t/0's and t/1's tallies apart from theirs: topic1's units point at
    records of another topic, and tópic's two queues are missing, each by its own records."""
    root = tmp_path / "s"
    with MessageStore(root, **SIZES) as ms:
        ms.put_batch([Message("t", b"t-body", 0, tags="A")])
        put = ms.put_batch([Message("topic1", f"body-{i}".encode(), i % 2, tags="A") for i in range(6)])
    assert retopic(root, "topic1", "tópic") == 6
    offsets = [p.commitlog_offset for p in put]  # queue i % 2, queue offset i // 2
    cq = "consumequeue/topic1/{}/00000000000000000000"
    assert _errors(root) == [
        *[("consumequeue-bad-unit", cq.format(q), 20 * u, f"unit {u} points at the record at "
           f"{offsets[2 * u + q]} (tópic/{q} queue offset {u})") for q in (0, 1) for u in range(3)],
        *[("consumequeue-missing-queue", f"consumequeue/tópic/{q}", None, f"queue missing: 3 "
           f"CommitLog records (first at queue offset 0, commitlog offset {offsets[q]}) have no unit")
          for q in (0, 1)]]


def test_queue_ids_past_255_are_told_apart(tmp_path):
    """Queues t/44 and t/300 (300 = 256 + 44) with their ConsumeQueue directories swapped: each
    directory's units point at the other queue's records, named with their own queue ids."""
    root = tmp_path / "s"
    with MessageStore(root, **SIZES) as ms:
        put = ms.put_batch([Message("t", f"body-{i}".encode(), (44, 300)[i % 2], tags="A") for i in range(4)])
    a, b = root / "consumequeue/t/44", root / "consumequeue/t/300"
    a.rename(tmp_path / "44")
    b.rename(a)
    (tmp_path / "44").rename(b)
    offsets = [p.commitlog_offset for p in put]  # queue (44, 300)[i % 2], queue offset i // 2
    assert _troubled(root) == [("t", 44), ("t", 300)]
    assert _errors(root) == [
        ("consumequeue-bad-unit", f"consumequeue/t/{q}/00000000000000000000", 20 * u,
         f"unit {u} points at the record at {offsets[2 * u + 1 - k]} (t/{other} queue offset {u})")
        for k, (q, other) in enumerate(((44, 300), (300, 44))) for u in range(2)]


def test_a_queue_starting_past_its_first_file_after_retention(tmp_path):
    """Retention deleted the first CommitLog files and the ConsumeQueue files under them: t/0's
    units start in a file named past 0, some below the queue's min offset. A wrong size in its
    first unit at the min offset is named at that unit; nothing else is a problem."""
    small = dict(mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=200)  # 10 units a file
    root = tmp_path / "s"
    with MessageStore(root, **small) as ms:
        ms.put_batch([Message("t", b"p" * 120, 0, tags="A") for _ in range(150)])
    old = sorted((root / "commitlog").iterdir())[:3]
    for f in old:
        os.utime(f, (1, 1))  # expired long ago
    with MessageStore(root, **small) as ms:
        ms.delete_expired_files(force=True)
        low = ms.min_offset("t", 0)
    files = sorted((root / "consumequeue/t/0").iterdir())
    first = int(files[0].name) // 20
    assert first > 0 and first < low < first + 10, "the test needs units below the min in the first file"
    raw = bytearray(files[0].read_bytes())
    at = (low - first) * 20
    off, size, tags = UNIT.unpack_from(raw, at)
    raw[at:at + 20] = UNIT.pack(off, size + 1, tags)
    files[0].write_bytes(bytes(raw))
    assert [(p.kind, p.file, p.offset, p.what) for p in verify(root, **small).problems
            if p.severity == "error"] == [
        ("consumequeue-unit-mismatch", f"consumequeue/t/0/{files[0].name}", at,
         f"unit {low}: size/tagsCode {size + 1}/{tags}, record says {size}/{tags}")]
