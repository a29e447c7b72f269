"""One consumer lag rule (store.consumer_lag) behind `rocketlake lag`, the report and the
pipeline summary: on one store they give the same rows and totals, computed here by hand."""
from __future__ import annotations

import io
from pathlib import Path

from goldens import LAG_OFFSETS, LAG_ROWS
from rich.console import Console

from rocketlake.jobs.cli.operator_commands import lag_rows
from rocketlake.jobs.cli.pipeline import summary
from rocketlake.jobs.cli.report import consumer_lag as report_lag
from rocketlake.jobs.cli.report import store_facts
from rocketlake.store import MessageStore
from rocketlake.store.consumer_lag import QueueLag, consumer_lag, lag_totals

TOTALS = {("g1", "%RETRY%g1"): 0, ("g1", "orders"): 117, ("g2", "payments"): 88,
          ("g3", "audit-log"): 88}


def test_rule_counts_uncommitted_missing_past_max_and_expired_queues() -> None:
    maxes = {("t", 0): 10, ("t", 1): 7}
    committed = {("t", "g"): {0: 2, 5: 4}, ("t", "h"): {1: 9}, ("r", "g"): {0: 1}}
    rows = consumer_lag(maxes, committed)
    assert rows == [QueueLag("g", "r", 0, 1, 0, 0),      # a queue the store does not have
                    QueueLag("g", "t", 0, 2, 10, 8),     # below the queue's min: still lag
                    QueueLag("g", "t", 1, 0, 7, 7),      # not committed: from 0
                    QueueLag("g", "t", 5, 4, 0, 0),
                    QueueLag("h", "t", 0, 0, 10, 10),
                    QueueLag("h", "t", 1, 9, 7, 0)]      # past the max: 0, not -2
    assert lag_totals(rows) == {("g", "r"): 0, ("g", "t"): 15, ("h", "t"): 10}


def test_a_groups_retry_and_dlq_rows_follow_its_own_topics() -> None:
    """Within a group: its topics by name, then %RETRY%<group>, then %DLQ%<group>; another
    group's retry topic is a topic like any other (by name: '%' sorts first)."""
    committed = {("%DLQ%g", "g"): {0: 0}, ("%RETRY%g", "g"): {0: 0}, ("zeta", "g"): {0: 0},
                 ("alpha", "g"): {0: 0}, ("%RETRY%h", "g"): {0: 0}, ("%RETRY%h", "h"): {0: 0},
                 ("beta", "h"): {0: 0}}
    assert [(r.group, r.topic) for r in consumer_lag({}, committed)] == [
        ("g", "%RETRY%h"), ("g", "alpha"), ("g", "zeta"), ("g", "%RETRY%g"), ("g", "%DLQ%g"),
        ("h", "beta"), ("h", "%RETRY%h")]


def test_lag_report_and_pipeline_summary_agree(golden_store: Path, golden_settings: dict) -> None:
    (golden_store / "config" / "consumerOffset.json").write_text(LAG_OFFSETS)
    settings = {k: str(v) for k, v in golden_settings.items()}
    with MessageStore(golden_store, read_only=True, **settings) as ms:
        cli_rows = [tuple(r[c] for c in ("consumer_group", "topic", "queue_id", "consumer_offset",
                                         "max_offset", "lag")) for r in lag_rows(ms)]
    assert cli_rows == LAG_ROWS
    facts = store_facts(golden_store, settings)
    assert [tuple(r.values()) for r in report_lag(facts.queues, facts.committed)] == LAG_ROWS
    out = io.StringIO()
    Console(file=out, width=200).print(summary(golden_store, settings))
    cells = {line.split("│")[1].strip(): line.split("│")[4].strip()
             for line in out.getvalue().splitlines() if line.count("│") == 5}
    assert cells["orders"] == "g1 (117)"
    assert cells["payments"] == "g2 (88)"
    assert cells["audit-log"] == "g3 (88)"
