"""`rocketlake store-status`: a store's state at a glance, as ``mqadmin brokerStatus`` answers it
from a running broker, from the files alone (read-only; it answers while a broker or writer holds
the store).

:func:`store_status` gathers the facts into a :class:`StoreStatus`; :func:`status_lines` and
:func:`status_json` render them. The facts:

- the CommitLog: min and max offset (``commitLogMinOffset`` / ``commitLogMaxOffset``), the data
  bytes between them, its files, and the store times of its first and last record;
- dispatch behind (brokerStatus' ``dispatchBehindBytes``, the CommitLog end minus the broker's
  reput offset, which only a running broker knows): here the CommitLog end minus the end of the
  last record any ConsumeQueue holds, and minus the end of the last record the index holds. A
  tail of records that get no unit (PREPARED or ROLLBACK transaction records) or no index key
  counts as behind too;
- disk use per structure: apparent size (the files' lengths, preallocated space included) and
  allocated bytes (the blocks the file system holds for them: less for sparse files), and the
  free and total space of the file system holding the CommitLog (the one
  ``diskMaxUsedSpaceRatio`` watches);
- whether a writer or broker holds the store (``store.lockfile.is_locked``), whether the last
  writer shut down cleanly (no `abort` file: a writer removes it on a clean close; present while
  one runs or after a crash) and the checkpoint's times; a 5.x broker's confirmPhyOffset when set.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rocketlake.jobs.cli.reading import open_read_only
from rocketlake.jobs.cli.verify_words import size_text
from rocketlake.jobs.printable import printable
from rocketlake.store import MessageStore
from rocketlake.store.consume_queue import ConsumeQueue
from rocketlake.store.errors import CorruptRecordError
from rocketlake.store.kernels import records as kr
from rocketlake.store.lockfile import is_locked
from rocketlake.store.rocksdb_store import RocksDBConsumeQueue
from rocketlake.store.store_time import format_time

#: the structures whose disk use is shown, each a directory of the store
STRUCTURES = ("commitlog", "consumequeue", "index")


@dataclass(frozen=True)
class DiskUse:
    """The files under one directory of the store: how many, their lengths' sum and the bytes
    the file system allocated to them (``st_blocks`` * 512)."""
    structure: str
    files: int
    apparent_bytes: int
    allocated_bytes: int


@dataclass(frozen=True)
class StoreStatus:
    """What ``store-status`` reports (module docstring). Offsets are CommitLog offsets, times
    epoch ms; None where the store has nothing to tell (no record, no index, unset)."""
    store: str
    commitlog_min_offset: int
    commitlog_max_offset: int
    commitlog_files: int
    first_store_timestamp: int | None
    last_store_timestamp: int | None
    consume_queues: int
    consume_queue_end_offset: int | None
    index_end_offset: int | None
    dispatch_behind_bytes: int
    index_behind_bytes: int | None
    disk: tuple[DiskUse, ...]
    disk_free_bytes: int
    disk_total_bytes: int
    locked: bool
    abort_present: bool
    checkpoint_physic_timestamp: int
    checkpoint_logics_timestamp: int
    checkpoint_index_timestamp: int
    confirm_offset: int | None

    @property
    def commitlog_bytes(self) -> int:
        """The CommitLog's data: the bytes between its min and max offset."""
        return self.commitlog_max_offset - self.commitlog_min_offset

    @property
    def clean_shutdown(self) -> bool | None:
        """Whether the last writer closed the store cleanly: no `abort` file; None while a writer
        holds the store (its `abort` file says it runs, not that it crashed)."""
        return None if self.locked else not self.abort_present


def _store_time(ms: MessageStore, offset: int) -> int | None:
    try:
        return ms.read(offset).store_timestamp
    except CorruptRecordError:
        return None


def _last_store_time(ms: MessageStore) -> int | None:
    """Store time of the CommitLog's last record: a walk of the file holding its end."""
    log = ms.commitlog
    end = log.max_offset
    mf = log.files.find(end - 1) if end > log.min_offset else None
    if mf is None:
        return None
    last = None
    for batch in log.walk(mf.start, check_crc=False, stop_at=end):
        if len(batch):
            last = int(batch.raw[-1, kr.STORE_TS])
    return last


def _record_end(ms: MessageStore, offset: int) -> int | None:
    """End (offset + size) of the record at ``offset``; None when there is no readable one."""
    try:
        return offset + ms.read(offset).size
    except CorruptRecordError:
        return None


def disk_use(root: Path, structure: str) -> DiskUse:
    """The files under ``root/structure`` (a link to another disk followed there, none below)."""
    files = apparent = allocated = 0
    for dirpath, _, names in os.walk(root / structure):
        for name in names:
            st = os.lstat(os.path.join(dirpath, name))
            files += 1
            apparent += st.st_size
            allocated += st.st_blocks * 512
    return DiskUse(structure, files, apparent, allocated)


def store_status(ms: MessageStore) -> StoreStatus:
    """The facts of the module docstring about the store ``ms`` (opened read-only)."""
    log, root = ms.commitlog, ms.root
    lo, hi = log.min_offset, log.max_offset
    cq_ends = [cq.max_physic_offset for cq in ms.queues.values()
               if isinstance(cq, (ConsumeQueue, RocksDBConsumeQueue)) and cq.max_physic_offset >= 0]
    cq_end = max(cq_ends, default=None)
    index_end = None
    if ms.index is not None and ms.index.end_phy >= 0:
        index_end = _record_end(ms, ms.index.end_phy)
    fs = os.statvfs(root / "commitlog")
    cp = ms.checkpoint
    return StoreStatus(
        store=str(root), commitlog_min_offset=lo, commitlog_max_offset=hi,
        commitlog_files=len(log.files.files),
        first_store_timestamp=_store_time(ms, lo) if hi > lo else None,
        last_store_timestamp=_last_store_time(ms),
        consume_queues=len(ms.queues), consume_queue_end_offset=cq_end, index_end_offset=index_end,
        dispatch_behind_bytes=max(0, hi - max(cq_end or lo, lo)),
        index_behind_bytes=None if ms.index is None else max(0, hi - max(index_end or lo, lo)),
        disk=tuple(disk_use(root, s) for s in STRUCTURES),
        disk_free_bytes=fs.f_bavail * fs.f_frsize, disk_total_bytes=fs.f_blocks * fs.f_frsize,
        locked=is_locked(root), abort_present=os.path.lexists(root / "abort"),
        checkpoint_physic_timestamp=cp.physic, checkpoint_logics_timestamp=cp.logics,
        checkpoint_index_timestamp=cp.index, confirm_offset=cp.confirm_offset or None)


def _files(n: int) -> str:
    return f"{n:,} file{'' if n == 1 else 's'}"


def _time(ms: int | None) -> str:
    return "-" if not ms else format_time(ms)


def status_lines(s: StoreStatus) -> list[str]:
    """The status as ``name: value`` lines for people (times ISO-8601 UTC, sizes in bytes and
    MiB), as ``mqadmin brokerStatus`` prints its table."""
    if s.clean_shutdown is None:
        shutdown = "a writer holds the store now (its abort file says it runs)"
    elif s.clean_shutdown:
        shutdown = "clean (no abort file)"
    else:
        shutdown = "NOT clean: abort file present (the last writer crashed or was killed)"
    behind = f"{s.dispatch_behind_bytes:,} bytes (ConsumeQueues end at {s.consume_queue_end_offset or 0:,})"
    index = ("index off (messageIndexEnable=false)" if s.index_behind_bytes is None else
             f"{s.index_behind_bytes:,} bytes (index ends at {s.index_end_offset or 0:,})")
    used = s.disk_total_bytes - s.disk_free_bytes
    lines = [
        ("store", s.store),
        ("commitlog min offset", f"{s.commitlog_min_offset:,}"),
        ("commitlog max offset", f"{s.commitlog_max_offset:,}"),
        ("commitlog data", f"{size_text(s.commitlog_bytes)} in {_files(s.commitlog_files)}"),
        ("first store time", _time(s.first_store_timestamp)),
        ("last store time", _time(s.last_store_timestamp)),
        ("consume queues", f"{s.consume_queues:,}"),
        ("dispatch behind", behind),
        ("index behind", index),
        *((f"disk {d.structure}", f"{_files(d.files)}, {size_text(d.apparent_bytes)} apparent, "
                                  f"{size_text(d.allocated_bytes)} allocated") for d in s.disk),
        ("disk free", f"{size_text(s.disk_free_bytes)} of {size_text(s.disk_total_bytes)} "
                      f"({used / s.disk_total_bytes:.0%} used)" if s.disk_total_bytes else "-"),
        ("held by a writer", "yes (a broker or rocketlake writer holds the lock)" if s.locked else "no"),
        ("last shutdown", shutdown),
        ("checkpoint physic", _time(s.checkpoint_physic_timestamp)),
        ("checkpoint logics", _time(s.checkpoint_logics_timestamp)),
        ("checkpoint index", _time(s.checkpoint_index_timestamp)),
        *((("confirm offset", f"{s.confirm_offset:,}"),) if s.confirm_offset is not None else ()),
    ]
    width = max(len(k) for k, _ in lines)
    return [printable(f"{k.ljust(width)}  {v}") for k, v in lines]


def status_json(s: StoreStatus) -> dict[str, Any]:
    """The status as one JSON object: every field (times as epoch ms and, beside each, ISO-8601
    ``*_time``), ``commitlog_bytes`` and ``clean_shutdown``."""
    out: dict[str, Any] = {}
    for k, v in asdict(s).items():
        out[k] = v
        if k.endswith("_timestamp"):
            out[k.removesuffix("_timestamp") + "_time"] = None if not v else format_time(v)
    out["commitlog_bytes"] = s.commitlog_bytes
    out["clean_shutdown"] = s.clean_shutdown
    return out


def cmd_store_status(a: argparse.Namespace) -> int:
    with open_read_only(a) as ms:
        status = store_status(ms)
    out = sys.stdout
    if a.json:
        out.write(json.dumps(status_json(status), ensure_ascii=False) + "\n")
    else:
        out.write("".join(line + "\n" for line in status_lines(status)))
    return 0
