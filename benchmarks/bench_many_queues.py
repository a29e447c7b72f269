"""Benchmark: the commands on a store of many small queues (issue 27, "Scale in queues").

    .venv/bin/python -m benchmarks.bench_many_queues [--topics 10000] [--queues 10]
        [--per-queue 3] [--cq-file 600] [--runs 2] [--only verify,lag]
        [--dir var/bench/many_queues]

Writes (once, reused when present) a store of ``--topics`` x ``--queues`` queues of
``--per-queue`` messages each with the independent writer of
`tests/reliability/test_many_queues.py` (ConsumeQueue files of ``--cq-file`` bytes, sparse; a
1 GiB CommitLog file), plus a `config/consumerOffset.json` in which one group committed
offset 1 on every queue (so ``lag`` has a row per queue). A rebuild reserves the space of
every file it writes: files of the default 6,000,000 bytes would need 600 GB for 100,000
queues (the rebuilds are skipped when the disk lacks the room). Then times each command in a
new process under ``ulimit -n 1024`` (wall and CPU seconds of the process), ``--runs`` times
each:

- ``open after a crash``: a writer open with `abort` present (abnormal recovery), then close;
- ``verify --json``, ``topic-status --json``, ``lag --json``;
- ``single-process rebuild``: ``store.single_process_rebuild.rebuild`` into a new directory;
- ``rocketlake rebuild --output``: the Spark rebuild of both structures (session start included);
- ``empty Spark application``: a session built as ``rebuild`` builds it (no Delta), then
  stopped: the floor under the Spark rebuild's time on this machine.

Each rebuild run writes into a new directory, and all are removed at the end: deleting the
previous run's 200,000 files and directories just before a run made creating the next ones
several times slower (the file system's inode allocation after a large delete: a bare loop
making 100,000 queue directories and files took 2.3 s in a fresh area, 9.3 s right after
deleting a tree of that size).

Prints a Markdown table, ready for benchmarks/RESULTS.md.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rocketlake.store.config_files import write_consumer_offsets
from tests.reliability.test_many_queues import _topic, _write_store

ROOT = Path(__file__).resolve().parent.parent
DESCRIPTORS = 1024
GROUP = "bench"


def make_store(root: Path, topics: int, queues: int, per_queue: int, cq_file: int) -> float:
    """Seconds to write the store at ``root`` (0 when it is already there, complete)."""
    marker = root.parent / f"{root.name}.complete"
    if marker.exists():
        return 0.0
    shutil.rmtree(root, ignore_errors=True)
    t = time.perf_counter()
    _write_store(root, topics, queues, per_queue, cq_file)
    write_consumer_offsets(root, {(_topic(i), GROUP): dict.fromkeys(range(queues), 1)
                                  for i in range(topics)})
    marker.write_text("")
    return time.perf_counter() - t


def _few_descriptors() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (DESCRIPTORS, hard))


def timed(args: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one process running ``args`` from the repository root; it must
    exit 0 (lag and verify: 0, the store is healthy)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, preexec_fn=_few_descriptors)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {p.returncode}: {p.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def commands(store: Path, out: Path, cq_file: int,
             moved: list[Path]) -> dict[str, tuple[list[str], Callable[[], None]]]:
    """name -> (argv, what to do before each run); the writers (the open, the rebuilds) are
    given the ConsumeQueue file size. A rebuild writes into ``out``, which the step before each
    run moves aside (to a new name added to ``moved``, for the caller to remove) rather than
    deleting it."""
    py, cli = sys.executable, [sys.executable, "-m", "rocketlake.jobs.cli"]
    setting = f"mappedFileSizeConsumeQueue={cq_file}"

    def crash() -> None:
        (store / "abort").touch()

    def fresh_out() -> None:
        if out.exists():
            moved.append(out.with_name(f"{out.name}.{len(moved) + 1}"))
            out.rename(moved[-1])

    def nothing() -> None:
        pass
    return {
        "open after a crash": ([py, "-c", "import sys; from rocketlake.store import MessageStore; "
                                "MessageStore(sys.argv[1], mappedFileSizeConsumeQueue=int(sys.argv[2]))"
                                ".close()", str(store), str(cq_file)], crash),
        "verify": ([*cli, "verify", "--store", str(store), "--json"], nothing),
        "topic-status": ([*cli, "topic-status", "--store", str(store), "--json"], nothing),
        "lag": ([*cli, "lag", "--store", str(store), "--json"], nothing),
        "single-process rebuild": ([py, "-c", "import sys; from rocketlake.store.single_process_rebuild "
                                    "import rebuild; rebuild(sys.argv[1], sys.argv[2], "
                                    "mappedFileSizeConsumeQueue=int(sys.argv[3]))",
                                    str(store), str(out), str(cq_file)], fresh_out),
        "Spark rebuild": ([*cli, "rebuild", "--store", str(store), "--output", str(out),
                           "--set", setting], fresh_out),
        "empty Spark application": ([py, "-c", "from rocketlake.jobs.spark_session import "
                                     "build_session; build_session('empty', delta=False).stop()"],
                                    nothing),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--topics", type=int, default=10000)
    p.add_argument("--queues", type=int, default=10)
    p.add_argument("--per-queue", type=int, default=3)
    p.add_argument("--cq-file", type=int, default=600,
                   help="ConsumeQueue file size in bytes (a rebuild allocates one per queue)")
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--only", help="comma-separated command names (default: all)")
    p.add_argument("--dir", type=Path, default=ROOT / "var" / "bench" / "many_queues")
    args = p.parse_args(argv)
    name = f"store-{args.topics}x{args.queues}x{args.per_queue}-cq{args.cq_file}"
    store, out = args.dir / name, args.dir / "out"
    t_make = make_store(store, args.topics, args.queues, args.per_queue, args.cq_file)
    code = subprocess.run([sys.executable, "-c", "import rocketlake.store as s; print(s.__file__)"],
                          cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    print(f"code: {code}")
    print(f"store: {args.topics * args.queues:,} queues, {args.per_queue} messages each, "
          f"ConsumeQueue files of {args.cq_file:,} bytes ({t_make:.1f} s to write, 0: reused); "
          f"ulimit -n {DESCRIPTORS}; load average {os.getloadavg()[0]:.1f}", flush=True)
    moved: list[Path] = []
    todo = commands(store, out, args.cq_file, moved)
    wanted = args.only.split(",") if args.only else list(todo)
    need = args.topics * args.queues * args.cq_file * 2 * args.runs  # the rebuilds' files, kept
    free = shutil.disk_usage(args.dir).free
    if need > free:  # a rebuild reserves every file's space (posix_fallocate)
        for what in ("single-process rebuild", "Spark rebuild"):
            if what in wanted:
                wanted.remove(what)
                print(f"{what}: skipped, its ConsumeQueue files need {need / 1e9:.0f} GB, "
                      f"{free / 1e9:.0f} GB free")
    print("\n| command | " + " | ".join(f"run {i + 1}: wall s (CPU s)" for i in range(args.runs)) + " |")
    print("|---|" + "---:|" * args.runs, flush=True)
    try:
        for what in wanted:
            argv_, before = todo[what]
            cells = []
            for _ in range(args.runs):
                before()
                wall, cpu = timed(argv_)
                cells.append(f"{wall:.2f} ({cpu:.2f})")
            print(f"| {what} | " + " | ".join(cells) + " |", flush=True)
    finally:
        for d in (out, *moved):
            shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
