"""Store commands of the CLI: ingest, dump, get, query, verify. JSON Lines out, one object per line,
or (``--format text``) one readable line per message. Their options are declared in
:mod:`rocketlake.jobs.cli`; no Spark here."""
from __future__ import annotations

import argparse
import base64
import json
import shlex
import shutil
import sys
import tempfile
import time
from binascii import a2b_base64
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.json as pj
import pyarrow.parquet as pq
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rocketlake.jobs.exit_codes import ExitCode
from rocketlake.jobs.printable import printable
from rocketlake.jobs.times import to_datetime
from rocketlake.store import Message, MessageRejected, MessageStore, Record, codec
from rocketlake.store.codec import INDEX_HEADER
from rocketlake.store.commitlog import CommitLog, MessageEncoder, Scan
from rocketlake.store.config import StoreConfig, load_config, parse_set_options
from rocketlake.store.errors import CorruptRecordError, StoreFormatError
from rocketlake.store.file_sizes import config_from_files
from rocketlake.store.mapped_file import first_nonzero
from rocketlake.store.store_dir import check_store
from rocketlake.store.table_encoder import TableEncoder, messages_to_table
from rocketlake.store.verify import KINDS, Problem, VerifyReport, verify

BATCH = 1000
#: index entries (or ConsumeQueue units) decoded at a time by `dump`: its memory is bounded by
#: this, not by the size of a file
DUMP_CHUNK = 8192
#: the default store time range of the filters: everything
_EARLIEST, _LATEST = 0, 2 ** 63 - 1
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


_INT_EVENT_FIELDS = ("queue_id", "delay_level", "flag", "sys_flag", "born_timestamp",
                     "store_timestamp", "reconsume_times", "prepared_transaction_offset")
#: bytes of JSON Lines parsed at a time (a longer line takes the line-by-line path)
JSON_BLOCK = 16 << 20
#: Parquet rows per chunk
PARQUET_ROWS = 65536


def _event_table(batch: pa.RecordBatch) -> pa.Table | None:
    """A block of JSON events as a message table, or None when the block holds anything the
    columns cannot take exactly as ``event_to_message`` would (properties, whose order a
    column loses; nulls where a value is required; a value of another type): the line-by-line
    path decides those."""
    names = set(batch.schema.names)
    if not names <= _EVENT_FIELDS - {"properties"} or "topic" not in names \
            or ("body" in names) == ("body_b64" in names):
        return None
    try:
        batch.validate(full=True)  # pyarrow's JSON reader lets bytes that are not UTF-8 through
    except pa.ArrowInvalid:
        return None
    cols: dict[str, pa.Array] = {}
    for name in names:
        arr, t = batch.column(name), batch.column(name).type
        if name in ("body", "body_b64"):
            if not pa.types.is_string(t) or arr.null_count:
                return None
            if name == "body":
                cols["body"] = arr.cast(pa.binary())
                continue
            try:  # base64.b64decode(v, validate=True), without its per-call overhead
                cols["body"] = pa.array([a2b_base64(v, strict_mode=True) for v in arr.to_pylist()],
                                        type=pa.binary())
            except ValueError:  # binascii.Error, or not ASCII
                return None
        elif name in _INT_EVENT_FIELDS:
            if not pa.types.is_integer(t) or arr.null_count:
                return None
            cols[name] = arr
        elif name == "keys" and (pa.types.is_list(t) and pa.types.is_string(t.value_type)):
            cols[name] = arr
        elif pa.types.is_string(t) or pa.types.is_null(t):
            cols[name] = arr.cast(pa.string())
        else:
            return None
    return pa.table(cols)


def _json_tables(f: BinaryIO) -> Iterator[pa.Table]:
    """The events of ``f`` as message tables, block by block; ValueError when a block is not
    one (``_event_table``) or pyarrow cannot read it."""
    f.seek(0)
    for batch in pj.open_json(f, read_options=pj.ReadOptions(block_size=JSON_BLOCK)):
        table = _event_table(batch)
        if table is None:
            raise ValueError("not a plain message block")
        yield table


def _parquet_tables(f: BinaryIO) -> Iterator[pa.Table]:
    """A Parquet file's rows as message tables (``MessageStore.put_table``'s columns; a string
    ``body`` is its UTF-8)."""
    f.seek(0)
    for batch in pq.ParquetFile(f).iter_batches(batch_size=PARQUET_ROWS):
        table = pa.Table.from_batches([batch])
        if "body" in table.column_names and pa.types.is_string(table.schema.field("body").type):
            table = table.set_column(table.column_names.index("body"), "body",
                                     table.column("body").cast(pa.binary()))
        yield table


def _is_parquet(f: BinaryIO) -> bool:
    f.seek(0)
    return f.read(4) == b"PAR1"


def _check_tables(tables: Iterable[pa.Table], cfg: StoreConfig, label: str) -> int:
    """Validate every table with the store's own rules -> the number of rows; InputError naming
    the ``label`` ("row") of the first bad one (counted over the whole input, from 0)."""
    encoder = TableEncoder(MessageEncoder(cfg))
    total = 0
    with _progress(None) as bar:
        task = bar.add_task("check", total=None)
        for table in tables:
            try:
                encoder.encode(table)
            except MessageRejected as e:
                where = "" if e.index is None else f"{label} {total + e.index}: "
                raise InputError(f"{where}{e}") from None
            total += table.num_rows
            bar.update(task, completed=total)
    return total


def cmd_ingest(a: argparse.Namespace) -> int:
    """All rows or none: the whole input (JSON Lines, or Parquet with ``put_table``'s columns) is
    checked, with the store's own validation, before the store is opened; a bad line or row
    leaves the store untouched. The rows are then written inside ``MessageStore.all_or_nothing``:
    a full disk, any other error or a kill stores none of them. The input must not change
    meanwhile. Plain JSON events are read
    by pyarrow's JSON reader; a block it cannot take exactly (properties, odd types, a bad line)
    is read line by line, which names the bad line."""
    cfg = load_config(parse_set_options(a.set))
    t0 = time.perf_counter()
    n = size = 0
    queues: set[tuple[str, int]] = set()
    with _open_input(a.file) as f:
        tables: Callable[[], Iterable[tuple[str, pa.Table]]]
        if _is_parquet(f):
            try:
                total = _check_tables(_parquet_tables(f), cfg, "row")
            except (pa.ArrowException, OSError) as e:
                raise InputError(f"{a.file}: not a readable Parquet file: {e}") from None
            tables = partial(_numbered, _parquet_tables, f)
        else:
            try:
                total = _check_tables(_json_tables(f), cfg, "row")
                tables = partial(_numbered, _json_tables, f)
            except (ValueError, pa.ArrowException):  # InputError included: the lines name it
                total = _check_lines(f, cfg)
                tables = partial(_line_tables, f, cfg)
        with MessageStore(a.store, cfg) as ms, ms.all_or_nothing(), _progress(total) as bar:
            task = bar.add_task("ingest", total=total)
            for where, table in tables():
                try:
                    r = ms.put_table(table)
                except MessageRejected as e:  # only when the input changed after it was checked
                    raise InputError(f"{where}: {e} (the input changed while ingesting)") from None
                n += len(r)
                size += int(r.size.sum())
                ids = np.unique(r.topic << 32 | r.queue_id)
                queues.update((r.topics[int(k) >> 32], int(k) & 0xFFFFFFFF) for k in ids.tolist())
                bar.advance(task, len(r))
    dt = time.perf_counter() - t0
    print(json.dumps({"messages": n, "bytes": size, "queues": len(queues),
                      "topics": len({t for t, _ in queues}), "seconds": round(dt, 3),
                      "messages_per_second": round(n / dt) if dt else None}))
    return 0


def _numbered(read: Callable[[BinaryIO], Iterator[pa.Table]], f: BinaryIO
              ) -> Iterator[tuple[str, pa.Table]]:
    """The tables ``read(f)`` yields, each with the rows it holds ("rows 0-999")."""
    at = 0
    for table in read(f):
        yield f"rows {at}-{at + table.num_rows - 1}", table
        at += table.num_rows


def _check_lines(f: BinaryIO, cfg: StoreConfig) -> int:
    """Check every line (``_events``) -> the number of events."""
    encoder = MessageEncoder(cfg)
    total = 0
    with _progress(None) as bar:
        task = bar.add_task("check", total=None)
        for _ in _events(f, encoder.prepare):
            total += 1
            if total % BATCH == 0:
                bar.update(task, completed=total)
    return total


def _line_tables(f: BinaryIO, cfg: StoreConfig) -> Iterator[tuple[str, pa.Table]]:
    """The events line by line, ``BATCH`` at a time, as message tables."""
    encoder = MessageEncoder(cfg)
    batch: list[tuple[int, Message]] = []
    for event in _events(f):
        batch.append(event)
        if len(batch) >= BATCH:
            yield f"lines {batch[0][0]}-{batch[-1][0]}", messages_to_table([m for _, m in batch], encoder)
            batch = []
    if batch:
        yield f"lines {batch[0][0]}-{batch[-1][0]}", messages_to_table([m for _, m in batch], encoder)


# --- output: JSON Lines or text ----------------------------------------------------------------
def iso_time(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC, ``2024-11-19T07:06:40.037Z`` (the number itself when
    no date has it)."""
    try:
        return to_datetime(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    except (ValueError, OverflowError, OSError):
        return str(ms)


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


def message_text(r: Record, max_body: int) -> str:
    """One message as one line of ``name=value`` fields, the body last: what `dump commitlog`,
    `get` and `query` print with ``--format text``."""
    fields = {"store": iso_time(r.store_timestamp), "born": iso_time(r.born_timestamp),
              "topic": r.topic, "queue": r.queue_id, "queue_offset": r.queue_offset,
              "commitlog_offset": r.commitlog_offset, "msg_id": r.msg_id, "tags": r.tags,
              "keys": " ".join(r.keys) or None}
    return " ".join(f"{k}={_value(v)}" for k, v in fields.items()) + " body=" + body_text(r.body, max_body)


def row_text(row: dict[str, Any]) -> str:
    """A ConsumeQueue unit or index row as one line of ``name=value`` fields (times ISO-8601)."""
    return " ".join(f"{k}={iso_time(v) if k.endswith('_timestamp') else _value(v)}"
                    for k, v in row.items())


def _emit(rows: Iterable[dict[str, Any]], a: argparse.Namespace | None = None) -> None:
    """Rows as JSON Lines, or as text lines when ``a.format`` is ``text``."""
    text = a is not None and a.format == "text"
    out = sys.stdout
    for row in rows:
        out.write((row_text(row) if text else json.dumps(row, ensure_ascii=False)) + "\n")


def _emit_messages(messages: Iterable[tuple[Record, dict[str, Any]]], a: argparse.Namespace) -> int:
    """Records as JSON Lines (:func:`record_to_json` plus the extra fields) or as
    :func:`message_text` lines; returns how many."""
    out, n = sys.stdout, 0
    for r, extra in messages:
        out.write((message_text(r, a.max_body) if a.format == "text"
                   else json.dumps({**record_to_json(r), **extra}, ensure_ascii=False)) + "\n")
        n += 1
    return n


def _reading_config(a: argparse.Namespace) -> StoreConfig:
    """Settings to read ``a.store`` with: `--set` over store.conf, file sizes from the store's
    files (``store.file_sizes``; a `--set` the files contradict is an error naming both)."""
    settings = parse_set_options(a.set)
    return config_from_files(a.store, load_config(settings), explicit=settings)


def cmd_dump(a: argparse.Namespace) -> int:
    """Print the records, units or index entries that pass every filter given (topic, queue,
    offset range [--from-offset, --to-offset), store time range [--begin, --end])."""
    if a.what == "index" and (a.topic is not None or a.queue is not None):
        raise InputError("--topic and --queue do not apply to dump index (index entries hold key "
                         "hashes, not topics); use query --key, or the offset and time filters")
    with MessageStore(a.store, _reading_config(a), read_only=True) as ms:
        if a.what == "commitlog":
            return _dump_commitlog(ms, a)
        _emit(_cq_rows(ms, a) if a.what == "consumequeue" else _index_rows(ms, a), a)
    return 0


def _dump_commitlog(ms: MessageStore, a: argparse.Namespace) -> int:
    """The records in the offset range (the scan starts at the range, not at the first file)
    that pass the filters; exit 3 when damage stops the scan before the range's end."""
    log = ms.commitlog
    stop = _LATEST if a.to_offset is None else a.to_offset  # no --to-offset: to the end of valid data
    scan = log.scan(_scan_start(log, a.from_offset), check_crc=False, stop_at=stop)
    n = 0

    def read() -> Iterator[tuple[Record, dict[str, Any]]]:
        nonlocal n
        for r in scan:
            n += 1
            if (r.commitlog_offset >= a.from_offset and a.begin <= r.store_timestamp <= a.end
                    and (a.topic is None or r.topic == a.topic)
                    and (a.queue is None or r.queue_id == a.queue)):
                yield r, {}

    _emit_messages(read(), a)
    why = None if scan.end >= stop else _early_stop(ms, scan)
    if why:
        mf = log.files.find(scan.end)
        where = f"file {mf.path.name} @{scan.end - mf.start}" if mf else "no file"
        print(f"rocketlake dump: error: stopped after {n} records at commitlog offset "
              f"{scan.end} ({where}): {why}", file=sys.stderr)
        return ExitCode.UNUSABLE
    return 0


def _scan_start(log: CommitLog, offset: int) -> int:
    """Where a scan for the records at or after ``offset`` starts: ``offset`` when a valid record
    starts there, else the start of the file holding it (every CommitLog file starts with a
    record, RocketMQ's ``CommitLog.doAppend`` rolls with a BLANK record)."""
    if offset <= log.min_offset:
        return log.min_offset
    mf = log.files.find(offset)
    if mf is None:
        return offset  # past the end: nothing to read
    try:  # not log.read: a read-only open ends the data at the first damage, maybe before offset
        r = codec.decode_record(mf.mm, offset - mf.start, mf.start, True)
    except CorruptRecordError:
        return mf.start
    return offset if isinstance(r, Record) and r.physical_offset == offset else mf.start


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


def _cq_rows(ms: MessageStore, a: argparse.Namespace) -> Iterator[dict[str, Any]]:
    """The units of the selected queues in the queue offset range, ``DUMP_CHUNK`` at a time;
    with a time range, those whose record was stored in it (each unit's record is read for its
    store time)."""
    timed = a.begin > _EARLIEST or a.end < _LATEST
    for (t, q), cq in sorted(ms.queues.items()):
        if (a.topic is not None and t != a.topic) or (a.queue is not None and q != a.queue):
            continue
        at = max(a.from_offset, cq.files.min_offset // codec.CQ_UNIT_SIZE)
        stop = cq.max_offset if a.to_offset is None else min(a.to_offset, cq.max_offset)
        while at < stop:
            units = cq.units(at, min(stop - at, DUMP_CHUNK))
            if not len(units):  # the rest of a file not written: go on at the next file
                mf = cq.files.find(at * codec.CQ_UNIT_SIZE)
                if mf is None:
                    break
                at = mf.end // codec.CQ_UNIT_SIZE
                continue
            for i, (off, size, tcode) in enumerate(units.tolist()):
                if not timed or a.begin <= _store_time(ms, off) <= a.end:
                    yield {"topic": t, "queue_id": q, "queue_offset": at + i,
                           "commitlog_offset": off, "size": size, "tags_code": tcode}
            at += len(units)


def _store_time(ms: MessageStore, offset: int) -> int:
    """The store time of the record at a CommitLog offset; -1 when no record is there."""
    try:
        return ms.commitlog.read(offset).store_timestamp
    except CorruptRecordError:
        return -1


def _index_rows(ms: MessageStore, a: argparse.Namespace) -> Iterator[dict[str, Any]]:
    """Each index file's header, then its entries in the CommitLog offset and time ranges (an
    entry's time as RocketMQ's ``IndexFile.selectPhyOffset`` reads it: beginTimestamp +
    timeDiff seconds), ``DUMP_CHUNK`` entries at a time. With a filter, a file without a
    matching entry is left out. StoreFormatError naming the file for a header whose indexCount
    is more than the file holds."""
    if ms.index is None:
        return
    filtered = (a.from_offset > 0 or a.to_offset is not None
                or a.begin > _EARLIEST or a.end < _LATEST)
    stop = _LATEST if a.to_offset is None else a.to_offset
    for f in ms.index.files:  # all headers first: no view on a map outlives the error (close)
        count = INDEX_HEADER.unpack_from(f.mm, 0)[5]
        if not 0 <= count <= f.entry_num:
            raise StoreFormatError(f"{f.path}: the header's indexCount {count} is outside [0, "
                                   f"{f.entry_num}], the entries the file holds: the header is "
                                   f"damaged (rocketlake rebuild-index rebuilds the index)")
    for f in ms.index.files:
        bt, et, bp, ep, slots, count = INDEX_HEADER.unpack_from(f.mm, 0)
        matching = partial(_matching_entries, f.entries, bt, a.from_offset, stop, a.begin, a.end)
        chunks = [(lo, min(count, lo + DUMP_CHUNK)) for lo in range(1, count, DUMP_CHUNK)]
        if filtered:  # skip to the first chunk with a match; none: the file is left out
            chunks = chunks[next((i for i, c in enumerate(chunks) if matching(*c).size), len(chunks)):]
            if not chunks:
                continue
        yield {"file": f.path.name, "begin_timestamp": bt, "end_timestamp": et,
               "begin_phy_offset": bp, "end_phy_offset": ep, "hash_slot_count": slots,
               "index_count": count}
        for lo, hi in chunks:
            at = matching(lo, hi)
            for i, (h, phy, diff, prev) in zip(at.tolist(), f.entries[at].tolist()):
                yield {"file": f.path.name, "position": i, "key_hash": h, "slot": h % f.slot_num,
                       "phy_offset": phy, "time_diff": diff, "prev_index": prev}


def _matching_entries(entries: np.ndarray, begin_ts: int, from_offset: int, to_offset: int,
                      begin: int, end: int, lo: int, hi: int) -> np.ndarray:
    """Positions in [lo, hi) of the index ``entries`` (of a file whose beginTimestamp is
    ``begin_ts``) for CommitLog offsets in [from_offset, to_offset) stored in [begin, end]."""
    e = entries[lo:hi]
    phy, at = e["phy_offset"].astype(np.int64), begin_ts + e["time_diff"].astype(np.int64) * 1000
    keep = (from_offset <= phy) & (phy < to_offset) & (begin <= at) & (at <= end)
    return lo + np.flatnonzero(keep)


def cmd_get(a: argparse.Namespace) -> int:
    """The status line, then the messages; finding none is not an error (exit 0), but a line on
    stderr says so."""
    with MessageStore(a.store, _reading_config(a), read_only=True) as ms:
        g = ms.get(a.topic, a.queue, a.offset, a.max, a.tags)
        status = {"status": g.status.value, "next_begin_offset": g.next_begin_offset,
                  "min_offset": g.min_offset, "max_offset": g.max_offset, "count": len(g.messages)}
        print(row_text(status) if a.format == "text" else json.dumps(status))
        _emit_messages(((m.record, {"queue_offset": m.queue_offset, "tags_code": m.tags_code})
                        for m in g.messages), a)
    if not g.messages:
        tags = f" with tags '{a.tags}'" if a.tags else ""
        _nothing(a, f"no message{tags} in queue {a.topic}/{a.queue} from queue offset {a.offset}: "
                    f"{g.status.value} (the queue holds offsets [{g.min_offset}, {g.max_offset}))")
    return 0


def _nothing(a: argparse.Namespace, why: str) -> None:
    """Say on stderr that a read found nothing (not an error: the command exits 0)."""
    print(f"rocketlake {a.command}: {why}", file=sys.stderr)


def cmd_verify(a: argparse.Namespace) -> int:
    check_store(a.store)
    report = verify(a.store, _reading_config(a))
    if a.json:
        print(json.dumps(report.as_dict()))
    else:
        for line in verify_summary(report, a.max_problems, _repair_steps(report, a.store, a.set)):
            print(line)  # never wrapped: a pipe or a log gets whole lines
    return ExitCode.OK if report.ok else ExitCode.PROBLEMS


def verify_summary(report: VerifyReport, max_problems: int, steps: list[str]) -> list[str]:
    """The `verify` text report: the verdict, the problems counted by (file, kind), the first
    ``max_problems`` problems, then what to do."""
    errors = sum(p.severity == "error" for p in report.problems)
    lines = [f"{'OK' if report.ok else 'FAILED'}: {report.records} records, {report.units} "
             f"ConsumeQueue units, {report.keys_checked} index keys checked; {errors} errors, "
             f"{len(report.problems) - errors} warnings"]
    if not report.problems:
        return lines
    groups: dict[tuple[str, str], list[Problem]] = {}
    for p in report.problems:
        groups.setdefault((p.file, p.kind), []).append(p)
    width = max(len(file) for file, _ in groups)
    lines.append("problems by file and kind:")
    for (file, kind), ps in groups.items():
        severity = "error" if any(p.severity == "error" for p in ps) else "warning"
        lines.append(f"  {len(ps):>8}  {severity:<7}  {file:<{width}}  {kind}: {KINDS.get(kind, kind)}")
    shown = report.problems[:max_problems]
    lines.append(f"problems (the first {len(shown)} of {len(report.problems)}):" if shown else "")
    for p in shown:
        where = p.file + (f" @{p.offset}" if p.offset is not None else "")
        lines.append(f"  {p.severity}: {where}: {p.what}")
    if len(report.problems) > len(shown):
        lines.append(f"  ... and {len(report.problems) - len(shown)} more "
                     f"(--max-problems N shows more, --json shows all)")
    if steps:
        lines.append("next:")
        lines.extend(f"  {step}" for step in steps)
    return [printable(line) for line in lines if line]


def _repair_steps(report: VerifyReport, store: Path, settings: list[str]) -> list[str]:
    """What to run next for the errors found, by the part of the store they are in."""
    args = f"--store {shlex.quote(str(store))}" + "".join(f" --set {shlex.quote(s)}" for s in settings)
    first = {p.kind.split("-")[0]: p for p in reversed(report.problems) if p.severity == "error"}
    steps = []
    if "commitlog" in first:
        p = first["commitlog"]
        name = Path(p.file).name
        at = (f" (commitlog offset {int(name) + p.offset})"
              if name.isdigit() and p.offset is not None else "")
        steps.append(f"CommitLog damage, first at {p.file} @{p.offset}{at}: the next writable open "
                     f"(e.g. rocketlake ingest) recovers the store and cuts the CommitLog at the "
                     f"first invalid record its scan meets (the last three files; after a crash, "
                     f"from the checkpoint), zeroing what follows. Copy the store (cp -a) before "
                     f"writing to it; `rocketlake dump commitlog {args} --to-offset N` prints the "
                     f"records before offset N.")
    if "consumequeue" in first:
        steps.append(f"ConsumeQueue damage: rocketlake rebuild-consumequeue {args}  (rebuilt from the "
                     f"CommitLog; --output DIR writes the files elsewhere first)")
    if "index" in first:
        steps.append(f"index damage: rocketlake rebuild-index {args}  (rebuilt from the CommitLog; "
                     f"--output DIR writes the files elsewhere first)")
    return steps


def cmd_query(a: argparse.Namespace) -> int:
    """Finding nothing is not an error (exit 0), but a line on stderr says so."""
    with MessageStore(a.store, _reading_config(a), read_only=True) as ms:
        if a.msg_id:
            _emit_messages([(ms.lookup(a.msg_id, a.topic or None), {})], a)
        elif a.key is not None:
            if not a.topic:
                raise InputError("--key needs --topic")
            found = ms.query(a.topic, a.key, a.max, a.begin, a.end)
            if not _emit_messages(((r, {}) for r in found), a):
                stored = ("" if (a.begin, a.end) == (_EARLIEST, _LATEST)
                          else f" stored in [{iso_time(a.begin)}, {iso_time(a.end)}]")
                _nothing(a, f"no message with key '{a.key}' in topic '{a.topic}'{stored}")
        else:
            if not a.topic or a.queue is None:
                raise InputError("--time needs --topic and --queue")
            off = ms.offset_by_time(a.topic, a.queue, a.time)
            row = {"topic": a.topic, "queue_id": a.queue, "timestamp": a.time, "queue_offset": off}
            print(row_text(row) if a.format == "text" else json.dumps(row))
            if ms.max_offset(a.topic, a.queue) == 0:
                _nothing(a, f"no message in queue {a.topic}/{a.queue}")
    return 0
