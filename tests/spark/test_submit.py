"""End to end through real spark-submit of `jobs/rebuild.py` (one scan, both structures): a
library store rebuilt in place (names included: the library named them), and RocketMQ 4.9.8's
own store rebuilt to ``--output`` against the files RocketMQ wrote."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from goldens import GOLDEN_498

from .helpers import SMALL, tree_bytes

ROOT = Path(__file__).resolve().parents[2]


def submit(job: str, settings: dict, *args: str) -> subprocess.CompletedProcess:
    spark_submit = Path(sys.executable).parent / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    sets = [a for k, v in settings.items() for a in ("--set", f"{k}={v}")]
    return subprocess.run([str(spark_submit), "--master", "local[2]", str(ROOT / "jobs" / f"{job}.py"),
                           *args, *sets], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_spark_submit_rebuilds_a_library_store(store_copy: Path, library_store: Path) -> None:
    shutil.rmtree(store_copy / "consumequeue")
    shutil.rmtree(store_copy / "index")
    r = submit("rebuild", SMALL, "--store", str(store_copy), "--split-bytes", "16384")
    assert r.returncode == 0, r.stderr[-3000:]
    said = r.stdout + r.stderr  # spark-submit passes the driver's stderr on as stdout
    assert "audit-log" in said and "units for 4 topic(s)" in said and "keys for 4 topic(s)" in said
    assert tree_bytes(store_copy / "consumequeue") == tree_bytes(library_store / "consumequeue")
    assert tree_bytes(store_copy / "index") == tree_bytes(library_store / "index")
    assert not [p for p in store_copy.iterdir() if p.name.startswith(".")]  # no parts left


def test_spark_submit_rebuilds_rocketmqs_own_files(golden_store: Path, golden_settings: dict,
                                                    tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = submit("rebuild", golden_settings, "--store", str(golden_store), "--output", str(out),
               "--split-bytes", "5000")
    assert r.returncode == 0, r.stderr[-3000:]
    rocketmq = GOLDEN_498 / "store"
    assert tree_bytes(out / "consumequeue") == tree_bytes(rocketmq / "consumequeue")
    # RocketMQ named its index files by wall clock: compare contents in order.
    assert list(tree_bytes(out / "index").values()) == list(tree_bytes(rocketmq / "index").values())
    # no parts left; the output declares the topics whose queues it holds (config/topics.json)
    assert sorted(p.name for p in out.iterdir()) == ["config", "consumequeue", "index"]
    assert sorted(p.name for p in (out / "config").iterdir()) == ["topics.json"]
