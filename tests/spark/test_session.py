"""The shared session: settings from jobs.spark_session, and Delta Lake tables work."""
from __future__ import annotations

from pathlib import Path


def test_session_settings(spark) -> None:
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.sql.extensions") == "io.delta.sql.DeltaSparkSessionExtension"
    assert spark.conf.get("spark.jars.ivy").endswith(".ivy")


def test_delta_table_round_trip(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    spark.range(5).write.format("delta").save(path)
    spark.range(5, 8).write.format("delta").mode("append").save(path)
    assert sorted(r.id for r in spark.read.format("delta").load(path).collect()) == list(range(8))
    assert (tmp_path / "t" / "_delta_log").is_dir()
