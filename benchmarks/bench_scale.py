"""Benchmark: verify, the rebuilds and the Spark scan on stores of 1 GiB and 20 GiB (issue 27,
"Scale in size"): time linear in bytes, and the peak RSS of every process.

    .venv/bin/python -m benchmarks.bench_scale [--files 1 20] [--dir var/bench/scale]
        [--ops verify,rebuild,spark-rebuild,spark-scan] [--master local[2]]

Writes (once, reused when present) one store per ``--files`` count: that many full 1 GiB
CommitLog files (the last within 2 MiB of its end), 1 KiB bodies, 4 topics x 8 queues, a tag and
one key each, with the fastest writer (``MessageStore.put_table``, 65,536 rows per call). Then
runs each operation on each store in a process of its own (so each peak is that operation's):
- ``verify``: ``store.verify.verify(root)``;
- ``rebuild``: ``store.single_process_rebuild.rebuild`` of both structures into a scratch place;
- ``spark-rebuild``: ``jobs.rebuild.rebuild`` of both structures (``--output``) on ``--master``;
- ``spark-scan``: ``spark.read.format("rocketmq").load(root)``, every column, written to the
  ``noop`` sink.
Spark operations run once on a one-message store first (session start, kernels loaded in the
Python workers: not timed, and the peaks start again after it). A sampler reads ``VmHWM`` and the
CPU ticks of the process and all its descendants (the JVM, the Python workers) every 0.1 s; the
table shows wall and CPU seconds, MB/s of CommitLog data and the peak RSS per kind of process.
Run it under a low load: the CPU column shows how much of the wall time was this benchmark's.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GIB = 1 << 30
OPS = ("verify", "rebuild", "spark-rebuild", "spark-scan")
TABLE_ROWS = 65_536
BODY = 1024


def make_store(root: Path, files: int) -> int:
    """A store of ``files`` full 1 GiB CommitLog files (reused when there); its CommitLog bytes."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from rocketlake.store import MessageStore

    marker = root / ".complete"
    if marker.exists():
        return int(marker.read_text())
    shutil.rmtree(root, ignore_errors=True)
    j = np.arange(TABLE_ROWS)
    base = pa.table({"topic": pa.array([f"bench-{i % 4}" for i in range(TABLE_ROWS)]),
                     "body": pa.array([bytes(range(256)) * (BODY // 256)] * TABLE_ROWS, pa.binary()),
                     "queue_id": pa.array(j % 8, pa.int32()),
                     "tags": pa.array([f"t{i % 16}" for i in range(TABLE_ROWS)]),
                     "keys": pa.array([str(i) for i in range(TABLE_ROWS)])})
    target = files * GIB - (2 << 20)
    record = 1200  # bytes per record, at least: chunks near the end stay below the target
    chunk = 0
    with MessageStore(root) as s:
        while (size := s.commitlog.max_offset) < target:
            rows = min(TABLE_ROWS, max(1, (target - size) // record))
            keys = pc.binary_join_element_wise(pa.scalar(f"order-{chunk}-"), base["keys"], "")
            s.put_table(base.slice(0, rows).set_column(4, "keys", keys.slice(0, rows)))
            chunk += 1
        size = s.commitlog.max_offset
    marker.write_text(str(size))
    return size


class Sampler:
    """Peak RSS (``VmHWM``) and CPU ticks of this process and its descendants, sampled."""

    def __init__(self, every: float = 0.1) -> None:
        self.me = os.getpid()
        self.every = every
        self.peak: dict[int, int] = {}   # pid -> VmHWM bytes
        self.ticks: dict[int, int] = {}  # pid -> utime + stime, last seen
        self.kind: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sample()
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def sample(self) -> None:
        parent: dict[int, int] = {}
        stats: dict[int, list[str]] = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent[int(name)] = int(fields[1])
            stats[int(name)] = fields
        for pid, fields in stats.items():
            p, mine = pid, False
            while p > 1:
                if p == self.me:
                    mine = True
                    break
                p = parent.get(p, 0)
            if not mine:
                continue
            try:
                with open(f"/proc/{pid}/status") as f:
                    hwm = next(int(line.split()[1]) << 10 for line in f if line.startswith("VmHWM"))
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read()
            except (OSError, StopIteration):
                continue
            self.peak[pid] = max(self.peak.get(pid, 0), hwm)
            self.ticks[pid] = int(fields[11]) + int(fields[12])
            # named at every sample: a process seen between its fork and exec shows its parent's
            self.kind[pid] = ("driver" if pid == self.me else
                              "JVM" if b"java" in cmd.split(b"\0")[0] else
                              "Python workers" if b"python" in cmd else "other")

    def reset_peaks(self) -> None:
        """Start the peaks again from now (``clear_refs`` 5 resets a process's ``VmHWM``)."""
        self.sample()
        for pid in list(self.peak):
            try:
                with open(f"/proc/{pid}/clear_refs", "w") as f:
                    f.write("5")
            except OSError:
                pass
        self.peak.clear()
        self.sample()

    def cpu_seconds(self) -> float:
        return sum(self.ticks.values()) / os.sysconf("SC_CLK_TCK")

    def peaks(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for pid, hwm in self.peak.items():
            out[self.kind[pid]] = max(out.get(self.kind[pid], 0), hwm)
        return out


def run_op(op: str, store: Path, scratch: Path, tiny: Path, master: str) -> dict[str, Any]:
    """Run ``op`` once on ``store`` in this process (its outputs under ``scratch``, removed after)."""
    from rocketlake.store.config import load_config

    with Sampler() as sampler:
        spark = None
        if op.startswith("spark"):
            from rocketlake.jobs.rebuild import rebuild as spark_rebuild
            from rocketlake.jobs.spark_session import build_session

            spark = build_session("bench-scale", master=master, delta=False,
                                  conf={"spark.ui.enabled": "false"})
            cfg = load_config()

            def call(root: Path) -> object:
                if op == "spark-rebuild":
                    shutil.rmtree(scratch, ignore_errors=True)
                    return spark_rebuild(spark, root, cfg, scratch).end.records
                spark.read.format("rocketmq").load(str(root)).write.format("noop").mode("overwrite").save()
                return None
            call(tiny)  # session warm: kernels loaded in the workers
        elif op == "verify":
            from rocketlake.store.verify import verify

            def call(root: Path) -> object:
                report = verify(root)
                return len(report.problems)
        else:
            from rocketlake.store.single_process_rebuild import rebuild

            def call(root: Path) -> object:
                shutil.rmtree(scratch, ignore_errors=True)
                return rebuild(root, scratch).records
        sampler.reset_peaks()  # the peaks of the operation, not of the warm-up
        cpu0, t0 = sampler.cpu_seconds(), time.perf_counter()
        out = call(store)
        wall = time.perf_counter() - t0
        sampler.sample()
        cpu = sampler.cpu_seconds() - cpu0
        if spark is not None:
            spark.stop()
    shutil.rmtree(scratch, ignore_errors=True)
    return {"op": op, "seconds": wall, "cpu": cpu, "peaks": sampler.peaks(), "result": out}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--files", type=int, nargs="+", default=[1, 20])
    p.add_argument("--dir", type=Path, default=ROOT / "var" / "bench" / "scale")
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--master", default="local[2]")
    p.add_argument("--one", nargs=2, metavar=("OP", "STORE"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    tiny = args.dir / "tiny"
    if args.one:
        op, store = args.one
        print(json.dumps(run_op(op, Path(store), args.dir / "out", tiny, args.master)), flush=True)
        return 0
    if not (tiny / ".complete").exists():
        from rocketlake.store import Message, MessageStore
        with MessageStore(tiny) as s:
            s.put(Message(topic="bench-0", body=b"x", tags="t0", keys="k"))
        (tiny / ".complete").write_text("1")
    rows = []
    for files in args.files:
        t = time.perf_counter()
        size = make_store(args.dir / f"{files}gib", files)
        print(f"store of {files} file(s): {size / 1e6:,.0f} MB of CommitLog "
              f"({time.perf_counter() - t:.1f} s to write or find)", flush=True)
        for op in args.ops.split(","):
            cmd = [sys.executable, "-m", "benchmarks.bench_scale", "--dir", str(args.dir),
                   "--master", args.master, "--one", op, str(args.dir / f"{files}gib")]
            res = subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True)
            r = json.loads(res.stdout.strip().splitlines()[-1])
            r.update(files=files, size=size)
            print(json.dumps(r), flush=True)
            rows.append(r)
    print(f"\n{os.cpu_count()} cores, {args.master}; load average at the end "
          f"{os.getloadavg()[0]:.1f}\n")
    print("| operation | store | seconds | CPU s | MB/s | peak RSS (MiB) per process | result |")
    print("|---|---|---:|---:|---:|---|---|")
    for r in rows:
        peaks = ", ".join(f"{k} {v / (1 << 20):,.0f}" for k, v in sorted(r["peaks"].items()))
        print(f"| {r['op']} | {r['files']} GiB | {r['seconds']:.1f} | {r['cpu']:.1f} | "
              f"{r['size'] / r['seconds'] / 1e6:,.0f} | {peaks} | {r['result']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
