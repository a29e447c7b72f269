"""publish-offsets: unit reading against the raw read ceiling, and the whole job's wall time.

    .venv/bin/python benchmarks/bench_publish_offsets.py [--topics 16] [--queues 8]
        [--messages 100000] [--groups 20]

Writes a store with the default file sizes (1 GiB CommitLog, 6,000,000-byte ConsumeQueue files),
``topics x queues`` queues and ``groups`` consumer groups, each committed on every queue of two
topics. Measures (1) ``read_queue_units`` over every queue in this process (what the job's tasks
do) against a raw ``np.fromfile`` of the same ConsumeQueue files, and (2) the job in process on a
local[2] session (session start excluded): a first publish, a changed snapshot, an unchanged one.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

from rocketlake.store import Message, MessageStore
from rocketlake.store.config import load_config
from rocketlake.store.config_files import write_consumer_offsets


def build(root: Path, topics: int, queues: int, messages: int, groups: int) -> list[tuple]:
    names = [f"topic-{t:02d}" for t in range(topics)]
    with MessageStore(root) as s:
        for k in range(0, messages, 5000):
            s.put_batch([Message(names[i % topics], b"x" * 100, queue_id=(i // topics) % queues)
                         for i in range(k, min(messages, k + 5000))])
        offsets = s.queue_ranges()
    return [(names[(g + d) % topics], f"group-{g:02d}", offsets) for g in range(groups)
            for d in (0, 1)]


def commit(root: Path, pairs: list[tuple], fraction: float) -> None:
    write_consumer_offsets(root, {(t, g): {q: int(hi * fraction) for (tt, q), (_, hi)
                                           in offsets.items() if tt == t}
                                  for t, g, offsets in pairs})


def bench_reader(root: Path, queues: list[tuple[str, int]]) -> tuple[float, float, int]:
    from rocketlake.transforms.offset_units import read_queue_units

    cfg = load_config()
    files = sorted((root / "consumequeue").rglob("0" * 20))
    t = time.perf_counter()
    total = sum(np.fromfile(f, dtype=np.uint8).size for f in files)
    raw = time.perf_counter() - t
    req = pa.RecordBatch.from_pylist([{"topic": tp, "queue_id": q, "wanted": [1]}
                                      for tp, q in queues])
    t = time.perf_counter()
    for _ in read_queue_units(iter([req]), str(root), cfg):
        pass
    return time.perf_counter() - t, raw, total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topics", type=int, default=16)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--groups", type=int, default=20)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-offsets-"))
    try:
        root, lake = work / "store", work / "lake"
        pairs = build(root, a.topics, a.queues, a.messages, a.groups)
        commit(root, pairs, 0.5)
        queues = sorted(pairs[0][2])
        reader, raw, nbytes = bench_reader(root, queues)
        print(f"queues {len(queues)}, groups {a.groups}, messages {a.messages}, "
              f"ConsumeQueue bytes {nbytes / 1e6:.0f} MB, load average {os.getloadavg()[0]:.1f}")
        print(f"read_queue_units (one process): {reader:.2f} s; raw read of the same files "
              f"{raw:.2f} s; ratio {reader / raw:.2f}")

        from rocketlake.jobs.publish_offsets import main as publish
        from rocketlake.jobs.spark_session import build_session

        build_session("bench", master="local[2]", conf={"spark.sql.shuffle.partitions": "2",
                                                        "spark.ui.enabled": "false"})
        t0 = datetime(2026, 1, 1, tzinfo=UTC)
        for i, (what, fraction) in enumerate((("first publish", 0.5), ("changed offsets", 0.75),
                                              ("unchanged", 0.75))):
            commit(root, pairs, fraction)
            t = time.perf_counter()
            rc = publish(["--store", str(root), "--lake", str(lake), "--store-name", "bench",
                          "--snapshot-time", (t0 + timedelta(minutes=i)).isoformat()])
            print(f"job, {what}: {time.perf_counter() - t:.1f} s (exit {rc})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
