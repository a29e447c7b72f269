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

from .helpers import SMALL, tree_bytes

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).parent
SETS = [a for k, v in SMALL.items() for a in ("--set", f"{k}={v}")]
CQ = "consumequeue"


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


def test_spark_submit_from_the_wheel_on_a_standalone_cluster(
        cluster: str, wheel: Path, executor_python: tuple[Path, Path], library_store: Path,
        tmp_path: Path) -> None:
    python, starts = executor_python
    env = cluster_env()
    env.pop("PYSPARK_PYTHON", None)
    quiet = f"-Dlog4j2.configurationFile={ROOT / 'conf' / 'log4j2.properties'}"  # shipped in the wheel
    done = subprocess.run(
        [str(Path(sys.executable).parent / "spark-submit"), "--master", cluster, "--py-files", str(wheel),
         "--driver-java-options", quiet,
         "--conf", f"spark.pyspark.python={python}",
         "--conf", f"spark.pyspark.driver.python={sys.executable}",
         str(ROOT / "jobs" / "rebuild_consumequeue.py"), "--store", str(library_store),
         "--output", str(tmp_path / "out"), "--split-bytes", "16384", *SETS],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert starts.is_file(), "the executors ran another Python than spark.pyspark.python"
    assert " INFO " not in done.stdout + done.stderr  # Spark's console is quiet
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
    assert " INFO " not in done.stdout + done.stderr
    assert tree_bytes(tmp_path / "out" / CQ) == tree_bytes(library_store / CQ)


def test_an_executor_that_cannot_see_the_store_names_the_path(spark, store_copy: Path) -> None:
    from rocketlake.transforms.commitlog_scan import parse_ranges, plan_ranges, ranges_frame

    ranges = plan_ranges(store_copy, SMALL["mappedFileSizeCommitLog"], 16384)
    missing = ranges[-1].path  # the driver listed it; the executors do not see it
    os.remove(missing)
    with pytest.raises(Exception) as caught:
        parse_ranges(ranges_frame(spark, ranges)).count()
    assert f"{missing}: no such CommitLog file on executor host" in str(caught.value)
    assert "must be a path every executor sees (a shared mount" in str(caught.value)
