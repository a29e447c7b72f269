"""The CommitLog: validated messages laid out as RocketMQ records in rolling, pre-allocated files."""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Iterator, NamedTuple, Sequence

from store import codec, dispatch
from store.codec import (BLANK, BLANK_MAGIC, END_FILE_MIN_BLANK_LENGTH, FLAG_BORNHOST_V6,
                         FLAG_STOREHOST_V6, HEAD, MAGIC_V1, CorruptRecordError, Record)
from store.config import StoreConfig
from store.mapped_file import MappedFileQueue
from store.message import Message

_ALLOWED_SYS_FLAG = codec.TRANSACTION_MASK | codec.FLAG_COMPRESSED | codec.FLAG_MULTI_TAGS


class MessageRejected(ValueError):
    """A message the store refuses; nothing of it was written.

    ``index`` is the message's position when it came in a batch (nothing of the batch was written).
    """

    index: int | None = None


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


class Placed(NamedTuple):
    """Where a prepared message landed."""
    offset: int
    size: int
    queue_offset: int
    store_ts: int


class MessageEncoder:
    """Turns Messages into Prepared records: validation, delay rewrite, properties encoding."""

    def __init__(self, cfg: StoreConfig) -> None:
        self.max_body = cfg.maxMessageSize
        self.delay_ms = cfg.delay_levels_ms
        self.store_addr, self.store_port = codec.parse_host(cfg.store_host)
        self._topics: dict[str, bytes] = {}
        self._tags: dict[str, int] = {}
        self._hosts: dict[str, tuple[bytes, int]] = {}

    def _topic(self, topic: str) -> bytes:
        b = self._topics.get(topic)
        if b is None:
            try:
                b = codec.check_topic(topic)
            except ValueError as e:
                raise MessageRejected(str(e)) from None
            self._topics[topic] = b
        return b

    def _host(self, host: str) -> tuple[bytes, int]:
        h = self._hosts.get(host)
        if h is None:
            try:
                h = self._hosts[host] = codec.parse_host(host)
            except ValueError as e:
                raise MessageRejected(str(e)) from None
        return h

    def _tags_code(self, tags: str | None) -> int:
        if not tags:
            return 0
        c = self._tags.get(tags)
        if c is None:
            c = self._tags[tags] = codec.java_hash(tags)
        return c

    def prepare(self, m: Message) -> Prepared:
        """Validate and encode one message; raise MessageRejected naming the problem."""
        topic, body, qid = m.topic, m.body, m.queue_id
        self._topic(topic)
        if not isinstance(body, (bytes, bytearray)):
            raise MessageRejected(f"body must be bytes, got {type(body).__name__}")
        if len(body) > self.max_body:
            raise MessageRejected(f"body is {len(body)} bytes, over maxMessageSize {self.max_body}")
        if type(qid) is not int or not 0 <= qid < 1 << 31:
            raise MessageRejected(f"queue_id must be a non-negative int, got {qid!r}")
        sys_flag = m.sys_flag
        if sys_flag & ~_ALLOWED_SYS_FLAG:
            raise MessageRejected(f"sys_flag {sys_flag:#x}: only transaction and compression bits may be set")
        props: dict[str, str] = {}
        if m.properties:
            for k, v in m.properties.items():
                try:
                    codec.check_property(k, v)
                except ValueError as e:
                    raise MessageRejected(str(e)) from None
                props[k] = v
        tags = m.tags
        if tags:
            props[codec.PROPERTY_TAGS] = tags
        else:
            tags = props.get(codec.PROPERTY_TAGS)
        keys = m.keys
        if keys:
            keys = keys if isinstance(keys, str) else codec.KEY_SEPARATOR.join(keys)
            props[codec.PROPERTY_KEYS] = keys
        else:
            keys = props.get(codec.PROPERTY_KEYS)
        if tags or keys:
            for v in (tags, keys):
                if v and (codec.NAME_VALUE_SEPARATOR in v or codec.PROPERTY_SEPARATOR in v):
                    raise MessageRejected(f"tags/keys {v!r} contain a \\x01 or \\x02 separator")
        delay = m.delay_level or int(props.get(codec.PROPERTY_DELAY, 0) or 0)
        delayed = False
        tags_code = self._tags_code(tags)
        if delay > 0 and (sys_flag & codec.TRANSACTION_MASK) in (codec.TRANSACTION_NOT,
                                                                  codec.TRANSACTION_COMMIT):
            delay = min(delay, len(self.delay_ms))
            if m.delay_level:
                props[codec.PROPERTY_DELAY] = str(m.delay_level)
            props[codec.PROPERTY_REAL_TOPIC] = topic
            props[codec.PROPERTY_REAL_QID] = str(qid)
            topic, qid = codec.SCHEDULE_TOPIC, codec.delay_level_to_queue_id(delay)
            tags_code = self.delay_ms[delay - 1]
            delayed = True
        elif m.delay_level:
            props[codec.PROPERTY_DELAY] = str(m.delay_level)
        topic_b = self._topic(topic)
        props_b = codec.properties_to_string(props).encode() if props else b""
        if len(props_b) > codec.MAX_PROPERTIES_LENGTH:
            raise MessageRejected(f"properties are {len(props_b)} bytes, over {codec.MAX_PROPERTIES_LENGTH}")
        if m.born_host:
            born_addr, born_port = self._host(m.born_host)
        else:
            born_addr, born_port = self.store_addr, 0
        if m.store_host:
            store_addr, store_port = self._host(m.store_host)
        else:
            store_addr, store_port = self.store_addr, self.store_port
        if len(born_addr) == 16:
            sys_flag |= FLAG_BORNHOST_V6
        if len(store_addr) == 16:
            sys_flag |= FLAG_STOREHOST_V6
        length = codec.record_length(sys_flag, len(body), len(topic_b), len(props_b))
        tail = bytes((len(topic_b),)) + topic_b + len(props_b).to_bytes(2, "big") + props_b
        keys_for_index = dispatch.index_keys(topic, props, sys_flag)
        return Prepared(topic, qid, bytes(body), codec.body_crc(body) if body else 0, tail, length,
                        sys_flag, m.flag, m.born_timestamp, born_addr, born_port, store_addr,
                        store_port, m.store_timestamp, m.reconsume_times,
                        m.prepared_transaction_offset, tags_code, delayed, keys_for_index)


class CommitLog:
    """Appends records, rolls files with a BLANK record, reads and scans records."""

    def __init__(self, root: Path, cfg: StoreConfig) -> None:
        self.file_size = cfg.mappedFileSizeCommitLog
        self.files = MappedFileQueue(Path(root) / "commitlog", self.file_size)
        self.check_crc = cfg.checkCRCOnRecover
        #: (topic, queue_id) -> next queue offset (RocketMQ's topicQueueTable)
        self.queue_offsets: dict[tuple[str, int], int] = {}

    # --- writing --------------------------------------------------------------------------------
    def _file_for(self, length: int):
        """The file the next record of ``length`` bytes goes to, rolling with BLANK if needed."""
        mf = self.files.last
        if mf is None:
            return self.files.create(0)
        if mf.wrote + length + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            left = self.file_size - mf.wrote
            if left >= END_FILE_MIN_BLANK_LENGTH:
                BLANK.pack_into(mf.mm, mf.wrote, left, BLANK_MAGIC)
            mf.wrote = self.file_size
            mf = self.files.create(mf.end)
        return mf

    def append(self, p: Prepared, store_ts: int) -> Placed:
        """Write one prepared record at the end of the log."""
        if p.length + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            raise MessageRejected(f"record of {p.length} bytes does not fit a CommitLog file of "
                                  f"{self.file_size} bytes")
        mf = self._file_for(p.length)
        pos = mf.wrote
        if dispatch.goes_to_consume_queue(p.sys_flag):
            key = (p.topic, p.queue_id)
            qoff = self.queue_offsets.get(key, 0)
            self.queue_offsets[key] = qoff + 1
        else:
            qoff = 0  # PREPARED / ROLLBACK take no queue offset
        head = HEAD[(len(p.born_addr) == 16, len(p.store_addr) == 16)]
        mm = mf.mm
        head.pack_into(mm, pos, p.length, MAGIC_V1, p.crc, p.queue_id, p.flag, qoff, mf.start + pos,
                       p.sys_flag, store_ts if p.born_ts is None else p.born_ts, p.born_addr,
                       p.born_port, store_ts, p.store_addr, p.store_port, p.reconsume,
                       p.prepared_offset, len(p.body))
        b = pos + head.size
        e = b + len(p.body)
        mm[b:e] = p.body
        mm[e:pos + p.length] = p.tail
        mf.wrote = pos + p.length
        return Placed(mf.start + pos, p.length, qoff, store_ts)

    # --- reading --------------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.files.min_offset

    @property
    def max_offset(self) -> int:
        return self.files.max_offset

    def read(self, offset: int, check_crc: bool = False) -> Record:
        """Decode the record at ``offset``; CorruptRecordError if none is there."""
        mf = self.files.find(offset)
        if mf is None or offset - mf.start >= mf.wrote:
            raise CorruptRecordError(f"offset {offset}: outside the CommitLog "
                                     f"[{self.min_offset}, {self.max_offset})")
        r = codec.decode_record(mf.mm, offset - mf.start, mf.start, check_crc)
        if isinstance(r, int):
            raise CorruptRecordError(f"offset {offset}: BLANK end-of-file record, not a message")
        return r

    def scan(self, start: int | None = None, check_crc: bool | None = None,
             stop_at: int | None = None) -> "Scan":
        """Valid records from ``start`` (default: the first file) to the end of valid data."""
        return Scan(self, self.min_offset if start is None else start,
                    self.check_crc if check_crc is None else check_crc,
                    self.max_offset if stop_at is None else stop_at)

    def flush(self) -> None:
        self.files.flush()

    def close(self) -> None:
        self.files.close()



class Scan:
    """Iterates records; afterwards ``end`` is where valid data ended, and ``error`` says why
    when it ended at something other than zeros."""

    def __init__(self, log: CommitLog, start: int, check_crc: bool, stop_at: int) -> None:
        self.log, self.end, self.check_crc, self.stop_at = log, start, check_crc, stop_at
        self.error: str | None = None

    def __iter__(self) -> Iterator[Record]:
        files = self.log.files
        while self.end < self.stop_at:
            mf = files.find(self.end)
            if mf is None:
                return
            pos = self.end - mf.start
            try:
                r = codec.decode_record(mf.mm, pos, mf.start, self.check_crc)
            except CorruptRecordError as e:
                # Zeros where the next record would start are the normal end of data.
                if mf.mm[pos:pos + 8] != bytes(8):
                    self.error = str(e)
                return
            if isinstance(r, int):
                self.end = mf.end
                continue
            self.end += r.size
            yield r
