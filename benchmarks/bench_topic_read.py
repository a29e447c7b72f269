"""Benchmark: reading one topic through its ConsumeQueues (``transforms.topic_reads``) vs walking
the whole CommitLog.

    .venv/bin/python -m benchmarks.bench_topic_read [--messages 1000000] [--master local[2]]

Writes (once, reused when present) a store of ``--messages`` messages of 1,000-byte bodies (about
1.1 GB of CommitLog with the default 1,000,000) with the library's ``put_batch``: topic ``p1``
holds 1% of the messages, ``p10`` 10%, ``p30`` 30%, ``rest`` the others, interleaved (every
100 messages: 1, 10, 30, 59), 8 queues each. Then, in one run:

- Spark: ``spark.read.format("rocketmq").option("topics", "p1")`` counted with every column,
  walked (no ``consumable``) and through the ConsumeQueues (``consumable=true``): the target is
  >= 10x. Rows are checked equal (same offsets) first.
- In process, one core, no Spark: both paths' decode-and-build time for each topic's share (the
  ConsumeQueue path forced past ``MAX_SHARE``), to show where it stops paying.

Each figure is the best of ``--runs``; page-cached files (the store was just written or read).
Results are printed as Markdown tables, ready for benchmarks/RESULTS.md.
"""
from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.pandas.types import to_arrow_schema

from rocketlake.store import Message, MessageStore
from rocketlake.transforms import RocketMQDataSource, topic_reads
from rocketlake.transforms.commitlog_scan import commitlog_files

ROOT = Path(__file__).resolve().parent.parent
SHARES = {"p1": 1, "p10": 10, "p30": 30, "rest": 59}


def topic_of(j: int) -> str:
    k = j % 100
    return "p1" if k == 0 else "p10" if k <= 10 else "p30" if k <= 40 else "rest"


def make_store(root: Path, messages: int) -> None:
    marker = root / ".complete"
    if marker.exists() and marker.read_text() == str(messages):
        return
    shutil.rmtree(root, ignore_errors=True)
    body = bytes(range(250)) * 4
    with MessageStore(root) as s:
        for i in range(0, messages, 10_000):
            s.put_batch([Message(topic=topic_of(j), body=body, queue_id=j % 8, tags=f"t{j % 16}",
                                 keys=f"order-{j}") for j in range(i, min(messages, i + 10_000))])
    marker.write_text(str(messages))


def best(fn, runs: int) -> tuple[float, object]:
    out, times = None, []
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def in_process(store: Path, topic: str, runs: int) -> tuple[float, float, int]:
    """(walk s, ConsumeQueue s, rows) of reading ``topic`` with every column, in this process."""
    ds = RocketMQDataSource(CaseInsensitiveDict({"path": str(store), "topics": topic}))
    reader = ds.reader(ds.schema())

    def walk() -> int:
        return sum(b.num_rows for p in reader.partitions() for b in reader.read(p))

    arrow = to_arrow_schema(reader.schema, timezone="UTC")
    cl = commitlog_files(store, reader.cfg)

    def through_cq() -> int:
        plan = topic_reads.plan(store, reader.opts.file_size("mappedFileSizeConsumeQueue"), cl[0][1],
                                {topic}, -(1 << 63), 1 << 63, 64 << 20, max_share=1.0)
        assert plan is not None
        return sum(b.num_rows for part in plan.parts for b in topic_reads.read_part(
            part, store, reader.cfg, True, arrow, reader.delay_levels_ms))

    walk_s, n = best(walk, runs)
    cq_s, m = best(through_cq, runs)
    assert n == m, (topic, n, m)
    return walk_s, cq_s, int(n)  # type: ignore[call-overload]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--dir", type=Path, default=ROOT / "var" / "bench" / "topic-read")
    args = p.parse_args(argv)
    store = args.dir / "store"
    make_store(store, args.messages)
    size = sum(f.stat().st_size for f in (store / "commitlog").iterdir())

    from rocketlake.jobs.spark_session import build_session

    spark = build_session("bench-topic-read", master=args.master, delta=False,
                          conf={"spark.ui.enabled": "false"})
    walk_df = spark.read.format("rocketmq").option("topics", "p1").load(str(store))
    cq_df = (spark.read.format("rocketmq").option("topics", "p1").option("consumable", "true")
             .load(str(store)))
    want = sorted(r[0] for r in walk_df.select("commitlog_offset").collect())
    assert sorted(r[0] for r in cq_df.select("commitlog_offset").collect()) == want
    walk_s, _ = best(walk_df.count, args.runs)
    cq_s, _ = best(cq_df.count, args.runs)
    spark.stop()

    print(f"\n{args.messages:,} messages, {size / 2**30:.2f} GiB of CommitLog files, topic p1 "
          f"({len(want):,} records, 1%), every column, {args.master}, best of {args.runs}\n")
    print("| path | seconds | speed-up |")
    print("|---|---:|---:|")
    print(f"| walk of the whole CommitLog (`topics=p1`) | {walk_s:.2f} | 1.0 |")
    print(f"| through the ConsumeQueues (`topics=p1`, `consumable=true`) | {cq_s:.2f} | "
          f"{walk_s / cq_s:.1f}x |")
    print("\nIn process, one core, no Spark (decode + build every column):\n")
    print("| topic | share of records | rows | walk s | ConsumeQueue s | speed-up |")
    print("|---|---:|---:|---:|---:|---:|")
    for topic, share in SHARES.items():
        w, c, n = in_process(store, topic, args.runs)
        print(f"| {topic} | {share}% | {n:,} | {w:.2f} | {c:.2f} | {w / c:.1f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
