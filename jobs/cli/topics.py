"""`rocketlake topics`: the topics `config/topics.json` declares (as ``mqadmin topicList`` /
``topicRoute`` and ``kafka-topics --describe`` show them) and the topics the store has
ConsumeQueues of without declaring them (a broker answers no pull for those), from the files
alone (read-only).

Per topic: its read and write queue counts, its permission as ``PermName.perm2String`` (``RW-``,
``R--``, ``-W-``; ``X``: inheritable), whether it is ordered, a 5.x broker's attributes, and how
many ConsumeQueues the store has of it. A topic the file does not declare has ``declared`` false
and no settings. User topics first, then system topics (``store.topic_kinds``), each by name.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

from rocketlake.jobs.cli.reading import open_read_only
from rocketlake.jobs.cli.tables import Row
from rocketlake.jobs.cli.topic_sections import show_apart
from rocketlake.store.topic_config import perm_text, read_topic_configs
from rocketlake.store.topic_kinds import is_system_topic

COLUMNS = ("topic", "perm", "read_queues", "write_queues", "store_queues", "order", "declared",
           "attributes")


def topic_rows(configs: Mapping[str, Mapping[str, Any]], store_queues: Mapping[str, int]) -> list[Row]:
    """One row per topic of ``configs`` (topics.json's table) or ``store_queues`` ({topic: its
    ConsumeQueue count}), in the module docstring's order."""
    rows = []
    for topic in sorted(configs.keys() | store_queues.keys(), key=lambda t: (is_system_topic(t), t)):
        tc = configs.get(topic)
        perm = None if tc is None else tc.get("perm")
        rows.append({
            "topic": topic, "system": is_system_topic(topic), "declared": tc is not None,
            "perm": perm_text(perm) if isinstance(perm, int) else None, "perm_value": perm,
            "read_queues": None if tc is None else tc.get("readQueueNums"),
            "write_queues": None if tc is None else tc.get("writeQueueNums"),
            "order": None if tc is None else tc.get("order"),
            "attributes": None if tc is None else tc.get("attributes"),
            "store_queues": store_queues.get(topic, 0)})
    return rows


def table_cell(v: Any) -> Any:
    """A JSON value as a table shows it: yes / no, a list joined by ", ", a map as k=v pairs."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, list):
        return ", ".join(map(str, v)) or None
    if isinstance(v, dict):
        return ",".join(f"{k}={x}" for k, x in v.items()) or None
    return v


def cmd_topics(a: argparse.Namespace) -> int:
    with open_read_only(a) as ms:
        counts: dict[str, int] = {}
        for topic, _ in ms.queue_ranges():
            counts[topic] = counts.get(topic, 0) + 1
        rows = topic_rows(read_topic_configs(a.store), counts)
    if a.json:
        sys.stdout.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    else:
        show_apart(a, [{k: table_cell(v) for k, v in r.items()} for r in rows], (("topics", COLUMNS),))
    return 0
