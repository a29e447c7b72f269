"""Salvage: copy a damaged store into a new one, keeping every intact record and putting an empty
placeholder where each damaged one stood, so queue offsets and committed consumer offsets keep
their meaning. RocketMQ's own recovery cuts the CommitLog at the first invalid record instead:
everything after it is lost.

The original is only read (``StoreFiles``: mapped as it is, no recovery, no lock, nothing
written). The new store holds:

- a CommitLog with every valid record of the original (walked past damage:
  ``CommitLog.walk_past_damage``, which resumes at the next record start after an invalid
  record or a stretch of zeros), byte for byte but for QUEUEOFFSET and PHYSICALOFFSET, which
  name its place in the new log. Records are laid out one after the other: a CommitLog offset
  (and so an offset msgId, a stream checkpoint) of the original does not carry over; a queue
  offset does (that of the original's ConsumeQueue unit pointing at the record, else its
  QUEUEOFFSET field, which the body CRC does not cover).
- a placeholder record for each damaged record whose queue position can be known: same topic,
  queue id and queue offset, an empty body, no tags, the store time of the intact record before
  it, and the property ``SALVAGED`` = ``<kind>@<commitlog offset in the original>`` (kind ``crc``:
  the body CRC or a 5.x property CRC failed; ``truncated``: the CommitLog's data ends in it;
  ``unreadable``: anything else, zeros included). The position comes from (1) the original's
  ConsumeQueue units that point into a damaged stretch (the unit names the queue, the queue offset
  and where the record started), then (2) the neighbours: a queue offset missing between two
  intact records of a queue, with a damaged stretch between them in the CommitLog, is placed at
  the first such stretch. A damaged record of neither kind (no unit, and no intact record of its
  queue after it; or a record that takes no queue offset, such as a PREPARED half message) leaves
  no trace but the bytes counted lost.
- `config/` copied (topics, consumer offsets, delay offsets, subscription groups), the
  ConsumeQueues and index built from the new CommitLog (``single_process_rebuild``), and a
  checkpoint.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rocketlake.store.checkpoint import Checkpoint
from rocketlake.store.codec import CQ_UNIT_SIZE
from rocketlake.store.commitlog import CommitLog
from rocketlake.store.config import StoreConfig
from rocketlake.store.consume_queue import valid_units
from rocketlake.store.kernels import records as kr
from rocketlake.store.mapped_file import MappedFile, data_end
from rocketlake.store.message import Message
from rocketlake.store.message_encoder import MessageEncoder
from rocketlake.store.record_walk import Gap, RecordBatch
from rocketlake.store.safe_files import empty_directory, make_durable, read_file, write_whole
from rocketlake.store.single_process_rebuild import rebuild
from rocketlake.store.store_dir import COMMITLOG_DIR, check_outside, check_store, create_store
from rocketlake.store.store_files import StoreFiles
from rocketlake.store.topic_config import check_topics_file
from rocketlake.store.verify import RecordColumns, Records

#: the property a placeholder carries: ``<kind>@<commitlog offset in the original>``
SALVAGED = "SALVAGED"
#: the config files a salvaged store takes from the original
CONFIG_FILES = ("topics.json", "consumerOffset.json", "delayOffset.json", "subscriptionGroup.json")


@dataclass
class LostRange:
    """A damaged stretch of the original CommitLog, ``[offset, end)``, what the walk met at its
    start (``why``), its kind (the ``SALVAGED`` kind) and how many placeholders stand for it."""
    offset: int
    end: int
    kind: str
    why: str
    placeholders: int = 0


@dataclass
class SalvageReport:
    """What a salvage kept and lost: records copied, placeholders written, the damaged byte
    ranges, and per (topic, queue id) both counts."""
    source: str
    output: str | None
    kept: int = 0
    placeholders: int = 0
    lost: list[LostRange] = field(default_factory=list)
    #: (topic, queue id) -> [records kept, placeholders]
    queues: dict[tuple[str, int], list[int]] = field(default_factory=dict)

    @property
    def damaged(self) -> bool:
        return bool(self.lost)

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "output": self.output, "damaged": self.damaged,
                "records_kept": self.kept, "placeholders": self.placeholders,
                "bytes_lost": sum(r.end - r.offset for r in self.lost),
                "lost": [vars(r) for r in self.lost],
                "queues": [{"topic": t, "queue_id": q, "kept": k, "placeholders": p}
                           for (t, q), (k, p) in sorted(self.queues.items())]}


@dataclass(frozen=True)
class _Placeholder:
    at: int            # CommitLog offset in the original it stands at
    topic: str
    queue_id: int
    queue_offset: int
    kind: str


def salvage(store: str | Path, output: str | Path, config: StoreConfig) -> SalvageReport:
    """Copy ``store`` into a new store at ``output`` as the module docstring says (``config``:
    the settings to read ``store`` with, its file sizes those of its files; the new store takes
    the same). ``output`` must be missing or an empty directory (FileExistsError otherwise,
    before anything is written) outside ``store`` (UnsafePathError); ``store`` is never written.
    Should the salvage fail (a full disk), what it wrote is removed: ``output`` is as it was,
    never a part of a store a reader would take for the salvaged one. It claims ``output`` first
    (its `commitlog/`, made exclusively), so a second salvage into the same path meanwhile fails
    (FileExistsError) and removes nothing of the first's."""
    src, out = check_store(store), Path(output)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out}: already exists and is not an empty directory; salvage "
                              f"writes a new store")
    check_outside(src, out, "salvage's new store")
    check_topics_file(src)  # the new store takes it: refused here, before anything is written
    missing = [d for d in (out, *out.parents) if not os.path.lexists(d)]
    try:  # the output's claim: a salvage into the same path at the same time fails here
        (out / COMMITLOG_DIR).mkdir(parents=True)
    except FileExistsError:
        raise FileExistsError(f"{out}: another salvage is writing a store there") from None
    try:
        with StoreFiles(src, config, sizes_from_files=True) as files:
            records, lost, placeholders = _plan(files)
            cfg = files.cfg
            create_store(out)
            _copy_config(src, out)
            last_ts = _write_commitlog(out, cfg, files.commitlog, records, placeholders)
        rebuild(out, out, config=cfg)
        checkpoint = Checkpoint(out / "checkpoint", writer=True)
        checkpoint.physic = checkpoint.logics = checkpoint.index = last_ts
        checkpoint.save()
        make_durable(out)
    except BaseException:
        _remove_written(out, missing)
        raise
    return _report(src, str(out), records, lost, placeholders)


def _remove_written(out: Path, missing: list[Path]) -> None:
    """Remove what a failed salvage wrote: the topmost of the directories ``missing`` before it
    (``out`` and its parents it created), else everything in ``out`` (an empty directory then)."""
    if missing:
        shutil.rmtree(missing[-1], ignore_errors=True)
    else:
        empty_directory(out)


def assess(store: str | Path, config: StoreConfig) -> SalvageReport:
    """What ``salvage`` of ``store`` would keep and lose (its report, ``output`` None), writing
    nothing: what `verify` states as the cost of salvaging."""
    src = check_store(store)
    with StoreFiles(src, config, sizes_from_files=True) as files:
        return _report(src, None, *_plan(files))


def _plan(files: StoreFiles) -> tuple[Records, list[LostRange], list[_Placeholder]]:
    """The original's valid records, its damaged byte ranges and the placeholders for them."""
    records, gaps = _read(files.commitlog, files.cfg)
    _unit_queue_offsets(files, records)
    lost = _lost_ranges(files.commitlog, gaps)
    return records, lost, _placeholders(files, records, lost)


def _report(src: Path, output: str | None, records: Records, lost: list[LostRange],
            placeholders: list[_Placeholder]) -> SalvageReport:
    report = SalvageReport(str(src), output, len(records), len(placeholders), lost)
    for key, rows in records.queues().items():
        report.queues[key] = [int(rows.size), 0]
    for p in placeholders:
        report.queues.setdefault((p.topic, p.queue_id), [0, 0])[1] += 1
        next(r for r in lost if r.offset <= p.at < r.end).placeholders += 1
    return report


def _read(log: CommitLog, cfg: StoreConfig) -> tuple[Records, list[Gap]]:
    """The original's valid records (as columns) and the gaps between them."""
    columns, gaps = RecordColumns(store_ts=True), []
    for item in log.walk_past_damage(past_zeros=True):
        if isinstance(item, RecordBatch):
            columns.add(item, cfg.delay_levels_ms)
        elif isinstance(item, Gap):
            gaps.append(item)
    return columns.records(), gaps


def _unit_queue_offsets(files: StoreFiles, records: Records) -> None:
    """Set a queued record's queue offset to that of the original's ConsumeQueue unit that points
    at it (its start and size) where the unit at its own QUEUEOFFSET does not: that field lies
    outside the body CRC, so a damaged one leaves a valid record, while the unit RocketMQ's
    dispatch wrote from the intact field still names its place (the new CommitLog's field is
    rewritten anyway)."""
    for key, rows in records.queues().items():
        cq = files.queues.get(key)
        if cq is None:
            continue
        units = cq.all_units()
        first = cq.files.min_offset // CQ_UNIT_SIZE
        off = units["commitlog_offset"].astype(np.int64)
        points = valid_units(off, units["size"], files.commitlog.min_offset)
        at, size = records.offset[rows], records.size[rows]  # rising: rows are in CommitLog order
        own = records.queue_offset[rows] - first  # each record's unit by its own field
        k = np.clip(own, 0, max(units.size - 1, 0))
        placed = ((own >= 0) & (own < units.size) & points[k] & (off[k] == at)
                  & (units["size"][k] == size)) if units.size else np.zeros(rows.size, dtype=bool)
        i = np.minimum(np.searchsorted(at, off), at.size - 1)  # the record each unit points at
        hit = points & (at[i] == off) & (size[i] == units["size"]) & ~placed[i]
        records.queue_offset[rows[i[hit]]] = first + np.flatnonzero(hit)


def _lost_ranges(log: CommitLog, gaps: list[Gap]) -> list[LostRange]:
    """Each gap as a byte range: up to where records resume, else up to the file's last
    non-zero byte (``truncated`` when that is the CommitLog's last file: its data ends in damage,
    a torn write; else ``crc`` for a body or property CRC mismatch, ``unreadable`` for anything else)."""
    lost = []
    for g in gaps:
        mf = log.files.find(g.offset)
        assert mf is not None  # the walk found the gap in it
        end = g.resumes_at if g.resumes_at is not None else _data_ends(mf, g.offset - mf.start)
        kind = ("truncated" if g.resumes_at is None and mf is log.files.last else
                "crc" if g.status in (kr.BAD_CRC, kr.BAD_PROP_CRC) else "unreadable")
        lost.append(LostRange(g.offset, end, kind, g.why or "zeros where a record should start"))
    return lost


def _data_ends(mf: MappedFile, pos: int, chunk: int = 1 << 22) -> int:
    """The CommitLog offset one past the last non-zero byte of ``mf`` at or after ``pos``
    (``pos + 1`` at least), read backwards from the end of the file's data (``data_end``)."""
    buf = np.frombuffer(mf.mm, dtype=np.uint8)
    hi = min(mf.size, data_end(mf.path))
    while hi > pos + 1:
        lo = max(pos + 1, hi - chunk)
        nonzero = np.flatnonzero(buf[lo:hi])
        if nonzero.size:
            return mf.start + lo + int(nonzero[-1]) + 1
        hi = lo
    return mf.start + pos + 1


def _placeholders(files: StoreFiles, records: Records, lost: list[LostRange]) -> list[_Placeholder]:
    """The queue positions of damaged records: from the original's units pointing into a lost
    range, then from gaps in a queue's offsets between intact neighbours (module docstring)."""
    if not lost:
        return []
    starts = np.array([r.offset for r in lost], dtype=np.int64)
    ends = np.array([r.end for r in lost], dtype=np.int64)

    def lost_at(offsets: np.ndarray) -> np.ndarray:
        """Index of the lost range holding each offset, -1 where none does."""
        i = np.searchsorted(starts, offsets, side="right") - 1
        inside = (i >= 0) & (offsets < ends[np.maximum(i, 0)])
        return np.where(inside, i, -1)

    intact = {key: set(records.queue_offset[rows].tolist()) for key, rows in records.queues().items()}
    found: dict[tuple[str, int, int], _Placeholder] = {}
    for (topic, qid), cq in sorted(files.queues.items()):
        units = cq.all_units()
        q = cq.files.min_offset // CQ_UNIT_SIZE + np.arange(units.size, dtype=np.int64)
        off = units["commitlog_offset"].astype(np.int64)
        valid = valid_units(off, units["size"], files.commitlog.min_offset)
        which = lost_at(off)
        have = intact.get((topic, qid), set())
        for k in np.flatnonzero(valid & (which >= 0)).tolist():
            if int(q[k]) not in have:
                r = lost[int(which[k])]
                found[(topic, qid, int(q[k]))] = _Placeholder(int(off[k]), topic, qid, int(q[k]), r.kind)
    for (topic, qid), rows in records.queues().items():
        qo, at = records.queue_offset[rows], records.offset[rows]
        for k in np.flatnonzero(np.diff(qo) > 1).tolist():
            between = np.flatnonzero((starts > at[k]) & (starts < at[k + 1]))
            if not between.size:
                continue
            r = lost[int(between[0])]
            for missing in range(int(qo[k]) + 1, int(qo[k + 1])):
                found.setdefault((topic, qid, missing), _Placeholder(r.offset, topic, qid, missing, r.kind))
    return sorted(found.values(), key=lambda p: (p.at, p.topic, p.queue_id, p.queue_offset))


def _copy_config(src: Path, out: Path) -> None:
    """The original's config files (``CONFIG_FILES``, and each one's .bak) into ``out/config``."""
    names = [n for base in CONFIG_FILES for n in (base, f"{base}.bak") if (src / "config" / n).is_file()]
    if names:
        (out / "config").mkdir(exist_ok=True)
    for name in names:
        write_whole(out / "config" / name, read_file(src / "config" / name), "copying a config file")


def _write_commitlog(out: Path, cfg: StoreConfig, log: CommitLog, records: Records,
                     placeholders: list[_Placeholder]) -> int:
    """Lay out the intact records and the placeholders in the original's CommitLog order under
    ``out``; returns the store time of the last record written."""
    new = CommitLog(out, cfg)
    encoder = MessageEncoder(cfg)
    store_ts = records.store_ts
    assert store_ts is not None  # ``_read`` keeps them
    last_ts = 0
    try:
        for item in _in_order(records, placeholders):
            if isinstance(item, _Placeholder):
                ts = last_ts or (int(store_ts[0]) if len(records) else 0)
                new.next_queue_offsets[(item.topic, item.queue_id)] = item.queue_offset
                p = encoder.prepare(Message(item.topic, b"", item.queue_id, born_timestamp=ts,
                                            store_timestamp=ts,
                                            properties={SALVAGED: f"{item.kind}@{item.at}"}))
                new.append(p, ts)
                continue
            r = item
            topic, qid = records.topics[int(records.topic[r])], int(records.queue_id[r])
            to_queue = bool(records.to_queue[r])
            if to_queue:
                new.next_queue_offsets[(topic, qid)] = int(records.queue_offset[r])
            offset, size = int(records.offset[r]), int(records.size[r])
            mf = log.files.find(offset)
            assert mf is not None  # the walk read the record there
            new.append_raw(mf.mm[offset - mf.start:offset - mf.start + size], topic, qid, to_queue)
            last_ts = int(store_ts[r])
        new.flush()
    finally:
        new.close()
    return last_ts


def _in_order(records: Records, placeholders: list[_Placeholder]) -> Iterator[int | _Placeholder]:
    """Record rows and placeholders merged by their offset in the original CommitLog."""
    at = np.array([p.at for p in placeholders], dtype=np.int64)
    first = np.searchsorted(records.offset, at, side="left")  # placeholder k goes before row first[k]
    k = 0
    for r in range(len(records)):
        while k < len(placeholders) and first[k] <= r:
            yield placeholders[k]
            k += 1
        yield r
    yield from placeholders[k:]

