"""publish-offsets' consumer rows follow the one lag rule: the same rows as `rocketlake lag`, the
report and the pipeline summary on the same store (tests/test_consumer_lag.py)."""
from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

from goldens import GOLDEN_498, LAG_OFFSETS, LAG_ROWS

from rocketlake.jobs.publish_offsets import read_layout, read_snapshot
from rocketlake.store.config import load_config
from rocketlake.store.config_files import read_consumer_offsets


def test_published_consumer_rows_are_the_lag_rule(spark, tmp_path: Path) -> None:
    root = tmp_path / "store"
    shutil.copytree(GOLDEN_498 / "store", root)
    (root / "config" / "consumerOffset.json").write_text(LAG_OFFSETS)
    settings = json.loads((GOLDEN_498 / "settings.json").read_text())
    cfg = load_config({k: str(v) for k, v in settings.items()})
    snap = read_snapshot(root, cfg, read_layout(root, cfg), read_consumer_offsets(root),
                         "s", datetime(2026, 1, 1, tzinfo=UTC))
    rows = snap.consumers.select(["consumer_group", "topic", "queue_id", "consumer_offset",
                                  "max_offset", "lag"]).to_pylist()
    assert sorted(tuple(r.values()) for r in rows) == sorted(LAG_ROWS)
