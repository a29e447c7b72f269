"""What every Spark job shares: settings, store checks, the writer lock, where a rebuild writes
and the rebuild command.

A job runs as ``spark-submit jobs/<name>.py --store DIR [--set NAME=VALUE ...]`` or as
``rocketlake <command> ...``; its options are declared in :mod:`rocketlake.jobs.job_commands`.
"""
from __future__ import annotations

import argparse
import functools
import logging
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from rocketlake.store import swap_journal
from rocketlake.store.config import StoreConfig, parse_set_options
from rocketlake.store.consume_queue import not_file_queues
from rocketlake.store.errors import SettingError, StoreLockedError, UnsupportedStoreError
from rocketlake.store.file_sizes import reading_config
from rocketlake.store.lockfile import StoreLock
from rocketlake.transforms.commitlog_scan import ScanEnd

log = logging.getLogger(__name__)


def store_config(args: argparse.Namespace, replacing: Collection[str] = ()) -> StoreConfig:
    """Settings from `conf/store.conf` with the job's ``--set`` overrides and the file sizes of
    the store ``args.store`` (``store.file_sizes.reading_config``; ``replacing``: the structures
    the job writes anew)."""
    return reading_config(args.store, parse_set_options(args.set), replacing)


def refuse_commitlog_elsewhere(root: Path, cfg: StoreConfig, job: str, why: str) -> None:
    """The guard of a job that changes the CommitLog (``why`` says how), which rocketlake does
    only in `<root>/commitlog`, as its writer (``MessageStore``): SettingError (exit 2) naming
    storePathCommitLog when ``cfg`` puts the CommitLog of the store at ``root`` elsewhere or over
    several directories (``StoreConfig.commitlog_dirs``, the library's rule), before anything is
    read or written."""
    dirs = cfg.commitlog_dirs(root)
    if dirs != [Path(root) / "commitlog"]:
        raise SettingError(
            f"{root}: storePathCommitLog / readOnlyCommitLogStorePaths put the CommitLog in "
            f"{', '.join(map(str, dirs))}; {job} {why}, and rocketlake changes a CommitLog only in "
            f"<store>/commitlog, so it refuses this store: nothing was read or written (reading "
            f"it works: the rocketmq source, rebuild, archive, publish-offsets, dump, get, verify)")


def source_options(cfg: StoreConfig) -> dict[str, str]:
    """The ``rocketmq`` source options that read the CommitLog as ``cfg`` sets it: file size,
    delay levels, and ``storePathCommitLog`` / ``readOnlyCommitLogStorePaths`` when set."""
    opts = {"mappedFileSizeCommitLog": str(cfg.mappedFileSizeCommitLog),
            "messageDelayLevel": cfg.messageDelayLevel}
    for name in ("storePathCommitLog", "readOnlyCommitLogStorePaths"):
        if getattr(cfg, name).strip():
            opts[name] = getattr(cfg, name)
    return opts


def refuse_5x_queues(root: Path, job: str) -> None:
    """The store guard of the jobs that read ConsumeQueues as files or write them (publish-offsets,
    rebuild into the store, compact): UnsupportedStoreError (exit 2) when the store at ``root``
    keeps a 5.x RocksDB ConsumeQueue or BatchConsumeQueues (``consume_queue.not_file_queues``
    names which), before anything is read or written."""
    reason = not_file_queues(root)
    if reason is not None:
        raise UnsupportedStoreError(
            f"{reason}; {job} reads and writes 4.9 ConsumeQueue files only and refuses this store, "
            f"nothing was read or written (the rocketlake commands read it: get, lag, topic-status)")


@contextmanager
def writer_lock(root: Path) -> Iterator[None]:
    """Hold the store's writer lock (``<root>/lock``, as a ``MessageStore`` writer does) for the
    block: a writer that opens meanwhile gets ``StoreLockedError`` and must wait. Refuses a store
    a live writer holds."""
    lock = StoreLock(root)
    try:
        lock.acquire()
    except StoreLockedError:
        raise StoreLockedError(f"{root}: the store is held by a live writer (its lock file is "
                               f"locked); stop the writer or use --output DIR") from None
    try:
        yield
    finally:
        lock.release()


Rebuild = TypeVar("Rebuild", bound=Callable[..., Any])


def locks_store(rebuild: Rebuild) -> Rebuild:
    """Decorate ``rebuild(spark, store, cfg, output=None, ...)``: when it writes into the store
    (``output`` None: full or incremental), it runs holding the store's writer lock from before
    its scan until after its swap, so no writer can add what the rebuild would replace; first it
    completes a swap a killed rebuild left and deletes its leftovers (``swap_journal.recover``)."""
    @functools.wraps(rebuild)
    def locked(spark: Any, store: Path, cfg: StoreConfig, output: Path | None = None,
               *args: Any, **kwargs: Any) -> Any:
        if output is not None:
            return rebuild(spark, store, cfg, output, *args, **kwargs)
        with writer_lock(store):
            swap_journal.recover(store)
            return rebuild(spark, store, cfg, output, *args, **kwargs)
    return locked  # type: ignore[return-value]


def target_dir(store: Path, name: str, output: Path | None, incremental: bool) -> Path:
    """Where a rebuild writes ``name``: under ``--output``, in place (``--incremental``), or
    aside for a swap (full rebuild into the store)."""
    if output is not None:
        return output / name
    if incremental:
        return store / name
    return swap_journal.aside(store, name)


def report_scan(prog: str, end: ScanEnd) -> None:
    """One line on where the CommitLog scan stopped and what it counted."""
    how = f" ({end.reason})" if end.reason else ""
    log.info("%s: scanned %d records, valid data ends at offset %d%s", prog, end.records, end.end, how)
