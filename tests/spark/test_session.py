"""The shared session: settings from jobs.spark_session, and Delta Lake tables work."""
from __future__ import annotations

from pathlib import Path


def test_session_settings(spark) -> None:
    """What build_session sets on the session it made (the fixture passes no time zone)."""
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    # ... and times render in it: epoch 0 is midnight of 1 January 1970, whatever the machine's zone.
    assert spark.sql("SELECT CAST(timestamp_millis(0) AS STRING)").first()[0] == "1970-01-01 00:00:00"
    assert spark.conf.get("spark.sql.extensions") == "io.delta.sql.DeltaSparkSessionExtension"
    assert spark.conf.get("spark.jars.ivy").endswith(".ivy")


def test_delta_table_round_trip(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    spark.range(5).write.format("delta").save(path)
    spark.range(5, 8).write.format("delta").mode("append").save(path)
    assert sorted(r.id for r in spark.read.format("delta").load(path).collect()) == list(range(8))
    assert (tmp_path / "t" / "_delta_log").is_dir()
