"""Rebuild a store's ConsumeQueues and/or index from its CommitLog, on demand.

Trigger with params: `store` (a configured store), `structures` (`consumequeue`, `index`) and
`mode` (`full`: write aside and swap in; `incremental`: append what is missing). Each configured
store has a `plan_<store>` -> `rebuild_<store>` pair: the chosen store's plan turns the params into
one `jobs/rebuild.py` submission (one CommitLog scan for every structure asked for), the others
plan none (their `rebuild_<store>` is skipped). It runs in the store's one-slot pool, so never
beside the store's nightly rebuild or compaction.
"""
from __future__ import annotations

from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Param, Variable, dag, task
from rocketlake_airflow import START_DATE, load_settings

from rocketlake.jobs.rebuild_structures import MODE_ARGS, STRUCTURES

settings = load_settings()


@dag(dag_id="rocketlake_rebuild", schedule=None, start_date=START_DATE, catchup=False,
     max_active_runs=1, default_args=settings.default_args("rebuild"), tags=["rocketlake"],
     doc_md=__doc__,
     params={
         "store": Param(next(iter(settings.stores)), enum=list(settings.stores),
                        description="the store to rebuild (conf/airflow.toml [stores.*])"),
         "structures": Param(list(STRUCTURES), type="array", minItems=1, uniqueItems=True,
                             items={"type": "string", "enum": list(STRUCTURES)},
                             description="what to rebuild from the CommitLog"),
         "mode": Param("full", enum=list(MODE_ARGS),
                       description="full: rebuild aside and swap in; incremental: append in place"),
     })
def rebuild() -> None:
    @task
    def plan(store_name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """The submissions of store ``store_name``: if it is the chosen store, the one rebuild of
        the requested structures; else none."""
        assert params is not None
        if params["store"] != store_name:
            return []
        store = settings.stores[store_name]
        path = Variable.get(store.variable, default=store.path)
        return [settings.rebuild_request(store, path, params["structures"], params["mode"])]

    for store in settings.stores.values():
        requests = plan.override(task_id=f"plan_{store.name}")(store.name)
        SparkSubmitOperator.partial(task_id=f"rebuild_{store.name}", max_active_tis_per_dagrun=1,
                                    **store.writer_kwargs, **settings.submit_kwargs()
                                    ).expand_kwargs(requests)


rebuild()
