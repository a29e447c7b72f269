"""Messages as columns (a pyarrow Table or RecordBatch) validated and laid out for the encode
kernel (``kernels.encode``): the columnar counterpart of ``message_encoder.MessageEncoder``.

The rules and error texts are ``MessageEncoder.prepare``'s. Checks run over whole columns and
mark the rows that may break a rule; each marked row, in order, is then checked by
``prepare`` itself, so the error a table gets is the one ``put`` gives for its first bad row.
Rows that need more than tags and keys (properties, a delay level, a sys flag, explicit hosts)
are encoded by ``prepare`` one by one; the common row never becomes a Python object.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rocketlake.store import codec
from rocketlake.store.errors import MessageRejected
from rocketlake.store.kernels import encode as ke
from rocketlake.store.message import Message
from rocketlake.store.message_encoder import INT_FIELDS, MessageEncoder, Prepared

I64 = npt.NDArray[np.int64]
Bytes = npt.NDArray[np.uint8]

#: columns of a message table besides ``topic`` and ``body`` (the Message fields)
INT_COLUMNS = ("queue_id", "flag", "delay_level", "sys_flag", "reconsume_times",
               "prepared_transaction_offset", "born_timestamp", "store_timestamp")
STRING_COLUMNS = ("tags", "born_host", "store_host")
COLUMNS = frozenset({"topic", "body", "keys", "properties", *INT_COLUMNS, *STRING_COLUMNS})
_LIMITS = {**INT_FIELDS, "queue_id": (0, codec.JAVA_INT_MAX), "sys_flag": (0, codec.JAVA_INT_MAX)}
_NULL_MEANS_DEFAULT = frozenset({"born_timestamp", "store_timestamp"})  # None: the store's clock
_NULLABLE = _NULL_MEANS_DEFAULT | {"tags", "keys", "properties", "born_host", "store_host"}
_EMPTY = np.zeros(0, dtype=np.uint8)
_EMPTY.flags.writeable = False  # as the buffers of Arrow columns: one kernel specialization
#: record length without body, topic and properties (IPv4 hosts; ``codec.record_length``)
_FIXED = codec.record_length(0, 0, 0, 0)
_V6_EXTRA = 12
#: queues (topics x queue ids up to the largest) that ``queue_groups`` counts rows into without
#: sorting them, even for a short table
_DENSE_GROUPS = 1 << 16


@dataclass(frozen=True)
class BytesColumn:
    """A string or binary column: row i is ``data[start[i]:start[i]+length[i]]``, length 0 when null."""
    start: I64
    length: I64
    data: Bytes
    valid: npt.NDArray[np.bool_]


@dataclass
class EncodedTable:
    """Validated rows ready for ``kernels.encode.encode``: ``rows`` holds its ``COLUMNS`` (queue
    offsets still 0; ``BORN_TS`` / ``STORE_TS`` -1 where the store's clock decides), the other
    fields are the byte buffers the rows point into."""
    rows: I64
    topics: list[str]
    topic_off: I64
    topic_data: Bytes
    hosts: list[bytes]            # address bytes by host id (``BORN_HOST`` / ``STORE_HOST``)
    host_table: Bytes             # the same, one 16-byte row each
    body: Bytes
    tags: Bytes
    keys: Bytes
    props: Bytes
    to_queue: npt.NDArray[np.bool_]   # gets a queue offset and a ConsumeQueue unit
    key_counts: I64                   # index keys per row
    #: the tagsCode of each row with whole properties (a delay for ``delayed`` ones: the delivery
    #: time is the store time plus it), and the key hashes of their index keys, flat
    #: (``store.dispatch``'s rules); ``dispatch`` adds those of the rows laid out from tags and keys
    tags_code: I64
    delayed: npt.NDArray[np.bool_]
    given_hashes: npt.NDArray[np.int32]
    settings: tuple[object, ...]      # the encoder's (``MessageEncoder.settings``)

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    @cached_property
    def queue_groups(self) -> tuple[list[tuple[str, int]], I64, I64, I64]:
        """The rows that take a queue offset, grouped by queue: (queues, rows per queue, those
        rows sorted by queue then position, each one's rank within its queue)."""
        sel = np.flatnonzero(self.to_queue)
        topic, queue_id = self.rows[sel, ke.TOPIC], self.rows[sel, ke.QUEUE_ID]
        if sel.size and queue_id.min() >= 0:
            width = int(queue_id.max()) + 1
            ngroups = (int(topic.max()) + 1) * width
            if ngroups <= max(sel.size, _DENSE_GROUPS):  # a counting sort by topic, then queue
                counts = np.empty(ngroups, dtype=np.int64)
                grouped, ranks = np.empty_like(sel), np.empty_like(sel)
                ke.group_rows(topic * width + queue_id, ngroups, sel, counts, grouped, ranks)
                dense = np.flatnonzero(counts)
                queues = [(self.topics[g // width], g % width) for g in dense.tolist()]
                return queues, counts[dense], grouped, ranks
        key = codec.queue_key(topic, queue_id)
        order = np.argsort(key, kind="stable")
        sel, key = sel[order], key[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else np.zeros(0, np.int64)
        counts = np.diff(np.r_[starts, key.size]).astype(np.int64)
        ranks = np.arange(key.size, dtype=np.int64) - np.repeat(starts, counts)
        queues = [(self.topics[t], q) for t, q in map(codec.queue_of_key, key[starts].tolist())]
        return queues, counts, sel.astype(np.int64), ranks

    def dispatch(self) -> tuple[I64, npt.NDArray[np.int32]]:
        """(tagsCode per row, index key hashes flat): what the rows add to the ConsumeQueues and
        the index (``store.dispatch``'s rules). ``STORE_TS`` must be set. Run behind the write, on
        the dispatcher's thread (``MessageStore.put_encoded``), beside the next table's validation."""
        tags_code = self.tags_code.copy()
        hashes = np.empty(int(self.key_counts.sum()), dtype=np.int32)
        ke.dispatch_hashes(self.rows, self.topic_off, self.topic_data, self.tags, self.keys,
                           self.key_counts, self.given_hashes, tags_code, hashes)
        tags_code[self.delayed] += self.rows[self.delayed, ke.STORE_TS]
        return tags_code, hashes

    def encode_into(self, dst: Bytes, pos: int, base: int, lo: int, hi: int) -> int:
        """Write rows ``lo..hi`` into ``dst`` at ``pos`` (``dst[0]`` is CommitLog offset ``base``);
        return the end position."""
        end: int = ke.encode(dst, pos, base, lo, hi, self.rows, self.host_table.ravel(), self.body,
                             self.topic_off, self.topic_data, self.tags, self.keys, self.props)
        return end


def _column(data: pa.Table | pa.RecordBatch, name: str) -> pa.Array | None:
    """The column ``name`` as one array; None when absent, or all null (type ``null``) where a
    null is the default."""
    if name not in data.column_names:
        return None
    col = data.column(name)
    if pa.types.is_null(col.type) and name in _NULLABLE:
        return None
    if not isinstance(col, pa.ChunkedArray):
        return col
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


def _bytes_column(name: str, arr: pa.Array, binary: bool) -> BytesColumn:
    """Offsets and data of a string (or, if ``binary``, binary) column."""
    t = arr.type
    if pa.types.is_dictionary(t):
        arr, t = arr.cast(t.value_type), t.value_type
    ok = (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
          or pa.types.is_binary_view(t)
          if binary else pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))
    if not ok:
        raise MessageRejected(f"column {name!r} must be {'binary' if binary else 'string'}, got {t}")
    if pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t) or pa.types.is_string_view(t):
        t = pa.binary() if binary else pa.string()  # as offsets and data
        arr = arr.cast(t)
    n = len(arr)
    _, offsets, data = arr.buffers()
    wide = pa.types.is_large_binary(t) or pa.types.is_large_string(t)
    off = np.frombuffer(offsets, dtype=np.int64 if wide else np.int32)[arr.offset:arr.offset + n + 1]
    valid = _valid(arr)
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else _EMPTY
    # read only, whether or not Arrow made the buffer mutable (``pa.array`` does): the kernels
    # run one specialization for both
    raw.flags.writeable = False
    start, length = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    spans = ke.string_spans(off, valid, raw.size, start, length)
    # in order, inside the data and ASCII: valid UTF-8; otherwise Arrow's check says what is wrong
    if not binary and not (spans and ke.is_ascii(raw, int(off[0]), int(off[-1]))):
        try:
            arr.validate(full=True)
        except pa.ArrowInvalid as e:
            raise MessageRejected(f"column {name!r}: {e}") from None
    if not spans:
        start = off[:-1].astype(np.int64)
        length = np.where(valid, np.diff(off).astype(np.int64), 0)
    return BytesColumn(start, length, raw, valid)


def _valid(arr: pa.Array) -> npt.NDArray[np.bool_]:
    """Which rows of ``arr`` are not null (from its validity bitmap)."""
    n = len(arr)
    if arr.null_count == 0:
        return np.ones(n, dtype=np.bool_)
    bitmap = arr.buffers()[0]
    if bitmap is None:  # type null: no value at all
        return np.zeros(n, dtype=np.bool_)
    bits = np.unpackbits(np.frombuffer(bitmap, dtype=np.uint8), bitorder="little")
    valid: npt.NDArray[np.bool_] = bits[arr.offset:arr.offset + n].astype(np.bool_)
    return valid


def _int_column(name: str, arr: pa.Array) -> tuple[I64, npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """(values, valid, beyond int64) of an integer column (0 where null; a uint64 above int64's
    range wraps)."""
    if not pa.types.is_integer(arr.type):
        raise MessageRejected(f"column {name!r} must be integers, got {arr.type}")
    n, valid = len(arr), _valid(arr)
    dtype = np.dtype(arr.type.to_pandas_dtype())
    raw = (np.frombuffer(arr.buffers()[1], dtype=dtype)[arr.offset:arr.offset + n] if n
           else np.zeros(0, dtype=dtype))
    beyond = raw > np.iinfo(np.int64).max if dtype == np.uint64 else np.zeros(n, dtype=np.bool_)
    values: I64 = np.where(valid, raw.astype(np.int64), 0)
    return values, valid, beyond


def _dictionary(col: BytesColumn) -> tuple[I64, list[str]]:
    """(id per row, distinct values) of a validated string column (a null row counts as "")."""
    n = col.start.size
    if n and ke.all_same(col.data, col.start, col.length):  # one value (a table of one topic)
        a, k = int(col.start[0]), int(col.length[0])
        return np.zeros(n, dtype=np.int64), [col.data[a:a + k].tobytes().decode()]
    hashes = np.empty(n, dtype=np.uint64)
    ke.fnv_hashes(col.data, col.start, col.length, hashes)
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    ids = inverse.astype(np.int64).ravel()
    if not ke.same_bytes(col.data, col.start, col.length, first[ids]):  # two values, one hash
        index: dict[bytes, int] = {}
        ids = np.fromiter((index.setdefault(col.data[s:s + k].tobytes(), len(index)) for s, k in
                           zip(col.start.tolist(), col.length.tolist())), dtype=np.int64, count=n)
        return ids, [b.decode() for b in index]
    names = [col.data[s:s + k].tobytes().decode()
             for s, k in zip(col.start[first].tolist(), col.length[first].tolist())]
    return ids, names


class TableEncoder:
    """Validates and lays out message tables for one store (its ``MessageEncoder``'s settings)."""

    def __init__(self, encoder: MessageEncoder) -> None:
        self.encoder = encoder

    def encode(self, data: pa.Table | pa.RecordBatch) -> EncodedTable:
        """The table's rows, validated; MessageRejected (``index``: the first bad row, None for a
        bad column) otherwise."""
        unknown = set(data.column_names) - COLUMNS
        if unknown:
            raise MessageRejected(f"unknown column(s) {', '.join(sorted(unknown))}; a message table "
                                  f"has {', '.join(sorted(COLUMNS))}")
        for name in ("topic", "body"):
            if name not in data.column_names:
                raise MessageRejected(f"missing column {name!r}")
        return _Encoding(self.encoder, data).run()


def _values(arr: pa.Array, rows: list[int], taken: pa.Array) -> list[Any]:
    """The Python values of ``arr`` at ``rows`` (``taken``: the same as an Arrow array)."""
    try:
        values: list[Any] = arr.take(taken).to_pylist()
        return values
    except pa.ArrowNotImplementedError:  # a type ``take`` has no kernel for (binary_view, ...)
        return [arr[i].as_py() for i in rows]


def _message(kw: dict[str, Any]) -> Message:
    """A message table's row (column name -> Python value) as a Message."""
    if kw.get("properties") is not None:
        kw["properties"] = dict(kw["properties"])
    # a null where a value is required (queue_id, flag, ...) stays None: prepare rejects it
    return Message(**{k: v for k, v in kw.items() if v is not None or k not in _NULLABLE})


class _Encoding:
    """One table's encoding (the state of ``TableEncoder.encode``)."""

    def __init__(self, encoder: MessageEncoder, data: pa.Table | pa.RecordBatch) -> None:
        self.encoder, self.n = encoder, data.num_rows
        self.arrays = {name: a for name in COLUMNS if (a := _column(data, name)) is not None}

    def messages(self, rows: list[int]) -> Iterator[tuple[int, Message]]:
        """(row, Message) of each of ``rows`` in order, every value as the table holds it (the
        rows' values are converted column by column, not as one scalar object each)."""
        if not rows:
            return
        taken = pa.array(rows, type=pa.int64())
        cols = {name: _values(arr, rows, taken) for name, arr in self.arrays.items()}
        for j, i in enumerate(rows):
            yield i, _message({name: col[j] for name, col in cols.items()})

    def run(self) -> EncodedTable:
        n, enc, arrays = self.n, self.encoder, self.arrays
        suspect = np.zeros(n, dtype=np.bool_)
        # topic: each distinct name checked once
        topic = _bytes_column("topic", arrays["topic"], binary=False)
        topic_ids, topics = _dictionary(topic)
        suspect |= ~topic.valid
        if topics:
            suspect |= np.array([not codec.is_topic(t) for t in topics])[topic_ids]
        body = _bytes_column("body", arrays["body"], binary=True)
        suspect |= ~body.valid | (body.length > enc.max_body)
        ints: dict[str, I64] = {}
        for name in INT_COLUMNS:
            arr = arrays.get(name)
            if arr is None:
                ints[name] = np.full(n, -1 if name in _NULL_MEANS_DEFAULT else 0, dtype=np.int64)
                continue
            values, valid, beyond = _int_column(name, arr)
            lo, hi = _LIMITS[name]
            suspect |= (values < lo) | (values > hi) | beyond
            if name in _NULL_MEANS_DEFAULT:
                values = np.where(valid, values, -1)
            else:
                suspect |= ~valid
            ints[name] = values
        tags = self._string("tags")
        keys = self._keys(suspect)
        for col in (tags, keys):
            sep = np.empty(n, dtype=np.bool_)
            ke.has_separator(col.data, col.start, col.length, sep)
            suspect |= sep
        general = (ints["delay_level"] != 0) | (ints["sys_flag"] != 0)
        for name in ("properties", "born_host", "store_host"):
            if name in arrays:
                general |= _valid(arrays[name])
        if "properties" in arrays and not pa.types.is_map(arrays["properties"].type):
            raise MessageRejected(f"column 'properties' must be map<string, string>, "
                                  f"got {arrays['properties'].type}")
        props_len = _built_props_len(tags.length, keys.length)
        topic_len = np.array([len(t.encode()) for t in topics] or [0], dtype=np.int64)
        length = _FIXED + body.length + topic_len[topic_ids] + props_len
        # both hosts default to the store's: with an IPv6 store host, both are IPv6
        common_sys_flag = (codec.FLAG_BORNHOST_V6 | codec.FLAG_STOREHOST_V6
                           if len(enc.store_addr) == 16 else 0)
        if common_sys_flag:
            length += 2 * _V6_EXTRA
        suspect |= (props_len > codec.MAX_PROPERTIES_LENGTH) | (length > enc.max_record)
        # properties and hosts alone are laid out from the columns (``_Extras``); a row whose
        # value breaks or may break a rule, or that needs prepare's rewrites, is prepared
        extras = _Extras.of(self, np.flatnonzero(general & (ints["delay_level"] == 0)
                                                 & (ints["sys_flag"] == 0) & ~suspect),
                            length - props_len - (2 * _V6_EXTRA if common_sys_flag else 0))
        general[extras.rows] = False
        suspect &= ~general

        prepared = self._prepare(np.flatnonzero(suspect), np.flatnonzero(general))

        rows = np.zeros((n, ke.NCOLUMNS), dtype=np.int64, order="F")  # columns contiguous
        rows[:, ke.TOPIC] = topic_ids
        rows[:, ke.QUEUE_ID] = ints["queue_id"]
        rows[:, ke.FLAG] = ints["flag"]
        rows[:, ke.RECONSUME] = ints["reconsume_times"]
        rows[:, ke.PREPARED] = ints["prepared_transaction_offset"]
        rows[:, ke.BORN_TS] = ints["born_timestamp"]
        rows[:, ke.STORE_TS] = ints["store_timestamp"]
        rows[:, ke.STORE_PORT] = enc.store_port
        rows[:, ke.BODY_START], rows[:, ke.BODY_LEN] = body.start, body.length
        rows[:, ke.TAGS_START], rows[:, ke.TAGS_LEN] = tags.start, tags.length
        rows[:, ke.KEYS_START], rows[:, ke.KEYS_LEN] = keys.start, keys.length
        rows[:, ke.PROPS_LEN] = -1
        rows[:, ke.SYS_FLAG] = common_sys_flag
        rows[:, ke.LENGTH] = length
        to_queue = np.ones(n, dtype=np.bool_)
        key_counts = np.empty(n, dtype=np.int64)
        ke.token_counts(keys.data, keys.start, keys.length, key_counts)
        tags_code = np.zeros(n, dtype=np.int64)
        delayed = np.zeros(n, dtype=np.bool_)
        host_id = {enc.store_addr: 0}
        blobs: list[bytes] = []
        at = 0
        if len(extras.rows):
            sel = extras.rows
            rows[sel, ke.BORN_HOST] = [host_id.setdefault(a, len(host_id)) for a in extras.born_addr]
            rows[sel, ke.STORE_HOST] = [host_id.setdefault(a, len(host_id)) for a in extras.store_addr]
            rows[sel, ke.BORN_PORT], rows[sel, ke.STORE_PORT] = extras.born_port, extras.store_port
            rows[sel, ke.SYS_FLAG], rows[sel, ke.LENGTH] = extras.sys_flag, extras.length
            rows[sel, ke.PROPS_LEN] = [len(pb) for pb in extras.props]
            rows[sel, ke.PROPS_START] = np.cumsum(rows[sel, ke.PROPS_LEN]) - rows[sel, ke.PROPS_LEN]
            at = int(rows[sel[-1], ke.PROPS_START] + rows[sel[-1], ke.PROPS_LEN])
            blobs.extend(extras.props)
            key_counts[sel] = [len(k) for k in extras.index_keys]
            tags_code[sel] = extras.tags_code
        index_keys: dict[int, tuple[str, ...]] = dict(zip(extras.rows.tolist(), extras.index_keys))
        if prepared:
            topic_id = {t: k for k, t in enumerate(topics)}
            for i, p in prepared.items():
                tid = topic_id.get(p.topic)
                if tid is None:
                    tid = topic_id[p.topic] = len(topics)
                    topics.append(p.topic)
                pb = p.tail[len(p.topic) + 3:]  # TOPICLEN + topic + PROPLEN, then properties
                r = rows[i]
                r[ke.TOPIC], r[ke.QUEUE_ID], r[ke.SYS_FLAG] = tid, p.queue_id, p.sys_flag
                r[ke.BORN_HOST] = host_id.setdefault(p.born_addr, len(host_id))
                r[ke.STORE_HOST] = host_id.setdefault(p.store_addr, len(host_id))
                r[ke.BORN_PORT], r[ke.STORE_PORT] = p.born_port, p.store_port
                r[ke.PROPS_START], r[ke.PROPS_LEN], r[ke.LENGTH] = at, len(pb), p.length
                blobs.append(pb)
                at += len(pb)
                to_queue[i] = p.to_queue
                key_counts[i] = len(p.index_keys)
                tags_code[i], delayed[i] = p.tags_code, p.delayed
                index_keys[i] = p.index_keys
        hosts = list(host_id)
        props = b"".join(blobs)
        given = list(chain.from_iterable(index_keys[i] for i in sorted(index_keys)))
        host_table = np.zeros((len(hosts), 16), dtype=np.uint8)
        for k, addr in enumerate(hosts):
            host_table[k, :len(addr)] = np.frombuffer(addr, dtype=np.uint8)
        names = [t.encode() for t in topics]
        topic_off = np.zeros(len(names) + 1, dtype=np.int64)
        topic_off[1:] = np.cumsum([len(b) for b in names])
        topic_data = np.frombuffer(b"".join(names), dtype=np.uint8)
        return EncodedTable(rows, topics, topic_off, topic_data, hosts, host_table, body.data,
                            tags.data, keys.data, np.frombuffer(props, dtype=np.uint8), to_queue,
                            key_counts, tags_code, delayed,
                            codec.index_key_hash(codec.java_hash_many(given)), enc.settings)

    def _prepare(self, suspects: I64, general: I64) -> dict[int, Prepared]:
        """``prepare`` the ``general`` rows; raise the MessageRejected (``index``: its row) of the
        first row, suspect or general, that ``prepare`` refuses."""
        prepare = self.encoder.prepare
        first_bad, error = self.n, None
        for i, m in self.messages(suspects.tolist()):
            try:
                prepare(m)
            except MessageRejected as e:
                first_bad, error = i, e
                break
        prepared: dict[int, Prepared] = {}
        for i, m in self.messages(general[general < first_bad].tolist()):
            try:
                prepared[i] = prepare(m)
            except MessageRejected as e:
                first_bad, error = i, e
                break
        if error is not None:
            raise MessageRejected(str(error), index=first_bad)
        return prepared

    def _string(self, name: str) -> BytesColumn:
        arr = self.arrays.get(name)
        if arr is None:
            return BytesColumn(np.zeros(self.n, np.int64), np.zeros(self.n, np.int64), _EMPTY,
                               np.zeros(self.n, np.bool_))
        return _bytes_column(name, arr, binary=False)

    def _keys(self, suspect: npt.NDArray[np.bool_]) -> BytesColumn:
        """KEYS values: a string column, or a list of strings joined by spaces (a list holding a
        null is marked ``suspect``)."""
        arr = self.arrays.get("keys")
        if arr is None:
            return self._string("keys")
        t = arr.type
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            v = t.value_type
            if not (pa.types.is_string(v) or pa.types.is_large_string(v) or pa.types.is_string_view(v)):
                raise MessageRejected(f"column 'keys' must be string or list<string>, got {t}")
            n = len(arr)
            off: I64 = np.zeros(1, dtype=np.int64)
            if n:
                wide = pa.types.is_large_list(t)
                raw = np.frombuffer(arr.buffers()[1], dtype=np.int64 if wide else np.int32)
                off = raw[arr.offset:arr.offset + n + 1].astype(np.int64)
            child = _bytes_column("keys", arr.values, binary=False)
            valid = _valid(arr)
            start, length = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
            out = np.empty(int(child.length.sum()) + child.length.size, dtype=np.uint8)
            suspect |= ke.join_keys(off, valid, child.start, child.length, child.valid, child.data,
                                    start, length, out)
            out.flags.writeable = False  # as the buffers of Arrow columns: one kernel specialization
            return BytesColumn(start, length, out, valid)
        return self._string("keys")


#: property names whose value ``prepare`` sets or reads besides copying it: a row giving one is
#: prepared
_RESERVED = [codec.PROPERTY_TAGS, codec.PROPERTY_KEYS, codec.PROPERTY_DELAY]


def _strings(arr: pa.Array | None, taken: pa.Array) -> list[str | None]:
    """The Python strings of a string (or list of strings: joined by spaces) column at rows
    ``taken``; all None without the column."""
    if arr is None:
        return [None] * len(taken)
    arr = arr.take(taken)
    if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
        import pyarrow.compute as pc  # only here: a writer's open and plain rows do not need it

        arr = pc.binary_join(arr, codec.KEY_SEPARATOR)
    values: list[str | None] = arr.to_pylist()
    return values


def _user_properties(arr: pa.Array | None, taken: pa.Array
                     ) -> tuple[list[str | None], list[str | None], npt.NDArray[np.bool_]]:
    """(properties string, UNIQ_KEY, whether ``prepare`` must decide) of a map column's rows
    ``taken``: decided there are a null value, an empty name, a \\x01 or \\x02 separator, a name
    given twice or a ``_RESERVED`` one."""
    import pyarrow.compute as pc  # only here: a writer's open and plain rows do not need it

    n = len(taken)
    if arr is None:
        return [None] * n, [None] * n, np.zeros(n, dtype=np.bool_)
    m = arr.take(taken)
    off = np.frombuffer(m.offsets.buffers()[1], dtype=np.int32)[m.offsets.offset:m.offsets.offset + n + 1]
    names, values = m.keys, m.items
    lo, hi = int(off[0]), int(off[-1])
    names, values = names.slice(lo, hi - lo), values.slice(lo, hi - lo)
    parent = np.repeat(np.arange(n), np.diff(off))
    bad = (np.asarray(values.is_null(), dtype=np.bool_)
           | np.asarray(pc.is_in(names, pa.array(_RESERVED)), dtype=np.bool_))
    for col in (names, values):
        text = _bytes_column("properties", col, binary=False)
        sep = np.empty(len(col), dtype=np.bool_)
        ke.has_separator(text.data, text.start, text.length, sep)
        bad |= sep | (text.length == 0 if col is names else False)
    if len(names):
        ids = np.asarray(pc.dictionary_encode(names).indices, dtype=np.int64)
        pair = np.sort(parent * (int(ids.max()) + 1) + ids)
        twice = pair[1:][pair[1:] == pair[:-1]] // (int(ids.max()) + 1)
    else:
        twice = np.zeros(0, dtype=np.int64)
    decide = np.zeros(n, dtype=np.bool_)
    decide[parent[bad]] = True
    decide[twice] = True
    pairs = pc.binary_join_element_wise(names, values, codec.NAME_VALUE_SEPARATOR)
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array(off - lo), pairs, mask=m.is_null()),
                            codec.PROPERTY_SEPARATOR).to_pylist()
    uniq = pc.map_lookup(m, codec.PROPERTY_UNIQ_KEY, "first").to_pylist()
    return joined, uniq, decide


@dataclass
class _Extras:
    """Rows with properties or hosts (no delay, no sys flag) laid out from the columns, as
    ``prepare`` would: user properties in their order, then TAGS and KEYS."""
    rows: I64
    props: Sequence[bytes]
    born_addr: Sequence[bytes]
    born_port: Sequence[int]
    store_addr: Sequence[bytes]
    store_port: Sequence[int]
    sys_flag: Sequence[int]
    length: Sequence[int]
    index_keys: Sequence[tuple[str, ...]]
    tags_code: Sequence[int]

    @classmethod
    def of(cls, encoding: _Encoding, sel: I64, fixed: I64) -> _Extras:
        """The rows ``sel`` that need no more than this (``fixed``: each row's record length
        without properties and IPv6 hosts); the others are left to ``prepare``."""
        enc, arrays = encoding.encoder, encoding.arrays
        out = cls(np.zeros(0, dtype=np.int64), [], [], [], [], [], [], [], [], [])
        if not sel.size:
            return out
        taken = pa.array(sel, type=pa.int64())
        try:
            topics, tags = _strings(arrays["topic"], taken), _strings(arrays.get("tags"), taken)
            keys = _strings(arrays.get("keys"), taken)
            born, store = _strings(arrays.get("born_host"), taken), _strings(arrays.get("store_host"), taken)
            user, uniq, decide = _user_properties(arrays.get("properties"), taken)
        except pa.ArrowNotImplementedError:  # a type ``take`` has no kernel for: prepare decides
            return out
        born_default, store_default = (enc.store_addr, 0), (enc.store_addr, enc.store_port)
        tags_sep, keys_sep = (codec.PROPERTY_SEPARATOR + codec.PROPERTY_TAGS + codec.NAME_VALUE_SEPARATOR,
                              codec.PROPERTY_SEPARATOR + codec.PROPERTY_KEYS + codec.NAME_VALUE_SEPARATOR)
        host, tags_code, max_record = enc.host, enc.tags_code, enc.max_record
        v6 = {(4, 4): 0, (16, 4): codec.FLAG_BORNHOST_V6, (4, 16): codec.FLAG_STOREHOST_V6,
              (16, 16): codec.FLAG_BORNHOST_V6 | codec.FLAG_STOREHOST_V6}
        laid: list[tuple[int, bytes, bytes, int, bytes, int, int, int, tuple[str, ...], int]] = []
        for i, f, t, tg, k, u, uq, b, h, d in zip(sel.tolist(), fixed[sel].tolist(), topics, tags,
                                                  keys, user, uniq, born, store, decide.tolist()):
            if d:
                continue
            # user properties, then TAGS and KEYS, each after a separator (dropped at the start)
            pb = f"{'' if u is None else u}{tags_sep + tg if tg else ''}{keys_sep + k if k else ''}"
            if pb and not u:
                pb = pb[1:]
            pb_bytes = pb.encode()
            try:
                born_addr, born_port = host("born_host", b, born_default)
                store_addr, store_port = host("store_host", h, store_default)
            except MessageRejected:
                continue
            sys_flag = v6[len(born_addr), len(store_addr)]
            length = f + len(pb_bytes) + (_V6_EXTRA if len(born_addr) == 16 else 0) \
                + (_V6_EXTRA if len(store_addr) == 16 else 0)
            if len(pb_bytes) > codec.MAX_PROPERTIES_LENGTH or length > max_record:
                continue
            prefix = t + codec.INDEX_KEY_SEPARATOR
            index_keys = [prefix + uq] if uq else []
            if k:
                index_keys.extend(prefix + key for key in k.split(codec.KEY_SEPARATOR) if key)
            laid.append((i, pb_bytes, born_addr, born_port, store_addr, store_port, sys_flag, length,
                         tuple(index_keys), tags_code(tg) if tg else 0))
        if not laid:
            return out
        columns = list(zip(*laid))
        return cls(np.array(columns[0], dtype=np.int64), *columns[1:])


def _built_props_len(tags_len: I64, keys_len: I64) -> I64:
    """``kernels.encode.built_props_len`` over columns."""
    out = np.empty(tags_len.size, dtype=np.int64)
    ke.built_props_lens(tags_len, keys_len, out)
    return out


_MESSAGE_FIELDS = ("topic", "body", "queue_id", "tags", "keys", "properties", "flag",
                   "delay_level", "sys_flag", "born_timestamp", "born_host", "store_host",
                   "store_timestamp", "reconsume_times", "prepared_transaction_offset")
_TYPES = {"topic": pa.string(), "body": pa.binary(), "tags": pa.string(), "keys": pa.string(),
          "properties": pa.map_(pa.string(), pa.string()), "born_host": pa.string(),
          "store_host": pa.string(), **{name: pa.int64() for name in INT_COLUMNS}}
_NONE = type(None)
_INT: frozenset[type] = frozenset({int})
_KEY_LISTS: frozenset[type] = frozenset({list, tuple, _NONE})
#: the Python types each Message field may hold on the columnar path (default: int); a message
#: with any other is left to ``prepare``
_PLAIN: dict[str, frozenset[type]] = {
    "topic": frozenset({str}), "body": frozenset({bytes}), "tags": frozenset({str, _NONE}),
    "keys": frozenset({str, list, tuple, _NONE}), "properties": frozenset({dict, _NONE}),
    "born_host": frozenset({str, _NONE}), "store_host": frozenset({str, _NONE}),
    "born_timestamp": frozenset({int, _NONE}), "store_timestamp": frozenset({int, _NONE})}
#: a Message field's default: a column holding only it is left out
_DEFAULTS: dict[str, int | None] = {name: 0 for name in INT_COLUMNS if name not in _NULL_MEANS_DEFAULT}


def _raise_first_rejected(msgs: Sequence[Message], encoder: MessageEncoder) -> None:
    """Raise the MessageRejected of the first message ``encoder.prepare`` refuses, if any."""
    for i, m in enumerate(msgs):
        try:
            encoder.prepare(m)
        except MessageRejected as e:
            raise MessageRejected(str(e), index=i) from None


def messages_to_table(msgs: Sequence[Message], encoder: MessageEncoder) -> pa.Table:
    """``msgs`` (at least one) as a message table; columns every message leaves at its default
    are left out. A message with a value of a type no column holds is checked by
    ``encoder.prepare``, whose MessageRejected (``index``: its position) is raised."""
    n = len(msgs)
    cols = dict(zip(_MESSAGE_FIELDS, map(list, zip(*map(attrgetter(*_MESSAGE_FIELDS), msgs)))))
    plain = all(set(map(type, col)) <= _PLAIN.get(name, _INT) for name, col in cols.items())
    if not plain:
        _raise_first_rejected(msgs, encoder)
        # every message is valid, with a value of a type prepare takes as another (bytearray)
        cols["body"] = [bytes(b) for b in cols["body"]]
    types, keys = _TYPES, cols["keys"]
    key_types = set(map(type, keys))
    if key_types <= _KEY_LISTS and set(map(type, chain.from_iterable(filter(None, keys)))) <= {str}:
        types = {**_TYPES, "keys": pa.list_(pa.string())}
    elif not key_types <= {str, _NONE}:
        try:
            cols["keys"] = [k if k is None or isinstance(k, str) else codec.KEY_SEPARATOR.join(k)
                            for k in keys]
        except TypeError:  # a key that is not a string
            _raise_first_rejected(msgs, encoder)
    try:
        return pa.table({name: pa.array(col, type=types[name]) for name, col in cols.items()
                         if name in ("topic", "body") or col.count(_DEFAULTS.get(name)) != n})
    except (OverflowError, UnicodeError, pa.ArrowException):  # an int beyond int64, a surrogate
        _raise_first_rejected(msgs, encoder)
        raise
