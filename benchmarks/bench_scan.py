"""Benchmark: ``spark.read.format("rocketmq")`` scan vs a raw sequential read of the CommitLog.

    .venv/bin/python -m benchmarks.bench_scan [--messages 1000000] [--master local[2]]

Writes (once, reused when present) a store of ``--messages`` 100-byte messages with the library's
``put_batch`` (4 topics x 8 queues, TAGS, two KEYS; ``--file-mb`` MiB CommitLog files), then
measures in one run:
- the raw read ceiling: reading the same CommitLog files with numpy, no parsing;
- ``count()`` of the source with every column but ``body`` built, CRC checked (the target:
  >= 25% of the raw read), with only the columns a rebuild reads, and with the offsets alone.
Each Spark figure is the best of ``--runs`` (the first run of a fresh session also loads the
compiled kernels in each Python worker). Session start is not included. Results are printed as a
Markdown table, ready for benchmarks/RESULTS.md.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from rocketlake.store import Message, MessageStore

sys.path.insert(0, str(Path(__file__).parent))
from bench_rebuild import raw_read  # noqa: E402  (the same ceiling as the rebuild benchmark's)

ROOT = Path(__file__).resolve().parent.parent
NO_BODY = ("commitlog_offset,size,topic,queue_id,queue_offset,sys_flag,flag,born_timestamp,"
           "store_timestamp,born_host,store_host,tags_code,keys,properties,msg_id")
REBUILD = "commitlog_offset,size,topic,queue_id,queue_offset,tags_code"
#: the least a count needs: every record walked and its CRC checked, one column built
OFFSETS = "commitlog_offset"


def make_store(root: Path, messages: int, file_mb: int) -> None:
    """A store of ``messages`` 100-byte messages (reused when already there)."""
    marker = root / ".complete"
    if marker.exists() and marker.read_text() == f"{messages} {file_mb}":
        return
    shutil.rmtree(root, ignore_errors=True)
    body = bytes(range(100))
    with MessageStore(root, mappedFileSizeCommitLog=file_mb << 20) as s:
        for i in range(0, messages, 10_000):
            s.put_batch([Message(topic=f"bench-{j % 4}", body=body, queue_id=j % 8, tags=f"t{j % 16}",
                                 keys=f"order-{j} cust-{j % 1000}")
                         for j in range(i, min(messages, i + 10_000))])
    marker.write_text(f"{messages} {file_mb}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--file-mb", type=int, default=128)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--split-mb", type=int, default=64)
    p.add_argument("--dir", type=Path, default=ROOT / "var" / "bench" / "scan")
    args = p.parse_args(argv)
    store = args.dir / "store"
    make_store(store, args.messages, args.file_mb)

    from rocketlake.jobs.spark_session import build_session

    spark = build_session("bench-scan", master=args.master, delta=False,
                          conf={"spark.ui.enabled": "false"})
    raw = [raw_read(store) for _ in range(args.runs)]
    raw_s, size = min(raw)
    rows = [("raw read (numpy, no parsing)", raw_s, None)]
    for label, columns in (("source count, no body, CRC checked", NO_BODY),
                           ("source count, rebuild columns, CRC checked", REBUILD),
                           ("source count, offsets only, CRC checked", OFFSETS)):
        df = (spark.read.format("rocketmq").option("columns", columns)
              .option("splitBytes", str(args.split_mb << 20)).load(str(store)))
        times = []
        for _ in range(args.runs):
            t = time.perf_counter()
            n = df.count()
            times.append(time.perf_counter() - t)
        assert n == args.messages, (n, args.messages)
        rows.append((label, min(times), times))
    spark.stop()

    mb = size / 1e6
    print(f"\n{args.messages:,} messages, {mb:,.0f} MB of CommitLog files, {args.master}, "
          f"{args.split_mb} MiB ranges\n")
    print("| what | seconds | MB/s | vs raw read | runs (s) |")
    print("|---|---:|---:|---:|---|")
    for label, s, times in rows:
        runs = ", ".join(f"{t:.2f}" for t in times) if times else ""
        print(f"| {label} | {s:.2f} | {mb / s:,.0f} | {raw_s / s:.2f} | {runs} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
