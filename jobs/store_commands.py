"""Store commands of the CLI: ingest, dump, get, query. JSON Lines out, one object per line."""
from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, TextIO

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rocketlake.store import Message, MessageRejected, MessageStore, Record, StoreFormatError
from rocketlake.store import codec
from rocketlake.store.codec import INDEX_ENTRY_DTYPE, INDEX_HEADER, INDEX_HEADER_SIZE
from rocketlake.store.config import parse_set_options
from rocketlake.store.verify import verify

BATCH = 1000
_err = Console(stderr=True)


class InputError(ValueError):
    """A line of input that is not a valid event."""


# --- event <-> JSON ----------------------------------------------------------------------------
_EVENT_FIELDS = {"topic", "body", "body_b64", "queue_id", "tags", "keys", "properties",
                 "delay_level", "flag", "born_timestamp", "born_host", "sys_flag", "store_host",
                 "store_timestamp", "reconsume_times", "prepared_transaction_offset"}


def event_to_message(ev: Any) -> Message:
    """One JSON event -> Message. ``body`` is text (UTF-8), ``body_b64`` binary."""
    if not isinstance(ev, dict):
        raise InputError("event must be a JSON object")
    unknown = set(ev) - _EVENT_FIELDS
    if unknown:
        raise InputError(f"unknown field(s) {', '.join(sorted(unknown))}")
    if "topic" not in ev:
        raise InputError("missing field 'topic'")
    if ("body" in ev) == ("body_b64" in ev):
        raise InputError("give exactly one of 'body' (text) or 'body_b64'")
    if "body" in ev:
        if not isinstance(ev["body"], str):
            raise InputError("'body' must be a string (use body_b64 for binary)")
        body = ev["body"].encode()
    else:
        try:
            body = base64.b64decode(ev["body_b64"], validate=True)
        except (ValueError, TypeError):
            raise InputError("'body_b64' is not valid base64") from None
    kw = {k: ev[k] for k in _EVENT_FIELDS - {"body", "body_b64"} if k in ev}
    for k in ("queue_id", "delay_level", "flag", "sys_flag", "born_timestamp", "store_timestamp",
              "reconsume_times", "prepared_transaction_offset"):
        if k in kw and type(kw[k]) is not int:
            raise InputError(f"'{k}' must be an integer, got {kw[k]!r}")
    if "properties" in kw and not (isinstance(kw["properties"], dict)
                                   and all(isinstance(v, str) for v in kw["properties"].values())):
        raise InputError("'properties' must be an object of string values")
    return Message(body=body, **kw)


def record_to_json(r: Record) -> dict[str, Any]:
    """A CommitLog record as the `dump commitlog` JSON object."""
    return {
        "commitlog_offset": r.commitlog_offset, "size": r.size, "magic": r.magic & 0xFFFFFFFF,
        "body_crc": r.body_crc, "queue_id": r.queue_id, "flag": r.flag,
        "queue_offset": r.queue_offset, "sys_flag": r.sys_flag,
        "born_timestamp": r.born_timestamp, "born_host": r.born_host,
        "store_timestamp": r.store_timestamp, "store_host": r.store_host,
        "reconsume_times": r.reconsume_times,
        "prepared_transaction_offset": r.prepared_transaction_offset,
        "body_b64": base64.b64encode(r.body).decode(), "topic": r.topic,
        "properties": r.properties, "msg_id": r.msg_id,
    }


# --- commands ----------------------------------------------------------------------------------
def _lines(src: str) -> Iterator[tuple[int, str]]:
    f: TextIO = sys.stdin if src == "-" else open(src, encoding="utf-8")
    with f:
        yield from enumerate(f, 1)


def _progress(total: int | None) -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=_err, transient=True,
                    disable=not _err.is_terminal)


def cmd_ingest(a: argparse.Namespace) -> int:
    src = a.file
    if src != "-" and not Path(src).is_file():
        raise FileNotFoundError(f"{src}: no such input file")
    total = None if src == "-" else sum(1 for _ in open(src, "rb"))
    t0 = time.perf_counter()
    n = size = 0
    topics: set[tuple[str, int]] = set()
    with MessageStore(a.store, **parse_set_options(a.set)) as ms, _progress(total) as bar:
        task = bar.add_task("ingest", total=total)
        batch: list[tuple[int, Message]] = []

        def flush_batch() -> None:
            nonlocal n, size
            try:
                rs = ms.put_batch([m for _, m in batch])
            except MessageRejected as e:
                # keep every line before the rejected one, as a line-by-line producer would
                ms.put_batch([m for _, m in batch[:e.index]])
                raise InputError(f"line {batch[e.index][0]}: {e}") from None
            n += len(rs)
            size += sum(r.size for r in rs)
            topics.update((r.topic, r.queue_id) for r in rs)
            bar.advance(task, len(rs))
            batch.clear()

        for lineno, line in _lines(src):
            if not line.strip():
                continue
            try:
                batch.append((lineno, event_to_message(json.loads(line))))
            except (json.JSONDecodeError, InputError, TypeError) as e:
                flush_batch()
                raise InputError(f"line {lineno}: {e}") from None
            if len(batch) >= BATCH:
                flush_batch()
        flush_batch()
    dt = time.perf_counter() - t0
    print(json.dumps({"messages": n, "bytes": size, "queues": len(topics),
                      "topics": len({t for t, _ in topics}), "seconds": round(dt, 3),
                      "messages_per_second": round(n / dt) if dt else None}))
    return 0


def _emit(rows: Iterable[dict[str, Any]]) -> None:
    out = sys.stdout
    for row in rows:
        out.write(json.dumps(row, ensure_ascii=False) + "\n")


def cmd_dump(a: argparse.Namespace) -> int:
    with MessageStore(a.store, read_only=True, **parse_set_options(a.set)) as ms:
        if a.what == "commitlog":
            scan = ms.commitlog.scan(check_crc=False)
            _emit(record_to_json(r) for r in scan)
        elif a.what == "consumequeue":
            _emit(_cq_rows(ms, a.topic, a.queue))
        else:
            _emit(_index_rows(ms))
    return 0


def _cq_rows(ms: MessageStore, topic: str | None, queue: int | None) -> Iterator[dict[str, Any]]:
    for (t, q), cq in sorted(ms.queues.items()):
        if (topic and t != topic) or (queue is not None and q != queue):
            continue
        base = cq.files.min_offset // codec.CQ_UNIT_SIZE
        for i, (off, size, tcode) in enumerate(cq.all_units().tolist()):
            yield {"topic": t, "queue_id": q, "queue_offset": base + i, "commitlog_offset": off,
                   "size": size, "tags_code": tcode}


def _index_rows(ms: MessageStore) -> Iterator[dict[str, Any]]:
    if ms.index is None:
        return
    for f in ms.index.files:
        bt, et, bp, ep, slots, count = INDEX_HEADER.unpack_from(f.mm, 0)
        yield {"file": f.path.name, "begin_timestamp": bt, "end_timestamp": et,
               "begin_phy_offset": bp, "end_phy_offset": ep, "hash_slot_count": slots,
               "index_count": count}
        entries = np.frombuffer(f.mm, dtype=INDEX_ENTRY_DTYPE, count=max(0, count - 1),
                                offset=INDEX_HEADER_SIZE + 4 * f.slot_num + codec.INDEX_ENTRY_SIZE)
        for i, (h, phy, diff, prev) in enumerate(entries.tolist(), 1):
            yield {"file": f.path.name, "position": i, "key_hash": h, "slot": h % f.slot_num,
                   "phy_offset": phy, "time_diff": diff, "prev_index": prev}


def cmd_get(a: argparse.Namespace) -> int:
    with MessageStore(a.store, read_only=True, **parse_set_options(a.set)) as ms:
        g = ms.get(a.topic, a.queue, a.offset, a.max, a.tags)
        print(json.dumps({"status": g.status.value, "next_begin_offset": g.next_begin_offset,
                          "min_offset": g.min_offset, "max_offset": g.max_offset,
                          "count": len(g.messages)}))
        _emit({**record_to_json(m.record), "queue_offset": m.queue_offset,
               "tags_code": m.tags_code} for m in g.messages)
    return 0


def cmd_verify(a: argparse.Namespace) -> int:
    report = verify(a.store, **parse_set_options(a.set))
    if a.json:
        print(json.dumps(report.as_dict()))
    else:
        for p in report.problems:
            where = p.file + (f" @{p.offset}" if p.offset is not None else "")
            _err.print(f"[{'red' if p.severity == 'error' else 'yellow'}]{p.severity}[/]: {where}: {p.what}",
                       highlight=False)
        errors = sum(p.severity == "error" for p in report.problems)
        print(f"{'OK' if report.ok else 'FAILED'}: {report.records} records, {report.units} "
              f"ConsumeQueue units, {report.index_keys} index keys checked; {errors} errors, "
              f"{len(report.problems) - errors} warnings")
    return 0 if report.ok else 3


def cmd_query(a: argparse.Namespace) -> int:
    with MessageStore(a.store, read_only=True, **parse_set_options(a.set)) as ms:
        if a.msg_id:
            _emit([record_to_json(ms.lookup(a.msg_id))])
        elif a.key is not None:
            if not a.topic:
                raise InputError("--key needs --topic")
            _emit(record_to_json(r) for r in ms.query(a.topic, a.key, a.max, a.begin, a.end))
        else:
            if not a.topic or a.queue is None:
                raise InputError("--time needs --topic and --queue")
            off = ms.offset_by_time(a.topic, a.queue, a.time)
            print(json.dumps({"topic": a.topic, "queue_id": a.queue, "timestamp": a.time,
                              "queue_offset": off}))
    return 0


# --- argument parsing -------------------------------------------------------------------------------
def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", required=True, help="store root directory")
    p.add_argument("--set", action="append", metavar="NAME=VALUE",
                   help="override a store setting (RocketMQ name), repeatable")


def build_parser(name: str) -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    if name == "ingest":
        p = argparse.ArgumentParser(prog="rocketlake ingest", formatter_class=fmt,
                                    description="Write JSON Lines events into a store.",
                                    epilog='example:\n  echo \'{"topic":"orders","body":"hi","keys":"k1"}\' '
                                           '| rocketlake ingest --store var/store -')
        _common(p)
        p.add_argument("file", help="JSON Lines file, or - for stdin")
        p.set_defaults(func=cmd_ingest)
    elif name == "dump":
        p = argparse.ArgumentParser(prog="rocketlake dump", formatter_class=fmt,
                                    description="Print store records as JSON Lines.",
                                    epilog="examples:\n  rocketlake dump commitlog --store var/store\n"
                                           "  rocketlake dump consumequeue --store var/store --topic orders")
        p.add_argument("what", choices=["commitlog", "consumequeue", "index"])
        _common(p)
        p.add_argument("--topic")
        p.add_argument("--queue", type=int)
        p.set_defaults(func=cmd_dump)
    elif name == "get":
        p = argparse.ArgumentParser(prog="rocketlake get", formatter_class=fmt,
                                    description="Read messages of one queue (RocketMQ getMessage).",
                                    epilog="example:\n  rocketlake get --store var/store --topic orders "
                                           "--queue 0 --offset 0 --tags 'TagA || TagB'")
        _common(p)
        p.add_argument("--topic", required=True)
        p.add_argument("--queue", type=int, required=True)
        p.add_argument("--offset", type=int, default=0)
        p.add_argument("--max", type=int, default=32)
        p.add_argument("--tags", help="subscription expression, e.g. 'TagA || TagB'")
        p.set_defaults(func=cmd_get)
    elif name == "verify":
        p = argparse.ArgumentParser(prog="rocketlake verify", formatter_class=fmt,
                                    description="Check a whole store (fsck): every CommitLog record (CRC, "
                                                "lengths, self offsets), every ConsumeQueue unit, every "
                                                "index key, the checkpoint and the config files. Exit "
                                                "code 0 when clean, 3 when anything disagrees.",
                                    epilog="examples:\n  rocketlake verify --store var/store\n"
                                           "  rocketlake verify --store var/store --json | jq .problems")
        _common(p)
        p.add_argument("--json", action="store_true", help="one JSON report on stdout")
        p.set_defaults(func=cmd_verify)
    else:
        p = argparse.ArgumentParser(prog="rocketlake query", formatter_class=fmt,
                                    description="Find messages by key, offset msgId or store time.",
                                    epilog="examples:\n  rocketlake query --store S --topic orders --key k1\n"
                                           "  rocketlake query --store S --msg-id 7F0000010000238F000000000001E240\n"
                                           "  rocketlake query --store S --topic orders --queue 0 --time 1700000000000")
        _common(p)
        g = p.add_mutually_exclusive_group(required=True)
        g.add_argument("--key")
        g.add_argument("--msg-id")
        g.add_argument("--time", type=int, help="store time (ms): the queue offset stored then")
        p.add_argument("--topic")
        p.add_argument("--queue", type=int)
        p.add_argument("--max", type=int, default=32)
        p.add_argument("--begin", type=int, default=0, help="key query: earliest store time (ms)")
        p.add_argument("--end", type=int, default=2 ** 63 - 1, help="key query: latest store time (ms)")
        p.set_defaults(func=cmd_query)
    return p


def run_command(name: str, argv: list[str]) -> int:
    """Run one store command; clear one-line errors and exit code 1 on bad input."""
    args = build_parser(name).parse_args(argv)
    try:
        return args.func(args)
    except (InputError, MessageRejected, StoreFormatError, FileNotFoundError, ValueError,
            RuntimeError) as e:
        print(f"rocketlake {name}: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
