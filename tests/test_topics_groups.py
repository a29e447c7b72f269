"""`rocketlake topics` (mqadmin topicList / topicRoute, kafka-topics --describe) and `groups`
(kafka-consumer-groups --list) on a hand-built store whose config files are written by hand in
fastjson's layout: JSON field by field, undeclared topics marked, tables at 80 columns."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from terminal import on_terminal

from rocketlake.jobs import cli
from rocketlake.store import Message, MessageStore

SMALL = {"mappedFileSizeCommitLog": 65536, "mappedFileSizeConsumeQueue": 600,
         "maxHashSlotNum": 16, "maxIndexNum": 40}
SETTINGS = [a for k, v in SMALL.items() for a in ("--set", f"{k}={v}")]
LONG_GROUP = "consumer_group_of_the_inventory_reconciliation_service"


def _tc(name: str, perm: int, queues: int, order: bool = False, attributes: str | None = None) -> str:
    attrs = f'\t\t\t"attributes":{{{attributes}\n\t\t\t}},\n' if attributes else ""
    return (f'\t\t"{name}":{{\n{attrs}\t\t\t"order":{str(order).lower()},\n\t\t\t"perm":{perm},\n'
            f'\t\t\t"readQueueNums":{queues},\n\t\t\t"topicFilterType":"SINGLE_TAG",\n'
            f'\t\t\t"topicName":"{name}",\n\t\t\t"topicSysFlag":0,\n\t\t\t"writeQueueNums":{queues}\n\t\t}}')


def _group(name: str, enable: bool, broadcast: bool, retries: int) -> str:
    return (f'\t\t"{name}":{{\n\t\t\t"brokerId":0,\n'
            f'\t\t\t"consumeBroadcastEnable":{str(broadcast).lower()},\n'
            f'\t\t\t"consumeEnable":{str(enable).lower()},\n\t\t\t"groupName":"{name}",\n'
            f'\t\t\t"retryMaxTimes":{retries},\n\t\t\t"retryQueueNums":1\n\t\t}}')


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    """Messages: orders queues 0 and 1, %RETRY%g1 (2), %DLQ%g1 (1), undeclared (1). topics.json
    declares orders, audit (R--, ordered), sink (-W-), TBW102 (RWX) and %RETRY%g1, not
    undeclared nor %DLQ%g1; subscriptionGroup.json g1 and g2; offsets for g1 and g3."""
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        ms.put_batch([Message("orders", b"a", queue_id=0), Message("orders", b"b", queue_id=1),
                      Message("%RETRY%g1", b"r"), Message("%RETRY%g1", b"r"),
                      Message("%DLQ%g1", b"d"), Message("undeclared", b"u")])
    config = root / "config"
    topics = [_tc("orders", 6, 4, attributes='\n\t\t\t\t"message.type":"NORMAL"'),
              _tc("audit", 4, 2, True), _tc("sink", 2, 1), _tc("TBW102", 7, 8), _tc("%RETRY%g1", 6, 1)]
    (config / "topics.json").write_text(
        '{\n\t"dataVersion":{\n\t\t"counter":5,\n\t\t"timestamp":1551626364371\n\t},\n'
        '\t"topicConfigTable":{\n' + ",\n".join(topics) + "\n\t}\n}")
    groups = [_group("g1", True, False, 3), _group("g2", False, True, 16)]
    (config / "subscriptionGroup.json").write_text(
        '{\n\t"dataVersion":{\n\t\t"counter":1,\n\t\t"timestamp":1551626364364\n\t},\n'
        '\t"subscriptionGroupTable":{\n' + ",\n".join(groups) + "\n\t}\n}")
    (config / "consumerOffset.json").write_text(
        '{\n\t"offsetTable":{\n\t\t"orders@g1":{0:1,1:0\n\t\t},\n\t\t"%RETRY%g1@g1":{0:2\n\t\t},\n'
        '\t\t"orders@g3":{0:0\n\t\t}\n\t}\n}')
    return root


def _json(capsys: pytest.CaptureFixture[str], command: str, root: Path) -> list[dict]:
    assert cli.main([command, "--store", str(root), *SETTINGS, "--json"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def _topic(topic: str, system: bool, perm: str | None, value: int | None, queues: int | None,
           order: bool | None, attributes: dict | None, store_queues: int) -> dict:
    return {"topic": topic, "system": system, "declared": value is not None, "perm": perm,
            "perm_value": value, "read_queues": queues, "write_queues": queues, "order": order,
            "attributes": attributes, "store_queues": store_queues}


def test_topics_as_declared_and_undeclared(store: Path, capsys) -> None:
    assert _json(capsys, "topics", store) == [
        # user topics by name (upper case first), then system topics
        _topic("TBW102", False, "RWX", 7, 8, False, None, 0),
        _topic("audit", False, "R--", 4, 2, True, None, 0),
        _topic("orders", False, "RW-", 6, 4, False, {"message.type": "NORMAL"}, 2),
        _topic("sink", False, "-W-", 2, 1, False, None, 0),
        _topic("undeclared", False, None, None, None, None, None, 1),  # a ConsumeQueue, not declared
        _topic("%DLQ%g1", True, None, None, None, None, None, 1),
        _topic("%RETRY%g1", True, "RW-", 6, 1, False, None, 1),
    ]


def test_groups_declared_or_committed_with_retry_and_dlq(store: Path, capsys) -> None:
    rows = _json(capsys, "groups", store)
    assert [r["group"] for r in rows] == ["g1", "g2", "g3"]
    g1, g2, g3 = rows
    assert g1 == {"group": "g1", "declared": True, "consume_enable": True, "broadcast": False,
                  "retry_max_times": 3, "retry_queue_nums": 1, "topics": ["orders"],
                  "retry_topic": "%RETRY%g1", "retry_messages": 2, "dlq_topic": "%DLQ%g1",
                  "dlq_messages": 1,
                  "settings": {"brokerId": 0, "consumeBroadcastEnable": False, "consumeEnable": True,
                               "groupName": "g1", "retryMaxTimes": 3, "retryQueueNums": 1}}
    # declared, never committed: no topics, no retry or DLQ topic in the store
    assert (g2["declared"], g2["consume_enable"], g2["broadcast"], g2["topics"]) == (True, False, True, [])
    assert (g2["retry_topic"], g2["retry_messages"], g2["dlq_topic"], g2["dlq_messages"]) == (None,) * 4
    # committed, never declared
    assert (g3["declared"], g3["consume_enable"], g3["topics"]) == (False, None, ["orders"])
    assert g3["settings"] is None


def test_lag_puts_a_groups_retry_rows_after_its_own(store: Path, capsys) -> None:
    rows = _json(capsys, "lag", store)
    assert [(r["consumer_group"], r["topic"], r["queue_id"]) for r in rows] == [
        ("g1", "orders", 0), ("g1", "orders", 1), ("g1", "%RETRY%g1", 0),
        ("g3", "orders", 0), ("g3", "orders", 1)]


def test_a_damaged_topics_json_names_the_file(store: Path, capsys) -> None:
    (store / "config" / "topics.json").write_text('{"topicConfigTable": ["orders"]}')
    assert cli.main(["topics", "--store", str(store), *SETTINGS]) == 3
    assert f"{store / 'config' / 'topics.json'}: not a topic config" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["topics", "groups"])
def test_tables_on_80_columns_cut_nothing(store: Path, command: str) -> None:
    offsets = store / "config" / "consumerOffset.json"
    offsets.write_text(offsets.read_text().replace("orders@g3", f"orders@{LONG_GROUP}"))
    text = on_terminal([command, "--store", str(store), *SETTINGS], 80)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80, text
    cells = "".join(line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│"))
    assert (LONG_GROUP if command == "groups" else "undeclared") in cells
