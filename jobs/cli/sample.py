"""A realistic, reproducible sample of events for the main job and the docs.

Several topics and queues, tags, keys, UNIQ_KEYs, delay messages, transactional half/commit/
rollback records, IPv6 producers, and consumer groups with committed offsets.
"""
from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from typing import Any

from rocketlake.store import TRANSACTION_COMMIT, TRANSACTION_PREPARED, TRANSACTION_ROLLBACK

TOPICS = {"orders": 4, "payments": 4, "audit-log": 2, "inventory": 2, "user-profile": 2}
TAGS = {"orders": ["created", "paid", "shipped"], "payments": ["auth", "capture", "refund"],
        "audit-log": ["login", "change"], "inventory": ["reserve", "release"],
        "user-profile": ["update"]}
#: keyed topics whose latest value per key is kept by compaction (RocketMQ 5 topic attribute)
COMPACTED = ("user-profile",)
#: the sample topics' attributes in `config/topics.json` (``store.topic_config.declare_topics``)
ATTRIBUTES = {topic: {"+cleanup.policy": "COMPACTION"} for topic in COMPACTED}
GROUPS = {"billing": ["orders", "payments"], "analytics": ["orders", "audit-log"],
          "warehouse": ["inventory"], "profiles": ["user-profile"]}


def events(n: int, seed: int = 7, end_ms: int | None = None,
           span_ms: int = 2 * 3_600_000) -> Iterator[dict[str, Any]]:
    """``n`` JSON-ready events (the `rocketlake ingest` input format), stored over the ``span_ms``
    before ``end_ms`` (default: now) with a daily-traffic-like swell, as a broker would have
    stored them (replayed store times)."""
    rnd = random.Random(seed)
    topics = list(TOPICS)
    end_ms = int(time.time() * 1000) if end_ms is None else end_ms
    # store times: denser in the middle of the span (a traffic swell), sorted like a real log
    phases = sorted(rnd.betavariate(2.2, 2.2) for _ in range(n))
    for i in range(n):
        stored = end_ms - span_ms + int(phases[i] * span_ms)
        topic = rnd.choices(topics, weights=[5, 3, 1, 1, 1])[0]
        customer = f"cust-{rnd.randrange(200)}"
        ev: dict[str, Any] = {
            "topic": topic, "queue_id": rnd.randrange(TOPICS[topic]),
            "tags": rnd.choice(TAGS[topic]),
            "keys": customer if topic in COMPACTED else [f"{topic[:3]}-{i}", customer],
            "body": json.dumps({"seq": i, "customer": customer,
                                "amount": round(rnd.uniform(1, 500), 2)}),
            "properties": {"UNIQ_KEY": f"0A0000010000{i:020X}", "source": "sample"},
            "born_timestamp": stored - rnd.randrange(1, 40),
            "store_timestamp": stored,
        }
        if rnd.random() < 0.1:
            ev["born_host"] = f"[2001:db8::{rnd.randrange(1, 99)}]:{40000 + rnd.randrange(1000)}"
        else:
            ev["born_host"] = f"10.0.{rnd.randrange(4)}.{rnd.randrange(1, 250)}:{40000 + rnd.randrange(1000)}"
        r = rnd.random()
        if r < 0.03:
            ev["delay_level"] = rnd.randrange(1, 19)
        elif r < 0.06:
            ev["sys_flag"] = rnd.choice([TRANSACTION_PREPARED, TRANSACTION_COMMIT, TRANSACTION_ROLLBACK])
        yield ev


def consumer_progress(max_offsets: dict[tuple[str, int], int],
                      seed: int = 7) -> dict[tuple[str, str], dict[int, int]]:
    """Committed offsets per (topic, group): each group somewhere behind the queue's end."""
    rnd = random.Random(seed)
    out: dict[tuple[str, str], dict[int, int]] = {}
    for group, topics in GROUPS.items():
        for topic in topics:
            out[(topic, group)] = {q: int(hi * rnd.uniform(0.5, 1.0))
                                   for (t, q), hi in sorted(max_offsets.items()) if t == topic}
    return out
