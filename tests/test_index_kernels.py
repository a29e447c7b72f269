"""The IndexFile kernels (``store.kernels.index``): placement byte for byte against the independent
one-key-at-a-time port of ``IndexFile.putKey`` (tests/reference.py) on the golden store and on
generated keys; chain reachability against hand-built files."""
from __future__ import annotations

import struct
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import reference
from goldens import GOLDEN_498
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlake.store import codec
from rocketlake.store.commitlog import CommitLog
from rocketlake.store.config import load_config
from rocketlake.store.index import IndexFile, IndexService
from rocketlake.store.kernels import index as kernels

INT_MIN, INT_MAX = -2 ** 31, 2 ** 31 - 1


def _put(root: Path, slots: int, entries: int, hashes: np.ndarray, phy: np.ndarray, ts: np.ndarray,
         cuts: list[int]) -> list[tuple[str, bytes]]:
    """Index files (name, bytes) after putting the keys through ``IndexService`` in batches that
    end at ``cuts``, moved to the next record boundary (the service does not index a record
    again once it indexed some of its keys)."""
    idx = IndexService(root, slots, entries)
    cuts = sorted({c for c in cuts if 0 < c < phy.size and phy[c] != phy[c - 1]})
    for lo, hi in zip([0, *cuts], [*cuts, hashes.size]):
        idx.add_hashes(hashes[lo:hi], phy[lo:hi], ts[lo:hi])
        idx.build()
    idx.flush()
    idx.close()
    return [(p.name, p.read_bytes()) for p in sorted((root / "index").iterdir())]


def _golden_records() -> list[codec.Record]:
    out = []
    for f in sorted((GOLDEN_498 / "store" / "commitlog").iterdir()):
        raw, pos = f.read_bytes(), 0
        while True:
            try:
                r = codec.decode_record(raw, pos, int(f.name))
            except codec.CorruptRecordError:
                break
            if isinstance(r, int):
                break
            out.append(r)
            pos += r.size
    return out


@pytest.mark.parametrize("cuts", [[], [1], [7, 8, 9, 500], list(range(3, 1500, 199))])
def test_golden_store_keys_placed_as_rocketmq(tmp_path, golden_settings, cuts):
    """Keys of the records RocketMQ 4.9.8 stored, hashed by the walk's dispatch, give the index
    files RocketMQ wrote and the reference computes, however the batches are cut."""
    slots, entries = golden_settings["maxHashSlotNum"], golden_settings["maxIndexNum"]
    log = CommitLog(GOLDEN_498 / "store", load_config(golden_settings))
    log.files.load()
    try:
        parts = []
        for batch in log.walk(check_crc=True):
            cols = batch.dispatch(load_config({}).delay_levels_ms)
            parts.append((cols.key_hashes, np.repeat(batch.column(0), cols.key_counts),
                          np.repeat(batch.rows["store_timestamp"], cols.key_counts)))
    finally:
        log.close()
    hashes, phy, ts = (np.concatenate(c) for c in zip(*parts))
    got = _put(tmp_path, slots, entries, hashes, phy, ts, cuts)
    want = reference.index_files(_golden_records(), slots, entries)
    assert [n for n, _ in got] == [n for n, _ in want]
    assert [b for _, b in got] == [b for _, b in want]
    assert [b for _, b in got] == [p.read_bytes() for p in sorted((GOLDEN_498 / "store" / "index").iterdir())]


def _key_with_hash(prefix: str, target: int) -> str:
    """A 7-character key ``k`` (characters '0'..'N') whose Java hashCode of ``prefix + k`` is
    ``target``: the base-31 digits of what the prefix leaves to make up."""
    h = 0
    for ch in prefix:
        h = (h * 31 + ord(ch)) % 2 ** 32
    rest = (target - h * 31 ** 7 - 48 * sum(31 ** j for j in range(7))) % 2 ** 32
    digits = []
    for _ in range(7):
        rest, d = divmod(rest, 31)
        digits.append(chr(48 + d))
    assert rest == 0
    return "".join(reversed(digits))


def test_key_with_hash_hits_its_target():
    # "polygenelubricants" is the classic string whose hashCode is Integer.MIN_VALUE
    assert reference.jhash("polygenelubricants") == INT_MIN
    for target in (0, INT_MIN, INT_MAX, -1, 12345):
        assert reference.jhash("t#" + _key_with_hash("t#", target)) == target


_hashes = st.one_of(st.sampled_from([0, INT_MIN, INT_MAX, -1, 1, -INT_MAX]),
                    st.integers(INT_MIN, INT_MAX))
_steps = st.sampled_from([0, 1, 999, 1000, 1001, 60_000, 2_200_000_000_000])  # the last caps timeDiff


@settings(max_examples=150, deadline=None)
@given(slots=st.integers(1, 6), entries=st.integers(2, 9),
       records=st.lists(st.tuples(st.lists(_hashes, min_size=1, max_size=3), st.integers(1, 400), _steps),
                        min_size=1, max_size=40),
       cut_at=st.lists(st.integers(0, 120), max_size=6), shares=st.integers(1, 4))
def test_generated_keys_placed_as_reference(slots, entries, records, cut_at, shares):
    """Collisions in few slots, hash 0 and Integer.MIN_VALUE (keyHash 0), files rolling every few
    keys, timeDiff capped: the same bytes as the reference, wherever the batches are cut, and
    when each batch is placed over disjoint slot ranges by separate mappings of the file."""
    recs, hashes, phy, ts = [], [], [], []
    offset, when = 0, 1_700_000_000_000
    for targets, size, step in records:
        keys = [_key_with_hash("t#", t) for t in targets]
        recs.append(SimpleNamespace(topic="t", sys_flag=0, properties={"KEYS": " ".join(keys)},
                                    commitlog_offset=offset, store_timestamp=when))
        for t in targets:
            hashes.append(0 if t == INT_MIN else abs(t))  # IndexFile.indexKeyHashMethod
            phy.append(offset)
            ts.append(when)
        offset, when = offset + size, when + step
    hashes_ = np.array(hashes, dtype=np.int32)
    phy_, ts_ = np.array(phy, dtype=np.int64), np.array(ts, dtype=np.int64)
    want = reference.index_files(recs, slots, entries)
    with tempfile.TemporaryDirectory() as tmp:
        assert _put(Path(tmp), slots, entries, hashes_, phy_, ts_, cut_at) == want
        # one file, its keys put in batches cut anywhere, even inside a record's keys
        f = IndexFile(Path(tmp) / "one", slots, entries, create_from=(0, 0))
        fit = min(len(hashes), entries - 1)
        cuts = sorted({c for c in cut_at if 0 < c < fit})
        for lo, hi in zip([0, *cuts], [*cuts, fit]):
            f.put_batch(hashes_[lo:hi], phy_[lo:hi], ts_[lo:hi])
        f.close()
        assert (Path(tmp) / "one").read_bytes() == want[0][1]
        # the same batches, each placed by one mapping per slot range (last range first), as the
        # Spark rebuild's tasks do, then counted once from the first and last key
        shared = Path(tmp) / "shared"
        f = IndexFile(shared, slots, entries, create_from=(0, 0))
        f.write_header()
        f.close()
        bounds = [slots * i // shares for i in range(shares + 1)]
        for lo, hi in zip([0, *cuts], [*cuts, fit]):
            filled = 0
            for s_lo, s_hi in reversed(list(zip(bounds[:-1], bounds[1:]))):
                f = IndexFile(shared, slots, entries)
                filled += f.place(hashes_[lo:hi], phy_[lo:hi], ts_[lo:hi], (s_lo, s_hi))
                f.close()
            f = IndexFile(shared, slots, entries)
            f.count_placed(hi - lo, (int(phy_[lo]), int(ts_[lo])), (int(phy_[hi - 1]), int(ts_[hi - 1])),
                           filled)
            f.close()
        assert shared.read_bytes() == want[0][1]


# --- reachability -----------------------------------------------------------------------------------
SLOTS, ENTRIES, BEGIN = 4, 12, 1_700_000_000_000


def _hand_built(path: Path, entries: dict[int, tuple[int, int, int, int]], slots: dict[int, int],
                count: int) -> IndexFile:
    """An index file written with struct: ``entries[pos] = (keyHash, phyOffset, timeDiff,
    prevIndex)``, ``slots[slot] = position``, header beginTimestamp ``BEGIN``."""
    raw = bytearray(codec.index_file_size(SLOTS, ENTRIES))
    struct.pack_into(">qqqqii", raw, 0, BEGIN, BEGIN + 9000, 100, 900, len(slots), count)
    for s, v in slots.items():
        struct.pack_into(">i", raw, 40 + 4 * s, v)
    for pos, e in entries.items():
        struct.pack_into(">iqii", raw, 40 + 4 * SLOTS + 20 * pos, *e)
    path.write_bytes(bytes(raw))
    return IndexFile(path, SLOTS, ENTRIES)


def _reached(f: IndexFile) -> set[int]:
    found = np.empty(min(f.entry_num, f.index_count + 1), dtype=np.bool_)
    kernels.reachable(f.buf, f.slot_num, f.index_count, f.begin_ts, found)
    return set(np.flatnonzero(found).tolist())


def test_reachability_of_a_file_with_broken_chains(tmp_path):
    # Intact, the chains are slot 1: 4 -> 2 -> 1, slot 2: 5 -> 3, slot 3: 7 -> 6, slot 0: 9 -> 8.
    entries = {1: (1, 100, 0, 0), 2: (5, 200, 1, 1), 3: (2, 300, 2, 0), 4: (9, 400, 3, 2),
               5: (6, 500, 4, 3), 6: (3, 600, 5, 0), 7: (7, 700, 6, 6), 8: (4, 800, 7, 0),
               9: (0, 900, 8, 8)}
    heads = {1: 4, 2: 5, 3: 7, 0: 9}
    intact = _hand_built(tmp_path / "intact", entries, heads, 10)
    assert _reached(intact) == set(range(1, 10))
    intact.close()
    entries[4] = (10, 400, 3, 2)     # a hash of slot 2 in slot 1's chain: skipped, the walk goes on
    entries[2] = (5, 200, 1, 100)    # prevIndex past indexCount: the chain ends, entry 1 is lost
    entries[5] = (6, 500, -1, 3)     # a negative timeDiff ends the walk unread: 5 and 3 are lost
    entries[7] = (7, 700, 6, 7)      # prevIndex is the entry itself: 6 is lost
    entries[8] = (4, 800, 7, 9)      # 9 -> 8 -> 9: a loop, both are read once
    broken = _hand_built(tmp_path / "broken", entries, heads, 10)
    assert _reached(broken) == {2, 7, 8, 9}
    broken.close()


def test_reachability_bounds(tmp_path):
    entries = {1: (1, 100, 0, 0), 2: (1, 200, 0, 1)}
    assert _reached(_hand_built(tmp_path / "a", entries, {1: 2}, 3)) == {1, 2}
    assert _reached(_hand_built(tmp_path / "b", entries, {1: 4}, 3)) == set()  # slot past indexCount
    assert _reached(_hand_built(tmp_path / "c", entries, {1: 2}, 1)) == set()  # indexCount says empty
    # a damaged indexCount past the file: walks end at the file's last entry
    past = _hand_built(tmp_path / "d", {**entries, 11: (1, 1100, 0, 2)}, {1: 11, 2: 30}, 40)
    assert past.index_count == 40 and _reached(past) == {1, 2, 11}


def test_query_ends_at_a_negative_time_diff_as_rocketmq(tmp_path):
    """``IndexFile.selectPhyOffset`` stops at an entry whose timeDiff is negative, before
    reading its key: a query finds neither it nor the entries behind it."""
    f = _hand_built(tmp_path / "f", {1: (1, 100, 0, 0), 2: (1, 200, -5, 1), 3: (1, 300, 2, 2)}, {1: 3}, 4)
    out: list[int] = []
    f.select(1, 10, 0, 2 ** 63 - 1, out)
    assert out == [300]
    assert _reached(f) == {3}
    f.close()


# --- keys found -------------------------------------------------------------------------------------
def test_found_keys_in_and_out_of_commitlog_order():
    """``found_keys`` matches each reached entry to the record at its phyOffset, whatever the
    entries' order: rising (a file's usual order), jumping far ahead, going back, pointing at no
    record, or not reached; expected values from a plain dictionary of the records' keys."""
    records = np.arange(0, 40 * 100, 100, dtype=np.int64)            # 40 records, 100 bytes apart
    counts = np.array([k % 3 for k in range(40)], dtype=np.int64)     # 0, 1 or 2 keys each
    starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    hashes = np.arange(1000, 1000 + int(counts.sum()), dtype=np.int32)
    keys = {int(records[r]): hashes[starts[r]:starts[r + 1]].tolist() for r in range(40)}
    # (phyOffset, keyHash, reached) per entry, from position 1
    entries = [(100, 1000, True), (200, 1001, True), (200, 1002, True), (400, 1003, True),
               (3700, int(keys[3700][0]), True),                     # far ahead: past 8 records
               (500, int(keys[500][0]), True),                       # back again
               (550, 1004, True),                                    # between two records
               (800, int(keys[800][1]), True), (800, 7, True),       # a hash the record lacks
               (1100, int(keys[1100][0]), False),                    # not reached by a query
               (3800, int(keys[3800][1]), True), (9999, 1, True)]    # near the end; past all
    slots = 4
    buf = bytearray(codec.index_file_size(slots, len(entries) + 1))
    for pos, (phy, h, _) in enumerate(entries, 1):
        struct.pack_into(">iqii", buf, 40 + 4 * slots + 20 * pos, h, phy, 0, 0)
    reached = np.array([False] + [r for _, _, r in entries])
    want = np.zeros(hashes.size, dtype=np.bool_)
    for phy, h, r in entries:
        if r and h in keys.get(phy, []):
            want[starts[records.tolist().index(phy)] + keys[phy].index(h)] = True
    assert want.sum() == 8
    for first, end in ((0, len(entries) + 1), (5, len(entries) + 1), (1, 6)):
        out = np.zeros(hashes.size, dtype=np.bool_)
        kernels.found_keys(np.frombuffer(bytes(buf), dtype=np.uint8), slots, reached, first, end,
                           records, starts, hashes, out)
        part = np.zeros(hashes.size, dtype=np.bool_)
        for pos, (phy, h, r) in enumerate(entries, 1):
            if first <= pos < end and r and h in keys.get(phy, []):
                part[starts[records.tolist().index(phy)] + keys[phy].index(h)] = True
        assert (out == part).all(), (first, end)
    assert (part != want).any()


def test_keys_to_match_takes_the_keyed_records_in_the_indexed_range():
    """Records before ``first`` or without keys are left out, those after ``end`` counted late,
    the rest go out with their keys' hashes back to back (hand-computed)."""
    offsets = np.array([0, 100, 200, 300, 400, 500, 600], dtype=np.int64)
    counts = np.array([2, 1, 0, 3, 1, 2, 1], dtype=np.int64)
    hashes = np.arange(10, 20, dtype=np.int32)      # record 0: 10 11, 1: 12, 3: 13 14 15, 4: 16, ...
    offs, starts = np.empty(7, dtype=np.int64), np.empty(8, dtype=np.int64)
    out = np.empty(10, dtype=np.int32)
    n, late, first_late = kernels.keys_to_match(offsets, counts, hashes, 100, 400, offs, starts, out)
    assert (n, late, first_late) == (3, 2, 500)
    assert offs[:n].tolist() == [100, 300, 400]
    assert starts[:n + 1].tolist() == [0, 1, 4, 5]
    assert out[:starts[n]].tolist() == [12, 13, 14, 15, 16]
    assert kernels.keys_to_match(offsets, counts, hashes, 700, 900, offs, starts, out) == (0, 0, -1)
