"""`rocketlake pipeline`: the main job, end to end, on embedded defaults.

1. ingest a realistic sample (topics, queues, tags, keys, delays, transactions, consumer groups,
   a keyed compaction topic) into a local store (default `var/store`);
2. verify the store (every record, unit, index key, checkpoint and config file);
3. rebuild its ConsumeQueues and index with Spark into `var/rebuild` and prove them identical;
4. publish queue offsets, consumer offsets and lag to Delta (default `var/lake`);
5. run the compact job (expiry with the unconsumed guard, archive, key compaction);
6. write the HTML report and print a summary: messages, topics, queues, bytes, lag per group,
   time and MB/s per stage.

The pipeline replaces only what it made: the sample store and lake (without ``--skip-ingest``)
and the rebuild directory `<store>-rebuild` carry a `.rocketlake-sample` marker; a non-empty
directory without it is refused before anything runs, and so is a `report.html` beside the
store that is not a page `rocketlake report` wrote. The lake may be any URI Spark writes
(``--lake s3a://...``) with ``--skip-ingest``; a sample lake is made on a local path only.

Exit code: 0 when every stage succeeded and the rebuild is byte-identical, 1 when a check found
problems (verify, or a rebuild that differs), 2 when a store, lake or rebuild directory is not the
pipeline's to replace; a job's error gets its code (see :mod:`rocketlake.jobs.exit_codes`).
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

from rocketlake.jobs import cli
from rocketlake.jobs.cli import sample
from rocketlake.jobs.cli.events import event_to_message
from rocketlake.jobs.exit_codes import ExitCode
from rocketlake.jobs.lake import store_name as lake_store_name
from rocketlake.jobs.printable import printable
from rocketlake.store import MessageStore
from rocketlake.store.config import StoreConfig, load_config, parse_set_options
from rocketlake.store.consumer_lag import consumer_lag, lag_totals
from rocketlake.store.store_dir import create_store
from rocketlake.store.topic_config import declare_topics
from rocketlake.store.verify import verify

#: The file marking a directory the pipeline made (sample store, sample lake, rebuild output):
#: the only non-empty directories it ever deletes.
SAMPLE_MARK = ".rocketlake-sample"
#: the sample store's name in the lake (``jobs.lake.store_name``; ``--store-name`` names another)
SAMPLE_NAME = "sample"
_out = Console()


class NotOurs(FileExistsError):
    """A non-empty directory the pipeline did not make (it has no marker)."""


def check_ours(path: Path, what: str) -> None:
    """Refuse ``path`` unless it is absent, empty, or marked as the pipeline's own."""
    if path.exists() and not (path.is_dir() and (not any(path.iterdir()) or (path / SAMPLE_MARK).is_file())):
        raise NotOurs(f"{path}: not empty and not a {what} this pipeline made (no {SAMPLE_MARK}); "
                      f"refusing to replace it. To run on a real store use --skip-ingest (the store "
                      f"is read as it is); for a fresh sample choose a new or empty directory")


#: how every page ``rocketlake report`` writes begins its title (templates/report.html)
REPORT_TITLE = b"<title>rocketlake report:"


def check_report(path: Path) -> None:
    """Refuse the report path ``path`` unless it is absent or a page ``rocketlake report`` (the
    pipeline's own stage too) wrote, read from its first bytes: the pipeline replaces such a
    page, never someone's file (NotOurs, naming it)."""
    if not path.exists() and not path.is_symlink():
        return
    if path.is_file() and not path.is_symlink():
        with path.open("rb") as f:
            if REPORT_TITLE in f.read(1024):
                return
    raise NotOurs(f"{path}: not a report rocketlake wrote; refusing to replace it with the "
                  f"pipeline's report (move it away, or run the pipeline on a store in another "
                  f"directory)")


def clear(path: Path, what: str = "directory") -> None:
    """Delete ``path`` if the pipeline made it; leave an empty one in place; refuse anything else."""
    check_ours(path, what)
    if (path / SAMPLE_MARK).is_file():
        shutil.rmtree(path)


def sample_lake(lake: str) -> Path:
    """The local directory of the sample lake ``lake`` (a URI): the pipeline makes, marks and
    replaces a sample lake on a local filesystem only."""
    from rocketlake.jobs.lake import local_path

    local = local_path(lake)
    if local is None:
        raise ValueError(f"{lake}: the pipeline makes a sample lake on a local path or file: URI "
                         f"only, never on a remote filesystem; to publish a real store to this "
                         f"lake use --skip-ingest (nothing is created or deleted there)")
    return local


def mark(path: Path) -> None:
    """Create ``path`` (if needed) as the pipeline's own directory."""
    path.mkdir(parents=True, exist_ok=True)
    (path / SAMPLE_MARK).touch()


class StageFailed(RuntimeError):
    """A pipeline stage that did not succeed (the message says why)."""


@dataclass
class Stage:
    name: str
    seconds: float
    bytes: int = 0
    detail: str = ""


@dataclass
class Run:
    stages: list[Stage] = field(default_factory=list)

    def timed(self, name: str, fn: Callable[[], tuple[int, str]]) -> None:
        _out.print(f"[bold]>[/bold] {name} ...")
        t0 = time.perf_counter()
        nbytes, detail = fn()
        self.stages.append(Stage(name, time.perf_counter() - t0, nbytes, detail))
        _out.print(f"  {detail}")


def ingest(store: Path, n: int, settings: dict) -> tuple[int, str]:
    """Write ``n`` sample events, the sample groups' offsets and the topic config."""
    msgs = [event_to_message(ev) for ev in sample.events(n)]
    create_store(store)  # first (and marked), so a crash half-way leaves a store the next run
    mark(store)          # may replace
    declare_topics(store, sample.TOPICS, sample.ATTRIBUTES)
    with MessageStore(store, **settings) as ms:
        total = 0
        for i in range(0, len(msgs), 1000):
            total += sum(r.size for r in ms.put_batch(msgs[i:i + 1000]))
        highs = {k: hi for k, (_, hi) in ms.queue_ranges().items()}
        for (topic, group), offsets in sample.consumer_progress(highs).items():
            ms.commit_offsets(group, topic, offsets)
    return total, f"{n:,} messages, {total / 1e6:.1f} MB of CommitLog"


def data_bytes(store: Path, settings: dict) -> int:
    """Bytes of valid CommitLog data (files are pre-allocated, so not their sizes)."""
    with MessageStore(store, read_only=True, **settings) as ms:
        return ms.commitlog.max_offset - ms.commitlog.min_offset


def check(store: Path, settings: dict) -> tuple[int, str]:
    report = verify(store, **settings)
    if not report.ok:
        first = next(p for p in report.problems if p.severity == "error")
        raise StageFailed(f"verify: {first.file} @{first.offset}: {first.what}")
    return data_bytes(store, settings), (f"{report.records:,} records, {report.units:,} ConsumeQueue units, "
                  f"{report.keys_checked:,} index keys: all consistent")


#: bytes of each file read and compared at a time by :func:`same_files`
COMPARE_BYTES = 8 << 20


def same_files(a: Path, b: Path) -> bool:
    """True when the directories ``a`` and ``b`` hold the same files (relative paths and sizes)
    with the same bytes; stops at the first difference."""
    def sizes(root: Path) -> dict[Path, int]:
        return {p.relative_to(root): p.stat().st_size for p in root.rglob("*") if p.is_file()}
    listed = sizes(a)
    return listed == sizes(b) and all(_same_bytes(a / rel, b / rel) for rel in sorted(listed))


def _same_bytes(x: Path, y: Path) -> bool:
    bx, by = bytearray(COMPARE_BYTES), bytearray(COMPARE_BYTES)
    with open(x, "rb", buffering=0) as fx, open(y, "rb", buffering=0) as fy:
        while True:
            n, m = fx.readinto(bx), fy.readinto(by)
            if n != m or (bx != by if n == COMPARE_BYTES else bx[:n] != by[:n]):
                return False
            if n < COMPARE_BYTES:
                return True


def rebuild(spark: SparkSession, store: Path, out: Path, cfg: StoreConfig,
            settings: dict) -> tuple[int, str]:
    """Rebuild both structures with Spark (one scan) into ``out`` and compare them with the
    store's."""
    from rocketlake.jobs.rebuild import rebuild as rebuild_store

    clear(out)
    mark(out)
    rebuild_store(spark, store, cfg, output=out)
    same = {name: same_files(store / name, out / name) for name in ("consumequeue", "index")}
    if not all(same.values()):
        raise StageFailed(f"rebuilt files differ from the store's: {same}")
    files = sum(1 for p in out.rglob("*") if p.is_file())
    return data_bytes(store, settings), (f"{files} ConsumeQueue and index files rebuilt on Spark, "
                                         "byte-identical")


def publish(store: Path, lake: str, cfg: StoreConfig, name: str) -> tuple[int, str]:
    from rocketlake.jobs.publish_offsets import publish_store

    publish_store(store, cfg, lake, name)
    return 0, (f"Delta table under {lake}/: offsets_history (every snapshot; the current "
               f"offsets are the newest)")


def compact(store: Path, lake: str, cfg: StoreConfig, name: str) -> tuple[int, str]:
    from rocketlake.jobs.compact import maintain

    maintain(store, cfg, lake, name, protect_unconsumed=True)
    return 0, "expiry (with the unconsumed guard), archive and key compaction done"


def report(store: Path, lake: str, out: Path, settings: dict, name: str) -> tuple[int, str]:
    from rocketlake.jobs.cli.report import write_report

    write_report(store, lake, out, settings, name)
    return 0, f"{out}"


def summary(store: Path, settings: dict) -> Table:
    with MessageStore(store, read_only=True, **settings) as ms:
        t = Table(title=f"store {store}: {ms.commitlog.max_offset - ms.commitlog.min_offset:,} "
                        f"CommitLog bytes")
        for col in ("topic", "queues", "messages", "groups (lag)"):
            t.add_column(col, justify="left" if col == "topic" else "right")
        lag: dict[str, list[str]] = {}
        table = ms.queue_ranges()
        rows = consumer_lag({k: hi for k, (_, hi) in table.items()}, ms.consumer_offsets())
        for (group, topic), behind in sorted(lag_totals(rows).items()):
            lag.setdefault(topic, []).append(f"{group} ({behind:,})")
        for topic in sorted({t for t, _ in table}):
            qs = [(lo, hi) for (t, _), (lo, hi) in table.items() if t == topic]
            t.add_row(topic, str(len(qs)), f"{sum(hi - lo for lo, hi in qs):,}",
                      Text(printable(", ".join(lag.get(topic, [])))))  # group names are data
    return t


def run(a: argparse.Namespace) -> int:
    """``rocketlake pipeline`` (options in :mod:`rocketlake.jobs.cli`)."""
    settings = parse_set_options(a.set)
    cfg = load_config(settings)  # unknown names fail here, before anything is written
    work, page = a.store.parent / f"{a.store.name}-rebuild", a.store.parent / "report.html"
    # before anything is written or a Spark session starts
    check_ours(work, "rebuild directory")
    check_report(page)
    name = lake_store_name(a.store, a.store_name or (None if a.skip_ingest else SAMPLE_NAME))
    if not a.skip_ingest:
        check_ours(a.store, "sample store")
        lake = sample_lake(a.lake)
        check_ours(lake, "sample lake")
        if not a.keep:
            clear(a.store)
            clear(lake)
        mark(lake)
    from rocketlake.jobs.spark_session import build_session

    run = Run()
    try:
        if not a.skip_ingest:
            run.timed("ingest", lambda: ingest(a.store, a.messages, settings))
        run.timed("verify", lambda: check(a.store, settings))
        spark = build_session("rocketlake-pipeline", master=a.master)  # the jobs below share it
        run.timed("rebuild (Spark)", lambda: rebuild(spark, a.store, work, cfg, settings))
        run.timed("publish offsets (Delta)", lambda: publish(a.store, a.lake, cfg, name))
        run.timed("compact", lambda: compact(a.store, a.lake, cfg, name))
        run.timed("report", lambda: report(a.store, a.lake, page, settings, name))
        ok = True
    except StageFailed as e:
        _out.print(f"[red]pipeline stopped: {e}[/red]")
        ok = False
    _out.print(summary(a.store, settings))
    t = Table(title="stages")
    for col in ("stage", "seconds", "MB/s", "result"):
        t.add_column(col)
    for s in run.stages:
        rate = f"{s.bytes / s.seconds / 1e6:.1f}" if s.bytes and s.seconds else ""
        t.add_row(s.name, f"{s.seconds:.1f}", rate, s.detail)
    _out.print(t)
    return ExitCode.OK if ok else ExitCode.PROBLEMS


def main(argv: list[str] | None = None) -> int:
    """``rocketlake pipeline [options]``; returns the exit code."""
    return cli.main(["pipeline", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
