"""Benchmark: the Spark rebuild (`jobs/rebuild.py`) vs the raw read ceiling and the library.

    .venv/bin/python -m benchmarks.bench_rebuild [--gib 1.0] [--dir var/bench/rebuild]
        [--master local[2]] [--runs 3]

Writes (once, reused when present) a store of at least ``--gib`` GiB of CommitLog with the
library's ``put_batch`` (default file sizes), then measures in one run:
- the raw read ceiling: reading the same CommitLog files with numpy, no parsing;
- the Spark rebuild of both structures from one scan, and of each alone (``--output``, so the
  store is left alone; best of ``--runs`` on one session, session start not included): run it
  with ``--master local[1]`` and ``local[2]`` for the scaling;
- the library's single-process ``single_process_rebuild.rebuild`` of both on the same data.
Results are printed as a Markdown table, ready for benchmarks/RESULTS.md.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from rocketlake.store import Message, MessageStore
from rocketlake.store.config import load_config
from rocketlake.store.single_process_rebuild import rebuild

ROOT = Path(__file__).resolve().parent.parent


def make_store(root: Path, gib: float) -> int:
    """A store with at least ``gib`` GiB of CommitLog (reused when already there)."""
    target = int(gib * (1 << 30))
    marker = root / ".complete"
    if marker.exists() and int(marker.read_text()) >= target:
        return int(marker.read_text())
    shutil.rmtree(root, ignore_errors=True)
    body = bytes(range(256)) * 2  # 512-byte bodies
    i = 0
    with MessageStore(root) as s:
        while s.commitlog.max_offset < target:
            batch = [Message(topic=f"bench-{j % 4}", body=body, queue_id=j % 8, tags=f"t{j % 16}",
                             keys=f"order-{j} cust-{j % 1000}") for j in range(i, i + 5000)]
            s.put_batch(batch)
            i += len(batch)
        size = s.commitlog.max_offset
    marker.write_text(str(size))
    return size


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def raw_read(root: Path) -> tuple[float, int]:
    """Seconds to read every CommitLog file with numpy, and the bytes read."""
    total = 0
    t = time.perf_counter()
    for p in sorted((root / "commitlog").iterdir()):
        total += int(np.fromfile(p, dtype=np.uint8).size)
    return time.perf_counter() - t, total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gib", type=float, default=1.0)
    p.add_argument("--dir", type=Path, default=ROOT / "var" / "bench" / "rebuild")
    p.add_argument("--split-mb", type=int, default=64)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--runs", type=int, default=3, help="runs of each Spark rebuild, best taken")
    args = p.parse_args(argv)
    store, work = args.dir / "store", args.dir / "out"
    t_make, size = timed(lambda: make_store(store, args.gib))
    cfg = load_config()
    mib = size / (1 << 20)
    print(f"store: {mib:.0f} MiB of CommitLog data ({t_make:.1f} s to write or find)", flush=True)

    from rocketlake.jobs.rebuild import rebuild as spark_rebuild
    from rocketlake.jobs.spark_session import build_session

    rows = []
    t_read, read_bytes = raw_read(store)
    t_read2, _ = raw_read(store)  # page cache warm, as for the runs below
    rows.append(("raw read (numpy, no parsing)", min(t_read, t_read2), read_bytes, None))

    t_start, spark = timed(lambda: build_session("bench-rebuild", delta=False, master=args.master))
    split = args.split_mb << 20
    runs: dict[str, list[float]] = {}
    for _ in range(args.runs):
        for what, structures in (("both", ("consumequeue", "index")), ("consumequeue", ("consumequeue",)),
                                 ("index", ("index",))):
            shutil.rmtree(work / "spark", ignore_errors=True)
            t, done = timed(lambda s=structures: spark_rebuild(spark, store, cfg, work / "spark",
                                                              split_bytes=split, structures=s))
            runs.setdefault(what, []).append(t)
            n = done.end.records
    shutil.rmtree(work / "spark", ignore_errors=True)
    spark_rebuild(spark, store, cfg, work / "spark", split_bytes=split)
    for what in ("both", "consumequeue", "index"):
        rows.append((f"Spark rebuild, {what} (one scan), {args.master}", min(runs[what]), size, n))
    spark.stop()
    t_lib, stats = timed(lambda: rebuild(store, work / "library"))
    rows.append(("library single_process_rebuild (both, 1 process)", t_lib, size, stats.records))
    same = all((work / "spark" / d).exists() and _same_tree(work / "spark" / d, work / "library" / d)
               for d in ("consumequeue", "index"))

    print(f"\n{os.cpu_count()} cores; Spark session start {t_start:.1f} s (not in the times below); "
          f"{n} messages; Spark output byte-identical to the library's: {same}\n")
    print("| what | seconds | MB/s | messages/s |")
    print("|---|---:|---:|---:|")
    for what, secs, nbytes, msgs in rows:
        rate = f"{msgs / secs:,.0f}" if msgs else ""
        print(f"| {what} | {secs:.2f} | {nbytes / secs / 1e6:,.0f} | {rate} |")
    print(f"\nlibrary / Spark (both): {t_lib / min(runs['both']):.2f}; Spark runs (s): "
          + "; ".join(f"{w} " + ", ".join(f"{t:.2f}" for t in ts) for w, ts in runs.items()))
    shutil.rmtree(work, ignore_errors=True)
    return 0 if same else 1


def _same_tree(a: Path, b: Path) -> bool:
    fa = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    fb = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    return fa == fb and all((a / f).read_bytes() == (b / f).read_bytes() for f in fa)


if __name__ == "__main__":
    sys.exit(main())
