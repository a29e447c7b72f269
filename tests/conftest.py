"""Shared fixtures: writable copies of the vendored golden store and its settings; the wheel."""
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
