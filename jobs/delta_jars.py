"""The Delta Lake jars: which ones, fetched once per user, and where they are.

They are resolved from Maven Central by Spark's own Ivy resolution (``--packages``) into
:data:`IVY_DIR`, ``ivy`` in the per-user cache (``store/user_cache.py``, beside the compiled
kernels; ``$ROCKETLAKE_IVY_DIR`` names another folder), once: the resolution runs in a child
``spark-submit`` whose Ivy output is kept out of the terminal (shown only when it fails), and the
jar files it retrieved are listed in a manifest there. Sessions the package starts put those
files on the classpath (``spark.jars``), so a Spark start resolves nothing, prints no Ivy lines,
needs no network, and creates nothing in the working directory. The per-user cache is
rocketlake's own rather than Ivy's ``~/.ivy2``: it sits with the package's other cache, shared by
every checkout and working directory, and never mixes with what other Spark applications resolve.

``spark-submit`` applications (the Airflow DAGs) get :func:`delta_submit_args` instead:
``--packages`` with the same Ivy folder, as the driver's JVM is already running when their Python
starts.
"""
from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

from rocketlake.store.safe_files import write_whole
from rocketlake.store.user_cache import user_cache_dir

log = logging.getLogger(__name__)

#: Spark's Ivy folder for the Delta jars (``spark.jars.ivy``): its ``cache/`` and ``jars/``.
IVY_DIR = Path(os.environ.get("ROCKETLAKE_IVY_DIR") or user_cache_dir() / "ivy").resolve()

#: delta-spark wheel versions whose jars Maven Central does not carry, and the published jar
#: version with the same Python API to fetch instead (4.4.1 exists on PyPI only; the Spark 4.2
#: artifact ``delta-spark_4.2_2.13`` is published as 4.4.0).
DELTA_JAR_VERSION_FOR_WHEEL: dict[str, str] = {"4.4.1": "4.4.0"}


def delta_packages() -> str:
    """The Maven coordinates of the installed delta-spark wheel's jars (``spark.jars.packages``),
    as ``delta.configure_spark_with_delta_pip`` names them, mapped to published versions."""
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    packages = configure_spark_with_delta_pip(SparkSession.Builder())._options["spark.jars.packages"]
    out = []
    for coord in packages.split(","):
        group, artifact, version = coord.split(":")
        if group == "io.delta":
            version = DELTA_JAR_VERSION_FOR_WHEEL.get(version, version)
        out.append(f"{group}:{artifact}:{version}")
    return ",".join(out)


def delta_submit_args() -> list[str]:
    """spark-submit options that put the Delta jars on the classpath, resolved into :data:`IVY_DIR`."""
    return ["--packages", delta_packages(), "--conf", f"spark.jars.ivy={IVY_DIR}"]


def manifest(packages: str) -> Path:
    """The file listing the local jars of ``packages`` (one path a line) in :data:`IVY_DIR`."""
    return IVY_DIR / (packages.replace(":", "_").replace(",", "+") + ".jars")


def delta_jars() -> list[Path]:
    """The local jar files of :func:`delta_packages`, resolved into :data:`IVY_DIR` first when no
    manifest lists them or a listed file is gone (the one time this needs the network; a
    RuntimeError with Ivy's output when the resolution fails). Processes starting at once
    resolve one at a time (a lock file in :data:`IVY_DIR`): the later ones read the first's list."""
    packages = delta_packages()
    listed = manifest(packages)
    jars = _listed(listed)
    if jars is None:
        IVY_DIR.mkdir(parents=True, exist_ok=True)
        with open(IVY_DIR / "resolving.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            jars = _listed(listed)
            if jars is None:
                jars = _resolve(packages)
                write_whole(listed, "".join(f"{j}\n" for j in jars).encode(),
                            "listing the Delta Lake jars")
    return jars


def _listed(listed: Path) -> list[Path] | None:
    """The jars the manifest ``listed`` names, or None when it is missing or a jar is gone."""
    if not listed.is_file():
        return None
    jars = [Path(line) for line in listed.read_text(encoding="utf-8").splitlines() if line]
    return jars if jars and all(j.is_file() for j in jars) else None


def _resolve(packages: str) -> list[Path]:
    """Resolve ``packages`` into :data:`IVY_DIR` with Spark's own resolution (a ``spark-submit``
    of this file, which prints the ``spark.jars`` Spark made of them) and return the jar files."""
    from pyspark.find_spark_home import _find_spark_home

    log.info("fetching the Delta Lake jars (%s) into %s, once", packages, IVY_DIR)
    submit = Path(_find_spark_home()) / "bin" / "spark-submit"
    done = subprocess.run(
        [str(submit), "--master", "local[1]", "--packages", packages,
         "--conf", f"spark.jars.ivy={IVY_DIR}", "--conf", f"spark.pyspark.python={sys.executable}",
         "--conf", f"spark.pyspark.driver.python={sys.executable}", __file__],
        capture_output=True, text=True, cwd=IVY_DIR)
    lines = done.stdout.splitlines()
    if done.returncode != 0 or not lines or not lines[-1].strip():
        raise RuntimeError(f"resolving the Delta Lake jars {packages} into {IVY_DIR} failed "
                           f"(spark-submit exit {done.returncode}):\n{done.stderr[-4000:]}")
    return [Path(unquote(urlparse(u).path)) if u.startswith("file:") else Path(u)
            for u in lines[-1].split(",")]


if __name__ == "__main__":  # run by _resolve under spark-submit: print the jars it resolved
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    print(SparkConf().get("spark.jars", ""))
