"""DAG runs end to end with ``dag.test()``: real spark-submit of the real jobs against a store and a
lake in a temporary folder, then the results read back (Delta tables with the main venv's Spark)."""
from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow_support import MAIN_BIN, create_store_pool, dag_bag, main_python

STORE_SET = {"mappedFileSizeCommitLog": "1048576", "maxHashSlotNum": "100", "maxIndexNum": "400"}
EVENTS = [
    {"topic": "orders", "body": "o1", "keys": "order-1", "queue_id": 0},
    {"topic": "orders", "body": "o2", "keys": "order-2", "queue_id": 0},
    {"topic": "orders", "body": "o3", "keys": "order-3", "queue_id": 1},
    {"topic": "payments", "body": "p1", "keys": "pay-1"},
]
#: The shipped conf/airflow.toml's shape, pointed at the temporary folder {root}, without retries
#: and without the optimize task (its job is tested on its own).
CONFIG = """
lake = "{root}/lake"
reports = "{root}/reports"

[spark]
conn_id = "spark_rocketlake"
jobs = "jobs"
python = ".venv/bin/python"
packages = "io.delta:delta-spark_4.2_2.13:4.4.0"
py_files = []

[spark.conf]
"spark.sql.shuffle.partitions" = "2"
"spark.ui.enabled" = "false"

[tasks]
retries = 0
retry_delay_minutes = 1
timeout_minutes = 15

[publish_offsets]
schedule = "*/5 * * * *"

[nightly]
minute = 0
timezone = "UTC"
rebuild_mode = "full"
protect_unconsumed = true
optimize = false

[stores.e2e]
path = "{root}/store"
set = {{ {sets} }}
"""
READ_TABLES = """
import json, sys
from rocketlake.jobs.spark_session import build_session
spark = build_session("rocketlake airflow test", master="local[1]",
                      conf={"spark.sql.shuffle.partitions": "1", "spark.ui.enabled": "false"})
spark.sparkContext.setLogLevel("ERROR")
lake = sys.argv[1]
tables = sys.argv[2].split(",")
print(json.dumps({t: [r.asDict() for r in spark.read.format("delta").load(f"{lake}/{t}").collect()]
                  for t in tables}, default=str))
"""
OFFSETS_TABLES = "offsets_history"


@pytest.fixture()
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: None) -> Iterator[Path]:
    """A store written by the library (main venv CLI), an empty lake, and an Airflow config
    pointing the DAGs at them (store name ``e2e``, with its pool)."""
    events = tmp_path / "events.jsonl"
    events.write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    sets = [a for k, v in STORE_SET.items() for a in ("--set", f"{k}={v}")]
    subprocess.run([str(MAIN_BIN / "rocketlake"), "ingest", "--store", str(tmp_path / "store"),
                    "--create", str(events), *sets], check=True, capture_output=True)
    config = tmp_path / "airflow.toml"
    config.write_text(CONFIG.format(root=tmp_path, sets=", ".join(
        f'{k} = "{v}"' for k, v in STORE_SET.items())))
    monkeypatch.setenv("ROCKETLAKE_AIRFLOW_CONFIG", str(config))
    create_store_pool("e2e")
    yield tmp_path


def run_dag(dag_id: str, **kwargs: Any) -> dict[str, str]:
    """``dag.test()`` the DAG; its state and each task's final state."""
    bag = dag_bag()
    assert bag.import_errors == {}
    run = bag.dags[dag_id].test(**kwargs)
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    return {"run": str(run.state), **states}


def asset_events(dag_id: str) -> list[tuple[str, str]]:
    """(task, asset URI) of every asset event the DAG's runs have emitted, sorted."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(select(AssetEvent.source_task_id, AssetModel.uri)
                               .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
                               .where(AssetEvent.source_dag_id == dag_id)).all()
    return sorted((task, uri) for task, uri in rows)


def verify(store: Path) -> dict[str, Any]:
    out = subprocess.run([str(MAIN_BIN / "rocketlake"), "verify", "--store", str(store), "--json",
                          *[a for k, v in STORE_SET.items() for a in ("--set", f"{k}={v}")]],
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def test_publish_offsets_run_writes_the_delta_tables(site: Path) -> None:
    states = run_dag("rocketlake_publish_offsets")
    assert states == {"run": "success", "publish_offsets_e2e": "success"}
    tables = json.loads(main_python(READ_TABLES, str(site / "lake" / "e2e"), OFFSETS_TABLES)
                        .splitlines()[-1])
    history = tables["offsets_history"]
    queues = sorted((r["store"], r["topic"], r["queue_id"], r["min_offset"], r["max_offset"])
                    for r in history if r["kind"] == "queue")
    assert queues == [("e2e", "orders", 0, 0, 2), ("e2e", "orders", 1, 0, 1),
                      ("e2e", "payments", 0, 0, 1)]
    assert [r for r in history if r["kind"] == "consumer"] == []  # no group has committed yet
    snapshots = {r["snapshot_ts"] for r in history}
    assert len(snapshots) == 1  # one snapshot, stamped with the run's time
    lake = (site / "lake" / "e2e").as_uri()
    assert asset_events("rocketlake_publish_offsets") == [
        ("publish_offsets_e2e", f"{lake}/offsets_history")]


def test_nightly_run_rebuilds_only_the_drifted_index_then_compacts(site: Path) -> None:
    store = site / "store"
    shutil.rmtree(store / "index")
    assert verify(store)["ok"] is False
    states = run_dag("rocketlake_nightly_e2e")
    assert states == {"run": "success", "check_consistency": "success",
                      "choose_rebuilds": "success", "rebuild": "success", "archive": "success",
                      "compact": "success"}
    reports = list((site / "reports" / "e2e").glob("*.json"))
    assert len(reports) == 1
    assert json.loads(reports[0].read_text())["rebuild"] == ["index"]
    after = verify(store)
    assert after["ok"] is True, after["problems"]
    assert after["keys_checked"] == len(EVENTS)
    runs = json.loads(main_python(READ_TABLES, str(site / "lake" / "e2e"), "maintenance_runs")
                      .splitlines()[-1])["maintenance_runs"]
    assert sorted(r["job"] for r in runs) == ["archive", "check-consistency", "compact", "rebuild"]
    assert [json.loads(r["summary"])["target"] for r in runs if r["job"] == "rebuild"] == [
        str(store / "index")]  # only the drifted structure was rebuilt
    lake = (site / "lake" / "e2e").as_uri()
    assert asset_events("rocketlake_nightly_e2e") == [
        ("archive", f"{lake}/maintenance_runs"), ("archive", f"{lake}/messages_archive"),
        ("check_consistency", f"{lake}/maintenance_runs"), ("compact", f"{lake}/maintenance_runs"),
        ("compact", f"{lake}/messages_archive"), ("rebuild", f"{lake}/maintenance_runs")]


def test_rebuild_run_rebuilds_only_the_chosen_store(site: Path) -> None:
    store = site / "store"
    shutil.rmtree(store / "index")
    config = site / "airflow.toml"  # a second store, not chosen: its rebuild task has nothing to do
    config.write_text(config.read_text() + f'\n[stores.spare]\npath = "{site / "spare"}"\n')
    states = run_dag("rocketlake_rebuild",
                     run_conf={"store": "e2e", "structures": ["index"], "mode": "full"})
    assert states == {"run": "success", "plan_e2e": "success", "rebuild_e2e": "success",
                      "plan_spare": "success", "rebuild_spare": "skipped"}
    after = verify(store)
    assert after["ok"] is True, after["problems"]
    assert after["keys_checked"] == len(EVENTS)
    assert not (site / "spare").exists()
