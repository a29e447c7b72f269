"""Messages validated and encoded as records before the CommitLog places them (``Prepared``):
the per-message encoder ``put`` uses, and the rules ``table_encoder`` applies to columns."""
from __future__ import annotations

import reprlib
from functools import partial
from typing import NamedTuple

from rocketlake.store import codec, dispatch
from rocketlake.store.codec import END_FILE_MIN_BLANK_LENGTH, FLAG_BORNHOST_V6, FLAG_STOREHOST_V6
from rocketlake.store.config import StoreConfig
from rocketlake.store.errors import MessageRejected
from rocketlake.store.message import Message

_ALLOWED_SYS_FLAG = codec.TRANSACTION_MASK | codec.FLAG_COMPRESSED | codec.FLAG_MULTI_TAGS
_INT32 = (-1 << 31, (1 << 31) - 1)
_INT64 = (-1 << 63, (1 << 63) - 1)
#: IndexFile names are the store time as yyyyMMddHHmmssSSS in local time (IndexService): a store
#: time must stay before year 10000 in every time zone, so before 9999-12-31T00:00:00Z.
STORE_TIMESTAMP_LIMIT = 253_402_214_400_000
#: Integer fields of a Message -> (lowest, highest) value: the width of the record field it is
#: written to (CommitLog#calMsgLength layout), or of RocketMQ's Java type for delay_level
#: (Message#setDelayTimeLevel(int)). Timestamps and levels are never negative.
INT_FIELDS = {
    "flag": _INT32,
    "delay_level": (0, _INT32[1]),
    "reconsume_times": _INT32,
    "prepared_transaction_offset": _INT64,
    "born_timestamp": (0, _INT64[1]),
    "store_timestamp": (0, STORE_TIMESTAMP_LIMIT - 1),
}
_OPTIONAL = frozenset({"born_timestamp", "store_timestamp"})  # None: the store's clock


def check_int(name: str, value: int, limits: tuple[int, int]) -> None:
    """Raise MessageRejected unless ``value`` is an int (a bool is not) within ``limits``."""
    lo, hi = limits
    if value.__class__ is not int or not lo <= value <= hi:
        raise MessageRejected(f"{name} must be an int in [{lo}, {hi}], got {reprlib.repr(value)}")


class Prepared(NamedTuple):
    """A validated message, encoded but not yet placed (no offsets, maybe no store time)."""
    topic: str
    queue_id: int
    body: bytes
    crc: int
    tail: bytes          # TOPICLEN + topic + PROPLEN + properties
    length: int          # TOTALSIZE
    sys_flag: int
    flag: int
    born_ts: int | None
    born_addr: bytes
    born_port: int
    store_addr: bytes
    store_port: int
    store_ts: int | None
    reconsume: int
    prepared_offset: int
    tags_code: int       # for delayed messages: the delay in ms (delivery = store time + delay)
    delayed: bool
    index_keys: tuple[str, ...]  # "topic#key" strings, UNIQ_KEY first
    to_queue: bool       # gets a queue offset and a ConsumeQueue unit (not PREPARED/ROLLBACK)


_new_prepared = partial(tuple.__new__, Prepared)  # skips NamedTuple's slow __new__ in the hot path
_SEPARATORS = (codec.NAME_VALUE_SEPARATOR, codec.PROPERTY_SEPARATOR)


class _Topic(NamedTuple):
    tail_prefix: bytes   # TOPICLEN + topic bytes
    fixed: int           # record length without body and properties


class MessageEncoder:
    """Turns Messages into Prepared records: validation, delay rewrite, properties encoding.

    Every field is checked here, before the store reserves a queue offset or a byte: a str or
    None where a str is expected, an int (never a bool) within its record field where an int is
    (``INT_FIELDS``), a host "ip:port" with a port in [0, 65535]. Caches per topic and tag (and
    ``codec``'s per host address) keep the common message (topic, body, queue, tags, keys) to a
    handful of string operations.
    """

    def __init__(self, cfg: StoreConfig) -> None:
        self.max_body = cfg.maxMessageSize
        self.max_record = cfg.mappedFileSizeCommitLog - END_FILE_MIN_BLANK_LENGTH
        self.delay_ms = cfg.delay_levels_ms
        self.store_addr, self.store_port = codec.parse_host(cfg.store_host)
        #: an IPv6 store host (brokerIP1): every record needs the IPv6 host bits
        self.v6_store = len(self.store_addr) == 16
        self._topics: dict[str, _Topic] = {}
        self._tags: dict[str, int] = {}

    @property
    def settings(self) -> tuple[object, ...]:
        """What the encoding depends on besides the message: two encoders with equal settings
        encode every message alike."""
        return self.max_body, self.max_record, self.delay_ms, self.store_addr, self.store_port

    def _topic(self, topic: str) -> _Topic:
        """The cached layout of a topic, validated (whatever its type) the first time it is seen."""
        t = self._topics.get(topic) if topic.__class__ is str else None
        if t is None:
            try:
                b = codec.check_topic(topic)
            except ValueError as e:
                raise MessageRejected(str(e)) from None
            t = self._topics[topic] = _Topic(bytes((len(b),)) + b, codec.record_length(0, 0, len(b), 0))
        return t

    def host(self, name: str, host: str | None, default: tuple[bytes, int]) -> tuple[bytes, int]:
        """Address bytes and port of a message's ``born_host`` / ``store_host`` (None or "": default)."""
        if host is None or host == "":
            return default
        if host.__class__ is not str:
            raise MessageRejected(f"{name} must be a string 'ip:port', got {reprlib.repr(host)}")
        try:
            addr, port = codec.parse_host(host)
        except ValueError as e:
            raise MessageRejected(f"{name}: {e}") from None
        if not 0 <= port <= 0xFFFF:
            raise MessageRejected(f"{name} {host!r}: port {port} is outside [0, 65535]")
        return addr, port

    def tags_code(self, tags: str) -> int:
        """ConsumeQueue tagsCode of a non-empty TAGS (cached)."""
        c = self._tags.get(tags)
        if c is None:
            c = self._tags[tags] = codec.java_hash(tags)
        return c

    def prepare(self, m: Message) -> Prepared:
        """Validate and encode one message; raise MessageRejected naming the field and value."""
        topic, body, qid, tags, keys = m.topic, m.body, m.queue_id, m.tags, m.keys
        t = topic.__class__ is str and self._topics.get(topic) or self._topic(topic)
        if body.__class__ is not bytes:
            if not isinstance(body, (bytearray, memoryview)):
                raise MessageRejected(f"body must be bytes, got {type(body).__name__}")
            body = bytes(body)
        if len(body) > self.max_body:
            raise MessageRejected(f"body is {len(body)} bytes, over maxMessageSize {self.max_body}")
        if qid.__class__ is not int or qid < 0 or qid > codec.JAVA_INT_MAX:
            check_int("queue_id", qid, (0, _INT32[1]))
        if tags is not None and tags.__class__ is not str:
            raise MessageRejected(f"tags must be a string, got {reprlib.repr(tags)}")
        if keys is not None and keys.__class__ is not str:
            try:
                if keys.__class__ is not list and keys.__class__ is not tuple:
                    raise TypeError
                keys = codec.KEY_SEPARATOR.join(keys)
            except TypeError:
                raise MessageRejected(f"keys must be a string or a list of strings, "
                                      f"got {reprlib.repr(keys)}") from None
        sys_flag, props, level = m.sys_flag, m.properties, m.delay_level
        if (props is not None or sys_flag or level or m.born_host is not None
                or m.store_host is not None or self.v6_store):
            return self._prepare_general(m, t, body, keys)
        # The common message: TAGS and KEYS are its only properties.
        given = {}
        if tags:
            given[codec.PROPERTY_TAGS] = tags
            tags_code = self._tags.get(tags) or self.tags_code(tags)
        else:
            tags_code = 0
        if keys:
            given[codec.PROPERTY_KEYS] = keys
        ps = codec.properties_to_string(given)
        pairs = len(given)
        if ps.count(_SEPARATORS[0]) != pairs or ps.count(_SEPARATORS[1]) != max(0, pairs - 1):
            raise MessageRejected(f"tags/keys {tags!r} {keys!r} contain a \\x01 or \\x02 separator")
        pb = ps.encode()
        if len(pb) > codec.MAX_PROPERTIES_LENGTH:
            raise MessageRejected(f"properties are {len(pb)} bytes, over {codec.MAX_PROPERTIES_LENGTH}")
        index_keys = codec.index_keys(topic, None, keys)
        length = t.fixed + len(body) + len(pb)
        flag, reconsume, prepared_offset = m.flag, m.reconsume_times, m.prepared_transaction_offset
        # Only a field off its default (exactly int 0 / None) needs the full check.
        if (flag or reconsume or prepared_offset or m.born_timestamp is not None
                or m.store_timestamp is not None or flag.__class__ is not int
                or reconsume.__class__ is not int or prepared_offset.__class__ is not int
                or sys_flag.__class__ is not int or level.__class__ is not int):
            self._check_ints(m)
        if length > self.max_record:
            self._reject_length(length)
        return _new_prepared((
            topic, qid, body, codec.body_crc(body),
            t.tail_prefix + len(pb).to_bytes(2, "big") + pb, length,
            0, flag, m.born_timestamp, self.store_addr, 0, self.store_addr, self.store_port,
            m.store_timestamp, reconsume, prepared_offset, tags_code, False, index_keys, True))

    @staticmethod
    def _check_ints(m: Message) -> None:
        """Raise MessageRejected for an integer field that is not an int within its record field,
        or a sys_flag with bits other than the transaction type and compression."""
        for name, limits in INT_FIELDS.items():
            v = getattr(m, name)
            if v is not None or name not in _OPTIONAL:
                check_int(name, v, limits)
        sys_flag = m.sys_flag
        if sys_flag.__class__ is not int or sys_flag & ~_ALLOWED_SYS_FLAG:
            raise MessageRejected(f"sys_flag {reprlib.repr(sys_flag)}: only transaction and "
                                  f"compression bits may be set")

    def _reject_length(self, length: int) -> None:
        raise MessageRejected(f"record of {length} bytes does not fit a CommitLog file of "
                              f"{self.max_record + END_FILE_MIN_BLANK_LENGTH} bytes")

    def _prepare_general(self, m: Message, t: _Topic, body: bytes, keys: str | None) -> Prepared:
        """Messages with user properties, a delay, a transaction type or explicit hosts."""
        self._check_ints(m)
        topic, qid, tags, sys_flag = m.topic, m.queue_id, m.tags, m.sys_flag
        if m.properties is not None and not isinstance(m.properties, dict):
            raise MessageRejected(f"properties must be a dict of strings, got {reprlib.repr(m.properties)}")
        props: dict[str, str] = {}
        for k, v in (m.properties or {}).items():
            try:
                codec.check_property(k, v)
            except ValueError as e:
                raise MessageRejected(f"properties: {e}") from None
            props[k] = v
        for name, value in ((codec.PROPERTY_TAGS, tags), (codec.PROPERTY_KEYS, keys)):
            if value:
                if _SEPARATORS[0] in value or _SEPARATORS[1] in value:
                    raise MessageRejected(f"{name.lower()} {value!r} contain a \\x01 or \\x02 separator")
                props[name] = value
        tags = props.get(codec.PROPERTY_TAGS)
        level = m.delay_level
        if level:
            props[codec.PROPERTY_DELAY] = str(level)
        else:
            try:
                level = int(props.get(codec.PROPERTY_DELAY, 0))
            except ValueError:
                raise MessageRejected(f"DELAY property {props[codec.PROPERTY_DELAY]!r} "
                                      "is not a level") from None
        tags_code = self.tags_code(tags) if tags else 0
        delayed = level > 0 and dispatch.goes_to_consume_queue(sys_flag)
        if delayed:
            if level > len(self.delay_ms):  # CommitLog.asyncPutMessage stores the highest level
                level = len(self.delay_ms)
                props[codec.PROPERTY_DELAY] = str(level)
            props[codec.PROPERTY_REAL_TOPIC] = topic
            props[codec.PROPERTY_REAL_QID] = str(qid)
            topic, qid = codec.SCHEDULE_TOPIC, codec.delay_level_to_queue_id(level)
            t = self._topic(topic)
            tags_code = self.delay_ms[level - 1]
        pb = codec.properties_to_string(props).encode() if props else b""
        if len(pb) > codec.MAX_PROPERTIES_LENGTH:
            raise MessageRejected(f"properties are {len(pb)} bytes, over {codec.MAX_PROPERTIES_LENGTH}")
        born_addr, born_port = self.host("born_host", m.born_host, (self.store_addr, 0))
        store_addr, store_port = self.host("store_host", m.store_host,
                                            (self.store_addr, self.store_port))
        if len(born_addr) == 16:
            sys_flag |= FLAG_BORNHOST_V6
        if len(store_addr) == 16:
            sys_flag |= FLAG_STOREHOST_V6
        length = codec.record_length(sys_flag, len(body), len(t.tail_prefix) - 1, len(pb))
        if length > self.max_record:
            self._reject_length(length)
        return _new_prepared((
            topic, qid, body, codec.body_crc(body),
            t.tail_prefix + len(pb).to_bytes(2, "big") + pb, length,
            sys_flag, m.flag, m.born_timestamp, born_addr, born_port, store_addr, store_port,
            m.store_timestamp, m.reconsume_times, m.prepared_transaction_offset, tags_code,
            delayed, dispatch.index_keys(topic, props, sys_flag),
            dispatch.goes_to_consume_queue(sys_flag)))
