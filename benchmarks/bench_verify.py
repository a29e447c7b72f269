"""Benchmark: ``verify`` against a raw sequential read of the same store files.

    .venv/bin/python -m benchmarks.bench_verify [--messages 1000000] [--dir var/bench/verify]

Writes (once, reused when present) a store of ``--messages`` messages of ``--body`` bytes (one
topic, 8 queues, a tag and one key each; default file sizes) with ``MessageStore.put_batch`` in
chunks, reads its files once so they are in the page cache, then measures in one run:
- the raw read: every CommitLog, ConsumeQueue and index file read front to back, no parsing
  (the target's yardstick: the same files);
- the raw read of the written bytes only (CommitLog up to the end of data, ConsumeQueue units,
  index header, slots and used entries): the yardstick once the files are full, as in a large
  store (a small store's files are mostly preallocated zeros);
- ``verify(root)`` (warm: a first run compiles or loads the kernels and is not counted);
- each verify pass alone (CommitLog walk, ConsumeQueues, index, the end-of-data check), to say
  where the time goes.
Prints a Markdown table, ready for benchmarks/RESULTS.md.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rocketlake.store import Message, MessageStore, codec
from rocketlake.store.config import load_config
from rocketlake.store.mapped_file import first_nonzero
from rocketlake.store.store_files import StoreFiles
from rocketlake.store.verify import _Checker, verify

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("commitlog", "consumequeue", "index")


def make_store(root: Path, messages: int, body: int, chunk: int) -> None:
    """The benchmark store (reused when one of the same shape is there)."""
    marker = root / ".complete"
    shape = f"{messages} {body}"
    if marker.exists() and marker.read_text() == shape:
        return
    shutil.rmtree(root, ignore_errors=True)
    payload = bytes(range(256)) * (body // 256 + 1)
    with MessageStore(root) as s:
        for i in range(0, messages, chunk):
            s.put_batch([Message(topic="bench", body=payload[:body], queue_id=j % 8, tags=f"t{j % 16}",
                                 keys=f"order-{j}") for j in range(i, min(messages, i + chunk))])
    marker.write_text(shape)


def store_files(root: Path) -> list[Path]:
    return sorted(p for part in PARTS for p in (root / part).rglob("*") if p.is_file())


def raw_read(files: list[Path]) -> tuple[float, int]:
    """Seconds to read every file front to back (1 MiB reads into one buffer), and the bytes."""
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    total = 0
    t = time.perf_counter()
    for p in files:
        with open(p, "rb", buffering=0) as f:
            while n := f.readinto(view):
                total += n
    return time.perf_counter() - t, total


def written_ranges(root: Path) -> list[tuple[Path, int]]:
    """(file, bytes from its start that hold data) of every store file."""
    cfg = load_config({})
    out: list[tuple[Path, int]] = []
    with StoreFiles(root.resolve(), cfg, sizes_from_files=True) as files:
        walk = files.commitlog.walk(check_crc=False)
        for _ in walk:
            pass
        end = walk.end
        out += [(mf.path, max(0, min(mf.size, end - mf.start))) for mf in files.commitlog.files.files]
        out += [(mf.path, mf.wrote) for cq in files.queues.values() for mf in cq.files.files]
        out += [(f.path, codec.index_file_size(f.slot_num, f.index_count)) for f in files.index.files]
    return out


def raw_read_ranges(ranges: list[tuple[Path, int]]) -> tuple[float, int]:
    """Seconds to read the first ``n`` bytes of each file (1 MiB reads), and the bytes."""
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    total = 0
    t = time.perf_counter()
    for p, n in ranges:
        with open(p, "rb", buffering=0) as f:
            left = n
            while left > 0 and (k := f.readinto(view[:min(left, len(buf))])):
                left -= k
                total += k
    return time.perf_counter() - t, total


def best(fn: Callable[[], Any], runs: int) -> tuple[float, Any]:
    """The fastest of ``runs`` calls (seconds) and its result."""
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        r = fn()
        out.append((time.perf_counter() - t, r))
    return min(out, key=lambda x: x[0])


def passes(root: Path, runs: int) -> list[tuple[str, float]]:
    """Where verify's time goes: each pass timed alone (fastest of ``runs``), on a fresh
    ``StoreFiles`` like ``verify``'s; the CommitLog pass also split into its parts."""
    cfg = load_config({})
    out = []
    for _ in range(runs):
        with StoreFiles(root.resolve(), cfg, sizes_from_files=True) as files:
            c = _Checker(files)
            log = files.commitlog
            t = [time.perf_counter()]
            batches = [b for mf in log.files.files for b in log.walk(mf.start, True, mf.end)]
            t.append(time.perf_counter())
            for b in batches:
                b.dispatch(cfg.delay_levels_ms)
            t.append(time.perf_counter())
            for b in batches:
                _ = b.topics
            t.append(time.perf_counter())
            del batches
            t.append(time.perf_counter())
            c.load()
            walked = c.walked(log)
            c.commitlog(log, walked)
            walked.finish()
            t.append(time.perf_counter())
            last = log.files.files[-1]
            first_nonzero(last, log.max_offset - last.start)
            t.append(time.perf_counter())
            c.unit_sums(walked.queues)  # in verify, a thread beside the walk
            c.consume_queues(log, walked.queues)
            t.append(time.perf_counter())
            c.index(log, walked)
            t.append(time.perf_counter())
        out.append([t[i + 1] - t[i] for i in range(len(t) - 1)])
    d = [min(x) for x in zip(*out)]
    return [("CommitLog pass (files loaded, the walk, the queue tally, the index keys matched)", d[4]),
            ("- walk with CRC (`kernels.records.walk`)", d[0]),
            ("- dispatch columns (`kernels.dispatch`: property spans, tagsCode, key hashes)", d[1]),
            ("- topic ids (`RecordBatch.topics`)", d[2]),
            ("- end-of-data check (`mapped_file.first_nonzero` over the rest of the last file)", d[5]),
            ("- verify's tallies (the rest)", max(0.0, d[4] - d[0] - d[1] - d[2] - d[5])),
            ("ConsumeQueue checks (units' per-queue sums, `store.queue_tally`)", d[6]),
            ("index checks (headers; the keys were matched during the walk)", d[7])]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--body", type=int, default=100)
    p.add_argument("--chunk", type=int, default=10_000, help="messages per put_batch")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--dir", type=Path, default=ROOT / "var" / "bench" / "verify")
    args = p.parse_args(argv)
    root = args.dir / "store"
    t = time.perf_counter()
    make_store(root, args.messages, args.body, args.chunk)
    print(f"store: {args.messages:,} messages of {args.body} B ({time.perf_counter() - t:.1f} s to "
          f"write or find)", flush=True)
    files = store_files(root)
    raw_read(files)  # page cache
    sizes = {part: sum(f.stat().st_size for f in files if f.relative_to(root).parts[0] == part)
             for part in PARTS}
    t_cold = time.perf_counter()
    report = verify(root)  # compiles or loads the kernels
    t_cold = time.perf_counter() - t_cold
    assert report.ok and report.records == args.messages, report.problems[:5]
    ranges = written_ranges(root)
    t_read, nbytes = best(lambda: raw_read(files)[1], args.runs)
    t_data, data_bytes = best(lambda: raw_read_ranges(ranges)[1], args.runs)
    t_verify, report = best(lambda: verify(root), args.runs)
    print(f"\n{os.cpu_count()} cores; files: " + ", ".join(f"{k} {v / 1e6:,.0f} MB" for k, v in sizes.items())
          + f" ({data_bytes / 1e6:,.0f} MB written); {report.records:,} records, {report.units:,} "
          f"units, {report.keys_checked:,} keys checked; first verify (kernels compiled or loaded) "
          f"{t_cold:.2f} s\n")
    print("| what | seconds | MB/s (file bytes) | MB/s (written bytes) | messages/s |")
    print("|---|---:|---:|---:|---:|")
    for what, secs in (("raw read, whole files (1 MiB reads)", t_read),
                       ("raw read, written bytes only", t_data), ("verify", t_verify)):
        print(f"| {what} | {secs:.3f} | {nbytes / 1e6 / secs:,.0f} | {data_bytes / 1e6 / secs:,.0f} "
              f"| {args.messages / secs:,.0f} |")
    print(f"\nverify / raw read of the same files: {t_read / t_verify:.2f} (target >= 0.25); "
          f"verify / raw read of the written bytes: {t_data / t_verify:.2f}\n")
    print("| verify pass | seconds |")
    print("|---|---:|")
    for what, secs in passes(root, args.runs):
        print(f"| {what} | {secs:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
