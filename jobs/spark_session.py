"""The one place a SparkSession is built: master, Delta Lake, Python workers.

Every job calls :func:`build_session`. Under ``spark-submit`` the master (and anything else given
with ``--master`` / ``--conf``) comes from spark-submit; started from plain Python it defaults to
``local[*]``. A session with Delta Lake gets the Delta jars from the per-user cache as local files
(:mod:`rocketlake.jobs.delta_jars`: fetched once per user, then no resolution, no Ivy output, no
network); a session without Delta (the rebuilds without ``--lake``, reading the store through the
source) touches no jars at all.

Python workers run ``spark.pyspark.python`` / ``$PYSPARK_PYTHON`` when set (a packed environment
shipped with ``--archives env.tar.gz#env``), else this interpreter. On a master that is not local
the executors get the package itself (the wheel, or a zip of the installed package). The driver's
log4j2 configuration is the one shipped with the package (WARN for Spark, INFO for rocketlake)
when rocketlake starts the JVM; under spark-submit pass it with ``--driver-java-options``.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from pyspark.sql import SparkSession

from rocketlake.jobs.delta_jars import delta_jars, delta_submit_args

#: The master of sessions whose caller names none (outside spark-submit).
DEFAULT_MASTER = "local[*]"
LOG_LEVEL = "WARN"

#: Session settings every job gets; callers and spark-submit --conf may override them.
DEFAULT_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
}
DELTA_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def under_spark_submit() -> bool:
    """True when this Python process is the driver spark-submit started (its JVM already runs)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(app_name: str, conf: Mapping[str, str] | None = None,
                  master: str | None = None, delta: bool = True) -> SparkSession:
    """Get or create the SparkSession for ``app_name``, with Delta Lake unless ``delta=False``.

    ``master`` applies only when no spark-submit chose one (default :data:`DEFAULT_MASTER`);
    ``conf`` entries override the defaults. Python workers run ``spark.pyspark.python`` (from ``conf``) or
    ``$PYSPARK_PYTHON`` when either is set, else this interpreter (``sys.executable``), so they see
    the same packages (pyarrow, numpy) as the driver. On a master that is not ``local``, the
    executors get the rocketlake package from this session (:func:`_ship_package`).

    Under spark-submit the driver JVM is already running, so jars can no longer be added: a job
    that needs Delta must then be submitted with :func:`delta_submit_args`; without them this
    raises a RuntimeError saying so.
    """
    settings = {**DEFAULT_CONF, **(DELTA_CONF if delta else {}), **(conf or {})}
    _choose_worker_python(settings)
    builder = SparkSession.builder.appName(app_name)
    if not under_spark_submit():
        builder = builder.master(master or DEFAULT_MASTER)
        if log4j2_file().is_file():  # not when imported from an archive
            settings.setdefault("spark.driver.extraJavaOptions",
                                f"-Dlog4j2.configurationFile={log4j2_file()}")
    for key, value in settings.items():
        builder = builder.config(key, value)
    if delta and under_spark_submit():
        if not _jvm_has_class(DELTA_CONF["spark.sql.extensions"]):
            raise RuntimeError("Delta Lake jars are not on this spark-submit's classpath; submit "
                               "with: spark-submit " + " ".join(delta_submit_args()) + " ...")
    elif delta:
        jars = [settings["spark.jars"]] if settings.get("spark.jars") else []
        builder = builder.config("spark.jars", ",".join([*jars, *map(str, delta_jars())]))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(LOG_LEVEL)
    if delta:
        _size_delta_snapshots(spark, settings)
    _ship_package(spark)
    from rocketlake.transforms import register as register_rocketmq_source  # numba: only here

    register_rocketmq_source(spark)
    return spark


#: Delta's partitions for rebuilding a table's state from its log (Delta's default: 50).
SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"


def _size_delta_snapshots(spark: SparkSession, settings: Mapping[str, str]) -> None:
    """On a local master, rebuild Delta table state in as many partitions as there are cores
    unless the caller chose: every Delta read, MERGE and append first rebuilds the table's state,
    and Delta's 50 partitions cost a small lake seconds per operation (a 1-row append: 4.4 s with
    50 on 2 cores, 1.2 s with 2). A cluster keeps Delta's default."""
    sc = spark.sparkContext
    chosen = SNAPSHOT_PARTITIONS in settings or sc.getConf().contains(SNAPSHOT_PARTITIONS)
    if not chosen and (sc.master or "").startswith("local"):
        spark.conf.set(SNAPSHOT_PARTITIONS, str(sc.defaultParallelism))


def _choose_worker_python(settings: Mapping[str, str]) -> None:
    """Set ``$PYSPARK_PYTHON`` (what pyspark starts Python workers with) to ``spark.pyspark.python``
    when the settings give it, keep it when the environment (or spark-submit) set it, else use
    this interpreter."""
    chosen = settings.get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = chosen or sys.executable


def log4j2_file() -> Path:
    """The log4j2 configuration shipped with the package (WARN for Spark, INFO for rocketlake)."""
    return Path(str(resources.files("rocketlake").joinpath("log4j2.properties")))


def _ship_package(spark: SparkSession) -> None:
    """Put the rocketlake package on the executors' Python path, once per SparkContext.

    From an archive (the wheel given to ``spark-submit --py-files``): Spark does so only for
    ``.zip``, ``.egg`` and ``.jar`` files (``SparkContext.PACKAGE_EXTENSIONS``), so a wheel is
    shipped as a ``.zip`` copy. From an installed or editable package on a master that is not
    ``local`` (whose workers share this environment): a zip of the imported package's folders."""
    import rocketlake

    sc = spark.sparkContext
    if getattr(sc, "_rocketlake_shipped", False):
        return
    archive = getattr(rocketlake.__spec__.loader, "archive", None)  # set by zipimport only
    if archive is not None and archive.lower().endswith((".zip", ".egg", ".jar")):
        return
    if archive is None and (sc.master or "").startswith("local"):
        return
    target = Path(tempfile.mkdtemp(prefix="rocketlake-")) / "rocketlake.zip"
    if archive is not None:
        shutil.copyfile(archive, target)
    else:
        _zip_package(target)
    sc.addPyFile(str(target))
    sc._rocketlake_shipped = True  # type: ignore[attr-defined]


#: The packages of the distribution (pyproject.toml's ``packages``).
PACKAGES = ("rocketlake", "rocketlake.store", "rocketlake.transforms", "rocketlake.jobs")


def _zip_package(target: Path) -> None:
    """Write the imported ``rocketlake`` package (its root and every subpackage, wherever each
    folder lies: an editable install maps them onto separate folders) into the zip ``target``."""
    import importlib

    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        for name in PACKAGES:
            folder = Path(next(iter(importlib.import_module(name).__path__)))
            prefix = Path(*name.split("."))
            for path in sorted(folder.iterdir() if name == "rocketlake" else folder.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                    z.write(path, prefix / path.relative_to(folder))


def _jvm_has_class(name: str) -> bool:
    from pyspark import SparkContext

    SparkContext._ensure_initialized()
    jvm = SparkContext._jvm
    assert jvm is not None, "SparkContext._ensure_initialized() starts the JVM gateway"
    try:
        jvm.java.lang.Class.forName(name, False, jvm.java.lang.Thread.currentThread()
                                    .getContextClassLoader())
        return True
    except Exception:  # py4j wraps the ClassNotFoundException
        return False
