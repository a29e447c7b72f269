"""End to end through real spark-submit: delete a library store's ConsumeQueues and index,
rebuild them with both jobs, compare every byte (names included: the library named them)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from .helpers import SMALL, tree_bytes

ROOT = Path(__file__).resolve().parents[2]


def submit(job: str, *args: str) -> subprocess.CompletedProcess:
    spark_submit = Path(sys.executable).parent / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    sets = [a for k, v in SMALL.items() for a in ("--set", f"{k}={v}")]
    return subprocess.run([str(spark_submit), "--master", "local[2]", str(ROOT / "jobs" / f"{job}.py"),
                           *args, *sets], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_spark_submit_rebuilds_a_library_store(store_copy: Path, library_store: Path) -> None:
    shutil.rmtree(store_copy / "consumequeue")
    shutil.rmtree(store_copy / "index")
    for job in ("rebuild_consumequeue", "rebuild_index"):
        r = submit(job, "--store", str(store_copy), "--split-bytes", "16384")
        assert r.returncode == 0, r.stderr[-3000:]
    said = r.stdout + r.stderr  # spark-submit passes the driver's stderr on as stdout
    assert "audit-log" in said and "keys for 4 topic(s)" in said
    assert tree_bytes(store_copy / "consumequeue") == tree_bytes(library_store / "consumequeue")
    assert tree_bytes(store_copy / "index") == tree_bytes(library_store / "index")
