"""RocketMQ 4.9 binary layouts, defined once for the store and the Spark transforms.

Everything is big-endian, as Java's ByteBuffer writes it. See docs/FORMAT.md §2-§7.
"""
from __future__ import annotations

import functools
import ipaddress
import mmap
import re
import struct
import time
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from rocketlake.store.errors import CorruptRecordError
from rocketlake.store.kernels import hashing as kh
from rocketlake.store.kernels import records as kr

# the record layout (``store.layout``), re-exported
from rocketlake.store.layout import (
    BLANK_MAGIC as BLANK_MAGIC,
)
from rocketlake.store.layout import (
    FLAG_BORNHOST_V6 as FLAG_BORNHOST_V6,
)
from rocketlake.store.layout import (
    FLAG_STOREHOST_V6 as FLAG_STOREHOST_V6,
)
from rocketlake.store.layout import (
    INDEX_KEY_SEPARATOR as INDEX_KEY_SEPARATOR,
)
from rocketlake.store.layout import (
    IPV6_EXTRA as IPV6_EXTRA,
)
from rocketlake.store.layout import (
    KEY_SEPARATOR as KEY_SEPARATOR,
)
from rocketlake.store.layout import (
    MAGIC_V1 as MAGIC_V1,
)
from rocketlake.store.layout import (
    MAGIC_V2 as MAGIC_V2,
)
from rocketlake.store.layout import (
    MIN_RECORD_SIZE as MIN_RECORD_SIZE,
)
from rocketlake.store.layout import (
    NAME_VALUE_SEPARATOR as NAME_VALUE_SEPARATOR,
)
from rocketlake.store.layout import (
    OFF_PHYSICAL_OFFSET as OFF_PHYSICAL_OFFSET,
)
from rocketlake.store.layout import (
    OFF_QUEUE_OFFSET as OFF_QUEUE_OFFSET,
)
from rocketlake.store.layout import PROP_CRC_DIGITS, PROP_CRC_SIZE
from rocketlake.store.layout import (
    PROPERTY_KEYS as PROPERTY_KEYS,
)
from rocketlake.store.layout import (
    PROPERTY_SEPARATOR as PROPERTY_SEPARATOR,
)
from rocketlake.store.layout import (
    PROPERTY_TAGS as PROPERTY_TAGS,
)
from rocketlake.store.layout import (
    PROPERTY_UNIQ_KEY as PROPERTY_UNIQ_KEY,
)

# --- magic codes and sizes (docs/FORMAT.md §2) -----------------------------------------------
#: Java's Integer.MAX_VALUE: the mask of BODYCRC (``UtilAll.crc32``), the size of a pre-blank
#: ConsumeQueue unit, the cap of an index entry's timeDiff, the largest queue id.
JAVA_INT_MAX = 0x7FFFFFFF
END_FILE_MIN_BLANK_LENGTH = 8
MAX_TOPIC_LENGTH = 127
MAX_PROPERTIES_LENGTH = 32767
#: The whole topic rule (RocketMQ's TopicValidator): 1..127 of these ASCII characters, nothing else.
#: Anchored with \A and \Z (not ^ and $, which let a trailing newline through), so ``match``,
#: ``fullmatch`` and ``search`` all test the whole name. Use :func:`is_topic` / :func:`check_topic`.
TOPIC_PATTERN = re.compile(rf"\A[%|a-zA-Z0-9_-]{{1,{MAX_TOPIC_LENGTH}}}\Z")

# --- sysflag bits -------------------------------------------------------------------------------
FLAG_COMPRESSED = 0x1
FLAG_MULTI_TAGS = 0x2
TRANSACTION_MASK = 0xC
TRANSACTION_NOT = 0x0
TRANSACTION_PREPARED = 0x4
TRANSACTION_COMMIT = 0x8
TRANSACTION_ROLLBACK = 0xC
#: every transaction type, the values of ``sys_flag & TRANSACTION_MASK``
TRANSACTION_TYPES = (TRANSACTION_NOT, TRANSACTION_PREPARED, TRANSACTION_COMMIT, TRANSACTION_ROLLBACK)
#: RocketMQ's name of each transaction type (``MessageSysFlag.TRANSACTION_*_TYPE``)
TRANSACTION_NAMES = {TRANSACTION_NOT: "NOT_TYPE", TRANSACTION_PREPARED: "PREPARED",
                     TRANSACTION_COMMIT: "COMMIT", TRANSACTION_ROLLBACK: "ROLLBACK"}
#: 5.x ``MessageSysFlag.INNER_BATCH_FLAG``: one record holding PROPERTY_INNER_NUM messages
FLAG_INNER_BATCH = 0x80

# --- properties (docs/FORMAT.md §3) --------------------------------------------------------------
PROPERTY_DELAY = "DELAY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QID = "REAL_QID"
#: an inner batch's message count (``MessageConst.PROPERTY_INNER_NUM``)
PROPERTY_INNER_NUM = "INNER_NUM"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
#: 5.x's timer wheel topic (``TimerMessageStore.TIMER_TOPIC``): a timed message's copy before
#: delivery, with REAL_TOPIC / REAL_QID as in SCHEDULE_TOPIC_XXXX and the delivery time (ms) in
#: TIMER_OUT_MS
TIMER_TOPIC = "rmq_sys_wheel_timer"
#: topics of copies that are delivered later under their REAL_TOPIC / REAL_QID
DELAY_TOPICS = (SCHEDULE_TOPIC, TIMER_TOPIC)
#: transaction half messages and their op records (``TopicValidator``): broker bookkeeping
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
#: prefix of 5.x's internal topics (``TopicValidator.SYSTEM_TOPIC_PREFIX``: timer wheel, pop
#: revive logs, broker member sync)
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
DELAY_LEVELS_MS = (1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000,
                   420000, 480000, 540000, 600000, 1200000, 1800000, 3600000, 7200000)

# --- ConsumeQueue (docs/FORMAT.md §6) ---------------------------------------------------------
CQ_UNIT = struct.Struct(">qiq")
CQ_UNIT_SIZE = CQ_UNIT.size  # 20
CQ_UNIT_DTYPE = np.dtype([("commitlog_offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
#: 5.x BatchConsumeQueue unit (``BatchConsumeQueue.CQ_STORE_UNIT_SIZE``, docs/FORMAT.md §9.6)
BCQ_UNIT_DTYPE = np.dtype([("commitlog_offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8"),
                           ("store_timestamp", ">i8"), ("msg_base_offset", ">i8"),
                           ("batch_size", ">i2"), ("compacted_offset", ">i4"), ("reserved", ">i4")])
BCQ_UNIT_SIZE = BCQ_UNIT_DTYPE.itemsize  # 46
#: size field of a pre-blank unit (``ConsumeQueue.fillPreBlank``): a placeholder, not a message
CQ_BLANK_UNIT_SIZE = JAVA_INT_MAX
CQ_PRE_BLANK = CQ_UNIT.pack(0, CQ_BLANK_UNIT_SIZE, 0)

# --- IndexFile (docs/FORMAT.md §7) ---------------------------------------------------------------
INDEX_HEADER = struct.Struct(">qqqqii")
INDEX_HEADER_SIZE = INDEX_HEADER.size  # 40
INDEX_SLOT_SIZE = 4
INDEX_ENTRY = struct.Struct(">iqii")
INDEX_ENTRY_SIZE = INDEX_ENTRY.size  # 20
#: cap of an entry's timeDiff in seconds (``IndexFile.putKey``)
INDEX_MAX_TIME_DIFF = JAVA_INT_MAX
INDEX_ENTRY_DTYPE = np.dtype([("key_hash", ">i4"), ("phy_offset", ">i8"),
                              ("time_diff", ">i4"), ("prev_index", ">i4")])

# --- checkpoint (docs/FORMAT.md §8) --------------------------------------------------------------
CHECKPOINT = struct.Struct(">qqq")
#: 5.x checkpoint fields after those three: masterFlushedOffset @24, confirmPhyOffset @32 (0: unset)
CHECKPOINT_V5 = struct.Struct(">qq")
CHECKPOINT_FILE_SIZE = 4096

# --- CommitLog record head: the fixed fields up to and including BODYLEN ---------------------------
# One field list; the struct formats below are derived from it.
_HEAD_FIELDS = (
    ("total_size", "i"), ("magic", "i"), ("body_crc", "i"), ("queue_id", "i"), ("flag", "i"),
    ("queue_offset", "q"), ("physical_offset", "q"), ("sys_flag", "i"), ("born_timestamp", "q"),
    ("born_addr", "addr"), ("born_port", "i"), ("store_timestamp", "q"), ("store_addr", "addr"),
    ("store_port", "i"), ("reconsume_times", "i"), ("prepared_offset", "q"), ("body_len", "i"),
)


def _head(born_v6: bool, store_v6: bool) -> struct.Struct:
    fmt = ">"
    for name, kind in _HEAD_FIELDS:
        if kind == "addr":
            fmt += "16s" if (born_v6 if name == "born_addr" else store_v6) else "4s"
        else:
            fmt += kind
    return struct.Struct(fmt)


#: (born_v6, store_v6) -> Struct packing TOTALSIZE .. BODYLEN
HEAD = {(b, s): _head(b, s) for b in (False, True) for s in (False, True)}
BLANK = struct.Struct(">ii")
PHYSICAL = struct.Struct(">q")  # PHYSICALOFFSET at OFF_PHYSICAL_OFFSET


def record_length(sys_flag: int, body_len: int, topic_len: int, props_len: int,
                  magic: int = MAGIC_V1) -> int:
    """TOTALSIZE of a record: 91 + body + topic + properties, +12 per IPv6 host (+1 for v2)."""
    n = MIN_RECORD_SIZE + body_len + topic_len + props_len
    if sys_flag & FLAG_BORNHOST_V6:
        n += IPV6_EXTRA
    if sys_flag & FLAG_STOREHOST_V6:
        n += IPV6_EXTRA
    if magic == MAGIC_V2:
        n += 1
    return n


# --- Java hashCode and index keys (``kernels.hashing``) ----------------------------------------------
def _utf8(s: str) -> npt.NDArray[np.uint8]:
    """The bytes the hash kernels read for ``s`` (a lone surrogate as one 3-byte sequence)."""
    return np.frombuffer(s.encode("utf-8", "surrogatepass"), dtype=np.uint8)


def java_hash(s: str) -> int:
    """Java String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    b = _utf8(s)
    h: int = kh.signed32(kh.java_hash(b, 0, b.size, 0))
    return h


def java_hash_many(strings: list[str]) -> npt.NDArray[np.int32]:
    """Java String.hashCode of many strings, as int32."""
    n = len(strings)
    lens = np.fromiter(map(len, strings), dtype=np.int64, count=n)
    joined = "".join(strings).encode("utf-8", "surrogatepass")
    if len(joined) != int(lens.sum()):  # not all ASCII: byte lengths differ from str lengths
        enc = [s.encode("utf-8", "surrogatepass") for s in strings]
        lens = np.fromiter(map(len, enc), dtype=np.int64, count=n)
        joined = b"".join(enc)
    starts = np.cumsum(lens) - lens
    out = np.empty(n, dtype=np.int32)
    kh.java_hashes(np.frombuffer(joined, dtype=np.uint8), starts, lens, out)
    return out


@overload
def index_key_hash(h: npt.NDArray[np.int32]) -> npt.NDArray[np.int32]: ...


@overload
def index_key_hash(h: int) -> int: ...


def index_key_hash(h: npt.NDArray[np.int32] | int) -> npt.NDArray[np.int32] | int:
    """IndexFile keyHash of a Java hashCode: abs(h), 0 for Integer.MIN_VALUE (docs/FORMAT.md §7)."""
    if isinstance(h, np.ndarray):
        out = np.empty(h.shape, dtype=np.int32)
        kh.key_hashes(np.ascontiguousarray(h, dtype=np.int32).ravel(), out.ravel())
        return out
    return int(kh.key_hash(h))


def index_keys(topic: str, uniq_key: str | None, keys: str | None) -> tuple[str, ...]:
    """The index keys of a record of ``topic`` (RocketMQ's ``IndexService.buildIndex``): its
    UNIQ_KEY, then each non-empty token of its KEYS, as "topic#key" (``kernels.hashing``)."""
    prefix = topic + INDEX_KEY_SEPARATOR
    out = [prefix + uniq_key] if uniq_key else []
    out.extend(prefix + k for k in iter_keys(keys))
    return tuple(out)


def tags_code(tags: str | None) -> int:
    """ConsumeQueue tagsCode: Java hashCode of the whole TAGS, 0 without tags (docs/FORMAT.md §5)."""
    return java_hash(tags) if tags else 0


# --- properties ---------------------------------------------------------------------------------------
def properties_to_string(props: Mapping[str, str]) -> str:
    """Encode as RocketMQ 4.9.1+ does: name\\x01value pairs joined by \\x02, no trailing separator."""
    return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items())


def string_to_properties(s: str) -> dict[str, str]:
    """Decode either separator style; drop segments without \\x01, empty names or empty values.
    A name given twice keeps its last value (MessageDecoder.string2messageProperties puts each
    pair into a HashMap)."""
    out: dict[str, str] = {}
    for seg in s.split(PROPERTY_SEPARATOR):
        name, sep, value = seg.partition(NAME_VALUE_SEPARATOR)
        if sep and name and value:
            out[name] = value
    return out


def check_property(name: str, value: str) -> None:
    """Reject names or values a properties string cannot carry."""
    for what, s in (("name", name), ("value", value)):
        if not isinstance(s, str):
            raise ValueError(f"property {name!r}: {what} must be a string, got {type(s).__name__}")
        if NAME_VALUE_SEPARATOR in s or PROPERTY_SEPARATOR in s:
            raise ValueError(f"property {name!r}: {what} contains a \\x01 or \\x02 separator")
    if not name:
        raise ValueError("property name is empty")


def is_topic(topic: object) -> bool:
    """True when ``topic`` is a name a RocketMQ broker could have stored (:data:`TOPIC_PATTERN`)."""
    return isinstance(topic, str) and TOPIC_PATTERN.fullmatch(topic) is not None


def check_topic(topic: str) -> bytes:
    """Validate a topic name (RocketMQ's TopicValidator.validateTopic) and return its bytes;
    ValueError saying what is wrong otherwise."""
    if not is_topic(topic):
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic must be a non-empty string, got {topic!r}")
        if len(topic.encode()) > MAX_TOPIC_LENGTH:
            raise ValueError(f"topic {topic[:20]!r}... is {len(topic.encode())} bytes, "
                             f"over {MAX_TOPIC_LENGTH}")
        raise ValueError(f"topic {topic!r} has characters outside [%|a-zA-Z0-9_-]")
    return topic.encode()


def delay_level_to_queue_id(level: int) -> int:
    return level - 1


# --- queue keys: a (topic number, queue id) pair as one int64 -----------------------------------
def queue_key(topic_ids: npt.NDArray[np.integer[Any]], queue_ids: npt.NDArray[np.integer[Any]]
              ) -> npt.NDArray[np.int64]:
    """A key per (topic number, queue id) that orders queues by topic number, then queue id (as
    an unsigned 32-bit number): ``topic << 32 | queue id``. ``queue_of_key`` takes it apart."""
    key = topic_ids.astype(np.int64) << 32
    key |= queue_ids.astype(np.int64) & 0xFFFFFFFF
    return key


def queue_of_key(key: int) -> tuple[int, int]:
    """(topic number, queue id) of a ``queue_key``; the queue id a signed 32-bit int, as the
    record's QUEUEID field holds it."""
    qid = key & 0xFFFFFFFF
    return key >> 32, qid - (1 << 32) if qid > JAVA_INT_MAX else qid


# --- hosts and message ids (docs/FORMAT.md §4) -------------------------------------------------
def parse_host(host: str) -> tuple[bytes, int]:
    """`1.2.3.4:10911` or `[fe80::1]:10911` -> (address bytes, port)."""
    if host.startswith("["):
        addr, _, port = host[1:].partition("]:")
    else:
        addr, _, port = host.rpartition(":")
    try:
        return _packed_address(addr), int(port)
    except ValueError as e:
        raise ValueError(f"bad host {host!r}: expected ip:port or [ipv6]:port") from e


@functools.lru_cache(maxsize=1 << 16)
def _packed_address(addr: str) -> bytes:
    """The bytes of an IP address (producers are few, their ports many: cached by address)."""
    return ipaddress.ip_address(addr).packed


def format_host(addr: bytes, port: int) -> str:
    """As Java prints a socket address: IPv6 as eight uncompressed groups, in brackets."""
    if len(addr) == 16:
        groups = ":".join(f"{g:x}" for g in struct.unpack(">8H", addr))
        return f"[{groups}]:{port}"
    return f"{ipaddress.ip_address(addr)}:{port}"


def create_msg_id(store_addr: bytes, store_port: int, commitlog_offset: int) -> str:
    """Offset msgId: store IP + port + commitlog offset, uppercase hex (32 or 56 chars)."""
    return (store_addr + struct.pack(">iq", store_port, commitlog_offset)).hex().upper()


def decode_msg_id(msg_id: str) -> tuple[str, int]:
    """Offset msgId -> (store host "ip:port", commitlog offset)."""
    if len(msg_id) not in (32, 56):
        raise ValueError(f"msgId {msg_id!r} must be 32 (IPv4) or 56 (IPv6) hex chars")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as e:
        raise ValueError(f"msgId {msg_id!r} is not hex") from e
    n = len(raw) - 12
    port, offset = struct.unpack(">iq", raw[n:])
    return format_host(raw[:n], port), offset


# --- record decoding ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Record:
    """One decoded CommitLog record, every field as stored."""
    commitlog_offset: int
    size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_addr: bytes
    born_port: int
    store_timestamp: int
    store_addr: bytes
    store_port: int
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties_string: str

    @property
    def born_host(self) -> str:
        return format_host(self.born_addr, self.born_port)

    @property
    def store_host(self) -> str:
        return format_host(self.store_addr, self.store_port)

    @property
    def properties(self) -> dict[str, str]:
        return string_to_properties(self.properties_string)

    @property
    def msg_id(self) -> str:
        return create_msg_id(self.store_addr, self.store_port, self.commitlog_offset)

    @property
    def transaction_type(self) -> int:
        return self.sys_flag & TRANSACTION_MASK

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        k = self.properties.get(PROPERTY_KEYS)
        return [t for t in k.split(KEY_SEPARATOR) if t] if k else []

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_KEY)


#: What records are decoded from: a mapped file, or bytes read from one.
RecordBuffer = bytes | bytearray | memoryview | mmap.mmap


def decode_record(buf: RecordBuffer, pos: int, file_offset: int = 0, check_crc: bool = True) -> Record | int:
    """Decode the record at ``buf[pos:]``; ``file_offset`` is the buffer's first byte offset.

    Returns the Record, or for a BLANK end-of-file record its TOTALSIZE (an int).
    Raises CorruptRecordError when the bytes there are not a valid record: unknown magic
    (zeros included), a length that disagrees with the record's own fields, a self offset that
    is not its address, (``check_crc``) a body CRC mismatch, or a topic or properties string that
    is not UTF-8. The checks are the compiled walk's (``kernels.records.walk``), one record long.
    """
    arr = buf if isinstance(buf, np.ndarray) else np.frombuffer(buf, dtype=np.uint8)
    row = decode_row(arr, pos, file_offset, check_crc)
    return row if isinstance(row, int) else record_from_row(arr, row)


def decode_row(arr: npt.NDArray[np.uint8], pos: int, file_offset: int = 0,
               check_crc: bool = True) -> list[int] | int:
    """``decode_record`` without building the Record: the walked row (``kernels.records.FIELDS``
    values), or a BLANK record's TOTALSIZE; CorruptRecordError as there."""
    out = np.empty((1, kr.NFIELDS), dtype=np.int64)
    detail = np.zeros(3, dtype=np.int64)
    n, _, status = kr.walk(arr, file_offset, pos, pos + 1, check_crc, False, out, detail)
    if status == kr.BLANK:
        return int(detail[0])
    if not n:
        raise CorruptRecordError(kr.describe(status, file_offset + pos, detail, arr))
    return list(out[0].tolist())


def record_from_row(buf: npt.NDArray[np.uint8], row: list[int]) -> Record:
    """The Record of one walked row (``kernels.records.FIELDS`` values) of the bytes ``buf``."""
    (offset, total, magic, crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts,
     born_port, store_ts, store_port, reconsume, prepared, body_at, body_len, topic_at, topic_len,
     props_at, props_len, born_at, store_at) = row
    alen_born = 16 if sys_flag & FLAG_BORNHOST_V6 else 4
    alen_store = 16 if sys_flag & FLAG_STOREHOST_V6 else 4
    return Record(offset, total, magic, crc, queue_id, flag, queue_offset, physical_offset,
                  sys_flag, born_ts, bytes(buf[born_at:born_at + alen_born]), born_port, store_ts,
                  bytes(buf[store_at:store_at + alen_store]), store_port, reconsume, prepared,
                  bytes(buf[body_at:body_at + body_len]),
                  bytes(buf[topic_at:topic_at + topic_len]).decode(),
                  bytes(buf[props_at:props_at + props_len]).decode())


def body_crc(body: bytes | memoryview) -> int:
    """BODYCRC: CRC-32 of the body & Integer.MAX_VALUE (``UtilAll.crc32``); 0 for no body."""
    return zlib.crc32(body) & JAVA_INT_MAX


def reseal_prop_crc(buf: bytearray | mmap.mmap, pos: int, size: int) -> None:
    """Rewrite the 5.x property CRC (docs/FORMAT.md §9.6) of the well-formed record at
    ``buf[pos:pos+size]``, if it carries one, for the bytes it holds now: a copy whose QUEUEOFFSET
    and PHYSICALOFFSET changed (the CRC covers them). Records without one are left alone."""
    arr = np.frombuffer(buf, dtype=np.uint8, count=size, offset=pos)
    out = np.empty((1, kr.NFIELDS), dtype=np.int64)
    n, _, _ = kr.walk(arr, int(kr.be_i64(arr, OFF_PHYSICAL_OFFSET)), 0, 1, False, False, out,
                      np.zeros(3, dtype=np.int64))
    if not n or kr.prop_crc(arr, int(out[0, kr.PROPS_START]), int(out[0, kr.PROPS_LEN])) == -1:
        return
    crc = zlib.crc32(arr[:size - PROP_CRC_SIZE].tobytes()) & JAVA_INT_MAX
    end = pos + size - 1  # the closing \x02
    buf[end - PROP_CRC_DIGITS:end] = bytes(48 + crc // 10 ** k % 10 for k in range(PROP_CRC_DIGITS))


def format_file_name(offset: int) -> str:
    """CommitLog / ConsumeQueue file name: the start offset zero-padded to 20 digits."""
    return f"{offset:020d}"


def iter_keys(keys: str | None) -> Iterable[str]:
    """Non-empty tokens of a KEYS value."""
    return (k for k in keys.split(KEY_SEPARATOR) if k) if keys else ()


def index_file_name(ts_ms: int, zone: tzinfo | None = None) -> str:
    """IndexFile name: ``yyyyMMddHHmmssSSS`` of ``ts_ms`` in ``zone`` (None: the process's local
    zone), as RocketMQ names it in the broker's default zone (``UtilAll.timeMillisToHumanString``)."""
    secs, ms = divmod(ts_ms, 1000)
    if zone is None:
        return time.strftime("%Y%m%d%H%M%S", time.localtime(secs)) + f"{ms:03d}"
    return datetime.fromtimestamp(secs, zone).strftime("%Y%m%d%H%M%S") + f"{ms:03d}"


#: The last millisecond every zone (UTC-12 to UTC+14) names with a 4-digit year:
#: 9999-12-31T09:59:59.999Z.
INDEX_TIME_MAX = 253402250399999


@overload
def index_time(ts: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]: ...


@overload
def index_time(ts: int) -> int: ...


def index_time(ts: npt.NDArray[np.int64] | int) -> npt.NDArray[np.int64] | int:
    """The store time the index keeps for a key stored at ``ts``: ``ts`` itself from 1 ms to
    ``INDEX_TIME_MAX``, else 1 ms. A time outside (a damaged STORETIMESTAMP: the body CRC does
    not cover it) would name an index file no 17-digit name holds, or none at all."""
    if isinstance(ts, np.ndarray):
        return np.where((ts >= 1) & (ts <= INDEX_TIME_MAX), ts, 1)
    return ts if 1 <= ts <= INDEX_TIME_MAX else 1


def next_index_file_name(first_ts: int, previous: str | None, zone: tzinfo | None = None) -> str:
    """The name a new index file gets in ``zone``: the index time (``index_time``) of the key
    that opens it, bumped 1 ms past the previous file's name when not later (names must stay
    unique and ordered)."""
    first_ts = index_time(first_ts)
    ts = first_ts if previous is None else max(first_ts, index_file_time(previous, zone) + 1)
    return index_file_name(ts, zone)


def index_file_time(name: str, zone: tzinfo | None = None) -> int:
    """Inverse of ``index_file_name``: a name in ``zone`` (None: local) back to epoch milliseconds."""
    if len(name) != 17 or not name.isdigit():
        raise ValueError(f"{name!r} is not an index file name (17 digits yyyyMMddHHmmssSSS)")
    if zone is None:
        return int(time.mktime(time.strptime(name[:14], "%Y%m%d%H%M%S"))) * 1000 + int(name[14:])
    wall = datetime.strptime(name[:14], "%Y%m%d%H%M%S").replace(tzinfo=zone)
    return int(wall.timestamp()) * 1000 + int(name[14:])


def index_file_size(slots: int, entries: int) -> int:
    return INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE + entries * INDEX_ENTRY_SIZE
