"""Every Message field is checked before anything is reserved: a refused message leaves the store
byte for byte as it was, the next message gets the next queue offset, and the store reopens."""
from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_helpers import record_bytes

from rocketlake.store import Message, MessageRejected, MessageStore, codec, load_config
from rocketlake.store.message_encoder import MessageEncoder

INT32 = (-2 ** 31, 2 ** 31 - 1)
INT64 = (-2 ** 63, 2 ** 63 - 1)
# 9999-12-31T00:00:00Z: IndexFile names hold the store time as yyyyMMddHHmmssSSS in local time.
YEAR_10000_SAFE = 253_402_214_400_000
SMALL = dict(mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=200, maxHashSlotNum=16,
             maxIndexNum=20)

#: field -> (lowest, highest) value its on-disk field (or RocketMQ's Java type) holds
LIMITS = {
    "queue_id": (0, INT32[1]),
    "flag": INT32,
    "delay_level": (0, INT32[1]),
    "reconsume_times": INT32,
    "prepared_transaction_offset": INT64,
    "born_timestamp": (0, INT64[1]),
    "store_timestamp": (0, YEAR_10000_SAFE - 1),
}

# (field overrides, text the error must contain besides the field name)
BAD_FIELDS = [
    *[({f: lo - 1}, str(lo - 1)) for f, (lo, hi) in LIMITS.items()],
    *[({f: hi + 1}, str(hi + 1)) for f, (lo, hi) in LIMITS.items()],
    ({"born_timestamp": 2 ** 64}, str(2 ** 64)),
    ({"sys_flag": 2 ** 31}, str(2 ** 31)),
    ({"sys_flag": -1}, "-1"),
    ({"born_host": "10.0.0.1:65536"}, "65536"),
    ({"born_host": "10.0.0.1:-1"}, "-1"),
    ({"store_host": "[::1]:70000"}, "70000"),
    ({"store_host": "10.0.0.1:99999999999"}, "99999999999"),
    ({"born_host": 5}, "5"),
    ({"store_host": ["10.0.0.1:1"]}, "10.0.0.1:1"),
    # wrong types
    ({"topic": None}, "None"),
    ({"topic": ["t"]}, "['t']"),
    ({"body": "text"}, "str"),
    ({"body": None}, "NoneType"),
    ({"tags": 5}, "5"),
    ({"tags": ["a"]}, "['a']"),
    ({"keys": {"k": "v"}}, "{'k': 'v'}"),
    ({"keys": 5}, "5"),
    ({"keys": ["a", 1]}, "['a', 1]"),
    ({"properties": [("a", "b")]}, "[('a', 'b')]"),
    ({"properties": []}, "[]"),
    ({"properties": {"a": 1}}, "'a'"),
    ({"flag": "1"}, "'1'"),
    ({"flag": 1.0}, "1.0"),
    ({"flag": None}, "None"),
    ({"reconsume_times": None}, "None"),
    ({"prepared_transaction_offset": "0"}, "'0'"),
    ({"born_timestamp": "1"}, "'1'"),
    ({"store_timestamp": 1.5}, "1.5"),
    ({"sys_flag": None}, "None"),
    ({"delay_level": "1"}, "'1'"),
    ({"delay_level": None}, "None"),
    # bool is refused wherever an int is expected: a JSON true is not a number
    ({"flag": True}, "True"),
    ({"flag": False}, "False"),
    ({"queue_id": True}, "True"),
    ({"sys_flag": False}, "False"),
    ({"delay_level": True}, "True"),
    ({"reconsume_times": False}, "False"),
]


def _ids(case) -> str:
    (field, value), = case[0].items()
    return f"{field}={value!r}"[:40]


def _snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file under the store."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _expected_field(overrides: dict) -> str:
    (field,) = overrides
    return field


@pytest.mark.parametrize("overrides,value_text", BAD_FIELDS, ids=map(_ids, BAD_FIELDS))
def test_bad_field_is_refused_and_the_store_stays_as_it_was(tmp_path, overrides, value_text):
    root = tmp_path / "s"
    ok = Message("t", b"first", keys="k1")
    # with a property too, so the message takes the general path as well as the common one
    variants = [replace(ok, **overrides)]
    if "properties" not in overrides:
        variants.append(replace(ok, properties={"p": "v"}, **overrides))
    with MessageStore(root, **SMALL) as ms:
        assert ms.put(ok).queue_offset == 0
        ms.flush()
        files, queues = _snapshot(root), dict(ms.commitlog.next_queue_offsets)
        for bad in variants:
            with pytest.raises(MessageRejected) as e:
                ms.put(bad)
            assert _expected_field(overrides) in str(e.value) and value_text in str(e.value)
            with pytest.raises(MessageRejected) as e:
                ms.put_batch([Message("t", b"fine"), Message("t", b"fine"), bad])
            assert e.value.index == 2
            assert _expected_field(overrides) in str(e.value)
        assert _snapshot(root) == files and ms.commitlog.next_queue_offsets == queues
        assert ms.put(Message("t", b"second", keys="k2")).queue_offset == 1
    with MessageStore(root, **SMALL) as ms:
        assert [m.record.body for m in ms.get("t", 0, 0).messages] == [b"first", b"second"]
        assert [r.body for r in ms.query("t", "k2")] == [b"second"]


@pytest.mark.parametrize("field", sorted(LIMITS))
def test_edge_values_inside_the_limits_are_stored(tmp_path, field):
    lo, hi = LIMITS[field]
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        for v in (lo, hi):
            ms.put(Message("t", b"x", keys="k", **{field: v}))
    with MessageStore(root, read_only=True, **SMALL) as ms:
        recs = list(ms.commitlog.walk_records())
    stored = {"queue_id": lambda r: r.queue_id, "flag": lambda r: r.flag,
              "reconsume_times": lambda r: r.reconsume_times,
              "prepared_transaction_offset": lambda r: r.prepared_transaction_offset,
              "born_timestamp": lambda r: r.born_timestamp,
              "store_timestamp": lambda r: r.store_timestamp,
              "delay_level": lambda r: int(r.properties.get("DELAY", 0))}[field]
    # CommitLog.asyncPutMessage stores a delay beyond the 18 configured levels as level 18
    assert [stored(r) for r in recs] == ([lo, 18] if field == "delay_level" else [lo, hi])


@pytest.mark.parametrize("port", [0, 65535])
def test_edge_ports_are_stored_as_given(tmp_path, port):
    with MessageStore(tmp_path / "s", **SMALL) as ms:
        ms.put(Message("t", b"x", born_host=f"10.0.0.1:{port}", store_host=f"[::1]:{port}"))
        (r,) = ms.get("t", 0, 0).messages
    assert (r.record.born_port, r.record.store_port) == (port, port)


_encoder = MessageEncoder(load_config())


@settings(max_examples=300, deadline=None)
@given(field=st.sampled_from(sorted(LIMITS)), value=st.integers(-2 ** 70, 2 ** 70),
       general=st.booleans())
def test_any_int_is_either_refused_or_packs_into_its_field(field, value, general):
    """The encoder refuses exactly the values outside a field's limits; what it accepts packs."""
    lo, hi = LIMITS[field]
    m = Message("t", b"x", properties={"p": "v"} if general else None, **{field: value})
    if lo <= value <= hi:
        p = _encoder.prepare(m)
        codec.HEAD[(False, False)].pack(p.length, codec.MAGIC_V1, p.crc, p.queue_id, p.flag, 0, 0,
                                        p.sys_flag, p.born_ts or 0, p.born_addr, p.born_port,
                                        p.store_ts or 0, p.store_addr, p.store_port, p.reconsume,
                                        p.prepared_offset, len(p.body))
    else:
        with pytest.raises(MessageRejected, match=field):
            _encoder.prepare(m)


def test_put_records_refuses_a_record_whose_store_time_an_index_file_cannot_name(tmp_path):
    """A copied record is checked like a put: its store time must fit an IndexFile name."""
    src = tmp_path / "src"
    with MessageStore(src, **SMALL) as ms:
        raw = record_bytes(ms, ms.put(Message("t", b"x", keys="k")).commitlog_offset)
    far = bytearray(raw)
    codec.PHYSICAL.pack_into(far, 56, 2 ** 62)  # STORETIMESTAMP of an IPv4/IPv4 record
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        ms.put_records([raw])
        ms.flush()
        files = _snapshot(root)
        with pytest.raises(MessageRejected, match=f"record 1: store_timestamp.*{2 ** 62}") as e:
            ms.put_records([raw, bytes(far)])
        assert e.value.index == 1
        with pytest.raises(MessageRejected, match="record 0: .*str"):
            ms.put_records(["not bytes"])
        assert _snapshot(root) == files
        assert ms.put_records([raw])[0].queue_offset == 1
    with MessageStore(root, **SMALL) as ms:
        assert sorted(r.queue_offset for r in ms.query("t", "k")) == [0, 1]
