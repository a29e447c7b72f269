"""The DAGs as the shipped `conf/airflow.toml` configures them: parse, schedules, tasks, wiring,
limits, pools, outlets, failure callbacks, and the exact spark-submit command of every task."""
from __future__ import annotations

import copy
import json
import logging
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow_support import CONN_ID, DAGS, PROJECT, dag_bag, main_python, render_command
from rocketlake_airflow import alerts

PY = str(PROJECT / ".venv" / "bin" / "python")
JOBS = PROJECT / "jobs"
STORE = str(PROJECT / "var" / "store")
LAKE = str(PROJECT / "var" / "lake" / "main")
LAKE_URI = (PROJECT / "var" / "lake" / "main").as_uri()
SHIPPED_CONFIG = (PROJECT / "conf" / "airflow.toml").read_text()
DELTA = "io.delta:delta-spark_4.2_2.13:4.4.0"
SPARK = ["spark-submit", "--master", "local[2]",
         "--conf", "spark.sql.session.timeZone=UTC", "--conf", "spark.sql.shuffle.partitions=8",
         "--conf", "spark.ui.enabled=false", "--conf", f"spark.pyspark.python={PY}",
         "--conf", f"spark.pyspark.driver.python={PY}"]
#: the per-user Ivy folder (XDG base directory rule): the DAGs' default, and the commands' own
IVY = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rocketlake" / "ivy"
SPARK_DELTA = [*SPARK, "--conf", f"spark.jars.ivy={IVY}", "--packages", DELTA]


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
            assert kwargs["on_failure_callback"] == [alerts.log_failure], task.task_id
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
    assert set(tasks) == {"check_consistency", "choose_rebuilds", "rebuild", "archive", "compact",
                          "optimize_lake"}
    assert tasks["check_consistency"].downstream_task_ids == {"choose_rebuilds"}
    assert tasks["choose_rebuilds"].downstream_task_ids == {"rebuild"}
    assert tasks["archive"].upstream_task_ids == {"rebuild"}
    assert tasks["archive"].trigger_rule == "none_failed"  # runs when the rebuild was skipped
    assert tasks["compact"].upstream_task_ids == {"archive"}  # expires what the archive holds
    assert tasks["compact"].trigger_rule == "none_failed"
    assert tasks["optimize_lake"].upstream_task_ids == {"compact"}
    assert tasks["optimize_lake"].downstream_task_ids == set()
    assert tasks["optimize_lake"].trigger_rule == "none_failed"
    for task in dag.tasks:
        assert (task.retries, task.execution_timeout) == (2, timedelta(minutes=240)), task.task_id


def test_nightly_commands(dagbag: Any) -> None:
    tasks = dagbag.dags["rocketlake_nightly_main"].task_dict
    run_id = "scheduled__2026-01-02T04:00:00+00:00"
    report = str(PROJECT / "var" / "reports" / "main" / f"{run_id}.json")
    assert render_command(tasks["check_consistency"], run_id=run_id) == [
        *SPARK_DELTA, "--name", "rocketlake-check_consistency-main", str(JOBS / "check_consistency.py"),
        "--store", STORE, "--report", report, "--lake", LAKE]
    # one rebuild job, one CommitLog scan, for the structures the branch chose
    drifted = {("choose_rebuilds", "structures"): "consumequeue,index"}
    assert render_command(tasks["rebuild"], xcom=drifted) == [
        *SPARK_DELTA, "--name", "rocketlake-rebuild-main", str(JOBS / "rebuild.py"),
        "--store", STORE, "--structures", "consumequeue,index", "--lake", LAKE]
    cmd = render_command(tasks["rebuild"], xcom={("choose_rebuilds", "structures"): "index"})
    assert cmd[cmd.index("--structures") + 1] == "index"
    assert render_command(tasks["archive"]) == [
        *SPARK_DELTA, "--name", "rocketlake-archive_stream-main", str(JOBS / "archive_stream.py"),
        "--store", STORE, "--lake", LAKE, "--store-name", "main", "--trigger", "available-now"]
    assert render_command(tasks["compact"]) == [
        *SPARK_DELTA, "--name", "rocketlake-compact-main", str(JOBS / "compact.py"),
        "--store", STORE, "--lake", LAKE, "--store-name", "main", "--protect-unconsumed"]
    assert render_command(tasks["optimize_lake"]) == [
        *SPARK_DELTA, "--name", "rocketlake-optimize_lake-main", str(JOBS / "optimize_lake.py"),
        "--lake", LAKE]


@pytest.mark.parametrize("drifted, chosen, structures", [
    ([], [], {}),
    (["index"], ["rebuild"], {"structures": "index"}),
    (["index", "consumequeue"], ["rebuild"], {"structures": "consumequeue,index"}),
])
def test_branch_follows_the_report(dagbag: Any, tmp_path: Path, drifted: list[str],
                                   chosen: list[str], structures: dict[str, str]) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"ok": not drifted, "problems": [], "rebuild": drifted}))
    branch = dagbag.dags["rocketlake_nightly_main"].task_dict["choose_rebuilds"]
    pushed: dict[str, str] = {}
    ti = SimpleNamespace(xcom_push=lambda key, value: pushed.__setitem__(key, value))
    assert branch.python_callable(str(report), ti=ti) == chosen
    assert pushed == structures


def test_rebuild_dag_params_and_plan(dagbag: Any) -> None:
    dag = dagbag.dags["rocketlake_rebuild"]
    assert dag.timetable.can_be_scheduled is False  # triggered only
    assert dag.params["store"] == "main"
    assert dag.params["structures"] == ["consumequeue", "index"]
    assert dag.params["mode"] == "full"
    assert dag.task_dict["plan_main"].downstream_task_ids == {"rebuild_main"}
    rebuild = dag.task_dict["rebuild_main"]
    assert rebuild.partial_kwargs["max_active_tis_per_dagrun"] == 1
    plan = dag.task_dict["plan_main"].python_callable
    assert plan("main", params={"store": "main", "structures": ["index", "consumequeue"],
                                "mode": "incremental"}) == [  # one job, one scan
        {"application": str(JOBS / "rebuild.py"), "name": "rocketlake-rebuild-main",
         "application_args": ["--store", STORE, "--structures", "consumequeue,index",
                              "--incremental"]}]
    assert plan("main", params={"store": "main", "structures": ["index"], "mode": "full"}) == [
        {"application": str(JOBS / "rebuild.py"), "name": "rocketlake-rebuild-main",
         "application_args": ["--store", STORE, "--structures", "index"]}]


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
    assert args[args.index("--conf") + 1] == f"spark.jars.ivy={IVY}"


def test_job_files_exist_for_every_application(dagbag: Any) -> None:
    for dag in dagbag.dags.values():
        for task in dag.tasks:
            if task.task_type == "SparkSubmitOperator" and not task.is_mapped:
                assert Path(task.application).is_file(), task.application
    assert (DAGS / ".airflowignore").read_text().split() == ["rocketlake_airflow/"]



def configured_bag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edits: dict[str, str]) -> Any:
    """The DAGs under the shipped config with each ``old`` text replaced by ``new``."""
    text = SHIPPED_CONFIG
    for old, new in edits.items():
        assert old in text, old
        text = text.replace(old, new)
    config = tmp_path / "airflow.toml"
    config.write_text(text)
    monkeypatch.setenv("ROCKETLAKE_AIRFLOW_CONFIG", str(config))
    return dag_bag()


def outlets(task: Any) -> list[str]:
    """A task's outlets' URIs (each also the asset's name)."""
    assert all(a.name == a.uri for a in task.outlets), task.outlets
    return [a.uri for a in task.outlets]


def test_tasks_declare_the_delta_tables_they_write_as_assets(dagbag: Any) -> None:
    publish = dagbag.dags["rocketlake_publish_offsets"].task_dict["publish_offsets_main"]
    assert outlets(publish) == [f"{LAKE_URI}/offsets_history"]
    assert LAKE_URI.startswith("file:///")
    runs = f"{LAKE_URI}/maintenance_runs"
    nightly = dagbag.dags["rocketlake_nightly_main"].task_dict
    assert {t: outlets(task) for t, task in nightly.items()} == {
        "check_consistency": [runs], "choose_rebuilds": [], "rebuild": [runs],
        "archive": [f"{LAKE_URI}/messages_archive", runs],
        "compact": [f"{LAKE_URI}/messages_archive", runs],
        "optimize_lake": []}  # rewrites files of the tables, adds no data
    assert {a.group for task in nightly.values() for a in task.outlets} == {"rocketlake"}


def test_the_dags_import_rocketlake_installed_without_its_dependencies() -> None:
    """The table names and store settings the DAGs use are the package's (no copies): Airflow's
    environment has rocketlake (this tree) but not its heavy dependencies."""
    import importlib.util

    import rocketlake.jobs.table_names
    import rocketlake.store.config

    assert Path(rocketlake.jobs.table_names.__file__) == PROJECT / "jobs" / "table_names.py"
    assert Path(rocketlake.store.config.__file__) == PROJECT / "store" / "config.py"
    assert importlib.util.find_spec("numba") is None


def test_a_stores_settings_are_read_as_the_store_reads_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    twice = configured_bag(tmp_path, monkeypatch, {"set = {}": 'set = { deleteWhen = "16;03" }'})
    assert twice.dags["rocketlake_nightly_main"].timetable.expression == "0 3,16 * * *"
    for sets, said in [('{ deleteWhen = "4am" }', "deleteWhen: '4am' is not an hour of the day"),
                       ('{ fileReservedTme = "48" }', "unknown store setting 'fileReservedTme'")]:
        bad = configured_bag(tmp_path, monkeypatch, {"set = {}": f"set = {sets}"})
        assert len(bad.import_errors) == 3  # every DAG file reads the config
        for error in bad.import_errors.values():
            assert f"{tmp_path / 'airflow.toml'}: [stores.main] set: " in error and said in error


def test_tasks_that_write_a_store_share_its_one_slot_pool(dagbag: Any, airflow_db: None) -> None:
    nightly = dagbag.dags["rocketlake_nightly_main"].task_dict
    rebuild = dagbag.dags["rocketlake_rebuild"].task_dict
    writers = [nightly["rebuild"], nightly["compact"], rebuild["rebuild_main"]]
    assert {(t.pool, t.pool_slots) for t in writers} == {("rocketlake_store_main", 1)}
    readers = [t for dag in dagbag.dags.values() for t in dag.tasks if t not in writers]
    assert {t.pool for t in readers} == {"default_pool"}
    pools = json.loads(subprocess.run(
        [sys.executable, "-m", "airflow", "pools", "get", "rocketlake_store_main", "-o", "json"],
        check=True, capture_output=True, text=True).stdout)
    assert [(p["pool"], int(p["slots"])) for p in pools] == [("rocketlake_store_main", 1)]


def test_rebuild_dag_has_a_task_per_store_in_its_pool(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bag = configured_bag(tmp_path, monkeypatch, {"[stores.main]": (
        '[stores.other]\npath = "/srv/other"\n\n[stores.main]')})
    assert bag.import_errors == {}
    tasks = bag.dags["rocketlake_rebuild"].task_dict
    assert set(tasks) == {"plan_main", "rebuild_main", "plan_other", "rebuild_other"}
    assert (tasks["rebuild_other"].pool, tasks["rebuild_other"].pool_slots) == (
        "rocketlake_store_other", 1)
    params = {"store": "other", "structures": ["index"], "mode": "full"}
    assert tasks["plan_main"].python_callable("main", params=params) == []
    assert tasks["plan_other"].python_callable("other", params=params) == [
        {"application": str(JOBS / "rebuild.py"), "name": "rocketlake-rebuild-other",
         "application_args": ["--store", "/srv/other", "--structures", "index"]}]


@pytest.mark.parametrize("lake", ["s3a://bucket/lake", "file:///srv/lake", "file:///srv/lake/"])
def test_lake_uris_are_passed_through(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      lake: str) -> None:
    bag = configured_bag(tmp_path, monkeypatch, {'lake = "var/lake"': f'lake = "{lake}"'})
    assert bag.import_errors == {}
    store_lake = lake.rstrip("/") + "/main"
    publish = bag.dags["rocketlake_publish_offsets"].task_dict["publish_offsets_main"]
    cmd = render_command(publish)
    assert cmd[cmd.index("--lake") + 1] == store_lake
    assert publish.outlets[0].uri == f"{store_lake}/offsets_history"
    nightly = bag.dags["rocketlake_nightly_main"].task_dict
    for task in ("check_consistency", "rebuild", "compact", "optimize_lake"):
        cmd = render_command(nightly[task], xcom={("choose_rebuilds", "structures"): "index"})
        assert cmd[cmd.index("--lake") + 1] == store_lake, task
    assert nightly["compact"].outlets[0].uri == f"{store_lake}/messages_archive"


def test_optimize_can_be_turned_off_or_given_a_retention(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    off = configured_bag(tmp_path, monkeypatch, {"optimize = true": "optimize = false"})
    assert "optimize_lake" not in off.dags["rocketlake_nightly_main"].task_dict
    kept = configured_bag(tmp_path, monkeypatch, {
        "# optimize_retention_hours = 336": "optimize_retention_hours = 336"})
    cmd = render_command(kept.dags["rocketlake_nightly_main"].task_dict["optimize_lake"])
    assert cmd[cmd.index(str(JOBS / "optimize_lake.py")) + 1:] == [
        "--lake", LAKE, "--retention-hours", "336"]


def test_the_config_names_the_failure_callback(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    default = 'on_failure = "rocketlake_airflow.alerts.log_failure"'
    bag = configured_bag(tmp_path, monkeypatch, {default: 'on_failure = "builtins.print"'})
    assert bag.import_errors == {}
    for dag in bag.dags.values():
        for task in dag.tasks:
            kwargs = task.partial_kwargs if task.is_mapped else vars(task)
            assert kwargs["on_failure_callback"] == [print], task.task_id
    bad = configured_bag(tmp_path, monkeypatch,
                         {default: 'on_failure = "rocketlake_airflow.alerts.page_someone"'})
    assert len(bad.import_errors) == 3  # every DAG file reads the config
    for error in bad.import_errors.values():
        assert "[alerts] on_failure = 'rocketlake_airflow.alerts.page_someone'" in error
        assert str(tmp_path / "airflow.toml") in error


def test_default_failure_callback_logs_one_json_line(caplog: pytest.LogCaptureFixture) -> None:
    ti = SimpleNamespace(dag_id="rocketlake_nightly_main", task_id="compact",
                         run_id="scheduled__2026-01-02T04:00:00+00:00", map_index=-1, try_number=3)
    with caplog.at_level(logging.ERROR, logger="rocketlake.airflow"):
        alerts.log_failure({"ti": ti, "exception": RuntimeError("spark-submit exited with 4")})
    [record] = caplog.records
    assert record.levelno == logging.ERROR
    prefix, _, fields = record.getMessage().partition("{")
    assert prefix == "rocketlake task failed: "
    assert json.loads("{" + fields) == {
        "dag_id": "rocketlake_nightly_main", "task_id": "compact",
        "run_id": "scheduled__2026-01-02T04:00:00+00:00", "map_index": -1, "try_number": 3,
        "error": "RuntimeError: spark-submit exited with 4"}
