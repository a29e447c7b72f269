"""Archive throughput of the compaction job: expired CommitLog files -> Delta, then deleted.

    .venv/bin/python benchmarks/bench_compact.py [--mib 256]

Writes a store of about ``--mib`` MiB of CommitLog (64 MiB files, 200-byte bodies) under the
git-ignored `var/bench-compact/`, ages every file but the last, and times `jobs/compact.py`'s
archive step (a CRC-checked walk, then each file through the ``rocketmq`` source into its Delta
commit) on a fresh session, then again into a new lake on the warmed-up session (the first Delta
write of a JVM pays its warm-up), and the deletion. The ceiling is a raw sequential read of the
same files with numpy in the same run.
"""
from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

import numpy as np

from rocketlake.jobs import compact
from rocketlake.jobs.spark_session import build_session
from rocketlake.store import Message, MessageStore
from rocketlake.store.config import load_config

ROOT = Path(__file__).resolve().parent.parent
FILE = 64 << 20
SETTINGS = {"mappedFileSizeCommitLog": FILE}


def make_store(root: Path, mib: int) -> int:
    n = mib * (1 << 20) // 330
    with MessageStore(root, **SETTINGS) as ms:
        for i in range(0, n, 5000):
            ms.put_batch([Message(f"topic-{j % 4}", os.urandom(200), j % 8, tags="T",
                                  keys=[f"k{j}", f"c{j % 1000}"]) for j in range(i, min(n, i + 5000))])
        size = ms.commitlog.max_offset
    old = time.time() - 100 * 3600
    for f in sorted((root / "commitlog").iterdir())[:-1]:
        os.utime(f, (old, old))
    return size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=256)
    a = ap.parse_args()
    work = ROOT / "var" / "bench-compact"
    shutil.rmtree(work, ignore_errors=True)
    root, lake = work / "store", work / "lake"
    make_store(root, a.mib)
    cfg = load_config(SETTINGS)
    names = compact.plan(root, cfg, int(time.time() * 1000), True, False)["delete"]
    archived_bytes = len(names) * FILE
    t0 = time.perf_counter()
    for n in names:
        np.fromfile(root / "commitlog" / n, dtype=np.uint8).sum()
    t_raw = time.perf_counter() - t0
    spark = build_session("bench-compact")
    t0 = time.perf_counter()
    counts = compact.archive(spark, root, lake, cfg, names, "bench")
    t_archive = time.perf_counter() - t0
    t0 = time.perf_counter()  # again, into a new lake: the same work on a warmed-up JVM
    compact.archive(spark, root, work / "lake-warm", cfg, names, "bench")
    t_warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    compact.delete(root, cfg, "forced", names)
    t_delete = time.perf_counter() - t0
    rows = sum(counts.values())
    print(f"{len(names)} files, {archived_bytes / 2**20:.0f} MiB archived, {rows:,} messages\n")
    print("| step | seconds | MB/s | messages/s | vs raw read |")
    print("|---|---|---|---|---|")
    for name, t in (("raw numpy read (ceiling)", t_raw), ("archive to Delta", t_archive),
                    ("archive again, warm JVM, new lake", t_warm),
                    ("delete files + CQ + index", t_delete)):
        print(f"| {name} | {t:.1f} | {archived_bytes / t / 1e6:,.1f} | {rows / t:,.0f} | {t_raw / t:.3f} |")
    spark.stop()


if __name__ == "__main__":
    main()
