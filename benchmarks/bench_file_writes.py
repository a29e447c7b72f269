"""Benchmark: what filling a new, pre-allocated CommitLog-sized file costs, by the way it is written.

    .venv/bin/python -m benchmarks.bench_file_writes [--dir var/bench/file-writes] [--mb 640]
        [--ways mmap,pwrite,populate] [--rounds 2]

Each way writes ``--mb`` MiB (3,000,000 records of the write benchmark) into a new 1 GiB file
made as the store makes its files (``safe_files.create_file``: ``posix_fallocate``), then unmaps
and deletes it:
- ``mmap``: a store into every page through a shared mapping of the file (how the encode kernel
  wrote records before it staged them; each first store to a page takes a page fault);
- ``pwrite``: 256 KiB runs copied from one reused buffer with ``pwrite`` (``commitlog._lay_out``);
- ``populate``: ``madvise(MADV_POPULATE_WRITE)`` over the range first, then the stores.
Prints wall and process CPU seconds per way, and microseconds per 4 KiB page. The ways alternate
``--rounds`` times; the first way of a process also meets memory the machine has not used for a
while (on a VM, the host may have taken it back: benchmarks/RESULTS.md).
"""
from __future__ import annotations

import argparse
import mmap
import os
import time
from pathlib import Path

import numpy as np

from rocketlake.store.safe_files import create_file

FILE_SIZE = 1 << 30
STAGE = 256 * 1024
MADV_POPULATE_WRITE = 23


def write(path: Path, way: str, n: int) -> tuple[float, float]:
    """Fill the first ``n`` bytes of a new file at ``path`` one ``way`` -> (wall s, CPU s)."""
    fd = create_file(path, FILE_SIZE)
    try:
        t, c = time.perf_counter(), time.process_time()
        if way == "pwrite":
            buf = np.ones(STAGE, dtype=np.uint8)
            for pos in range(0, n, STAGE):
                os.pwrite(fd, buf.data, pos)
        else:
            mm = mmap.mmap(fd, FILE_SIZE)
            if way == "populate":
                mm.madvise(MADV_POPULATE_WRITE, 0, n)
            view = np.frombuffer(mm, dtype=np.uint8)
            view[:n:mmap.PAGESIZE] = 1
            del view
            mm.close()
        return time.perf_counter() - t, time.process_time() - c
    finally:
        os.close(fd)
        path.unlink()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=Path("var/bench/file-writes"))
    ap.add_argument("--mb", type=int, default=640)
    ap.add_argument("--ways", default="mmap,pwrite,populate")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    a.dir.mkdir(parents=True, exist_ok=True)
    n = a.mb << 20
    for r in range(a.rounds):
        for way in a.ways.split(","):
            wall, cpu = write(a.dir / f"file-{way}", way, n)
            print(f"round {r} {way:9s} wall {wall:.3f} s  CPU {cpu:.3f} s  "
                  f"{cpu / (n / mmap.PAGESIZE) * 1e6:.2f} us CPU per page", flush=True)


if __name__ == "__main__":
    main()
