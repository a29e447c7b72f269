"""`rocketlake archive`: the store streamed into the lake's archive, exactly once, also when the
job is killed with SIGKILL at random points while a writer process appends."""
from __future__ import annotations

import base64
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from rocketlake.jobs import compact
from rocketlake.jobs.archive_stream import archive_stream, checkpoint_uri
from rocketlake.jobs.lake import lake_uri
from rocketlake.store import Message, MessageStore
from rocketlake.store.config import load_config

from .helpers import rocketlake, sets

#: 256 KiB CommitLog files: a few minutes of the writer span several
LIVE = {"mappedFileSizeCommitLog": 262144, "mappedFileSizeConsumeQueue": 6000}

WRITER = """
import sys, time
from pathlib import Path
from rocketlake.store import Message, MessageStore
root, stop, n = Path(sys.argv[1]), Path(sys.argv[2]), 0
with MessageStore(root, mappedFileSizeCommitLog=262144, mappedFileSizeConsumeQueue=6000) as s:
    print("open", flush=True)
    while not stop.exists():
        s.put_batch([Message(topic=("a", "b")[i % 2], body=f"m-{i}".encode() * (1 + i % 5),
                             queue_id=i % 3) for i in range(n, n + 20)])
        n += 20
        time.sleep(0.02)
print(n, flush=True)
"""


def archive_job(store: Path, lake: Path, *trigger: str) -> subprocess.Popen:
    """`rocketlake archive` as a process of its own group (the Spark JVM and Python workers with it)."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "rocketlake"), "archive", "--store", str(store), "--lake",
         str(lake), "--store-name", "live", "--master", "local[2]", *sets(LIVE), *trigger], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def commits(table: Path) -> int:
    log = table / "_delta_log"
    return len(list(log.glob("*.json"))) if log.exists() else 0


def test_exactly_once_under_kill_9_while_a_writer_appends(spark, tmp_path: Path) -> None:
    store, lake, stop = tmp_path / "store", tmp_path / "lake", tmp_path / "stop"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(store), str(stop)],
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None and writer.stdout.readline() == "open\n"
    rng = random.Random(24)
    table = lake / "messages_archive"
    try:
        for _ in range(3):  # each round: killed after 0-3 more batches committed, at a random time
            before = commits(table)
            job = archive_job(store, lake, "--trigger", "1s")
            wait_for = before + rng.randint(1, 3)
            deadline = time.monotonic() + 120
            while commits(table) < wait_for and time.monotonic() < deadline and job.poll() is None:
                time.sleep(0.2)
            time.sleep(rng.uniform(0, 1.5))  # somewhere inside the next batch, or between two
            assert job.poll() is None, job.communicate()
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    finally:
        stop.touch()
        out, _ = writer.communicate(timeout=60)
    assert writer.returncode == 0
    written = int(out.split()[0])
    final = archive_job(store, lake)
    out, err = final.communicate(timeout=300)
    assert final.returncode == 0, err
    assert json.loads(out.splitlines()[-1])["checkpoint"] == checkpoint_uri(lake_uri(str(lake)), "live")

    dump = rocketlake("dump", "commitlog", "--store", str(store), *sets(LIVE))
    assert dump.returncode == 0, dump.stderr
    want = [json.loads(line) for line in dump.stdout.splitlines()]
    assert len(want) == written
    rows = spark.read.format("delta").load(str(table)).select("store", "commitlog_offset", "body").collect()
    assert {r.store for r in rows} == {"live"}
    assert len(rows) == len(want)
    assert len({r.commitlog_offset for r in rows}) == len(want)
    got = sorted((r.commitlog_offset, bytes(r.body)) for r in rows)
    assert got == sorted((w["commitlog_offset"], base64.b64decode(w["body_b64"])) for w in want)


def test_compact_expires_only_what_the_archive_holds_and_never_archives_twice(spark, tmp_path: Path) -> None:
    """The stream archived the first 200 records (file 0 whole, part of file 1). While its
    checkpoint exists compact expires file 0 only and writes nothing; without one it archives just
    the records files 1-3 lack; the stream started again goes on where the archive ends."""
    root, lake = tmp_path / "s", lake_uri(str(tmp_path / "lake"))
    sizes = {"mappedFileSizeCommitLog": 16384, "mappedFileSizeConsumeQueue": 400}
    cfg = load_config(sizes)

    def put(a: int, b: int) -> None:
        with MessageStore(root, **sizes) as ms:
            ms.put_batch([Message("t", f"e-{i}".encode() * 8) for i in range(a, b)])

    def archived() -> list[tuple[int, bytes]]:
        rows = spark.read.format("delta").load(f"{lake}/messages_archive").collect()
        return sorted((r.commitlog_offset, bytes(r.body)) for r in rows)

    put(0, 200)
    assert archive_stream(root, cfg, lake, "s1", master="local[2]")["rows"] == 200
    put(200, 600)
    with MessageStore(root, read_only=True, **sizes) as ms:
        every = [(r.commitlog_offset, r.body) for r in ms.commitlog.walk_records(check_crc=True)]
    files = sorted((root / "commitlog").iterdir())
    assert len(files) == 5 and every[199][0] // 16384 == 1  # record 199 is in file 1
    old = time.time() - 80 * 3600
    for f in files[:-1]:
        os.utime(f, (old, old))

    first = compact.maintain(root, cfg, lake, "s1", master="local[2]")
    assert first["plan"]["delete"] == [files[0].name] and first["archived"] == {}
    assert "archive stream (archive) holds" in first["plan"]["kept"][files[1].name]
    assert archived() == every[:200] and not files[0].exists() and files[1].exists()

    shutil.rmtree(tmp_path / "lake" / "_checkpoints")  # no stream: compact archives what is missing
    second = compact.maintain(root, cfg, lake, "s1", master="local[2]")
    assert second["plan"]["delete"] == [f.name for f in files[1:4]]
    in_files = [r for r in every if r[0] < int(files[4].name)]
    assert sum(second["archived"].values()) == len(in_files) - 200
    assert archived() == in_files

    assert archive_stream(root, cfg, lake, "s1", master="local[2]")["rows"] == len(every) - len(in_files)
    assert archived() == every
