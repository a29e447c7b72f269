"""Airflow test set-up: a throw-away AIRFLOW_HOME and database, the DAG folder, the Spark connection.

These tests run in the Airflow virtualenv (`.venv-airflow/bin/python -m pytest tests/airflow`).
The main suite's interpreter has no Airflow, so there this folder is not collected. Jobs are
submitted with the main virtualenv's `spark-submit` (its `bin/` goes first on PATH) and run on
its Python, as a production worker calls a Spark installation it does not share packages with.
"""
from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from airflow_support import CONN_ID, DAGS, MAIN_BIN, create_store_pool, dag_bag

try:  # (not find_spec("airflow"): this folder itself would pass for a namespace package "airflow")
    importlib.metadata.version("apache-airflow")
except importlib.metadata.PackageNotFoundError:
    collect_ignore_glob = ["test_*.py"]
else:
    # Airflow reads its configuration when first imported: set it up before any test imports it.
    _home = Path(tempfile.mkdtemp(prefix="rocketlake-airflow-home-"))
    os.environ.update({
        "AIRFLOW_HOME": str(_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        f"AIRFLOW_CONN_{CONN_ID.upper()}": '{"conn_type": "spark", "host": "local[2]"}',
        "PATH": f"{MAIN_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    })
    os.environ.pop("ROCKETLAKE_AIRFLOW_CONFIG", None)


@pytest.fixture(scope="module")
def dagbag() -> Any:
    """The DAGs as configured by the shipped `conf/airflow.toml`."""
    return dag_bag()


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """A migrated metadata database in the throw-away AIRFLOW_HOME, with the pool of the shipped
    config's store (``main``)."""
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    create_store_pool("main")


