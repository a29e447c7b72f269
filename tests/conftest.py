"""Shared fixtures: writable copies of the vendored golden store and its settings."""
from __future__ import annotations

import json
import shutil
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
