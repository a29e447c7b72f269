"""Nightly maintenance of one store, at its `deleteWhen` hour: check, rebuild what drifted, compact,
optimize the lake.

`check_consistency` verifies the ConsumeQueues and index against the CommitLog and writes a report;
`choose_rebuilds` starts only the rebuilds of the structures the report names; `compact` (expire,
archive to Delta, key-compact) runs after them, or straight after the check when nothing drifted;
`optimize_lake` (OPTIMIZE and VACUUM of the store's Delta tables; `[nightly] optimize`) runs last.
One DAG per store, one run at a time; the tasks that write the store take its one-slot pool, so a
triggered rebuild never overlaps them. Every job records its run in the store's lake
(`maintenance_runs`), which the report lists.
"""
from __future__ import annotations

import json
from pathlib import Path

from airflow.sdk import CronTriggerTimetable, TriggerRule, dag, task
from rocketlake_airflow import ARCHIVE_TABLE, REBUILD_JOBS, RUNS_TABLE, START_DATE, Store, load_settings

settings = load_settings()
nightly = settings.section("nightly")


def nightly_dag(store: Store) -> None:
    """Define the maintenance DAG of ``store``."""

    @dag(dag_id=f"rocketlake_nightly_{store.name}",
         schedule=CronTriggerTimetable(settings.nightly_cron(store), timezone=nightly["timezone"]),
         start_date=START_DATE, catchup=False, max_active_runs=1,
         default_args=settings.default_args("nightly"), tags=["rocketlake"], doc_md=__doc__)
    def maintenance() -> None:
        report = settings.report_template(store)
        lake = ["--lake", settings.lake_template(store)]  # each job records its run there
        runs = settings.assets(store, RUNS_TABLE)
        check = settings.spark_job("check_consistency", "check_consistency", store,
                                   ["--report", report, *lake], delta=True, outlets=runs)

        @task.branch
        def choose_rebuilds(report_file: str) -> list[str]:
            """The rebuild tasks of the structures the check found drifted (maybe none)."""
            return [f"rebuild_{s}" for s in json.loads(Path(report_file).read_text())["rebuild"]]

        rebuilds = [settings.spark_job(f"rebuild_{structure}", job, store,
                                       [*settings.rebuild_mode_args(nightly["rebuild_mode"]), *lake],
                                       delta=True, outlets=runs, **store.writer_kwargs)
                    for structure, job in REBUILD_JOBS.items()]
        protect = ["--protect-unconsumed"] if nightly["protect_unconsumed"] else []
        compact = settings.spark_job("compact", "compact", store, [*lake, *protect], delta=True,
                                     trigger_rule=TriggerRule.NONE_FAILED,
                                     outlets=settings.assets(store, ARCHIVE_TABLE, RUNS_TABLE),
                                     **store.writer_kwargs)
        check >> choose_rebuilds(report) >> rebuilds >> compact
        if nightly.get("optimize", True):
            retention = nightly.get("optimize_retention_hours")
            compact >> settings.submit_job(
                "optimize_lake", "optimize_lake", store,
                [*lake, *([] if retention is None else ["--retention-hours", str(retention)])],
                delta=True, trigger_rule=TriggerRule.NONE_FAILED)

    maintenance()


for configured in settings.stores.values():
    nightly_dag(configured)
