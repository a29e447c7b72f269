"""The jobs on a real Spark standalone cluster: a master and a worker JVM started from the installed
pyspark (``spark-class``) on 127.0.0.1, whose executors run a Python that has the dependencies but
not rocketlake. The package reaches them from the wheel (``spark-submit --py-files``) or from the
driver itself (``rocketlake <job> --master spark://...``, client mode); the rebuilt files are the
library's, byte for byte. ``spark.pyspark.python`` / ``PYSPARK_PYTHON`` name the executors'
Python and are respected, and the log4j2 configuration shipped with the package keeps Spark's
console free of INFO lines.
"""
from __future__ import annotations

import json
import os
import re
import signal
import site
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from rocketlake.jobs.offsets_lake import current_rows
from rocketlake.jobs.spark_session import delta_submit_args
from rocketlake.store import Message, MessageStore
from rocketlake.store.config_files import write_config

from .helpers import SMALL, tree_bytes

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).parent
SETS = [a for k, v in SMALL.items() for a in ("--set", f"{k}={v}")]
CQ = "consumequeue"

#: a line of Spark's own log4j console at INFO (rocketlake's own INFO lines are its output)
SPARK_INFO = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d INFO ", re.MULTILINE)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_env() -> dict[str, str]:
    """This environment without its Python path (the executors must not import rocketlake from it)."""
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("PYTHONPATH", None)
    return env


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone master and one worker (1 core, 1 GiB); yields the master URL."""
    work = tmp_path_factory.mktemp("cluster")
    port, master_ui, worker_ui = free_port(), free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    commands = {
        "master": [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                   "--port", str(port), "--webui-port", str(master_ui)],
        "worker": [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--cores", "1",
                   "--memory", "1g", "--webui-port", str(worker_ui), "--work-dir", str(work / "work")],
    }
    procs: list[subprocess.Popen] = []
    try:
        for name, command in commands.items():
            with open(work / f"{name}.log", "wb") as log:
                procs.append(subprocess.Popen(command, env=cluster_env(), stdout=log,
                                              stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{master_ui}/json/", timeout=2) as r:
                    if json.load(r).get("aliveworkers", 0) >= 1:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, (work / "worker.log").read_text()[-3000:]
            time.sleep(0.5)
        yield url
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@pytest.fixture()
def executor_python(tmp_path: Path) -> tuple[Path, Path]:
    """A Python with this one's packages but not rocketlake (``-S``: no ``.pth`` files, so no
    editable install), which notes each start in a file; returns (the script, that file)."""
    starts = tmp_path / "executor-python-starts"
    script = tmp_path / "executor-python"
    path = ":".join(site.getsitepackages())
    script.write_text(f'#!/bin/sh\necho "$$" >> "{starts}"\n'
                      f'PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{path}" exec "{sys.executable}" -S "$@"\n')
    script.chmod(0o755)
    return script, starts


def submit(cluster: str, wheel: Path, python: Path, cwd: Path, job: str, *args: str,
           delta: bool = False) -> subprocess.CompletedProcess[str]:
    """``spark-submit --master <cluster> --py-files <wheel> jobs/<job> args`` (with the Delta jars
    if ``delta``), the executors on ``python``; asserts it succeeded and returns the process."""
    env = cluster_env()
    env.pop("PYSPARK_PYTHON", None)
    quiet = f"-Dlog4j2.configurationFile={ROOT / 'conf' / 'log4j2.properties'}"  # shipped in the wheel
    done = subprocess.run(
        [str(Path(sys.executable).parent / "spark-submit"), "--master", cluster, "--py-files", str(wheel),
         *(delta_submit_args() if delta else []), "--driver-java-options", quiet,
         "--conf", f"spark.pyspark.python={python}",
         "--conf", f"spark.pyspark.driver.python={sys.executable}",
         "--conf", "spark.sql.shuffle.partitions=2", str(ROOT / "jobs" / job), *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done


def test_spark_submit_from_the_wheel_on_a_standalone_cluster(
        cluster: str, wheel: Path, executor_python: tuple[Path, Path], library_store: Path,
        tmp_path: Path) -> None:
    python, starts = executor_python
    done = submit(cluster, wheel, python, tmp_path, "rebuild_consumequeue.py", "--store",
                  str(library_store), "--output", str(tmp_path / "out"), "--split-bytes", "16384",
                  *SETS)
    assert starts.is_file(), "the executors ran another Python than spark.pyspark.python"
    assert not SPARK_INFO.search(done.stdout + done.stderr)  # Spark's console is quiet
    assert tree_bytes(tmp_path / "out" / CQ) == tree_bytes(library_store / CQ)


def test_the_command_in_client_mode_ships_the_package(
        cluster: str, executor_python: tuple[Path, Path], library_store: Path, tmp_path: Path) -> None:
    python, starts = executor_python
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": str(python)}
    done = subprocess.run(
        [sys.executable, "-m", "rocketlake.jobs.cli", "rebuild-consumequeue", "--master", cluster,
         "--store", str(library_store), "--output", str(tmp_path / "out"), "--split-bytes", "16384",
         *SETS], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert starts.is_file()
    assert not SPARK_INFO.search(done.stdout + done.stderr)
    assert tree_bytes(tmp_path / "out" / CQ) == tree_bytes(library_store / CQ)


def test_an_executor_that_cannot_see_the_store_names_the_path(spark, store_copy: Path) -> None:
    from rocketlake.store.config import load_config
    from rocketlake.transforms.commitlog_scan import plan_ranges
    from rocketlake.transforms.store_rebuild import walk_parts

    ranges = plan_ranges(store_copy, load_config(SMALL), 16384)
    missing = ranges[-1].path  # the driver listed it; the executors do not see it
    os.remove(missing)
    with pytest.raises(Exception) as caught:
        walk_parts(spark.sparkContext, ranges, "", (), False, False)
    assert f"{missing}: no such CommitLog file on executor host" in str(caught.value)
    assert "must be a path every executor sees (a shared mount" in str(caught.value)


def test_publish_offsets_from_the_wheel_on_the_cluster(
        cluster: str, wheel: Path, executor_python: tuple[Path, Path], store_copy: Path, spark,
        tmp_path: Path) -> None:
    python, starts = executor_python
    with MessageStore(store_copy, read_only=True, **SMALL) as ms:
        ranges = ms.queue_ranges()
    committed = {("orders", "g1"): {q: ranges[("orders", q)][1] - q - 1 for q in range(4)},
                 ("audit-log", "g2"): {q: q for q in range(4)}}
    write_config(store_copy / "config" / "consumerOffset.json", {"offsetTable": {
        f"{topic}@{group}": {str(q): o for q, o in offsets.items()}
        for (topic, group), offsets in committed.items()}})
    lake = tmp_path / "lake"
    submit(cluster, wheel, python, tmp_path, "publish_offsets.py", "--store", str(store_copy),
           "--lake", str(lake), "--store-name", "s1",
           "--snapshot-time", "2026-11-23T04:00:00+00:00", *SETS, delta=True)
    # the snapshot's rows are computed on the driver: the cluster runs only the Delta commit's
    # JVM tasks, no Python worker
    assert not starts.exists()
    queues = current_rows(spark, str(lake), "queue")
    assert {(r.topic, r.queue_id): (r.min_offset, r.max_offset) for r in queues.collect()} == ranges
    consumers = current_rows(spark, str(lake), "consumer").collect()
    assert {(r.consumer_group, r.topic, r.queue_id): (r.consumer_offset, r.max_offset, r.lag)
            for r in consumers} == {
        (group, topic, q): (o, ranges[(topic, q)][1], ranges[(topic, q)][1] - o)
        for (topic, group), offsets in committed.items() for q, o in offsets.items()}


def test_compact_from_the_wheel_on_the_cluster(
        cluster: str, wheel: Path, executor_python: tuple[Path, Path], spark, tmp_path: Path) -> None:
    python, _ = executor_python
    root, lake, size, now = tmp_path / "store", tmp_path / "lake", 16384, 1_795_000_000_000
    with MessageStore(root, mappedFileSizeCommitLog=size) as ms:
        ms.put_batch([Message("orders", f"event-{i}".encode() * 20, i % 2) for i in range(300)])
    names = sorted(p.name for p in (root / "commitlog").iterdir())
    assert len(names) >= 5
    for age_h, name in zip([80] * 3 + [1] * (len(names) - 3), names, strict=True):
        os.utime(root / "commitlog" / name, (now / 1000 - age_h * 3600,) * 2)
    with MessageStore(root, read_only=True, mappedFileSizeCommitLog=size) as ms:
        expired = sum(1 for _ in ms.commitlog.walk_records(int(names[0]), stop_at=int(names[3])))
    assert expired > 0
    submit(cluster, wheel, python, tmp_path, "compact.py", "--store", str(root), "--lake", str(lake),
           "--store-name", "s1",
           "--set", f"mappedFileSizeCommitLog={size}", "--set", "fileReservedTime=72",
           "--now", str(now), delta=True)
    assert sorted(p.name for p in (root / "commitlog").iterdir()) == names[3:]
    archive = spark.read.format("delta").load(str(lake / "messages_archive"))
    assert archive.count() == expired
    assert {r.commitlog_file for r in archive.select("commitlog_file").distinct().collect()} == \
        set(names[:3])
