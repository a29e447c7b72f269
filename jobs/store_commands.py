"""Store commands of the CLI: ingest, dump, get, query, verify. JSON Lines out, one object per line.
Their options are declared in :mod:`rocketlake.jobs.cli`; no Spark here."""
from __future__ import annotations

import argparse
import base64
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rocketlake.jobs.exit_codes import ExitCode, NotAStoreError
from rocketlake.store import Message, MessageRejected, MessageStore, Record, codec
from rocketlake.store.codec import INDEX_ENTRY_DTYPE, INDEX_HEADER, INDEX_HEADER_SIZE
from rocketlake.store.commitlog import MessageEncoder, Scan
from rocketlake.store.config import StoreConfig, load_config, parse_set_options
from rocketlake.store.file_sizes import config_from_files
from rocketlake.store.mapped_file import first_nonzero
from rocketlake.store.verify import not_a_store, verify

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
def _progress(total: int | None) -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=_err, transient=True,
                    disable=not _err.is_terminal)


def _events(f: BinaryIO, prepare: Callable[[Message], object] | None = None
            ) -> Iterator[tuple[int, Message]]:
    """(line number, Message) of every non-blank line of ``f`` from its start; InputError naming
    the line at the first one that is not UTF-8 JSON of a valid event or that ``prepare``
    (the store's own ``MessageEncoder.prepare``) refuses."""
    f.seek(0)
    for lineno, raw in enumerate(f, 1):
        try:
            line = raw.decode("utf-8")
            if not line.strip():
                continue
            m = event_to_message(json.loads(line))
            if prepare is not None:
                prepare(m)
        except (ValueError, TypeError, RecursionError) as e:  # JSON, UTF-8, InputError, MessageRejected
            raise InputError(f"line {lineno}: {e}") from None
        yield lineno, m


def _open_input(src: str) -> BinaryIO:
    """The input file, or stdin spooled to an anonymous temporary file (read twice, in bounded
    memory)."""
    if src != "-":
        if not Path(src).is_file():
            raise FileNotFoundError(f"{src}: no such input file")
        return open(src, "rb")
    spool = tempfile.TemporaryFile()
    shutil.copyfileobj(sys.stdin.buffer, spool)
    return spool


def cmd_ingest(a: argparse.Namespace) -> int:
    """All lines or none: every line is checked, with the store's own validation, before the store
    is opened; a bad line leaves the store untouched. The input must not change meanwhile."""
    cfg = load_config(parse_set_options(a.set))
    t0 = time.perf_counter()
    n = size = 0
    topics: set[tuple[str, int]] = set()
    with _open_input(a.file) as f:
        encoder = MessageEncoder(cfg)
        total = 0
        with _progress(None) as bar:
            task = bar.add_task("check", total=None)
            for _ in _events(f, encoder.prepare):
                total += 1
                if total % BATCH == 0:
                    bar.update(task, completed=total)
        with MessageStore(a.store, cfg) as ms, _progress(total) as bar:
            task = bar.add_task("ingest", total=total)
            batch: list[tuple[int, Message]] = []

            def flush_batch() -> None:
                nonlocal n, size
                try:
                    rs = ms.put_batch([m for _, m in batch])
                except MessageRejected as e:  # only when the input changed after it was checked
                    raise InputError(f"line {batch[e.index or 0][0]}: {e} (the input changed while "
                                     f"ingesting; lines before {batch[0][0]} were stored)") from None
                n += len(rs)
                size += sum(r.size for r in rs)
                topics.update((r.topic, r.queue_id) for r in rs)
                bar.advance(task, len(rs))
                batch.clear()

            for event in _events(f):
                batch.append(event)
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


def _reading_config(a: argparse.Namespace) -> StoreConfig:
    """Settings to read ``a.store`` with: `--set` over store.conf, file sizes from the store's
    files (``store.file_sizes``; a `--set` the files contradict is an error naming both)."""
    settings = parse_set_options(a.set)
    return config_from_files(a.store, load_config(settings), explicit=settings)


def cmd_dump(a: argparse.Namespace) -> int:
    with MessageStore(a.store, _reading_config(a), read_only=True) as ms:
        if a.what == "commitlog":
            scan = ms.commitlog.scan(check_crc=False)
            n = 0
            for r in scan:
                _emit([record_to_json(r)])
                n += 1
            why = _early_stop(ms, scan)
            if why:
                mf = ms.commitlog.files.find(scan.end)
                where = f"file {mf.path.name} @{scan.end - mf.start}" if mf else "no file"
                print(f"rocketlake dump: error: stopped after {n} records at commitlog offset "
                      f"{scan.end} ({where}): {why}", file=sys.stderr)
                return ExitCode.UNUSABLE
        elif a.what == "consumequeue":
            _emit(_cq_rows(ms, a.topic, a.queue))
        else:
            _emit(_index_rows(ms))
    return 0


def _early_stop(ms: MessageStore, scan: Scan) -> str | None:
    """Why a finished CommitLog scan ended before the end of the data, None at the real end
    (zeros with nothing but zeros after them)."""
    if scan.error:
        return scan.error
    if scan.end < ms.commitlog.max_offset:
        return f"zeros where a record should start, valid records follow up to {ms.commitlog.max_offset}"
    mf = ms.commitlog.files.find(scan.end)
    garbage = first_nonzero(mf, scan.end - mf.start) if mf is not None else None
    if mf is not None and garbage is not None:
        return f"zeros where a record should start, non-zero bytes follow at {mf.start + garbage}"
    return None


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
    with MessageStore(a.store, _reading_config(a), read_only=True) as ms:
        g = ms.get(a.topic, a.queue, a.offset, a.max, a.tags)
        print(json.dumps({"status": g.status.value, "next_begin_offset": g.next_begin_offset,
                          "min_offset": g.min_offset, "max_offset": g.max_offset,
                          "count": len(g.messages)}))
        _emit({**record_to_json(m.record), "queue_offset": m.queue_offset,
               "tags_code": m.tags_code} for m in g.messages)
    return 0


def cmd_verify(a: argparse.Namespace) -> int:
    refused = not_a_store(a.store)
    if refused:
        raise NotAStoreError(refused)
    report = verify(a.store, _reading_config(a))
    if a.json:
        print(json.dumps(report.as_dict()))
    else:
        for p in report.problems:
            where = p.file + (f" @{p.offset}" if p.offset is not None else "")
            _err.print(f"[{'red' if p.severity == 'error' else 'yellow'}]{p.severity}[/]: {where}: {p.what}",
                       highlight=False)
        errors = sum(p.severity == "error" for p in report.problems)
        print(f"{'OK' if report.ok else 'FAILED'}: {report.records} records, {report.units} "
              f"ConsumeQueue units, {report.keys_checked} index keys checked; {errors} errors, "
              f"{len(report.problems) - errors} warnings")
    return ExitCode.OK if report.ok else ExitCode.PROBLEMS


def cmd_query(a: argparse.Namespace) -> int:
    with MessageStore(a.store, _reading_config(a), read_only=True) as ms:
        if a.msg_id:
            _emit([record_to_json(ms.lookup(a.msg_id, a.topic or None))])
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
