"""The shared session: settings from jobs.spark_session, and Delta Lake tables work; the Delta jars
come from the per-user cache, whatever the working directory."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rocketlake.jobs.delta_jars import delta_jars

#: the per-user Ivy folder (XDG base directory rule)
IVY = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rocketlake" / "ivy"
#: what Spark's Ivy resolution prints on stderr (and nothing else does)
IVY_LINES = (":: loading settings", "Ivy Default Cache", "The jars for the packages stored in",
             ":: resolving dependencies", "downloading", "artifacts copied", "already retrieved")


def test_session_settings(spark) -> None:
    """What build_session sets on the session it made (the fixture passes no time zone)."""
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    # ... and times render in it: epoch 0 is midnight of 1 January 1970, whatever the machine's zone.
    assert spark.sql("SELECT CAST(timestamp_millis(0) AS STRING)").first()[0] == "1970-01-01 00:00:00"
    assert spark.conf.get("spark.sql.extensions") == "io.delta.sql.DeltaSparkSessionExtension"
    jars = spark.sparkContext.getConf().get("spark.jars").split(",")
    assert str(IVY / "jars" / "io.delta_delta-spark_4.2_2.13-4.4.0.jar") in jars
    assert spark.sparkContext.getConf().get("spark.jars.packages") is None


def test_delta_table_round_trip(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    spark.range(5).write.format("delta").save(path)
    spark.range(5, 8).write.format("delta").mode("append").save(path)
    assert sorted(r.id for r in spark.read.format("delta").load(path).collect()) == list(range(8))
    assert (tmp_path / "t" / "_delta_log").is_dir()


def start_session(cwd: Path, delta: bool, env: dict[str, str] | None = None) -> tuple[str, str]:
    """(stdout, stderr) of a new Python process in ``cwd`` that builds a session (with Delta
    Lake or not) and writes then reads a 3-row table (a Delta one with Delta)."""
    fmt = "delta" if delta else "parquet"
    code = ("from rocketlake.jobs.spark_session import build_session\n"
            f"s = build_session('fresh', master='local[1]', delta={delta}, "
            "conf={'spark.ui.enabled': 'false'})\n"
            f"s.range(3).write.format('{fmt}').save('t')\n"
            f"print(s.read.format('{fmt}').load('t').count())\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


def test_a_delta_session_in_a_new_directory_reuses_the_user_cache(tmp_path: Path) -> None:
    """No ``.ivy`` in the working directory, no Ivy resolution (nothing downloaded, no lines)."""
    delta_jars()  # the jars are in the per-user cache (the session fixture fetched them)
    listed = sorted(p.name for p in IVY.iterdir())
    out, err = start_session(tmp_path, delta=True)
    assert out.split() == ["3"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"]  # no .ivy, nothing but the table
    assert (tmp_path / "t" / "_delta_log").is_dir()
    assert [line for line in err.splitlines() if line.strip().startswith(IVY_LINES)] == []
    assert sorted(p.name for p in IVY.iterdir()) == listed


def test_a_session_without_delta_touches_no_jars(tmp_path: Path) -> None:
    """A store-only session (rebuild without --lake, the source) resolves nothing and makes no
    Ivy folder: neither in the working directory nor in an empty per-user cache."""
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cache").mkdir()
    out, err = start_session(tmp_path / "cwd", delta=False, env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert out.split() == ["3"]
    assert sorted(p.name for p in (tmp_path / "cwd").iterdir()) == ["t"]
    assert not (tmp_path / "cache" / "rocketlake" / "ivy").exists()
    assert [line for line in err.splitlines() if line.strip().startswith(IVY_LINES)] == []
