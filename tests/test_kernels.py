"""The compiled kernels (store/kernels/) against independent references: records packed here
with `struct` from docs/FORMAT.md §2 (not by the store's encoder), crcmod's CRC-32, the
one-character-at-a-time Java hash of tests/reference.py, a plain properties parser, and the
golden store RocketMQ 4.9.8 wrote."""
from __future__ import annotations

import ctypes.util
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import DELAYS_MS, V1, V2, jhash, pack, with_prop_crc
from reference import crc32 as _crc32

from rocketlake.store import record_walk
from rocketlake.store.kernels import crc
from rocketlake.store.kernels import dispatch as kd
from rocketlake.store.kernels import encode as ke
from rocketlake.store.kernels import hashing as kh
from rocketlake.store.kernels import queue_sums as qs
from rocketlake.store.kernels import records as kr
from rocketlake.store.kernels.words import find_byte
from rocketlake.store.record_walk import Walk

GOLDEN = Path(__file__).parent / "golden" / "rocketmq-4.9.8" / "store" / "commitlog"
BLANK = 0xCBD43194


def blank(remaining: int) -> bytes:
    return struct.pack(">iI", remaining, BLANK) + bytes(remaining - 8)


def walk_all(buf: np.ndarray, base: int = 0, pos: int = 0, check_crc: bool = True,
             check_names: bool = False) -> tuple[np.ndarray, int, int, np.ndarray]:
    out = np.zeros((4096, kr.NFIELDS), dtype=np.int64)
    detail = np.zeros(3, dtype=np.int64)
    n, end, status = kr.walk(buf, base, pos, buf.size, check_crc, check_names, out, detail)
    return out[:n].view(kr.RECORD_DTYPE).ravel(), end, status, detail


def as_buf(b: bytes, size: int | None = None) -> np.ndarray:
    return np.frombuffer(b + bytes((size or len(b) + 64) - len(b)), dtype=np.uint8)


# --- CRC, hash ------------------------------------------------------------------------------------
@settings(deadline=None)
@given(st.binary(max_size=300), st.integers(0, 7))
def test_crc32_is_zlibs_crc(data, skip):
    buf = np.frombuffer(bytes(skip) + data, dtype=np.uint8)
    assert kr.crc32(buf, skip, len(data)) == _crc32(data)


@pytest.mark.skipif(ctypes.util.find_library("deflate") is None or os.environ.get("ROCKETLAKE_CRC32"),
                    reason="libdeflate not installed, or the table CRC asked for")
def test_crc32_is_libdeflates_where_installed():
    assert crc.BOUND in crc.LIBRARIES


_TABLE_CRC_CHECK = """
import numpy as np
from reference import crc32, pack
from rocketlake.store.kernels import crc, records as kr
assert crc.BOUND == "table", crc.BOUND
data = bytes(range(256)) * 3 + "é😀".encode() * 9
for skip in range(8):
    buf = np.frombuffer(bytes(skip) + data, dtype=np.uint8)
    for n in [*range(0, 40), 299, 300, len(data)]:
        assert kr.crc32(buf, skip, n) == crc32(data[:n]), (skip, n)
rec = pack(0, topic="t", body=b"a body of some bytes", queue_id=1)
out, detail = np.zeros((2, kr.NFIELDS), dtype=np.int64), np.zeros(3, dtype=np.int64)
buf = np.frombuffer(rec + bytes(64), dtype=np.uint8)
assert kr.walk(buf, 0, 0, buf.size, True, False, out, detail) == (1, len(rec), kr.ZEROS)
bad = bytearray(rec)
bad[-10] ^= 1  # in the body: its stored CRC no longer matches
buf = np.frombuffer(bytes(bad) + bytes(64), dtype=np.uint8)
assert kr.walk(buf, 0, 0, buf.size, True, False, out, detail)[2] == kr.BAD_CRC
"""


def test_table_crc32_when_asked_for():
    """``ROCKETLAKE_CRC32=table`` (as where libdeflate is absent) binds the slicing-by-8 table CRC,
    compiled as a C callback: crcmod's CRC-32 at every length and alignment, and the walk checks
    a record's body CRC with it (a new process: the CRC is bound once, at import)."""
    env = {**os.environ, "ROCKETLAKE_CRC32": "table",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-c", _TABLE_CRC_CHECK], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]


@settings(deadline=None)
@given(st.text(max_size=40))
def test_java_hash_over_utf8_is_javas_over_utf16(s):
    buf = np.frombuffer(s.encode() or b"\0", dtype=np.uint8)
    h = kh.java_hash(buf, 0, len(s.encode()), 0)
    assert kh.signed32(h) == jhash(s)


def test_java_hash_vectors():
    for s, want in (("TagA", 2598919), ("TAG1", 2567159), ("\U0001F600", jhash("\U0001F600"))):
        b = np.frombuffer(s.encode(), dtype=np.uint8)
        assert kh.signed32(kh.java_hash(b, 0, b.size, 0)) == want
    # "polygenelubricants" hashes to Integer.MIN_VALUE: its index keyHash is 0 (docs/FORMAT.md §7)
    b = np.frombuffer(b"polygenelubricants", dtype=np.uint8)
    assert kh.signed32(kh.java_hash(b, 0, b.size, 0)) == -(1 << 31)


# --- the walk ---------------------------------------------------------------------------------------
HOSTS = [b"\x7f\0\0\1", bytes(15) + b"\1"]
record_args = st.fixed_dictionaries({
    "topic": st.from_regex(r"\A[%|a-zA-Z0-9_-]{1,20}\Z"),
    "body": st.binary(max_size=200),
    "props": st.text(alphabet=st.sampled_from("ab \x01\x02TAGSKEYé😀"), max_size=60),
    "queue_id": st.integers(0, 1000),
    "queue_offset": st.integers(0, 1 << 40),
    "sys_flag": st.sampled_from([0, 4, 8, 12, 1]),
    "magic": st.sampled_from([V1, V2]),
    "born": st.sampled_from(HOSTS),
    "store": st.sampled_from(HOSTS),
})


@settings(max_examples=60, deadline=None)
@given(st.lists(record_args, min_size=1, max_size=12), st.integers(0, 1 << 30))
def test_walk_decodes_every_field(recs, base):
    raw = b""
    for r in recs:
        raw += pack(base + len(raw), **r)
    rows, end, status, _ = walk_all(as_buf(raw), base)
    assert (len(rows), end, kr.STATUS[status]) == (len(recs), len(raw), "zeros")
    buf = as_buf(raw)
    at = 0
    for row, r in zip(rows, recs):
        rec = pack(base + at, **r)
        assert row["offset"] == base + at and row["size"] == len(rec)
        assert (row["queue_id"], row["queue_offset"]) == (r["queue_id"], r["queue_offset"])
        assert row["magic"] & 0xFFFFFFFF == r["magic"]
        assert buf[row["body_start"]:row["body_start"] + row["body_len"]].tobytes() == r["body"]
        assert buf[row["topic_start"]:row["topic_start"] + row["topic_len"]].tobytes() == r["topic"].encode()
        assert buf[row["props_start"]:row["props_start"] + row["props_len"]].tobytes() == r["props"].encode()
        a = row["born_addr_start"]
        assert buf[a:a + len(r["born"])].tobytes() == r["born"]
        a = row["store_addr_start"]
        assert buf[a:a + len(r["store"])].tobytes() == r["store"]
        assert (row["born_port"], row["store_port"]) == (50000, 10911)
        at += len(rec)


@settings(max_examples=40, deadline=None)
@given(st.lists(record_args, min_size=1, max_size=8), st.integers(0, 400))
def test_find_start_from_any_byte(recs, cut):
    """A range starting anywhere finds the first record starting at or after it."""
    raw, starts = b"", []
    for r in recs:
        starts.append(len(raw))
        raw += pack(len(raw), **r)
    buf = as_buf(raw)
    cut = min(cut, len(raw))
    want = next((s for s in starts if s >= cut), len(raw))
    assert kr.find_start(buf, 0, cut, len(raw)) == want


def test_blank_ends_a_file_and_zeros_end_the_data():
    rec = pack(0)
    file = rec + blank(256 - len(rec))
    rows, end, status, detail = walk_all(np.frombuffer(file, dtype=np.uint8))
    assert (len(rows), end, status, detail[0]) == (1, len(rec), kr.BLANK, 256 - len(rec))
    rows, end, status, _ = walk_all(as_buf(rec))
    assert (len(rows), end, status) == (1, len(rec), kr.ZEROS)


@pytest.mark.parametrize("damage, status", [
    (lambda b: b[:8] + b"\0\0\0\1" + b[12:], kr.BAD_CRC),             # BODYCRC
    (lambda b: b[:4] + b"\xde\xad\xbe\xef" + b[4 + 4:], kr.BAD_MAGIC),
    (lambda b: struct.pack(">i", 50) + b[4:], kr.BAD_SIZE),          # TOTALSIZE < 91
    (lambda b: b[:28] + struct.pack(">q", 12345) + b[36:], kr.BAD_PHYSICAL_OFFSET),
    (lambda b: b[:-1] + b"\xff", kr.BAD_UTF8),                       # last properties byte
])
def test_damage_stops_the_walk_after_the_valid_records(damage, status):
    first = pack(0, props="TAGS\x01a")
    second = pack(len(first), props="TAGS\x01a")
    rows, end, got, _ = walk_all(as_buf(first + damage(second)))
    assert (len(rows), end, got) == (1, len(first), status)
    rows, _, got, _ = walk_all(as_buf(first + damage(second)), check_crc=False)
    assert len(rows) == (2 if status == kr.BAD_CRC else 1)


@pytest.mark.parametrize("magic", [V1, V2], ids=["v1", "v2"])
@pytest.mark.parametrize("props", ["", "TAGS\x01a\x02"], ids=["alone", "after-tags"])
def test_a_property_crc_is_checked_where_the_body_crc_is(magic, props):
    first = with_prop_crc(pack(0, props=props + "__CRC32#\x010000000000\x02", magic=magic))
    second = with_prop_crc(pack(len(first), props=props + "__CRC32#\x010000000000\x02", magic=magic))
    rows, end, status, _ = walk_all(as_buf(first + second))
    assert (len(rows), end, status) == (2, len(first + second), kr.ZEROS)
    # FLAG (bytes 16-20) is no part of the body: only the property CRC covers it
    flipped = second[:19] + bytes([second[19] ^ 1]) + second[20:]
    rows, end, status, detail = walk_all(as_buf(first + flipped))
    want = _crc32(second[:-20]) & 0x7FFFFFFF
    assert (len(rows), end, status, detail[0], detail[1]) == (
        1, len(first), kr.BAD_PROP_CRC, want, _crc32(flipped[:-20]) & 0x7FFFFFFF)
    assert kr.describe(status, len(first), detail, as_buf(first)) == (
        f"offset {len(first)}: property CRC {want} != computed {detail[1]}")
    assert len(walk_all(as_buf(first + flipped), check_crc=False)[0]) == 2


def test_a_crc_named_property_that_is_not_the_trailing_one_is_not_checked():
    # no \x02 before it: the end of another property's value; 4.9's form ends without \x02
    for props in ("X\x01a__CRC32#\x010000000001\x02", "TAGS\x01a\x02__CRC32#\x010000000001"):
        rows, _, status, _ = walk_all(as_buf(pack(0, props=props)))
        assert (len(rows), status) == (1, kr.ZEROS)


def test_torn_tail_is_not_a_record():
    rec = pack(0)
    rows, end, status, _ = walk_all(np.frombuffer(rec + rec[:50], dtype=np.uint8))
    assert (len(rows), end) == (1, len(rec)) and status in (kr.BAD_SIZE, kr.TRUNCATED)


def test_check_names_stops_at_a_topic_no_writer_stores():
    good = pack(0, topic="ok")
    bad = pack(len(good), topic="a/b")
    rows, end, status, _ = walk_all(as_buf(good + bad), check_names=True)
    assert (len(rows), end, status) == (1, len(good), kr.BAD_NAME)
    assert len(walk_all(as_buf(good + bad))[0]) == 2


# --- properties and dispatch ------------------------------------------------------------------------
def test_big_endian_fields_at_any_alignment():
    raw = bytes([0x7F, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x80, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFE])
    buf = np.frombuffer(raw, dtype=np.uint8)
    assert kr.be_i64(buf, 1) == 0x0102030405060708  # odd address
    assert kr.be_i32(buf, 1) == 0x01020304
    assert kr.be_i32(buf, 9) == -(1 << 31)  # sign-extended
    assert kr.be_i32(buf, 13) == -2
    assert kr.be_i64(buf, 9) == -(1 << 63) + 0xFFFFFFFE  # 0x80000000 FFFFFFFE
    assert kr.be_i64(buf, 0) == 0x7F01020304050607


@pytest.mark.parametrize("tail", [b"", "é".encode(), "😀".encode(), b"\xc3", b"\x80", b"\xed\xa0\x80",
                                  b"\xc0\xaf", b"\xf4\x90\x80\x80"])
def test_utf8_ok_is_pythons_decode_after_any_run_of_ascii(tail):
    for lead in range(0, 20):
        for trail in (b"", b"abc", b"abcdefghij"):
            data = b"k" * lead + tail + trail
            try:
                data.decode()
                want = True
            except UnicodeDecodeError:
                want = False
            buf = np.frombuffer(b"\xff" + data + b"\xff", dtype=np.uint8)  # bytes around: not read
            assert kr.utf8_ok(buf, 1, len(data)) == want, (lead, tail, trail)


def test_find_byte_vectors():
    buf = np.frombuffer(b"TAGS\x01t0\x02KEYS\x01order-0", dtype=np.uint8)
    assert find_byte(buf, 0, buf.size, 2) == 7  # in the first word
    assert find_byte(buf, 8, buf.size, 1) == 12  # in the second
    assert find_byte(buf, 8, buf.size, 2) == buf.size  # none: the end
    assert find_byte(buf, 0, 4, 1) == 4  # none before the end given, though one is after it
    assert find_byte(buf, 13, buf.size, ord("0")) == buf.size - 1  # in the tail after the words


@pytest.mark.parametrize("b", [0x00, 0x01, 0x02, 0x80, 0x81, 0xFF])
def test_find_byte_is_the_first_occurrence_at_every_place(b):
    # bytes one above or below the wanted one, and zeros, next to it: where a word scan's borrow
    # could mark the wrong byte
    noise = bytes([(b + 1) & 0xFF, (b - 1) & 0xFF, 0x00, 0x80, 0x7F, 0xFF])
    for n in range(0, 20):
        for at in list(range(n)) + [None]:
            data = bytearray((noise * 4)[:n].replace(bytes([b]), bytes([b ^ 0x40])))
            if at is not None:
                data[at] = b
                if at + 1 < n:
                    data[at + 1] = b  # a second one right after: the first still wins
            buf = np.frombuffer(bytes(data) + bytes([b]) * 8, dtype=np.uint8)
            for p in range(n + 1):
                want = bytes(data).find(bytes([b]), p)
                assert find_byte(buf, p, n, b) == (n if want < 0 else want), (b, n, at, p)


def reference_props(s: str) -> dict[str, str]:
    """docs/FORMAT.md §3: segments split on \\x02, name and value on the first \\x01, both
    non-empty, the last duplicate wins."""
    out = {}
    for seg in s.split("\x02"):
        if "\x01" in seg:
            name, value = seg.split("\x01", 1)
            if name and value:
                out[name] = value
    return out


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(kd.NAMES + ("X", "")), st.text(
    alphabet=st.sampled_from("a b\x01é😀"), max_size=8)), max_size=6))
def test_property_spans_follow_the_properties_rule(pairs):
    props = "\x02".join(f"{k}\x01{v}" for k, v in pairs)
    rec = pack(0, props=props)
    rows, _, _, _ = walk_all(as_buf(rec))
    raw = rows.view(np.int64).reshape(-1, kr.NFIELDS)
    spans = np.zeros((1, len(kd.NAMES), 2), dtype=np.int64)
    buf = as_buf(rec)
    kd.property_spans(buf, raw, spans)
    want = reference_props(props)
    for k, name in enumerate(kd.NAMES):
        s, n = spans[0, k]
        assert (buf[s:s + n].tobytes().decode() if s >= 0 else None) == want.get(name)


def reference_dispatch(topic: str, props: dict[str, str], sys_flag: int, store_ts: int):
    tx = sys_flag & 0xC
    keys = [] if tx == 0xC else ([props["UNIQ_KEY"]] if "UNIQ_KEY" in props else []) + [
        k for k in props.get("KEYS", "").split(" ") if k]
    hashes = [0 if jhash(f"{topic}#{k}") == -(1 << 31) else abs(jhash(f"{topic}#{k}")) for k in keys]
    code = jhash(props["TAGS"]) if "TAGS" in props else 0
    if topic == "SCHEDULE_TOPIC_XXXX" and props.get("DELAY", "").lstrip("+-").isdigit():
        level = min(int(props["DELAY"]), len(DELAYS_MS))
        if level > 0:
            code = store_ts + DELAYS_MS[level - 1]
    return code, tx in (0, 8), hashes


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(
    st.sampled_from(["orders", "SCHEDULE_TOPIC_XXXX", "t1"]),
    st.fixed_dictionaries({}, optional={
        "TAGS": st.text(alphabet="aZé😀 ", min_size=1, max_size=6),
        "KEYS": st.text(alphabet="k1 é", max_size=12).filter(lambda s: s.strip(" ") or not s),
        "UNIQ_KEY": st.text(alphabet="0123AB", min_size=1, max_size=8),
        "DELAY": st.sampled_from(["1", "3", "18", "40", "0", "-2", "x"]),
    }),
    st.sampled_from([0, 4, 8, 12])), min_size=1, max_size=8))
def test_dispatch_columns_follow_the_dispatch_rules(recs):
    raw = b""
    for topic, props, sys_flag in recs:
        raw += pack(len(raw), topic=topic, sys_flag=sys_flag,
                    props="\x02".join(f"{k}\x01{v}" for k, v in props.items() if v))
    buf = as_buf(raw)
    rows, _, _, _ = walk_all(buf)
    grid = rows.view(np.int64).reshape(-1, kr.NFIELDS)
    spans = np.zeros((len(recs), len(kd.NAMES), 2), dtype=np.int64)
    kd.property_spans(buf, grid, spans)
    codes, to_queue, counts = (np.zeros(len(recs), dtype=t) for t in (np.int64, np.bool_, np.int64))
    hashes = kd.dispatch_columns(buf, grid, spans, np.array(DELAYS_MS, dtype=np.int64), codes,
                                 to_queue, counts)
    at = 0
    for i, (topic, props, sys_flag) in enumerate(recs):
        code, queued, want = reference_dispatch(topic, {k: v for k, v in props.items() if v},
                                                sys_flag, 1_700_000_000_000)
        assert (codes[i], to_queue[i], list(hashes[at:at + counts[i]])) == (code, queued, want)
        at += counts[i]


@settings(deadline=None, max_examples=60)
@given(st.lists(st.sampled_from(["Aa", "BB", "AaAa", "BBBB", "AaBB", "T", "é", "t1", "t2"]),
                min_size=1, max_size=40), st.integers(1, 41))
def test_topics_are_numbered_by_first_appearance_in_chunks_of_any_size(topics, chunk):
    """"Aa" and "BB" share a Java hash and a length (as "AaAa", "BBBB", "AaBB" do): the numbering
    compares the bytes; numbered a chunk at a time it is the numbering of all rows at once."""
    raw = b""
    for topic in topics:
        raw += pack(len(raw), topic=topic)
    buf = as_buf(raw)
    rows, _, _, _ = walk_all(buf)
    grid = rows.view(np.int64).reshape(-1, kr.NFIELDS)
    seen: dict[str, int] = {}
    want = [seen.setdefault(t, len(seen)) for t in topics]
    want_first = [topics.index(t) for t in seen]
    ids, first = kd.topic_ids(buf, grid)
    assert (ids.tolist(), first.tolist()) == (want, want_first)
    ids, first = np.full(len(topics), -1, dtype=np.int64), np.full(len(topics), -1, dtype=np.int64)
    count, table_key, table_id = 0, np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    for a in range(0, len(topics), chunk):
        count, table_key, table_id = kd.number_topics(buf, grid, a, min(a + chunk, len(topics)), ids,
                                                      first, count, table_key, table_id)
    assert (ids.tolist(), first[:count].tolist()) == (want, want_first)


def test_a_walk_with_dispatch_numbers_each_batchs_topics_a_chunk_at_a_time(monkeypatch):
    """The walk numbers topics a chunk of rows at a time (``record_walk.CHUNK_ROWS``): each
    batch's ``topics`` are its topics by first appearance in the batch."""
    topics = ["Aa", "BB", "Aa", "t", "t", "BB", "AaAa", "BBBB", "Aa", "x", "BBBB", "t"]
    raw = b""
    for topic in topics:
        raw += pack(len(raw), topic=topic)
    buf = as_buf(raw)
    monkeypatch.setattr(record_walk, "CHUNK_ROWS", 3)
    batches = list(Walk([(0, buf.size, buf)], 0, buf.size, check_crc=True, batch_rows=8,
                        delay_levels_ms=tuple(DELAYS_MS)))
    assert [len(b) for b in batches] == [8, 4]
    for batch, part in zip(batches, (topics[:8], topics[8:])):
        seen: dict[str, int] = {}
        want = [seen.setdefault(t, len(seen)) for t in part]
        ids, names = batch.topics
        assert (ids.tolist(), names) == (want, list(seen))


def test_golden_store_walks_whole():
    """RocketMQ 4.9.8's CommitLog: 400 records in two files, the first ending with a BLANK."""
    files = [(int(p.name), p.stat().st_size, np.fromfile(p, dtype=np.uint8))
             for p in sorted(GOLDEN.iterdir())]
    walk = Walk(files, 0, files[-1][0] + files[-1][1], check_crc=True, check_names=True)
    batches = list(walk)
    assert sum(map(len, batches)) == 400 and walk.error is None and walk.status == kr.ZEROS
    first = batches[0].rows
    assert first["offset"][0] == 0 and (np.diff(first["offset"]) == first["size"][:-1]).all()


def test_a_walk_stopped_early_stops_its_helper_thread():
    """The walk runs one batch ahead on a helper thread: leaving the loop early ends it, and the
    walk's end is where the batches the caller did not take would have started or later."""
    import threading

    raw = b"".join(pack(k * len(pack(0)), queue_offset=k) for k in range(50))
    files = [(0, len(raw) + 64, as_buf(raw))]
    before = threading.active_count()
    walk = Walk(files, 0, len(raw) + 64, check_crc=True, batch_rows=4)
    for batch in walk:
        assert batch.rows["queue_offset"][0] == 0
        break
    assert threading.active_count() == before
    walk = Walk(files, 0, len(raw) + 64, check_crc=True, batch_rows=4)
    got = [int(q) for b in walk for q in b.rows["queue_offset"]]
    assert got == list(range(50)) and walk.end == len(raw) and walk.status == kr.ZEROS
    assert threading.active_count() == before


def test_an_error_in_the_helper_thread_reaches_the_caller():
    from numba.core.errors import TypingError

    walk = Walk([(0, 64, None)], 0, 64, check_crc=True)  # no bytes: the kernel cannot be typed
    with pytest.raises(TypingError):
        list(walk)


def _forging_log(n: int, forge_every: int, bad_crc_at: int | None = None, base: int = 0) -> bytes:
    """``n`` records of 40-200 byte bodies; every ``forge_every``-th body holds a forged record
    head that passes ``find_start`` (a magic and its own address as PHYSICALOFFSET): a segment
    cut near it guesses a record start inside a record. Record ``bad_crc_at`` has a wrong body
    CRC. ``base``: the CommitLog offset of the first."""
    out = b""
    for k in range(n):
        body = bytes([97 + k % 26]) * (40 + (k * 37) % 160)
        if k % forge_every == 0:
            probe = pack(base + len(out), body=body, queue_offset=k)
            at = base + len(out) + probe.index(body) + 3  # the forged head's own address
            body = body[:3] + pack(at, body=b"z" * 20) + body[3:]
        rec = pack(base + len(out), body=body, queue_offset=k, crc=0x1234 if k == bad_crc_at else None)
        out += rec
    return out


def _walked(walk: Walk) -> tuple[list[int], int, int, str | None]:
    offsets = [int(o) for b in walk for o in b.rows["offset"]]
    return offsets, walk.end, walk.status, walk.error


@pytest.mark.parametrize("bad_crc_at", [None, 61])
def test_a_walk_in_segments_takes_exactly_the_sequential_walks_records(bad_crc_at):
    """Cut into segments walked by several threads (some cuts land on forged heads inside
    bodies), the walk yields the records, end, status and error of one walk from the start."""
    raw = _forging_log(120, 5, bad_crc_at)
    files = [(0, len(raw) + 512, as_buf(raw, len(raw) + 512))]
    whole = _walked(Walk(files, 0, len(raw) + 512, check_crc=True, segment=1 << 30))
    assert whole[0][0] == 0 and len(whole[0]) == (120 if bad_crc_at is None else bad_crc_at)
    assert whole[2] == (kr.ZEROS if bad_crc_at is None else kr.BAD_CRC)
    for segment in range(64, 1600, 61):
        for stop_at in (len(raw) + 512, whole[1] // 2):
            seq = _walked(Walk(files, 0, stop_at, check_crc=True, segment=1 << 30))
            assert _walked(Walk(files, 0, stop_at, check_crc=True, batch_rows=3, segment=segment)) == seq


def test_a_walk_in_segments_crosses_files_at_their_blank():
    """Two files: the first ends in a BLANK record; the segmented walk goes on into the second."""
    first = _forging_log(30, 4)
    blank = struct.pack(">iI", 64, BLANK)
    size = len(first) + 64
    second = _forging_log(20, 3, base=size)
    files = [(0, size, as_buf(first + blank, size)), (size, 8192, as_buf(second, 8192))]
    seq = _walked(Walk(files, 0, size + 8192, check_crc=True, segment=1 << 30))
    assert len(seq[0]) == 50 and seq[0][30] == size and seq[1] == size + len(second)
    assert seq[2] == kr.ZEROS
    for segment in (64, 200, 999):
        assert _walked(Walk(files, 0, size + 8192, check_crc=True, batch_rows=2, segment=segment)) == seq


def test_queue_unit_check_finds_each_queues_first_bad_unit():
    """Three queues' units against a CommitLog of three records (at 0, s0, s0 + s1; end of data
    after the third): queue 0 is sound; queue 1 has a unit of size 0 (not a unit) after a sound
    one; queue 2 has a unit pointing inside a record, then one past the end (its last: cut data,
    not damage)."""
    from rocketlake.store.kernels import queue_units as kq

    recs = [pack(0, body=b"a" * 10)]
    recs.append(pack(len(recs[0]), body=b"b" * 20))
    recs.append(pack(len(recs[0]) + len(recs[1]), body=b"c" * 30))
    raw = b"".join(recs)
    at = [0, len(recs[0]), len(recs[0]) + len(recs[1])]
    size = [len(r) for r in recs]
    end = len(raw)
    units = [[(at[0], size[0]), (at[2], size[2])],            # queue 0: sound
             [(at[1], size[1]), (at[2], 0)],                  # queue 1: unit 1 is no unit
             [(at[0] + 4, size[1]), (end, 100)]]              # queue 2: unit 0 at no head
    raw_units = b"".join(struct.pack(">qiq", o, s, 0) for q in units for o, s in q)  # CQ file bytes
    at_head = np.zeros(6, dtype=np.bool_)
    kq.heads_in_file(as_buf(raw), 0, as_buf(raw_units), 0, 6, at_head)
    assert at_head.tolist() == [True, True, True, False, False, False]
    assert kq.offset_range(as_buf(raw_units), 0, 6) == (0, end)
    n = len(units)
    bad_at, bad_what, min_unit = (np.empty(n, dtype=np.int64) for _ in range(3))
    settled = np.empty(n, dtype=np.bool_)
    ones = np.full(n, 2, dtype=np.int64)
    kq.check(as_buf(raw_units), at_head, np.array([0, 2, 4, 6]),
             np.zeros(n, dtype=np.int64), ones, ones, np.full(n, -1, dtype=np.int64), end, 0,
             bad_at, bad_what, settled, min_unit)
    assert bad_at.tolist() == [-1, 1, 0]
    assert [kq.BAD_WHAT[w] if w >= 0 else None for w in bad_what] == [
        None, "is not a unit", "does not point at a record head"]
    assert settled.tolist() == [True, True, False]  # queue 2's newest units reach past the end
    assert min_unit.tolist() == [0, 0, 0]

def _mapped_kib(path: Path) -> int:
    """KiB of ``path``'s mappings resident in this process (``/proc/self/smaps``)."""
    kib, mine = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            if "-" in line.split(" ", 1)[0]:
                mine = line.rstrip("\n").endswith(str(path))
            elif mine and line.startswith("Rss:"):
                kib += int(line.split()[1])
    return kib


def test_a_walk_over_a_mapped_file_keeps_only_its_last_batches_resident(tmp_path):
    """Mapped file pages count in a process's RSS: a walk over a 64 MiB mapped CommitLog in
    batches of ~1 MiB (segments of 1 MiB walked ahead) keeps its last batches and the segments
    ahead mapped (a few MiB, with the page cache's large folios mapped whole), not the whole
    file, and every record is still read whole."""
    import mmap

    one = len(pack(0, body=bytes(60_000)))
    raw = b"".join(pack(k * one, body=bytes(60_000), queue_offset=k) for k in range(1100))
    path = tmp_path / "00000000000000000000"
    path.write_bytes(raw + bytes(64))
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    buf = np.frombuffer(mm, dtype=np.uint8)
    walk = Walk([(0, buf.size, buf)], 0, buf.size, check_crc=True, batch_rows=16, segment=1 << 20)
    got, most = [], 0
    for batch in walk:
        got += batch.rows["queue_offset"].tolist()
        most = max(most, _mapped_kib(path))
    assert got == list(range(1100)) and walk.status == kr.ZEROS
    assert most < len(raw) // 1024 // 4


def test_a_search_for_a_record_start_over_zeros_keeps_none_of_them_resident(tmp_path):
    """The preallocated rest of a mapped CommitLog file (64 MiB of zeros after one record) is
    read in chunks to find that no record starts there; the zeros read do not stay mapped."""
    import mmap

    from rocketlake.store.record_walk import find_record_start

    rec = pack(0)
    path = tmp_path / "00000000000000000000"
    path.write_bytes(rec + bytes((64 << 20) - len(rec)))
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    buf = np.frombuffer(mm, dtype=np.uint8)
    assert find_record_start(buf, 0, 0, buf.size) == 0
    assert find_record_start(buf, 0, 1, buf.size) == buf.size
    assert _mapped_kib(path) < (64 << 10) // 4


def test_queue_sums_records_tally_per_queue():
    """``queue_sums.records``: extents over every taken row; the sums and counts only of rows at
    or above the retained CommitLog and the queue's min offset, the rest of the retained ones
    hidden (hand-computed)."""
    raw = np.zeros((6, kr.NFIELDS), dtype=np.int64)
    raw[:, kr.OFFSET] = [0, 100, 200, 300, 400, 500]
    raw[:, kr.QUEUE_OFFSET] = [0, 5, 1, 1, 6, 2]
    raw[:, kr.SIZE] = 100
    tags = np.array([7, 7, 7, 7, 7, 7], dtype=np.int64)
    rows = np.array([0, 1, 2, 3, 4], dtype=np.int64)   # row 5 goes to no queue
    queue = np.array([0, 1, 0, 0, 1], dtype=np.int64)
    z = [np.zeros(2, dtype=np.int64) for _ in range(6)]
    count, first_qo, first_offset, max_qo, hidden, counts = z
    irregular, sums = np.zeros(2, dtype=np.bool_), np.zeros(2, dtype=np.uint64)
    min_offset = np.array([1, 0], dtype=np.int64)
    qs.records(raw, rows, queue, tags, 100, min_offset, count, first_qo, first_offset, max_qo, irregular,
               hidden, sums, counts)
    assert count.tolist() == [3, 2] and first_qo.tolist() == [0, 5] and first_offset.tolist() == [0, 100]
    assert max_qo.tolist() == [1, 6] and irregular.tolist() == [True, False]  # queue 0: 0, 1, 1
    assert counts.tolist() == [2, 2] and hidden.tolist() == [0, 0]           # row 0 is below cl_min
    # the same four tallied records as ConsumeQueue units (offset, size, tagsCode; big-endian), one
    # file per run of consecutive queue offsets: queue 0 holds offset 1 twice, queue 1 offsets 5, 6
    data = np.frombuffer(b"".join(struct.pack(">qiq", off, 100, 7) for off in (200, 300, 100, 400)),
                         dtype=np.uint8)
    want, want_counts = np.zeros(2, dtype=np.uint64), np.zeros(2, dtype=np.int64)
    qs.units(data, np.array([0, 0, 1]), np.array([1, 1, 5]), np.array([1, 1, 2]), min_offset, 100,
             want, want_counts)
    assert want_counts.tolist() == [2, 2] and sums.tolist() == want.tolist()
    min_offset[:] = [2, 0]                            # queue 0's offsets 1, 1 are now below it: hidden
    count[:] = counts[:] = hidden[:] = 0
    qs.records(raw, rows, queue, tags, 100, min_offset, count, first_qo, first_offset, max_qo, irregular,
               hidden, sums, counts)
    assert counts.tolist() == [0, 2] and hidden.tolist() == [2, 0]


def test_plan_groups_units_by_queue_in_key_order() -> None:
    """``dispatch.plan``: the units of the records that get one, grouped by queue (topic id, then
    queue id as an unsigned 32-bit number: -1 last), CommitLog order within a queue; the index
    keys' offsets and store times repeated per key."""
    from rocketlake.store.codec import CQ_UNIT_DTYPE
    from rocketlake.store.dispatch import plan
    i64 = lambda *v: np.array(v, dtype=np.int64)  # noqa: E731
    p = plan(topic_ids=i64(1, 0, 0, 1, 0, 0), topics=["a", "b"], queue_ids=i64(0, -1, 2, 0, 2, 2),
             queue_offsets=i64(7, 3, 10, 8, 11, 12), offsets=i64(0, 100, 250, 300, 420, 500),
             sizes=i64(100, 150, 50, 120, 80, 60), store_ts=i64(5, 6, 7, 8, 9, 10),
             tags_code=i64(-1, 2, 3, 4, 5, 6), to_queue=np.array([1, 1, 1, 1, 1, 0], dtype=np.bool_),
             key_hashes=np.array([11, 12, 13], dtype=np.int32), key_counts=i64(0, 2, 0, 1, 0, 0))
    assert p.queues == [(0, 2), (0, -1), (1, 0)]
    assert (p.starts, p.ends) == ([0, 2, 3], [2, 3, 5])
    assert p.units.dtype == CQ_UNIT_DTYPE
    assert p.units.tolist() == [(250, 50, 3), (420, 80, 5), (100, 150, 2), (0, 100, -1), (300, 120, 4)]
    assert p.queue_offsets.tolist() == [10, 11, 3, 7, 8]
    assert p.last_end.tolist() == [500, 250, 420]
    assert p.key_offsets.tolist() == [100, 100, 300] and p.key_ts.tolist() == [6, 6, 8]
    assert p.last_ts == 10
    flat = plan(i64(1, 0), ["a", "b"], i64(0, 3), i64(7, 3), i64(0, 100), i64(100, 50), i64(5, 6),
                i64(1, 2), np.array([1, 1], dtype=np.bool_), np.zeros(0, dtype=np.int32), i64(0, 0),
                by_queue=False)
    assert flat.units.tolist() == [(0, 100, 1), (100, 50, 2)]
    assert flat.unit_topics.tolist() == [1, 0] and flat.unit_queues.tolist() == [0, 3]
    assert flat.queues == [] and flat.key_offsets.size == 0


def test_plan_numbers_many_queues_as_a_stable_sort_does() -> None:
    """5,000 records over 3,000 queues (the queue table grows and collides): the same grouping
    as a stable sort of the queue keys."""
    from rocketlake.store.dispatch import plan
    rng = np.random.default_rng(7)
    n = 5000
    topic, qid = rng.integers(0, 30, n), rng.integers(-50, 50, n)
    to_queue = rng.random(n) < 0.9
    p = plan(topic, [str(t) for t in range(30)], qid, np.arange(n), np.arange(n) * 10,
             np.full(n, 10), np.arange(n), np.arange(n), to_queue, np.zeros(0, dtype=np.int32),
             np.zeros(n, dtype=np.int64))
    sel = np.flatnonzero(to_queue)
    key = (topic[sel] << 32) | (qid[sel] & 0xFFFFFFFF)
    order = sel[np.argsort(key, kind="stable")]
    assert p.units["commitlog_offset"].tolist() == (order * 10).tolist()
    assert [p.units["commitlog_offset"][a] // 10 for a in p.starts] == [
        int(order[k]) for k in np.flatnonzero(np.diff(np.sort(key), prepend=-1) != 0)]
    assert len(p.queues) == np.unique(key).size


def test_group_rows_is_a_stable_counting_sort():
    group = np.array([2, 0, 2, 1, 0, 2], dtype=np.int64)
    sel = np.array([10, 11, 12, 13, 14, 15], dtype=np.int64)
    counts, order, ranks = np.empty(4, np.int64), np.empty(6, np.int64), np.empty(6, np.int64)
    ke.group_rows(group, 4, sel, counts, order, ranks)
    assert counts.tolist() == [2, 1, 3, 0]
    assert order.tolist() == [11, 14, 13, 10, 12, 15]
    assert ranks.tolist() == [0, 1, 0, 0, 1, 2]


@pytest.mark.parametrize(("rows", "same"), [([], True), ([b"ab"], True), ([b"ab", b"ab", b"ab"], True),
                                            ([b"ab", b"ab", b"ac"], False), ([b"ab", b"a"], False),
                                            ([b"", b""], True), ([b"", b"a"], False)])
def test_all_same(rows, same):
    data = np.frombuffer(b"".join(rows) or b"\0", dtype=np.uint8)
    length = np.array([len(r) for r in rows], dtype=np.int64)
    start = np.cumsum(length) - length
    assert ke.all_same(data, start, length) is same
