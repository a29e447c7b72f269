"""What walked records contribute to the ConsumeQueues and the index, in one compiled pass:
property values, tagsCode, whether a record gets a unit, and its index key hashes
(``kernels.hashing``).

The rules are ``store.dispatch``'s (docs/FORMAT.md §3, §5, §7): the last ``name\\x01value``
segment with a non-empty name and value wins; tagsCode is the Java ``String.hashCode`` of TAGS
(over UTF-16 code units), or the delivery time of a SCHEDULE_TOPIC_XXXX record with a DELAY
level; PREPARED and ROLLBACK records get no unit; ROLLBACK records get no index keys, others
``kernels.hashing``'s.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rocketlake.store import codec
from rocketlake.store.codec import (
    CQ_UNIT_SIZE,
    TRANSACTION_COMMIT,
    TRANSACTION_MASK,
    TRANSACTION_NOT,
    TRANSACTION_ROLLBACK,
)
from rocketlake.store.kernels import kernel
from rocketlake.store.kernels.hashing import (
    java_hash,
    most_tokens,
    put_index_key_hashes,
    signed32,
    topic_prefix,
)
from rocketlake.store.kernels.records import (
    PROPS_LEN,
    PROPS_START,
    STORE_TS,
    SYS_FLAG,
    TOPIC_LEN,
    TOPIC_START,
    byte,
    queue_key,
)
from rocketlake.store.kernels.words import find_byte, put_be32, put_be64
from rocketlake.store.layout import NAME_VALUE_BYTE, PROPERTY_SEPARATOR_BYTE

#: properties whose value spans ``property_spans`` finds, in this order
NAMES = (codec.PROPERTY_TAGS, codec.PROPERTY_KEYS, codec.PROPERTY_UNIQ_KEY, codec.PROPERTY_DELAY,
         codec.PROPERTY_REAL_TOPIC, codec.PROPERTY_REAL_QID)
TAGS, KEYS, UNIQ_KEY, DELAY, REAL_TOPIC, REAL_QID = range(len(NAMES))
_NAME_BYTES = np.frombuffer("".join(NAMES).encode(), dtype=np.uint8)
_NAME_ENDS = np.cumsum([len(n) for n in NAMES]).astype(np.int64)
_SCHEDULE = np.frombuffer(codec.SCHEDULE_TOPIC.encode(), dtype=np.uint8)


@kernel
def _is_name(buf: npt.NDArray[np.uint8], at: int, length: int, k: int) -> bool:
    s = _NAME_ENDS[k - 1] if k else 0
    if _NAME_ENDS[k] - s != length:
        return False
    for i in range(length):
        if buf[at + i] != _NAME_BYTES[s + i]:
            return False
    return True


@kernel
def next_property(buf: npt.NDArray[np.uint8], p: int, end: int) -> tuple[int, int]:
    """The properties segment starting at ``p`` (docs/FORMAT.md §3): ``(sep, stop)``, the position
    of its first \\x01 (``stop`` when it has none) and of its end (the next \\x02 or ``end``). The
    segment is a property when ``p < sep < stop - 1``: a name, \\x01, a non-empty value."""
    stop = find_byte(buf, p, end, PROPERTY_SEPARATOR_BYTE)
    return find_byte(buf, p, stop, NAME_VALUE_BYTE), stop


@kernel
def property_spans(buf: npt.NDArray[np.uint8], rows: npt.NDArray[np.int64],
                   spans: npt.NDArray[np.int64]) -> None:
    """``spans[i, k] = (start, length)`` of property ``NAMES[k]``'s value in record ``rows[i]``,
    ``(-1, 0)`` when absent."""
    n_names = _NAME_ENDS.size
    for i in range(rows.shape[0]):
        for k in range(n_names):
            spans[i, k, 0] = -1
            spans[i, k, 1] = 0
        p = rows[i, PROPS_START]
        end = p + rows[i, PROPS_LEN]
        while p < end:
            sep, seg = next_property(buf, p, end)
            if p < sep < seg - 1:
                for k in range(n_names):
                    if _is_name(buf, p, sep - p, k):
                        spans[i, k, 0] = sep + 1
                        spans[i, k, 1] = seg - sep - 1
            p = seg + 1


@kernel
def java_int(buf: npt.NDArray[np.uint8], start: int, length: int) -> tuple[bool, int]:
    """Java's ``Integer.parseInt`` of ``buf[start:start + length]`` (decimal, optional sign):
    ``(True, value)``, or ``(False, 0)`` where it would throw."""
    p = start
    end = start + length
    neg = False
    if p < end and (buf[p] == 43 or buf[p] == 45):
        neg = buf[p] == 45
        p += 1
    if p == end:
        return False, 0
    v = 0
    while p < end:
        d = byte(buf, p) - 48
        if d < 0 or d > 9:
            return False, 0
        v = v * 10 + d
        if v > (1 << 31):
            return False, 0
        p += 1
    if neg:
        v = -v
    if v > (1 << 31) - 1:
        return False, 0
    return True, v


@kernel
def _parse_level(buf: npt.NDArray[np.uint8], start: int, length: int) -> int:
    """Java's ``Integer.parseInt`` of a DELAY value; 0 where it would throw."""
    return java_int(buf, start, length)[1]


@kernel
def _is_schedule(buf: npt.NDArray[np.uint8], start: int, length: int) -> bool:
    if length != _SCHEDULE.size:
        return False
    for i in range(length):
        if buf[start + i] != _SCHEDULE[i]:
            return False
    return True


@kernel
def dispatch_columns(buf: npt.NDArray[np.uint8], rows: npt.NDArray[np.int64],
                     spans: npt.NDArray[np.int64], delay_levels_ms: npt.NDArray[np.int64],
                     tags_code: npt.NDArray[np.int64], to_queue: npt.NDArray[np.bool_],
                     key_counts: npt.NDArray[np.int64]) -> npt.NDArray[np.int32]:
    """Fill ``tags_code``, ``to_queue`` and ``key_counts`` per record (``spans`` from
    ``property_spans``) and return the index key hashes of all records, in order."""
    n = rows.shape[0]
    most = 0  # keys the records may have: the hashes' room (each KEYS is read once, to hash it)
    # Consecutive records mostly share their tags and topic: hash each only when it changes.
    last_tags_at, last_tags_len, last_tags_code = -1, -1, 0
    for i in range(n):
        tx = rows[i, SYS_FLAG] & TRANSACTION_MASK
        to_queue[i] = tx == TRANSACTION_NOT or tx == TRANSACTION_COMMIT
        keyed = tx != TRANSACTION_ROLLBACK and (spans[i, UNIQ_KEY, 0] >= 0 or spans[i, KEYS, 0] >= 0)
        key_counts[i] = keyed
        if keyed:
            most += (spans[i, UNIQ_KEY, 0] >= 0) + most_tokens(spans[i, KEYS, 1])
        code = 0
        delayed = False
        if spans[i, DELAY, 0] >= 0 and _is_schedule(buf, rows[i, TOPIC_START], rows[i, TOPIC_LEN]):
            level = _parse_level(buf, spans[i, DELAY, 0], spans[i, DELAY, 1])
            if level > delay_levels_ms.size:
                level = delay_levels_ms.size
            if level > 0:
                code = rows[i, STORE_TS] + delay_levels_ms[level - 1]
                delayed = True
        if not delayed and spans[i, TAGS, 0] >= 0:
            at, n_tags = spans[i, TAGS, 0], spans[i, TAGS, 1]
            if n_tags != last_tags_len or not _same(buf, at, last_tags_at, n_tags):
                last_tags_at, last_tags_len = at, n_tags
                last_tags_code = signed32(java_hash(buf, at, n_tags, 0))
            code = last_tags_code
        tags_code[i] = code
    hashes = np.empty(most, dtype=np.int32)
    k = 0
    last_topic_at, last_topic_len, prefix = -1, -1, 0
    for i in range(n):
        if key_counts[i] == 0:
            continue
        at, n_topic = rows[i, TOPIC_START], rows[i, TOPIC_LEN]
        if n_topic != last_topic_len or not _same(buf, at, last_topic_at, n_topic):
            last_topic_at, last_topic_len = at, n_topic
            prefix = topic_prefix(buf, at, n_topic)
        before = k
        k = put_index_key_hashes(prefix, buf, spans[i, UNIQ_KEY, 0], spans[i, UNIQ_KEY, 1],
                                 buf, spans[i, KEYS, 0], spans[i, KEYS, 1], hashes, k)
        key_counts[i] = k - before
    return hashes[:k].copy() if k < most else hashes


@kernel
def dispatch_rows(buf: npt.NDArray[np.uint8], raw: npt.NDArray[np.int64], a: int, b: int,
                  delay_levels_ms: npt.NDArray[np.int64], spans: npt.NDArray[np.int64],
                  tags_code: npt.NDArray[np.int64], to_queue: npt.NDArray[np.bool_],
                  key_counts: npt.NDArray[np.int64], ids: npt.NDArray[np.int64],
                  first: npt.NDArray[np.int64], count: int, table_key: npt.NDArray[np.int64],
                  table_id: npt.NDArray[np.int64], fields: npt.NDArray[np.int64],
                  columns: npt.NDArray[np.int64],
                  ) -> tuple[npt.NDArray[np.int32], int, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Everything a walk derives from its rows ``raw[a:b]`` in one call, while they are in the
    cache: ``property_spans`` into ``spans[:b - a]`` (room for the range's rows), from them
    ``dispatch_columns`` into rows ``a:b`` of the columns given (returns the rows' key hashes),
    ``number_topics`` (returns its ``count`` and table) and ``copy_fields`` of ``fields`` into
    ``columns``."""
    chunk = raw[a:b]
    scratch = spans[:b - a]
    property_spans(buf, chunk, scratch)
    hashes = dispatch_columns(buf, chunk, scratch, delay_levels_ms, tags_code[a:b], to_queue[a:b],
                              key_counts[a:b])
    count, table_key, table_id = number_topics(buf, raw, a, b, ids, first, count, table_key, table_id)
    copy_fields(raw, a, b, fields, columns)
    return hashes, count, table_key, table_id


@kernel
def topic_ids(buf: npt.NDArray[np.uint8],
              rows: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Number the records' topics by first appearance: ``(ids, first)``, record i's topic is the
    topic of record ``first[ids[i]]`` (``number_topics`` over all the rows)."""
    n = rows.shape[0]
    ids = np.empty(n, dtype=np.int64)
    first = np.empty(n, dtype=np.int64)
    count, _, _ = number_topics(buf, rows, 0, n, ids, first, 0, np.empty(0, dtype=np.int64),
                                np.empty(0, dtype=np.int64))
    return ids, first[:count]


@kernel
def number_topics(buf: npt.NDArray[np.uint8], rows: npt.NDArray[np.int64], a: int, b: int,
                  ids: npt.NDArray[np.int64], first: npt.NDArray[np.int64], count: int,
                  table_key: npt.NDArray[np.int64], table_id: npt.NDArray[np.int64],
                  ) -> tuple[int, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``topic_ids`` of ``rows[a:b]`` into ``ids[a:b]``, going on from the ``count`` topics
    numbered in ``rows[:a]`` (``first`` holds room for one per row): so a walk numbers each chunk
    of rows while they are in the cache. ``table_key`` / ``table_id``: the numbering's
    open-addressing table of (Java hash << 16 | length) -> the first topic with that key, empty
    (size 0) to start; returns ``(count, table_key, table_id)``, the table grown as needed, to
    pass to the next call. Topics are compared by their bytes; their Java hash and length only
    find the candidate."""
    slots = table_key.size
    if slots == 0 or 2 * (count + b - a) > slots:  # room for every topic these rows may add
        grown = max(16, slots)
        while grown < 2 * (count + b - a):
            grown *= 2
        old_key, old_id = table_key, table_id
        table_key = np.empty(grown, dtype=np.int64)
        table_id = np.full(grown, -1, dtype=np.int64)
        for s in range(slots):
            if old_id[s] >= 0:
                _find_or_add(table_key, table_id, old_key[s], old_id[s])
    if a > 0:  # the row before, numbered by the call before
        last_id = ids[a - 1]
        last_at, last_len = rows[a - 1, TOPIC_START], rows[a - 1, TOPIC_LEN]
    else:
        last_at, last_len, last_id = -1, -1, -1
    for i in range(a, b):
        at, length = rows[i, TOPIC_START], rows[i, TOPIC_LEN]
        if length == last_len and _same(buf, at, last_at, length):
            ids[i] = last_id
            continue
        key = (java_hash(buf, at, length, 0) << 16) | length
        found = -1
        j = _get_key(table_key, table_id, key)
        if j >= 0:
            if _same(buf, at, rows[first[j], TOPIC_START], length):
                found = j
            else:  # two topics with one hash: compare with every topic seen
                for j in range(count):
                    f = first[j]
                    if rows[f, TOPIC_LEN] == length and _same(buf, at, rows[f, TOPIC_START], length):
                        found = j
                        break
        if found < 0:
            found = count
            first[count] = i
            count += 1
            _find_or_add(table_key, table_id, key, found)  # a colliding topic keeps the first
        ids[i] = found
        last_at, last_len, last_id = at, length, found
    return count, table_key, table_id


#: the multiplier of the open-addressing tables' hash (2**64 / the golden ratio)
_GOLDEN = 0x9E3779B97F4A7C15


@kernel
def _slot(table_id: npt.NDArray[np.int64], key: int) -> np.int64:
    """Where ``key`` starts its probe in a table of ``table_id.size`` slots (a power of two, at
    most 2**32): bits 32 and up of a multiplicative hash."""
    return np.int64(((np.uint64(key) * np.uint64(_GOLDEN)) >> np.uint64(32))
                    & np.uint64(table_id.size - 1))


@kernel
def _get_key(table_key: npt.NDArray[np.int64], table_id: npt.NDArray[np.int64], key: int) -> int:
    """The value at ``key`` in an open-addressing table (values >= 0, -1 marks a free slot), -1
    when absent."""
    s = _slot(table_id, key)
    while table_id[s] >= 0:
        if table_key[s] == key:
            return int(table_id[s])
        s = (s + 1) & (table_id.size - 1)
    return -1


@kernel
def _find_or_add(table_key: npt.NDArray[np.int64], table_id: npt.NDArray[np.int64], key: int,
                 value: int) -> int:
    """The value at ``key`` in an open-addressing table; an absent ``key`` is set to ``value``
    (the table has a free slot), which is returned."""
    s = _slot(table_id, key)
    while table_id[s] >= 0:
        if table_key[s] == key:
            return int(table_id[s])
        s = (s + 1) & (table_id.size - 1)
    table_key[s], table_id[s] = key, value
    return value


@kernel
def _same(buf: npt.NDArray[np.uint8], a: int, b: int, n: int) -> bool:
    for k in range(n):
        if buf[a + k] != buf[b + k]:
            return False
    return True


@kernel
def plan_units(offsets: npt.NDArray[np.int64], sizes: npt.NDArray[np.int64],
               queue_ids: npt.NDArray[np.int64], record_queue_offsets: npt.NDArray[np.int64],
               topic_ids: npt.NDArray[np.int64], tags_code: npt.NDArray[np.int64],
               to_queue: npt.NDArray[np.bool_], by_queue: bool,
               ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8], npt.NDArray[np.int64],
                          npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The ConsumeQueue units of the records (columns: CommitLog offset, size, queue id and
    QUEUEOFFSET, topic id, tagsCode) ``to_queue``: ``(rows, units, queue_offsets, first,
    last_end)``. ``rows``: those records, grouped by queue when ``by_queue`` (queues ordered by
    ``codec.queue_key``, topic id then queue id as an unsigned 32-bit number; CommitLog order
    within a queue), else in CommitLog order; ``units``: their units' bytes
    (``codec.CQ_UNIT_DTYPE``) and ``queue_offsets`` their QUEUEOFFSETs, in that order; by queue,
    ``first[k]`` is where queue k's rows start and ``last_end[k]`` the largest CommitLog end
    (offset + size) of its records (both empty otherwise)."""
    n = offsets.size
    count = 0
    for i in range(n):
        count += to_queue[i]
    rows = np.empty(count, dtype=np.int64)
    first = np.zeros(0, dtype=np.int64)
    last_end = np.zeros(0, dtype=np.int64)
    if by_queue:
        # each row's queue numbered by first appearance through an open-addressing table, then
        # the numbers ranked in key order
        slots = 16
        while slots < 2 * count:
            slots *= 2
        table_key = np.empty(slots, dtype=np.int64)
        table_group = np.full(slots, -1, dtype=np.int64)
        keys = np.empty(count, dtype=np.int64)
        group = np.empty(count, dtype=np.int64)
        m = 0
        distinct = 0
        for i in range(n):
            if to_queue[i]:
                key = queue_key(topic_ids[i], queue_ids[i])
                g = _find_or_add(table_key, table_group, key, distinct)
                if g == distinct:
                    keys[distinct] = key
                    distinct += 1
                group[m] = g
                m += 1
        order = np.argsort(keys[:distinct])
        rank = np.empty(distinct, dtype=np.int64)
        for g in range(distinct):
            rank[order[g]] = g
        group_sizes = np.zeros(distinct, dtype=np.int64)
        for j in range(count):
            group[j] = rank[group[j]]
            group_sizes[group[j]] += 1
        first = np.zeros(distinct, dtype=np.int64)
        for g in range(1, distinct):
            first[g] = first[g - 1] + group_sizes[g - 1]
        at = first.copy()
        last_end = np.full(distinct, -(1 << 63), dtype=np.int64)
        j = 0
        for i in range(n):
            if to_queue[i]:
                g = group[j]
                rows[at[g]] = i
                at[g] += 1
                last_end[g] = max(last_end[g], offsets[i] + sizes[i])
                j += 1
    else:
        j = 0
        for i in range(n):
            if to_queue[i]:
                rows[j] = i
                j += 1
    units = np.empty(count * CQ_UNIT_SIZE, dtype=np.uint8)
    queue_offsets = np.empty(count, dtype=np.int64)
    for j in range(count):
        i = rows[j]
        p = j * CQ_UNIT_SIZE
        put_be64(units, p, offsets[i])
        put_be32(units, p + 8, sizes[i])
        put_be64(units, p + 12, tags_code[i])
        queue_offsets[j] = record_queue_offsets[i]
    return rows, units, queue_offsets, first, last_end


@kernel
def key_columns(offsets: npt.NDArray[np.int64], store_ts: npt.NDArray[np.int64],
                key_counts: npt.NDArray[np.int64],
                total: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The CommitLog offset and store time of each of the ``total`` index keys: record i's
    repeated ``key_counts[i]`` times (``np.repeat`` of both columns)."""
    key_offsets = np.empty(total, dtype=np.int64)
    ts = np.empty(total, dtype=np.int64)
    k = 0
    for i in range(offsets.size):
        for _ in range(key_counts[i]):
            key_offsets[k] = offsets[i]
            ts[k] = store_ts[i]
            k += 1
    return key_offsets, ts


@kernel
def copy_fields(raw: npt.NDArray[np.int64], a: int, b: int, fields: npt.NDArray[np.int64],
                out: npt.NDArray[np.int64]) -> None:
    """``out[k, a:b] = raw[a:b, fields[k]]``: walked rows' fields as contiguous columns, copied
    while the rows are in the cache."""
    for i in range(a, b):
        for k in range(fields.size):
            out[k, i] = raw[i, fields[k]]
