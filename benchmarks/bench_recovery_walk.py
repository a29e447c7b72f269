"""Benchmark: what abnormal recovery's walk threads spend per record, and the open, in process.

    .venv/bin/python -m benchmarks.bench_recovery_walk STORE [--runs 5] [--opens 3]

``STORE``: a crashed store (for issue 27's figure, the one ``bench_vs_rocketmq.py --keep`` leaves
in its run directory, ``rocketmq-store``, crashed as its row b does: an ``abort`` file and the
checkpoint's first 24 bytes zeroed). It is never changed: each open gets its own
``cp -a --sparse=always`` copy beside it, removed afterwards.

1. The walk over the CommitLog files read into memory (no page faults, no I/O), on one walk
   thread (``record_walk.WORKERS = 1``), ``--runs`` times each: the walk with CRC alone; with the
   dispatch columns and topics (``delay_levels_ms``); with recovery's ``prepare`` too (its
   re-dispatch plan and store-time check). Process CPU per record, sorted.
2. ``MessageStore(copy)`` ``--opens`` times after one warm-up open: wall, process CPU and the
   caller's thread CPU, seconds.

Run it against another commit by putting that commit's ``rocketlake`` package first on
``PYTHONPATH``.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from rocketlake.store import MessageStore, record_walk
from rocketlake.store.config import load_config
from rocketlake.store.recovery import _planned


def walk_figures(root: Path, runs: int) -> list[tuple[str, list[float]]]:
    """(what, ns per record of each run, sorted) of the three walks."""
    files = []
    for p in sorted((root / "commitlog").iterdir()):
        buf = np.fromfile(p, dtype=np.uint8)
        files.append((int(p.name), buf.size, buf))
    end = files[-1][0] + files[-1][1]
    levels = load_config().delay_levels_ms
    record_walk.WORKERS = 1

    def walk(**kw: Any) -> int:
        return sum(len(b) for b in record_walk.Walk(files, files[0][0], end, check_crc=True,
                                                    check_names=True, **kw))

    out = []
    for what, kw in (("walk with CRC", {}), ("+ dispatch columns, topics", {"delay_levels_ms": levels}),
                     ("+ recovery's plan", {"delay_levels_ms": levels,
                                            "prepare": partial(_planned, levels)})):
        ns = []
        for _ in range(runs):
            cpu = time.process_time()
            n = walk(**kw)
            ns.append((time.process_time() - cpu) / n * 1e9)
        out.append((what, sorted(ns)))
    return out


def open_figures(root: Path, opens: int) -> list[tuple[float, float, float]]:
    """(wall, process CPU, caller's thread CPU) of each open after a warm-up one."""
    cfg, copy = load_config(), root.with_name(root.name + "-open")
    out = []
    try:
        for k in range(opens + 1):
            shutil.rmtree(copy, ignore_errors=True)
            subprocess.run(["cp", "-a", "--sparse=always", str(root), str(copy)], check=True)
            wall, cpu, thread = time.perf_counter(), time.process_time(), time.thread_time()
            store = MessageStore(copy, cfg)
            figures = (time.perf_counter() - wall, time.process_time() - cpu, time.thread_time() - thread)
            store.close()
            if k:
                out.append(figures)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--runs", type=int, default=5, help="runs of each walk (default %(default)s)")
    ap.add_argument("--opens", type=int, default=3, help="opens measured (default %(default)s)")
    a = ap.parse_args()
    for what, ns in walk_figures(a.store, a.runs):
        print(f"{what:28s} " + " ".join(f"{x:5.0f}" for x in ns) + " ns/record")
    for wall, cpu, thread in open_figures(a.store, a.opens):
        print(f"open: wall {wall:.3f} s, process CPU {cpu:.3f} s, caller's thread CPU {thread:.3f} s")


if __name__ == "__main__":
    main()
