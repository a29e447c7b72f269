"""The ingest journal: a bulk write kept whole or not at all (``MessageStore.all_or_nothing``).

`<root>/ingest.pending` records the store as it was before a writer's bulk write began: the
CommitLog end offset and the ConsumeQueues that existed. It is written whole (a temporary name,
fsync, rename, directory fsync) before the first record of the write, and removed, after
everything written is flushed, as the write's commit point. While it exists:

- the next writer open rolls the store back to it before recovery (``discard``): the CommitLog
  is cut at the recorded end and its tail zeroed, ConsumeQueue units past it are dropped and the
  index rolled back (``recovery.cut_after``, the steps recovery takes for a torn tail), the
  ConsumeQueues the write created are deleted; then the journal is removed. Only the write's
  records go: the writer held the store's lock from the journal on, and the end it recorded is
  the end of the data before it.
- read-only opens treat its CommitLog end as the end of readable data and leave out the
  ConsumeQueue units past it and the ConsumeQueues the write created (``hide``).

Every file the write created is past the recorded state (CommitLog and index files after it,
ConsumeQueue files past a queue's last unit, new queues), so rolling back deletes those and cuts
the files that existed back to their bytes before the write.
"""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path

from rocketlake.store.commitlog import CommitLog
from rocketlake.store.consume_queue import ConsumeQueue
from rocketlake.store.errors import StoreFormatError
from rocketlake.store.index import IndexService
from rocketlake.store.recovery import cut_after
from rocketlake.store.safe_files import disk_error, fsync_dir, write_whole

JOURNAL_NAME = "ingest.pending"

Queues = dict[tuple[str, int], ConsumeQueue]


class PartialIngestDiscarded(UserWarning):
    """A writer open found an unfinished bulk write (the writer was killed or failed before its
    commit point) and rolled the store back to its state before it."""


@dataclass(frozen=True)
class IngestJournal:
    """What the journal at ``path`` recorded: where the CommitLog ended before the write, and
    the ConsumeQueues that existed then."""
    path: Path
    commitlog_end: int
    queues: frozenset[tuple[str, int]]


@dataclass(frozen=True)
class Discarded:
    """A partial write rolled back: ``records`` CommitLog records at offsets [start, end)."""
    records: int
    start: int
    end: int

    def __str__(self) -> str:
        return (f"discarded a partial ingest of {self.records} records (offsets "
                f"{self.start}-{self.end}) that did not finish; the store is as it was before it")


def begin(root: Path, commitlog_end: int, queues: Queues) -> IngestJournal:
    """Write the journal (durably) for a write starting at ``commitlog_end`` with ``queues``
    existing. StoreFormatError when one is already there (a write in progress, or not rolled
    back); a full disk fails here, before anything is written."""
    path = Path(root) / JOURNAL_NAME
    if path.exists():
        raise StoreFormatError(f"{path}: an unfinished ingest's journal is already there")
    topics: dict[str, list[int]] = {}
    for topic, queue_id in sorted(queues):
        topics.setdefault(topic, []).append(queue_id)
    data = json.dumps({"commitlog_end": commitlog_end, "queues": topics}).encode()
    write_whole(path, data, "writing the ingest journal")
    return IngestJournal(path, commitlog_end, frozenset(queues))


def read(root: Path) -> IngestJournal | None:
    """The journal of an unfinished write at ``root``, None when there is none;
    StoreFormatError naming it when it cannot be read."""
    path = Path(root) / JOURNAL_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw)
        end = data["commitlog_end"]
        queues = frozenset((str(t), q) for t, ids in data["queues"].items() for q in ids)
        if type(end) is not int or end < 0 or any(type(q) is not int for _, q in queues):
            raise ValueError("commitlog_end or a queue id is not a non-negative integer")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise StoreFormatError(f"{path}: unreadable ingest journal ({e}); it is written whole, "
                               f"so something else changed it") from None
    return IngestJournal(path, end, queues)


def finish(journal: IngestJournal) -> None:
    """Remove the journal, durably: the commit point of the write (or the end of its rollback)."""
    try:
        journal.path.unlink()
        fsync_dir(journal.path.parent)
    except OSError as e:
        raise disk_error(e, journal.path, "removing the ingest journal") from None


def discard(root: Path, log: CommitLog, queues: Queues, index: IndexService | None) -> Discarded | None:
    """Writer open, before recovery: roll back the unfinished write the journal at ``root``
    records, if any (the module docstring), flush, remove the journal and warn
    (PartialIngestDiscarded). ``queues`` loses the ConsumeQueues the write created. Returns what
    was discarded, None when there was no journal."""
    journal = read(root)
    if journal is None:
        return None
    end = min(journal.commitlog_end, log.max_offset)
    walk = log.walk(end, check_crc=False, stop_at=log.files.files[-1].end if log.files.files else 0)
    records = sum(len(batch) for batch in walk)
    found = Discarded(records, end, max(end, walk.end))
    del walk  # its views on the maps must go before files are deleted
    cut_after(log, queues, index, end)
    for key in sorted(set(queues) - journal.queues):
        _delete_queue(queues.pop(key))
    log.flush()
    for cq in queues.values():
        cq.flush()
    if index is not None:
        index.flush()
    finish(journal)
    warnings.warn(PartialIngestDiscarded(f"{root}: {found}"), stacklevel=3)
    return found


def hide(root: Path, queues: Queues) -> bool:
    """Read-only open while a write is unfinished: hide (not cut) its ConsumeQueue units and drop
    the ConsumeQueues it created from ``queues``; whether it did (a write is unfinished)."""
    journal = read(root)
    if journal is None:
        return False
    for key in set(queues) - journal.queues:
        queues.pop(key).close()
    for cq in queues.values():
        cq.hide_past(journal.commitlog_end)
    return True


def readable_end(root: Path) -> int | None:
    """Read-only: where readable CommitLog data ends while a write is unfinished (the end before
    it), None when none is."""
    journal = read(root)
    return None if journal is None else journal.commitlog_end


def _delete_queue(cq: ConsumeQueue) -> None:
    """Delete a ConsumeQueue the unfinished write created: its files, then its directory and its
    topic's when they are left empty."""
    for mf in cq.files.files:
        mf.destroy()
    for directory in (cq.files.dir, cq.files.dir.parent):  # <topic>/<queueId>, then <topic>
        if any(directory.iterdir()):
            break
        directory.rmdir()

