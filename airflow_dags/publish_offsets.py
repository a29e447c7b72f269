"""Publish every store's queue offsets, consumer offsets and lag to Delta Lake every few minutes.

One task per configured store (`conf/airflow.toml` `[stores.*]`) submits `jobs/publish_offsets.py`
with the run's time as the snapshot time, so a retried run republishes the same snapshot. Each
task's outlets are the three tables it writes, so downstream DAGs can be scheduled on them.
"""
from __future__ import annotations

from airflow.sdk import dag
from rocketlake_airflow import RUN_TIME, START_DATE, load_settings

from rocketlake.jobs.table_names import OFFSETS_TABLES

settings = load_settings()


@dag(dag_id="rocketlake_publish_offsets", schedule=settings.section("publish_offsets")["schedule"],
     start_date=START_DATE, catchup=False, max_active_runs=1,
     default_args=settings.default_args("publish_offsets"), tags=["rocketlake"], doc_md=__doc__)
def publish_offsets() -> None:
    for store in settings.stores.values():
        settings.spark_job(f"publish_offsets_{store.name}", "publish_offsets", store,
                      ["--lake", settings.lake_template(store), "--store-name", store.name,
                       "--snapshot-time", RUN_TIME], delta=True,
                      outlets=settings.assets(store, *OFFSETS_TABLES))


publish_offsets()
