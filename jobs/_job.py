"""What every Spark job shares: its command line, settings, store checks, the writer lock and
the atomic swap.

A job runs as ``spark-submit jobs/<name>.py --store DIR [--set NAME=VALUE ...]`` or as
``rocketlake <command> ...``; both call the module's ``main(argv)``, which uses this helper.
"""
from __future__ import annotations

import argparse
import functools
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from rocketlake.store.config import StoreConfig, load_config, parse_set_options
from rocketlake.store.errors import StoreFormatError, StoreLockedError
from rocketlake.store.lockfile import StoreLock
from rocketlake.transforms.commitlog_scan import DEFAULT_SPLIT_BYTES, ScanEnd

#: Errors a job reports as one line (exit status 2) instead of a traceback.
JOB_ERRORS = (FileNotFoundError, FileExistsError, StoreFormatError, StoreLockedError, ValueError)


def job_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """An argument parser with the options every job takes (``--store``, ``--set``)."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--store", required=True, type=Path, help="store root directory")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="store setting override, RocketMQ names (repeatable)")
    p.add_argument("--split-bytes", type=int, default=DEFAULT_SPLIT_BYTES,
                   help="CommitLog bytes per scan task (default %(default)s)")
    return p


def rebuild_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """:func:`job_parser` plus the rebuild modes (full into the store, ``--incremental``,
    ``--output DIR``)."""
    p = job_parser(prog, description)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--output", type=Path,
                      help="write the rebuilt files under this directory; leave the store alone")
    mode.add_argument("--incremental", action="store_true",
                      help="only add what the store's files lack, in place")
    return p


def store_config(args: argparse.Namespace) -> StoreConfig:
    """Settings from `conf/store.conf` with the job's ``--set`` overrides."""
    return load_config(parse_set_options(args.set))


def check_store(root: Path) -> Path:
    """``root`` if it is a store with a CommitLog directory; a clear error otherwise."""
    if not root.exists():
        raise FileNotFoundError(f"{root}: no such store directory")
    if not root.is_dir():
        raise StoreFormatError(f"{root}: not a directory")
    if not (root / "commitlog").is_dir():
        raise StoreFormatError(f"{root}: not a RocketMQ store (no commitlog/ directory)")
    return root


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


Rebuild = TypeVar("Rebuild", bound=Callable[..., dict[str, int]])


def locks_store(rebuild: Rebuild) -> Rebuild:
    """Decorate ``rebuild(spark, store, cfg, output=None, ...)``: when it writes into the store
    (``output`` None: full or incremental), it runs holding the store's writer lock from before
    its scan until after its swap, so no writer can add what the rebuild would replace."""
    @functools.wraps(rebuild)
    def locked(spark: Any, store: Path, cfg: StoreConfig, output: Path | None = None,
               *args: Any, **kwargs: Any) -> dict[str, int]:
        if output is not None:
            return rebuild(spark, store, cfg, output, *args, **kwargs)
        with writer_lock(store):
            return rebuild(spark, store, cfg, output, *args, **kwargs)
    return locked  # type: ignore[return-value]


def aside(root: Path, name: str) -> Path:
    """A new, empty directory next to ``root/name`` to write a replacement into (never one that
    was there before)."""
    return Path(tempfile.mkdtemp(prefix=f".{name}.rebuild-", dir=root))


def target_dir(store: Path, name: str, output: Path | None, incremental: bool) -> Path:
    """Where a rebuild writes ``name``: under ``--output``, in place (``--incremental``), or
    aside for a swap (full rebuild into the store)."""
    if output is not None:
        return output / name
    if incremental:
        return store / name
    return aside(store, name)


def swap_in(root: Path, name: str, new: Path) -> None:
    """Replace ``root/name`` with the directory ``new`` (same file system): move the old one
    into a new directory aside, rename the new one into place, then delete what was moved aside
    (the old one is put back if the rename fails)."""
    target = root / name
    old = Path(tempfile.mkdtemp(prefix=f".{name}.old-", dir=root))
    if target.exists():
        target.rename(old / name)
    try:
        new.rename(target)
    except OSError:
        if (old / name).exists():
            (old / name).rename(target)
        old.rmdir()
        raise
    shutil.rmtree(old)


def rebuild_main(prog: str, description: str, rebuild: Callable[..., dict[str, int]], noun: str,
                 subdir: str, argv: list[str] | None) -> int:
    """The command line of a rebuild job: parse, build a (Delta-less) session, run ``rebuild``
    (``spark, store, cfg, output, incremental, split_bytes`` -> count per topic), report."""
    from rocketlake.jobs.spark_session import build_session

    args = rebuild_parser(prog, description).parse_args(argv)

    def body() -> int:
        cfg = store_config(args)
        store = check_store(args.store)
        spark = build_session(f"rocketlake {prog}", delta=False)
        counts = rebuild(spark, store, cfg, args.output, args.incremental, args.split_bytes)
        print(f"{prog}: wrote {sum(counts.values())} {noun} for {len(counts)} topic(s) under "
              f"{(args.output or store) / subdir}: "
              + ", ".join(f"{t}={n}" for t, n in sorted(counts.items())), file=sys.stderr)
        return 0

    return run(prog, body)


def run(prog: str, body: Callable[[], int]) -> int:
    """Run a job body; expected errors become one line on stderr and exit status 2."""
    try:
        return body()
    except JOB_ERRORS as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2


@contextmanager
def progress_bars(totals: dict[str, int]) -> Iterator[Callable[[str, int], None]]:
    """One progress bar per name (on stderr); yields ``advance(name, n)``."""
    columns = (TextColumn("{task.description:<24}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=Console(stderr=True)) as bar:
        tasks = {t: bar.add_task(t, total=n) for t, n in sorted(totals.items())}
        yield lambda name, n: bar.advance(tasks[name], n)


def report_scan(prog: str, end: ScanEnd) -> None:
    """One line on where the CommitLog scan stopped and what it counted."""
    how = f" ({end.reason})" if end.reason else ""
    crc = (f"; {end.bad_crc} record(s) with a bad body CRC, first at offset {end.first_bad_crc}"
           if end.bad_crc else "")
    print(f"{prog}: scanned {end.records} records, valid data ends at offset {end.end}{how}{crc}",
          file=sys.stderr)
