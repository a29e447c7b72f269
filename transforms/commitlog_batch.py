"""Vectorised parser of one byte range of a CommitLog file into an Arrow record batch.

Pure numpy + pyarrow, no Spark: the scan's ``mapInArrow`` tasks call :func:`parse_range`.
Layouts and dispatch rules come from ``store.codec`` / ``store.dispatch`` (docs/FORMAT.md §2-§5).

A range ``[lo, hi)`` owns the records that *start* in it. Record starts are found without
walking: every position whose magic (v1 or v2) sits at ``p+4`` and whose PHYSICALOFFSET field at
``p+28`` equals ``p``'s own address. A record may run past ``hi``; it is read whole. Each row
carries what the driver needs to find the end of valid data across ranges (``next_offset``,
``break_at``, ``break_reason``, ``crc_ok``): see ``transforms.commitlog_scan``.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketlake.store import codec, dispatch

_U32 = 0xFFFFFFFF
_MAGIC_V1 = (codec.MAGIC_V1 & _U32).to_bytes(4, "big")
_MAGIC_V2 = (codec.MAGIC_V2 & _U32).to_bytes(4, "big")
_BLANK = (codec.BLANK_MAGIC & _U32).to_bytes(4, "big")
_MIN_HEAD = min(dt.itemsize for dt in codec.HEAD_DTYPE.values())
_CHUNK = 8192  # records per head gather (bounds the index matrix)

#: Columns of a parsed batch, in order (``body`` only when asked for).
MESSAGE_FIELDS: list[pa.Field] = [
    pa.field("commitlog_offset", pa.int64(), False),
    pa.field("size", pa.int32(), False),
    pa.field("topic", pa.string()),
    pa.field("queue_id", pa.int32(), False),
    pa.field("queue_offset", pa.int64(), False),
    pa.field("sys_flag", pa.int32(), False),
    pa.field("store_timestamp", pa.int64(), False),
    pa.field("born_timestamp", pa.int64(), False),
    pa.field("tags_code", pa.int64(), False),
    pa.field("keys", pa.list_(pa.string())),
    pa.field("uniq_key", pa.string()),
    pa.field("properties", pa.string()),
]
#: Bookkeeping columns for the end-of-valid-data check across ranges.
CHAIN_FIELDS: list[pa.Field] = [
    pa.field("range_start", pa.int64(), False),
    pa.field("next_offset", pa.int64(), False),
    pa.field("break_at", pa.int64()),
    pa.field("break_reason", pa.string()),
    pa.field("crc_ok", pa.bool_(), False),
]
BODY_FIELD = pa.field("body", pa.binary())
#: The rest of the record head, for consumers that keep whole records (the Delta archive).
FULL_HEAD_FIELDS: list[pa.Field] = [
    pa.field("magic", pa.int64(), False),          # unsigned, as `dump commitlog` prints it
    pa.field("body_crc", pa.int32(), False),
    pa.field("flag", pa.int32(), False),
    pa.field("born_host", pa.string()),
    pa.field("store_host", pa.string()),
    pa.field("store_addr", pa.binary()),
    pa.field("store_port", pa.int32(), False),
    pa.field("reconsume_times", pa.int32(), False),
    pa.field("prepared_transaction_offset", pa.int64(), False),
]


def batch_schema(with_body: bool = False, full_head: bool = False) -> pa.Schema:
    """The Arrow schema :func:`parse_range` returns."""
    return pa.schema(MESSAGE_FIELDS + CHAIN_FIELDS + ([BODY_FIELD] if with_body else [])
                     + (FULL_HEAD_FIELDS if full_head else []))


def _be(buf: np.ndarray, pos: np.ndarray, dtype: str) -> np.ndarray:
    """Big-endian integers of ``dtype`` read at byte positions ``pos`` (clipped into ``buf``)."""
    n = np.dtype(dtype).itemsize
    pos = np.clip(pos, 0, buf.size - n)
    return buf[pos[:, None] + np.arange(n)].view(dtype).ravel().astype(np.int64)


def _gather(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate ``buf[s:s+l]`` slices: (int32 Arrow offsets, bytes)."""
    offsets = np.zeros(starts.size + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    idx = np.repeat(starts - offsets[:-1], lens) + np.arange(offsets[-1])
    return offsets, buf[idx]


def _strings(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray, kind: pa.DataType) -> pa.Array:
    offsets, data = _gather(buf, starts, lens)
    if offsets[-1] > np.iinfo(np.int32).max:
        kind = pa.large_binary() if kind == pa.binary() else pa.large_string()
    else:
        offsets = offsets.astype(np.int32)
    return pa.Array.from_buffers(kind, starts.size, [None, pa.py_buffer(offsets),
                                                    pa.py_buffer(data)])


def _utf8_ok(arr: pa.Array) -> np.ndarray:
    """Per-row UTF-8 validity (fast path: the whole array at once)."""
    try:
        arr.validate(full=True)
        return np.ones(len(arr), dtype=bool)
    except pa.ArrowInvalid:
        raw = arr.cast(pa.binary()).to_pylist()
        out = np.ones(len(arr), dtype=bool)
        for i, b in enumerate(raw):
            try:
                b.decode()
            except UnicodeDecodeError:
                out[i] = False
        return out


def find_record_starts(buf: np.ndarray, file_start: int, lo: int, hi: int) -> np.ndarray:
    """File positions ``p`` in ``[lo, hi)`` with a record magic at ``p+4`` and PHYSICALOFFSET
    at ``p+28`` equal to ``file_start + p``."""
    hi = min(hi, buf.size - _MIN_HEAD)
    if hi <= lo:
        return np.zeros(0, dtype=np.int64)
    c = np.flatnonzero(buf[lo + 4:hi + 4] == _MAGIC_V1[0]).astype(np.int64) + lo
    m = (buf[c + 5] == _MAGIC_V1[1]) & (buf[c + 6] == _MAGIC_V1[2]) & (
        (buf[c + 7] == _MAGIC_V1[3]) | (buf[c + 7] == _MAGIC_V2[3]))
    c = c[m]
    return c[_be(buf, c + codec.OFF_PHYSICAL_OFFSET, ">i8") == file_start + c]


_FULL_HEAD_INTS = ("flag", "born_port", "store_port", "reconsume_times", "prepared_offset")


def _heads(buf: np.ndarray, c: np.ndarray, full: bool = False) -> dict[str, np.ndarray]:
    """Fixed head fields of the records at ``c`` (any mix of IPv4/IPv6 hosts), plus head size;
    ``full`` adds the remaining fields, host addresses as object arrays of bytes."""
    names = ("total_size", "magic", "body_crc", "queue_id", "queue_offset", "sys_flag",
             "born_timestamp", "store_timestamp", "body_len") + (_FULL_HEAD_INTS if full else ())
    out = {n: np.zeros(c.size, dtype=np.int64) for n in names + ("head_size",)}
    if full:
        out["born_addr"] = np.empty(c.size, dtype=object)
        out["store_addr"] = np.empty(c.size, dtype=object)
    sys_flag = _be(buf, c + codec.OFF_SYSFLAG, ">i4")
    born6 = (sys_flag & codec.FLAG_BORNHOST_V6) != 0
    store6 = (sys_flag & codec.FLAG_STOREHOST_V6) != 0
    for (b6, s6), dt in codec.HEAD_DTYPE.items():
        sel = np.flatnonzero((born6 == b6) & (store6 == s6) & (c + dt.itemsize <= buf.size))
        for k in range(0, sel.size, _CHUNK):
            part = sel[k:k + _CHUNK]
            rows = buf[c[part][:, None] + np.arange(dt.itemsize)].view(dt).ravel()
            for n in names:
                out[n][part] = rows[n]
            out["head_size"][part] = dt.itemsize
            if full:
                for n in ("born_addr", "store_addr"):
                    raw, w = rows[n].tobytes(), rows.dtype[n].itemsize
                    out[n][part] = [raw[i:i + w] for i in range(0, len(raw), w)]
    return out


def parse_range(buf: np.ndarray, file_start: int, lo: int, hi: int, check_crc: bool = True,
                with_body: bool = False, delay_levels_ms: Sequence[int] = codec.DELAY_LEVELS_MS,
                full_head: bool = False) -> pa.RecordBatch:
    """Parse the records starting in ``[lo, hi)`` of one CommitLog file (``buf``: its bytes).

    Returns one row per structurally valid record (see :func:`batch_schema`). A row's
    ``next_offset`` is where the next record should start (the next file after a BLANK);
    ``break_at`` is set when valid data provably ends at or right after this row: at the row
    itself for a body CRC mismatch, else at ``next_offset`` when no valid record starts there.
    """
    size = buf.size
    c = find_record_starts(buf, file_start, lo, hi)
    h = _heads(buf, c, full_head)
    total, body_len = h["total_size"], h["body_len"]
    rec_end = c + total
    body_start = c + h["head_size"]
    body_end = body_start + body_len
    v2 = h["magic"] == codec.MAGIC_V2
    tl1, tl2 = codec.TOPIC_LENGTH[codec.MAGIC_V1], codec.TOPIC_LENGTH[codec.MAGIC_V2]
    topic_len = np.where(v2, _be(buf, body_end, tl2.format), _be(buf, body_end, tl1.format))
    topic_start = body_end + np.where(v2, tl2.size, tl1.size)
    props_len_at = topic_start + topic_len
    props_len = _be(buf, props_len_at, ">i2")
    props_start = props_len_at + 2
    ok = ((h["head_size"] > 0) & (total >= codec.record_length(0, 0, 0, 0)) & (rec_end <= size)
          & (body_len >= 0) & (topic_len >= 0) & (props_len_at + 2 <= rec_end)
          & (props_len >= 0) & (props_start + props_len == rec_end))
    # A candidate inside an earlier valid record is body bytes, not a record.
    reach = np.maximum.accumulate(np.where(ok, rec_end, 0)) if c.size else c
    inside = np.zeros(c.size, dtype=bool)
    inside[1:] = reach[:-1] > c[1:]
    keep = ~inside
    c, ok, h = c[keep], ok[keep], {k: v[keep] for k, v in h.items()}
    rec_end, body_start, body_len = rec_end[keep], body_start[keep], body_len[keep]
    topic_start, topic_len = topic_start[keep], topic_len[keep]
    props_start, props_len = props_start[keep], props_len[keep]

    topic = _strings(buf, topic_start, np.where(ok, topic_len, 0), pa.string())
    props = _strings(buf, props_start, np.where(ok, props_len, 0), pa.string())
    ok &= _utf8_ok(topic) & _utf8_ok(props)

    # Chain: a valid record continues at the next valid candidate, or at the next file after BLANK.
    n = c.size
    nxt_valid = np.zeros(n, dtype=bool)
    if n > 1:
        nxt_valid[:-1] = (c[1:] == rec_end[:-1]) & ok[1:]
    at = np.clip(rec_end, 0, size - 8)
    blank = (rec_end + 8 <= size) & (_be(buf, at + codec.OFF_MAGIC, ">i4") == codec.BLANK_MAGIC)
    next_offset = np.where(blank, size, rec_end)
    open_end = ~nxt_valid & ~blank & (rec_end < hi)   # valid data ends right after this record
    zeros = ~buf[at[:, None] + np.arange(8)].any(axis=1) if n else np.zeros(0, dtype=bool)

    crc_ok = np.ones(n, dtype=bool)
    if check_crc:
        mv = buf.data
        crc = h["body_crc"]
        for i in np.flatnonzero(ok).tolist():
            s, ln = int(body_start[i]), int(body_len[i])
            crc_ok[i] = codec.body_crc(mv[s:s + ln]) == crc[i]

    rows = np.flatnonzero(ok)
    break_at = np.full(n, -1, dtype=np.int64)
    reason = np.full(n, None, dtype=object)
    ends = open_end & ok
    break_at[ends] = file_start + rec_end[ends]
    for i in np.flatnonzero(ends & ~zeros).tolist():
        reason[i] = f"offset {file_start + int(rec_end[i])}: no valid record starts here"
    bad = ok & ~crc_ok
    break_at[bad] = file_start + c[bad]
    for i in np.flatnonzero(bad).tolist():
        reason[i] = f"offset {file_start + int(c[i])}: body CRC mismatch"

    topic, props = topic.take(rows), props.take(rows)
    ts = h["store_timestamp"][rows]
    tags = _property(props, codec.PROPERTY_TAGS)
    delay = _property(props, codec.PROPERTY_DELAY)
    tags_code = dispatch.cq_tags_code_many(
        pc.equal(topic, codec.SCHEDULE_TOPIC).to_numpy(zero_copy_only=False),
        tags.to_pylist(), delay.to_pylist(), ts, tuple(delay_levels_ms))
    cols = {
        "commitlog_offset": file_start + c[rows],
        "size": h["total_size"][rows].astype(np.int32),
        "topic": topic,
        "queue_id": h["queue_id"][rows].astype(np.int32),
        "queue_offset": h["queue_offset"][rows],
        "sys_flag": h["sys_flag"][rows].astype(np.int32),
        "store_timestamp": ts,
        "born_timestamp": h["born_timestamp"][rows],
        "tags_code": tags_code,
        "keys": _split_keys(_property(props, codec.PROPERTY_KEYS)),
        "uniq_key": _property(props, codec.PROPERTY_UNIQ_KEY),
        "properties": props,
        "range_start": np.full(rows.size, file_start + lo, dtype=np.int64),
        "next_offset": file_start + next_offset[rows],
        "break_at": pa.array(break_at[rows], mask=break_at[rows] < 0),
        "break_reason": pa.array(reason[rows], type=pa.string()),
        "crc_ok": crc_ok[rows],
    }
    if with_body:
        cols["body"] = _strings(buf, body_start[rows], body_len[rows], pa.binary())
    if full_head:
        hosts = {side: [codec.format_host(a, int(p)) for a, p in
                        zip(h[f"{side}_addr"][rows], h[f"{side}_port"][rows])] for side in ("born", "store")}
        cols.update({
            "magic": h["magic"][rows] & 0xFFFFFFFF, "body_crc": h["body_crc"][rows].astype(np.int32),
            "flag": h["flag"][rows].astype(np.int32), "born_host": hosts["born"],
            "store_host": hosts["store"], "store_addr": pa.array(list(h["store_addr"][rows]), pa.binary()),
            "store_port": h["store_port"][rows].astype(np.int32),
            "reconsume_times": h["reconsume_times"][rows].astype(np.int32),
            "prepared_transaction_offset": h["prepared_offset"][rows]})
    schema = batch_schema(with_body, full_head)
    return pa.RecordBatch.from_arrays([pa.array(cols[f.name], type=f.type) if not isinstance(
        cols[f.name], pa.Array) else cols[f.name] for f in schema], schema=schema)


def _property(props: pa.Array, name: str) -> pa.Array:
    """The value ``store.codec.string_to_properties`` gives ``name``, null when absent.

    Fast path: the first ``name\\x01`` segment. Rows where that may not be the answer (the name
    appears more than once, or its first value is empty) take the exact rule,
    ``store.codec.property_value_pattern``.
    """
    ps, nv = codec.PROPERTY_SEPARATOR, codec.NAME_VALUE_SEPARATOR
    first = pc.struct_field(
        pc.extract_regex(props, f"(?:^|{ps}){re.escape(name)}{nv}(?P<value>[^{ps}]*)"), [0])
    unsure = pc.fill_null(pc.or_(pc.greater(pc.count_substring(props, name + nv), 1),
                                 pc.equal(first, "")), False)
    if not pc.any(unsure).as_py():
        return first
    exact = pc.struct_field(pc.extract_regex(props, codec.property_value_pattern(name)), [0])
    return pc.if_else(unsure, exact, first)


def _split_keys(keys: pa.Array) -> pa.Array:
    """KEYS values -> lists of their non-empty tokens (``store.codec.iter_keys``)."""
    parts = pc.split_pattern(pc.fill_null(keys, ""), codec.KEY_SEPARATOR)
    flat = pc.list_flatten(parts)
    parent = pc.list_parent_indices(parts).to_numpy()
    keep = pc.not_equal(flat, "").to_numpy(zero_copy_only=False)
    offsets = np.zeros(len(keys) + 1, dtype=np.int32)
    np.cumsum(np.bincount(parent[keep], minlength=len(keys)), out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), flat.filter(pa.array(keep)))
