"""``MessageStore.put_table``: the columnar write path writes RocketMQ's bytes (the golden store),
the same bytes as ``put`` of the same messages, and refuses a bad row by its number with
nothing written."""
from __future__ import annotations

import base64
import hashlib
import os
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from goldens import GOLDEN_498, read_jsonl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_helpers import index_contents, same_tree

from rocketlake.store import Message, MessageRejected, MessageStore, StoreFullError, codec
from rocketlake.store.commitlog import CALLER_SHARE, STAGE_BYTES
from rocketlake.store.message import PutStatus
from rocketlake.store.message_encoder import MessageEncoder

SMALL = dict(mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=200, maxHashSlotNum=16,
             maxIndexNum=20)
TS = 1_732_000_000_000
PROPS = pa.map_(pa.string(), pa.string())


def _snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file under the store (checkpoint, abort and lock included)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _table(rows: list[dict]) -> pa.Table:
    """Rows (Message fields) as a message table with the put_table column types."""
    types = {"topic": pa.string(), "body": pa.binary(), "queue_id": pa.int64(), "tags": pa.string(),
             "keys": pa.string(), "properties": PROPS, "delay_level": pa.int64(),
             "sys_flag": pa.int64(), "flag": pa.int64(), "born_timestamp": pa.int64(),
             "store_timestamp": pa.int64(), "born_host": pa.string(), "store_host": pa.string(),
             "reconsume_times": pa.int64(), "prepared_transaction_offset": pa.int64()}
    names = [n for n in types if any(n in r for r in rows)]
    if any(isinstance(r.get("keys"), list) for r in rows):
        types["keys"] = pa.list_(pa.string())
    default = {n: 0 for n in ("queue_id", "delay_level", "sys_flag", "flag", "reconsume_times",
                              "prepared_transaction_offset")}
    return pa.table({n: pa.array([r.get(n, default.get(n)) for r in rows], type=types[n]) for n in names})


# --- RocketMQ's own bytes ---------------------------------------------------------------------
def test_golden_messages_through_put_table_write_rocketmq_bytes(tmp_path, golden_settings):
    """Every CommitLog, ConsumeQueue and index byte equals what RocketMQ 4.9.8 wrote for the
    golden inputs (store times and hosts as RocketMQ stored them, as test_golden replays them)."""
    msgs = read_jsonl(GOLDEN_498 / "messages.jsonl")
    results = read_jsonl(GOLDEN_498 / "results.jsonl")
    rows = [{"topic": m["topic"], "body": base64.b64decode(m["body_b64"]), "queue_id": m["queue_id"],
             "tags": m.get("tags"), "keys": m.get("keys"),
             "properties": list(m["properties"].items()) if "properties" in m else None,
             "delay_level": m.get("delay_level", 0), "sys_flag": m.get("sys_flag", 0),
             "born_timestamp": m["born_timestamp"], "born_host": m.get("born_host", "127.0.0.1:50000"),
             "store_host": m.get("store_host"), "store_timestamp": r["store_timestamp"]}
            for m, r in zip(msgs, results)]
    root = tmp_path / "replay"
    with MessageStore(root, **golden_settings, brokerIP1="10.0.0.7") as ms:
        got = [ms.put_table(_table(rows[i:i + 150])) for i in range(0, len(rows), 150)]
    assert {g.status for g in got} == {PutStatus.PUT_OK}  # SYNC_FLUSH: durable when returned
    offsets = [o for g in got for o in g.commitlog_offset.tolist()]
    assert offsets == [r["wrote_offset"] for r in results]
    assert [s for g in got for s in g.size.tolist()] == [r["wrote_bytes"] for r in results]
    assert [q for g in got for q in g.queue_offset.tolist()] == [r["logics_offset"] for r in results]
    assert [i for g in got for i in g.msg_ids()] == [r["msg_id"] for r in results]
    gold = GOLDEN_498 / "store"
    assert same_tree(gold, root, "commitlog") == []
    assert same_tree(gold, root, "consumequeue") == []
    assert index_contents(root) == index_contents(gold)


# --- the same bytes as put ----------------------------------------------------------------------
_text = st.text(st.characters(blacklist_characters="\x00\x01\x02 ", blacklist_categories=("Cs",)),
                min_size=1, max_size=8)
_row = st.fixed_dictionaries({
    "topic": st.sampled_from(["orders", "pay-ments", "%RETRY%g"]),
    "body": st.binary(max_size=300),
    "queue_id": st.integers(0, 3),
}, optional={
    "tags": st.one_of(st.none(), st.just(""), _text),
    "keys": st.one_of(st.none(), st.just(""), st.lists(_text, max_size=3),
                      st.lists(_text, max_size=3).map(" ".join)),
    "properties": st.dictionaries(_text, _text, max_size=3),
    "delay_level": st.integers(0, 20),
    "sys_flag": st.sampled_from(codec.TRANSACTION_TYPES),
    "flag": st.integers(-2 ** 31, 2 ** 31 - 1),
    "born_host": st.sampled_from(["10.1.2.3:4567", "[fe80::1]:80"]),
    "store_host": st.sampled_from(["10.9.9.9:10911", "[2001:db8::1]:10911"]),
    "reconsume_times": st.integers(-2 ** 31, 2 ** 31 - 1),
    "prepared_transaction_offset": st.integers(-2 ** 63, 2 ** 63 - 1),
})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_row, min_size=1, max_size=40), st.integers(1, 3))
def test_put_table_writes_the_bytes_put_writes(tmp_path_factory, rows, chunks):
    """Random valid rows (keys as lists and strings, properties, delays, transaction types, IPv6
    born and store hosts, every int field, files rolling) through put_table in ``chunks`` tables
    and through put one by one."""
    for i, r in enumerate(rows):
        r["born_timestamp"], r["store_timestamp"] = TS + i, TS + 1000 * i
    a, b = tmp_path_factory.mktemp("table"), tmp_path_factory.mktemp("put")
    if isinstance(rows[0].get("keys"), list):  # the list column: every row's keys a list or null
        for r in rows:
            if isinstance(r.get("keys"), str):
                r["keys"] = r["keys"].split(" ")
    elif any(isinstance(r.get("keys"), list) for r in rows):
        for r in rows:
            if isinstance(r.get("keys"), list):
                r["keys"] = " ".join(r["keys"])
    table_rows = [{**r, "properties": list(r["properties"].items())} if "properties" in r else r
                  for r in rows]
    step = -(-len(rows) // chunks)
    with MessageStore(a / "s", **SMALL) as ms:
        got = [ms.put_table(_table(table_rows[i:i + step])) for i in range(0, len(rows), step)]
    with MessageStore(b / "s", **SMALL) as ms:
        want = [ms.put(Message(**r)) for r in rows]
    assert [o for g in got for o in g.commitlog_offset.tolist()] == [w.commitlog_offset for w in want]
    assert [q for g in got for q in g.queue_offset.tolist()] == [w.queue_offset for w in want]
    assert [m for g in got for m in g.msg_ids()] == [w.msg_id for w in want]
    for sub in ("commitlog", "consumequeue", "index"):
        assert same_tree(a / "s", b / "s", sub) == []


def _table_and_puts(tmp_path, rows, sizes):
    """``rows`` written by ``put_table`` into ``tmp_path / "table"`` and by ``put`` one by one into
    ``tmp_path / "put"`` (both with file sizes ``sizes``): (the table's result, put's results)."""
    with MessageStore(tmp_path / "table", **sizes) as ms:
        got = ms.put_table(_table(rows))
    with MessageStore(tmp_path / "put", **sizes) as ms:
        want = [ms.put(Message(**r)) for r in rows]
    return got, want


def _assert_same_stores(tmp_path):
    """The two stores of :func:`_table_and_puts` hold the same bytes."""
    for sub in ("commitlog", "consumequeue", "index"):
        assert same_tree(tmp_path / "table", tmp_path / "put", sub) == []


def test_a_table_of_many_megabytes_is_puts_bytes(tmp_path):
    """40,000 rows (about 9 MB of records, rolling into a second 5 MB file; ConsumeQueue units
    written 64 KiB and more at a time) give the bytes of put, one by one."""
    rows = [{"topic": ("a", "b")[i % 2], "body": bytes([i % 251]) * (60 + i % 90), "queue_id": i % 3,
             "tags": ("TagA", None)[i % 2], "keys": f"k{i} c{i % 7}", "born_timestamp": TS + i,
             "store_timestamp": TS + i} for i in range(40_000)]
    sizes = dict(mappedFileSizeCommitLog=5 << 20)
    got, want = _table_and_puts(tmp_path, rows, sizes)
    assert got.commitlog_offset.tolist() == [w.commitlog_offset for w in want]
    _assert_same_stores(tmp_path)


@pytest.mark.parametrize("same_size", [True, False])
def test_a_table_laid_out_in_two_parts_across_file_ends_is_puts_bytes(tmp_path, same_size):
    """10,000 rows into 64 KiB CommitLog files: the two parts of the table (laid out at once)
    each cross many file ends. With records all of one size, 6 files' worth of rows: the
    writer's part (the second half) starts a file, right after a BLANK. Bytes, offsets and
    queue offsets are put's."""
    body = (lambda i: b"b" * 109) if same_size else (lambda i: bytes([i % 251]) * (20 + i % 200))
    one = codec.record_length(0, 109, 1, 0)  # topic "t", no properties: 201 bytes
    per_file = (65536 - 8) // one
    n = 6 * per_file if same_size else 10_000
    rows = [{"topic": "t", "body": body(i), "queue_id": i % 2, "born_timestamp": TS + i,
             "store_timestamp": TS + i} | ({} if same_size else {"tags": "T", "keys": f"k{i}"})
            for i in range(n)]
    sizes = dict(mappedFileSizeCommitLog=65536)
    got, want = _table_and_puts(tmp_path, rows, sizes)
    if same_size:
        assert int(n * CALLER_SHARE) == 3 * per_file
        assert got.commitlog_offset[3 * per_file] == 3 * 65536
    assert got.commitlog_offset.tolist() == [w.commitlog_offset for w in want]
    assert got.queue_offset.tolist() == [w.queue_offset for w in want]
    _assert_same_stores(tmp_path)


def test_records_longer_than_a_staging_run_are_puts_bytes(tmp_path):
    """The layout stages runs of about ``STAGE_BYTES`` of records: records longer than that (one
    at the start, some in each part of a split table, one right at the cut, one at the end)
    between runs of small ones, rolling 2 MiB files, give the bytes of put."""
    n = 6000
    big = {0, 1, 700, 701, int(n * CALLER_SHARE) - 1, int(n * CALLER_SHARE), 4000, n - 1}
    rows = [{"topic": "t", "body": bytes([i % 251]) * (STAGE_BYTES + 17 * i if i in big else 50 + i % 300),
             "queue_id": i % 3, "tags": "T", "keys": f"k{i}", "born_timestamp": TS + i,
             "store_timestamp": TS + i} for i in range(n)]
    sizes = dict(mappedFileSizeCommitLog=2 << 20)
    got, want = _table_and_puts(tmp_path, rows, sizes)
    assert got.commitlog_offset.tolist() == [w.commitlog_offset for w in want]
    _assert_same_stores(tmp_path)


def test_keys_as_a_list_and_as_a_string_give_the_same_record(tmp_path):
    rows = [{"topic": "t", "body": b"x", "keys": ["a", "b c"], "store_timestamp": TS}]
    with MessageStore(tmp_path / "a") as ms:
        ms.put_table(_table(rows))
        rec_list = ms.read(0)
    with MessageStore(tmp_path / "b") as ms:
        ms.put_table(_table([{**rows[0], "keys": "a b c"}]))
        rec_str = ms.read(0)
        assert [r.commitlog_offset for r in ms.query("t", "c")] == [0]
    assert rec_list == rec_str and rec_list.properties_string == "KEYS\x01a b c"


def test_ipv6_born_host_delay_and_transactions(tmp_path):
    rows = [
        {"topic": "t", "body": b"6", "born_host": "[2001:db8::5]:1234"},
        {"topic": "t", "body": b"d", "tags": "A", "delay_level": 99},
        {"topic": "t", "body": b"p", "sys_flag": codec.TRANSACTION_PREPARED},
        {"topic": "t", "body": b"c", "sys_flag": codec.TRANSACTION_COMMIT},
        {"topic": "t", "body": b"r", "sys_flag": codec.TRANSACTION_ROLLBACK},
        {"topic": "t", "body": b"n"},
    ]
    with MessageStore(tmp_path / "s") as ms:
        r = ms.put_table(_table(rows))
        recs = [ms.read(o) for o in r.commitlog_offset.tolist()]
        v6 = recs[0]
        assert v6.born_host == "[2001:db8:0:0:0:0:0:5]:1234" and v6.sys_flag == codec.FLAG_BORNHOST_V6
        assert v6.size == 91 + 1 + 1 + 12  # body, topic, one IPv6 host, no properties
        d = recs[1]
        # the highest level (18) is stored; the message waits in SCHEDULE_TOPIC_XXXX queue 17
        assert (d.topic, d.queue_id) == ("SCHEDULE_TOPIC_XXXX", 17)
        assert d.properties == {"TAGS": "A", "DELAY": "18", "REAL_TOPIC": "t", "REAL_QID": "0"}
        assert ms.get("SCHEDULE_TOPIC_XXXX", 17, 0).messages[0].tags_code == d.store_timestamp + 7_200_000
        # PREPARED and ROLLBACK take no queue offset and get no ConsumeQueue unit
        assert r.queue_offset.tolist() == [0, 0, 0, 1, 0, 2]
        assert [m.record.body for m in ms.get("t", 0, 0).messages] == [b"6", b"c", b"n"]


def test_a_table_rolls_files_with_a_blank_record(tmp_path):
    """4096-byte files: records of 91 + 1 + 1000 bytes, three to a file; the fourth rolls."""
    rows = [{"topic": "t", "body": bytes([i]) * 1000} for i in range(7)]
    with MessageStore(tmp_path / "s", **SMALL) as ms:
        r = ms.put_table(_table(rows))
        assert r.commitlog_offset.tolist() == [0, 1092, 2184, 4096, 5188, 6280, 8192]
        assert [ms.read(o).body[0] for o in r.commitlog_offset.tolist()] == list(range(7))
    raw = (tmp_path / "s/commitlog/00000000000000000000").read_bytes()
    assert int.from_bytes(raw[3276:3280], "big") == 4096 - 3276
    assert raw[3280:3284] == bytes.fromhex("CBD43194")


# --- a bad row: named, nothing written --------------------------------------------------------------
GOOD = {"topic": "orders", "body": b"ok", "queue_id": 0, "tags": "T", "keys": "k"}
# (row 2 of three, a text the error names)
BAD_ROWS = [
    ({"topic": "bad topic"}, "characters outside"),
    ({"topic": "x" * 128}, "over 127"),
    ({"topic": None}, "non-empty string"),
    ({"body": b"x" * 4097}, "maxMessageSize"),
    ({"body": None}, "body must be bytes"),
    ({"queue_id": -1}, "queue_id"),
    ({"queue_id": None}, "queue_id"),
    ({"flag": 2 ** 31}, "flag"),
    ({"delay_level": -1}, "delay_level"),
    ({"born_timestamp": -5}, "born_timestamp"),
    ({"store_timestamp": 253_402_214_400_000}, "store_timestamp"),
    ({"sys_flag": 0x40}, "sys_flag"),
    ({"tags": "a\x01b"}, "separator"),
    ({"keys": "a\x02b"}, "separator"),
    ({"keys": ["a", None]}, "keys must be a string or a list"),
    ({"properties": [("a", "b\x02")]}, "separator"),
    ({"properties": [("a", "v" * 32767)]}, "properties are"),
    ({"tags": "t" * 32767}, "properties are"),
    ({"body": b"x" * 4000}, "does not fit a CommitLog file"),
    ({"born_host": "10.0.0.1:65536"}, "65536"),
    ({"born_host": "nohost"}, "bad host"),
    ({"delay_level": 3, "sys_flag": 0x20}, "sys_flag"),
]


@pytest.fixture()
def store(tmp_path) -> Path:
    root = tmp_path / "s"
    with MessageStore(root, **SMALL, maxMessageSize=4096) as ms:
        ms.put_table(_table([GOOD]))
    return root


@pytest.mark.parametrize("bad,problem", BAD_ROWS, ids=[str(i) for i in range(len(BAD_ROWS))])
def test_a_bad_row_is_named_and_nothing_is_written(store, bad, problem):
    rows = [GOOD, {**GOOD, "topic": "other"}, {**GOOD, **bad}, {**GOOD, "body": b"late"}]
    if isinstance(bad.get("keys"), list):
        for r in rows:
            r["keys"] = bad["keys"] if r is rows[2] else [r["keys"]]
    with MessageStore(store, **SMALL, maxMessageSize=4096) as ms:
        before = _snapshot(store)
        with pytest.raises(MessageRejected) as e:
            ms.put_table(_table(rows))
        assert _snapshot(store) == before
        # put's own text for that message, after the row number
        msg = Message(**{k: (dict(v) if k == "properties" and v is not None else v)
                         for k, v in rows[2].items() if v is not None or k in ("topic", "body", "queue_id")})
        with pytest.raises(MessageRejected) as want:
            MessageEncoder(ms.config).prepare(msg)
        assert str(e.value) == f"row 2: {want.value}" and e.value.index == 2
        assert problem in str(e.value)
        # the next row written takes the next queue offset
        assert ms.put_table(_table([GOOD])).queue_offset.tolist() == [1]


def test_the_first_bad_row_is_named(store):
    rows = [GOOD, {**GOOD, "tags": "a\x01"}, {**GOOD, "topic": "bad topic"}]
    with MessageStore(store, **SMALL) as ms, pytest.raises(MessageRejected, match="^row 1: tags"):
        ms.put_table(_table(rows))
    rows = [GOOD, {**GOOD, "delay_level": -1}, {**GOOD, "queue_id": -1}]
    with MessageStore(store, **SMALL) as ms, pytest.raises(MessageRejected, match="^row 1: delay_level"):
        ms.put_table(_table(rows))


@pytest.mark.parametrize("name", ["flag", "reconsume_times", "prepared_transaction_offset"])
def test_a_uint64_beyond_int64_is_refused_not_wrapped(store, name):
    """2**64 - 1 in a uint64 column is not -1 (which the field could hold)."""
    table = pa.table({"topic": ["orders"] * 2, "body": [b"a", b"b"],
                      name: pa.array([0, 2 ** 64 - 1], pa.uint64())})
    with MessageStore(store, **SMALL) as ms:
        before = _snapshot(store)
        with pytest.raises(MessageRejected, match=f"^row 1: {name} must be an int in .*, got {2 ** 64 - 1}$"):
            ms.put_table(table)
        assert _snapshot(store) == before


def test_all_null_columns_are_their_defaults(tmp_path):
    nulls = pa.nulls(2)
    table = pa.table({"topic": ["t", "t"], "body": [b"a", b"b"], "tags": nulls, "keys": nulls,
                      "properties": nulls, "born_host": nulls, "store_host": nulls,
                      "born_timestamp": nulls, "store_timestamp": nulls})
    with MessageStore(tmp_path / "a") as ms:
        r = ms.put_table(table)
        assert [ms.read(o).properties_string for o in r.commitlog_offset.tolist()] == ["", ""]
    with MessageStore(tmp_path / "s") as ms, \
            pytest.raises(MessageRejected, match="'queue_id' must be integers, got null"):
        ms.put_table(table.append_column("queue_id", nulls))


def test_bad_columns_are_refused(store):
    with MessageStore(store, **SMALL) as ms:
        before = _snapshot(store)
        for table, problem in [
            (pa.table({"topic": ["t"]}), "missing column 'body'"),
            (pa.table({"topic": ["t"], "body": [b"x"], "colour": ["red"]}), "unknown column(s) colour"),
            (pa.table({"topic": ["t"], "body": ["text"]}), "column 'body' must be binary"),
            (pa.table({"topic": ["t"], "body": [b"x"], "queue_id": ["1"]}),
             "column 'queue_id' must be integers"),
        ]:
            with pytest.raises(MessageRejected, match=re.escape(problem)):
                ms.put_table(table)
        assert _snapshot(store) == before


def _text(offsets: list[int], data: bytes) -> pa.Array:
    """A string column made of raw buffers (Arrow checks their sizes, not their contents)."""
    ends = pa.py_buffer(b"".join(o.to_bytes(4, "little") for o in offsets))
    return pa.Array.from_buffers(pa.string(), len(offsets) - 1, [None, ends, pa.py_buffer(data)])


@pytest.mark.parametrize("tags, problem", [
    (_text([0, 1, 3], b"a\xff\xfe"), "Invalid UTF8"),   # not UTF-8
    (_text([0, 2, 1], b"ab"), "offset"),                # offsets out of order
])
def test_a_string_column_arrow_would_refuse_is_refused(store, tags, problem):
    """Strings made of buffers get Arrow's check, by the column's name, on the fast ASCII path
    too; nothing is written."""
    with MessageStore(store, **SMALL) as ms:
        before = _snapshot(store)
        table = pa.table({"topic": ["t", "t"], "body": [b"x", b"y"], "tags": tags})
        with pytest.raises(MessageRejected, match=rf"column 'tags': .*{problem}"):
            ms.put_table(table)
        assert _snapshot(store) == before


def test_slices_chunked_tables_and_record_batches_store_the_same_bytes(tmp_path):
    """Columns at an offset into their buffers (slices), several chunks, a RecordBatch, and an
    empty table (nothing stored) give the bytes of one whole table."""
    rows = [{"topic": f"t{i % 3}", "body": bytes([i]) * (i % 7), "queue_id": i % 2,
             "tags": ("A", None, "")[i % 3], "keys": [f"k{i}", "x"] if i % 4 else None,
             "store_timestamp": TS + i} for i in range(50)]
    whole = _table(rows)
    with MessageStore(tmp_path / "whole", **SMALL) as ms:
        ms.put_table(whole)
    with MessageStore(tmp_path / "parts", **SMALL) as ms:
        assert len(ms.put_table(whole.slice(0, 0))) == 0
        ms.put_table(whole.slice(0, 7))
        ms.put_table(pa.concat_tables([whole.slice(7, 10), whole.slice(17, 13)]))
        for batch in whole.slice(30).to_batches(max_chunksize=6):
            ms.put_table(batch)
    with MessageStore(tmp_path / "views", **SMALL) as ms:  # views, large lists, a narrow int
        ms.put_table(whole.cast(pa.schema([
            f.with_type(pa.int16() if f.name == "queue_id" else
                        {pa.string(): pa.string_view(), pa.binary(): pa.binary_view(),
                         pa.list_(pa.string()): pa.large_list(pa.large_string())}.get(f.type, f.type))
            for f in whole.schema])))
    for other in ("parts", "views"):
        for sub in ("commitlog", "consumequeue", "index"):
            assert same_tree(tmp_path / "whole", tmp_path / other, sub) == []


def test_a_full_disk_fails_the_table_before_a_byte_is_written(small_fs):
    """A table that needs a second 1 MiB CommitLog file on a full disk: StoreFullError, every file
    as it was, no queue offset taken; once space is freed the same table is stored."""
    settings = {"mappedFileSizeCommitLog": 1 << 20, "mappedFileSizeConsumeQueue": 20 * 6000,
                "maxHashSlotNum": 64, "maxIndexNum": 5000}
    root, filler = small_fs / "store", small_fs / "filler"
    big = _table([{"topic": "T", "body": bytes([i % 251]) * 1000, "keys": f"k{i}"} for i in range(1100)])
    with MessageStore(root, **settings) as ms:
        ms.put_table(_table([{"topic": "T", "body": b"first", "keys": "k"}]))
        ms.flush()
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT)  # fill the file system
        try:
            while True:
                os.write(fd, bytes(4096))
        except OSError:
            os.close(fd)
        before = _snapshot(root)
        with pytest.raises(StoreFullError, match="commitlog"):
            ms.put_table(big)
        assert _snapshot(root) == before
        assert ms.max_offset("T", 0) == 1
        filler.unlink()
        r = ms.put_table(big)
        assert r.queue_offset.tolist() == list(range(1, 1101))
    with MessageStore(root, **settings) as ms:
        assert ms.max_offset("T", 0) == 1101
        assert [x.commitlog_offset for x in ms.query("T", "k1099")] == [int(r.commitlog_offset[-1])]


@pytest.mark.parametrize("bad", [
    Message("t", b"x", keys=["a", b"b"]),        # bytes among the keys: arrow would take them
    Message("t", b"x", keys=("a", 1)),
    Message("t", b"x", flag=True),
    Message("t", b"x", queue_id=2 ** 63),
    Message("t", "text"),  # type: ignore[arg-type]
    Message("t\ud800", b"x"),  # a lone surrogate: no UTF-8 for it
])
def test_put_batch_refuses_what_put_refuses(tmp_path, bad):
    with MessageStore(tmp_path / "s") as ms:
        with pytest.raises(MessageRejected) as want:
            ms.put(bad)
        before = _snapshot(tmp_path / "s")
        with pytest.raises(MessageRejected) as got:
            ms.put_batch([Message("t", b"fine", keys=["k"]), bad])
        assert (str(got.value), got.value.index) == (str(want.value), 1)
        assert _snapshot(tmp_path / "s") == before
        # values of other types that put takes: stored as put stores them
        r = ms.put_batch([Message("t", bytearray(b"ba"), keys=("a", "b")), Message("t", memoryview(b"mv"))])
        assert [ms.read(x.commitlog_offset).body for x in r] == [b"ba", b"mv"]
        assert ms.read(r[0].commitlog_offset).keys == ["a", "b"]


def test_a_closed_or_read_only_store_takes_no_table(tmp_path):
    table = _table([GOOD])
    ms = MessageStore(tmp_path / "s")
    ms.put_table(table)
    ms.close()
    with pytest.raises(RuntimeError, match="store is closed"):
        ms.put_table(table)
    with MessageStore(tmp_path / "s", read_only=True) as ro, \
            pytest.raises(RuntimeError, match="read-only"):
        ro.put_table(table)


_BAD_VALUES = {
    "topic": st.sampled_from(["bad topic", "x" * 128, "", "тема", None]),
    "body": st.sampled_from([b"x" * 4097, None]),
    "queue_id": st.sampled_from([-1, 2 ** 31, None]),
    "tags": st.sampled_from(["a\x01", "\x02", "t" * 32767]),
    "keys": st.sampled_from(["k\x01", ["a", None], ["a\x02"], "k" * 32767]),
    "properties": st.sampled_from([[("a", "b\x01")], [("", "v")], [("a", "v" * 32767)]]),
    "delay_level": st.sampled_from([-1, 2 ** 31]),
    "sys_flag": st.sampled_from([0x40, -1, 0x10]),
    "flag": st.sampled_from([2 ** 31, -2 ** 31 - 1]),
    "born_timestamp": st.sampled_from([-1]),
    "store_timestamp": st.sampled_from([253_402_214_400_000]),
    "born_host": st.sampled_from(["1.2.3.4:65536", "nohost", "[::1]:-1"]),
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(_row, st.tuples(_row, st.sampled_from(sorted(_BAD_VALUES)))
                          .flatmap(lambda rf: _BAD_VALUES[rf[1]].map(lambda v: {**rf[0], rf[1]: v}))),
                min_size=1, max_size=12))
def test_the_error_is_puts_for_the_first_row_put_refuses(tmp_path_factory, rows):
    """Tables mixing valid rows and rows with one bad value: put_table refuses with put's error
    for the first row that put refuses (MessageEncoder.prepare row by row), writing nothing, or
    stores them all when put would."""
    keys_list = any(isinstance(r.get("keys"), list) for r in rows)
    for r in rows:
        if keys_list and isinstance(r.get("keys"), str):
            r["keys"] = r["keys"].split(" ")
        elif not keys_list and isinstance(r.get("keys"), list):
            r["keys"] = " ".join(r["keys"])
    root = tmp_path_factory.mktemp("t") / "s"
    with MessageStore(root, **SMALL, maxMessageSize=4096) as ms:
        want = None
        for i, r in enumerate(rows):
            m = {k: (dict(v) if k == "properties" else v) for k, v in r.items()}
            try:
                ms.encoder.prepare(Message(**{"queue_id": 0, **m}))
            except (MessageRejected, TypeError) as e:
                want = f"row {i}: {e}"
                break
        table_rows = [{**r, "properties": list(r["properties"].items())}
                      if isinstance(r.get("properties"), dict) else r for r in rows]
        before = _snapshot(root)
        if want is None:
            assert len(ms.put_table(_table(table_rows))) == len(rows)
        else:
            with pytest.raises(MessageRejected) as e:
                ms.put_table(_table(table_rows))
            assert str(e.value) == want
            assert _snapshot(root) == before


def test_put_encoded_writes_what_put_table_writes_and_only_under_the_same_settings(tmp_path):
    """Rows encoded beforehand (``TableEncoder`` with the store's settings, through an
    ``EncodedSpool`` as ``rocketlake ingest`` keeps them) store put_table's bytes; rows encoded
    for another store host or file size are refused with nothing written."""
    from rocketlake.jobs.cli.encoded_spool import EncodedSpool
    from rocketlake.store.config import load_config
    from rocketlake.store.table_encoder import TableEncoder

    rows = [{"topic": f"t{i % 2}", "body": bytes([i]) * i, "queue_id": i % 3, "tags": "A",
             "keys": [f"k{i}"], "properties": [("UNIQ_KEY", f"u{i}")] if i % 2 else None,
             "born_host": "[::1]:7" if i == 3 else None, "store_timestamp": TS + i}
            for i in range(12)]
    with MessageStore(tmp_path / "table", **SMALL) as ms:
        ms.put_table(_table(rows))
    with EncodedSpool() as spool:
        spool.add(TableEncoder(MessageEncoder(load_config(SMALL))).encode(_table(rows[:5])))
        spool.add(TableEncoder(MessageEncoder(load_config(SMALL))).encode(_table(rows[5:])))
        with MessageStore(tmp_path / "encoded", **SMALL) as ms:
            assert [len(ms.put_encoded(t)) for t in spool] == [5, 7]
    for sub in ("commitlog", "consumequeue", "index"):
        assert same_tree(tmp_path / "table", tmp_path / "encoded", sub) == []
    for other in ({**SMALL, "brokerIP1": "10.9.9.9"}, {**SMALL, "mappedFileSizeCommitLog": 8192}):
        encoded = TableEncoder(MessageEncoder(load_config(other))).encode(_table(rows))
        with MessageStore(tmp_path / "other", **SMALL) as ms:
            before = _snapshot(tmp_path / "other")
            with pytest.raises(ValueError, match="encoded under other settings"):
                ms.put_encoded(encoded)
            assert _snapshot(tmp_path / "other") == before


def test_properties_and_hosts_from_columns_are_puts_bytes(tmp_path):
    """Rows with properties and hosts (laid out from the columns unless a name is one prepare
    sets or a name is given twice) store what put stores, row for row."""
    rows = [
        {"properties": [("UNIQ_KEY", "u1"), ("a", "1")], "tags": "T", "keys": "k1  k2"},
        {"properties": [("TAGS", "user"), ("x", "y")], "tags": "T2"},
        {"properties": [("KEYS", "uk")], "keys": ["k3"]},
        {"properties": [("DELAY", "2")]},
        {"properties": [("a", "1"), ("b", "2"), ("a", "3")]},
        {"properties": [], "tags": "T"},
        {"born_host": "10.0.0.7:1234", "store_host": "[2001:db8::2]:10911", "keys": ["k4", "k5"]},
        {"born_host": "", "properties": None, "tags": ""},
        {"properties": [("UNIQ_KEY", "")], "keys": ["k6"]},
        {"properties": [("é", "ü")], "born_host": "[::1]:0"},
    ]
    rows = [{"topic": "t", "body": b"b%d" % i, "queue_id": i % 2, "store_timestamp": TS + i,
             "keys": None, **r} for i, r in enumerate(rows)]
    for r in rows:
        if isinstance(r["keys"], list):
            r["keys"] = " ".join(r["keys"])
    with MessageStore(tmp_path / "table", **SMALL) as ms:
        ms.put_table(_table(rows))
        got = [ms.read(o) for o in ms.put_table(_table(rows[:1])).commitlog_offset.tolist()]
        assert ms.read(0).properties_string == "UNIQ_KEY\x01u1\x02a\x011\x02TAGS\x01T\x02KEYS\x01k1  k2"
        assert [r.properties_string for r in got] == [ms.read(0).properties_string]
        assert ms.read(ms.read(0).size).properties_string == "TAGS\x01T2\x02x\x01y"
    with MessageStore(tmp_path / "put", **SMALL) as ms:
        for r in [*rows, rows[0]]:
            ms.put(Message(**{**r, "properties": None if r.get("properties") is None
                              else dict(r["properties"])}))
    _assert_same_stores(tmp_path)


def test_consume_queue_units_of_a_large_table_are_in_the_file(tmp_path):
    """5,000 rows into one queue: 100,000 bytes of units in one write (written with ``pwrite``,
    not through the mapping, from 64 KiB on). Each unit in the file is (CommitLog offset, size,
    tagsCode) of its row: Java's "TagA".hashCode() is 2598919."""
    n = 5000
    table = pa.table({"topic": ["t"] * n, "body": [b"x" * (i % 7) for i in range(n)],
                      "tags": ["TagA"] * n})
    with MessageStore(tmp_path / "s") as ms:
        res = ms.put_table(table)
    raw = (tmp_path / "s/consumequeue/t/0/00000000000000000000").read_bytes()[:20 * n]
    units = np.frombuffer(raw, dtype=np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags", ">i8")]))
    assert units["offset"].tolist() == res.commitlog_offset.tolist()
    assert units["size"].tolist() == res.size.tolist()
    assert set(units["tags"].tolist()) == {2598919}


@pytest.mark.parametrize("last_queue", [2, 2**31 - 1])
def test_rows_grouped_by_queue_in_topic_then_queue_order(tmp_path, last_queue):
    """``queue_groups``: the queues in order of topic number, then queue id; each queue's rows in
    table order, ranked from 0. A small queue id is grouped by counting, the largest one by
    sorting: the same groups."""
    topics = ["b", "a", "b", "a", "b", "a", "c"]
    queue_ids = [1, 0, 1, last_queue, 0, 0, 5]
    with MessageStore(tmp_path) as ms:
        table = ms.table_encoder.encode(_table([{"topic": t, "body": b"x", "queue_id": q}
                                                for t, q in zip(topics, queue_ids)]))
    queues, counts, grouped, ranks = table.queue_groups
    order = sorted({(table.topics.index(t), q) for t, q in zip(topics, queue_ids)})
    assert queues == [(table.topics[t], q) for t, q in order]
    want_rows = [i for t, q in order for i in range(7) if (topics[i], queue_ids[i]) == (table.topics[t], q)]
    assert grouped.tolist() == want_rows
    rows_per_queue = {("a", 0): 2, ("b", 1): 2, ("b", 0): 1, ("a", last_queue): 1, ("c", 5): 1}
    assert dict(zip(queues, counts.tolist())) == rows_per_queue
    assert ranks.tolist() == [r for queue in queues for r in range(rows_per_queue[queue])]


def _read_only_table() -> pa.Table:
    """Two messages of topic "t" with tag "a" and key "k", every column over read-only buffers
    (``pa.py_buffer`` of bytes)."""
    ends = pa.py_buffer(np.array([0, 1, 2], dtype=np.int32).tobytes())

    def text(data: bytes) -> pa.Array:
        return pa.Array.from_buffers(pa.string(), 2, [None, ends, pa.py_buffer(data)])

    body = pa.Array.from_buffers(pa.binary(), 2, [None, pa.py_buffer(bytes(12)), pa.py_buffer(b"")])
    keys = pa.ListArray.from_buffers(pa.list_(pa.string()), 2, [None, ends], children=[text(b"kk")])
    return pa.table({"topic": text(b"tt"), "body": body, "tags": text(b"aa"), "keys": keys})


def test_a_table_of_python_values_runs_the_kernels_a_table_of_read_only_buffers_ran(tmp_path):
    """The columns of a table ``pa.array`` built (mutable Arrow buffers) run the validation and
    layout kernels a table over read-only buffers ran: no other specialization is loaded or
    compiled."""
    from rocketlake.store.kernels import encode as ke

    kernels = {name: k for name in dir(ke) if hasattr(k := getattr(ke, name), "signatures")}
    with MessageStore(tmp_path) as ms:
        ms.put_table(_read_only_table())
        loaded = {name: set(k.signatures) for name, k in kernels.items()}
        ms.put_table(pa.table({"topic": pa.array(["t", "t"]), "body": pa.array([b"a", b"b"]),
                               "tags": pa.array(["x", "y"]), "keys": pa.array(["k1", "k2 k3"])}))
    assert {name: set(k.signatures) - loaded[name] for name, k in kernels.items()
            if set(k.signatures) - loaded[name]} == {}
