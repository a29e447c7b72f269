"""`rocketlake ingest`: JSON Lines or Parquet events into a store, all rows or none, by one of
three paths: JSON blocks as columns (pyarrow's JSON reader), JSON line by line (what the columns
cannot take exactly; it names a bad line), Parquet with ``put_table``'s columns. Options in
:mod:`rocketlake.jobs.cli`; no Spark here."""
from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
from binascii import a2b_base64
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.json as pj
import pyarrow.parquet as pq
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rocketlake.jobs.cli.encoded_spool import EncodedSpool
from rocketlake.jobs.cli.events import EVENT_FIELDS, INT_EVENT_FIELDS, InputError, event_to_message
from rocketlake.jobs.cli.queue_spread import QueueSpread
from rocketlake.jobs.printable import printable
from rocketlake.store import Message, MessageRejected, MessageStore, codec
from rocketlake.store.config import StoreConfig, load_config, parse_set_options
from rocketlake.store.errors import NotAStoreError
from rocketlake.store.message_encoder import MessageEncoder
from rocketlake.store.store_dir import store_problem
from rocketlake.store.table_encoder import TableEncoder, messages_to_table

BATCH = 1000
log = logging.getLogger(__name__)

#: bad lines of an input named on stderr at most (all are counted)
MAX_BAD_LINES = 10
_err = Console(stderr=True)


def _progress(total: int | None) -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=_err, transient=True,
                    disable=not _err.is_terminal)


class BadLines:
    """The bad lines of an input: how many, and the errors of the first ``MAX_BAD_LINES``."""

    def __init__(self) -> None:
        self.count = 0
        self.first: list[str] = []

    def add(self, error: str) -> None:
        self.count += 1
        if len(self.first) < MAX_BAD_LINES:
            self.first.append(error)


def _lines(f: BinaryIO, spread: QueueSpread) -> Iterator[tuple[int, Message | str]]:
    """(line number, Message) of every non-blank line of ``f`` from its start, an event without
    ``queue_id`` given the next of ``spread``; in place of the Message, the error of a line that
    is not UTF-8 JSON of a valid event ("line N: ...")."""
    f.seek(0)
    for lineno, raw in enumerate(f, 1):
        event: Message | str
        try:
            line = raw.decode("utf-8")
            if not line.strip():
                continue
            ev = json.loads(line)
            if isinstance(ev, dict) and "queue_id" not in ev and isinstance(ev.get("topic"), str):
                ev["queue_id"] = int(spread.take(ev["topic"], 1)[0])
            event = event_to_message(ev)
        except (ValueError, TypeError, RecursionError) as e:  # JSON, UTF-8, InputError
            event = f"line {lineno}: {e}"
        yield lineno, event


def _open_input(src: str) -> BinaryIO:
    """The input file, or stdin spooled to a temporary file (read twice, in bounded memory);
    its ``name`` is a path that opens it again."""
    if src != "-":
        if not Path(src).is_file():
            raise FileNotFoundError(f"{src}: no such input file")
        return open(src, "rb")
    spool = tempfile.NamedTemporaryFile()
    shutil.copyfileobj(sys.stdin.buffer, spool)
    spool.flush()
    return spool  # type: ignore[return-value]  # a BufferedRandom, read as BinaryIO


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
    if not names <= EVENT_FIELDS - {"properties"} or "topic" not in names \
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
        elif name == "queue_id" and (pa.types.is_integer(t) or pa.types.is_null(t)):
            cols[name] = arr  # a null: an event naming no queue (``QueueSpread.fill``)
        elif name in INT_EVENT_FIELDS:
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
    one (``_event_table``) or pyarrow cannot read it. pyarrow reads ahead in threads of its
    own, which may go on after this stops: it reads the file through a handle of its own, so
    ``f`` is left as it was for the line-by-line path."""
    with pa.OSFile(f.name) as own:
        for batch in pj.open_json(own, read_options=pj.ReadOptions(block_size=JSON_BLOCK)):
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


def _check_tables(tables: Iterable[pa.Table], cfg: StoreConfig, label: str,
                  spool: EncodedSpool, spread: QueueSpread) -> int:
    """Validate every table (rows naming no queue given one by ``spread``) with the store's own
    rules and add it to ``spool`` encoded -> the number of rows; InputError naming the ``label``
    ("row") of the first bad one (counted over the whole input, from 0)."""
    encoder = TableEncoder(MessageEncoder(cfg))
    total = 0
    with _progress(None) as bar:
        task = bar.add_task("check", total=None)
        for table in tables:
            try:
                spool.add(encoder.encode(spread.fill(table)))
            except MessageRejected as e:
                where = "" if e.index is None else f"{label} {total + e.index}: "
                raise InputError(f"{where}{e}") from None
            total += table.num_rows
            bar.update(task, completed=total)
    return total


def cmd_ingest(a: argparse.Namespace) -> int:
    """All rows or none: the whole input (JSON Lines, or Parquet with ``put_table``'s columns) is
    checked and encoded, with the store's own validation, before the store is opened, once: the
    encoded rows wait in an ``EncodedSpool``. A bad line or row leaves the store untouched. The
    rows are then written inside ``MessageStore.all_or_nothing``: a full disk, any other error
    or a kill stores none of them. Plain JSON events are read by pyarrow's JSON reader; a block
    it cannot take exactly (properties, odd types, a bad line) is read line by line, which names
    the first ``MAX_BAD_LINES`` bad lines. The store must
    exist, unless ``--create`` (then a missing path or an empty directory becomes a new store).
    Events naming no queue are spread over their topic's queues (:mod:`queue_spread`), and the
    log says so."""
    problem = store_problem(a.store, fresh=a.create)
    if problem is not None:
        if not a.create and store_problem(a.store, fresh=True) is None:
            problem += " (ingest --create makes a new store there)"
        raise NotAStoreError(problem)
    cfg = load_config(parse_set_options(a.set))
    t0 = time.perf_counter()
    n = size = 0
    queues: set[tuple[str, int]] = set()
    spread = QueueSpread.for_store(a.store)
    with _open_input(a.file) as f, EncodedSpool() as spool:
        if _is_parquet(f):
            try:
                total = _check_tables(_parquet_tables(f), cfg, "row", spool, spread)
            except (pa.ArrowException, OSError) as e:
                raise InputError(f"{a.file}: not a readable Parquet file: {e}") from None
        else:
            try:
                total = _check_tables(_json_tables(f), cfg, "row", spool, spread)
            except (ValueError, pa.ArrowException):  # InputError included: the lines name it
                spool.clear()
                spread = QueueSpread.for_store(a.store)  # the lines from the first again
                total = _check_lines(f, cfg, "stdin" if a.file == "-" else a.file, spool, spread)
        with MessageStore(a.store, cfg) as ms, ms.all_or_nothing(), _progress(total) as bar:
            task = bar.add_task("ingest", total=total)
            for table in spool:
                r = ms.put_encoded(table)
                n += len(r)
                size += int(r.size.sum())
                ids = np.unique(codec.queue_key(r.topic, r.queue_id))
                queues.update((r.topics[t], q) for t, q in map(codec.queue_of_key, ids.tolist()))
                bar.advance(task, len(r))
    dt = time.perf_counter() - t0
    if spread.summary():
        log.info("rocketlake ingest: %s", spread.summary())
    print(json.dumps({"messages": n, "bytes": size, "queues": len(queues),
                      "topics": len({t for t, _ in queues}), "seconds": round(dt, 3),
                      "messages_per_second": round(n / dt) if dt else None}))
    return 0


def _check_lines(f: BinaryIO, cfg: StoreConfig, name: str, spool: EncodedSpool,
                 spread: QueueSpread) -> int:
    """Check every line, ``BATCH`` lines at a time encoded into ``spool`` -> the number of
    events. Bad lines: the first ``MAX_BAD_LINES`` each on a line of stderr, then InputError
    counting them all."""
    encoder = MessageEncoder(cfg)
    tables = TableEncoder(encoder)
    total, bad = 0, BadLines()
    batch: list[tuple[int, Message | str]] = []

    def check(batch: list[tuple[int, Message | str]]) -> None:
        """Spool the batch encoded while every line so far is good; otherwise, or when the
        batch holds a bad line, name each of its bad lines in order."""
        msgs = [m for _, m in batch if isinstance(m, Message)]
        if not bad.count and len(msgs) == len(batch):
            try:
                spool.add(tables.encode(messages_to_table(msgs, encoder)))
                return
            except MessageRejected:
                pass  # the rows are checked one by one below, which names the line
        for lineno, m in batch:
            if isinstance(m, str):
                bad.add(m)
                continue
            try:
                encoder.prepare(m)
            except MessageRejected as e:
                bad.add(f"line {lineno}: {e}")

    with _progress(None) as bar:
        task = bar.add_task("check", total=None)
        for event in _lines(f, spread):
            batch.append(event)
            if len(batch) >= BATCH:
                check(batch)
                total += len(batch)
                batch = []
                bar.update(task, completed=total)
        if batch:
            check(batch)
            total += len(batch)
    total -= bad.count
    if bad.count == 1:
        raise InputError(bad.first[0])
    if bad.count:
        for error in bad.first:
            print(printable(f"rocketlake ingest: {error}"), file=sys.stderr)
        listed = "all" if bad.count == len(bad.first) else f"the first {len(bad.first)}"
        raise InputError(f"{name}: {bad.count} bad lines ({listed} listed above)")
    return total
