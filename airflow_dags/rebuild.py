"""Rebuild a store's ConsumeQueues and/or index from its CommitLog, on demand.

Trigger with params: `store` (a configured store), `structures` (`consumequeue`, `index`) and
`mode` (`full`: write aside and swap in; `incremental`: append what is missing). `plan` turns them
into one `jobs/rebuild_<structure>.py` submission each; they run one after the other.
"""
from __future__ import annotations

from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Param, Variable, dag, task
from rocketlake_airflow import REBUILD_JOBS, REBUILD_MODE_ARGS, START_DATE, load_settings

settings = load_settings()


@dag(dag_id="rocketlake_rebuild", schedule=None, start_date=START_DATE, catchup=False,
     max_active_runs=1, default_args=settings.default_args("rebuild"), tags=["rocketlake"],
     doc_md=__doc__,
     params={
         "store": Param(next(iter(settings.stores)), enum=list(settings.stores),
                        description="the store to rebuild (conf/airflow.toml [stores.*])"),
         "structures": Param(list(REBUILD_JOBS), type="array", minItems=1, uniqueItems=True,
                             items={"type": "string", "enum": list(REBUILD_JOBS)},
                             description="what to rebuild from the CommitLog"),
         "mode": Param("full", enum=list(REBUILD_MODE_ARGS),
                       description="full: rebuild aside and swap in; incremental: append in place"),
     })
def rebuild() -> None:
    @task
    def plan(params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """One submission per requested structure, in rebuild order."""
        assert params is not None
        store = settings.stores[params["store"]]
        path = Variable.get(store.variable, default=store.path)
        return [settings.rebuild_request(store, path, s, params["mode"])
                for s in REBUILD_JOBS if s in params["structures"]]

    SparkSubmitOperator.partial(task_id="rebuild", max_active_tis_per_dagrun=1,
                                **settings.submit_kwargs()).expand_kwargs(plan())


rebuild()
