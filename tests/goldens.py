"""Where the vendored golden files live (written by RocketMQ, not by us), and how to read them.

Test modules import this by name (``from goldens import ...``); fixtures stay in conftest.py.
"""
from __future__ import annotations

import json
from pathlib import Path

GOLDEN = Path(__file__).parent / "golden"
GOLDEN_498 = GOLDEN / "rocketmq-4.9.8"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
