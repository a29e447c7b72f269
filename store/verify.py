"""fsck for a RocketMQ store: check every record, unit, index key, the checkpoint and config files.

Read-only: nothing under the store root is changed. Each problem names the file, the byte offset
where it applies, and what is wrong.
"""
from __future__ import annotations

import ctypes
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rocketlake.store import codec, ingest_journal
from rocketlake.store.batch_consume_queue import BatchConsumeQueue, load_batch_queues
from rocketlake.store.checkpoint import Checkpoint
from rocketlake.store.codec import CQ_UNIT_SIZE, INDEX_HEADER, queue_key
from rocketlake.store.commitlog import CommitLog
from rocketlake.store.compaction_log import QUEUE_DIR as COMPACTION_QUEUE_DIR
from rocketlake.store.compaction_log import load_compaction_queues
from rocketlake.store.config import StoreConfig, load_config
from rocketlake.store.config_files import CONSUMER_OFFSETS, read_config, read_consumer_offsets
from rocketlake.store.consume_queue import ConsumeQueue
from rocketlake.store.dispatch import from_record
from rocketlake.store.errors import ConfigFileError, CorruptRecordError, StoreFormatError
from rocketlake.store.index import IndexFile, IndexService, header_problems
from rocketlake.store.index_keys import IndexKeys, ToMatch
from rocketlake.store.kernels import records as kr
from rocketlake.store.kernels import store_times
from rocketlake.store.mapped_file import MappedFile, first_nonzero
from rocketlake.store.queue_tally import Numbered, QueueTally, checked_units, lookup
from rocketlake.store.record_walk import Gap, RecordBatch
from rocketlake.store.store_dir import store_problem
from rocketlake.store.store_files import StoreFiles
from rocketlake.store.swap_journal import refuse_unfinished
from rocketlake.store.topic_config import TOPICS_JSON, check_topics_file


@dataclass
class Problem:
    """One thing verify found wrong (an "error") or worth knowing (a "warning")."""
    severity: str          # "error" or "warning"
    file: str              # path relative to the store root
    offset: int | None     # byte offset in that file, when it applies
    what: str
    #: what kind of problem, one of :data:`KINDS` (reports count problems by file and kind)
    kind: str = "other"


#: kind -> what it is; the first word names the part of the store it is in
KINDS = {
    "commitlog-unreadable": "the CommitLog files themselves (names, sizes)",
    "commitlog-invalid-record": "a record that does not decode (magic, size, CRC, offset)",
    "commitlog-no-blank": "a CommitLog file that ends without its BLANK record",
    "commitlog-garbage": "non-zero bytes after the end of valid data",
    "commitlog-store-time": "a record stored at a time no index file can be named by (indexed at 1 ms)",
    "consumequeue-unreadable": "the ConsumeQueue files themselves",
    "consumequeue-missing-queue": "a queue the CommitLog has records for has no files",
    "consumequeue-bad-unit": "a unit that points where no record of its queue starts",
    "consumequeue-unit-mismatch": "a unit whose size or tagsCode disagrees with its record",
    "consumequeue-missing-unit": "a record of the queue that has no unit",
    "compaction": "a 5.x broker's compaction store (compaction/): its queues and logs, read only",
    "index-unreadable": "the index files themselves",
    "index-missing": "no index files although records have keys",
    "index-key-not-found": "a record's key that a query through the index does not find",
    "index-unindexed": "records with keys after the index's last entry",
    "index-header": "an index file header that disagrees with its entries or records",
    "checkpoint": "the checkpoint file",
    "abort": "the abort file (not closed cleanly)",
    "ingest-pending": "an unfinished ingest the next writer open rolls back",
    "config": "a config/*.json file or a consumer offset",
    "not-a-store": "the path is not a store",
}


@dataclass
class Damage:
    """A damaged stretch of the CommitLog: from ``offset`` (where a record should start but none
    does) to ``resumes_at``, the next valid record start in the same file (None: none follows
    in that file), and the valid records (``records_after``, ``bytes_after`` bytes) anywhere
    after ``offset``: what a recovery that cuts the CommitLog there would drop."""
    offset: int
    resumes_at: int | None
    records_after: int = 0
    bytes_after: int = 0


@dataclass
class VerifyReport:
    """What ``verify`` checked (records, units, index keys) and found."""
    root: str
    records: int = 0
    units: int = 0
    keys_checked: int = 0
    problems: list[Problem] = field(default_factory=list)
    #: CommitLog damage, in CommitLog order
    damage: list[Damage] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no problem is an error (warnings only, or none)."""
        return not any(p.severity == "error" for p in self.problems)

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready values (``rocketlake verify --json``)."""
        return {"root": self.root, "ok": self.ok, "records": self.records, "units": self.units,
                "keys_checked": self.keys_checked, "problems": [asdict(p) for p in self.problems],
                "damage": [asdict(d) for d in self.damage]}


@dataclass(frozen=True)
class Records:
    """CommitLog records as columns, in CommitLog order (no object per record): salvage's plan,
    and verify's exact check of the queues its per-queue sums found disagreeing (``_Checker._exact``)."""
    offset: npt.NDArray[np.int64]
    size: npt.NDArray[np.int32]
    topic: npt.NDArray[np.int32]          # index into ``topics``
    queue_id: npt.NDArray[np.int32]
    queue_offset: npt.NDArray[np.int64]
    tags_code: npt.NDArray[np.int64]
    to_queue: npt.NDArray[np.bool_]       # gets a ConsumeQueue unit
    topics: list[str]
    #: each record's store time, when asked for (``RecordColumns(store_ts=True)``)
    store_ts: npt.NDArray[np.int64] | None = None

    def __len__(self) -> int:
        return int(self.offset.size)

    def find(self, offsets: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """(row, whether a record starts there) for each CommitLog offset; row is 0 where none."""
        return lookup(self.offset, offsets)

    def queue_key(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """``codec.queue_key`` of each row of ``rows`` (by topic index, then queue id)."""
        return queue_key(self.topic[rows], self.queue_id[rows])

    def queues(self) -> dict[tuple[str, int], npt.NDArray[np.int64]]:
        """Rows of the records that get a ConsumeQueue unit, by (topic, queue id), in CommitLog order."""
        rows = np.flatnonzero(self.to_queue)
        group = self.queue_key(rows)
        order = np.argsort(group, kind="stable")
        rows, group = rows[order], group[order]
        out = {}
        for part in np.split(rows, np.flatnonzero(np.diff(group)) + 1) if rows.size else []:
            first = int(part[0])
            out[(self.topics[int(self.topic[first])], int(self.queue_id[first]))] = part
        return out


@dataclass
class StoreTimes:
    """What verify needs of the records' store times, gathered as they are walked (no column):
    the newest, and the records stored at a time no index file can be named by
    (``codec.index_time``): how many, and the first one's CommitLog offset and store time."""
    newest: int | None = None
    odd: int = 0
    first_odd: tuple[int, int] = (0, 0)

    def add(self, newest: int | None, odd: int, first_odd: tuple[int, int]) -> None:
        """Take a batch's newest store time (None: no record), how many of its records have
        odd times, and the first one's (CommitLog offset, store time); batches in CommitLog order."""
        if newest is not None:
            self.newest = newest if self.newest is None else max(self.newest, newest)
        if odd and not self.odd:
            self.first_odd = first_odd
        self.odd += odd


@dataclass(frozen=True)
class Prepared:
    """``Walked.prepare`` of one batch: its bytes, index keys, newest store time (None: no
    record), records with odd store times and the first one's (offset, time), records at or
    after the journal's end, which of the index headers' phy offsets its records start at, its
    rows numbered by queue, its keys to match (None: no index)."""
    bytes: int
    keys: int
    newest: int | None
    odd: int
    first_odd: tuple[int, int]
    journal_after: int
    starts: list[int]
    numbered: Numbered
    to_match: ToMatch | None


@dataclass(frozen=True)
class QueueRows:
    """The records that get a ConsumeQueue unit, by queue: queue ``keys[g]`` (topic, queue id)
    has rows ``bounds[g]:bounds[g + 1]`` of ``queue_offset`` (ascending) and ``rows`` (the
    records' rows in ``Records``); where records claim the same queue offset, the last one in
    CommitLog order stands for it. Queues are ordered by the ``Records`` topic index, then id."""
    keys: list[tuple[str, int]]
    bounds: npt.NDArray[np.int64]
    queue_offset: npt.NDArray[np.int64]
    rows: npt.NDArray[np.int64]

    @classmethod
    def of(cls, records: Records) -> QueueRows:
        """Group ``records`` by queue: one sort for all the queues."""
        rows = np.flatnonzero(records.to_queue)
        group = records.queue_key(rows)
        qo = records.queue_offset[rows]
        order = np.lexsort((qo, group))  # stable: CommitLog order among equal queue offsets
        # one column at a time: a column and its reordered copy at most (a copy is a row each)
        rows = rows[order]
        group = group[order]
        qo = qo[order]
        del order
        last = np.ones(qo.size, dtype=np.bool_)
        last[:-1] = (qo[1:] != qo[:-1]) | (group[1:] != group[:-1])
        rows = rows[last]
        group = group[last]
        qo = qo[last]
        bounds = np.concatenate(([0], np.flatnonzero(np.diff(group)) + 1, [qo.size])) if qo.size \
            else np.zeros(1, dtype=np.int64)
        keys = [(records.topics[int(group[a] >> 32)], int(records.queue_id[rows[a]]))
                for a in bounds[:-1].tolist()]
        return cls(keys, bounds.astype(np.int64), qo, rows)

    def queue(self, g: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Queue ``g``'s (queue offsets, rows)."""
        a, b = int(self.bounds[g]), int(self.bounds[g + 1])
        return self.queue_offset[a:b], self.rows[a:b]


class RecordColumns:
    """Collects walked batches into ``Records`` (each record's store time too with ``store_ts``)."""

    #: offset, size, topic, queue id, queue offset, tagsCode, to_queue, store time
    DTYPES = (np.int64, np.int32, np.int32, np.int32, np.int64, np.int64, np.bool_, np.int64)

    def __init__(self, store_ts: bool = False) -> None:
        self.dtypes = self.DTYPES if store_ts else self.DTYPES[:-1]
        self.columns: list[list[npt.NDArray[Any]]] = [[] for _ in self.dtypes]
        self.topic_ids: dict[str, int] = {}

    def add(self, batch: RecordBatch, delay_levels_ms: tuple[int, ...],
            rows: npt.NDArray[np.int64] | None = None) -> None:
        """Take a batch's records (only ``rows`` of them, when given)."""
        cols = batch.dispatch(delay_levels_ms)
        ids, names = batch.topics
        remap = np.array([self.topic_ids.setdefault(n, len(self.topic_ids)) for n in names], dtype=np.int32)
        raw, tags_code, to_queue = batch.raw, cols.tags_code, cols.to_queue
        if rows is not None:
            raw, ids, tags_code, to_queue = raw[rows], ids[rows], tags_code[rows], to_queue[rows]
        parts: tuple[npt.NDArray[Any], ...] = (
            raw[:, kr.OFFSET], raw[:, kr.SIZE], remap[ids], raw[:, kr.QUEUE_ID],
            raw[:, kr.QUEUE_OFFSET], tags_code, to_queue, raw[:, kr.STORE_TS])
        for column, part, dtype in zip(self.columns, parts, self.dtypes):
            column.append(part.astype(dtype))  # a copy: the batch's rows go

    def records(self) -> Records:
        """The columns so far, each joined in turn (memory: the columns plus the largest one)."""
        cols: list[npt.NDArray[Any]] = []
        for k, dtype in enumerate(self.dtypes):
            parts, self.columns[k] = self.columns[k], []
            cols.append(np.concatenate(parts) if parts else np.zeros(0, dtype=dtype))
            del parts
            _trim_heap()
        return Records(offset=cols[0], size=cols[1], topic=cols[2], queue_id=cols[3],
                       queue_offset=cols[4], tags_code=cols[5], to_queue=cols[6],
                       topics=list(self.topic_ids), store_ts=cols[7] if len(cols) > 7 else None)


def _trim_heap() -> None:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``; nothing where
    there is none). The batches' column parts live on the heap among other allocations: freed
    after their join, they would stay resident (20 GiB store: 700 MiB)."""
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        trim(0)


@dataclass
class Walked:
    """What verify keeps of the walked records (no row per record): counts, store times, the
    per-queue tally, the index keys matched per index file, which of ``phys`` (the index
    headers' phy offsets) a record starts at, and the records at or after ``journal_end``."""
    queues: QueueTally
    index_keys: IndexKeys | None
    phys: npt.NDArray[np.int64]  # ascending
    journal_end: int | None
    delay_levels_ms: tuple[int, ...]
    records: int = 0
    bytes: int = 0
    keys: int = 0
    journal_after: int = 0
    times: StoreTimes = field(default_factory=StoreTimes)
    starts: set[int] = field(default_factory=set)

    def prepare(self, batch: RecordBatch) -> Prepared:
        """What ``add`` takes of a batch that needs no earlier batch: ``CommitLog.walk`` runs
        this in its threads (``RecordBatch.prepare``), beside ``add`` of the batches before."""
        raw = batch.raw
        off = raw[:, kr.OFFSET]
        cols = batch.dispatch(self.delay_levels_ms)
        # odd: ``codec.index_time(ts) != ts``, exactly where ts is outside [1, INDEX_TIME_MAX]
        newest, odd, first = (store_times.outside(raw, 1, codec.INDEX_TIME_MAX) if len(batch)
                              else (None, 0, -1))
        return Prepared(
            int(raw[:, kr.SIZE].sum()), int(cols.key_hashes.size), newest, odd,
            (int(raw[first, kr.OFFSET]), int(raw[first, kr.STORE_TS])) if odd else (0, 0),
            0 if self.journal_end is None else int(np.count_nonzero(off >= self.journal_end)),
            self.phys[lookup(off, self.phys)[1]].tolist() if self.phys.size else [],
            self.queues.numbered(batch),
            None if self.index_keys is None else self.index_keys.to_match(off, cols.key_counts,
                                                                          cols.key_hashes))

    def add(self, batch: RecordBatch) -> None:
        """Take a batch (CommitLog order)."""
        p = batch.prepare(self.prepare)
        self.records += len(batch)
        self.bytes += p.bytes
        self.keys += p.keys
        self.times.add(p.newest, p.odd, p.first_odd)
        self.journal_after += p.journal_after
        self.starts.update(p.starts)
        self.queues.records(batch, p.numbered)
        if self.index_keys is not None:
            assert p.to_match is not None
            self.index_keys.match(p.to_match)

    def finish(self) -> None:
        """After the walk."""
        if self.index_keys is not None:
            self.index_keys.finish()


def _file_groups(queues: list[ConsumeQueue], numbers: Iterable[int]
                 ) -> Iterator[list[tuple[int, MappedFile]]]:
    """The files of ``queues[k]`` for each k of ``numbers``, as (k, file), in groups of at most
    about ``CHECK_UNITS`` written units."""
    group: list[tuple[int, MappedFile]] = []
    units = 0
    for k in numbers:
        for mf in queues[k].files.files:
            group.append((k, mf))
            units += mf.wrote // CQ_UNIT_SIZE
            if units >= CHECK_UNITS:
                yield group
                group, units = [], 0
    if group:
        yield group


class _Checker:
    """One verify run over the open ``files``: ``load``, the walk's tallies (``walked``), then
    the checks in order (``commitlog``, ``consume_queues``, ``index``, ``checkpoint``,
    ``config``), each adding its problems to ``report``."""

    def __init__(self, files: StoreFiles) -> None:
        self.files = files
        self.root, self.cfg = files.root, files.cfg
        self.report = VerifyReport(str(self.root))
        #: what ``load`` read before the walk (an error is reported where its check comes)
        self.queues: list[ConsumeQueue] | StoreFormatError = []
        self.idx: IndexService | StoreFormatError | None = None
        self.journal: ingest_journal.IngestJournal | StoreFormatError | None = None

    def load(self) -> CommitLog | None:
        """Open the CommitLog (None, reported, when it cannot be), then the ConsumeQueues, the
        index (when enabled) and the ingest journal, which the walk's tallies need."""
        try:
            log = self.files.commitlog
        except StoreFormatError as e:
            self.problem("commitlog-unreadable", "commitlog", None, str(e))
            return None
        try:
            self.queues = [cq for _, cq in sorted(self.files.queues.items())]
        except StoreFormatError as e:
            self.queues = e
        if self.cfg.messageIndexEnable:
            try:
                self.idx = self.files.index
            except StoreFormatError as e:
                self.idx = e
        try:
            self.journal = ingest_journal.read(self.root)
        except StoreFormatError as e:
            self.journal = e
        return log

    def walked(self, log: CommitLog) -> Walked:
        """The tallies the CommitLog walk fills for the checks after it."""
        queues = [] if isinstance(self.queues, StoreFormatError) else self.queues
        idx = self.idx if isinstance(self.idx, IndexService) else None
        journal = self.journal if isinstance(self.journal, ingest_journal.IngestJournal) else None
        phys = [p for f in (idx.files if idx else []) for p in (f.begin_phy, f.end_phy)]
        return Walked(QueueTally(queues, log.min_offset, self.cfg.delay_levels_ms),
                      None if idx is None else IndexKeys(idx), np.unique(np.array(phys, dtype=np.int64)),
                      None if journal is None else journal.commitlog_end, self.cfg.delay_levels_ms)

    def problem(self, kind: str, file: Path | str, offset: int | None, what: str,
                severity: str = "error") -> None:
        """Report a problem of ``kind`` in ``file`` (an absolute path is made relative to the
        store root) at byte ``offset``."""
        rel = str(Path(file).relative_to(self.root)) if Path(file).is_absolute() else str(file)
        self.report.problems.append(Problem(severity, rel, offset, what, kind))

    # --- CommitLog ---------------------------------------------------------------------------------
    def commitlog(self, log: CommitLog, walked: Walked) -> None:
        """Walk every CommitLog file, handing each batch to ``walked``; past an invalid record,
        the walk resumes at the next valid record start in the file
        (``CommitLog.walk_past_damage``), so the records after damage are checked and counted
        too (``VerifyReport.damage``)."""
        last = log.files.files[-1] if log.files.files else None
        before: list[tuple[int, int]] = []  # records and bytes walked before each damage
        for item in log.walk_past_damage(delay_levels_ms=self.cfg.delay_levels_ms, prepare=walked.prepare):
            if isinstance(item, RecordBatch):
                walked.add(item)
            elif isinstance(item, Gap):
                mf = log.files.find(item.offset)
                assert mf is not None and item.why is not None  # a gap without past_zeros is damage
                self.report.damage.append(Damage(item.offset, item.resumes_at))
                before.append((walked.records, walked.bytes))
                follow = (f"valid records resume at commitlog offset {item.resumes_at} "
                          f"({item.resumes_at - item.offset} bytes on)" if item.resumes_at is not None
                          else "no valid record follows in this file")
                self.problem("commitlog-invalid-record", mf.path, item.offset - mf.start,
                             f"invalid record: {item.why.split(': ', 1)[-1]}; {follow}")
            else:
                mf, pos = item.file, item.pos
                if not item.damaged and mf is not last and pos < mf.size:
                    self.problem("commitlog-no-blank", mf.path, pos,
                                 "file ends without a BLANK record before the next file")
                if mf is last and not item.damaged:
                    garbage = first_nonzero(mf, pos)
                    if garbage is not None:
                        self.problem("commitlog-garbage", mf.path, garbage,
                                     "non-zero bytes after the end of valid data (torn write or stale data)")
                mf.wrote = min(mf.size, max(pos, 0))
        self.report.records = walked.records
        for d, (n, size) in zip(self.report.damage, before):
            d.records_after, d.bytes_after = walked.records - n, walked.bytes - size
        times = walked.times
        if times.odd:
            first, first_ts = times.first_odd
            at = log.files.find(first)
            assert at is not None  # the walk read a record there
            self.problem("commitlog-store-time", at.path, first - at.start,
                         f"{times.odd} records have a store time no index file can be named by "
                         f"(first at commitlog offset {first}: {first_ts}); their "
                         f"keys are indexed at {codec.index_time(-1)} ms", "warning")

    # --- ConsumeQueues -----------------------------------------------------------------------------
    @staticmethod
    def unit_sums(tally: QueueTally) -> None:
        """Hand ``tally`` the units of every queue with files (``verify`` runs this in a thread
        of its own, beside the CommitLog walk)."""
        for group in _file_groups(tally.queues, range(len(tally.queues))):
            tally.units(group)

    def consume_queues(self, log: CommitLog, tally: QueueTally) -> None:
        """Check every queue's units against the records that belong to it: by the per-queue
        sums of ``tally`` (``store.queue_tally``; its records and units taken), then exactly for
        the queues whose sums disagree (``_exact``)."""
        if isinstance(self.queues, StoreFormatError):
            self.problem("consumequeue-unreadable", "consumequeue", None, str(self.queues))
            return
        self.report.units += tally.unit_total
        try:
            batch_queues = load_batch_queues(self.root)
        except (StoreFormatError, OSError) as e:
            self.problem("consumequeue-unreadable", "batchconsumequeue", None, str(e))
            batch_queues = {}
        c, n = tally.col, len(tally.queues)
        number = {key: k for k, key in enumerate(tally.keys)}
        # queues with records and no ConsumeQueue files: the batch queues (their numbers; -1: no
        # record, or ConsumeQueue files too), then those missing
        batch = {key: k if (k := number.get(key, -1)) >= n else -1 for key in batch_queues}
        missing = [k for k in range(n, len(tally.keys)) if tally.keys[k] not in batch]
        troubled = tally.troubled()
        exact = np.concatenate((troubled, [k for k in batch.values() if k >= 0],
                                [k for k in missing if c["irregular"][k]])).astype(np.int64)
        expected, records = self._exact(log, tally, troubled, exact)
        group_of = {key: g for g, key in enumerate(expected.keys)}
        for key, bq in sorted(batch_queues.items()):
            g = group_of.get(key) if batch[key] >= 0 else None
            self._batch_queue(bq, None if g is None else expected.queue(g), records, log)
        for k in sorted(missing, key=lambda k: tally.keys[k]):
            topic, qid = tally.keys[k]
            if c["irregular"][k]:
                qo, rows = expected.queue(group_of[(topic, qid)])
                count, first_qo, first_off = qo.size, int(qo[0]), int(records.offset[rows[0]])
            else:
                count, first_qo, first_off = (int(c[name][k])
                                              for name in ("count", "first_qo", "first_offset"))
            self.problem("consumequeue-missing-queue", f"consumequeue/{topic}/{qid}", None,
                         f"queue missing: {count} CommitLog records (first at queue offset "
                         f"{first_qo}, commitlog offset {first_off}) have no unit")

    def _exact(self, log: CommitLog, tally: QueueTally, troubled: npt.NDArray[np.int64],
               exact: npt.NDArray[np.int64]) -> tuple[QueueRows, Records]:
        """Walk the CommitLog again for the records of queues ``exact`` and those the units of
        the ``troubled`` queues (with ConsumeQueue files) point at; check those queues' units
        against them as ``_UnitCheck`` does. Returns the records taken, grouped by queue (no
        walk when ``exact`` is empty)."""
        targets = np.unique(np.concatenate(
            [checked_units(g, tally.col["min_offset"], log.min_offset)[3]["commitlog_offset"].astype(np.int64)
             for g in _file_groups(tally.queues, troubled.tolist())] + [np.zeros(0, dtype=np.int64)]))
        wanted = np.zeros(len(tally.keys), dtype=np.bool_)
        wanted[exact] = True
        columns = RecordColumns()
        for item in log.walk_past_damage(delay_levels_ms=self.cfg.delay_levels_ms) if exact.size else ():
            if isinstance(item, RecordBatch):
                off = item.raw[:, kr.OFFSET]
                take = np.isin(off, targets, assume_unique=True)
                to_queue = np.flatnonzero(item.dispatch(self.cfg.delay_levels_ms).to_queue)
                q = tally.numbers(item, to_queue)
                take[to_queue[(q >= 0) & wanted[np.maximum(q, 0)]]] = True
                columns.add(item, self.cfg.delay_levels_ms, np.flatnonzero(take))
        records = columns.records()
        expected = QueueRows.of(records)
        group_of = {key: g for g, key in enumerate(expected.keys)}
        queues = [tally.queues[k] for k in troubled.tolist()]
        check = _UnitCheck(queues, [group_of.get((cq.topic, cq.queue_id), -1) for cq in queues],
                           expected, records, log.min_offset)
        for group in _file_groups(queues, range(len(queues))):
            check.files(group)
        for args in check.problems():
            self.problem(*args)
        return expected, records

    def _batch_queue(self, bq: BatchConsumeQueue,
                     want: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None,
                     records: Records, log: CommitLog) -> None:
        """A 5.x BatchConsumeQueue: each record of its queue (``want``: its queue offsets and rows
        in ``records``; None: no record) has the unit that starts at the record's queue offset,
        pointing at it with its size, and covering as many queue offsets as the record holds
        messages (docs/FORMAT.md: an inner batch, SYSFLAG 0x80, its INNER_NUM; else 1)."""
        units = bq.batch_units
        self.report.units += len(units)
        at = {int(b): (int(o), int(n), int(k)) for b, o, n, k in
              zip(units["msg_base_offset"], units["commitlog_offset"], units["size"],
                  units["batch_size"])}
        where = f"batchconsumequeue/{bq.topic}/{bq.queue_id}"
        for qo, row in zip(*(want or ((), ()))):
            off, size = int(records.offset[row]), int(records.size[row])
            unit = at.get(int(qo))
            if unit is None:
                self.problem("consumequeue-missing-unit", where, None,
                             f"the record at commitlog offset {off} (queue offset {qo}) has no unit")
            elif unit[:2] != (off, size):
                self.problem("consumequeue-unit-mismatch", where, None,
                             f"the unit at queue offset {qo} points at commitlog offset {unit[0]} "
                             f"({unit[1]} bytes), the record is at {off} ({size} bytes)")
            elif unit[2] != (held := _messages_held(log.read(off))):
                self.problem("consumequeue-unit-mismatch", where, None,
                             f"the unit at queue offset {qo} covers {unit[2]} queue offsets, the "
                             f"record it points at holds {held} message{'s' if held > 1 else ''}")

    def compaction(self) -> None:
        """A 5.x broker's compaction store (``store.compaction_log``): its queues and logs load,
        and each unit points at a valid record of its topic, queue, queue offset and size in its
        compaction log (read as ``get`` reads it: the copies' property CRC is of their first place)."""
        try:
            queues = load_compaction_queues(self.root, self.cfg)
        except (StoreFormatError, OSError) as e:
            self.problem("compaction", COMPACTION_QUEUE_DIR, None, str(e))
            return
        try:
            for (topic, qid), bq in sorted(queues.items()):
                where = f"{COMPACTION_QUEUE_DIR}/{topic}/{qid}"
                units, log = bq.batch_units, bq.log
                assert log is not None  # load_compaction_queues opens each queue's log
                self.report.units += len(units)
                for off, size, base in zip(units["commitlog_offset"].tolist(), units["size"].tolist(),
                                           units["msg_base_offset"].tolist()):
                    try:
                        rec = log.read(off)
                    except CorruptRecordError as e:
                        self.problem("compaction", where, None,
                                     f"the unit at queue offset {base} points at compaction log "
                                     f"offset {off}, where no valid record starts: {e}")
                        continue
                    if (rec.topic, rec.queue_id, rec.queue_offset, rec.size) != (topic, qid, base, size):
                        self.problem("compaction", where, None,
                                     f"the unit at queue offset {base} ({size} bytes at compaction "
                                     f"log offset {off}) is not the record there ({rec.topic}/"
                                     f"{rec.queue_id}, queue offset {rec.queue_offset}, {rec.size} bytes)")
        finally:
            for bq in queues.values():
                bq.close()

    # --- index -------------------------------------------------------------------------------------
    def index(self, log: CommitLog, walked: Walked) -> None:
        """Every key of every record from the index's first entry to its last must be found by
        a query through the index (``IndexService.query``; ``store.index_keys`` matched them
        during the walk); the headers agree with their entries and records."""
        idx = self.idx
        if idx is None:
            return
        if isinstance(idx, StoreFormatError):
            self.problem("index-unreadable", "index", None, str(idx))
            return
        if not idx.files:
            if walked.keys:
                self.problem("index-missing", "index", None, "no index files, but records have keys")
            return
        cl_min = log.min_offset
        for f in idx.files:
            self._index_header(f, log, walked.starts, cl_min)
        keys = walked.index_keys
        assert keys is not None
        self.report.keys_checked += keys.checked
        for off, k in keys.missing:
            key = self._index_keys(log, off)[k]
            self.problem("index-key-not-found", "index", None,
                         f"key {key!r} of the record at {off} is not found through the index")
        if keys.late:
            self.problem("index-unindexed", idx.files[-1].path, None,
                         f"{keys.late} records with keys after the index's last indexed "
                         f"commitlog offset {idx.end_phy} are not indexed (first at "
                         f"{keys.first_late})")

    def _index_keys(self, log: CommitLog, offset: int) -> tuple[str, ...]:
        """The index keys ("topic#key") of the valid record at CommitLog ``offset``."""
        return from_record(self._record(log, offset), self.cfg.delay_levels_ms).index_keys

    @staticmethod
    def _record(log: CommitLog, offset: int) -> codec.Record:
        """The valid record at CommitLog ``offset`` (one the walk read), decoded."""
        mf = log.files.find(offset)
        assert mf is not None  # the walk read a record there
        rec = codec.decode_record(mf.mm, offset - mf.start, mf.start, False)
        assert not isinstance(rec, int)
        return rec

    def _index_header(self, f: IndexFile, log: CommitLog, starts: set[int], cl_min: int) -> None:
        """Check one index file's header against its geometry, its entries and the records it
        names (RocketMQ's IndexHeader, as IndexFile.putKey maintains it); ``starts``: which of
        the headers' phy offsets a walked record starts at."""
        begin_ts, end_ts, begin_phy, end_phy, slots, count = INDEX_HEADER.unpack_from(f.mm, 0)
        wrong = header_problems((begin_ts, end_ts, begin_phy, end_phy, slots, count), f.slot_num,
                                f.entries)
        if not wrong and count > 1:
            last = int(f.entries[count - 1]["phy_offset"])
            if last != end_phy:  # a torn last entry (recovery truncates it)
                wrong.append(f"endPhyOffset {end_phy}, but the last entry holds {last}")
            for name, phy, ts in (("begin", begin_phy, begin_ts), ("end", end_phy, end_ts)):
                if phy not in starts:
                    if phy >= cl_min:
                        wrong.append(f"{name}PhyOffset {phy}: no record starts there")
                    continue
                stored = self._record(log, phy).store_timestamp
                if codec.index_time(stored) != ts:
                    wrong.append(f"{name}Timestamp {ts}, but the record at {phy} was stored at {stored}")
        for what in wrong:
            self.problem("index-header", f.path, 0, f"header: {what}")

    # --- checkpoint and config ---------------------------------------------------------------------
    def checkpoint(self, walked: Walked) -> None:
        """The checkpoint's times against the newest stored message, the abort file, and an
        unfinished ingest (its journal)."""
        path = self.root / "checkpoint"
        if not path.exists():
            if walked.records:
                self.problem("checkpoint", "checkpoint", None, "missing", "warning")
            return
        try:
            cp = Checkpoint(path)
        except StoreFormatError as e:
            self.problem("checkpoint", path, None, str(e))
            return
        newest = walked.times.newest or 0
        for name, at, ts in (("physicMsgTimestamp", 0, cp.physic), ("logicsMsgTimestamp", 8, cp.logics),
                             ("indexMsgTimestamp", 16, cp.index)):
            if ts > newest + 1000 and walked.records:
                self.problem("checkpoint", path, at,
                             f"{name} {ts} is after the newest stored message ({newest})")
        if (self.root / "abort").exists():
            self.problem("abort", "abort", None, "abort file present: the store was not closed cleanly "
                                        "(or a writer is running)", "warning")
        journal = self.journal
        if isinstance(journal, StoreFormatError):
            self.problem("ingest-pending", ingest_journal.JOURNAL_NAME, None, str(journal))
            return
        if journal is not None:
            after = walked.journal_after
            self.problem("ingest-pending", ingest_journal.JOURNAL_NAME, journal.commitlog_end,
                         f"an unfinished ingest: its {after} records from offset "
                         f"{journal.commitlog_end} on are not served and the next writer open "
                         f"discards them (or a writer is running)", "warning")

    def config(self, queues_max: dict[tuple[str, int], int]) -> None:
        """Every ``config/*.json`` parses; `topics.json` is one a writer's open takes
        (``topic_config.check_topics_file``); each committed consumer offset is within its queue
        (``queues_max``: per queue with records, one past its highest queue offset)."""
        cdir = self.root / "config"
        if not cdir.exists():
            return
        unreadable: set[Path] = set()
        for p in sorted(cdir.glob("*.json")):
            try:
                read_config(p)
            except ConfigFileError as e:
                self.problem("config", p, None, str(e))
                unreadable.add(p)
        if self.root / TOPICS_JSON not in unreadable:
            try:
                check_topics_file(self.root)
            except ConfigFileError as e:
                self.problem("config", TOPICS_JSON, None, str(e))
        try:
            offsets = read_consumer_offsets(self.root)
        except ConfigFileError as e:
            self.problem("config", CONSUMER_OFFSETS, None, str(e))
            return
        for (topic, group), qs in sorted(offsets.items()):
            for q, off in sorted(qs.items()):
                hi = queues_max.get((topic, q))
                if hi is None:  # offset 0: a queue never written to (a broker commits that too)
                    if off > 0 and not topic.startswith("%RETRY%"):
                        self.problem("config", CONSUMER_OFFSETS, None,
                                     f"group {group}: queue {topic}/{q} does not exist (committed "
                                     f"offset {off})", "warning")
                elif off > hi:
                    self.problem("config", CONSUMER_OFFSETS, None,
                                 f"group {group}: offset {off} of {topic}/{q} is past its max {hi}")


def _messages_held(rec: codec.Record) -> int:
    """How many queue offsets a record takes in a BatchConsumeQueue: an inner batch's INNER_NUM
    (0 when it has none that is a number), else 1."""
    if not rec.sys_flag & codec.FLAG_INNER_BATCH:
        return 1
    n = rec.properties.get(codec.PROPERTY_INNER_NUM, "")
    return int(n) if n.isdigit() else 0


#: units read at a time (``_file_groups``)
CHECK_UNITS = 1 << 20

#: a problem's ``_Checker.problem`` arguments
ProblemArgs = tuple[str, Path | str, int | None, str]


class _UnitCheck:
    """``_Checker._exact``'s check of ConsumeQueue units against records, vectorised: ``files``
    checks groups of the queues' files, ``problems`` then lists what was found."""

    def __init__(self, queues: list[ConsumeQueue], want: list[int], expected: QueueRows,
                 records: Records, cl_min: int) -> None:
        """``want[k]``: the number in ``expected`` of ``queues[k]``'s records (-1: none)."""
        self.queues, self.expected, self.records, self.cl_min = queues, expected, records, cl_min
        self.want = np.array(want, dtype=np.int64)
        #: per queue of ``expected``: the number in ``queues`` of its files (-1: none)
        self.cq_of = np.full(len(expected.keys), -1, dtype=np.int64)
        self.cq_of[self.want[self.want >= 0]] = np.flatnonzero(self.want >= 0)
        # a (queue, queue offset) key ascending with both: the queue's number in ``expected`` times
        # the distinct queue offsets, plus the offset's rank among them (exact for any offset a
        # record claims)
        self.offsets = np.unique(expected.queue_offset)
        self.want_key = np.searchsorted(self.offsets, expected.queue_offset).astype(np.int64, copy=False)
        self.want_key += np.repeat(np.arange(len(expected.keys), dtype=np.int64) * self.offsets.size,
                                   np.diff(expected.bounds))
        #: per queue, its min offset; a last row for "no queue" (-1)
        self.min_offset = np.array([cq.min_offset for cq in queues] + [0], dtype=np.int64)
        self.claimed = np.zeros(expected.rows.size, dtype=np.bool_)
        self.found: dict[int, list[ProblemArgs]] = {}

    def files(self, group: list[tuple[int, MappedFile]]) -> None:
        """Check the written units of each (queue's number, file) of ``group``."""
        if not group:
            return
        records = self.records
        fi, qk, q, units = checked_units(group, self.min_offset, self.cl_min)
        off = units["commitlog_offset"].astype(np.int64)
        rec, has_rec = records.find(off)
        rank = np.minimum(np.searchsorted(self.offsets, q), max(self.offsets.size - 1, 0))
        w, has_want = lookup(self.want_key, self.want[qk] * self.offsets.size + rank)
        if self.offsets.size:
            has_want &= self.offsets[rank] == q
        self.claimed[w[has_want]] = True
        # ok: the record the unit's queue offset belongs to starts where the unit points
        ok = has_want.copy()
        want_rows = self.expected.rows
        ok[has_want] = records.offset[want_rows[w[has_want]]] == off[has_want]
        r_ok = want_rows[w[ok]]
        differs = np.zeros(q.size, dtype=np.bool_)
        differs[ok] = ((records.size[r_ok] != units["size"][ok])
                       | (records.tags_code[r_ok] != units["tags_code"][ok]))
        for i in np.flatnonzero(~ok | differs).tolist():
            mf = group[int(fi[i])][1]
            u, fpos, o = int(q[i]), int(q[i]) * CQ_UNIT_SIZE - mf.start, int(off[i])
            if not has_rec[i]:
                found: ProblemArgs = ("consumequeue-bad-unit", mf.path, fpos, f"unit {u} points at "
                                      f"commitlog offset {o}, where no valid record starts")
            elif not ok[i]:
                r = int(rec[i])
                found = ("consumequeue-bad-unit", mf.path, fpos,
                         f"unit {u} points at the record at {o} "
                         f"({records.topics[int(records.topic[r])]}/{records.queue_id[r]} "
                         f"queue offset {records.queue_offset[r]})")
            else:
                r = int(want_rows[w[i]])
                found = ("consumequeue-unit-mismatch", mf.path, fpos,
                         f"unit {u}: size/tagsCode {units['size'][i]}/{units['tags_code'][i]}, "
                         f"record says {records.size[r]}/{records.tags_code[r]}")
            self.found.setdefault(int(qk[i]), []).append(found)

    def problems(self) -> list[ProblemArgs]:
        """Every problem, by queue: its units' (as ``files`` found them), then the records of
        the queue that have no unit."""
        records, qo, rows = self.records, self.expected.queue_offset, self.expected.rows
        wq = np.repeat(self.cq_of, np.diff(self.expected.bounds))  # the queue of each, -1: none
        unclaimed = ~self.claimed & (wq >= 0)
        below = qo < self.min_offset[wq]
        missing = np.flatnonzero(unclaimed & ~below)
        # Below the queue's minimum only records retention removed may be: ``get`` hides the rest.
        hidden = np.flatnonzero(unclaimed & below)
        hidden_queues, hidden_first, hidden_count = np.unique(wq[hidden], return_index=True,
                                                              return_counts=True)
        found = self.found
        for i in missing.tolist():
            cq = self.queues[int(wq[i])]
            found.setdefault(int(wq[i]), []).append((
                "consumequeue-missing-unit", f"consumequeue/{cq.topic}/{cq.queue_id}",
                int(qo[i]) * CQ_UNIT_SIZE, f"no unit for queue offset {qo[i]} (record at "
                                           f"{records.offset[rows[i]]})"))
        for k, first, n in zip(hidden_queues.tolist(), hidden[hidden_first].tolist(),
                               hidden_count.tolist()):
            cq = self.queues[k]
            found.setdefault(k, []).append((
                "consumequeue-missing-unit", f"consumequeue/{cq.topic}/{cq.queue_id}",
                int(qo[first]) * CQ_UNIT_SIZE,
                f"{n} records still in the CommitLog (first: queue offset {qo[first]}, record at "
                f"{records.offset[rows[first]]}) are below the queue's min offset {cq.min_offset}: "
                f"get answers OFFSET_TOO_SMALL for them"))
        return [p for k in sorted(found) for p in found[k]]


def verify(root: str | Path, config: StoreConfig | None = None, **overrides: Any) -> VerifyReport:
    """Check the whole store at ``root`` (settings: ``config``, then ``overrides``; file sizes
    from the files, ``store.file_sizes``, where they contradict no override); the report
    lists every problem found. A ``root`` that is not a store gives one error (file ``"."``) that
    names the path and says why."""
    cfg = load_config(overrides, base=config)
    refused = store_problem(root)
    if refused is None:
        refuse_unfinished(root)
    with StoreFiles(Path(root).resolve(), cfg, sizes_from_files=True, explicit=overrides) as files:
        c = _Checker(files)
        if refused:
            c.report.problems.append(Problem("error", ".", None, refused, "not-a-store"))
            return c.report
        log = c.load()
        if log is None:
            return c.report
        walked = c.walked(log)
        with ThreadPoolExecutor(1, thread_name_prefix="verify-units") as pool:
            units = pool.submit(c.unit_sums, walked.queues)  # the ConsumeQueues, beside the walk
            c.commitlog(log, walked)
            walked.finish()
            units.result()
        c.consume_queues(log, walked.queues)
        c.compaction()
        c.index(log, walked)
        c.checkpoint(walked)
        c.config(walked.queues.max_offsets())
        return c.report
