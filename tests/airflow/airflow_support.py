"""Helpers of the Airflow tests: parse the DAG folder, render a task's spark-submit command, create
a store's pool, run code on the main virtualenv's Python."""
from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

PROJECT = Path(__file__).resolve().parents[2]
DAGS = PROJECT / "airflow_dags"
MAIN_BIN = PROJECT / ".venv" / "bin"
CONN_ID = "spark_rocketlake"
sys.path.insert(0, str(DAGS))  # the DAG folder is importable, as for the DAG processor and workers


def dag_bag() -> Any:
    """Parse `airflow_dags/` as the DAG processor does (the folder is a bundle on sys.path)."""
    from airflow.dag_processing.dagbag import BundleDagBag

    return BundleDagBag(str(DAGS), bundle_path=DAGS)


def render_command(task: Any, *, run_id: str = "scheduled__2026-01-02T04:00:00+00:00",
                   when: Any = None, params: dict[str, Any] | None = None,
                   xcom: dict[tuple[str, str], str] | None = None) -> list[str]:
    """The spark-submit command ``task`` would run for a run ``run_id`` at ``when``, its
    templates rendered (Variables read as a worker reads them, XComs pulled from ``xcom``:
    (task id, key) -> value) and the connection resolved."""
    import pendulum
    from airflow.sdk.execution_time.context import VariableAccessor

    when = when or pendulum.datetime(2026, 1, 2, 4, tz="UTC")
    task = copy.deepcopy(task)
    task.render_template_fields({
        "var": {"value": VariableAccessor(False), "json": VariableAccessor(True)},
        "run_id": run_id, "logical_date": when, "dag_run": SimpleNamespace(run_after=when),
        "params": params or {},
        "ti": SimpleNamespace(xcom_pull=lambda task_ids, key: (xcom or {})[(task_ids, key)]),
    })
    return task._get_hook()._build_spark_submit_command(task.application)


def main_python(code: str, *args: str) -> str:
    """Run ``code`` on the main virtualenv's Python in the project root; its stdout."""
    out = subprocess.run([str(MAIN_BIN / "python"), "-c", code, *args], cwd=PROJECT, check=True,
                         capture_output=True, text=True)
    return out.stdout


def create_store_pool(store: str) -> None:
    """Create store ``store``'s one-slot pool with the Airflow CLI, as docs/spark-guide.md tells users to."""
    subprocess.run([sys.executable, "-m", "airflow", "pools", "set", f"rocketlake_store_{store}", "1",
                    f"rocketlake: one writer of store {store} at a time"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
