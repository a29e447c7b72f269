"""Walk CommitLog records over a byte buffer: heads, field spans, body and property CRC, UTF-8
checks.

The rules are ``codec.decode_record``'s (docs/FORMAT.md §2), applied to every record of a range in
one compiled loop. A walk starts at a known record start and stops at the first byte that does not
continue valid data, saying why (``STATUS``); ``find_start`` finds the first record start in any
byte range (a Spark split): a magic at MAGIC and a PHYSICALOFFSET equal to its own address
(offsets: ``store.layout``).
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rocketlake.store.kernels import kernel
from rocketlake.store.kernels.crc import crc32
from rocketlake.store.kernels.words import is_ascii_word, load_be32, load_be64
from rocketlake.store.layout import (
    AFTER_STORE_HOST,
    BETWEEN_HOSTS,
    BLANK_MAGIC,
    FLAG_BORNHOST_V6,
    FLAG_STOREHOST_V6,
    IPV4_ADDR_SIZE,
    IPV6_ADDR_SIZE,
    MAGIC_V1,
    MAGIC_V2,
    MIN_RECORD_SIZE,
    NAME_VALUE_BYTE,
    OFF_BODY_CRC,
    OFF_BORN_HOST,
    OFF_BORN_TIMESTAMP,
    OFF_FLAG,
    OFF_MAGIC,
    OFF_PHYSICAL_OFFSET,
    OFF_QUEUE_ID,
    OFF_QUEUE_OFFSET,
    OFF_SYS_FLAG,
    PROP_CRC_DIGITS,
    PROP_CRC_NAME,
    PROP_CRC_SIZE,
    PROPERTY_SEPARATOR_BYTE,
    PROPLEN_SIZE,
)

# --- output columns of `walk`, one int64 each (`RECORD_DTYPE` names them) ------------------------
FIELDS = ("offset", "size", "magic", "body_crc", "queue_id", "flag", "queue_offset",
          "physical_offset", "sys_flag", "born_timestamp", "born_port", "store_timestamp",
          "store_port", "reconsume_times", "prepared_offset", "body_start", "body_len",
          "topic_start", "topic_len", "props_start", "props_len", "born_addr_start",
          "store_addr_start")
(OFFSET, SIZE, MAGIC, BODY_CRC, QUEUE_ID, FLAG, QUEUE_OFFSET, PHYSICAL_OFFSET, SYS_FLAG, BORN_TS,
 BORN_PORT, STORE_TS, STORE_PORT, RECONSUME, PREPARED, BODY_START, BODY_LEN, TOPIC_START, TOPIC_LEN,
 PROPS_START, PROPS_LEN, BORN_ADDR, STORE_ADDR) = range(len(FIELDS))
NFIELDS = len(FIELDS)
#: A walk's rows as a structured array (``rows.view(RECORD_DTYPE).ravel()``); ``*_start`` are
#: positions in the walked buffer, ``offset`` is the record's CommitLog offset.
RECORD_DTYPE = np.dtype([(n, np.int64) for n in FIELDS])

# --- why a walk stopped ---------------------------------------------------------------------------
LIMIT, BLANK, ZEROS, TRUNCATED, BAD_MAGIC, BAD_SIZE, SHORT_FOR_SYSFLAG, BAD_BODY_LEN, \
    BAD_TOPIC_LEN, BAD_PROPS_LEN, BAD_PHYSICAL_OFFSET, BAD_CRC, BAD_UTF8, BAD_NAME, \
    BAD_PROP_CRC = range(15)
#: status -> (name, whether valid data ends there because of damage)
STATUS = {LIMIT: "limit", BLANK: "blank", ZEROS: "zeros", TRUNCATED: "truncated header",
          BAD_MAGIC: "bad magic", BAD_SIZE: "bad TOTALSIZE", SHORT_FOR_SYSFLAG: "short for SYSFLAG",
          BAD_BODY_LEN: "bad BODYLEN", BAD_TOPIC_LEN: "bad TOPICLEN",
          BAD_PROPS_LEN: "TOTALSIZE disagrees", BAD_PHYSICAL_OFFSET: "bad PHYSICALOFFSET",
          BAD_CRC: "body CRC mismatch", BAD_UTF8: "topic/properties not UTF-8",
          BAD_NAME: "topic or queue id no writer stores", BAD_PROP_CRC: "property CRC mismatch"}

#: the magic's first three bytes, shared by v1 and v2 (``find_start`` looks for them), and the last
_MAGIC_HEAD = (MAGIC_V1 & 0xFFFFFF00) >> 8
assert _MAGIC_HEAD == (MAGIC_V2 & 0xFFFFFF00) >> 8
_MAGIC_B0, _MAGIC_B1, _MAGIC_B2 = _MAGIC_HEAD >> 16, (_MAGIC_HEAD >> 8) & 0xFF, _MAGIC_HEAD & 0xFF
_MAGIC_V1_B3, _MAGIC_V2_B3 = MAGIC_V1 & 0xFF, MAGIC_V2 & 0xFF
#: a walk reads up to PHYSICALOFFSET's end before it knows the record's size
_HEAD_SIZE = OFF_PHYSICAL_OFFSET + 8


_PROP_CRC_NAME = np.frombuffer(PROP_CRC_NAME.encode(), dtype=np.uint8)


@kernel
def queue_key(topic: int, queue_id: int) -> int:
    """``codec.queue_key`` of one (topic number, queue id): ``topic << 32 | queue id`` as an
    unsigned 32-bit number."""
    return (topic << 32) | (queue_id & 0xFFFFFFFF)


@kernel
def byte(buf: npt.NDArray[np.uint8], p: int) -> int:
    """``buf[p]`` as a signed 64-bit integer (numba's ``int`` of a uint8 is unsigned)."""
    return int(np.int64(buf[p]))


@kernel
def be_i64(buf: npt.NDArray[np.uint8], p: int) -> int:
    """The signed big-endian 64-bit integer at ``buf[p:p + 8]`` (one load and a byte swap)."""
    return load_be64(buf, p)


@kernel
def be_i32(buf: npt.NDArray[np.uint8], p: int) -> int:
    """The signed big-endian 32-bit integer at ``buf[p:p + 4]``."""
    return load_be32(buf, p)


@kernel
def be_i16(buf: npt.NDArray[np.uint8], p: int) -> int:
    v = (byte(buf, p) << 8) | byte(buf, p + 1)
    return v - (1 << 16) if v >= (1 << 15) else v


@kernel
def prop_crc(buf: npt.NDArray[np.uint8], props_at: int, props_len: int) -> int:
    """The CRC a 5.x broker wrote at the end of the properties at ``buf[props_at:+props_len]``
    (``__CRC32#`` \\x01 ten digits, least significant first, \\x02, after a \\x02 unless alone):
    -1 where there is none, -2 where its digits are not digits."""
    if props_len < PROP_CRC_SIZE:
        return -1
    at = props_at + props_len - PROP_CRC_SIZE
    if at > props_at and buf[at - 1] != PROPERTY_SEPARATOR_BYTE:
        return -1
    for k in range(_PROP_CRC_NAME.size):
        if buf[at + k] != _PROP_CRC_NAME[k]:
            return -1
    at += _PROP_CRC_NAME.size
    if buf[at] != NAME_VALUE_BYTE or buf[at + 1 + PROP_CRC_DIGITS] != PROPERTY_SEPARATOR_BYTE:
        return -1
    v = 0
    for k in range(PROP_CRC_DIGITS - 1, -1, -1):
        d = byte(buf, at + 1 + k) - 48
        if d < 0 or d > 9:
            return -2
        v = v * 10 + d
    return v


@kernel
def utf8_ok(buf: npt.NDArray[np.uint8], start: int, length: int) -> bool:
    """Whether the bytes are valid UTF-8 as Python decodes it (no overlongs, no surrogates,
    nothing above U+10FFFF)."""
    p = start
    end = start + length
    while p < end:
        if p + 8 <= end and is_ascii_word(buf, p):
            p += 8
            continue
        b = buf[p]
        if b < 0x80:
            p += 1
            continue
        if 0xC2 <= b <= 0xDF:
            n = 1
            lo, hi = 0x80, 0xBF
        elif b == 0xE0:
            n, lo, hi = 2, 0xA0, 0xBF
        elif 0xE1 <= b <= 0xEC or b == 0xEE or b == 0xEF:
            n, lo, hi = 2, 0x80, 0xBF
        elif b == 0xED:
            n, lo, hi = 2, 0x80, 0x9F
        elif b == 0xF0:
            n, lo, hi = 3, 0x90, 0xBF
        elif 0xF1 <= b <= 0xF3:
            n, lo, hi = 3, 0x80, 0xBF
        elif b == 0xF4:
            n, lo, hi = 3, 0x80, 0x8F
        else:
            return False
        if p + n >= end:
            return False
        c = buf[p + 1]
        if c < lo or c > hi:
            return False
        for k in range(2, n + 1):
            c = buf[p + k]
            if c < 0x80 or c > 0xBF:
                return False
        p += n + 1
    return True


@kernel
def topic_ok(buf: npt.NDArray[np.uint8], start: int, length: int) -> bool:
    """RocketMQ's topic rule: 1..127 bytes of ``[%|a-zA-Z0-9_-]`` (``codec.TOPIC_PATTERN``)."""
    if length < 1 or length > 127:
        return False
    for p in range(start, start + length):
        b = buf[p]
        if not ((48 <= b <= 57) or (65 <= b <= 90) or (97 <= b <= 122) or b == 37 or b == 124
                or b == 95 or b == 45):
            return False
    return True


@kernel
def walk(buf: npt.NDArray[np.uint8], base: int, pos: int, limit: int, check_crc: bool,
         check_names: bool, out: npt.NDArray[np.int64],
         detail: npt.NDArray[np.int64]) -> tuple[int, int, int]:
    """Decode records from ``buf[pos]`` while they start before ``limit`` and ``out`` has rows.

    ``base`` is the CommitLog offset of ``buf[0]``. Fills ``out[i, FIELD]`` per record and returns
    ``(count, end, status)``: ``end`` is the buffer position after the last valid record (where
    the next one would start), ``status`` why the walk stopped there (``LIMIT`` also when ``out``
    is full). For damage, ``detail`` (3 slots) gets the offending values: the magic, the size (and
    SYSFLAG), the stored and computed CRC, the PHYSICALOFFSET, the queue id and topic span.
    ``check_names`` also stops at a record whose topic or
    queue id no writer could have stored (recovery's rule).
    """
    size = buf.size
    n = 0
    cap = out.shape[0]
    while pos < limit and n < cap:
        if pos + 8 > size:
            return n, pos, TRUNCATED
        total = be_i32(buf, pos)
        magic = be_i32(buf, pos + OFF_MAGIC)
        if magic == BLANK_MAGIC:
            detail[0] = total
            return n, pos, BLANK
        if magic != MAGIC_V1 and magic != MAGIC_V2:
            zero = True
            for k in range(8):
                if buf[pos + k] != 0:
                    zero = False
            detail[0] = magic
            return n, pos, ZEROS if zero else BAD_MAGIC
        if total < MIN_RECORD_SIZE or pos + total > size:
            detail[0] = total
            return n, pos, BAD_SIZE
        sys_flag = be_i32(buf, pos + OFF_SYS_FLAG)
        born_len = IPV6_ADDR_SIZE if sys_flag & FLAG_BORNHOST_V6 else IPV4_ADDR_SIZE
        store_len = IPV6_ADDR_SIZE if sys_flag & FLAG_STOREHOST_V6 else IPV4_ADDR_SIZE
        tl_size = 2 if magic == MAGIC_V2 else 1
        if total < (MIN_RECORD_SIZE + born_len - IPV4_ADDR_SIZE + store_len - IPV4_ADDR_SIZE
                     + tl_size - 1):
            detail[0] = total
            detail[1] = sys_flag
            return n, pos, SHORT_FOR_SYSFLAG
        p = pos + OFF_BORN_HOST
        born_at = p
        born_port = be_i32(buf, p + born_len)
        p += born_len + 4
        store_ts = be_i64(buf, p)
        p += BETWEEN_HOSTS - 4
        store_at = p
        p += store_len
        store_port = be_i32(buf, p)
        reconsume = be_i32(buf, p + 4)
        prepared = be_i64(buf, p + 8)
        body_len = be_i32(buf, p + 16)
        p += AFTER_STORE_HOST
        rec_end = pos + total
        if body_len < 0 or p + body_len + tl_size + PROPLEN_SIZE > rec_end:
            detail[0] = body_len
            return n, pos, BAD_BODY_LEN
        body_at = p
        p += body_len
        # TOPICLENGTH: v1 a signed byte (CommitLog.checkMessageAndReturnSize reads
        # ``byteBuffer.get()``: a length byte >= 0x80 is negative, an invalid record), v2 a short
        topic_len = be_i16(buf, p) if tl_size == 2 else (byte(buf, p) - 256 if buf[p] >= 128
                                                         else byte(buf, p))
        p += tl_size
        if topic_len < 0 or p + topic_len + PROPLEN_SIZE > rec_end:
            detail[0] = topic_len
            return n, pos, BAD_TOPIC_LEN
        topic_at = p
        p += topic_len
        props_len = be_i16(buf, p)
        p += PROPLEN_SIZE
        if props_len < 0 or p + props_len != rec_end:
            detail[0] = total
            return n, pos, BAD_PROPS_LEN
        phys = be_i64(buf, pos + OFF_PHYSICAL_OFFSET)
        if phys != base + pos:
            detail[0] = phys
            return n, pos, BAD_PHYSICAL_OFFSET
        stored_crc = be_i32(buf, pos + OFF_BODY_CRC)
        if check_crc:
            crc = crc32(buf, body_at, body_len) & 0x7FFFFFFF
            if crc != stored_crc:
                detail[0] = stored_crc
                detail[1] = crc
                return n, pos, BAD_CRC
        if check_crc:
            want = prop_crc(buf, p, props_len)
            if want != -1:
                crc = crc32(buf, pos, total - PROP_CRC_SIZE) & 0x7FFFFFFF
                if crc != want:
                    detail[0] = want
                    detail[1] = crc
                    return n, pos, BAD_PROP_CRC
        if not (utf8_ok(buf, topic_at, topic_len) and utf8_ok(buf, p, props_len)):
            return n, pos, BAD_UTF8
        queue_id = be_i32(buf, pos + OFF_QUEUE_ID)
        if check_names and (queue_id < 0 or not topic_ok(buf, topic_at, topic_len)):
            detail[0] = queue_id
            detail[1] = topic_at
            detail[2] = topic_len
            return n, pos, BAD_NAME
        r = out[n]
        r[OFFSET] = base + pos
        r[SIZE] = total
        r[MAGIC] = magic
        r[BODY_CRC] = stored_crc
        r[QUEUE_ID] = queue_id
        r[FLAG] = be_i32(buf, pos + OFF_FLAG)
        r[QUEUE_OFFSET] = be_i64(buf, pos + OFF_QUEUE_OFFSET)
        r[PHYSICAL_OFFSET] = phys
        r[SYS_FLAG] = sys_flag
        r[BORN_TS] = be_i64(buf, pos + OFF_BORN_TIMESTAMP)
        r[BORN_PORT] = born_port
        r[STORE_TS] = store_ts
        r[STORE_PORT] = store_port
        r[RECONSUME] = reconsume
        r[PREPARED] = prepared
        r[BODY_START] = body_at
        r[BODY_LEN] = body_len
        r[TOPIC_START] = topic_at
        r[TOPIC_LEN] = topic_len
        r[PROPS_START] = p
        r[PROPS_LEN] = props_len
        r[BORN_ADDR] = born_at
        r[STORE_ADDR] = store_at
        n += 1
        pos = rec_end
    return n, pos, LIMIT


#: damage status -> what ``describe`` says (``d0``, ``d1``: the walk's detail values)
_DAMAGE = {
    TRUNCATED: "truncated record header",
    BAD_MAGIC: "bad magic {magic:#010x}",
    ZEROS: "bad magic {magic:#010x}",
    BAD_SIZE: "bad TOTALSIZE {d0}",
    SHORT_FOR_SYSFLAG: "TOTALSIZE {d0} too short for SYSFLAG {d1:#x}",
    BAD_BODY_LEN: "bad BODYLEN {d0}",
    BAD_TOPIC_LEN: "bad TOPICLEN {d0}",
    BAD_PROPS_LEN: "TOTALSIZE {d0} disagrees with the record's fields",
    BAD_PHYSICAL_OFFSET: "PHYSICALOFFSET field says {d0}",
    BAD_CRC: "body CRC {d0} != computed {d1}",
    BAD_UTF8: "topic/properties not UTF-8",
    BAD_NAME: "topic {topic!r} / queue {d0} cannot have been written",
    BAD_PROP_CRC: "property CRC {d0} != computed {d1}",
}


def describe(status: int, offset: int, detail: npt.NDArray[np.int64], buf: npt.NDArray[np.uint8]) -> str:
    """What is wrong with the record at CommitLog ``offset`` where a walk stopped with damage
    ``status`` (``detail`` and ``buf`` as the walk left them)."""
    if status not in _DAMAGE:
        raise ValueError(f"status {status} is not damage")
    d0, d1 = int(detail[0]), int(detail[1])
    topic = buf[d1:d1 + int(detail[2])].tobytes().decode(errors="replace") if status == BAD_NAME else ""
    return f"offset {offset}: " + _DAMAGE[status].format(d0=d0, d1=d1, magic=d0 & 0xFFFFFFFF, topic=topic)


@kernel
def find_start(buf: npt.NDArray[np.uint8], base: int, lo: int, hi: int) -> int:
    """The first position ``p`` in ``[lo, hi)`` where a record starts: a v1/v2 magic at ``p+4``
    and PHYSICALOFFSET at ``p+28`` equal to ``base + p``; ``hi`` when there is none. (A BLANK
    carries no self offset: a range that starts inside a file's BLANK tail has no record.)"""
    stop = min(hi, buf.size - _HEAD_SIZE)
    m = OFF_MAGIC
    for p in range(lo, stop):
        if buf[p + m] == _MAGIC_B0 and buf[p + m + 1] == _MAGIC_B1 and buf[p + m + 2] == _MAGIC_B2 and (
                buf[p + m + 3] == _MAGIC_V1_B3 or buf[p + m + 3] == _MAGIC_V2_B3):
            if be_i64(buf, p + OFF_PHYSICAL_OFFSET) == base + p:
                return p
    return hi


@kernel
def heads_at(buf: npt.NDArray[np.uint8], positions: npt.NDArray[np.int64],
             out: npt.NDArray[np.int64]) -> None:
    """``out[i] = (TOTALSIZE, MAGIC, PHYSICALOFFSET)`` of the record head at ``positions[i]``;
    zeros where a head does not fit the buffer."""
    for i in range(positions.size):
        p = positions[i]
        if p < 0 or p + _HEAD_SIZE > buf.size:
            out[i, 0] = out[i, 1] = out[i, 2] = 0
        else:
            out[i, 0] = be_i32(buf, p)
            out[i, 1] = be_i32(buf, p + OFF_MAGIC)
            out[i, 2] = be_i64(buf, p + OFF_PHYSICAL_OFFSET)
