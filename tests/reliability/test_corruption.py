"""Torn and corrupt CommitLog files: recovery never crashes, keeps exactly the valid prefix, and
no read ever serves a record whose body CRC is wrong.

Each case copies one cleanly closed store, damages it, and reopens it (normally, or abnormally
with ``abort`` present). The expected end of valid data is computed here from the damaged bytes
with docs/FORMAT.md §2's rules (``expected_end``), not by the store's decoder.
"""
from __future__ import annotations

import random
import shutil
import struct
import zlib
from collections import Counter
from pathlib import Path

import pytest
from durability_check import SETTINGS, TAGS_CODE, commitlog_records, cq_units, message_for

from rocketlake.store import GetStatus, Message, MessageStore, StoreFormatError

SMALL = {**SETTINGS, "mappedFileSizeCommitLog": 16384}  # many files from few records
CL = SMALL["mappedFileSizeCommitLog"]
MAGIC_V1, BLANK = 0xDAA320A7, 0xCBD43194
TOPIC_CHARS = set(b"%|abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
CASES = 240
TRIED: Counter = Counter()


def record_end(data: bytes, pos: int, file_start: int) -> int | None:
    """docs/FORMAT.md §2: end of the valid record at ``pos``, ``len(data)`` for BLANK, else None."""
    if pos + 8 > len(data):
        return None
    total, magic = struct.unpack_from(">iI", data, pos)
    if magic == BLANK:
        return len(data)
    if magic != MAGIC_V1 or total < 91 or pos + total > len(data):
        return None
    crc, qid = struct.unpack_from(">ii", data, pos + 8)
    phys, sysflag = struct.unpack_from(">qi", data, pos + 28)
    p = pos + 48 + (20 if sysflag & 0x10 else 8) + 8 + (20 if sysflag & 0x20 else 8) + 12
    body_len = struct.unpack_from(">i", data, p)[0]
    if body_len < 0 or p + 4 + body_len + 3 > pos + total:
        return None
    body = data[p + 4:p + 4 + body_len]
    p += 4 + body_len
    topic_len = struct.unpack_from(">b", data, p)[0]
    if topic_len <= 0 or p + 1 + topic_len + 2 > pos + total:
        return None
    topic = data[p + 1:p + 1 + topic_len]
    p += 1 + topic_len
    props_len = struct.unpack_from(">h", data, p)[0]
    ok = (props_len >= 0 and p + 2 + props_len == pos + total and phys == file_start + pos
          and qid >= 0 and crc == (zlib.crc32(body) & 0x7FFFFFFF if body_len else 0)
          and set(topic) <= TOPIC_CHARS)
    try:
        data[p + 2:p + 2 + props_len].decode()
    except UnicodeDecodeError:
        ok = False
    return pos + total if ok else None


def expected_end(root: Path) -> int:
    """Where valid data ends, walking every CommitLog file from the first."""
    end = 0
    for path in sorted((root / "commitlog").iterdir()):
        start, data = int(path.name), path.read_bytes()
        pos = 0
        while (nxt := record_end(data, pos, start)) is not None and pos < len(data):
            pos = nxt
        end = start + pos
        if pos < len(data):
            break
    return end


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> tuple[Path, list]:
    """A cleanly closed store of 600 messages over several CommitLog files."""
    root = tmp_path_factory.mktemp("corruption") / "template"
    with MessageStore(root, **SMALL) as ms:
        for b in range(12):
            msgs = []
            for i in range(50):
                key = f"c-{b}-{i}"
                topic, qid, tags, body = message_for(key)
                msgs.append(Message(topic, body, queue_id=qid, tags=tags, keys=key))
            ms.put_batch(msgs)
    records, end = commitlog_records(root, CL)
    assert len(records) == 600 and end == expected_end(root)
    assert len(list((root / "commitlog").iterdir())) >= 5
    return root, records


def damage(root: Path, rng: random.Random, kind: str, clean: list) -> None:
    """Apply one kind of damage to one CommitLog file."""
    files = sorted((root / "commitlog").iterdir())
    target = files[-2] if kind == "flip-previous-file" else files[0] if kind == "flip-old-body" \
        else files[-1]
    data = bytearray(target.read_bytes())
    written = len(bytes(data).rstrip(b"\0"))
    if kind == "torn-tail":  # the bytes from p on never reached the disk
        p = rng.randrange(written + 1)
        data[p:] = bytes(CL - p)
    elif kind == "zero-range":
        a, n = rng.randrange(written), rng.randint(1, 400)
        data[a:a + n] = bytes(len(data[a:a + n]))
    elif kind in ("flip", "flip-previous-file"):
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(written)] ^= 1 << rng.randrange(8)
    elif kind == "garbage-after-end":
        n = rng.randint(1, 300)
        data[written:written + n] = rng.randbytes(min(n, CL - written))
    elif kind == "flip-old-body":  # outside normal recovery's scan window: reads must catch it
        r = rng.choice([r for r in clean if r.commitlog_offset < CL])
        body_at = r.commitlog_offset + 88  # IPv4: BODY follows BODYLEN at 84 (docs/FORMAT.md §2.1)
        data[rng.randrange(body_at, body_at + len(r.body))] ^= 1 << rng.randrange(8)
    target.write_bytes(bytes(data))
    assert len(data) == CL


KINDS = ["torn-tail", "zero-range", "flip", "flip-previous-file", "garbage-after-end", "flip-old-body"]


def check_case(template: tuple[Path, list], work: Path, seed: int) -> None:
    src, clean = template
    rng = random.Random(seed)
    kind = KINDS[seed % len(KINDS)]
    abnormal = kind in ("torn-tail", "zero-range", "flip") and rng.random() < 0.5
    root = work / "case"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(src, root)
    damage(root, rng, kind, clean)
    if abnormal:
        (root / "abort").touch()
    # Normal recovery trusts files before the third-from-last one (docs/FORMAT.md §9.1).
    names = sorted(p.name for p in (root / "commitlog").iterdir())
    end = expected_end(root) if kind != "flip-old-body" else clean[-1].commitlog_offset + clean[-1].size
    damaged = {p.name: p.read_bytes() for p in (root / "commitlog").iterdir()}
    TRIED[kind + (" (abort)" if abnormal else "")] += 1

    with MessageStore(root, **SMALL) as ms:
        assert ms.recovery.commitlog_end == end, (kind, seed, ms.recovery)
        kept = [r for r in clean if r.commitlog_offset + r.size <= end]
        for (topic, qid) in {(r.topic, r.queue_id) for r in clean}:
            want = [r for r in kept if (r.topic, r.queue_id) == (topic, qid)]
            assert ms.max_offset(topic, qid) == len(want)
            off = 0
            while off < len(want):
                got = ms.get(topic, qid, off, 32)
                assert got.status in (GetStatus.FOUND, GetStatus.MESSAGE_WAS_REMOVING), got.status
                for m in got.messages:  # never a record with a wrong body CRC
                    rec = m.record
                    assert rec.body_crc == zlib.crc32(rec.body) & 0x7FFFFFFF
                    assert rec.commitlog_offset + rec.size <= end
                off = got.next_begin_offset
        for r in rng.sample(kept, min(5, len(kept))):
            key = r.properties["KEYS"]
            if damaged[f"{r.commitlog_offset - r.commitlog_offset % CL:020d}"][
                    r.commitlog_offset % CL:][:r.size] == _raw(src, r):
                assert r.commitlog_offset in [x.commitlog_offset for x in ms.query(r.topic, key)]
    # The valid prefix is untouched, the rest of its file zeroed, later files gone.
    for name in names:
        start, path = int(name), root / "commitlog" / name
        if start >= end and not (start == end == 0):
            assert not path.exists() or not any(path.read_bytes())
            continue
        data = path.read_bytes()
        cut = min(CL, end - start)
        assert data[:cut] == damaged[name][:cut]
        if cut < CL and end % CL:
            assert not any(data[cut:]), "bytes left after the end of valid data"
    for (topic, qid) in {(r.topic, r.queue_id) for r in clean}:
        units = cq_units(root, topic, qid, SETTINGS["mappedFileSizeConsumeQueue"])
        assert units == {r.queue_offset: (r.commitlog_offset, r.size, TAGS_CODE[r.tags])
                         for r in kept if (r.topic, r.queue_id) == (topic, qid)}
    with MessageStore(root, **SMALL) as ms:  # a second open finds nothing more to do
        assert ms.recovery.commitlog_end == end and ms.recovery.dispatched == 0


def _raw(root: Path, r) -> bytes:
    path = root / "commitlog" / f"{r.commitlog_offset - r.commitlog_offset % CL:020d}"
    return path.read_bytes()[r.commitlog_offset % CL:][:r.size]


def test_corruption_cases(template, tmp_path: Path) -> None:
    for seed in range(CASES):
        check_case(template, tmp_path, seed)
    print(f"\ncorruption cases tried: {sum(TRIED.values())} " +
          ", ".join(f"{k}: {v}" for k, v in sorted(TRIED.items())))
    assert sum(TRIED.values()) == CASES and len(TRIED) >= len(KINDS)


def test_physically_short_file_is_refused_and_left_alone(template, tmp_path: Path) -> None:
    """A CommitLog file shorter than the configured size: a clear error, nothing changed."""
    root = tmp_path / "short"
    shutil.copytree(template[0], root)
    last = sorted((root / "commitlog").iterdir())[-1]
    with open(last, "r+b") as f:
        f.truncate(CL - 1000)
    (root / "abort").touch()
    before = {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    with pytest.raises(StoreFormatError, match=f"{last.name}: file is {CL - 1000} bytes, expected {CL}"):
        MessageStore(root, **SMALL)
    after = {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert after == before
    with open(last, "r+b") as f:  # restored, the store opens (the lock was released)
        f.truncate(CL)
    with MessageStore(root, **SMALL) as ms:
        assert ms.recovery.commitlog_end == template[1][-1].commitlog_offset + template[1][-1].size


def test_verify_finds_every_damage_recovery_would_cut(template, tmp_path: Path) -> None:
    """`rocketlake verify` (read-only) reports every damaged store whose valid data the damage
    shortened, or that has bytes after the end of valid data; it changes no file."""
    from rocketlake.store.verify import verify

    src, clean = template
    full_end = clean[-1].commitlog_offset + clean[-1].size
    checked = 0
    for seed in range(60):
        rng = random.Random(1000 + seed)
        kind = KINDS[seed % len(KINDS)]
        root = tmp_path / f"v{seed}"
        shutil.copytree(src, root)
        damage(root, rng, kind, clean)
        before = {p.name: p.read_bytes() for p in (root / "commitlog").iterdir()}
        last = sorted(before)[-1]
        written_end = int(last) + len(before[last].rstrip(b"\0"))
        cut = expected_end(root) < full_end or written_end > full_end
        report = verify(root, **SMALL)
        assert {p.name: p.read_bytes() for p in (root / "commitlog").iterdir()} == before
        if cut or kind == "flip-old-body":
            checked += 1
            # a torn tail reads as a shorter log; its ConsumeQueue units then point past the end
            assert not report.ok, (kind, seed)
        shutil.rmtree(root)
    assert checked >= 40
