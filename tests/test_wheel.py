"""The wheel `make dist` builds, installed in a clean virtualenv with its `spark` extra (and in
one without it: the store commands and the report work, the Spark commands say what to install).

It adds exactly one top-level name (`rocketlake`) to site-packages, ships its defaults as package
data, writes and reads a store on them from a directory that is not the checkout, and its
command line lists every command, each answering `--help`. A job script runs under
`spark-submit --py-files <wheel>` with a Python that has the dependencies but not rocketlake,
its executors compiling no kernel (the wheel ships them compiled).
"""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Every command docs/user-guide.md and docs/operator-guide.md document.
COMMANDS = ["pipeline", "ingest", "dump", "get", "query", "report", "verify", "check-consistency",
            "rebuild-consumequeue", "rebuild-index", "publish-offsets", "compact", "lag",
            "topic-status", "offsets", "optimize-lake"]

WRITE_AND_READ = """
import sys
from rocketlake.store import Message, MessageStore
root = sys.argv[1]
with MessageStore(root) as ms:
    r = ms.put(Message("orders", b"hello", tags="TagA", keys=["order-1"]))
with MessageStore(root, read_only=True) as ms:
    got = ms.get("orders", 0, 0)
    print(ms.config.mappedFileSizeCommitLog, got.status.name, got.messages[0].record.body.decode(),
          [rec.body.decode() for rec in ms.query("orders", "order-1")])
"""


SMALL = ["mappedFileSizeCommitLog=65536", "mappedFileSizeConsumeQueue=600"]
WRITE_SMALL = f"""
from rocketlake.store import Message, MessageStore
settings = dict(s.split("=") for s in {SMALL!r})
with MessageStore("store", **settings) as ms:
    ms.put_batch([Message("orders", b"m%d" % i, i % 2) for i in range(100)])
"""



@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean virtualenv with the wheel and its spark extra; returns its bin directory."""
    work = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True)
    subprocess.run([str(work / "venv" / "bin" / "pip"), "install", "--quiet", f"{wheel}[spark]"],
                   check=True, capture_output=True)
    return work / "venv" / "bin"


def test_one_top_level_package_with_its_defaults(installed: Path, tmp_path: Path) -> None:
    out = subprocess.run([str(installed / "python"), "-c", WRITE_AND_READ, str(tmp_path / "store")],
                         cwd=tmp_path, check=True, capture_output=True, text=True
                         ).stdout.strip().split(maxsplit=3)
    # conf/store.conf's CommitLog file size is RocketMQ's default, 1 GiB
    assert out == [str(1 << 30), "FOUND", "hello", "['hello']"]
    assert (tmp_path / "store" / "commitlog" / "00000000000000000000").stat().st_size == 1 << 30


def test_every_command_is_listed_and_answers_help(installed: Path, tmp_path: Path) -> None:
    usage = subprocess.run([str(installed / "rocketlake"), "--help"], cwd=tmp_path, check=True,
                           capture_output=True, text=True).stdout
    listed = {line.split()[0] for line in usage.splitlines() if line.startswith("  ") and line.split()}
    assert set(COMMANDS) <= listed
    for command in COMMANDS:
        done = subprocess.run([str(installed / "rocketlake"), command, "--help"], cwd=tmp_path,
                              capture_output=True, text=True)
        assert done.returncode == 0 and "usage:" in done.stdout, (command, done.stderr)


def test_the_report_page_is_drawn_from_the_shipped_template(installed: Path, tmp_path: Path) -> None:
    subprocess.run([str(installed / "python"), "-c", WRITE_SMALL], cwd=tmp_path, check=True)
    sets = [arg for s in SMALL for arg in ("--set", s)]
    subprocess.run([str(installed / "rocketlake"), "report", "--store", "store", "--out", "r.html", *sets],
                   cwd=tmp_path, check=True, capture_output=True)
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<div class=v>100</div><div class=k>messages in ConsumeQueues</div>" in page
    assert page.endswith("</html>\n")


@pytest.fixture(scope="module")
def without_spark(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean virtualenv with the wheel and its dependencies but not its spark extra; returns
    its bin directory."""
    from importlib.metadata import requires

    work = tmp_path_factory.mktemp("wheel-without-spark")
    subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True)
    pip = str(work / "venv" / "bin" / "pip")
    base = [r for r in requires("rocketlake") or () if "extra ==" not in r]
    subprocess.run([pip, "install", "--quiet", *base], check=True, capture_output=True)
    subprocess.run([pip, "install", "--quiet", "--no-deps", str(wheel)], check=True, capture_output=True)
    return work / "venv" / "bin"


def test_without_the_spark_extra_spark_commands_say_what_to_install(without_spark: Path,
                                                                    tmp_path: Path) -> None:
    assert subprocess.run([str(without_spark / "python"), "-c", "import pyspark"],
                          capture_output=True).returncode == 1      # truly without Spark
    subprocess.run([str(without_spark / "python"), "-c", WRITE_SMALL], cwd=tmp_path, check=True)
    sets = [arg for s in SMALL for arg in ("--set", s)]
    for argv in (["rebuild", "--store", "store", "--output", "out"],
                 ["publish-offsets", "--store", "store", "--lake", "lake", "--store-name", "b"],
                 ["pipeline", "--store", "sample", "--lake", "sample-lake"]):
        done = subprocess.run([str(without_spark / "rocketlake"), *argv, *sets], cwd=tmp_path,
                              capture_output=True, text=True)
        assert done.returncode == 2, (argv, done.stderr)
        assert "install rocketlake[spark]" in done.stderr and "Traceback" not in done.stderr, argv
    report = subprocess.run([str(without_spark / "rocketlake"), "report", "--store", "store",
                             "--out", "r.html", *sets], cwd=tmp_path, capture_output=True, text=True)
    assert report.returncode == 0, report.stderr        # the report of a store needs no Spark
    assert ("<div class=v>100</div><div class=k>messages in ConsumeQueues</div>"
            in (tmp_path / "r.html").read_text())


def test_a_job_script_runs_from_the_wheel_alone(installed: Path, wheel: Path, tmp_path: Path) -> None:
    # Last in this module: it leaves the virtualenv with the dependencies but without rocketlake,
    # as on a cluster whose Python has the dependencies and gets the package with --py-files.
    subprocess.run([str(installed / "pip"), "uninstall", "--yes", "--quiet", "rocketlake"], check=True)
    cache = tmp_path / "cache"  # the shipped kernels are copied here, once: nobody compiles any
    env = {**os.environ, "PYSPARK_PYTHON": str(installed / "python"), "XDG_CACHE_HOME": str(cache)}
    env.pop("PYTHONPATH", None)
    env.pop("NUMBA_CACHE_DIR", None)
    subprocess.run([str(installed / "python"), "-c", WRITE_SMALL], cwd=tmp_path, check=True,
                   env={**env, "PYTHONPATH": str(wheel)})
    sets = [arg for s in SMALL for arg in ("--set", s)]
    done = subprocess.run([str(installed / "spark-submit"), "--py-files", str(wheel),
                           str(ROOT / "jobs" / "rebuild_consumequeue.py"), "--store", "store",
                           "--output", "out", *sets], cwd=tmp_path, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    for queue in (0, 1):  # the executors ran the wheel's code: the library's bytes, rebuilt
        name = f"consumequeue/orders/{queue}/00000000000000000000"
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "store" / name).read_bytes()
    # the driver and the executors found every kernel they ran compiled: none saved a new one
    shipped = {n.rpartition("/")[2] for n in zipfile.ZipFile(wheel).namelist()
               if n.startswith("rocketlake/store/kernels/compiled/")}
    (folder,) = (cache / "rocketlake").iterdir()
    assert shipped and {p.name for p in folder.iterdir() if p.suffix in (".nbi", ".nbc")} == shipped

