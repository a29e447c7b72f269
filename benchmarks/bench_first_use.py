"""First use: the first `rocketlake dump` and the first ingest of 50,000 messages on a fresh
install with empty caches, and the second run of each (issue 27).

    .venv/bin/python benchmarks/bench_first_use.py [--wheel dist/rocketlake-*.whl] [--dir var/bench-first-use]

A fresh install is the wheel `make dist` builds (``--wheel`` to reuse one) installed with
``pip install --no-deps --target`` into a new folder, which is the whole of rocketlake the
commands see (``PYTHONPATH``; the dependencies are this environment's), with ``HOME``,
``TMPDIR`` and ``XDG_CACHE_HOME`` pointing at new empty folders and ``NUMBA_CACHE_DIR`` unset:
no cache exists but what the wheel ships. Three installs:

- ``wheel``: as installed (the kernels it ships, ``store/kernels/compiled/``);
- ``wheel as zip``: the wheel file itself on ``PYTHONPATH``, as ``spark-submit --py-files``
  gives it to executors (the shipped kernels are copied to ``~/.cache/rocketlake`` once);
- ``no shipped kernels``: the same install with ``compiled/`` removed (what a first use cost
  before: every kernel a command calls is compiled).

Commands: ``rocketlake dump commitlog --to-offset 1000`` (the first records) and a full ``dump
commitlog`` of the sample store (the pipeline's 50,000 sample events, made once), ``rocketlake
ingest`` of the same events as JSON Lines into a new store. Prints wall and CPU seconds of each
first and second run as a Markdown table, ready for benchmarks/RESULTS.md.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rocketlake.jobs.cli import pipeline, sample

ROOT = Path(__file__).resolve().parent.parent
N = 50_000


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one command (AssertionError when it fails)."""
    c, t = cpu(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise AssertionError(f"{cmd} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, cpu() - c


def fresh_env(work: Path, path: Path) -> dict[str, str]:
    """An environment whose rocketlake is ``path`` and whose caches are new, empty folders."""
    home = Path(tempfile.mkdtemp(prefix="home-", dir=work))
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_CACHE_DIR", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    return {**env, "PYTHONPATH": str(path), "HOME": str(home), "TMPDIR": str(home),
            "XDG_CACHE_HOME": str(home / ".cache")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheel", type=Path, help="the wheel to install (default: build it with make dist)")
    ap.add_argument("--dir", type=Path, default=ROOT / "var" / "bench-first-use")
    a = ap.parse_args()
    if a.wheel is None:
        subprocess.run(["make", "-s", "dist"], cwd=ROOT, check=True, capture_output=True)
        a.wheel = next((ROOT / "dist").glob("rocketlake-*-py3-none-any.whl"))
    a.dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="run-", dir=a.dir))
    py = sys.executable
    try:
        store = work / "sample-store"
        pipeline.ingest(store, N, {})
        events = work / "events.jsonl"
        with events.open("w", encoding="utf-8") as f:
            f.writelines(json.dumps(e) + "\n" for e in sample.events(N))
        installs: dict[str, Path] = {}
        for name in ("wheel", "no shipped kernels"):
            target = work / name.replace(" ", "-")
            subprocess.run([py, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                            str(a.wheel)], check=True, capture_output=True)
            installs[name] = target
        shutil.rmtree(installs["no shipped kernels"] / "rocketlake" / "store" / "kernels" / "compiled")
        installs["wheel as zip"] = a.wheel.resolve()
        cli = [py, "-m", "rocketlake.jobs.cli"]
        commands = {
            "dump, first records": [*cli, "dump", "commitlog", "--store", str(store), "--to-offset", "1000"],
            "dump, whole store": [*cli, "dump", "commitlog", "--store", str(store)],
            f"ingest {N:,} messages": [*cli, "ingest", "--create", "--store", "{out}", str(events)],
        }
        print("| install | command | first: wall s | first: CPU s | second: wall s | second: CPU s |")
        print("|---|---|---:|---:|---:|---:|")
        for name, install in installs.items():
            for what, cmd in commands.items():
                path = install
                if install.is_dir():  # a new copy for each command: what one command compiled
                    path = Path(tempfile.mkdtemp(prefix="install-", dir=work)) / "site"
                    shutil.copytree(install, path)  # into the package is not there for the next
                env = fresh_env(work, path)
                runs = []
                for i in (1, 2):
                    out = work / f"ingested-{i}"
                    runs.append(timed([c.replace("{out}", str(out)) for c in cmd], env, work))
                    shutil.rmtree(out, ignore_errors=True)
                (w1, c1), (w2, c2) = runs
                print(f"| {name} | {what} | {w1:.2f} | {c1:.2f} | {w2:.2f} | {c2:.2f} |", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
