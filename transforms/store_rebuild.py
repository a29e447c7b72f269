"""CommitLog ranges -> ConsumeQueue and index files, as Spark tasks: one scan, writes on executors.

A rebuild runs two waves of tasks; the driver only plans and reads small summaries.

1. **Walk** (:func:`walk_part`, one task per CommitLog byte range): walk the records that start
   in the range with the kernels (CRC checked), derive their ConsumeQueue units and index keys
   (``RecordBatch.dispatch``: the store's own dispatch rules) and write them as a *part* into a
   staging directory: units grouped by queue, keys in put order. The task returns a
   :class:`PartSummary`: where its records start and end (so the driver can check the record
   chain across ranges and find the end of valid data, as one walk would), the rows of each
   queue, the key count.
2. **Write** (:func:`write_queues`, :func:`write_index_file_task`): the driver numbers every
   index key from the parts' key counts, which fixes the index file and entry position of each
   key without looking at them (a file holds ``maxIndexNum - 1`` keys, RocketMQ's rule). The
   driver creates the new index files; then tasks over disjoint hash-slot ranges of a file place
   its keys (``IndexFile.place``: slot chains in put order, exactly RocketMQ's bytes; a chain
   never leaves its slot, so the tasks write disjoint bytes) and the driver writes each file's
   header after them; tasks over groups of queues write the ConsumeQueue files
   (``consume_queue.QueueFilesWriter``).

Nothing of a record crosses into the JVM: Spark schedules Python functions over plain Python
descriptions of the work (RDDs), so bodies and property strings never leave the worker that
read them, and the scan's parts are plain files next to the output.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rocketlake.store import codec
from rocketlake.store.codec import CQ_UNIT_DTYPE
from rocketlake.store.consume_queue import QueueFilesWriter
from rocketlake.store.index import IndexFile
from rocketlake.store.kernels import records as kr
from rocketlake.store.record_walk import RecordBatch
from rocketlake.store.safe_files import bulk_output, disk_error, open_file
from rocketlake.transforms.commitlog_batch import find_record_start, walk_range
from rocketlake.transforms.commitlog_scan import ScanRange, open_on_executor

if TYPE_CHECKING:
    from pyspark import SparkContext

#: one index key of a part: its hash (``codec.index_key_hash``), message offset and store time
KEY_DTYPE = np.dtype([("key_hash", "<i4"), ("phy", "<i8"), ("ts", "<i8")])

#: index keys an index write task puts at a time (``write_index_file_task``)
PUT_KEYS = 1 << 20

#: a slice ``[lo, hi)`` of the rows of part ``part``
Slice = tuple[int, int, int]


@dataclass(frozen=True)
class QueueRows:
    """The units of queue (``topic``, ``queue_id``) in a part: rows ``[lo, hi)``."""
    topic: str
    queue_id: int
    lo: int
    hi: int


@dataclass(frozen=True)
class PartSummary:
    """What the driver needs from a scanned range.

    ``first``: CommitLog offset of the range's first record (None: no record starts in it).
    ``tail``: where the record after the last one starts (the next file's start after a BLANK).
    ``stop`` / ``reason``: set when valid data ends inside the range (zeros: reason None; damage:
    what is wrong), at CommitLog offset ``stop``. ``bad_name``: (offset, topic, queue id) of the
    first record bound for a ConsumeQueue whose topic or queue id cannot name a queue directory.
    """
    part: int
    first: int | None
    tail: int
    stop: int | None
    reason: str | None
    records: int
    keys: int
    key_topics: dict[str, int]
    queues: tuple[QueueRows, ...]
    bad_name: tuple[int, str, int] | None


def part_path(staging: Path, part: int, kind: str) -> Path:
    """The file of one part's ``kind`` (``units``, ``qoff``, ``keys``) in ``staging``."""
    return staging / f"{part:06d}.{kind}.npy"


def walk_part(part: int, r: ScanRange, staging: str, delay_levels_ms: Sequence[int],
              units: bool, keys: bool, keys_after: int = -1, at: int | None = None,
              slot_num: int = 1, buckets: int = 1) -> PartSummary:
    """Walk task: walk the records starting in range ``r`` and write their ConsumeQueue units
    (when ``units``) and index keys of messages after offset ``keys_after`` (when ``keys``,
    by ``buckets`` ranges of ``slot_num`` hash slots: :func:`save_keys`) as part ``part`` under
    ``staging``. The walk starts at the first record start in the range, or at CommitLog offset
    ``at`` (inside the range) when given: where the record chain says the next record starts
    (:func:`valid_parts`)."""
    buf = open_on_executor(r.path)
    base = r.file_start
    pos = find_record_start(buf, base, r.lo, r.hi) if at is None else at - base
    if pos >= r.hi:
        return PartSummary(part, None, base + pos, None, None, 0, 0, {}, (), None)
    delays = tuple(delay_levels_ms)
    topic_no: dict[str, int] = {}
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("group", "qoff", "unit", "key", "key_topic")}
    records, first = 0, base + pos
    for s in walk_range(buf, base, pos, r.hi, check_crc=True):
        batch = RecordBatch(buf, s.raw)
        records += len(batch)
        if not len(batch) or not (units or keys):  # a checking walk needs no dispatch
            continue
        d = batch.dispatch(delays)
        raw = batch.raw
        ids, names = batch.topics
        remap = np.array([topic_no.setdefault(t, len(topic_no)) for t in names], dtype=np.int64)
        if units and d.to_queue.any():
            sel = np.flatnonzero(d.to_queue)
            cols["group"].append(codec.queue_key(remap[ids[sel]], raw[sel, kr.QUEUE_ID]))
            cols["qoff"].append(raw[sel, kr.QUEUE_OFFSET])
            u = np.empty(sel.size, dtype=CQ_UNIT_DTYPE)
            u["commitlog_offset"], u["size"] = raw[sel, kr.OFFSET], raw[sel, kr.SIZE]
            u["tags_code"] = d.tags_code[sel]
            cols["unit"].append(u)
        if keys and d.key_hashes.size:
            counts = np.where(raw[:, kr.OFFSET] > keys_after, d.key_counts, 0)
            k = np.empty(d.key_hashes.size, dtype=KEY_DTYPE)
            k["key_hash"] = d.key_hashes
            k["phy"] = np.repeat(raw[:, kr.OFFSET], d.key_counts)
            k["ts"] = np.repeat(raw[:, kr.STORE_TS], d.key_counts)
            cols["key"].append(k[k["phy"] > keys_after])
            cols["key_topic"].append(np.bincount(remap[ids], weights=counts, minlength=len(topic_no)))
    end, status, error = base + s.end, s.status, s.error
    tail = base + buf.size if status == kr.BLANK else end
    stop = None if status in (kr.LIMIT, kr.BLANK) else end
    folder = Path(staging)
    queues, bad_name = _write_units(folder, part, cols, {n: t for t, n in topic_no.items()})
    key_topics: dict[str, int] = {}
    if keys:
        key_rows = np.concatenate(cols["key"]) if cols["key"] else np.zeros(0, KEY_DTYPE)
        save_keys(folder, part, key_rows, slot_num, buckets)
        per_topic = np.zeros(len(topic_no), dtype=np.int64)
        for c in cols["key_topic"]:
            per_topic[:c.size] += c.astype(np.int64)
        key_topics = {t: int(per_topic[n]) for t, n in topic_no.items() if per_topic[n]}
    return PartSummary(part, first, tail, stop, error, records, sum(key_topics.values()), key_topics,
                       queues, bad_name)


def walk_parts(sc: SparkContext, ranges: list[ScanRange], staging: str,
               delay_levels_ms: Sequence[int], units: bool, keys: bool,
               keys_after: int = -1, slot_num: int = 1, buckets: int = 1) -> list[PartSummary]:
    """Run :func:`walk_part` over every range on Spark (range ``i`` is part ``i``) and return the
    summaries in range order. Consecutive ranges share a task, one task per core: a PySpark
    task costs 50-100 ms of its own on top of its work, and that cost does not shrink with more
    cores (the ranges are of equal size but for each file's last, and none lies past the end of
    a file's data: equal counts of ranges are near-equal work)."""
    delays = tuple(delay_levels_ms)

    def scan(items: Iterable[tuple[int, ScanRange]]) -> Iterator[PartSummary]:
        for i, r in items:
            yield walk_part(i, r, staging, delays, units, keys, keys_after, None, slot_num, buckets)

    tasks = max(1, min(len(ranges), sc.defaultParallelism))
    return sc.parallelize(list(enumerate(ranges)), tasks).mapPartitions(scan).collect()


def _save(path: Path, rows: np.ndarray) -> None:
    """``rows`` as the ``.npy`` file ``path`` (``np.load`` reads it), never written through a link
    there (LinkedFileError); an OSError (a full disk) names the file. Written through Python's
    file object, not ``np.save``: numpy writes the data with C's ``fwrite``, whose short write
    on a full disk is an OSError without its errno ("308 requested and 195 written"), not "No
    space left on device"."""
    try:
        with os.fdopen(open_file(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as f:
            np.lib.format.write_array_header_1_0(f, np.lib.format.header_data_from_array_1_0(rows))
            f.write(np.ascontiguousarray(rows).data)
    except OSError as e:
        raise disk_error(e, path, "writing a rebuild's scan part") from None


def slot_bounds(slot_num: int, buckets: int) -> list[int]:
    """The first hash slot of each of ``buckets`` near-equal ranges of ``slot_num`` slots, then
    ``slot_num``: the slot ranges a scan stages its index keys by."""
    return [slot_num * i // buckets for i in range(buckets + 1)]


def save_keys(folder: Path, part: int, rows: np.ndarray, slot_num: int, buckets: int) -> None:
    """Stage part ``part``'s index keys (``KEY_DTYPE`` rows, in put order) by slot range, so that
    a task placing some of the ranges reads only their keys (:func:`share_keys`): ``keys``
    holds the keys of each of the ``buckets`` ranges (:func:`slot_bounds`) in turn, each range's
    in put order; ``keypos`` each row's number in put order; ``keybounds`` the first row of each
    range, then the row count."""
    slot = rows["key_hash"].astype(np.int64) % slot_num
    bucket = np.searchsorted(slot_bounds(slot_num, buckets), slot, side="right") - 1
    bucket = bucket.astype(np.min_scalar_type(buckets))  # small ints: a radix sort
    order = np.argsort(bucket, kind="stable")
    _save(part_path(folder, part, "keys"), rows[order])
    _save(part_path(folder, part, "keypos"), order.astype(np.min_scalar_type(max(0, rows.size - 1))))
    _save(part_path(folder, part, "keybounds"), np.searchsorted(bucket[order], np.arange(buckets + 1)))


def share_keys(folder: Path, part: int, lo: int, hi: int, slot_num: int,
               slots: tuple[int, int]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The keys numbered ``[lo, hi)`` (in put order) of part ``part`` (:func:`save_keys`) whose
    slot is in ``slots``, a union of the part's slot ranges (ValueError if not), with their
    numbers: the keys of each slot in put order, at most ``PUT_KEYS`` at a time."""
    keys = np.load(part_path(folder, part, "keys"), mmap_mode="r")
    pos = np.load(part_path(folder, part, "keypos"), mmap_mode="r")
    first = np.load(part_path(folder, part, "keybounds")).tolist()
    bounds = slot_bounds(slot_num, len(first) - 1)
    if slots[0] not in bounds or slots[1] not in bounds:
        raise ValueError(f"{part_path(folder, part, 'keys')}: slots {slots} are not a union of the "
                         f"slot ranges its keys were staged by ({bounds})")
    for b in range(bounds.index(slots[0]), bounds.index(slots[1])):
        a, z = (first[b] + np.searchsorted(pos[first[b]:first[b + 1]], [lo, hi])).tolist()
        for c in range(a, z, PUT_KEYS):
            yield np.array(keys[c:min(z, c + PUT_KEYS)]), np.array(pos[c:min(z, c + PUT_KEYS)])


def _write_units(folder: Path, part: int, cols: dict[str, list[np.ndarray]],
                 topics: dict[int, str]) -> tuple[tuple[QueueRows, ...], tuple[int, str, int] | None]:
    """Group a part's units by queue (stable: put order within a queue) and save them."""
    if not cols["group"]:
        return (), None
    group = np.concatenate(cols["group"])
    order = np.argsort(group, kind="stable")
    group, qoff = group[order], np.concatenate(cols["qoff"])[order]
    unit = np.concatenate(cols["unit"])[order]
    _save(part_path(folder, part, "units"), unit)
    _save(part_path(folder, part, "qoff"), qoff)
    bounds = np.r_[0, np.flatnonzero(np.diff(group)) + 1, group.size].tolist()
    queues, bad = [], None
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        topic_no, qid = codec.queue_of_key(int(group[lo]))
        topic = topics[topic_no]
        queues.append(QueueRows(topic, qid, lo, hi))
        if not codec.is_topic(topic) or qid < 0:
            at = int(unit["commitlog_offset"][lo:hi].min())
            if bad is None or at < bad[0]:
                bad = (at, topic, qid)
    return tuple(queues), bad


# --- the driver's plan ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ValidParts:
    """The parts before the end of valid data, and where and why it ends (``gap``: the chain
    broke between parts, where the caller tells zeros from damage)."""
    parts: list[PartSummary]
    end: int
    reason: str | None
    records: int
    gap: bool = False


#: re-scan part ``i`` from CommitLog offset ``at``: ``walk_part(i, ranges[i], ..., at=at)``
Rescan = Callable[[int, int], PartSummary]


def valid_parts(summaries: list[PartSummary], ranges: Sequence[ScanRange], start: int,
                rescan: Rescan) -> ValidParts:
    """Follow the record chain from ``start`` through the parts in CommitLog order: each part's
    first record must start where the previous part's last one said the next would. A part whose
    scan started elsewhere (bytes inside a body that look like a record head) is re-scanned from
    the chain's next record with ``rescan``, and a part lying wholly inside one record is skipped,
    so valid data ends where one walk would end it: where a part stopped early, or at a chain
    gap (no part holds the next record)."""
    expected, kept = start, list[PartSummary]()
    for s, r in zip(summaries, ranges, strict=True):
        lo, hi = r.file_start + r.lo, r.file_start + r.hi
        if hi <= expected:
            continue
        if lo <= expected and s.first != expected:
            s = rescan(s.part, expected)
        if s.first is None:
            continue
        if s.first != expected:
            return ValidParts(kept, expected, f"offset {expected}: no valid record starts here",
                              sum(p.records for p in kept), gap=True)
        kept.append(s)
        if s.stop is not None:
            return ValidParts(kept, s.stop, s.reason, sum(p.records for p in kept))
        expected = s.tail
    return ValidParts(kept, expected, None, sum(p.records for p in kept))


@dataclass
class QueueJob:
    """A write task's queues: (topic, queue id, current max offset, slices of parts) each."""
    queues: list[tuple[str, int, int, list[Slice]]] = field(default_factory=list)
    units: int = 0


#: what a queue weighs in a write task, in units: making its directory and file costs about as
#: much as writing this many units
QUEUE_WEIGHT = 4096


def plan_queues(parts: list[PartSummary], existing: dict[tuple[str, int], int],
                tasks: int) -> list[QueueJob]:
    """Spread the queues over at most ``tasks`` write tasks: in (topic, queue id) order, cut
    into runs of about equal weight (a queue weighs its units plus ``QUEUE_WEIGHT``), so that a
    topic's queues share a task (its directory made once, by one task); ``existing`` maps a
    queue to its current max offset (units below it are kept)."""
    slices: dict[tuple[str, int], list[Slice]] = {}
    for p in parts:
        for q in p.queues:
            slices.setdefault((q.topic, q.queue_id), []).append((p.part, q.lo, q.hi))
    if not slices:
        return []
    keys = sorted(slices)
    units = np.array([sum(hi - lo for _, lo, hi in slices[k]) for k in keys], dtype=np.int64)
    weight = units + QUEUE_WEIGHT
    n = max(1, min(tasks, len(keys)))
    # each queue goes to the run its weight's midpoint falls in
    task = ((np.cumsum(weight) - weight / 2) * n // int(weight.sum())).astype(np.int64)
    jobs = [QueueJob() for _ in range(n)]
    for k, t, u in zip(keys, task.tolist(), units.tolist()):
        jobs[t].queues.append((k[0], k[1], existing.get(k, 0), slices[k]))
        jobs[t].units += u
    return [j for j in jobs if j.queues]


def write_queues(job: QueueJob, staging: str, root: str, cq_name: str, file_size: int,
                 aside: bool = True) -> dict[str, int]:
    """Write task: the ConsumeQueue files of ``job``'s queues under ``root/cq_name`` (units below a
    queue's current max offset are skipped). ``aside``: ``root/cq_name`` is a new directory
    nothing reads yet, written as a bulk output (``safe_files.bulk_output``: durable as a whole
    when the task ends). Returns units written per topic."""
    folder, written = Path(staging), dict[str, int]()
    loaded: dict[tuple[int, str], np.ndarray] = {}  # each part's file mapped once per task

    def part(p: int, kind: str) -> np.ndarray:
        if (p, kind) not in loaded:
            # a plain view of the map: slicing a np.memmap costs more than the slice
            loaded[(p, kind)] = np.load(part_path(folder, p, kind), mmap_mode="r").view(np.ndarray)
        return loaded[(p, kind)]
    out = QueueFilesWriter(Path(root), file_size, cq_name)

    def write(queues: list[tuple[str, int, int, np.ndarray, np.ndarray]]) -> None:
        """``queues`` (topic, queue id, current max offset, offsets, units) in one
        ``write_many``: no array work per queue."""
        counts = out.write_many([(t, q) for t, q, _, _, _ in queues],
                                np.r_[0, np.cumsum([q[3].size for q in queues])],
                                np.concatenate([q[3] for q in queues]),
                                np.concatenate([q[4] for q in queues]), [q[2] for q in queues])
        for (topic, *_), n in zip(queues, counts):
            written[topic] = written.get(topic, 0) + n
    with bulk_output(Path(root) / cq_name) if aside else nullcontext():
        batch: list[tuple[str, int, int, np.ndarray, np.ndarray]] = []
        held = 0
        for topic, qid, after, slices in job.queues:
            if len(slices) == 1:
                p, lo, hi = slices[0]
                qoff, units = part(p, "qoff")[lo:hi], part(p, "units")[lo:hi]
            else:
                qoff = np.concatenate([part(p, "qoff")[lo:hi] for p, lo, hi in slices])
                units = np.concatenate([part(p, "units")[lo:hi] for p, lo, hi in slices])
            if qoff.size >= out.BUFFER:  # a large queue alone, its units not copied again
                if batch:
                    write(batch)
                    batch, held = [], 0
                written[topic] = written.get(topic, 0) + out.write(topic, qid, qoff, units, after)
                continue
            batch.append((topic, qid, after, qoff, units))
            held += qoff.size
            if held >= out.BUFFER:
                write(batch)
                batch, held = [], 0
        if batch:
            write(batch)
    return written


@dataclass(frozen=True)
class IndexJob:
    """One index file's task: the file, how it starts (``create_from``: the previous file's end
    offset and time, RocketMQ's IndexFile constructor; None: continue the existing file), the
    global numbers ``[lo, hi)`` of its keys, found in ``slices`` of parts, the (CommitLog offset,
    store time) of the first and last of them, and the hash slots ``[lo, hi)`` the task places
    (None: all; :func:`share_index`)."""
    path: str
    create_from: tuple[int, int] | None
    slices: list[Slice]
    first: tuple[int, int]
    last: tuple[int, int]
    slots: tuple[int, int] | None = None

    @property
    def keys(self) -> int:
        return sum(hi - lo for _, lo, hi in self.slices)


@dataclass(frozen=True)
class IndexTail:
    """The index a rebuild continues: its last file's name, end offset and time, and how many
    keys still fit in it (0: full or no file)."""
    name: str | None = None
    end_phy: int = 0
    end_ts: int = 0
    free: int = 0


def plan_index(parts: list[PartSummary], staging: Path, index_dir: Path, entry_num: int,
               tail: IndexTail = IndexTail(), zone: tzinfo | None = None) -> list[IndexJob]:
    """The index files the parts' keys fill, in order: the open file of ``tail`` first (while
    it has room), then new files of ``entry_num - 1`` keys each, named by their first key's store
    time (``codec.next_index_file_name``, in ``zone``)."""
    counts = np.array([p.keys for p in parts], dtype=np.int64)
    starts = np.r_[0, np.cumsum(counts)]
    total = int(starts[-1])

    def slices(lo: int, hi: int) -> list[Slice]:
        out = []
        for i, p in enumerate(parts):
            a, b = max(lo, starts[i]), min(hi, starts[i + 1])
            if a < b:
                out.append((p.part, int(a - starts[i]), int(b - starts[i])))
        return out

    def key(g: int) -> np.void:
        i = int(np.searchsorted(starts, g, side="right")) - 1
        pos = np.load(part_path(staging, parts[i].part, "keypos"), mmap_mode="r")
        row = int(np.flatnonzero(pos == g - starts[i])[0])  # staged by slot range: find it
        return np.load(part_path(staging, parts[i].part, "keys"), mmap_mode="r")[row]

    def at(g: int) -> tuple[int, int]:
        k = key(g)
        return int(k["phy"]), int(k["ts"])

    jobs, g = [], 0
    if tail.free and total:
        g = min(tail.free, total)
        jobs.append(IndexJob(str(index_dir / str(tail.name)), None, slices(0, g), at(0), at(g - 1)))
    name, end = tail.name, (tail.end_phy, tail.end_ts)
    if g:
        end = at(g - 1)
    while g < total:
        hi = min(total, g + entry_num - 1)
        first = at(g)
        name = codec.next_index_file_name(first[1], name, zone)
        jobs.append(IndexJob(str(index_dir / name), end, slices(g, hi), first, at(hi - 1)))
        end, g = at(hi - 1), hi
    return jobs


def share_index(jobs: list[IndexJob], slot_num: int, shares: int, buckets: int) -> list[IndexJob]:
    """Each file's job as ``shares`` tasks over disjoint ranges of its hash slots, each a union
    of the ``buckets`` slot ranges the scan staged the keys by (:func:`save_keys`): together they
    write the file's entries and slots (``IndexFile.place``), each on its own core and reading
    only its slots' keys."""
    staged = slot_bounds(slot_num, buckets)
    bounds = [staged[buckets * i // shares] for i in range(shares + 1)]
    return [replace(j, slots=(lo, hi)) for j in jobs for lo, hi in zip(bounds[:-1], bounds[1:])
            if lo < hi]


def create_index_files(jobs: list[IndexJob], slot_num: int, entry_num: int) -> None:
    """On the driver, before the tasks: create each new file of ``jobs`` with the header
    RocketMQ's IndexFile constructor gives it (begin and end: the previous file's end), the one
    every task of the file reads its start from."""
    for j in jobs:
        if j.create_from is not None:
            f = IndexFile(Path(j.path), slot_num, entry_num, create_from=j.create_from)
            try:
                f.write_header()
            finally:
                f.close()


def finish_index_files(jobs: list[IndexJob], filled: dict[str, int], slot_num: int,
                       entry_num: int) -> None:
    """On the driver, after every task of ``jobs``: write each file's header for its keys
    (``IndexFile.count_placed``; ``filled``: the slots its tasks found empty, per file) and flush."""
    for j in {j.path: j for j in jobs}.values():
        f = IndexFile(Path(j.path), slot_num, entry_num)
        try:
            f.count_placed(j.keys, j.first, j.last, filled.get(j.path, 0))
            f.flush()
        finally:
            f.close()


def write_index_file_task(job: IndexJob, staging: str, slot_num: int, entry_num: int) -> int:
    """Write task: place ``job``'s keys of its slots into its file (made by
    :func:`create_index_files`), from the file's header as it was before the rebuild, reading
    only the keys of its slots (:func:`share_keys`), at most ``PUT_KEYS`` at a time (the task
    holds the index file and one slice of keys, not all of a full file's 20 M keys at once); the
    header is :func:`finish_index_files`'s. Returns how many of the puts found their slot empty."""
    folder = Path(staging)
    slots = job.slots or (0, slot_num)
    f = IndexFile(Path(job.path), slot_num, entry_num)
    filled, before = 0, 0  # before: the job's keys in the slices already placed
    try:
        for p, lo, hi in job.slices:
            for rows, pos in share_keys(folder, p, lo, hi, slot_num, slots):
                filled += f.place(rows["key_hash"], rows["phy"], rows["ts"], slots,
                                  pos.astype(np.int64) - lo + before, job.first[1])
            before += hi - lo
        f.flush()
    finally:
        f.close()
    return filled


def remove_staging(staging: Path) -> None:
    """Delete a rebuild's staging directory (parts only: it never holds anything else)."""
    shutil.rmtree(staging, ignore_errors=True)

