"""Fixed costs: `publish-offsets` and `rocketlake pipeline` against an empty PySpark application
started the same way (issue 15).

    .venv/bin/python benchmarks/bench_fixed_cost.py [--runs 2] [--dir var/bench-fixed-cost]

- ``spark-submit $(delta_submit_args) jobs/publish_offsets.py`` on the sample store (the
  pipeline's 50,000 sample events, ingested once) into a new lake, against ``spark-submit
  $(delta_submit_args)`` of an application that only starts and stops a session;
- ``rocketlake pipeline`` on its defaults (a new store and lake directory) against a Python
  process that builds the same Delta session (``build_session``) and stops it.

Wall times, best of ``--runs``; prints a Markdown table, ready for benchmarks/RESULTS.md.
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
EMPTY_SESSION = ("from rocketlake.jobs.spark_session import build_session\n"
                 "build_session('empty').stop()\n")


def wall(cmd: list[str], env: dict[str, str] | None = None) -> float:
    """Seconds one command takes (AssertionError when it fails)."""
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise AssertionError(f"{cmd} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return time.perf_counter() - t


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
        t_empty_submit = min(wall([*submit, str(work / "empty_submit.py")], env) for _ in range(a.runs))
        t_empty_session = min(wall([py, str(work / "empty_session.py")], env) for _ in range(a.runs))
        publish = []
        for i in range(a.runs):
            publish.append(wall([*submit, str(ROOT / "jobs" / "publish_offsets.py"), "--store",
                                 str(store), "--lake", str(work / f"lake-{i}"), "--store-name",
                                 "bench"], env))
        runs = []
        for i in range(a.runs):
            base = work / f"pipeline-{i}"
            runs.append(wall([str(Path(py).parent / "rocketlake"), "pipeline", "--store",
                              str(base / "store"), "--lake", str(base / "lake")], env))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| what | seconds | vs the empty application |\n|---|---:|---:|")
    print(f"| empty app, spark-submit with the Delta jars | {t_empty_submit:.2f} | 1.00 |")
    print(f"| publish-offsets, sample store, new lake (spark-submit) | {min(publish):.2f} | "
          f"{min(publish) / t_empty_submit:.2f}x (target <= 1.5x) |")
    print(f"| empty app, Python building the Delta session | {t_empty_session:.2f} | 1.00 |")
    print(f"| `rocketlake pipeline` on its defaults | {min(runs):.2f} | "
          f"{min(runs) / t_empty_session:.2f}x (target <= 3x) |")


if __name__ == "__main__":
    main()
