"""`rocketlake groups`: the consumer groups of a store (as ``mqadmin consumerProgress`` without
a group, and ``kafka-consumer-groups --list``), from the files alone (read-only): every group
`config/subscriptionGroup.json` declares, with its settings, and every group with committed
offsets in `config/consumerOffset.json`.

Per group: whether it is declared and its main settings (``consumeEnable``,
``consumeBroadcastEnable``, ``retryMaxTimes``, ``retryQueueNums``; all of them, as stored, under
``settings`` in JSON), the topics it committed offsets for (its retry topic apart), and its
``%RETRY%<group>`` and ``%DLQ%<group>`` topics (``store.topic_kinds``) when the store declares
them or has ConsumeQueues of them, with the messages their queues hold. Groups by name.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Collection, Mapping
from typing import Any

from rocketlake.jobs.cli.reading import open_read_only
from rocketlake.jobs.cli.tables import Row, show_rows
from rocketlake.jobs.cli.topics import table_cell
from rocketlake.store.config_files import read_subscription_groups
from rocketlake.store.topic_config import read_topic_configs
from rocketlake.store.topic_kinds import dlq_topic, group_topic_rank, retry_topic

COLUMNS = ("group", "declared", "consume_enable", "broadcast", "retry_max_times", "topics",
           "retry_messages", "dlq_messages")
#: subscriptionGroup.json's names of the settings a row shows
_SETTINGS = {"consume_enable": "consumeEnable", "broadcast": "consumeBroadcastEnable",
             "retry_max_times": "retryMaxTimes", "retry_queue_nums": "retryQueueNums"}


def group_rows(groups: Mapping[str, Mapping[str, Any]], committed: Collection[tuple[str, str]],
               declared_topics: Collection[str],
               ranges: Mapping[tuple[str, int], tuple[int, int]]) -> list[Row]:
    """One row per group of ``groups`` (subscriptionGroup.json's table) or ``committed``
    (consumerOffset.json's (topic, group) keys), by the module docstring; ``declared_topics``:
    topics.json's topics; ``ranges``: (topic, queue) -> (min, max offset) of the store's queues."""
    messages: dict[str, int] = {}
    for (topic, _), (lo, hi) in ranges.items():
        messages[topic] = messages.get(topic, 0) + hi - lo

    def held(topic: str) -> tuple[str | None, int | None]:
        there = topic in declared_topics or topic in messages
        return (topic, messages.get(topic, 0)) if there else (None, None)

    rows = []
    for group in sorted(set(groups) | {g for _, g in committed}):
        cfg = groups.get(group)
        retry, retry_n = held(retry_topic(group))
        dlq, dlq_n = held(dlq_topic(group))
        rows.append({
            "group": group, "declared": cfg is not None,
            **{k: None if cfg is None else cfg.get(name) for k, name in _SETTINGS.items()},
            "topics": sorted(t for t, g in committed if g == group and group_topic_rank(t, g) == 0),
            "retry_topic": retry, "retry_messages": retry_n, "dlq_topic": dlq, "dlq_messages": dlq_n,
            "settings": None if cfg is None else dict(cfg)})
    return rows


def cmd_groups(a: argparse.Namespace) -> int:
    with open_read_only(a) as ms:
        rows = group_rows(read_subscription_groups(a.store), ms.consumer_offsets().keys(),
                          read_topic_configs(a.store).keys(), ms.queue_ranges())
    if a.json:
        sys.stdout.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    else:
        show_rows(a, [{k: table_cell(v) for k, v in r.items()} for r in rows], COLUMNS,
              f"consumer groups of {a.store}")
    return 0
