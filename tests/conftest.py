"""Shared fixtures: writable copies of the vendored golden store and its settings; the wheel; a
small tmpfs (a disk that fills up)."""
from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from goldens import GOLDEN_498


@pytest.fixture()
def golden_store(tmp_path: Path) -> Path:
    """A writable copy of the store RocketMQ 4.9.8 wrote."""
    dst = tmp_path / "golden-store"
    shutil.copytree(GOLDEN_498 / "store", dst)
    return dst


@pytest.fixture(scope="session")
def golden_settings() -> dict:
    return json.loads((GOLDEN_498 / "settings.json").read_text())


@pytest.fixture(scope="session")
def wheel() -> Path:
    """The wheel `make dist` builds (built once per session); it installs one top-level name."""
    root = Path(__file__).resolve().parents[1]
    subprocess.run(["make", "-s", "dist"], cwd=root, check=True, capture_output=True)
    wheels = sorted((root / "dist").glob("rocketlake-*-py3-none-any.whl"))
    assert len(wheels) == 1, wheels
    names = {n.split("/")[0] for n in zipfile.ZipFile(wheels[0]).namelist()}
    assert {n for n in names if not n.endswith(".dist-info")} == {"rocketlake"}
    return wheels[0]


@pytest.fixture()
def small_fs(tmp_path: Path):
    """A 4 MiB tmpfs mounted at a fresh directory, unmounted afterwards."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)
