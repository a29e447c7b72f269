"""The DAGs as the shipped `conf/airflow.toml` configures them: parse, schedules, tasks, wiring,
limits, and the exact spark-submit command of every task."""
from __future__ import annotations

import copy
import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from airflow_support import CONN_ID, DAGS, PROJECT, dag_bag, main_python, render_command

PY = str(PROJECT / ".venv" / "bin" / "python")
JOBS = PROJECT / "jobs"
STORE = str(PROJECT / "var" / "store")
LAKE = str(PROJECT / "var" / "lake" / "main")
DELTA = "io.delta:delta-spark_4.2_2.13:4.4.0"
SPARK = ["spark-submit", "--master", "local[2]",
         "--conf", "spark.sql.session.timeZone=UTC", "--conf", "spark.sql.shuffle.partitions=8",
         "--conf", "spark.ui.enabled=false", "--conf", f"spark.pyspark.python={PY}",
         "--conf", f"spark.pyspark.driver.python={PY}"]
SPARK_DELTA = [*SPARK, "--conf", f"spark.jars.ivy={PROJECT / '.ivy'}", "--packages", DELTA]


def test_dag_folder_parses_without_errors_quickly() -> None:
    t0 = time.perf_counter()
    bag = dag_bag()
    took = time.perf_counter() - t0
    assert bag.import_errors == {}
    assert sorted(bag.dag_ids) == ["rocketlake_nightly_main", "rocketlake_publish_offsets",
                                   "rocketlake_rebuild"]
    assert took < 30, f"parsing airflow_dags/ took {took:.1f} s"


def test_every_task_has_retries_timeout_and_the_spark_connection(dagbag: Any) -> None:
    for dag in dagbag.dags.values():
        assert dag.max_active_runs == 1, dag.dag_id
        assert dag.catchup is False, dag.dag_id
        for task in dag.tasks:
            kwargs = task.partial_kwargs if task.is_mapped else vars(task)
            assert kwargs["execution_timeout"] is not None, task.task_id
            if task.task_type == "SparkSubmitOperator":
                assert kwargs.get("conn_id", kwargs.get("_conn_id")) == CONN_ID


def test_publish_offsets_every_five_minutes_one_task_per_store(dagbag: Any) -> None:
    dag = dagbag.dags["rocketlake_publish_offsets"]
    assert dag.timetable.expression == "*/5 * * * *"
    assert [t.task_id for t in dag.tasks] == ["publish_offsets_main"]
    task = dag.task_dict["publish_offsets_main"]
    assert (task.retries, task.retry_delay, task.execution_timeout) == (
        1, timedelta(minutes=1), timedelta(minutes=4))
    assert render_command(task) == [
        *SPARK_DELTA, "--name", "rocketlake-publish_offsets-main", str(JOBS / "publish_offsets.py"),
        "--store", STORE, "--lake", LAKE, "--store-name", "main",
        "--snapshot-time", "2026-01-02T04:00:00+00:00"]


def test_variables_move_the_lake_and_the_store_at_run_time(
        dagbag: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_ROCKETLAKE_LAKE", "/srv/lake")
    monkeypatch.setenv("AIRFLOW_VAR_ROCKETLAKE_STORE_MAIN", "/srv/store-main")
    cmd = render_command(dagbag.dags["rocketlake_publish_offsets"].task_dict["publish_offsets_main"])
    assert cmd[cmd.index("--store") + 1] == "/srv/store-main"
    assert cmd[cmd.index("--lake") + 1] == "/srv/lake/main"


def test_nightly_runs_at_delete_when_and_rebuilds_only_after_the_branch(dagbag: Any) -> None:
    dag = dagbag.dags["rocketlake_nightly_main"]
    assert dag.timetable.expression == "0 4 * * *"  # deleteWhen=04 in conf/store.conf
    assert str(dag.timetable.timezone) == "UTC"
    tasks = dag.task_dict
    assert set(tasks) == {"check_consistency", "choose_rebuilds", "rebuild_consumequeue",
                          "rebuild_index", "compact"}
    assert tasks["check_consistency"].downstream_task_ids == {"choose_rebuilds"}
    assert tasks["choose_rebuilds"].downstream_task_ids == {"rebuild_consumequeue", "rebuild_index"}
    assert tasks["compact"].upstream_task_ids == {"rebuild_consumequeue", "rebuild_index"}
    assert tasks["compact"].trigger_rule == "none_failed"  # runs when both rebuilds were skipped
    for task in dag.tasks:
        assert (task.retries, task.execution_timeout) == (2, timedelta(minutes=240)), task.task_id


def test_nightly_commands(dagbag: Any) -> None:
    tasks = dagbag.dags["rocketlake_nightly_main"].task_dict
    run_id = "scheduled__2026-01-02T04:00:00+00:00"
    report = str(PROJECT / "var" / "reports" / "main" / f"{run_id}.json")
    assert render_command(tasks["check_consistency"], run_id=run_id) == [
        *SPARK_DELTA, "--name", "rocketlake-check_consistency-main", str(JOBS / "check_consistency.py"),
        "--store", STORE, "--report", report, "--lake", LAKE]
    assert render_command(tasks["rebuild_consumequeue"]) == [
        *SPARK_DELTA, "--name", "rocketlake-rebuild_consumequeue-main",
        str(JOBS / "rebuild_consumequeue.py"), "--store", STORE, "--lake", LAKE]
    assert render_command(tasks["rebuild_index"]) == [
        *SPARK_DELTA, "--name", "rocketlake-rebuild_index-main", str(JOBS / "rebuild_index.py"),
        "--store", STORE, "--lake", LAKE]
    assert render_command(tasks["compact"]) == [
        *SPARK_DELTA, "--name", "rocketlake-compact-main", str(JOBS / "compact.py"),
        "--store", STORE, "--lake", LAKE, "--protect-unconsumed"]


@pytest.mark.parametrize("drifted, chosen", [
    ([], []),
    (["index"], ["rebuild_index"]),
    (["consumequeue", "index"], ["rebuild_consumequeue", "rebuild_index"]),
])
def test_branch_follows_the_report(dagbag: Any, tmp_path: Path, drifted: list[str],
                                   chosen: list[str]) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"ok": not drifted, "problems": [], "rebuild": drifted}))
    branch = dagbag.dags["rocketlake_nightly_main"].task_dict["choose_rebuilds"]
    assert branch.python_callable(str(report)) == chosen


def test_rebuild_dag_params_and_plan(dagbag: Any) -> None:
    dag = dagbag.dags["rocketlake_rebuild"]
    assert dag.timetable.can_be_scheduled is False  # triggered only
    assert dag.params["store"] == "main"
    assert dag.params["structures"] == ["consumequeue", "index"]
    assert dag.params["mode"] == "full"
    assert dag.task_dict["plan"].downstream_task_ids == {"rebuild"}
    rebuild = dag.task_dict["rebuild"]
    assert rebuild.partial_kwargs["max_active_tis_per_dagrun"] == 1
    plan = dag.task_dict["plan"].python_callable
    assert plan(params={"store": "main", "structures": ["index", "consumequeue"],
                        "mode": "incremental"}) == [
        {"application": str(JOBS / "rebuild_consumequeue.py"),
         "name": "rocketlake-rebuild_consumequeue-main",
         "application_args": ["--store", STORE, "--incremental"]},
        {"application": str(JOBS / "rebuild_index.py"), "name": "rocketlake-rebuild_index-main",
         "application_args": ["--store", STORE, "--incremental"]},
    ]
    assert plan(params={"store": "main", "structures": ["index"], "mode": "full"}) == [
        {"application": str(JOBS / "rebuild_index.py"), "name": "rocketlake-rebuild_index-main",
         "application_args": ["--store", STORE]}]


@pytest.mark.parametrize("bad", [{"store": "nope"}, {"structures": ["commitlog"]},
                                 {"structures": []}, {"mode": "partial"}])
def test_rebuild_dag_rejects_bad_params(dagbag: Any, bad: dict[str, Any]) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    params = copy.deepcopy(dagbag.dags["rocketlake_rebuild"].params)
    with pytest.raises(ParamValidationError):
        for name, value in bad.items():
            params[name] = value
        params.validate()


def test_configured_delta_packages_match_the_jobs(dagbag: Any) -> None:
    """conf/airflow.toml names the Delta jars the jobs' own session builder would fetch."""
    args = json.loads(main_python(
        "import json; from jobs.spark_session import delta_submit_args; "
        "print(json.dumps(delta_submit_args()))"))
    assert args[args.index("--packages") + 1] == DELTA
    assert args[args.index("--conf") + 1] == f"spark.jars.ivy={PROJECT / '.ivy'}"


def test_job_files_exist_for_every_application(dagbag: Any) -> None:
    for dag in dagbag.dags.values():
        for task in dag.tasks:
            if task.task_type == "SparkSubmitOperator" and not task.is_mapped:
                assert Path(task.application).is_file(), task.application
    assert (DAGS / ".airflowignore").read_text().split() == ["rocketlake_airflow/"]
