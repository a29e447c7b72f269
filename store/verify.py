"""fsck for a RocketMQ store: check every record, unit, index key, the checkpoint and config files.

Read-only: nothing under the store root is changed. Each problem names the file, the byte offset
where it applies, and what is wrong.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rocketlake.store.checkpoint import Checkpoint
from rocketlake.store.codec import CQ_UNIT_SIZE, INDEX_HEADER
from rocketlake.store.commitlog import CommitLog
from rocketlake.store.config import StoreConfig, load_config
from rocketlake.store.config_files import read_config, read_consumer_offsets
from rocketlake.store.consume_queue import ConsumeQueue
from rocketlake.store.dispatch import DispatchRequest, from_record
from rocketlake.store.errors import ConfigFileError, StoreFormatError
from rocketlake.store.index import IndexFile, IndexService
from rocketlake.store.mapped_file import first_nonzero
from rocketlake.store.message_store import is_store
from rocketlake.store.store_files import StoreFiles


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
    "config": "a config/*.json file or a consumer offset",
    "not-a-store": "the path is not a store",
}


@dataclass
class VerifyReport:
    root: str
    records: int = 0
    units: int = 0
    keys_checked: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)

    def as_dict(self) -> dict[str, Any]:
        return {"root": self.root, "ok": self.ok, "records": self.records, "units": self.units,
                "keys_checked": self.keys_checked, "problems": [asdict(p) for p in self.problems]}


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
    def commitlog(self) -> tuple[CommitLog, dict[int, DispatchRequest]] | None:
        try:
            log = self.files.commitlog
        except StoreFormatError as e:
            self.problem("commitlog-unreadable", "commitlog", None, str(e))
            return None
        records: dict[int, DispatchRequest] = {}
        files = log.files.files
        for k, mf in enumerate(files):
            scan = log.scan(mf.start, check_crc=True, stop_at=mf.end)
            for r in scan:
                records[r.commitlog_offset] = from_record(r, self.cfg.delay_levels_ms)
            last = k == len(files) - 1
            pos = scan.end - mf.start
            if scan.error:
                self.problem("commitlog-invalid-record", mf.path, pos,
                             f"invalid record: {scan.error.split(': ', 1)[-1]}")
            elif not last and pos < mf.size:
                self.problem("commitlog-no-blank", mf.path, pos,
                             "file ends without a BLANK record before the next file")
            if last and not scan.error:
                garbage = first_nonzero(mf, pos)
                if garbage is not None:
                    self.problem("commitlog-garbage", mf.path, garbage,
                                 "non-zero bytes after the end of valid data (torn write or stale data)")
            mf.wrote = min(mf.size, max(pos, 0))
        self.report.records = len(records)
        return log, records

    # --- ConsumeQueues -----------------------------------------------------------------------------
    def consume_queues(self, log: CommitLog, records: dict[int, DispatchRequest]) -> None:
        try:
            queues = self.files.queues
        except StoreFormatError as e:
            self.problem("consumequeue-unreadable", "consumequeue", None, str(e))
            return
        expected: dict[tuple[str, int], dict[int, DispatchRequest]] = {}
        for req in records.values():
            if req.to_consume_queue:
                expected.setdefault((req.topic, req.queue_id), {})[req.queue_offset] = req
        cl_min = log.min_offset
        for key, cq in sorted(queues.items()):
            self._queue(cq, expected.pop(key, {}), records, cl_min)
        for (topic, qid), reqs in sorted(expected.items()):
            first = min(reqs)
            self.problem("consumequeue-missing-queue", f"consumequeue/{topic}/{qid}", None,
                         f"queue missing: {len(reqs)} CommitLog records (first at queue offset "
                         f"{first}, commitlog offset {reqs[first].commitlog_offset}) have no unit")

    def _queue(self, cq: ConsumeQueue, want: dict[int, DispatchRequest],
               records: dict[int, DispatchRequest], cl_min: int) -> None:
        units = cq.all_units()
        base = cq.files.min_offset // CQ_UNIT_SIZE
        for i, (off, size, tcode) in enumerate(units.tolist()):
            q = base + i
            if q < cq.min_offset or off < cl_min:
                continue  # pre-blank units and units below the retained CommitLog
            self.report.units += 1
            where = cq.files.find(q * CQ_UNIT_SIZE)
            assert where is not None  # the unit was read from one of the queue's files
            fpos = q * CQ_UNIT_SIZE - where.start
            req = want.pop(q, None)
            rec = records.get(off)
            if rec is None:
                self.problem("consumequeue-bad-unit", where.path, fpos,
                             f"unit {q} points at commitlog offset {off}, where no valid record starts")
            elif req is None or req.commitlog_offset != off:
                self.problem("consumequeue-bad-unit", where.path, fpos,
                             f"unit {q} points at the record at {off} ({rec.topic}/{rec.queue_id} "
                             f"queue offset {rec.queue_offset})")
            elif size != req.size or tcode != req.tags_code:
                self.problem("consumequeue-unit-mismatch", where.path, fpos,
                             f"unit {q}: size/tagsCode {size}/{tcode}, record says "
                             f"{req.size}/{req.tags_code}")
        for q, req in sorted(want.items()):
            if req.commitlog_offset >= cl_min and q >= cq.min_offset:
                self.problem("consumequeue-missing-unit", f"consumequeue/{cq.topic}/{cq.queue_id}",
                             q * CQ_UNIT_SIZE,
                             f"no unit for queue offset {q} (record at {req.commitlog_offset})")

    # --- index -------------------------------------------------------------------------------------
    def index(self, records: dict[int, DispatchRequest], cl_min: int) -> None:
        if not self.cfg.messageIndexEnable:
            return
        try:
            idx = self.files.index
        except StoreFormatError as e:
            self.problem("index-unreadable", "index", None, str(e))
            return
        self._index(idx, records, cl_min)

    def _index(self, idx: IndexService, records: dict[int, DispatchRequest], cl_min: int) -> None:
        if not idx.files:
            if any(req.index_keys for req in records.values()):
                self.problem("index-missing", "index", None, "no index files, but records have keys")
            return
        for f in idx.files:
            self._index_header(f, records, cl_min)
        used = [f for f in idx.files if f.index_count > 1]
        first = min((f.begin_phy for f in used), default=idx.end_phy + 1)
        unindexed: list[int] = []
        for off in sorted(records):
            if off < first or not records[off].index_keys:
                continue
            if off > idx.end_phy:
                unindexed.append(off)
                continue
            for key in records[off].index_keys:
                self.report.keys_checked += 1
                if off not in idx.query(key, 2 ** 31 - 1, 0, 2 ** 63 - 1):
                    self.problem("index-key-not-found", "index", None,
                                 f"key {key!r} of the record at {off} is not found through the index")
        if unindexed:
            self.problem("index-unindexed", idx.files[-1].path, None,
                         f"{len(unindexed)} records with keys after the index's last indexed "
                         f"commitlog offset {idx.end_phy} are not indexed (first at {unindexed[0]})")

    def _index_header(self, f: IndexFile, records: dict[int, DispatchRequest], cl_min: int) -> None:
        """Check one index file's header against its geometry, its entries and the records it
        names (RocketMQ's IndexHeader, as IndexFile.putKey maintains it)."""
        begin_ts, end_ts, begin_phy, end_phy, slots, count = INDEX_HEADER.unpack_from(f.mm, 0)
        wrong = []
        if not 0 <= count <= f.entry_num:
            wrong.append(f"indexCount {count} outside [0, {f.entry_num}]")
        elif not 0 <= slots <= min(f.slot_num, max(0, count - 1)):
            wrong.append(f"hashSlotCount {slots} outside [0, {min(f.slot_num, max(0, count - 1))}] "
                         f"for indexCount {count}")
        if begin_ts < 0 or end_ts < begin_ts:
            wrong.append(f"timestamps begin {begin_ts} / end {end_ts} out of order")
        if begin_phy < 0 or end_phy < begin_phy:
            wrong.append(f"phy offsets begin {begin_phy} / end {end_phy} out of order")
        if not wrong and count > 1:
            last, first = (int(f.entries[count - 1]["phy_offset"]), int(f.entries[1]["phy_offset"]))
            if (begin_phy, end_phy) != (first, last):
                wrong.append(f"phy offsets begin {begin_phy} / end {end_phy}, but its entries run "
                             f"from {first} to {last}")
            for name, phy, ts in (("begin", begin_phy, begin_ts), ("end", end_phy, end_ts)):
                rec = records.get(phy)
                if rec is None and phy >= cl_min:
                    wrong.append(f"{name}PhyOffset {phy}: no record starts there")
                elif rec is not None and rec.store_timestamp != ts:
                    wrong.append(f"{name}Timestamp {ts}, but the record at {phy} was stored at "
                                 f"{rec.store_timestamp}")
        for what in wrong:
            self.problem("index-header", f.path, 0, f"header: {what}")

    # --- checkpoint and config ---------------------------------------------------------------------
    def checkpoint(self, records: dict[int, DispatchRequest]) -> None:
        path = self.root / "checkpoint"
        if not path.exists():
            if records:
                self.problem("checkpoint", "checkpoint", None, "missing", "warning")
            return
        try:
            cp = Checkpoint(path)
        except StoreFormatError as e:
            self.problem("checkpoint", path, None, str(e))
            return
        newest = max((r.store_timestamp for r in records.values()), default=0)
        for name, at, ts in (("physicMsgTimestamp", 0, cp.physic), ("logicsMsgTimestamp", 8, cp.logics),
                             ("indexMsgTimestamp", 16, cp.index)):
            if ts > newest + 1000 and records:
                self.problem("checkpoint", path, at,
                             f"{name} {ts} is after the newest stored message ({newest})")
        if (self.root / "abort").exists():
            self.problem("abort", "abort", None, "abort file present: the store was not closed cleanly "
                                        "(or a writer is running)", "warning")

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
            self.problem("config", "config/consumerOffset.json", None, str(e))
            return
        for (topic, group), qs in sorted(offsets.items()):
            for q, off in sorted(qs.items()):
                hi = queues_max.get((topic, q))
                if hi is None:
                    if not topic.startswith("%RETRY%"):
                        self.problem("config", "config/consumerOffset.json", None,
                                     f"group {group}: queue {topic}/{q} does not exist", "warning")
                elif off > hi:
                    self.problem("config", "config/consumerOffset.json", None,
                                 f"group {group}: offset {off} of {topic}/{q} is past its max {hi}")


def not_a_store(root: str | Path) -> str | None:
    """Why ``root`` cannot be verified (missing, not a directory, not a RocketMQ store), naming
    the path; None when it is a store directory."""
    root = Path(root)
    if not root.exists():
        return f"{root}: no such store directory"
    if not root.is_dir():
        return f"{root}: not a directory"
    if not is_store(root):
        return f"{root}: not a RocketMQ store (no commitlog/, consumequeue/, index/ or checkpoint)"
    return None


def verify(root: str | Path, config: StoreConfig | None = None, **overrides: Any) -> VerifyReport:
    """Check the whole store at ``root`` (settings: ``config``, then ``overrides``; file sizes
    from the files, ``store.file_sizes``, where they contradict no override); the report
    lists every problem found. A ``root`` that is not a store gives one error (file ``"."``) that
    names the path and says why."""
    cfg = load_config(overrides, base=config)
    refused = not_a_store(root)
    with StoreFiles(Path(root).resolve(), cfg, sizes_from_files=True, explicit=overrides) as files:
        c = _Checker(files)
        if refused:
            c.report.problems.append(Problem("error", ".", None, refused, "not-a-store"))
            return c.report
        loaded = c.commitlog()
        if loaded is None:
            return c.report
        log, records = loaded
        c.consume_queues(log, records)
        c.index(records, log.min_offset)
        c.checkpoint(records)
        maxes: dict[tuple[str, int], int] = {}
        for req in records.values():
            if req.to_consume_queue:
                key = (req.topic, req.queue_id)
                maxes[key] = max(maxes.get(key, 0), req.queue_offset + 1)
        c.config(maxes)
        return c.report
