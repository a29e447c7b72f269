"""What the rocketlake DAG files share: the settings in `conf/airflow.toml` and one way to submit a job.

The DAG files only orchestrate; everything deployment-specific (connection, jobs folder, driver
interpreter, Delta packages, spark conf, stores, lake, schedules, retries, timeouts) is read here
from the config file, and the data paths are overridable at run time with Airflow Variables
(``rocketlake_lake``, ``rocketlake_store_<name>``). The lake may be a URI (``s3a://``, ``file://``, ...);
stores are paths. Tasks that write a store take its one-slot pool (``rocketlake_store_<name>``),
and tasks that write Delta tables declare them as outlets (:class:`airflow.sdk.Asset`).

The table names, the rebuild's structures and modes and the store settings (``deleteWhen``) are
the package's own (``rocketlake.jobs.table_names``, ``rocketlake.jobs.rebuild_structures``,
``rocketlake.store.config``): Airflow's environment has rocketlake
installed without its dependencies (``pip install --no-deps``), and these modules need none but
javaproperties.
"""
from __future__ import annotations

import importlib
import json
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Asset

from rocketlake.jobs.delta_jars import IVY_DIR
from rocketlake.jobs.rebuild_structures import rebuild_args, structures_arg
from rocketlake.store.config import load_config

#: Environment variable naming the config file to read instead of `conf/airflow.toml`.
CONFIG_ENV = "ROCKETLAKE_AIRFLOW_CONFIG"
#: The project root: relative paths in the config file are relative to it.
PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = PROJECT_ROOT / "conf" / "airflow.toml"
#: The rebuild job (`jobs/rebuild.py`): one CommitLog scan rebuilds every structure asked for.
REBUILD_JOB = "rebuild"
LAKE_VARIABLE = "rocketlake_lake"
#: First possible run of every DAG (none catches up on runs before it was deployed).
START_DATE = pendulum.datetime(2024, 1, 1, tz="UTC")
#: The run's time as ISO-8601: its logical date, or when it was triggered if it has none. A retry
#: of the same run renders the same value.
RUN_TIME = "{{ (logical_date or dag_run.run_after).isoformat() }}"
#: The default ``[alerts] on_failure``.
DEFAULT_FAILURE_CALLBACK = "rocketlake_airflow.alerts.log_failure"
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def _path(value: str) -> str:
    """``value`` as an absolute path, relative ones taken from the project root."""
    return str(PROJECT_ROOT / Path(value).expanduser())


def _location(value: str) -> str:
    """A lake location: a URI (``s3a://bucket/lake``, ``file:///srv/lake``) as given, without a
    trailing ``/``; otherwise :func:`_path`."""
    return value.rstrip("/") if _URI.match(value) else _path(value)


def _uri(location: str) -> str:
    """A :func:`_location` as a URI (an absolute path as ``file://``)."""
    return location if _URI.match(location) else Path(location).as_uri()


def _callable(dotted: str, where: str) -> Callable[..., Any]:
    """The function named ``package.module.function``; ``where`` names the setting in errors."""
    module, _, name = dotted.rpartition(".")
    try:
        found = getattr(importlib.import_module(module), name) if module else None
    except (ImportError, AttributeError) as e:
        raise ValueError(f"{where} = {dotted!r}: cannot import it ({e})") from e
    if not callable(found):
        raise ValueError(f"{where} = {dotted!r}: not a callable package.module.function")
    return found


def _jinja_str(value: str) -> str:
    """A Jinja string literal for ``value``."""
    return json.dumps(value)


@dataclass(frozen=True)
class Store:
    """One configured store: its name (used in DAG and task ids), default path, ``--set``s and
    the hours of the day its ``deleteWhen`` names (the package's settings with those ``--set``s)."""

    name: str
    path: str
    settings: dict[str, str]
    delete_hours: frozenset[int]

    @property
    def set_args(self) -> list[str]:
        """The ``--set NAME=VALUE`` arguments every job on this store gets."""
        return [arg for k, v in self.settings.items() for arg in ("--set", f"{k}={v}")]

    @property
    def variable(self) -> str:
        """The Airflow Variable that overrides this store's path at run time."""
        return f"rocketlake_store_{self.name}"

    @property
    def path_template(self) -> str:
        """The store path as a template: the Variable if set, else the configured path."""
        return f"{{{{ var.value.get({_jinja_str(self.variable)}, {_jinja_str(self.path)}) }}}}"

    @property
    def pool(self) -> str:
        """The one-slot Airflow pool of the tasks that write this store, so that two of them
        (a triggered rebuild and the nightly compaction) never run at once."""
        return f"rocketlake_store_{self.name}"

    @property
    def writer_kwargs(self) -> dict[str, Any]:
        """The operator arguments of a task that writes this store: its pool, the whole slot."""
        return {"pool": self.pool, "pool_slots": 1}


@dataclass(frozen=True)
class Settings:
    """The parsed config file."""

    raw: dict[str, Any]
    stores: dict[str, Store]
    on_failure: Callable[..., Any]

    @property
    def spark(self) -> dict[str, Any]:
        return self.raw["spark"]

    def section(self, name: str) -> dict[str, Any]:
        """A DAG's section (``publish_offsets``, ``nightly``, ``rebuild``) over ``[tasks]``."""
        return {**self.raw["tasks"], **self.raw.get(name, {})}

    def default_args(self, section: str) -> dict[str, Any]:
        """Retries, retry delay and time limit for every task of a DAG."""
        s = self.section(section)
        return {"owner": "rocketlake", "retries": int(s["retries"]),
                "retry_delay": timedelta(minutes=s["retry_delay_minutes"]),
                "execution_timeout": timedelta(minutes=s["timeout_minutes"]),
                "on_failure_callback": self.on_failure}

    @property
    def lake(self) -> str:
        """The configured lake root: a URI as given, a path made absolute."""
        return _location(self.raw["lake"])

    def lake_template(self, store: Store) -> str:
        """The store's lake directory as a template: ``<lake root>/<store name>``."""
        root = self.lake
        return f"{{{{ var.value.get({_jinja_str(LAKE_VARIABLE)}, {_jinja_str(root)}) }}}}/{store.name}"

    def assets(self, store: Store, *tables: str) -> list[Asset]:
        """The Delta ``tables`` of ``store``'s lake as assets, for a task's ``outlets``: URI
        ``<lake URI>/<store>/<table>`` of the configured lake (not of the run-time Variable).
        The URI is also the name: Airflow refuses to run a task whose outlet shares its name with
        an active asset of another URI, as it would after the lake moved."""
        return [Asset(uri=f"{_uri(self.lake)}/{store.name}/{table}", group="rocketlake")
                for table in tables]

    def report_template(self, store: Store) -> str:
        """Where a nightly run's consistency report goes: one file per run."""
        return f"{_path(self.raw['reports'])}/{store.name}/{{{{ run_id }}}}.json"

    def nightly_cron(self, store: Store) -> str:
        """Cron for the store's ``deleteWhen`` hours (``04``, or several as ``04;16``)."""
        hours = ",".join(map(str, sorted(store.delete_hours)))
        return f"{int(self.section('nightly')['minute'])} {hours} * * *"

    def application(self, job: str) -> str:
        """The spark-submit application file of ``job``."""
        return f"{_path(self.spark['jobs'])}/{job}.py"

    def submit_kwargs(self, *, delta: bool = False) -> dict[str, Any]:
        """:class:`SparkSubmitOperator` arguments shared by every job (``delta``: with the
        Delta Lake packages)."""
        python = _path(self.spark["python"]) if "/" in self.spark["python"] else self.spark["python"]
        conf = {**self.spark.get("conf", {}), "spark.pyspark.python": python,
                "spark.pyspark.driver.python": python}
        if delta:
            conf["spark.jars.ivy"] = _path(self.spark["ivy"]) if "ivy" in self.spark else str(IVY_DIR)
        py_files = ",".join(_path(p) for p in self.spark.get("py_files", []))
        return {"conn_id": self.spark["conn_id"], "conf": conf,
                "packages": self.spark["packages"] if delta else None, "py_files": py_files or None}

    def submit_job(self, task_id: str, job: str, store: Store, args: list[str], *,
                   delta: bool = False, **kwargs: Any) -> SparkSubmitOperator:
        """A task of ``store`` that spark-submits ``jobs/<job>.py <args>``."""
        return SparkSubmitOperator(
            task_id=task_id, name=f"rocketlake-{job}-{store.name}", application=self.application(job),
            application_args=args, **self.submit_kwargs(delta=delta), **kwargs)

    def spark_job(self, task_id: str, job: str, store: Store, args: list[str], *,
                  delta: bool = False, **kwargs: Any) -> SparkSubmitOperator:
        """A task that spark-submits ``jobs/<job>.py --store <store> <args> <store --sets>``."""
        return self.submit_job(task_id, job, store,
                               ["--store", store.path_template, *args, *store.set_args],
                               delta=delta, **kwargs)

    def rebuild_request(self, store: Store, path: str, structures: list[str],
                        mode: str) -> dict[str, Any]:
        """The :class:`SparkSubmitOperator` arguments of the one rebuild job that rebuilds
        ``structures`` of the store at ``path`` in ``mode``."""
        return {"application": self.application(REBUILD_JOB),
                "name": f"rocketlake-{REBUILD_JOB}-{store.name}",
                "application_args": ["--store", path, *rebuild_args(structures_arg(structures), mode),
                                     *store.set_args]}


def load_settings(path: str | Path | None = None) -> Settings:
    """Read the config file (``path``, else ``$ROCKETLAKE_AIRFLOW_CONFIG``, else `conf/airflow.toml`)."""
    path = Path(path or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG)
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    stores = {}
    for name, s in raw.get("stores", {}).items():
        settings = {k: str(v) for k, v in s.get("set", {}).items()}
        try:
            delete_hours = load_config(settings).delete_hours
        except ValueError as e:  # SettingError: an unknown name or a bad value
            raise ValueError(f"{path}: [stores.{name}] set: {e}") from e
        stores[name] = Store(name, _path(s["path"]), settings, delete_hours)
    if not stores:
        raise ValueError(f"{path}: no [stores.<name>] configured")
    on_failure = _callable(raw.get("alerts", {}).get("on_failure", DEFAULT_FAILURE_CALLBACK),
                           f"{path}: [alerts] on_failure")
    return Settings(raw, stores, on_failure)
