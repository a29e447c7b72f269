"""Retention: delete expired CommitLog files, then the ConsumeQueue and index files they leave behind.

RocketMQ's rules (docs/FORMAT.md §9.4), with its setting names:

- A CommitLog file is expired when ``mtime + fileReservedTime (hours) <= now``.
- Deletion runs at a ``deleteWhen`` hour (``"04"``, or several as ``"03;04"``, local time), when
  the disk's used share passes ``diskMaxUsedSpaceRatio`` (%), or when forced. It deletes the leading
  run of expired files, in offset order, and never the last (active) file.
- Then ConsumeQueue files whose last unit points below the new CommitLog minimum are deleted (never
  a queue's last file) and each queue's minimum offset is corrected; index files whose
  endPhyOffset is below the minimum are deleted (never the last).

The decisions are pure functions of file names, mtimes, offsets, ``now`` and the settings, so the
Spark compaction job applies exactly the same rules; ``delete_expired_files`` applies them to an
open store's parts.
"""
from __future__ import annotations

import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rocketlake.store.codec import CQ_UNIT_SIZE
from rocketlake.store.commitlog import CommitLog
from rocketlake.store.config import StoreConfig
from rocketlake.store.consume_queue import ConsumeQueue, read_units
from rocketlake.store.index import IndexService

HOUR_MS = 3_600_000


@dataclass(frozen=True)
class RetentionPolicy:
    """``fileReservedTime`` (hours), ``deleteWhen`` hours, ``diskMaxUsedSpaceRatio`` (%)."""
    file_reserved_hours: int
    delete_hours: frozenset[int]
    disk_max_used_ratio: int

    @classmethod
    def from_config(cls, cfg: StoreConfig) -> RetentionPolicy:
        return cls(cfg.fileReservedTime, cfg.delete_hours, cfg.diskMaxUsedSpaceRatio)

    def __post_init__(self) -> None:
        if self.file_reserved_hours < 0:
            raise ValueError(f"fileReservedTime must be >= 0 hours, got {self.file_reserved_hours}")
        if not 0 <= self.disk_max_used_ratio <= 100:
            raise ValueError(f"diskMaxUsedSpaceRatio must be a percentage, got {self.disk_max_used_ratio}")


@dataclass(frozen=True)
class CommitLogDecision:
    """Why deletion runs now (None: it does not), which CommitLog files it deletes, and why it
    keeps each of the others (file name -> reason)."""
    reason: str | None
    delete: tuple[str, ...]
    kept: dict[str, str] = field(default_factory=dict, compare=False)


def trigger(now_ms: int, policy: RetentionPolicy, disk_used_ratio: float,
            force: bool = False, hour_gate: bool = True) -> str | None:
    """Why deletion runs at ``now_ms``: "forced", "scheduled" (no ``hour_gate``: the caller's
    schedule picks the hour), "deleteWhen" (local hour), "disk" (used share in [0, 1] above the
    ratio); None when it does not run."""
    if force:
        return "forced"
    if not hour_gate:
        return "scheduled"
    if time.localtime(now_ms / 1000).tm_hour in policy.delete_hours:
        return "deleteWhen"
    if disk_used_ratio * 100 > policy.disk_max_used_ratio:
        return "disk"
    return None


def expired_files(files: Sequence[tuple[str, int]], now_ms: int, file_reserved_hours: int) -> list[str]:
    """Names of the leading expired files among ``(name, mtime_ms)`` in offset order, never the last."""
    out = []
    for name, mtime_ms in files[:-1]:
        if mtime_ms + file_reserved_hours * HOUR_MS > now_ms:
            break
        out.append(name)
    return out


def plan_commitlog_deletion(files: Sequence[tuple[str, int]], now_ms: int, policy: RetentionPolicy,
                            disk_used_ratio: float, force: bool = False,
                            hour_gate: bool = True) -> CommitLogDecision:
    """The CommitLog files (``(name, mtime_ms)`` in offset order) to delete at ``now_ms``, and
    why each other file is kept (``hour_gate``: see :func:`trigger`)."""
    reason = trigger(now_ms, policy, disk_used_ratio, force, hour_gate)
    delete = tuple(expired_files(files, now_ms, policy.file_reserved_hours)) if reason else ()
    return CommitLogDecision(reason, delete,
                             kept_reasons(files, now_ms, policy, disk_used_ratio, reason, delete))


def kept_reasons(files: Sequence[tuple[str, int]], now_ms: int, policy: RetentionPolicy,
                 disk_used_ratio: float, reason: str | None, delete: Sequence[str]) -> dict[str, str]:
    """Why each file of ``files`` not in ``delete`` is kept: the last file, not expired yet, the
    deleteWhen hour not reached (``reason`` None), or behind a kept file."""
    out: dict[str, str] = {}
    first_kept = None
    for i, (name, mtime_ms) in enumerate(files):
        if name in delete:
            continue
        age = f"{(now_ms - mtime_ms) / HOUR_MS:.1f} h old"
        if i == len(files) - 1:
            out[name] = "the last file: never deleted (new messages are appended to it)"
        elif mtime_ms + policy.file_reserved_hours * HOUR_MS > now_ms:
            out[name] = f"not expired: {age}, fileReservedTime is {policy.file_reserved_hours} h"
        elif reason is None:
            hours = ";".join(f"{h:02d}" for h in sorted(policy.delete_hours))
            out[name] = (f"expired ({age}) but deletion waits for a deleteWhen hour ({hours}; now "
                         f"{time.localtime(now_ms / 1000).tm_hour:02d}h) or disk use above "
                         f"diskMaxUsedSpaceRatio ({policy.disk_max_used_ratio}%; now "
                         f"{disk_used_ratio * 100:.0f}%)")
        else:
            out[name] = (f"expired ({age}) but only the leading run of expired files is deleted, "
                         f"and {first_kept} before it is kept")
        first_kept = first_kept or name
    return out


def consume_queue_files_below(last_unit_offsets: Sequence[int], min_offset: int) -> int:
    """How many leading ConsumeQueue files to delete, given each file's last unit's CommitLog
    offset: those wholly below ``min_offset``, never the last file."""
    n = 0
    for off in last_unit_offsets[:-1]:
        if off >= min_offset:
            break
        n += 1
    return n


@dataclass
class ExpiryReport:
    """What ``delete_expired_files`` did."""
    reason: str | None
    commitlog_min_offset: int
    commitlog_files: list[str] = field(default_factory=list)
    consume_queue_files: list[str] = field(default_factory=list)
    index_files: list[str] = field(default_factory=list)


def disk_used_ratio(path: Path) -> float:
    """Used share (0..1) of the file system holding ``path``."""
    u = shutil.disk_usage(path)
    return (u.total - u.free) / u.total if u.total else 1.0


def delete_expired_files(log: CommitLog, queues: dict[tuple[str, int], ConsumeQueue],
                         index: IndexService | None, policy: RetentionPolicy, now_ms: int,
                         force: bool = False) -> ExpiryReport:
    """Apply the rules above to a store's parts. The caller stops writers and flushes first."""
    decision = plan_commitlog_deletion(commitlog_file_times(log), now_ms, policy,
                                       disk_used_ratio(log.files.dir) if log.files.dir.exists() else 0.0,
                                       force)
    return apply_deletion(log, queues, index, decision)


def commitlog_file_times(log: CommitLog) -> list[tuple[str, int]]:
    """``(name, mtime_ms)`` of the CommitLog files, in offset order."""
    return [(mf.path.name, os.stat(mf.path).st_mtime_ns // 1_000_000) for mf in log.files.files]


def apply_deletion(log: CommitLog, queues: dict[tuple[str, int], ConsumeQueue],
                   index: IndexService | None, decision: CommitLogDecision) -> ExpiryReport:
    """Delete the leading CommitLog files ``decision`` names, then the ConsumeQueue and index
    files wholly below the new minimum, and correct each queue's minimum offset."""
    report = ExpiryReport(decision.reason, log.min_offset)
    if decision.reason is None:
        return report
    names = [mf.path.name for mf in log.files.files[:len(decision.delete)]]
    if names != list(decision.delete):
        raise ValueError(f"deletion must take the leading CommitLog files, got {list(decision.delete)}")
    gone = log.files.delete_first(len(decision.delete))
    report.commitlog_files = [mf.path.name for mf in gone]
    report.commitlog_min_offset = min_offset = log.min_offset
    for cq in queues.values():
        last_units = [int(read_units(mf, mf.wrote // CQ_UNIT_SIZE - 1, 1)["commitlog_offset"][0])
                      if mf.wrote else -1 for mf in cq.files.files]
        n = consume_queue_files_below(last_units, min_offset)
        report.consume_queue_files += [f"{cq.topic}/{cq.queue_id}/{mf.path.name}"
                                       for mf in cq.files.delete_first(n)]
        cq.correct_min_offset(min_offset)
    if index is not None:
        report.index_files = [p.name for p in index.delete_below(min_offset)]
    return report
