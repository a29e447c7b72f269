"""Shared fixtures: paths to the vendored golden files (written by RocketMQ, not by us)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"
GOLDEN_498 = GOLDEN / "rocketmq-4.9.8"


@pytest.fixture()
def golden_store(tmp_path: Path) -> Path:
    """A writable copy of the store RocketMQ 4.9.8 wrote."""
    dst = tmp_path / "golden-store"
    shutil.copytree(GOLDEN_498 / "store", dst)
    return dst


@pytest.fixture(scope="session")
def golden_settings() -> dict:
    return json.loads((GOLDEN_498 / "settings.json").read_text())


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
