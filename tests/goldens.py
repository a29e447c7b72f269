"""Where the vendored golden files live (written by RocketMQ, not by us), how to read them, and
the consumer offsets several tests give the golden store, with its lag computed by hand.

Test modules import this by name (``from goldens import ...``); fixtures stay in conftest.py.
"""
from __future__ import annotations

import json
from pathlib import Path

GOLDEN = Path(__file__).parent / "golden"
GOLDEN_498 = GOLDEN / "rocketmq-4.9.8"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


#: a consumerOffset.json for the golden store of GOLDEN_498, whose queue max offsets are orders
#: 31 29 29 31, payments 30 31 29 29, audit-log 29 29 31 30: g1 committed orders 0..1 and a retry
#: topic the store has no queue of; g2 is at the end of payments/1; g3 committed audit-log/2 past
#: its end
LAG_OFFSETS = ('{\n\t"offsetTable":{\n'
               '\t\t"orders@g1":{0:3,1:0\n\t\t},\n'
               '\t\t"payments@g2":{1:31\n\t\t},\n'
               '\t\t"audit-log@g3":{2:40\n\t\t},\n'
               '\t\t"%RETRY%g1@g1":{0:0\n\t\t}\n'
               '\t}\n}')
#: the lag rows of the golden store under LAG_OFFSETS: (group, topic, queue, committed, max, lag),
#: by hand
LAG_ROWS = [
    ("g1", "orders", 0, 3, 31, 28), ("g1", "orders", 1, 0, 29, 29),
    ("g1", "orders", 2, 0, 29, 29), ("g1", "orders", 3, 0, 31, 31),
    ("g1", "%RETRY%g1", 0, 0, 0, 0),  # a group's retry topic after its own topics
    ("g2", "payments", 0, 0, 30, 30), ("g2", "payments", 1, 31, 31, 0),
    ("g2", "payments", 2, 0, 29, 29), ("g2", "payments", 3, 0, 29, 29),
    ("g3", "audit-log", 0, 0, 29, 29), ("g3", "audit-log", 1, 0, 29, 29),
    ("g3", "audit-log", 2, 40, 31, 0), ("g3", "audit-log", 3, 0, 30, 30),
]
