"""CommitLog records -> Arrow columns, built by compiled kernels straight from the file's bytes.

Pure numpy + pyarrow + numba, no Spark: the ``rocketmq`` data source calls :func:`walk_range` and
:func:`message_columns`, the rebuild's scan tasks :func:`walk_range` and :func:`find_record_start`.
Records are decoded by ``store.kernels.records.walk`` (``codec.decode_record``'s rules) and their
property values found by ``store.kernels.dispatch``; every string column is a copy of byte spans of
the file into one Arrow data buffer (no Python object per record). Only the columns asked for are
built.

A range ``[lo, hi)`` owns the records that *start* in it: the walk begins at the first record start
in it (``kernels.records.find_start``) and reads a record running past ``hi`` whole.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rocketlake.store import codec
from rocketlake.store.compression import inflate
from rocketlake.store.kernels import dispatch as kd
from rocketlake.store.kernels import hashing as kh
from rocketlake.store.kernels import kernel
from rocketlake.store.kernels import records as kr
from rocketlake.store.record_walk import find_record_start as find_record_start  # its home was here

Buffer = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]

_INT32_MAX = (1 << 31) - 1
STRING = pa.string()
KEYS_TYPE = pa.list_(pa.string())
PROPERTIES_MAP = pa.map_(pa.string(), pa.string())
_BLANK = np.frombuffer((codec.BLANK_MAGIC & 0xFFFFFFFF).to_bytes(4, "big"), dtype=np.uint8)
_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
#: rows walked per kernel call (each row is NFIELDS int64)
WALK_ROWS = 1 << 15


@kernel
def _copy_spans(buf: Buffer, starts: I64, offsets: I64, out: Buffer) -> None:
    """``out[offsets[i]:offsets[i+1]] = buf[starts[i]:...]`` for every span."""
    for i in range(starts.size):
        s = starts[i]
        o = offsets[i]
        for k in range(offsets[i + 1] - o):
            out[o + k] = buf[s + k]


@kernel
def _key_tokens(buf: Buffer, starts: I64, lens: I64, counts: I64, tstart: I64, tlen: I64) -> int:
    """Non-empty space-separated tokens of each span (``codec.iter_keys``): ``counts[i]`` per
    span, their (start, length) flat in ``tstart`` / ``tlen``; returns how many."""
    k = 0
    for i in range(starts.size):
        p = starts[i]
        e = p + lens[i]
        c = 0
        while p < e:
            t, p = kh.next_token(buf, p, e)
            if p > t:
                tstart[k] = t
                tlen[k] = p - t
                k += 1
                c += 1
        counts[i] = c
    return k


@kernel
def _property_entries(buf: Buffer, starts: I64, lens: I64, counts: I64, name_start: I64,
                      name_len: I64, value_start: I64, value_len: I64) -> int:
    """Name / value spans of each properties string as ``codec.string_to_properties`` reads it:
    segments split at \\x02, name and value at the segment's first \\x01, segments with no \\x01 or
    an empty name or value dropped, a repeated name keeps its first place and its last value."""
    k = 0
    for i in range(starts.size):
        first = k
        p = starts[i]
        end = p + lens[i]
        while p < end:
            sep, seg = kd.next_property(buf, p, end)
            if p < sep < seg - 1:
                n = sep - p
                dup = -1
                for j in range(first, k):
                    if name_len[j] == n:
                        same = True
                        for b in range(n):
                            if buf[name_start[j] + b] != buf[p + b]:
                                same = False
                                break
                        if same:
                            dup = j
                            break
                if dup < 0:
                    dup = k
                    name_start[k] = p
                    name_len[k] = n
                    k += 1
                value_start[dup] = sep + 1
                value_len[dup] = seg - sep - 1
            p = seg + 1
        counts[i] = k - first
    return k


@kernel
def _put_decimal(out: Buffer, o: int, v: int) -> int:
    if v < 0:
        out[o] = 45  # '-'
        o += 1
        v = -v
    digits = 1
    t = v
    while t >= 10:
        t //= 10
        digits += 1
    for d in range(digits - 1, -1, -1):
        out[o + d] = 48 + v % 10
        v //= 10
    return o + digits


@kernel
def _format_hosts(buf: Buffer, addr: I64, v6: npt.NDArray[np.bool_], port: I64, out: Buffer,
                  offsets: I64) -> None:
    """``codec.format_host`` of each (address at ``buf[addr[i]]``, port): ``a.b.c.d:port`` or
    ``[g:g:g:g:g:g:g:g]:port`` (eight lowercase hex groups, uncompressed). ``out`` holds 56 bytes
    a row."""
    o = 0
    for i in range(addr.size):
        offsets[i] = o
        a = addr[i]
        if v6[i]:
            out[o] = 91  # '['
            o += 1
            for g in range(8):
                if g:
                    out[o] = 58
                    o += 1
                v = (np.int64(buf[a + 2 * g]) << 8) | np.int64(buf[a + 2 * g + 1])
                started = False
                for sh in range(12, -1, -4):
                    d = (v >> sh) & 0xF
                    if d or started or sh == 0:
                        out[o] = 48 + d if d < 10 else 87 + d
                        o += 1
                        started = True
            out[o] = 93  # ']'
            o += 1
        else:
            for b in range(4):
                if b:
                    out[o] = 46
                    o += 1
                o = _put_decimal(out, o, kr.byte(buf, a + b))
        out[o] = 58  # ':'
        o += 1
        o = _put_decimal(out, o, port[i])
    offsets[addr.size] = o


@kernel
def _msg_ids(buf: Buffer, addr: I64, v6: npt.NDArray[np.bool_], port: I64, offset: I64,
             out: Buffer, offsets: I64) -> None:
    """``codec.create_msg_id``: uppercase hex of store address + port (4 bytes) + offset (8)."""
    o = 0
    for i in range(addr.size):
        offsets[i] = o
        n = 16 if v6[i] else 4
        for b in range(n + 12):
            if b < n:
                v = np.int64(buf[addr[i] + b])
            elif b < n + 4:
                v = (port[i] >> (8 * (n + 3 - b))) & 0xFF
            else:
                v = (offset[i] >> (8 * (n + 11 - b))) & 0xFF
            out[o] = _HEX[v >> 4]
            out[o + 1] = _HEX[v & 0xF]
            o += 2
    offsets[addr.size] = o


# --- Arrow arrays from spans ------------------------------------------------------------------------
def _offsets_buffer(offsets: I64) -> pa.Buffer:
    if offsets.size and offsets[-1] > _INT32_MAX:
        raise ValueError(f"{offsets[-1]} bytes of strings in one batch: over Arrow's 2 GiB")
    return pa.py_buffer(offsets.astype(np.int32))


def _validity(valid: npt.NDArray[np.bool_] | None) -> tuple[pa.Buffer | None, int]:
    if valid is None or valid.all():
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), int(valid.size - valid.sum())


def span_array(buf: Buffer, starts: I64, lens: I64, kind: pa.DataType = STRING,
               valid: npt.NDArray[np.bool_] | None = None) -> pa.Array:
    """The byte spans as one Arrow string / binary array (null where ``valid`` is False). Strings
    must be valid UTF-8 (the walk checked topic and properties, of which every span is a part)."""
    lens = np.where(starts < 0, 0, lens)
    offsets = np.zeros(starts.size + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    _copy_spans(buf, starts, offsets, data)
    bitmap, nulls = _validity(valid)
    return pa.Array.from_buffers(kind, starts.size, [bitmap, _offsets_buffer(offsets),
                                                     pa.py_buffer(data)], null_count=nulls)


def _list_offsets(counts: I64) -> npt.NDArray[np.int32]:
    offsets = np.zeros(counts.size + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return offsets


def keys_array(buf: Buffer, span: I64, kind: pa.DataType = KEYS_TYPE) -> pa.Array:
    """KEYS values (``span``: (n, 2) start, length; start -1 when absent) -> lists of tokens."""
    starts, lens = np.ascontiguousarray(span[:, 0]), np.ascontiguousarray(span[:, 1])
    cap = int(np.maximum(lens, 0).sum()) // 2 + starts.size + 1
    counts = np.empty(starts.size, dtype=np.int64)
    ts, tl = np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64)
    k = _key_tokens(buf, starts, lens, counts, ts, tl)
    tokens = span_array(buf, ts[:k], tl[:k], kind.value_type)
    return pa.ListArray.from_arrays(pa.array(_list_offsets(counts)), tokens, type=kind)


def properties_map(buf: Buffer, starts: I64, lens: I64,
                   kind: pa.DataType = PROPERTIES_MAP) -> pa.Array:
    """Properties strings -> maps (``codec.string_to_properties``)."""
    cap = int(lens.sum()) // 3 + starts.size + 1
    counts = np.empty(starts.size, dtype=np.int64)
    ns, nl, vs, vl = (np.empty(cap, dtype=np.int64) for _ in range(4))
    k = _property_entries(buf, starts, lens, counts, ns, nl, vs, vl)
    return pa.MapArray.from_arrays(pa.array(_list_offsets(counts)),
                                   span_array(buf, ns[:k], nl[:k], kind.key_type),
                                   span_array(buf, vs[:k], vl[:k], kind.item_type), type=kind)


def hosts_array(buf: Buffer, raw: I64, side: str) -> pa.Array:
    """``born_host`` / ``store_host`` strings of walked rows."""
    addr_col, port_col, flag = ((kr.BORN_ADDR, kr.BORN_PORT, codec.FLAG_BORNHOST_V6) if side == "born"
                                else (kr.STORE_ADDR, kr.STORE_PORT, codec.FLAG_STOREHOST_V6))
    n = raw.shape[0]
    out = np.empty(n * 56, dtype=np.uint8)
    offsets = np.empty(n + 1, dtype=np.int64)
    _format_hosts(buf, np.ascontiguousarray(raw[:, addr_col]), (raw[:, kr.SYS_FLAG] & flag) != 0,
                  np.ascontiguousarray(raw[:, port_col]), out, offsets)
    return pa.Array.from_buffers(pa.string(), n, [None, _offsets_buffer(offsets),
                                                  pa.py_buffer(out[:offsets[-1]])])


def msg_id_array(buf: Buffer, raw: I64) -> pa.Array:
    """Offset msgIds of walked rows (``codec.create_msg_id``)."""
    n = raw.shape[0]
    v6 = (raw[:, kr.SYS_FLAG] & codec.FLAG_STOREHOST_V6) != 0
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.where(v6, 56, 32), out=offsets[1:])
    out = np.empty(int(offsets[-1]), dtype=np.uint8)
    _msg_ids(buf, np.ascontiguousarray(raw[:, kr.STORE_ADDR]), v6,
             np.ascontiguousarray(raw[:, kr.STORE_PORT]), np.ascontiguousarray(raw[:, kr.OFFSET]),
             out, offsets)
    return pa.Array.from_buffers(pa.string(), n, [None, _offsets_buffer(offsets), pa.py_buffer(out)])


@kernel
def _span_ints(buf: Buffer, starts: I64, lens: I64, out: I64, valid: npt.NDArray[np.bool_]) -> None:
    """``kernels.dispatch.java_int`` of each span (``valid`` False where absent or not a number)."""
    for i in range(starts.size):
        ok, v = False, 0
        if starts[i] >= 0:
            ok, v = kd.java_int(buf, starts[i], lens[i])
        out[i] = v
        valid[i] = ok


def topic_mask(buf: Buffer, raw: I64, rule: Callable[[str], bool]) -> npt.NDArray[np.bool_]:
    """``rule(topic)`` of each walked row, called once per distinct topic
    (``kernels.dispatch.topic_ids``)."""
    if not raw.shape[0]:
        return np.zeros(0, dtype=np.bool_)
    ids, first = kd.topic_ids(buf, raw)
    starts, lens = raw[first, kr.TOPIC_START], raw[first, kr.TOPIC_LEN]
    verdicts = [rule(bytes(buf[s:s + n]).decode()) for s, n in zip(starts, lens)]
    return np.array(verdicts, dtype=np.bool_)[ids]


def _span_strings(buf: Buffer, span: I64, valid: npt.NDArray[np.bool_] | None = None) -> pa.Array:
    """Property values (``span``: (n, 2) start, length; start -1 when absent) as strings, null
    where absent or not ``valid``."""
    starts = np.ascontiguousarray(span[:, 0])
    present = starts >= 0 if valid is None else (starts >= 0) & valid
    return span_array(buf, np.where(present, starts, -1), np.ascontiguousarray(span[:, 1]),
                      valid=present)


def _span_int_array(buf: Buffer, span: I64, valid: npt.NDArray[np.bool_]) -> pa.Array:
    """Property values as Java ints (int32), null where absent, not a number or not ``valid``."""
    n = span.shape[0]
    out, ok = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.bool_)
    _span_ints(buf, np.ascontiguousarray(span[:, 0]), np.ascontiguousarray(span[:, 1]), out, ok)
    ok &= valid
    return pa.array(out.astype(np.int32), type=pa.int32(), mask=None if ok.all() else ~ok)


#: epoch-ms columns also given as TIMESTAMPs (microseconds, UTC)
TIME_COLUMNS = {"store_time": kr.STORE_TS, "born_time": kr.BORN_TS}
TIMESTAMP = pa.timestamp("us", tz="UTC")
#: the largest epoch ms whose microseconds fit a long
_MAX_MS = ((1 << 63) - 1) // 1000


@cache
def _transaction_names() -> pa.Array:
    """``codec.TRANSACTION_NAMES`` indexed by ``sys_flag & TRANSACTION_MASK``; built on first use:
    ``pa.array`` imports pandas (about a second), which the rebuild's tasks never need."""
    return pa.array([codec.TRANSACTION_NAMES.get(t) for t in range(codec.TRANSACTION_MASK + 1)],
                    STRING)


#: message columns that need the property spans (``kernels.dispatch.property_spans``)
_NEEDS_SPANS = frozenset({"tags_code", "keys", "uniq_key", "tags", "real_topic", "real_queue_id",
                          "delay_level"})
_INT_COLUMNS = {
    "commitlog_offset": (kr.OFFSET, pa.int64()), "size": (kr.SIZE, pa.int32()),
    "queue_id": (kr.QUEUE_ID, pa.int32()), "queue_offset": (kr.QUEUE_OFFSET, pa.int64()),
    "sys_flag": (kr.SYS_FLAG, pa.int32()), "flag": (kr.FLAG, pa.int32()),
    "born_timestamp": (kr.BORN_TS, pa.int64()), "store_timestamp": (kr.STORE_TS, pa.int64()),
    "body_crc": (kr.BODY_CRC, pa.int32()),
    "reconsume_times": (kr.RECONSUME, pa.int32()),
    "prepared_transaction_offset": (kr.PREPARED, pa.int64()),
}


def message_columns(buf: Buffer, raw: I64, names: Collection[str], types: dict[str, pa.DataType],
                    delay_levels_ms: Sequence[int] = codec.DELAY_LEVELS_MS,
                    inflate_bodies: bool = False) -> dict[str, pa.Array]:
    """The columns ``names`` of walked rows ``raw`` (``kernels.records`` layout over ``buf``), each
    of Arrow type ``types[name]`` where the name allows a choice (``properties``: string or map).
    ``body`` is the stored body, or with ``inflate_bodies`` a compressed one inflated
    (``store.compression.inflate``; CorruptRecordError naming the offset when it cannot be).

    Columns: the head's integer fields, ``magic`` (unsigned), ``topic``, ``tags_code``, ``keys``,
    ``uniq_key``, ``properties``, ``body``, ``born_host``, ``store_host``, ``msg_id``;
    ``store_time`` / ``born_time`` (TIMESTAMP of the epoch ms; null past a long's microseconds),
    ``tags`` (TAGS, null when absent), ``real_topic`` / ``real_queue_id`` (REAL_TOPIC / REAL_QID of
    a ``codec.DELAY_TOPICS`` copy, else null), ``delay_level`` (DELAY of a SCHEDULE_TOPIC_XXXX
    copy, else null), ``transaction_state`` (``codec.TRANSACTION_NAMES`` of the SYSFLAG),
    ``compressed`` (the SYSFLAG's compressed bit: the body is stored compressed)."""
    cols: dict[str, pa.Array] = {}
    spans = None
    if _NEEDS_SPANS & set(names):
        spans = np.empty((raw.shape[0], len(kd.NAMES), 2), dtype=np.int64)
        kd.property_spans(buf, raw, spans)
    delay_copy = None
    if {"real_topic", "real_queue_id"} & set(names):
        delay_copy = topic_mask(buf, raw, codec.DELAY_TOPICS.__contains__)
    for name in names:
        if name in _INT_COLUMNS:
            col, kind = _INT_COLUMNS[name]
            cols[name] = pa.array(raw[:, col].astype(kind.to_pandas_dtype()), type=kind)
        elif name in TIME_COLUMNS:
            ms = raw[:, TIME_COLUMNS[name]]
            fits = np.abs(ms) <= _MAX_MS
            cols[name] = pa.array(np.where(fits, ms, 0) * 1000, type=types.get(name, TIMESTAMP),
                                  mask=None if fits.all() else ~fits)
        elif name == "transaction_state":
            cols[name] = _transaction_names().take(pa.array(raw[:, kr.SYS_FLAG] & codec.TRANSACTION_MASK))
        elif name == "tags":
            assert spans is not None
            cols[name] = _span_strings(buf, spans[:, kd.TAGS])
        elif name == "real_topic":
            assert spans is not None and delay_copy is not None
            cols[name] = _span_strings(buf, spans[:, kd.REAL_TOPIC], delay_copy)
        elif name == "real_queue_id":
            assert spans is not None and delay_copy is not None
            cols[name] = _span_int_array(buf, spans[:, kd.REAL_QID], delay_copy)
        elif name == "delay_level":
            assert spans is not None
            cols[name] = _span_int_array(buf, spans[:, kd.DELAY],
                                         topic_mask(buf, raw, codec.SCHEDULE_TOPIC.__eq__))
        elif name == "magic":
            cols[name] = pa.array(raw[:, kr.MAGIC] & 0xFFFFFFFF, type=pa.int64())
        elif name == "topic":
            cols[name] = span_array(buf, raw[:, kr.TOPIC_START], raw[:, kr.TOPIC_LEN])
        elif name == "properties" and pa.types.is_map(types.get(name, pa.string())):
            cols[name] = properties_map(buf, np.ascontiguousarray(raw[:, kr.PROPS_START]),
                                        np.ascontiguousarray(raw[:, kr.PROPS_LEN]), types[name])
        elif name == "properties":
            cols[name] = span_array(buf, raw[:, kr.PROPS_START], raw[:, kr.PROPS_LEN])
        elif name == "body":
            body = span_array(buf, raw[:, kr.BODY_START], raw[:, kr.BODY_LEN], pa.binary())
            cols[name] = _inflated(body, raw) if inflate_bodies else body
        elif name == "compressed":
            cols[name] = pa.array(raw[:, kr.SYS_FLAG] & codec.FLAG_COMPRESSED != 0, type=pa.bool_())
        elif name == "tags_code":
            assert spans is not None
            no_keys = spans.copy()  # tagsCode only: no index key is hashed
            no_keys[:, [kd.KEYS, kd.UNIQ_KEY]] = (-1, 0)
            tags = np.empty(raw.shape[0], dtype=np.int64)
            kd.dispatch_columns(buf, raw, no_keys, np.asarray(delay_levels_ms, dtype=np.int64), tags,
                                np.empty(raw.shape[0], dtype=np.bool_),
                                np.empty(raw.shape[0], dtype=np.int64))
            cols[name] = pa.array(tags, type=pa.int64())
        elif name == "keys":
            assert spans is not None
            cols[name] = keys_array(buf, spans[:, kd.KEYS], types.get(name, pa.list_(pa.string())))
        elif name == "uniq_key":
            assert spans is not None
            cols[name] = _span_strings(buf, spans[:, kd.UNIQ_KEY])
        elif name in ("born_host", "store_host"):
            cols[name] = hosts_array(buf, raw, name.split("_")[0])
        elif name == "msg_id":
            cols[name] = msg_id_array(buf, raw)
        else:
            raise ValueError(f"no record column {name!r}")
    return cols


def _inflated(body: pa.Array, raw: I64) -> pa.Array:
    """``body`` (the stored bodies of rows ``raw``) with each compressed one inflated: a Python
    call per compressed row only (clients compress bodies over 4 KiB: few rows); the rows between
    them are copied as slices (10x faster than ``pyarrow.compute.replace_with_mask``)."""
    at = np.flatnonzero(raw[:, kr.SYS_FLAG] & codec.FLAG_COMPRESSED).tolist()
    if not at:
        return body
    inflated = pa.array([inflate(body[i].as_py(), int(raw[i, kr.SYS_FLAG]), int(raw[i, kr.OFFSET]))
                         for i in at], pa.binary())
    pieces, prev = [], 0
    for j, i in enumerate(at):
        pieces += [body.slice(prev, i - prev), inflated.slice(j, 1)]
        prev = i + 1
    return pa.concat_arrays([*pieces, body.slice(prev)])


# --- walking a range --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stretch:
    """One walk call's result: valid rows, then where (buffer position) and why the walk stopped
    (``kernels.records`` status; ``error`` says what is wrong when it is damage)."""
    raw: I64
    end: int
    status: int
    error: str | None


def walk_range(buf: Buffer, base: int, pos: int, hi: int, check_crc: bool,
               max_bytes: int = 64 << 20, max_rows: int = WALK_ROWS) -> Iterator[Stretch]:
    """Walk records from ``pos`` while they start before ``hi``, in stretches of at most
    ``max_rows`` rows and ``max_bytes`` (plus one record). The last stretch says why the walk
    ended: ``LIMIT`` (reached ``hi``), ``BLANK``, ``ZEROS`` or damage."""
    detail = np.zeros(3, dtype=np.int64)
    while True:
        out = np.empty((max_rows, kr.NFIELDS), dtype=np.int64)
        limit = min(hi, pos + max_bytes)
        n, end, status = kr.walk(buf, base, pos, limit, check_crc, False, out, detail)
        more = status == kr.LIMIT and end < hi
        error = None if status in (kr.LIMIT, kr.BLANK, kr.ZEROS) else kr.describe(
            status, base + end, detail, buf)
        yield Stretch(out[:n], end, kr.LIMIT if more else status, error)
        if not more:
            return
        pos = end


def blank_at(buf: Buffer, pos: int) -> bool:
    """Whether a BLANK (end-of-file filler) record starts at ``pos``."""
    return pos + 8 <= buf.size and bool((buf[pos + 4:pos + 8] == _BLANK).all())
