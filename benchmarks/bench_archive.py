"""The continuous archive (``rocketlake archive``, issue 24): throughput against RocketMQ 4.9.8's
own write rate, and end-to-end latency from ``put`` to a row visible in Delta.

    .venv/bin/python benchmarks/bench_archive.py [--messages 3000000] [--latency-seconds 60]
        [--warmup-seconds 90] [--rate 10000] [--master local[2]] [--dir var/bench-archive] [--keep]

Needs a JDK and Maven (RocketMQ's ``DefaultMessageStore`` in a JVM through the test peer,
``tests/rocketmq_peer.py``). Everything is written under a new directory in ``--dir``. In one run:

1. Throughput. The peer's ``write`` mode writes ``--messages`` messages (topic BenchTopic, queue
   i % 8, tag TagA, key ``k<i>``, 100-byte body; the file sizes of ``conf/store.conf``), timed
   inside the JVM. Then that same store is archived into a fresh lake by the archive job in this
   process (``archive_stream(..., every="available-now")``, the session started before the clock,
   as the JVM start is not counted on RocketMQ's side). A StreamingQueryListener collects each
   batch's ``durationMs``: ``latestOffset`` (the source's walk on the driver), ``addBatch`` (the
   tasks: source read + Parquet + Delta commit), the rest (planning, offset log, commit log).
   A batch read of the same columns into Spark's ``noop`` sink separates the read from the write.
2. Latency. A writer process (this script, ``--writer``) appends ``--rate`` messages/s in batches
   every 10 ms to a new store with the library's ``put_batch``, each body carrying its put time
   (``t<epoch microseconds>``); ``archive_stream(..., every="1 second")`` archives it to Delta.
   A row is visible when the Delta commit of its batch is: the commit time from the table's
   history (``timestamp`` of the version whose ``epochId`` is the batch id), the batch's rows by
   its offset range (the listener's start/end offsets). p50/p99/max of visible - put over the
   rows put in ``--latency-seconds`` after ``--warmup-seconds``.

Prints Markdown tables, ready for benchmarks/RESULTS.md, with the load average (``os.getloadavg``)
at each measurement.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from rocketlake.store import Message, MessageStore
from rocketlake.store.config import StoreConfig, load_config

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import rocketmq_peer  # noqa: E402  (tests/ holds the peer's driver)
from bench_vs_rocketmq import peer_sizes  # noqa: E402

TOPIC, TAG = "BenchTopic", "TagA"


def load() -> str:
    """The 1-minute load average, for the record."""
    return f"{os.getloadavg()[0]:.2f}"


class Batches(StreamingQueryListener):
    """Every progress event's batch id, rows, offset range and durations; when the last query
    started and ended (``time.perf_counter``)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.started = self.terminated = 0.0

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 (Spark's names)
        self.started = time.perf_counter()

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        p = event.progress
        src = p.sources[0]
        self.rows.append({"batch": p.batchId, "rows": p.numInputRows, "ms": dict(p.durationMs),
                          "start": _offset(src.startOffset), "end": _offset(src.endOffset)})

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        self.terminated = time.perf_counter()


def _offset(text: str | None) -> int | None:
    """A progress event's offset JSON as the CommitLog offset; None for none (the first batch's
    start comes as the string ``None``)."""
    return None if text in (None, "", "null", "None") else int(json.loads(text)["commitlogOffset"])


def session(master: str) -> tuple[SparkSession, Batches]:
    """The archive job's session (``build_session`` gets this one), with the listener added."""
    from rocketlake.jobs.spark_session import build_session
    spark = build_session("rocketlake-archive", master=master)
    listener = Batches()
    spark.streams.addListener(listener)
    return spark, listener


# --- 1. throughput ----------------------------------------------------------------------------------
def bench_throughput(work: Path, a: argparse.Namespace, cfg: StoreConfig, spark: SparkSession,
                     batches: Batches) -> list[str]:
    from rocketlake.jobs.archive_stream import archive_stream
    from rocketlake.transforms.archive import SOURCE_COLUMNS
    store = work / "store"
    load_before = load()
    rmq = rocketmq_peer.run("write", store, a.messages, a.queues, a.body, *peer_sizes(cfg),
                            timeout=7200)
    load_rmq = load()
    nbytes, n = rmq["max_phy_offset"], a.messages
    t = time.perf_counter()
    summary = archive_stream(store, cfg, (work / "lake").as_uri(), "bench", master=a.master)
    t_end = time.perf_counter()
    t_archive = t_end - t
    phases = (batches.started - t, batches.terminated - batches.started, t_end - batches.terminated)
    load_archive = load()
    if summary["rows"] != n or summary["offset"]["commitlogOffset"] != nbytes:
        raise AssertionError(f"archive: {summary} for {n} records ending at {nbytes}")
    stream = [b for b in batches.rows if b["rows"]]
    ms = {k: sum(b["ms"].get(k, 0) for b in stream) / 1000
          for k in ("triggerExecution", "latestOffset", "addBatch", "queryPlanning", "walCommit",
                    "commitOffsets")}
    t = time.perf_counter()
    (spark.read.format("rocketmq").option("columns", ",".join(SOURCE_COLUMNS)).load(str(store))
     .write.format("noop").mode("overwrite").save())
    t_read = time.perf_counter() - t
    batches.rows.clear()

    def rate(s: float) -> str:
        return f"{n / s:,.0f} msg/s, {nbytes / s / 1e6:,.1f} MB/s"

    rest = ms["triggerExecution"] - ms["latestOffset"] - ms["addBatch"]
    return [
        f"{n:,} messages of {a.body} B, {a.queues} queues, {nbytes / 1e6:,.0f} MB of records; "
        f"{a.master}; load average before {load_before}\n",
        "| measurement | seconds | rate | load after |",
        "|---|---:|---|---:|",
        f"| RocketMQ 4.9.8 write (putMessage until dispatched, in the JVM) | {rmq['seconds']:.2f} | "
        f"{rate(rmq['seconds'])} | {load_rmq} |",
        f"| `archive --trigger available-now`, whole call (session already up) | {t_archive:.2f} | "
        f"{rate(t_archive)} | {load_archive} |",
        f"| - before the query starts (checkpoint/archive look-ups, table create) | {phases[0]:.2f} "
        f"| | |",
        f"| - query start to end | {phases[1]:.2f} | | |",
        f"| - after the query (run log row) | {phases[2]:.2f} | | |",
        f"| of which the stream's batches ({len(stream)}; triggerExecution) | "
        f"{ms['triggerExecution']:.2f} | {rate(ms['triggerExecution'])} | |",
        f"| - latestOffset (source's walk on the driver) | {ms['latestOffset']:.2f} | | |",
        f"| - addBatch (tasks: read + Parquet + Delta commit) | {ms['addBatch']:.2f} | | |",
        f"| - the rest (planning {ms['queryPlanning']:.2f}, offset log {ms['walCommit']:.2f}, "
        f"commit log {ms['commitOffsets']:.2f}, other) | {rest:.2f} | | |",
        f"| batch read of the same columns into `noop` (read alone) | {t_read:.2f} | "
        f"{rate(t_read)} | {load()} |",
        f"\narchive / RocketMQ write rate: {rmq['seconds'] / t_archive:.2f}x (whole call), "
        f"{rmq['seconds'] / ms['triggerExecution']:.2f}x (batches only)",
    ]


# --- 2. latency -------------------------------------------------------------------------------------
def writer(store: Path, rate: int, every_ms: int, seconds: float, queues: int, body: int) -> None:
    """Append ``rate`` messages/s to ``store`` in batches every ``every_ms`` ms for ``seconds``,
    each body ``t<put time, epoch us>`` padded to ``body`` bytes; prints ``ready`` after the
    first batch and the rate reached at the end."""
    per = rate * every_ms // 1000
    i, k = 0, 0
    with MessageStore(store) as s:
        start = time.monotonic()
        while (now := time.monotonic()) - start < seconds:
            s.put_batch([Message(TOPIC, f"t{time.time_ns() // 1000}".encode().ljust(body, b"."),
                                 j % queues, tags=TAG, keys=f"k{j}") for j in range(i, i + per)])
            i += per
            if k == 0:
                print("ready", flush=True)
            k += 1
            time.sleep(max(0.0, start + k * every_ms / 1000 - time.monotonic()))
        print(json.dumps({"messages": i, "seconds": now - start}), flush=True)


def _seconds(x: float) -> str:
    return f"{x:.2f}" if np.isfinite(x) else "not visible"


def bench_latency(work: Path, a: argparse.Namespace, cfg: StoreConfig, spark: SparkSession,
                  batches: Batches) -> list[str]:
    from rocketlake.jobs.archive_stream import archive_stream
    from rocketlake.jobs.lake import table_uri
    from rocketlake.jobs.table_names import ARCHIVE_TABLE
    store, lake = work / "live-store", (work / "live-lake").as_uri()
    total = a.warmup_seconds + a.latency_seconds + 10
    proc = subprocess.Popen([sys.executable, __file__, "--writer", str(store), "--rate", str(a.rate),
                             "--writer-seconds", str(total), "--queues", str(a.queues),
                             "--body", str(a.body)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise AssertionError(f"writer did not start (exit {proc.wait()})")
    t0 = time.time()
    batches.rows.clear()
    loads: list[str] = []

    def stop() -> None:
        for q in spark.streams.active:
            q.stop()

    timer = threading.Timer(a.warmup_seconds + a.latency_seconds + 5, stop)
    sampler = threading.Timer(a.warmup_seconds + a.latency_seconds / 2, lambda: loads.append(load()))
    timer.start()
    sampler.start()
    archive_stream(store, cfg, lake, "bench", every="1 second", master=a.master)
    wrote = json.loads(proc.communicate()[0].strip().splitlines()[-1])
    uri = table_uri(lake, ARCHIVE_TABLE)
    commits = {int(r["operationParameters"]["epochId"]): r["timestamp"].timestamp()
               for r in spark.sql(f"DESCRIBE HISTORY delta.`{uri}`").collect()
               if r["operation"] == "STREAMING UPDATE"}
    spans = sorted((b["start"] or 0, b["end"], commits[b["batch"]]) for b in batches.rows
                   if b["rows"] and b["batch"] in commits)
    # every record the writer put (it has ended), archived or not: one put past the last batch's
    # end was not visible when the query stopped, and counts as not visible (infinite latency)
    rows: Any = (spark.read.format("rocketmq").option("columns", "commitlog_offset,body")
            .load(str(store)).toPandas())
    offsets = rows["commitlog_offset"].to_numpy()
    put = np.array([int(b[1:bytes(b).index(b".")]) / 1e6 for b in rows["body"]])
    starts = np.array([s for s, _, _ in spans])
    visible = np.array([v for _, _, v in spans])[np.searchsorted(starts, offsets, "right") - 1]
    visible[offsets >= spans[-1][1]] = np.inf
    archived = spark.read.format("delta").load(uri).count()
    if archived != int(np.isfinite(visible).sum()):
        raise AssertionError(f"{archived} rows archived, {np.isfinite(visible).sum()} in the batches")
    lo, hi = t0 + a.warmup_seconds, t0 + a.warmup_seconds + a.latency_seconds
    window = (put >= lo) & (put < hi)
    lat = visible[window] - put[window]
    triggers = [b["ms"]["triggerExecution"] / 1000 for b in batches.rows if b["rows"]]
    p50, p99 = (_seconds(x) for x in np.percentile(lat, [50, 99], method="inverted_cdf"))
    return [
        f"writer: {wrote['messages']:,} messages in {wrote['seconds']:.1f} s "
        f"({wrote['messages'] / wrote['seconds']:,.0f} msg/s, batches every 10 ms); trigger 1 s, "
        f"{a.master}; {len(spans)} batches committed, median batch {np.median(triggers):.2f} s, "
        f"max {max(triggers):.2f} s; load average mid-window {loads[0] if loads else '?'}\n",
        "| rows put in the window | not visible when stopped | p50 s | p99 s | max of the visible s |",
        "|---:|---:|---:|---:|---:|",
        f"| {int(window.sum()):,} ({a.latency_seconds:.0f} s after {a.warmup_seconds:.0f} s "
        f"warm-up; {archived:,} archived in all) | {int(np.isinf(lat).sum()):,} | {p50} | "
        f"{p99} | {_seconds(lat[np.isfinite(lat)].max())} |",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=3_000_000)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--body", type=int, default=100, help="body bytes (default %(default)s)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--rate", type=int, default=10_000, help="latency writer's msg/s")
    ap.add_argument("--latency-seconds", type=float, default=60.0)
    ap.add_argument("--warmup-seconds", type=float, default=90.0,
                    help="the first batch of a fresh query takes up to 30 s (default %(default)s)")
    ap.add_argument("--only", choices=("throughput", "latency"))
    ap.add_argument("--dir", type=Path, default=ROOT / "var" / "bench-archive",
                    help="where the run's directory is made (default %(default)s)")
    ap.add_argument("--keep", action="store_true", help="keep the run's directory")
    ap.add_argument("--writer", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--writer-seconds", type=float, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.writer:
        writer(a.writer, a.rate, 10, a.writer_seconds, a.queues, a.body)
        return
    if not rocketmq_peer.available():
        sys.exit("bench_archive: needs java and mvn on PATH")
    cfg = load_config()
    rocketmq_peer.build()
    a.dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="run-", dir=a.dir))
    spark, batches = session(a.master)
    try:
        if a.only != "latency":
            print("\n".join(bench_throughput(work, a, cfg, spark, batches)) + "\n", flush=True)
        if a.only != "throughput":
            print("\n".join(bench_latency(work, a, cfg, spark, batches)) + "\n", flush=True)
    finally:
        spark.stop()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
