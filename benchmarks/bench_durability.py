"""Durability benchmarks: SYNC_FLUSH group commit against producer threads, ASYNC_FLUSH
throughput, and recovery time against the data written since the checkpoint and the store size.

    .venv/bin/python benchmarks/bench_durability.py [--dir DIR] [--quick]

Ratios are against this machine's own ceiling, measured in the same run on the same disk:
SYNC against a raw ``write`` + ``fdatasync`` of each record's bytes, ASYNC against a raw
sequential write of all the bytes plus one ``fsync``. A crash is a writer process that leaves
with ``os._exit`` after its last put (no close: ``abort`` stays, as after kill -9).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from rocketlake.store import Message, MessageStore

BODY = b"x" * 200
REC_BODY = b"r" * 1000
MIB = 1 << 20
RECOVERY_SETTINGS = {"mappedFileSizeCommitLog": 16 * MIB, "flushIntervalConsumeQueue": 10 ** 9}


def raw_sync_ceiling(d: Path, record: bytes, seconds: float = 2.0) -> float:
    """Records/s of ``write`` + ``fdatasync`` per record, one thread."""
    fd = os.open(d / "raw-sync", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        os.write(fd, record)
        os.fdatasync(fd)
        n += 1
    dt = time.perf_counter() - t0
    os.close(fd)
    return n / dt


def raw_async_ceiling(d: Path, total: int) -> float:
    """Bytes/s of a sequential write of ``total`` bytes in 1 MiB writes plus one fsync."""
    chunk = b"y" * MIB
    fd = os.open(d / "raw-async", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t0 = time.perf_counter()
    for _ in range(max(1, total // MIB)):
        os.write(fd, chunk)
    os.fsync(fd)
    dt = time.perf_counter() - t0
    os.close(fd)
    return max(1, total // MIB) * MIB / dt


def put_throughput(d: Path, mode: str, threads: int, per_thread: int) -> tuple[float, int, int]:
    """(messages/s, messages, CommitLog syncs) for ``threads`` producers each putting
    ``per_thread`` single messages."""
    root = d / f"{mode}-{threads}"
    ms = MessageStore(root, flushDiskType=mode, mappedFileSizeCommitLog=256 * MIB)

    def produce(t: int) -> None:
        for i in range(per_thread):
            ms.put(Message("bench", BODY, queue_id=t % 4, keys=f"k{t}-{i}"))

    workers = [threading.Thread(target=produce, args=(t,)) for t in range(threads)]
    f0, t0 = ms.flusher.flushes, time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    dt = time.perf_counter() - t0
    syncs = ms.flusher.flushes - f0
    ms.close()
    shutil.rmtree(root)
    return threads * per_thread / dt, threads * per_thread, syncs


def crash_writer(root: str, base_mib: int, since_mib: int) -> None:
    """Child: write ``base_mib``, checkpoint, write ``since_mib`` more, leave without closing."""
    ms = MessageStore(root, **RECOVERY_SETTINGS)
    t0 = 1_700_000_000_000
    per = len(REC_BODY) + 130
    i = 0
    for target, checkpoint in ((base_mib, True), (since_mib, False)):
        n = target * MIB // per
        for lo in range(0, n, 2000):
            ms.put_batch([Message("rec", REC_BODY, queue_id=j % 8, keys=f"m{i + j}",
                                  store_timestamp=t0 + i + j) for j in range(min(2000, n - lo))])
            i += min(2000, n - lo)
        if checkpoint:
            ms.flush()  # CommitLog, ConsumeQueues, index and checkpoint durable up to here
    os._exit(0)


def recovery_times(d: Path, base_mib: int, since_mib: int) -> dict:
    root = d / f"rec-{base_mib}-{since_mib}"
    subprocess.run([sys.executable, __file__, "_crash", str(root), str(base_mib), str(since_mib)],
                   check=True)
    assert (root / "abort").exists()
    t0 = time.perf_counter()
    ms = MessageStore(root, **RECOVERY_SETTINGS)
    abnormal = time.perf_counter() - t0
    rep = ms.recovery
    ms.close()
    t0 = time.perf_counter()
    ms = MessageStore(root, **RECOVERY_SETTINGS)
    normal = time.perf_counter() - t0
    ms.close()
    shutil.rmtree(root)
    return {"store_mib": base_mib + since_mib, "since_mib": since_mib, "abnormal_s": abnormal,
            "scanned_mib": (rep.commitlog_end - rep.scanned_from) / MIB,
            "dispatched": rep.dispatched, "normal_s": normal}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", help="where to write (default: a temporary directory)")
    ap.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = ap.parse_args()
    d = Path(args.dir or tempfile.mkdtemp(prefix="bench-durability-"))
    d.mkdir(parents=True, exist_ok=True)
    q = 4 if args.quick else 1

    probe = MessageStore(d / "probe", mappedFileSizeCommitLog=MIB)
    rec_size = probe.put(Message("bench", BODY, keys="k0-0")).size
    probe.close()
    shutil.rmtree(d / "probe")
    sync_ceiling = raw_sync_ceiling(d, b"z" * rec_size)
    print(f"record {rec_size} B; ceiling: raw write+fdatasync per record {sync_ceiling:,.0f}/s")
    print("\n| mode | producers | msgs/s | msgs per sync | vs raw write+fdatasync per record |")
    print("|---|---|---|---|---|")
    for threads, per in ((1, 3000), (4, 2000), (16, 1000)):
        rate, n, syncs = put_throughput(d, "SYNC_FLUSH", threads, per // q)
        print(f"| SYNC_FLUSH | {threads} | {rate:,.0f} | {n / max(syncs, 1):.1f} | "
              f"{rate / sync_ceiling:.2f}x |")
    n_async = 100_000 // q
    async_ceiling = raw_async_ceiling(d, n_async * rec_size) / rec_size
    for threads in (1, 4, 16):
        rate, n, syncs = put_throughput(d, "ASYNC_FLUSH", threads, n_async // threads)
        print(f"| ASYNC_FLUSH | {threads} | {rate:,.0f} | {n / max(syncs, 1):.0f} | "
              f"{rate / async_ceiling:.3f}x of raw sequential write+fsync "
              f"({async_ceiling:,.0f} records/s) |")

    print("\n| store MiB | since checkpoint MiB | abnormal recovery s | scanned MiB | "
          "re-dispatched | normal recovery s |")
    print("|---|---|---|---|---|---|")
    grid = [(64, 16), (256, 16), (1024, 16), (256, 64), (256, 256)]
    for base, since in grid:
        r = recovery_times(d, base // q, since // q)
        print(f"| {r['store_mib']} | {r['since_mib']} | {r['abnormal_s']:.2f} | "
              f"{r['scanned_mib']:.0f} | {r['dispatched']:,} | {r['normal_s']:.2f} |")
    if not args.dir:
        shutil.rmtree(d)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_crash":
        crash_writer(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        main()
