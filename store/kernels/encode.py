"""Lay out a batch of records into a CommitLog buffer from column arrays (the writer's kernel).

The bytes are ``CommitLog.append``'s (RocketMQ's ``CommitLog.DefaultAppendMessageCallback``,
magic v1): the fixed head, the body, TOPICLEN (one byte) + topic, PROPLEN (two bytes) +
properties. A record's properties are either given whole (``PROPS_LEN >= 0``: bytes of ``props``)
or, for the common message, built here from its tags and keys as ``MessageEncoder.prepare``
builds them: ``TAGS\\x01<tags>`` and ``KEYS\\x01<keys>`` joined by ``\\x02``, empty ones left out.

Inputs are one int64 row per record (``COLUMNS``) plus byte buffers that the row's ``*_START`` /
``*_LEN`` columns point into: ``body``, ``topics`` (``TOPIC`` indexes ``topic_off``), ``tags``,
``keys``, ``props``, and ``hosts`` (16 bytes per address; IPv4 addresses use the first 4 bytes,
the sys flag's host bits say which).

The other kernels serve the columnar validation and dispatch (``store.table_encoder``):
separator and token scans of tags and keys, joining lists of keys, grouping equal strings, and
the tagsCode / index key hashes of the rows written.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from numba import types

from rocketlake.store.kernels import kernel
from rocketlake.store.kernels.crc import crc32
from rocketlake.store.kernels.hashing import (
    count_tokens,
    java_hash,
    put_index_key_hashes,
    signed32,
    topic_prefix,
)
from rocketlake.store.kernels.words import put_be32, put_be64
from rocketlake.store.layout import (
    FLAG_BORNHOST_V6,
    FLAG_STOREHOST_V6,
    IPV4_ADDR_SIZE,
    IPV6_ADDR_SIZE,
    MAGIC_V1,
    NAME_VALUE_BYTE,
    NAME_VALUE_SEPARATOR,
    OFF_BODY_CRC,
    OFF_BORN_HOST,
    OFF_BORN_TIMESTAMP,
    OFF_FLAG,
    OFF_MAGIC,
    OFF_PHYSICAL_OFFSET,
    OFF_QUEUE_ID,
    OFF_QUEUE_OFFSET,
    OFF_SYS_FLAG,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR_BYTE,
    PROPERTY_TAGS,
)

COLUMNS = ("length", "queue_offset", "born_timestamp", "store_timestamp", "queue_id", "flag",
           "sys_flag", "reconsume_times", "prepared_offset", "born_host", "born_port",
           "store_host", "store_port", "topic", "body_start", "body_len", "tags_start",
           "tags_len", "keys_start", "keys_len", "props_start", "props_len")
(LENGTH, QUEUE_OFFSET, BORN_TS, STORE_TS, QUEUE_ID, FLAG, SYS_FLAG, RECONSUME, PREPARED,
 BORN_HOST, BORN_PORT, STORE_HOST, STORE_PORT, TOPIC, BODY_START, BODY_LEN, TAGS_START, TAGS_LEN,
 KEYS_START, KEYS_LEN, PROPS_START, PROPS_LEN) = range(len(COLUMNS))
NCOLUMNS = len(COLUMNS)

#: the start of each property the kernel builds: its name and the name/value separator
_TAGS = np.frombuffer((PROPERTY_TAGS + NAME_VALUE_SEPARATOR).encode(), dtype=np.uint8)
_KEYS = np.frombuffer((PROPERTY_KEYS + NAME_VALUE_SEPARATOR).encode(), dtype=np.uint8)
_TAGS_LEN, _KEYS_LEN = _TAGS.size, _KEYS.size


#: the C library's ``memcpy`` (the process has it loaded; named, not bound to an address, so the
#: kernels calling it stay cacheable)
_memcpy: Any = types.ExternalFunction("memcpy", types.voidptr(types.voidptr, types.voidptr, types.uintp))


@kernel
def _copy(dst: npt.NDArray[np.uint8], p: int, src: npt.NDArray[np.uint8], start: int, n: int) -> int:
    """Copy ``src[start:start+n]`` to ``dst[p:p+n]`` (distinct contiguous arrays, both ranges
    inside them) as one block; return ``p + n``."""
    if n > 0:
        _memcpy(dst.ctypes.data + np.uintp(p), src.ctypes.data + np.uintp(start), np.uintp(n))
    return p + n


@kernel
def _copy_short(dst: npt.NDArray[np.uint8], p: int, src: npt.NDArray[np.uint8], start: int,
                n: int) -> int:
    """``_copy`` byte by byte: faster for strings of a few bytes (a call costs more)."""
    for k in range(n):
        dst[p + k] = src[start + k]
    return p + n


@kernel
def built_props_len(tags_len: int, keys_len: int) -> int:
    """Length of the properties built from tags and keys of these lengths."""
    n = 0
    if tags_len > 0:
        n += _TAGS_LEN + tags_len
    if keys_len > 0:
        n += _KEYS_LEN + keys_len
    if tags_len > 0 and keys_len > 0:
        n += 1
    return n


@kernel
def built_props_lens(tags_len: npt.NDArray[np.int64], keys_len: npt.NDArray[np.int64],
                     out: npt.NDArray[np.int64]) -> None:
    """``out[i] = built_props_len(tags_len[i], keys_len[i])``."""
    for i in range(tags_len.size):
        out[i] = built_props_len(tags_len[i], keys_len[i])


@kernel
def encode(dst: npt.NDArray[np.uint8], pos: int, base: int, lo: int, hi: int,
           rows: npt.NDArray[np.int64], hosts: npt.NDArray[np.uint8],
           body: npt.NDArray[np.uint8], topic_off: npt.NDArray[np.int64],
           topics: npt.NDArray[np.uint8], tags: npt.NDArray[np.uint8],
           keys: npt.NDArray[np.uint8], props: npt.NDArray[np.uint8]) -> int:
    """Write records ``rows[lo:hi]`` one after another into ``dst`` from ``pos`` (``dst[0]`` is
    CommitLog offset ``base``: PHYSICALOFFSET is ``base + position``); return the end position.
    ``LENGTH`` must be each record's TOTALSIZE."""
    p = pos
    for i in range(lo, hi):
        sys_flag = rows[i, SYS_FLAG]
        bstart, blen = rows[i, BODY_START], rows[i, BODY_LEN]
        put_be32(dst, p, rows[i, LENGTH])
        put_be32(dst, p + OFF_MAGIC, MAGIC_V1)
        put_be32(dst, p + OFF_BODY_CRC, crc32(body, bstart, blen) & 0x7FFFFFFF)
        put_be32(dst, p + OFF_QUEUE_ID, rows[i, QUEUE_ID])
        put_be32(dst, p + OFF_FLAG, rows[i, FLAG])
        put_be64(dst, p + OFF_QUEUE_OFFSET, rows[i, QUEUE_OFFSET])
        put_be64(dst, p + OFF_PHYSICAL_OFFSET, base + p)
        put_be32(dst, p + OFF_SYS_FLAG, sys_flag)
        put_be64(dst, p + OFF_BORN_TIMESTAMP, rows[i, BORN_TS])
        q = _copy(dst, p + OFF_BORN_HOST, hosts, IPV6_ADDR_SIZE * rows[i, BORN_HOST],
                  IPV6_ADDR_SIZE if sys_flag & FLAG_BORNHOST_V6 else IPV4_ADDR_SIZE)
        put_be32(dst, q, rows[i, BORN_PORT])
        put_be64(dst, q + 4, rows[i, STORE_TS])
        q = _copy(dst, q + 12, hosts, IPV6_ADDR_SIZE * rows[i, STORE_HOST],
                  IPV6_ADDR_SIZE if sys_flag & FLAG_STOREHOST_V6 else IPV4_ADDR_SIZE)
        put_be32(dst, q, rows[i, STORE_PORT])
        put_be32(dst, q + 4, rows[i, RECONSUME])
        put_be64(dst, q + 8, rows[i, PREPARED])
        put_be32(dst, q + 16, blen)
        q = _copy(dst, q + 20, body, bstart, blen)
        t = rows[i, TOPIC]
        tlen = topic_off[t + 1] - topic_off[t]
        dst[q] = tlen
        q = _copy(dst, q + 1, topics, topic_off[t], tlen)
        if rows[i, PROPS_LEN] >= 0:
            plen = rows[i, PROPS_LEN]
            dst[q] = (plen >> 8) & 0xFF
            dst[q + 1] = plen & 0xFF
            q = _copy(dst, q + 2, props, rows[i, PROPS_START], plen)
        else:
            tl, kl = rows[i, TAGS_LEN], rows[i, KEYS_LEN]
            plen = built_props_len(tl, kl)
            dst[q] = (plen >> 8) & 0xFF
            dst[q + 1] = plen & 0xFF
            q += 2
            if tl > 0:
                q = _copy(dst, q, _TAGS, 0, _TAGS_LEN)
                q = _copy(dst, q, tags, rows[i, TAGS_START], tl)
                if kl > 0:
                    dst[q] = PROPERTY_SEPARATOR_BYTE
                    q += 1
            if kl > 0:
                q = _copy(dst, q, _KEYS, 0, _KEYS_LEN)
                q = _copy(dst, q, keys, rows[i, KEYS_START], kl)
        p += rows[i, LENGTH]
    return p


@kernel
def string_spans(offsets: npt.NDArray[Any], valid: npt.NDArray[np.bool_], size: int,
                 start: npt.NDArray[np.int64], length: npt.NDArray[np.int64]) -> bool:
    """Row i of a string or binary column is bytes ``offsets[i]..offsets[i+1]`` of its data (of
    ``size`` bytes): set ``start[i]`` and ``length[i]`` (0 where not ``valid``). Return whether
    the offsets are in order and inside the data; False leaves ``start`` and ``length``
    unspecified."""
    n = start.size
    if offsets[0] < 0 or offsets[n] > size:
        return False
    for i in range(n):
        a, b = offsets[i], offsets[i + 1]
        if b < a:
            return False
        start[i] = a
        length[i] = b - a if valid[i] else 0
    return True


@kernel
def is_ascii(data: npt.NDArray[np.uint8], lo: int, hi: int) -> bool:
    """Whether bytes ``data[lo:hi]`` are all ASCII (so valid UTF-8)."""
    high = np.uint8(0)
    for p in range(lo, hi):
        high |= data[p]
    return bool(high < 0x80)


@kernel
def has_separator(data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64],
                  lens: npt.NDArray[np.int64], out: npt.NDArray[np.bool_]) -> None:
    """``out[i]``: whether ``data[starts[i]:starts[i]+lens[i]]`` holds a \\x01 or \\x02 byte."""
    for i in range(starts.size):
        found = False
        for p in range(starts[i], starts[i] + lens[i]):
            if data[p] == NAME_VALUE_BYTE or data[p] == PROPERTY_SEPARATOR_BYTE:
                found = True
                break
        out[i] = found


@kernel
def token_counts(data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64],
                 lens: npt.NDArray[np.int64], out: npt.NDArray[np.int64]) -> None:
    """``out[i]``: the non-empty space-separated tokens of ``data[starts[i]:starts[i]+lens[i]]``
    (the index keys of a KEYS value, ``codec.iter_keys``)."""
    for i in range(starts.size):
        out[i] = count_tokens(data, starts[i], starts[i] + lens[i])


@kernel
def dispatch_hashes(rows: npt.NDArray[np.int64], topic_off: npt.NDArray[np.int64],
                    topics: npt.NDArray[np.uint8], tags: npt.NDArray[np.uint8],
                    keys: npt.NDArray[np.uint8], key_counts: npt.NDArray[np.int64],
                    given: npt.NDArray[np.int32], tags_code: npt.NDArray[np.int64],
                    hashes: npt.NDArray[np.int32]) -> None:
    """The dispatch of records laid out from tags and keys (``PROPS_LEN < 0``): ``tags_code[i]``
    (Java hashCode of TAGS, 0 without) and, into ``hashes``, the key hash of each index key
    (``kernels.hashing``: such a record has no UNIQ_KEY). The ``key_counts[i]`` key hashes of a
    record with whole properties are taken, in order, from ``given`` (its tags code is left as
    it is)."""
    prefixes = np.empty(topic_off.size - 1, dtype=np.int64)  # each topic's, once
    for t in range(prefixes.size):
        prefixes[t] = topic_prefix(topics, topic_off[t], topic_off[t + 1] - topic_off[t])
    k = 0
    g = 0
    for i in range(rows.shape[0]):
        if rows[i, PROPS_LEN] >= 0:
            for _ in range(key_counts[i]):
                hashes[k] = given[g]
                k += 1
                g += 1
            continue
        tl = rows[i, TAGS_LEN]
        tags_code[i] = signed32(java_hash(tags, rows[i, TAGS_START], tl, 0)) if tl > 0 else 0
        if key_counts[i] == 0:
            continue
        k = put_index_key_hashes(prefixes[rows[i, TOPIC]], keys, -1, 0, keys, rows[i, KEYS_START],
                                 rows[i, KEYS_LEN], hashes, k)


@kernel
def join_keys(list_off: npt.NDArray[np.int64], list_valid: npt.NDArray[np.bool_],
              start: npt.NDArray[np.int64], length: npt.NDArray[np.int64],
              valid: npt.NDArray[np.bool_], data: npt.NDArray[np.uint8],
              out_start: npt.NDArray[np.int64], out_len: npt.NDArray[np.int64],
              out: npt.NDArray[np.uint8]) -> npt.NDArray[np.bool_]:
    """Join each list of strings (row i: strings ``list_off[i]..list_off[i+1]``, given as
    ``start`` / ``length`` into ``data``) with single spaces into ``out``; return whether a list
    holds a null string. A null list (``list_valid``) is empty."""
    n = list_valid.size
    has_null = np.zeros(n, dtype=np.bool_)
    q = 0
    for i in range(n):
        out_start[i] = q
        if list_valid[i]:
            for j in range(list_off[i], list_off[i + 1]):
                if not valid[j]:
                    has_null[i] = True
                if j > list_off[i]:
                    out[q] = 0x20
                    q += 1
                q = _copy_short(out, q, data, start[j], length[j])
        out_len[i] = q - out_start[i]
    return has_null


@kernel
def fnv_hashes(data: npt.NDArray[np.uint8], start: npt.NDArray[np.int64],
               length: npt.NDArray[np.int64], out: npt.NDArray[np.uint64]) -> None:
    """``out[i]``: 64-bit FNV-1a hash of row i's bytes (grouping equal strings)."""
    for i in range(start.size):
        h = np.uint64(0xCBF29CE484222325)
        for p in range(start[i], start[i] + length[i]):
            h = (h ^ np.uint64(data[p])) * np.uint64(0x100000001B3)
        out[i] = h


@kernel
def all_same(data: npt.NDArray[np.uint8], start: npt.NDArray[np.int64],
             length: npt.NDArray[np.int64]) -> bool:
    """Whether every row holds the bytes of row 0 (True for no row)."""
    if start.size == 0:
        return True
    a, n = start[0], length[0]
    for i in range(1, start.size):
        if length[i] != n:
            return False
        b = start[i]
        for k in range(n):
            if data[b + k] != data[a + k]:
                return False
    return True


@kernel
def same_bytes(data: npt.NDArray[np.uint8], start: npt.NDArray[np.int64],
               length: npt.NDArray[np.int64], rep: npt.NDArray[np.int64]) -> bool:
    """Whether every row i holds the same bytes as row ``rep[i]``."""
    for i in range(start.size):
        r = rep[i]
        if length[i] != length[r]:
            return False
        a, b = start[i], start[r]
        for k in range(length[i]):
            if data[a + k] != data[b + k]:
                return False
    return True


@kernel
def group_rows(group: npt.NDArray[np.int64], ngroups: int, sel: npt.NDArray[np.int64],
               counts: npt.NDArray[np.int64], order: npt.NDArray[np.int64],
               ranks: npt.NDArray[np.int64]) -> None:
    """Row ``sel[i]`` is in group ``group[i]`` (``0 <= group[i] < ngroups``): ``counts[g]``
    rows per group, ``order`` the rows sorted by group then position (a stable counting sort)
    and ``ranks`` each one's rank within its group."""
    counts[:] = 0
    for i in range(group.size):
        counts[group[i]] += 1
    first = np.empty(ngroups, dtype=np.int64)
    at = 0
    for g in range(ngroups):
        first[g] = at
        at += counts[g]
    fill = first.copy()
    for i in range(group.size):
        g = group[i]
        k = fill[g]
        order[k] = sel[i]
        ranks[k] = k - first[g]
        fill[g] = k + 1
