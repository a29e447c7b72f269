"""`rocketlake pipeline`: the main job on embedded defaults.

Ingests a realistic sample into a local store (default `var/store`), records consumer progress,
reads everything back, and prints a summary table. Each stage is timed.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.table import Table

from jobs import sample
from jobs.store_commands import event_to_message
from store import MessageStore
from store.config import parse_set_options

PROJECT = Path(__file__).resolve().parent.parent
DEFAULT_STORE = PROJECT / "var" / "store"
DEFAULT_LAKE = PROJECT / "var" / "lake"
_out = Console()


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


def ingest(store: Path, n: int, settings: dict) -> tuple[int, str]:
    """Write ``n`` sample events and the sample consumer groups' offsets."""
    msgs = [event_to_message(ev) for ev in sample.events(n)]
    with MessageStore(store, **settings) as ms:
        total = 0
        for i in range(0, len(msgs), 1000):
            total += sum(r.size for r in ms.put_batch(msgs[i:i + 1000]))
        highs = {k: hi for k, (_, hi) in ms.queue_offsets().items()}
        for (topic, group), offsets in sample.consumer_progress(highs).items():
            ms.commit_offsets(group, topic, offsets)
    return total, f"{n} messages"


def summarize(store: Path, settings: dict) -> Table:
    with MessageStore(store, read_only=True, **settings) as ms:
        t = Table(title=f"store {store.name}: {ms.commitlog.max_offset:,} CommitLog bytes")
        for col in ("topic", "queues", "messages", "groups (lag)"):
            t.add_column(col, justify="right" if col != "topic" else "left")
        lag: dict[str, list[str]] = {}
        for (topic, group), offs in sorted(ms.consumer_offsets().items()):
            behind = sum(max(0, ms.max_offset(topic, q) - o) for q, o in offs.items())
            lag.setdefault(topic, []).append(f"{group} ({behind})")
        table = ms.queue_offsets()
        for topic in sorted({t for t, _ in table}):
            qs = [(lo, hi) for (t, _), (lo, hi) in table.items() if t == topic]
            count = sum(hi - lo for lo, hi in qs)
            t.add_row(topic, str(len(qs)), f"{count:,}", ", ".join(lag.get(topic, [])))
    return t


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="rocketlake pipeline", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__,
        epilog="examples:\n  rocketlake pipeline\n  rocketlake pipeline --messages 100000 --fresh\n"
               "  rocketlake pipeline --store /data/rocketmq/store --set mappedFileSizeCommitLog=1073741824")
    p.add_argument("--store", type=Path, default=DEFAULT_STORE, help="store root (default var/store)")
    p.add_argument("--lake", type=Path, default=DEFAULT_LAKE, help="Delta lake root (default var/lake)")
    p.add_argument("--messages", type=int, default=20000, help="sample events to ingest")
    p.add_argument("--fresh", action="store_true", help="delete the store first")
    p.add_argument("--set", action="append", metavar="NAME=VALUE", help="store setting override")
    a = p.parse_args(argv)
    settings = parse_set_options(a.set)
    if a.fresh and a.store.exists():
        shutil.rmtree(a.store)
    run = Run()
    run.timed("ingest sample", lambda: ingest(a.store, a.messages, settings))
    _out.print(summarize(a.store, settings))
    t = Table(title="stages")
    for col in ("stage", "seconds", "MB/s", "detail"):
        t.add_column(col)
    for s in run.stages:
        mbps = f"{s.bytes / s.seconds / 1e6:.1f}" if s.bytes and s.seconds else ""
        t.add_row(s.name, f"{s.seconds:.2f}", mbps, s.detail)
    _out.print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
