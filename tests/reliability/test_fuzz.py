"""Fuzz the decoders: random bytes and mutated real records (tests/golden, written by RocketMQ).

Decoding may only succeed or raise the library's own errors (CorruptRecordError,
StoreFormatError, both ValueError subclasses naming the problem); never another exception.
Every decoder is linear in its input, so a hang would show as a stuck test, not a slow one.
"""
from __future__ import annotations

import struct
import tempfile
from pathlib import Path

from goldens import GOLDEN, GOLDEN_498
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketlake.store import codec
from rocketlake.store.checkpoint import Checkpoint
from rocketlake.store.codec import Record, decode_record
from rocketlake.store.errors import CorruptRecordError, StoreFormatError

FAST = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _golden_records() -> list[tuple[int, bytes]]:
    """Every record RocketMQ wrote into the golden CommitLogs: (address, raw bytes)."""
    out = []
    for path in [GOLDEN / "rocketmq-pr3535/store/commitlog/00000000000000000000",
                 *sorted((GOLDEN_498 / "store/commitlog").iterdir())]:
        data, start = path.read_bytes(), int(path.name)
        pos = 0
        while pos + 8 <= len(data):
            try:
                r = decode_record(data, pos, start)
            except CorruptRecordError:  # zeros: the end of the data
                break
            if not isinstance(r, Record):  # BLANK: the end of the file
                break
            out.append((start + pos, data[pos:pos + r.size]))
            pos += r.size
    return out


RECORDS = _golden_records()
assert len(RECORDS) == 47 + 400 and any(r[39] & 0x30 for _, r in RECORDS)  # IPv6 hosts too


def _decode(buf: bytes, pos: int = 0, address: int = 0) -> None:
    try:
        r = decode_record(buf, pos, address - pos, check_crc=True)
    except CorruptRecordError as e:
        assert str(e).startswith(f"offset {address}:")
        return
    assert isinstance(r, (Record, int))


@FAST
@given(st.binary(max_size=600), st.integers(0, 64))
def test_random_bytes(buf: bytes, pos: int) -> None:
    pos = min(pos, len(buf))
    _decode(buf, pos, pos)


@st.composite
def forged_heads(draw) -> bytes:
    """A v1 magic, a small TOTALSIZE, any host flags, a zero self offset and a small BODYLEN over
    random bytes, the buffer ending at or just after TOTALSIZE: the shapes that walk a decoder
    off the end of its buffer."""
    total = draw(st.integers(8, 160))
    buf = bytearray(draw(st.binary(min_size=total, max_size=total + 8)))
    struct.pack_into(">iI", buf, 0, total, 0xDAA320A7)
    fields = ((28, ">q", 0), (36, ">i", draw(st.sampled_from([0, 0x10, 0x20, 0x30]))),
              (84, ">i", draw(st.integers(-2, 40))))
    for at, fmt, value in fields:
        if at + struct.calcsize(fmt) <= len(buf):
            struct.pack_into(fmt, buf, at, value)
    return bytes(buf)


@FAST
@given(forged_heads())
def test_forged_record_heads(buf: bytes) -> None:
    _decode(buf)


@st.composite
def mutated(draw) -> tuple[int, bytes]:
    address, raw = draw(st.sampled_from(RECORDS))
    rec = bytearray(raw)
    kind = draw(st.sampled_from(["flip", "bytes", "field", "truncate", "extend"]))
    if kind == "flip":
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(rec) - 1))
            rec[i] ^= 1 << draw(st.integers(0, 7))
    elif kind == "bytes":
        i = draw(st.integers(0, len(rec) - 1))
        chunk = draw(st.binary(min_size=1, max_size=16))
        rec[i:i + len(chunk)] = chunk
    elif kind == "field":  # length and flag fields set to extreme values
        at, fmt = draw(st.sampled_from([(0, ">i"), (36, ">i"), (84, ">i"), (12, ">i"), (28, ">q")]))
        value = draw(st.sampled_from([0, 1, -1, 90, 91, 2 ** 31 - 1, -2 ** 31, 0x30, 0x10, 0x20]))
        struct.pack_into(fmt, rec, at, value)
    elif kind == "truncate":
        del rec[draw(st.integers(0, len(rec) - 1)):]
    else:
        rec += draw(st.binary(max_size=32))
    return address, bytes(rec)


@FAST
@given(mutated())
def test_mutated_golden_records(case: tuple[int, bytes]) -> None:
    address, buf = case
    _decode(buf, 0, address)


@FAST
@given(st.binary(max_size=80))
def test_properties_never_raise(raw: bytes) -> None:
    props = codec.string_to_properties(raw.decode("utf-8", "replace"))
    assert all(k and v and "\x01" not in k for k, v in props.items())


@FAST
@given(st.text(max_size=70))
def test_msg_id_decoder(text: str) -> None:
    try:
        host, offset = codec.decode_msg_id(text)
    except ValueError:
        return
    assert codec.create_msg_id(*codec.parse_host(host), offset) == text.upper()


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=5000))
def test_checkpoint_loader(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "checkpoint"
        path.write_bytes(raw)
        try:
            cp = Checkpoint(path)
        except StoreFormatError as e:
            assert "checkpoint is" in str(e) and len(raw) != 4096
            return
        assert (cp.physic, cp.logics, cp.index) == struct.unpack_from(">qqq", raw)
