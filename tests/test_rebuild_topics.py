"""A rebuild's output is a store a broker serves: the topics of the ConsumeQueues it writes are
declared in `config/topics.json` (``store.topic_config``), merged with what is declared there."""
from __future__ import annotations

import json
from pathlib import Path

from goldens import GOLDEN_498

from rocketlake.store.config_files import write_config
from rocketlake.store.single_process_rebuild import rebuild

#: the queues RocketMQ 4.9.8 wrote for the golden store: queue ids 0-3 of each topic (its
#: consumequeue/ directories); SCHEDULE_TOPIC_XXXX is left to the broker, which declares it itself
GOLDEN_QUEUES = {"audit-log": 4, "orders": 4, "payments": 4}


def declared(root: Path) -> dict[str, tuple[int, int]]:
    table = json.loads((root / "config" / "topics.json").read_text())["topicConfigTable"]
    return {t: (tc["readQueueNums"], tc["writeQueueNums"]) for t, tc in table.items()}


def test_single_process_rebuild_declares_the_topics_it_writes(tmp_path: Path, golden_settings) -> None:
    assert not (GOLDEN_498 / "store" / "config" / "topics.json").exists()
    out = tmp_path / "out"
    rebuild(GOLDEN_498 / "store", out, **golden_settings)
    assert declared(out) == {t: (n, n) for t, n in GOLDEN_QUEUES.items()}


def test_a_topic_already_declared_is_kept(tmp_path: Path, golden_settings) -> None:
    out = tmp_path / "out"
    (out / "config").mkdir(parents=True)
    write_config(out / "config" / "topics.json", {
        "dataVersion": {"counter": 3, "timestamp": 1},
        "topicConfigTable": {
            "orders": {"topicName": "orders", "readQueueNums": 16, "writeQueueNums": 8, "perm": 6},
            "kept": {"topicName": "kept", "readQueueNums": 2, "writeQueueNums": 2, "perm": 4}}})
    rebuild(GOLDEN_498 / "store", out, consume_queue=True, index=False, **golden_settings)
    assert declared(out) == {"orders": (16, 8), "kept": (2, 2), "audit-log": (4, 4),
                             "payments": (4, 4)}


def test_the_rebuild_log_line_names_twenty_topics_and_counts_the_rest(tmp_path: Path, caplog) -> None:
    from rocketlake.jobs.rebuild import Rebuilt, report
    units = {f"t{i:05d}": 3 for i in range(10_000)}
    with caplog.at_level("INFO", logger="rocketlake.jobs.rebuild"):
        report("rebuild", Rebuilt(units=units), ("consumequeue",), tmp_path)
    [line] = caplog.messages
    named = ", ".join(f"t{i:05d}=3" for i in range(20))
    assert line == (f"rebuild: wrote 30000 units for 10000 topic(s) under {tmp_path / 'consumequeue'}: "
                    f"{named} and 9,980 more topics")
