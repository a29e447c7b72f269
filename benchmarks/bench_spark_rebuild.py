"""The Spark rebuild (`jobs/rebuild.py`) side by side with RocketMQ 4.9.8's rebuild on open (issue 15).

    .venv/bin/python benchmarks/bench_spark_rebuild.py [--messages 3000000] [--small 1000]
        [--dir var/bench-spark-rebuild] [--keep]

RocketMQ's store (the peer of `benchmarks/bench_vs_rocketmq.py`) writes two stores, ``--messages``
and ``--small`` messages of 100 B (8 queues, a tag and a key each, RocketMQ's default file sizes).
Then, in one run:

- RocketMQ's rebuild on open: a copy of the big store without consumequeue/, index/ and
  checkpoint, opened until every record is dispatched (timed inside its JVM);
- ``spark-submit jobs/rebuild.py --output`` on both stores, on ``local[2]`` and ``local[1]``
  (wall time of the whole spark-submit, best of ``--runs``). The Spark side's figure is the
  marginal time: big store minus small store, so that neither side counts its JVM start;
- an empty PySpark application submitted the same way (the fixed cost every job pays);
- the rebuilt files are compared with RocketMQ's: ConsumeQueues byte for byte, index files by
  content in order (RocketMQ names them by wall clock).

Prints a Markdown table, ready for benchmarks/RESULTS.md.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_vs_rocketmq import ROOT, copy_store, peer_sizes, rocketmq_peer, timed

from rocketlake.store.config import load_config

EMPTY_APP = "from pyspark.sql import SparkSession\nSparkSession.builder.getOrCreate().stop()\n"


def submit(master: str, *args: str) -> float:
    """Wall seconds of one ``spark-submit --master MASTER ARGS`` (AssertionError when it fails)."""
    spark_submit = Path(sys.executable).parent / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    t, proc = timed(lambda: subprocess.run([str(spark_submit), "--master", master, *args], env=env,
                                           cwd=ROOT, capture_output=True, text=True))
    if proc.returncode != 0:
        raise AssertionError(f"spark-submit {args} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return t


def files_bytes(root: Path) -> list[tuple[str, bytes]]:
    return [(str(p.relative_to(root)), p.read_bytes()) for p in sorted(root.rglob("*")) if p.is_file()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=3_000_000)
    ap.add_argument("--small", type=int, default=1_000)
    ap.add_argument("--dir", type=Path, default=ROOT / "var" / "bench-spark-rebuild")
    ap.add_argument("--runs", type=int, default=3, help="spark-submits per case, best taken")
    ap.add_argument("--keep", action="store_true", help="keep the run's directory")
    a = ap.parse_args()
    cfg = load_config()
    sizes = peer_sizes(cfg)
    a.dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="run-", dir=a.dir))
    try:
        stores = {}
        for name, n in (("big", a.messages), ("small", a.small)):
            stores[name] = work / f"{name}-store"
            rocketmq_peer.run("write", stores[name], n, 8, 100, *sizes, timeout=7200)
        theirs = copy_store(stores["big"], work / "bare-rmq")
        for name in ("consumequeue", "index"):
            shutil.rmtree(theirs / name)
        (theirs / "checkpoint").unlink()
        rmq = rocketmq_peer.run("recover", theirs, *sizes, timeout=7200)["seconds"]

        empty = work / "empty_app.py"
        empty.write_text(EMPTY_APP)
        job = str(ROOT / "jobs" / "rebuild.py")
        wall: dict[tuple[str, str], float] = {}
        for master in ("local[2]", "local[1]"):
            for name in ("small", "big"):
                out = work / f"out-{name}-{master[6]}"
                times = []
                for _ in range(a.runs):
                    shutil.rmtree(out, ignore_errors=True)
                    times.append(submit(master, job, "--store", str(stores[name]), "--output", str(out)))
                wall[master, name] = min(times)
        t_empty = min(submit("local[2]", str(empty)) for _ in range(a.runs))
        out = work / "out-big-2"
        assert files_bytes(out / "consumequeue") == files_bytes(theirs / "consumequeue"), \
            "ConsumeQueues differ from RocketMQ's"
        assert [b for _, b in files_bytes(out / "index")] == [b for _, b in files_bytes(theirs / "index")], \
            "index files differ from RocketMQ's"
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    marginal = {m: wall[m, "big"] - wall[m, "small"] for m in ("local[2]", "local[1]")}
    print(f"{a.messages:,} messages of 100 B written by RocketMQ 4.9.8, 8 queues, one key each; "
          f"marginal = big store minus {a.small:,}-message store\n")
    print("| what | seconds | ratio | note |\n|---|---:|---:|---|")
    print(f"| RocketMQ rebuild on open | {rmq:.2f} | | open without consumequeue/, index/, checkpoint |")
    for m in ("local[2]", "local[1]"):
        print(f"| spark-submit jobs/rebuild.py, {m}, marginal | {marginal[m]:.2f} | "
              f"{rmq / marginal[m]:.2f}x RocketMQ | {wall[m, 'big']:.2f} s - {wall[m, 'small']:.2f} s |")
    scaling = marginal["local[1]"] / marginal["local[2]"]
    print(f"| scaling local[1] / local[2] (marginal) | | {scaling:.2f}x | |")
    print(f"| empty PySpark app, local[2] | {t_empty:.2f} | | the small-store rebuild is "
          f"{wall['local[2]', 'small'] / t_empty:.2f}x it |")
    print("\nrebuilt ConsumeQueues byte-identical to RocketMQ's; index files identical in content and order")


if __name__ == "__main__":
    main()
