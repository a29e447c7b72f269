"""Where a Spark rebuild's time goes: `rocketlake rebuild` run in this process with its driver
phases timed.

    .venv/bin/python -m benchmarks.bench_rebuild_phases rebuild --store DIR --output DIR [...]

Runs the CLI with the given arguments; the session start, each Spark job (the ``spark_progress``
blocks: ``scan``, ``write``) and the driver's planning steps are wrapped with wall and CPU timers
(CPU of this process), and at exit the CPU of the JVM and the Python workers (this process's
descendants, read from ``/proc``, Linux only) is added up. Prints the table on stderr.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from rocketlake.jobs import rebuild as rb
from rocketlake.jobs import spark_session
from rocketlake.jobs.cli import main as cli_main
from rocketlake.transforms import store_rebuild as sr

ROWS: list[tuple[str, float, float]] = []


def _timed(name: str, f: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return f(*args, **kwargs)
        finally:
            ROWS.append((name, time.perf_counter() - wall, time.process_time() - cpu))
    return wrapper


def descendants_cpu() -> float:
    """CPU seconds (user + system, with their reaped children) of this process's descendants."""
    children: dict[int, list[tuple[int, list[str]]]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append((int(name), fields))
    total, todo = 0, [os.getpid()]
    while todo:
        for pid, fields in children.get(todo.pop(), []):
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
            todo.append(pid)
    return total / os.sysconf("SC_CLK_TCK")


def _show(start: float) -> None:
    ROWS.append(("JVM and Python workers (CPU)", 0.0, descendants_cpu()))
    ROWS.append(("total, this process", time.perf_counter() - start, time.process_time()))
    for name, wall, cpu in ROWS:
        print(f"{name:30s} {wall:7.2f} s wall {cpu:7.2f} s CPU", file=sys.stderr)


def main() -> None:
    start = time.perf_counter()
    for name in ("walk_parts", "valid_parts", "plan_queues", "plan_index", "create_index_files",
                 "finish_index_files", "remove_staging"):
        setattr(sr, name, _timed(name, getattr(sr, name)))
    for name in ("declare_topics", "report"):
        setattr(rb, name, _timed(name, getattr(rb, name)))
    spark_session.build_session = _timed("session start", spark_session.build_session)
    progress = rb.spark_progress

    @contextlib.contextmanager
    def job(spark: Any, label: str, *args: Any, **kwargs: Any) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.process_time()
        with progress(spark, label, *args, **kwargs):
            yield
        ROWS.append((f"Spark job {label}", time.perf_counter() - wall, time.process_time() - cpu))
    rb.spark_progress = job
    atexit.register(_show, start)
    sys.exit(cli_main(sys.argv[1:]))


if __name__ == "__main__":
    main()
