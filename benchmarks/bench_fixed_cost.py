"""Fixed costs: `publish-offsets`, `rocketlake report --lake` and `rocketlake pipeline` against an
empty PySpark application started the same way (issues 15 and 27).

    .venv/bin/python benchmarks/bench_fixed_cost.py [--runs 2] [--dir var/bench-fixed-cost]

- ``spark-submit $(delta_submit_args) jobs/publish_offsets.py`` on the sample store (the
  pipeline's 50,000 sample events, ingested once) into a new lake, against ``spark-submit
  $(delta_submit_args)`` of an application that only starts and stops a session;
- ``rocketlake report --lake`` of the sample store and the lake the first of those runs wrote,
  against a Python process that builds the same Delta session (``build_session``) and stops it;
- ``rocketlake pipeline`` on its defaults (a new store and lake directory) against that Python
  process too.

Wall and CPU seconds of the run with the best wall time of ``--runs``; prints a Markdown table,
ready for benchmarks/RESULTS.md.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rocketlake.jobs.cli import pipeline
from rocketlake.jobs.spark_session import delta_submit_args

ROOT = Path(__file__).resolve().parent.parent
EMPTY_SUBMIT = "from pyspark.sql import SparkSession\nSparkSession.builder.getOrCreate().stop()\n"
TICK = os.sysconf("SC_CLK_TCK")
SAMPLE = 0.1
EMPTY_SESSION = ("from rocketlake.jobs.spark_session import build_session\n"
                 "build_session('empty').stop()\n")


def _tree_cpu(root: int) -> dict[int, float]:
    """CPU seconds so far of process ``root`` and each of its descendants (Linux ``/proc``)."""
    stats: dict[int, tuple[int, float]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK)
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, (parent, _) in stats.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return {pid: stats[pid][1] for pid in tree if pid in stats}


def wall(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds) one command takes (AssertionError when it fails). The CPU is
    its processes' (the command and every descendant: the JVM, Python workers), sampled every
    :data:`SAMPLE` seconds, so the last fraction of a sample of each process is not counted."""
    with tempfile.TemporaryFile("w+") as err:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
        seen: dict[int, float] = {}
        while proc.poll() is None:
            seen.update(_tree_cpu(proc.pid))
            time.sleep(SAMPLE)
        took = time.perf_counter() - t
        if proc.returncode != 0:
            err.seek(0)
            raise AssertionError(f"{cmd} failed ({proc.returncode}):\n{err.read()[-3000:]}")
    return took, sum(seen.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--dir", type=Path, default=ROOT / "var" / "bench-fixed-cost")
    a = ap.parse_args()
    a.dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="run-", dir=a.dir))
    py = sys.executable
    env = {**os.environ, "PYSPARK_PYTHON": py, "PYSPARK_DRIVER_PYTHON": py}
    submit = [str(Path(py).parent / "spark-submit"), *delta_submit_args()]
    try:
        store = work / "sample-store"
        pipeline.ingest(store, 50_000, {})
        (work / "empty_submit.py").write_text(EMPTY_SUBMIT)
        (work / "empty_session.py").write_text(EMPTY_SESSION)
        submits = [wall([*submit, str(work / "empty_submit.py")], env) for _ in range(a.runs)]
        sessions = [wall([py, str(work / "empty_session.py")], env) for _ in range(a.runs)]
        publish = []
        for i in range(a.runs):
            publish.append(wall([*submit, str(ROOT / "jobs" / "publish_offsets.py"), "--store",
                                 str(store), "--lake", str(work / f"lake-{i}"), "--store-name",
                                 "bench"], env))
        rocketlake = str(Path(py).parent / "rocketlake")
        reports = [wall([rocketlake, "report", "--store", str(store), "--lake", str(work / "lake-0"),
                         "--store-name", "bench", "--out", str(work / "report.html")], env)
                   for _ in range(a.runs)]
        runs = []
        for i in range(a.runs):
            base = work / f"pipeline-{i}"
            runs.append(wall([rocketlake, "pipeline", "--store",
                              str(base / "store"), "--lake", str(base / "lake")], env))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    def row(what: str, times: list[tuple[float, float]], empty: tuple[float, float],
            target: str = "") -> str:
        (w, c), (ew, ec) = min(times), empty
        return (f"| {what} | {w:.2f} | {c:.2f} | {w / ew:.2f}x{target} | {c / ec:.2f}x |"
                if target else f"| {what} | {w:.2f} | {c:.2f} | 1.00 | 1.00 |")
    empty_submit, empty_session = min(submits), min(sessions)
    print("| what | wall s | CPU s | wall vs the empty app | CPU vs the empty app |\n"
          "|---|---:|---:|---:|---:|")
    print(row("empty app, spark-submit with the Delta jars", submits, empty_submit))
    print(row("publish-offsets, sample store, new lake (spark-submit)", publish, empty_submit,
              " (target <= 1.5x)"))
    print(row("empty app, Python building the Delta session", sessions, empty_session))
    print(row("`rocketlake report --lake`, sample store and its lake", reports, empty_session,
              " (target <= 1.5x)"))
    print(row("`rocketlake pipeline` on its defaults", runs, empty_session, " (target <= 3x)"))

if __name__ == "__main__":
    main()
