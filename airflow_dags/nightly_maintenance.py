"""Nightly maintenance of one store, at its `deleteWhen` hour: check, rebuild what drifted, compact,
optimize the lake.

`check_consistency` verifies the ConsumeQueues and index against the CommitLog and writes a report;
`choose_rebuilds` starts `rebuild` (`jobs/rebuild.py`: one CommitLog scan) for only the structures
the report names, or skips it; `archive` (`jobs/archive_stream.py` with AvailableNow: the store
streamed into the lake's archive, exactly once) runs after it, or straight after the check when
nothing drifted; then `compact` (expire only what the archive holds, key-compact);
`optimize_lake` (OPTIMIZE and VACUUM of the store's Delta tables; `[nightly] optimize`) runs last.
One DAG per store, one run at a time; the tasks that write the store take its one-slot pool, so a
triggered rebuild never overlaps them. Every job records its run in the store's lake
(`maintenance_runs`), which the report lists.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from airflow.sdk import CronTriggerTimetable, TriggerRule, dag, task
from rocketlake_airflow import (
    REBUILD_JOB,
    START_DATE,
    Store,
    load_settings,
)

from rocketlake.jobs.rebuild_structures import rebuild_args, structures_arg
from rocketlake.jobs.table_names import ARCHIVE_TABLE, RUNS_TABLE

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
        named = ["--store-name", store.name]  # the store's name in the lake (jobs.lake.store_name)
        runs = settings.assets(store, RUNS_TABLE)
        check = settings.spark_job("check_consistency", "check_consistency", store,
                                   ["--report", report, *lake], delta=True, outlets=runs)

        @task.branch
        def choose_rebuilds(report_file: str, ti: Any = None) -> list[str]:
            """``rebuild`` when the check found structures drifted (pushed, comma-separated, as
            XCom ``structures`` for its ``--structures``); else nothing."""
            drifted = json.loads(Path(report_file).read_text())["rebuild"]
            if not drifted:
                return []
            ti.xcom_push(key="structures", value=structures_arg(drifted))
            return [REBUILD_JOB]

        drifted = "{{ ti.xcom_pull(task_ids='choose_rebuilds', key='structures') }}"
        rebuild = settings.spark_job(REBUILD_JOB, REBUILD_JOB, store,
                                     [*rebuild_args(drifted, nightly["rebuild_mode"]), *lake],
                                     delta=True, outlets=runs, **store.writer_kwargs)
        # the store streamed into the archive (AvailableNow: what it holds now, then the task
        # ends); compact then expires only what the archive holds
        archive = settings.spark_job("archive", "archive_stream", store,
                                     [*lake, *named, "--trigger", "available-now"], delta=True,
                                     trigger_rule=TriggerRule.NONE_FAILED,
                                     outlets=settings.assets(store, ARCHIVE_TABLE, RUNS_TABLE))
        protect = ["--protect-unconsumed"] if nightly["protect_unconsumed"] else []
        compact = settings.spark_job("compact", "compact", store, [*lake, *named, *protect],
                                     delta=True,
                                     trigger_rule=TriggerRule.NONE_FAILED,
                                     outlets=settings.assets(store, ARCHIVE_TABLE, RUNS_TABLE),
                                     **store.writer_kwargs)
        check >> choose_rebuilds(report) >> rebuild >> archive >> compact
        if nightly.get("optimize", True):
            retention = nightly.get("optimize_retention_hours")
            compact >> settings.submit_job(
                "optimize_lake", "optimize_lake", store,
                [*lake, *([] if retention is None else ["--retention-hours", str(retention)])],
                delta=True, trigger_rule=TriggerRule.NONE_FAILED)

    maintenance()


for configured in settings.stores.values():
    nightly_dag(configured)
