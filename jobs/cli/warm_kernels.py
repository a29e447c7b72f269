"""``python -m rocketlake.jobs.cli.warm_kernels [--spark]``: compile every kernel the commands
call into the package's kernel cache (:mod:`rocketlake.store.kernels.cache`), so that the first
command of a fresh install, and an executor's first task, load machine code instead of compiling
it. ``make venv`` and ``make dist`` run it; the wheel ships what it compiled.

It runs the commands themselves on a small sample store in a temporary directory (ingest as
JSON Lines and Parquet, dump, get, query, verify, lag, topic-status, the read commands again on
a store of one message, a writer's open after a crash and its puts of plain messages, and with
``--spark`` the Spark rebuild on ``local[1]``, whose Python workers call the scan's kernels), so
it compiles exactly the signatures they use.
Prints the cache folder and how many kernels were compiled.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rocketlake.jobs.cli import main as rocketlake
from rocketlake.jobs.cli import pipeline, sample
from rocketlake.store import Message, MessageStore
from rocketlake.store.config import load_config
from rocketlake.store.kernels import crc
from rocketlake.store.kernels.cache import cache_folder

#: small files, so the sample fills more than one of each (the rolling paths run too)
SMALL = ["--set", "mappedFileSizeCommitLog=65536", "--set", "mappedFileSizeConsumeQueue=600",
         "--set", "maxIndexNum=64", "--set", "maxHashSlotNum=16"]


def _run(*argv: str) -> None:
    """Run one `rocketlake` command; its output is dropped, a failure raises."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        code = rocketlake([*argv])
    if code not in (0, 1):  # 1: findings (verify, a rebuild that differs), still a full run
        raise RuntimeError(f"rocketlake {' '.join(argv)} exited {code}: {err.getvalue()[-2000:]}")


def warm(work: Path, spark: bool) -> None:
    """Run the commands on a sample store under ``work``."""
    settings = dict(s.split("=") for s in SMALL[1::2])
    store = work / "store"
    pipeline.ingest(store, 400, settings)  # put_batch, with the sample's consumer offsets
    events = list(sample.events(400))
    jsonl = work / "events.jsonl"
    jsonl.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    _run("ingest", "--create", "--store", str(work / "from-json"), *SMALL, str(jsonl))
    simple = [{"topic": e["topic"], "body": str(e.get("body", "")).encode(), "tags": e.get("tags")}
              for e in events]
    pq.write_table(pa.Table.from_pylist(simple), work / "events.parquet")
    _run("ingest", "--create", "--store", str(work / "from-parquet"), *SMALL, str(work / "events.parquet"))
    s = ["--store", str(store), *SMALL]
    for what in ("commitlog", "consumequeue", "index"):
        for fmt in ("json", "text"):
            _run("dump", what, *s, "--format", fmt)
    _run("get", *s, "--topic", "orders", "--queue", "0", "--tags", "created || paid")
    key = next(e["keys"] for e in events if e["topic"] == "orders" and e.get("keys"))
    _run("query", *s, "--topic", "orders", "--key", key if isinstance(key, str) else key[0])
    _run("query", *s, "--topic", "orders", "--queue", "0", "--time", "0")
    for command in ("verify", "lag", "topic-status"):
        _run(command, *s)
    one = work / "one"  # batches of one record: contiguous column views, signatures of their own
    pipeline.ingest(one, 1, settings)
    for argv in (["dump", "commitlog"], ["dump", "consumequeue"], ["dump", "index"], ["verify"],
                 ["lag"], ["topic-status"]):
        _run(*argv, "--store", str(one), *SMALL)
    (store / "abort").write_bytes(b"")  # a writer that died: the next open recovers abnormally
    with MessageStore(store, load_config(settings)) as ms:  # and plain messages: no tags, no keys
        ms.put(Message("orders", b"m"))
        ms.put_batch([Message("orders", b"m%d" % i, i % 2) for i in range(8)])
    if spark:
        _run("rebuild", *s, "--output", str(work / "rebuilt"), "--master", "local[1]")
    crc.table_callback()  # the CRC a machine without libdeflate binds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rocketlake.jobs.cli.warm_kernels",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--spark", action="store_true", help="also run the Spark rebuild (local[1])")
    a = ap.parse_args(argv)
    folder = cache_folder()
    if folder is None:
        print("no writable kernel cache folder: nothing to fill")
        return 2
    before = len(list(folder.glob("*.nbc")))
    with tempfile.TemporaryDirectory(prefix="rocketlake-warm-") as work:
        warm(Path(work), a.spark)
    print(f"{folder}: {len(list(folder.glob('*.nbc'))) - before} kernel signatures compiled")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
