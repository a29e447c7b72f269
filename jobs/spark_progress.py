"""A progress bar for long Spark actions, fed by Spark's status tracker.

Spark's own console progress bar is off (``spark.ui.showConsoleProgress=false``): it writes
through log4j and garbles the jobs' output. Instead :func:`spark_progress` polls
``SparkContext.statusTracker()`` from a daemon thread and shows one rich bar on stderr: the
tasks done / total of every stage seen running while the block runs. Only on a terminal; when
stderr is a log file or a pipe it prints nothing, so logs stay quiet.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

#: Seconds between two polls of the status tracker.
POLL_SECONDS = 0.5


@contextmanager
def spark_progress(spark: SparkSession, label: str, console: Console | None = None,
                   interval: float = POLL_SECONDS) -> Iterator[None]:
    """Show the progress of the Spark stages that run inside the block, labelled ``label``.

    ``console`` is where the bar goes (default: stderr); nothing is shown unless it is a terminal.
    The poller never raises (a failed poll ends the bar quietly) and is joined on exit, after a
    last poll so the bar ends on the final counts.
    """
    console = console or Console(stderr=True)
    if not console.is_terminal:
        yield
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("tasks"), TimeElapsedColumn())
    stop = threading.Event()
    with Progress(*columns, console=console) as bar:
        task = bar.add_task(label, total=None)
        poller = threading.Thread(target=_poll, args=(spark, bar, task, stop, interval),
                                  name=f"spark-progress-{label}", daemon=True)
        poller.start()
        try:
            yield
        finally:
            stop.set()
            poller.join()


def _poll(spark: SparkSession, bar: Progress, task: TaskID, stop: threading.Event,
          interval: float) -> None:
    """Until ``stop`` is set (then once more): add the active stages to those seen and show the
    sum of their tasks done / total on ``bar``."""
    try:
        tracker = spark.sparkContext.statusTracker()
        seen: dict[int, tuple[int, int]] = {}  # stage id -> (tasks done, tasks)
        while True:
            stopping = stop.wait(interval)
            for stage in [*seen, *tracker.getActiveStageIds()]:
                info = tracker.getStageInfo(stage)
                if info is not None:
                    seen[stage] = (info.numCompletedTasks, info.numTasks)
            if seen:
                bar.update(task, completed=sum(d for d, _ in seen.values()),
                           total=sum(n for _, n in seen.values()))
            if stopping:
                return
    except Exception:  # noqa: BLE001 - the bar is a courtesy: it must never fail the job
        return
