"""fsck for a RocketMQ store: check every record, unit, index key, the checkpoint and config files.

Read-only: nothing under the store root is changed. Each problem names the file, the byte offset
where it applies, and what is wrong.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rocketlake.store import codec, ingest_journal
from rocketlake.store.batch_consume_queue import BatchConsumeQueue, load_batch_queues
from rocketlake.store.checkpoint import Checkpoint
from rocketlake.store.codec import CQ_UNIT_SIZE, INDEX_HEADER
from rocketlake.store.commitlog import CommitLog
from rocketlake.store.config import StoreConfig, load_config
from rocketlake.store.config_files import CONSUMER_OFFSETS, read_config, read_consumer_offsets
from rocketlake.store.consume_queue import ConsumeQueue, read_units
from rocketlake.store.dispatch import from_record
from rocketlake.store.errors import ConfigFileError, StoreFormatError
from rocketlake.store.index import IndexFile, IndexService, header_problems
from rocketlake.store.kernels import index as index_kernels
from rocketlake.store.kernels import records as kr
from rocketlake.store.mapped_file import MappedFile, first_nonzero
from rocketlake.store.record_walk import Gap, RecordBatch
from rocketlake.store.store_dir import store_problem
from rocketlake.store.store_files import StoreFiles
from rocketlake.store.swap_journal import refuse_unfinished


@dataclass
class Problem:
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
    root: str
    records: int = 0
    units: int = 0
    keys_checked: int = 0
    problems: list[Problem] = field(default_factory=list)
    #: CommitLog damage, in CommitLog order
    damage: list[Damage] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)

    def as_dict(self) -> dict[str, Any]:
        return {"root": self.root, "ok": self.ok, "records": self.records, "units": self.units,
                "keys_checked": self.keys_checked, "problems": [asdict(p) for p in self.problems],
                "damage": [asdict(d) for d in self.damage]}


@dataclass(frozen=True)
class Records:
    """The CommitLog's valid records as columns, in CommitLog order (no object per record): what
    verify checks the ConsumeQueues, the index and the checkpoint against."""
    offset: npt.NDArray[np.int64]
    size: npt.NDArray[np.int32]
    topic: npt.NDArray[np.int32]          # index into ``topics``
    queue_id: npt.NDArray[np.int32]
    queue_offset: npt.NDArray[np.int64]
    tags_code: npt.NDArray[np.int64]
    to_queue: npt.NDArray[np.bool_]       # gets a ConsumeQueue unit
    store_ts: npt.NDArray[np.int64]
    #: record r's index key hashes (UNIQ_KEY, then KEYS tokens) are key_hash[key_start[r]:key_start[r + 1]]
    key_start: npt.NDArray[np.int64]
    key_hash: npt.NDArray[np.int32]
    topics: list[str]

    def __len__(self) -> int:
        return int(self.offset.size)

    def find(self, offsets: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """(row, whether a record starts there) for each CommitLog offset; row is 0 where none."""
        return _lookup(self.offset, offsets)

    def at(self, offset: int) -> int | None:
        """The row of the record starting at ``offset``, None when none does."""
        row, there = self.find(np.array([offset], dtype=np.int64))
        return int(row[0]) if there[0] else None

    def queues(self) -> dict[tuple[str, int], npt.NDArray[np.int64]]:
        """Rows of the records that get a ConsumeQueue unit, by (topic, queue id), in CommitLog order."""
        rows = np.flatnonzero(self.to_queue)
        group = self.topic[rows].astype(np.int64) << 32 | (self.queue_id[rows].astype(np.int64) & 0xFFFFFFFF)
        order = np.argsort(group, kind="stable")
        rows, group = rows[order], group[order]
        out = {}
        for part in np.split(rows, np.flatnonzero(np.diff(group)) + 1) if rows.size else []:
            first = int(part[0])
            out[(self.topics[int(self.topic[first])], int(self.queue_id[first]))] = part
        return out


def _lookup(keys: npt.NDArray[np.int64], values: npt.NDArray[np.int64]
            ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """(position, whether present) of each value in the ascending ``keys``; position 0 where absent."""
    if not keys.size:
        return np.zeros(values.size, dtype=np.int64), np.zeros(values.size, dtype=np.bool_)
    at = np.minimum(np.searchsorted(keys, values), keys.size - 1)
    there = keys[at] == values
    return np.where(there, at, 0), there


class RecordColumns:
    """Collects walked batches into ``Records``."""

    DTYPES = (np.int64, np.int32, np.int32, np.int32, np.int64, np.int64, np.bool_, np.int64,
              np.int32, np.int32)

    def __init__(self) -> None:
        self.columns: list[list[npt.NDArray[Any]]] = [[] for _ in self.DTYPES]
        self.topic_ids: dict[str, int] = {}

    def add(self, batch: RecordBatch, delay_levels_ms: tuple[int, ...]) -> None:
        cols = batch.dispatch(delay_levels_ms)
        ids, names = batch.topics
        remap = np.array([self.topic_ids.setdefault(n, len(self.topic_ids)) for n in names], dtype=np.int32)
        raw = batch.raw
        parts: tuple[npt.NDArray[Any], ...] = (
            raw[:, kr.OFFSET], raw[:, kr.SIZE], remap[ids], raw[:, kr.QUEUE_ID],
            raw[:, kr.QUEUE_OFFSET], cols.tags_code, cols.to_queue, raw[:, kr.STORE_TS],
            cols.key_counts, cols.key_hashes)
        for column, part, dtype in zip(self.columns, parts, self.DTYPES):
            column.append(part.astype(dtype))  # a copy: the batch's rows go

    def records(self) -> Records:
        """The columns so far, each joined in turn (memory: the columns plus the largest one)."""
        cols = []
        for k, dtype in enumerate(self.DTYPES):
            parts, self.columns[k] = self.columns[k], []
            cols.append(np.concatenate(parts) if parts else np.zeros(0, dtype=dtype))
            del parts
        key_start = np.zeros(cols[8].size + 1, dtype=np.int64)
        np.cumsum(cols[8], out=key_start[1:])
        return Records(offset=cols[0], size=cols[1], topic=cols[2], queue_id=cols[3],
                       queue_offset=cols[4], tags_code=cols[5], to_queue=cols[6], store_ts=cols[7],
                       key_start=key_start, key_hash=cols[9], topics=list(self.topic_ids))


class _Checker:
    def __init__(self, files: StoreFiles) -> None:
        self.files = files
        self.root, self.cfg = files.root, files.cfg
        self.report = VerifyReport(str(self.root))

    def problem(self, kind: str, file: Path | str, offset: int | None, what: str,
                severity: str = "error") -> None:
        rel = str(Path(file).relative_to(self.root)) if Path(file).is_absolute() else str(file)
        self.report.problems.append(Problem(severity, rel, offset, what, kind))

    # --- CommitLog ---------------------------------------------------------------------------------
    def commitlog(self) -> tuple[CommitLog, Records] | None:
        """Walk every CommitLog file; past an invalid record, the walk resumes at the next valid
        record start in the file (``CommitLog.walk_past_damage``), so the records after
        damage are checked and counted too (``VerifyReport.damage``)."""
        try:
            log = self.files.commitlog
        except StoreFormatError as e:
            self.problem("commitlog-unreadable", "commitlog", None, str(e))
            return None
        columns = RecordColumns()
        last = log.files.files[-1] if log.files.files else None
        for item in log.walk_past_damage(delay_levels_ms=self.cfg.delay_levels_ms):
            if isinstance(item, RecordBatch):
                columns.add(item, self.cfg.delay_levels_ms)
            elif isinstance(item, Gap):
                mf = log.files.find(item.offset)
                assert mf is not None and item.why is not None  # a gap without past_zeros is damage
                self.report.damage.append(Damage(item.offset, item.resumes_at))
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
        records = columns.records()
        self.report.records = len(records)
        for d in self.report.damage:
            after = records.offset > d.offset
            d.records_after, d.bytes_after = int(np.count_nonzero(after)), int(records.size[after].sum())
        odd = np.flatnonzero(codec.index_time(records.store_ts) != records.store_ts)
        if odd.size:
            first = int(records.offset[odd[0]])
            at = log.files.find(first)
            assert at is not None  # the walk read a record there
            self.problem("commitlog-store-time", at.path, first - at.start,
                         f"{odd.size} records have a store time no index file can be named by "
                         f"(first at commitlog offset {first}: {records.store_ts[odd[0]]}); their "
                         f"keys are indexed at {codec.index_time(-1)} ms", "warning")
        return log, records

    # --- ConsumeQueues -----------------------------------------------------------------------------
    def consume_queues(self, log: CommitLog, records: Records,
                       expected: dict[tuple[str, int], npt.NDArray[np.int64]]) -> None:
        """Check every queue's units against the records that belong to it (``expected``: rows
        by queue, ``Records.queues``)."""
        try:
            queues = self.files.queues
        except StoreFormatError as e:
            self.problem("consumequeue-unreadable", "consumequeue", None, str(e))
            return
        want = _by_queue_offset(records, expected)
        cl_min = log.min_offset
        self._queues([cq for _, cq in sorted(queues.items())], want, records, cl_min)
        try:
            batch_queues = load_batch_queues(self.root)
        except (StoreFormatError, OSError) as e:
            self.problem("consumequeue-unreadable", "batchconsumequeue", None, str(e))
            batch_queues = {}
        for key, bq in sorted(batch_queues.items()):
            self._batch_queue(bq, want.pop(key, None), records, cl_min)
        for (topic, qid), (qo, rows) in sorted(want.items()):
            self.problem("consumequeue-missing-queue", f"consumequeue/{topic}/{qid}", None,
                         f"queue missing: {qo.size} CommitLog records (first at queue offset "
                         f"{qo[0]}, commitlog offset {records.offset[rows[0]]}) have no unit")

    def _batch_queue(self, bq: BatchConsumeQueue,
                     want: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None,
                     records: Records, cl_min: int) -> None:
        """A 5.x BatchConsumeQueue: each record of its queue at or above the retained CommitLog
        has the unit that starts at the record's queue offset, pointing at it with its size."""
        units = bq.batch_units
        self.report.units += len(units)
        at = {int(b): (int(o), int(n)) for b, o, n in
              zip(units["msg_base_offset"], units["commitlog_offset"], units["size"])}
        where = f"batchconsumequeue/{bq.topic}/{bq.queue_id}"
        for qo, row in zip(*(want or ((), ()))):
            off, size = int(records.offset[row]), int(records.size[row])
            if off < cl_min:
                continue
            unit = at.get(int(qo))
            if unit is None:
                self.problem("consumequeue-missing-unit", where, None,
                             f"the record at commitlog offset {off} (queue offset {qo}) has no unit")
            elif unit != (off, size):
                self.problem("consumequeue-unit-mismatch", where, None,
                             f"the unit at queue offset {qo} points at commitlog offset {unit[0]} "
                             f"({unit[1]} bytes), the record is at {off} ({size} bytes)")

    def _queues(self, queues: list[ConsumeQueue],
                want: dict[tuple[str, int], tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]],
                records: Records, cl_min: int) -> None:
        """Each queue's units, file by file, against the records it should have (``want``:
        queue offsets, rows by queue, ``_by_queue_offset``; taken out of it); units before the
        queue's first valid one (pre-blank) or below the retained CommitLog are not checked.
        Vectorised over all the queues, in groups of files of at most ``CHECK_UNITS`` units;
        the problems come queue by queue as ``queues`` are ordered."""
        check = _UnitCheck(queues, [want.pop((cq.topic, cq.queue_id), None) for cq in queues],
                           records, cl_min)
        group: list[tuple[int, MappedFile]] = []
        units = 0
        for k, cq in enumerate(queues):
            for mf in cq.files.files:
                group.append((k, mf))
                units += mf.wrote // CQ_UNIT_SIZE
                if units >= CHECK_UNITS:
                    check.files(group)
                    group, units = [], 0
        check.files(group)
        self.report.units += check.units
        for args in check.problems():
            self.problem(*args)

    # --- index -------------------------------------------------------------------------------------
    def index(self, log: CommitLog, records: Records) -> None:
        if not self.cfg.messageIndexEnable:
            return
        try:
            idx = self.files.index
        except StoreFormatError as e:
            self.problem("index-unreadable", "index", None, str(e))
            return
        self._index(log, idx, records)

    def _index(self, log: CommitLog, idx: IndexService, records: Records) -> None:
        """Every key of every record from the index's first entry to its last must be found by
        a query through the index (``IndexService.query``); all keys are checked at once: the
        entries each file's chains reach are matched against the records' keys."""
        if not idx.files:
            if records.key_hash.size:
                self.problem("index-missing", "index", None, "no index files, but records have keys")
            return
        cl_min = log.min_offset
        for f in idx.files:
            self._index_header(f, records, cl_min)
        used = [f for f in idx.files if f.index_count > 1]
        first = min((f.begin_phy for f in used), default=idx.end_phy + 1)
        keyed = (records.offset >= first) & (np.diff(records.key_start) > 0)
        late = keyed & (records.offset > idx.end_phy)
        checked = np.repeat(keyed & ~late, np.diff(records.key_start))
        self.report.keys_checked += int(np.count_nonzero(checked))
        found = np.zeros(records.key_hash.size, dtype=np.bool_)
        for f in used:
            if f.end_ts < 0:
                continue  # a query over all time skips it (``IndexService.query``)
            reached = np.empty(min(f.entry_num, f.index_count + 1), dtype=np.bool_)
            index_kernels.reachable(f.buf, f.slot_num, f.index_count, f.begin_ts, reached)
            index_kernels.found_keys(f.buf, f.slot_num, reached, records.offset, records.key_start,
                                     records.key_hash, found)
        missing = np.flatnonzero(checked & ~found)
        rows = np.searchsorted(records.key_start, missing, side="right") - 1
        for k, r in zip(missing.tolist(), rows.tolist()):
            off = int(records.offset[r])
            key = self._index_keys(log, off)[k - int(records.key_start[r])]
            self.problem("index-key-not-found", "index", None,
                         f"key {key!r} of the record at {off} is not found through the index")
        if late.any():
            self.problem("index-unindexed", idx.files[-1].path, None,
                         f"{np.count_nonzero(late)} records with keys after the index's last indexed "
                         f"commitlog offset {idx.end_phy} are not indexed (first at "
                         f"{records.offset[np.argmax(late)]})")

    def _index_keys(self, log: CommitLog, offset: int) -> tuple[str, ...]:
        """The index keys ("topic#key") of the valid record at CommitLog ``offset``."""
        mf = log.files.find(offset)
        assert mf is not None  # the walk read a record there
        rec = codec.decode_record(mf.mm, offset - mf.start, mf.start, False)
        assert not isinstance(rec, int)
        return from_record(rec, self.cfg.delay_levels_ms).index_keys

    def _index_header(self, f: IndexFile, records: Records, cl_min: int) -> None:
        """Check one index file's header against its geometry, its entries and the records it
        names (RocketMQ's IndexHeader, as IndexFile.putKey maintains it)."""
        begin_ts, end_ts, begin_phy, end_phy, slots, count = INDEX_HEADER.unpack_from(f.mm, 0)
        wrong = header_problems((begin_ts, end_ts, begin_phy, end_phy, slots, count), f.slot_num,
                                f.entries)
        if not wrong and count > 1:
            last = int(f.entries[count - 1]["phy_offset"])
            if last != end_phy:  # a torn last entry (recovery truncates it)
                wrong.append(f"endPhyOffset {end_phy}, but the last entry holds {last}")
            for name, phy, ts in (("begin", begin_phy, begin_ts), ("end", end_phy, end_ts)):
                r = records.at(phy)
                if r is None and phy >= cl_min:
                    wrong.append(f"{name}PhyOffset {phy}: no record starts there")
                elif r is not None and codec.index_time(int(records.store_ts[r])) != ts:
                    wrong.append(f"{name}Timestamp {ts}, but the record at {phy} was stored at "
                                 f"{records.store_ts[r]}")
        for what in wrong:
            self.problem("index-header", f.path, 0, f"header: {what}")

    # --- checkpoint and config ---------------------------------------------------------------------
    def checkpoint(self, records: Records) -> None:
        path = self.root / "checkpoint"
        if not path.exists():
            if len(records):
                self.problem("checkpoint", "checkpoint", None, "missing", "warning")
            return
        try:
            cp = Checkpoint(path)
        except StoreFormatError as e:
            self.problem("checkpoint", path, None, str(e))
            return
        newest = int(records.store_ts.max()) if len(records) else 0
        for name, at, ts in (("physicMsgTimestamp", 0, cp.physic), ("logicsMsgTimestamp", 8, cp.logics),
                             ("indexMsgTimestamp", 16, cp.index)):
            if ts > newest + 1000 and len(records):
                self.problem("checkpoint", path, at,
                             f"{name} {ts} is after the newest stored message ({newest})")
        if (self.root / "abort").exists():
            self.problem("abort", "abort", None, "abort file present: the store was not closed cleanly "
                                        "(or a writer is running)", "warning")
        try:
            journal = ingest_journal.read(self.root)
        except StoreFormatError as e:
            self.problem("ingest-pending", ingest_journal.JOURNAL_NAME, None, str(e))
            return
        if journal is not None:
            after = int(np.count_nonzero(records.offset >= journal.commitlog_end))
            self.problem("ingest-pending", ingest_journal.JOURNAL_NAME, journal.commitlog_end,
                         f"an unfinished ingest: its {after} records from offset "
                         f"{journal.commitlog_end} on are not served and the next writer open "
                         f"discards them (or a writer is running)", "warning")

    def config(self, queues_max: dict[tuple[str, int], int]) -> None:
        cdir = self.root / "config"
        if not cdir.exists():
            return
        for p in sorted(cdir.glob("*.json")):
            try:
                read_config(p)
            except ConfigFileError as e:
                self.problem("config", p, None, str(e))
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


#: units checked at a time by ``_UnitCheck.files``
CHECK_UNITS = 1 << 20

#: a problem's ``_Checker.problem`` arguments
ProblemArgs = tuple[str, Path | str, int | None, str]


class _UnitCheck:
    """``_Checker._queues``' check of ConsumeQueue units against records, vectorised: ``files``
    checks groups of the queues' files, ``problems`` then lists what was found."""

    def __init__(self, queues: list[ConsumeQueue],
                 want: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None],
                 records: Records, cl_min: int) -> None:
        self.queues, self.records, self.cl_min = queues, records, cl_min
        empty = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        pairs = [w if w is not None else empty for w in want]
        sizes = np.array([qo.size for qo, _ in pairs], dtype=np.int64)
        self.want_queue = np.repeat(np.arange(len(queues), dtype=np.int64), sizes)
        self.want_qo = np.concatenate([qo for qo, _ in pairs]) if pairs else empty[0]
        self.want_rows = np.concatenate([rows for _, rows in pairs]) if pairs else empty[0]
        # a (queue, queue offset) key ascending with both: the queue's number times the distinct
        # queue offsets, plus the offset's rank among them (exact for any offset a record claims)
        self.offsets = np.unique(self.want_qo)
        self.want_key = self.want_queue * self.offsets.size + np.searchsorted(self.offsets, self.want_qo)
        self.min_offset = np.array([cq.min_offset for cq in queues], dtype=np.int64)
        self.claimed = np.zeros(self.want_qo.size, dtype=np.bool_)
        self.units = 0
        self.found: dict[int, list[ProblemArgs]] = {}

    def files(self, group: list[tuple[int, MappedFile]]) -> None:
        """Check the written units of each (queue's number, file) of ``group``."""
        if not group:
            return
        records = self.records
        parts = [read_units(mf, 0, mf.wrote // CQ_UNIT_SIZE) for _, mf in group]
        counts = np.array([p.size for p in parts], dtype=np.int64)
        units = np.concatenate(parts)
        fi = np.repeat(np.arange(len(group)), counts)
        qk = np.array([k for k, _ in group], dtype=np.int64)[fi]
        firsts = np.array([mf.start // CQ_UNIT_SIZE for _, mf in group], dtype=np.int64)
        q = firsts[fi] + np.arange(units.size, dtype=np.int64) - (np.cumsum(counts) - counts)[fi]
        off = units["commitlog_offset"].astype(np.int64)
        keep = (q >= self.min_offset[qk]) & (off >= self.cl_min)
        fi, qk, q, off, units = fi[keep], qk[keep], q[keep], off[keep], units[keep]
        self.units += int(q.size)
        rec, has_rec = records.find(off)
        rank = np.minimum(np.searchsorted(self.offsets, q), max(self.offsets.size - 1, 0))
        w, has_want = _lookup(self.want_key, qk * self.offsets.size + rank)
        if self.offsets.size:
            has_want &= self.offsets[rank] == q
        self.claimed[w[has_want]] = True
        # ok: the record the unit's queue offset belongs to starts where the unit points
        ok = has_want.copy()
        ok[has_want] = records.offset[self.want_rows[w[has_want]]] == off[has_want]
        r_ok = self.want_rows[w[ok]]
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
                r = int(self.want_rows[w[i]])
                found = ("consumequeue-unit-mismatch", mf.path, fpos,
                         f"unit {u}: size/tagsCode {units['size'][i]}/{units['tags_code'][i]}, "
                         f"record says {records.size[r]}/{records.tags_code[r]}")
            self.found.setdefault(int(qk[i]), []).append(found)

    def problems(self) -> list[ProblemArgs]:
        """Every problem, by queue: its units' (as ``files`` found them), then the records of
        the queue that have no unit."""
        records, wq, qo, rows = self.records, self.want_queue, self.want_qo, self.want_rows
        retained = ~self.claimed & (records.offset[rows] >= self.cl_min)
        below = qo < self.min_offset[wq]
        missing = np.flatnonzero(retained & ~below)
        # Below the queue's minimum only records retention removed may be: ``get`` hides the rest.
        hidden = np.flatnonzero(retained & below)
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


def _by_queue_offset(records: Records, expected: dict[tuple[str, int], npt.NDArray[np.int64]]
                     ) -> dict[tuple[str, int], tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
    """For each queue of ``expected`` (its records' rows, in CommitLog order): (queue offsets
    ascending, row); where records claim the same queue offset, the last one stands for it.
    One sort for all the queues."""
    sizes = np.array([rows.size for rows in expected.values()], dtype=np.int64)
    if not sizes.size:
        return {}
    rows = np.concatenate(list(expected.values()))
    group = np.repeat(np.arange(sizes.size), sizes)
    qo = records.queue_offset[rows]
    order = np.lexsort((qo, group))  # stable: CommitLog order among equal queue offsets
    rows, group, qo = rows[order], group[order], qo[order]
    last = np.ones(qo.size, dtype=np.bool_)
    last[:-1] = (qo[1:] != qo[:-1]) | (group[1:] != group[:-1])
    rows, group, qo = rows[last], group[last], qo[last]
    bounds = np.searchsorted(group, np.arange(sizes.size + 1))
    return {key: (qo[a:b], rows[a:b])
            for key, a, b in zip(expected, bounds[:-1].tolist(), bounds[1:].tolist())}


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
        loaded = c.commitlog()
        if loaded is None:
            return c.report
        log, records = loaded
        queues = records.queues()
        c.consume_queues(log, records, queues)
        c.index(log, records)
        c.checkpoint(records)
        c.config({key: max(0, int(records.queue_offset[rows].max()) + 1) for key, rows in queues.items()})
        return c.report
