"""Java's ``String.hashCode``, the IndexFile key hash and the index keys of a record, defined once
for the kernels and for ``codec`` (which calls them for Python strings).

Index keys (RocketMQ's ``IndexService.buildIndex``): ``topic#UNIQ_KEY`` when the record has a
UNIQ_KEY, then ``topic#token`` for each non-empty space-separated token of KEYS, in order
(docs/FORMAT.md §7). A key's hash is ``IndexFile.indexKeyHashMethod``: the absolute value of its
Java hashCode, 0 for Integer.MIN_VALUE.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rocketlake.store.kernels import kernel, leaf_kernel
from rocketlake.store.kernels.records import byte
from rocketlake.store.layout import INDEX_KEY_SEPARATOR, KEY_SEPARATOR_BYTE

_HASH_SEPARATOR = ord(INDEX_KEY_SEPARATOR)


@kernel
def java_hash(buf: npt.NDArray[np.uint8], start: int, length: int, h: int) -> int:
    """Continue Java's ``String.hashCode`` ``h`` (unsigned 32-bit) over UTF-8 bytes, one step per
    UTF-16 code unit (a character above U+FFFF is a surrogate pair: two steps; a lone surrogate,
    encoded as Python's ``surrogatepass`` does, one)."""
    p = start
    end = start + length
    while p < end:
        if p + 4 <= end:  # four ASCII characters in one step: h * 31^4 + ...
            b0, b1, b2, b3 = byte(buf, p), byte(buf, p + 1), byte(buf, p + 2), byte(buf, p + 3)
            if (b0 | b1 | b2 | b3) < 0x80:
                h = (h * 923521 + b0 * 29791 + b1 * 961 + b2 * 31 + b3) & 0xFFFFFFFF
                p += 4
                continue
        b = byte(buf, p)
        if b < 0x80:
            cp = b
            p += 1
        elif b < 0xE0:
            cp = ((b & 0x1F) << 6) | (byte(buf, p + 1) & 0x3F)
            p += 2
        elif b < 0xF0:
            cp = ((b & 0x0F) << 12) | ((byte(buf, p + 1) & 0x3F) << 6) | (byte(buf, p + 2) & 0x3F)
            p += 3
        else:
            cp = (((b & 0x07) << 18) | ((byte(buf, p + 1) & 0x3F) << 12)
                  | ((byte(buf, p + 2) & 0x3F) << 6) | (byte(buf, p + 3) & 0x3F))
            p += 4
        if cp >= 0x10000:
            cp -= 0x10000
            h = (h * 31 + (0xD800 + (cp >> 10))) & 0xFFFFFFFF
            cp = 0xDC00 + (cp & 0x3FF)
        h = (h * 31 + cp) & 0xFFFFFFFF
    return h


@kernel
def signed32(h: int) -> int:
    """An unsigned 32-bit hash as the signed int Java holds."""
    return h - (1 << 32) if h >= (1 << 31) else h


@kernel
def java_hashes(buf: npt.NDArray[np.uint8], start: npt.NDArray[np.int64],
                length: npt.NDArray[np.int64], out: npt.NDArray[np.int32]) -> None:
    """``out[i]``: the signed Java hashCode of the string ``buf[start[i]:start[i]+length[i]]``."""
    for i in range(start.size):
        out[i] = signed32(java_hash(buf, start[i], length[i], 0))


@kernel
def key_hash(h: int) -> np.int32:
    """IndexFile keyHash of a Java hashCode (signed or unsigned 32-bit): its absolute value, 0
    for Integer.MIN_VALUE."""
    s = signed32(h & 0xFFFFFFFF)
    if s < 0:
        s = -s
    return np.int32(0 if s > 0x7FFFFFFF else s)


@kernel
def key_hashes(h: npt.NDArray[np.int32], out: npt.NDArray[np.int32]) -> None:
    """``out[i] = key_hash(h[i])``."""
    for i in range(h.size):
        out[i] = key_hash(h[i])


@kernel
def next_token(buf: npt.NDArray[np.uint8], p: int, end: int) -> tuple[int, int]:
    """The next space-separated KEYS token at or after ``p``: ``(start, stop)``;
    ``start == stop == end`` when none is left."""
    while p < end and buf[p] == KEY_SEPARATOR_BYTE:
        p += 1
    start = p
    while p < end and buf[p] != KEY_SEPARATOR_BYTE:
        p += 1
    return start, p


@kernel
def count_tokens(buf: npt.NDArray[np.uint8], p: int, end: int) -> int:
    """How many KEYS tokens ``buf[p:end]`` holds."""
    n = 0
    while p < end:
        start, p = next_token(buf, p, end)
        n += p > start
    return n


@kernel
def topic_prefix(buf: npt.NDArray[np.uint8], start: int, length: int) -> int:
    """The hash state after ``topic#`` (the topic's bytes at ``buf[start:start+length]``): every
    index key of a record continues from it."""
    return (java_hash(buf, start, length, 0) * 31 + _HASH_SEPARATOR) & 0xFFFFFFFF


@leaf_kernel
def put_index_key_hashes(prefix: int, uniq: npt.NDArray[np.uint8], uniq_start: int, uniq_len: int,
                         keys: npt.NDArray[np.uint8], keys_start: int, keys_len: int,
                         out: npt.NDArray[np.int32], k: int) -> int:
    """Write the key hashes of one record's index keys into ``out`` from ``k``, return the next
    position: the UNIQ_KEY's (when ``uniq_start >= 0``), then each KEYS token's (``prefix`` from
    ``topic_prefix``)."""
    if uniq_start >= 0:
        out[k] = key_hash(java_hash(uniq, uniq_start, uniq_len, prefix))
        k += 1
    # each token found and hashed in one pass over its bytes; a token with a non-ASCII byte is
    # hashed again whole by ``java_hash`` (UTF-16 code units)
    p = keys_start
    e = p + keys_len
    while p < e:
        b = byte(keys, p)
        if b == KEY_SEPARATOR_BYTE:
            p += 1
            continue
        s = p
        h = prefix
        while p < e and b != KEY_SEPARATOR_BYTE:
            if b >= 0x80:
                while p < e and keys[p] != KEY_SEPARATOR_BYTE:
                    p += 1
                h = java_hash(keys, s, p - s, prefix)
                break
            h = (h * 31 + b) & 0xFFFFFFFF
            p += 1
            if p < e:
                b = byte(keys, p)
        out[k] = key_hash(h)
        k += 1
    return k


@kernel
def most_tokens(length: int) -> int:
    """The most KEYS tokens ``length`` bytes can hold (one byte each, a separator between)."""
    return (length + 1) // 2
