"""Independent, one-message-at-a-time reference of RocketMQ's dispatch (a plain port of
ConsumeQueue.putMessagePositionInfo and IndexFile.putKey) to check the store's vectorised bytes.

Deliberately shares nothing with store/ except the record decoder: own hashing, own loops. Also
CommitLog records packed with `struct` from docs/FORMAT.md §2 (not by the store's encoder).
"""
from __future__ import annotations

import struct
import time

import crcmod.predefined

DELAYS_MS = [1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000, 420000,
             480000, 540000, 600000, 1200000, 1800000, 3600000, 7200000]


crc32 = crcmod.predefined.mkCrcFun("crc-32")
V1, V2 = 0xDAA320A7, 0xDAA320AB


def pack(offset: int, *, topic: str = "T", body: bytes = b"b", props: str = "", queue_id: int = 0,
         queue_offset: int = 0, sys_flag: int = 0, magic: int = V1, born: bytes = b"\x7f\0\0\1",
         store: bytes = b"\x0a\0\0\7", store_ts: int = 1_700_000_000_000, crc: int | None = None) -> bytes:
    """One CommitLog record as docs/FORMAT.md §2 lays it out (struct, big-endian)."""
    sys_flag |= (0x10 if len(born) == 16 else 0) | (0x20 if len(store) == 16 else 0)
    t, p = topic.encode(), props.encode()
    tl = struct.pack(">h", len(t)) if magic == V2 else struct.pack(">b", len(t))
    tail = body + tl + t + struct.pack(">h", len(p)) + p
    body_crc = (crc32(body) & 0x7FFFFFFF) if crc is None else crc
    mid = (struct.pack(">I", magic) + struct.pack(">i", body_crc) + struct.pack(">ii", queue_id, 7)
           + struct.pack(">qqi", queue_offset, offset, sys_flag) + struct.pack(">q", store_ts - 5)
           + born + struct.pack(">i", 50000) + struct.pack(">q", store_ts) + store
           + struct.pack(">i", 10911) + struct.pack(">iqi", 0, 0, len(body)))
    total = 4 + len(mid) + len(tail)
    return struct.pack(">i", total) + mid + tail


def with_prop_crc(rec: bytes) -> bytes:
    """``rec`` (properties ending in ``__CRC32#`` \\x01 ten placeholder digits \\x02) with the digits a
    5.3.3 broker writes: CRC-32 & 0x7FFFFFFF of all but the last 20 bytes, least significant first
    (CommitLog.DefaultAppendMessageCallback, MessageDecoder.createCrc32)."""
    crc = crc32(rec[:-20]) & 0x7FFFFFFF
    return rec[:-11] + "".join(str(crc // 10 ** k % 10) for k in range(10)).encode() + b"\x02"


def jhash(s: str) -> int:
    h = 0
    for ch in s:
        cp = ord(ch)
        units = [cp] if cp < 0x10000 else [0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF)]
        for u in units:
            h = (h * 31 + u) & 0xFFFFFFFF
    return h - 2 ** 32 if h >= 2 ** 31 else h


def consume_queues(records, file_size: int) -> dict[str, bytes]:
    """{"topic/qid/<20-digit name>": file bytes} for the records' ConsumeQueue units."""
    queues: dict[tuple[str, int], list[bytes]] = {}
    for r in records:
        if r.sys_flag & 0xC in (0x4, 0xC):
            continue
        props = r.properties
        code = jhash(props["TAGS"]) if props.get("TAGS") else 0
        if r.topic == "SCHEDULE_TOPIC_XXXX" and int(props.get("DELAY", "0")) > 0:
            code = r.store_timestamp + DELAYS_MS[min(int(props["DELAY"]), 18) - 1]
        units = queues.setdefault((r.topic, r.queue_id), [])
        assert len(units) == r.queue_offset
        units.append(struct.pack(">qiq", r.commitlog_offset, r.size, code))
    out = {}
    for (topic, qid), units in queues.items():
        data = b"".join(units)
        for start in range(0, len(data), file_size):
            chunk = data[start:start + file_size]
            out[f"{topic}/{qid}/{start:020d}"] = chunk + bytes(file_size - len(chunk))
    return out


def index_files(records, slots: int, entries: int) -> list[tuple[str, bytes]]:
    """[(name, bytes)] of the index files RocketMQ's putKey would write for the records."""
    files: list[list] = []  # [name, bytearray, header dict]

    def new_file(ts, prev):
        name = time.strftime("%Y%m%d%H%M%S", time.localtime(ts // 1000)) + f"{ts % 1000:03d}"
        if prev is not None and name <= prev[0]:
            t = _name_time(prev[0]) + 1
            name = time.strftime("%Y%m%d%H%M%S", time.localtime(t // 1000)) + f"{t % 1000:03d}"
        h = {"bt": prev[2]["et"] if prev else 0, "et": prev[2]["et"] if prev else 0,
             "bp": prev[2]["ep"] if prev else 0, "ep": prev[2]["ep"] if prev else 0, "slots": 0, "count": 1}
        files.append([name, bytearray(40 + slots * 4 + entries * 20), h])
        return files[-1]

    cur = None
    for r in records:
        if r.sys_flag & 0xC == 0xC:
            continue
        props = r.properties
        keys = ([props["UNIQ_KEY"]] if props.get("UNIQ_KEY") else []) + \
               [k for k in props.get("KEYS", "").split(" ") if k]
        for k in keys:
            if cur is None or cur[2]["count"] >= entries:
                cur = new_file(r.store_timestamp, cur)
            name, buf, h = cur
            kh = abs(jhash(f"{r.topic}#{k}"))
            kh = 0 if kh > 2 ** 31 - 1 else kh
            slot_pos = 40 + (kh % slots) * 4
            slot_value = struct.unpack_from(">i", buf, slot_pos)[0]
            if slot_value <= 0 or slot_value > h["count"]:
                slot_value = 0
            diff = 0 if h["bt"] <= 0 else max(0, min(2 ** 31 - 1, int((r.store_timestamp - h["bt"]) / 1000)))
            struct.pack_into(">iqii", buf, 40 + slots * 4 + h["count"] * 20, kh, r.commitlog_offset,
                             diff, slot_value)
            struct.pack_into(">i", buf, slot_pos, h["count"])
            if h["count"] <= 1:
                h["bp"], h["bt"] = r.commitlog_offset, r.store_timestamp
            if slot_value == 0:
                h["slots"] += 1
            h["count"] += 1
            h["ep"], h["et"] = r.commitlog_offset, r.store_timestamp
    out = []
    for name, buf, h in files:
        struct.pack_into(">qqqqii", buf, 0, h["bt"], h["et"], h["bp"], h["ep"], h["slots"], h["count"])
        out.append((name, bytes(buf)))
    return out


def _name_time(name: str) -> int:
    return int(time.mktime(time.strptime(name[:14], "%Y%m%d%H%M%S"))) * 1000 + int(name[14:])
