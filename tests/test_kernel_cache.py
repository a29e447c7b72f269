"""The kernels ship compiled: a fresh install of the wheel `make dist` builds, in a folder of its
own with empty caches (a new ``HOME``, no ``NUMBA_CACHE_DIR``), runs the commands (and a writer's
open after a crash: abnormal recovery) without compiling a kernel: every kernel it calls is a
numba cache hit, none a miss. The same holds for the wheel file itself on the path (a zip, as
``--py-files`` gives it to executors): its compiled kernels are copied once to
``~/.cache/rocketlake``."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

SETS = ["--set", "mappedFileSizeCommitLog=65536", "--set", "mappedFileSizeConsumeQueue=600"]

#: runs commands in one process, then prints the numba cache hits and misses of every kernel
COMMANDS = f"""
import contextlib, io, json, sys
from pathlib import Path
from numba.core.dispatcher import Dispatcher
from rocketlake.jobs.cli import main, pipeline, sample
from rocketlake.store.kernels.cache import cache_folder
work, sets = Path(sys.argv[1]), {SETS!r}
pipeline.ingest(work / "store", 200, dict(s.split("=") for s in sets[1::2]))
pipeline.ingest(work / "one", 1, dict(s.split("=") for s in sets[1::2]))  # batches of one record
(work / "events.jsonl").write_text("".join(json.dumps(e) + "\\n" for e in sample.events(200)))
s = ["--store", str(work / "store"), *sets]
for argv in (["dump", "commitlog", *s], ["dump", "index", *s], ["verify", *s],
             ["verify", "--store", str(work / "one"), *sets],
             ["get", *s, "--topic", "orders", "--queue", "0"],
             ["ingest", "--create", "--store", str(work / "ingested"), *sets, str(work / "events.jsonl")]):
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0, argv
(work / "store" / "abort").write_bytes(b"")  # a writer that died: the next open recovers
from rocketlake.store import MessageStore
MessageStore(work / "store", **{{k: int(v) for k, v in (a.split("=") for a in sets[1::2])}}).close()
hits, misses = 0, []
for name, module in list(sys.modules.items()):
    for attr, value in vars(module).items() if name.startswith("rocketlake.") else ():
        if isinstance(value, Dispatcher):
            hits += sum(value.stats.cache_hits.values())
            misses += [f"{{name}}.{{attr}}"] * bool(value.stats.cache_misses)
print(json.dumps({{"hits": hits, "misses": misses, "folder": str(cache_folder())}}))
"""


#: loads recovery's kernels on the preload thread, then prints which it loaded and compiled
PRELOAD = """
import json
from rocketlake.store import recovery
from rocketlake.store.kernels import preload_behind
preload_behind(recovery.KERNELS).join()
names = lambda ks: [k.py_func.__name__ for k in ks]
print(json.dumps({"loaded": names(k for k in recovery.KERNELS if k.overloads),
                  "misses": names(k for k in recovery.KERNELS if k.stats.cache_misses),
                  "all": names(recovery.KERNELS)}))
"""


def run_commands(path: Path, work: Path, code: str = COMMANDS) -> dict:
    home = work / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
    env.update(PYTHONPATH=str(path), HOME=str(home), TMPDIR=str(home), XDG_CACHE_HOME=str(home / "c"))
    done = subprocess.run([sys.executable, "-c", code, str(work)], env=env, capture_output=True,
                          text=True, cwd=work)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def shipped(wheel: Path) -> set[str]:
    names = {n.rpartition("/")[2] for n in zipfile.ZipFile(wheel).namelist()
             if n.startswith("rocketlake/store/kernels/compiled/")}
    assert any(n.endswith(".nbi") for n in names) and any(n.endswith(".nbc") for n in names)
    return names


def test_a_fresh_install_compiles_no_kernel(wheel: Path, shipped: set[str], tmp_path: Path) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)  # what pip installs, in a folder the wheel never saw
    got = run_commands(site, tmp_path)
    assert got["misses"] == [] and got["hits"] > 0
    assert got["folder"] == str(site / "rocketlake" / "store" / "kernels" / "compiled")
    assert {p.name for p in Path(got["folder"]).iterdir()} == shipped  # nothing compiled, saved


def test_the_wheel_as_a_zip_compiles_no_kernel(wheel: Path, shipped: set[str], tmp_path: Path) -> None:
    got = run_commands(wheel, tmp_path)
    assert got["misses"] == [] and got["hits"] > 0
    folder = Path(got["folder"])
    assert folder.parent == tmp_path / "home" / "c" / "rocketlake"
    assert {p.name for p in folder.iterdir() if p.suffix in (".nbi", ".nbc")} == shipped


def test_a_changed_helper_module_recompiles_the_kernels_that_call_it(wheel: Path, tmp_path: Path) -> None:
    """A kernel holds the machine code of the helpers it calls from other kernel modules
    (``records.walk`` calls ``words.load_be64``): after ``words.py`` changes, ``walk`` is compiled
    again, not loaded as it was compiled with the old helper."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    words = site / "rocketlake" / "store" / "kernels" / "words.py"
    words.write_text(words.read_text() + "\n# a changed helper module\n")
    got = run_commands(site, tmp_path)
    assert "rocketlake.store.kernels.records.walk" in got["misses"]


def test_recovery_kernels_are_preloaded_without_a_call_or_a_compile(wheel: Path, tmp_path: Path) -> None:
    """``kernels.preload_behind`` (a writer's open after a crash starts it): every kernel of
    ``recovery.KERNELS`` holds its machine code afterwards, none was called, none compiled."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    got = run_commands(site, tmp_path, PRELOAD)
    assert got["loaded"] == got["all"] and len(got["all"]) == 9
    assert got["misses"] == []


#: with files limited to 128 bytes, an empty cache folder: zlib's CRC-32 of "123456789" by the
#: kernel, and the warnings the process saw
UNSAVED = """
import json, resource, sys, warnings
resource.setrlimit(resource.RLIMIT_FSIZE, (128, 128))  # a write past it fails (EFBIG), as on a full disk
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as seen:
    import numpy as np
    from rocketlake.store.kernels.crc import crc32
    crc = crc32(np.frombuffer(b"123456789", dtype=np.uint8), 0, 9)
print(json.dumps({"crc": crc, "warnings": [str(w.message) for w in seen]}))
"""


def test_a_kernel_the_disk_cannot_save_runs_and_leaves_no_part_file(tmp_path: Path) -> None:
    """A full disk under the kernel cache costs a compile, not the command: the kernel compiled
    in a process that cannot write its cache returns the CRC-32 check value 0xCBF43926, the
    failed save is a warning naming the folder, and the folder holds no part of a file (the
    shipped cache copied in and numba's own writes are each made aside and renamed)."""
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(NUMBA_CACHE_DIR=str(cache))
    done = subprocess.run([sys.executable, "-c", UNSAVED], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["crc"] == 0xCBF43926
    folder = next(cache.iterdir())
    assert any(str(folder) in w and "was not saved" in w for w in got["warnings"]), got["warnings"]
    assert [p.name for p in folder.iterdir() if ".tmp" in p.name] == []
