"""What the read commands print: JSON Lines (one object per line) or, with ``--format text``, one
readable line per message or row (ISO-8601 UTC times, bodies as escaped UTF-8). Bodies are shown
as the producer sent them (a compressed body inflated, as ``mqadmin printMsg`` does) unless
``--stored-body`` asks for the stored bytes."""
from __future__ import annotations

import argparse
import base64
import json
import sys
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from rocketlake.jobs.printable import printable
from rocketlake.store import Record, codec
from rocketlake.store.compression import inflate, is_compressed
from rocketlake.store.dispatch import delay_of
from rocketlake.store.store_time import format_time

#: transaction types without a queue position: RocketMQ's CommitLog.doAppend stores queue
#: offset 0 for them and dispatches no ConsumeQueue unit
_NOT_QUEUED = (codec.TRANSACTION_PREPARED, codec.TRANSACTION_ROLLBACK)
#: the units of a messageDelayLevel token, largest first
_DELAY_UNITS = (("h", 3_600_000), ("m", 60_000), ("s", 1000))


def record_to_json(r: Record) -> dict[str, Any]:
    """A CommitLog record as the `dump commitlog` JSON object; ``compressed``: whether its body is
    stored compressed (``size`` and ``body_crc`` are of the stored body)."""
    return {
        "commitlog_offset": r.commitlog_offset, "size": r.size, "magic": r.magic & 0xFFFFFFFF,
        "body_crc": r.body_crc, "queue_id": r.queue_id, "flag": r.flag,
        "queue_offset": r.queue_offset, "sys_flag": r.sys_flag,
        "born_timestamp": r.born_timestamp, "born_host": r.born_host,
        "store_timestamp": r.store_timestamp, "store_host": r.store_host,
        "reconsume_times": r.reconsume_times,
        "prepared_transaction_offset": r.prepared_transaction_offset,
        "compressed": is_compressed(r.sys_flag),
        "body_b64": base64.b64encode(r.body).decode(), "topic": r.topic,
        "properties": r.properties, "msg_id": r.msg_id,
    }


def body_text(body: bytes, max_body: int) -> str:
    """A body on one line: its first ``max_body`` characters as UTF-8 text (a byte that is not
    UTF-8 counts as one), non-printable characters and such bytes escaped (``\\n``, ``\\xff``),
    then a note in brackets when it was cut or is not UTF-8."""
    text = body.decode("utf-8", errors="surrogateescape")  # a bad byte b -> the character U+DC00+b
    notes = ["not UTF-8"] if any("\udc80" <= c <= "\udcff" for c in text) else []
    if len(text) > max_body:
        text = text[:max_body] + "..."
        notes.append(f"{len(body)} bytes, cut at {max_body} characters")
    return printable(text) + (f" [{'; '.join(notes)}]" if notes else "")


def _value(v: object) -> str:
    """A field value in a text line: as is, or JSON-quoted when empty or holding spaces; what is
    not printable escaped (:func:`printable`)."""
    text = "-" if v is None else str(v)
    if not text or any(c.isspace() for c in text):
        text = json.dumps(text, ensure_ascii=False)
    return printable(text)


def delay_text(ms: int) -> str:
    """A delay as a messageDelayLevel token (``10s``, ``2m``, ``1h``); ``1500ms`` when no unit
    divides it."""
    unit = next(((u, n) for u, n in _DELAY_UNITS if ms and ms % n == 0), None)
    return f"{ms // unit[1]}{unit[0]}" if unit else f"{ms}ms"


def _later_delivery(r: Record, delay_levels_ms: tuple[int, ...]) -> dict[str, Any]:
    """A SCHEDULE_TOPIC_XXXX or timer-wheel copy's real topic and queue and its delay (the DELAY
    level in ``delay_levels_ms``) or delivery time (TIMER_OUT_MS); nothing for other records."""
    if r.topic not in codec.DELAY_TOPICS:
        return {}
    props = r.properties
    out: dict[str, Any] = {"real_topic": props.get(codec.PROPERTY_REAL_TOPIC)}
    if r.topic == codec.SCHEDULE_TOPIC:
        out["delay"] = delay_text(delay_of(props, delay_levels_ms))
    elif props.get("TIMER_OUT_MS", "").isdigit():
        out["deliver"] = format_time(int(props["TIMER_OUT_MS"]))
    return {**out, "real_queue": props.get(codec.PROPERTY_REAL_QID)}


def message_text(r: Record, max_body: int,
                 delay_levels_ms: tuple[int, ...] = codec.DELAY_LEVELS_MS) -> str:
    """One message as one line of ``name=value`` fields, the body last: what `dump commitlog`,
    `get` and `query` print with ``--format text``. A transaction message shows ``tx=`` its
    type (PREPARED and ROLLBACK have no queue offset: ``-``); a copy delivered later (in
    SCHEDULE_TOPIC_XXXX, with ``delay_levels_ms``, the store's messageDelayLevel) its
    ``real_topic``, ``delay`` and ``real_queue``."""
    tx = r.transaction_type
    fields = {"store": format_time(r.store_timestamp), "born": format_time(r.born_timestamp),
              "topic": r.topic, "queue": r.queue_id,
              "queue_offset": None if tx in _NOT_QUEUED else r.queue_offset,
              **({"tx": codec.TRANSACTION_NAMES[tx]} if tx != codec.TRANSACTION_NOT else {}),
              **_later_delivery(r, delay_levels_ms),
              "commitlog_offset": r.commitlog_offset, "msg_id": r.msg_id, "tags": r.tags,
              "keys": " ".join(r.keys) or None}
    return " ".join(f"{k}={_value(v)}" for k, v in fields.items()) + " body=" + body_text(r.body, max_body)


def row_text(row: dict[str, Any]) -> str:
    """A ConsumeQueue unit or index row as one line of ``name=value`` fields (times ISO-8601)."""
    return " ".join(f"{k}={format_time(v) if k.endswith('_timestamp') else _value(v)}"
                    for k, v in row.items())


def emit(rows: Iterable[dict[str, Any]], a: argparse.Namespace | None = None) -> None:
    """Rows as JSON Lines, or as text lines when ``a.format`` is ``text``."""
    text = a is not None and a.format == "text"
    out = sys.stdout
    for row in rows:
        out.write((row_text(row) if text else json.dumps(row, ensure_ascii=False)) + "\n")


def emit_messages(messages: Iterable[tuple[Record, dict[str, Any]]], a: argparse.Namespace,
                  delay_levels_ms: tuple[int, ...] = codec.DELAY_LEVELS_MS) -> int:
    """Records as JSON Lines (:func:`record_to_json` plus the extra fields) or as
    :func:`message_text` lines, each body inflated unless ``a.stored_body``
    (``delay_levels_ms``: the store's messageDelayLevel); returns how many."""
    out, n = sys.stdout, 0
    for r, extra in messages:
        if not a.stored_body and is_compressed(r.sys_flag):
            r = replace(r, body=inflate(r.body, r.sys_flag, r.commitlog_offset))
        out.write((message_text(r, a.max_body, delay_levels_ms) if a.format == "text"
                   else json.dumps({**record_to_json(r), **extra}, ensure_ascii=False)) + "\n")
        n += 1
    return n
