"""put / put_batch / put_table throughput against a naive per-message encoder and the raw write
ceiling.

    .venv/bin/python benchmarks/bench_put.py [--messages N] [--runs R] [--profile]

100-byte bodies, tags and two keys per message, ASYNC_FLUSH, ConsumeQueue and index dispatch on.
The naive encoder writes only CommitLog bytes (struct.pack per record into a bytearray); the
ceiling is a raw sequential write of the same number of bytes to a file in the same directory.
put_table takes the same messages as one Arrow table (built before the clock starts), in slices
of ``TABLE_ROWS`` rows.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import struct
import tempfile
import time
import zlib
from pathlib import Path

import pyarrow as pa

from rocketlake.store import Message, MessageStore

TABLE_ROWS = 65536
_HEAD = struct.Struct(">iiiiiqqiq4siq4siiqi")


def naive_encode(msgs: list[Message]) -> bytearray:
    """The straightforward encoder: one struct.pack per record, CommitLog bytes only."""
    out, qoff, now = bytearray(), {}, int(time.time() * 1000)
    for m in msgs:
        props = {"TAGS": m.tags, "KEYS": " ".join(m.keys)}
        ps = "\x02".join(f"{k}\x01{v}" for k, v in props.items()).encode()
        tb = m.topic.encode()
        n = 91 + len(m.body) + len(tb) + len(ps)
        q = qoff.get((m.topic, m.queue_id), 0)
        qoff[(m.topic, m.queue_id)] = q + 1
        out += _HEAD.pack(n, -626843481, zlib.crc32(m.body) & 0x7FFFFFFF, m.queue_id, 0, q, len(out),
                          0, now, b"\x7f\0\0\1", 0, now, b"\x7f\0\0\1", 10911, 0, 0, len(m.body))
        out += m.body
        out += bytes((len(tb),))
        out += tb
        out += struct.pack(">h", len(ps))
        out += ps
    return out


def messages(n: int) -> list[Message]:
    return [Message("orders", os.urandom(100), i % 8, tags=("TagA", "TagB", "TagC")[i % 3],
                    keys=[f"order-{i}", f"cust-{i % 1000}"]) for i in range(n)]


def as_table(msgs: list[Message]) -> pa.Table:
    return pa.table({"topic": pa.array([m.topic for m in msgs]),
                     "body": pa.array([m.body for m in msgs], pa.binary()),
                     "queue_id": pa.array([m.queue_id for m in msgs], pa.int32()),
                     "tags": pa.array([m.tags for m in msgs]),
                     "keys": pa.array([m.keys for m in msgs], pa.list_(pa.string()))})


def best_of(runs: int, fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of the fastest of ``runs`` calls."""
    best = (float("inf"), float("inf"))
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        best = min(best, (time.perf_counter() - t0, time.process_time() - c0))
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--profile", action="store_true",
                    help="then profile one put_table and one put_batch run (CPU time per function)")
    a = ap.parse_args()
    msgs = messages(a.messages)
    work = Path(tempfile.mkdtemp(prefix="rl-bench-", dir=Path(__file__).resolve().parent.parent / "var"
                                 if (Path(__file__).resolve().parent.parent / "var").exists() else None))
    try:
        t_naive = best_of(a.runs, lambda: naive_encode(msgs))[0]
        nbytes = len(naive_encode(msgs))
        blob = os.urandom(1 << 20)

        def raw_write():
            with open(work / "raw", "wb") as f:
                for _ in range(nbytes >> 20):
                    f.write(blob)
                f.write(blob[: nbytes & ((1 << 20) - 1)])
            os.unlink(work / "raw")

        t_raw = best_of(a.runs, raw_write)[0]

        table = as_table(msgs)

        def run_store(how: str, profile: cProfile.Profile | None = None) -> tuple[float, float]:
            root = work / "store"
            with MessageStore(root) as ms:
                ms.put_table(table.slice(0, 1))  # compiled kernels loaded (numba's cache)
                if profile is not None:
                    profile.enable()
                t0, c0 = time.perf_counter(), time.process_time()
                if how == "table":
                    for i in range(0, len(msgs), TABLE_ROWS):
                        ms.put_table(table.slice(i, TABLE_ROWS))
                elif how == "batch":
                    for i in range(0, len(msgs), 1000):
                        ms.put_batch(msgs[i:i + 1000])
                else:
                    for m in msgs:
                        ms.put(m)
                ms.get("orders", 0, 0, 1)  # dispatch visible: CQ units and index keys applied
                dt = (time.perf_counter() - t0, time.process_time() - c0)
                if profile is not None:
                    profile.disable()
            shutil.rmtree(root)
            return dt

        t_put = min(run_store("put") for _ in range(a.runs))
        t_batch = min(run_store("batch") for _ in range(a.runs))
        t_table = min(run_store("table") for _ in range(a.runs))
        profiles = ({how: cProfile.Profile(time.process_time) for how in ("table", "batch")}
                    if a.profile else {})
        for how, prof in profiles.items():
            run_store(how, prof)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = a.messages
    rows = [("raw sequential write (ceiling)", t_raw), ("naive encoder (CommitLog only)", t_naive),
            ("MessageStore.put (CommitLog + CQ + index)", t_put),
            ("MessageStore.put_batch x1000 (CommitLog + CQ + index)", t_batch),
            (f"MessageStore.put_table x{TABLE_ROWS} (CommitLog + CQ + index)", t_table)]
    print(f"{n} messages, {nbytes / 1e6:.1f} MB of CommitLog, best of {a.runs}\n")
    print("| path | msg/s | MB/s | vs naive | vs raw write | msg/s of CPU time |")
    print("|---|---|---|---|---|---|")
    for name, t in rows:
        wall, cpu = t if isinstance(t, tuple) else (t, None)
        print(f"| {name} | {n / wall:,.0f} | {nbytes / wall / 1e6:,.1f} | {t_naive / wall:.2f}x "
              f"| {t_raw / wall:.3f} | {f'{n / cpu:,.0f}' if cpu else ''} |")
    for how, prof in profiles.items():
        print(f"\nput_{how}: CPU seconds by function (top 12 by own time)")
        pstats.Stats(prof).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
