"""`rocketlake lag`, `topic-status`, `offsets reset` and `offsets delete` on the store RocketMQ 4.9.8 wrote.

Expected offsets and store times are RocketMQ's own (tests/golden/rocketmq-4.9.8/read.jsonl: per
queue min/max offsets, per message store_timestamp); consumerOffset.json files are written by hand
in fastjson's layout (tests/golden/study/store/config/consumerOffset.json)."""
from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from terminal import on_terminal

from rocketlake.jobs import cli

REPO = Path(__file__).resolve().parents[1]
#: the golden store's settings (tests/golden/rocketmq-4.9.8/settings.json)
SETTINGS = ["--set", "mappedFileSizeCommitLog=65536", "--set", "mappedFileSizeConsumeQueue=600",
            "--set", "maxHashSlotNum=64", "--set", "maxIndexNum=200"]
#: orders@g1 committed queues 0 and 1; payments@g2 is at the end of queue 1; audit-log@g3 queue 2
#: is past the end (31): lag floors at 0; %RETRY%g1 has no queue in the store
OFFSETS = ('{\n\t"offsetTable":{\n'
           '\t\t"orders@g1":{0:3,1:0\n\t\t},\n'
           '\t\t"payments@g2":{1:31\n\t\t},\n'
           '\t\t"audit-log@g3":{2:40\n\t\t},\n'
           '\t\t"%RETRY%g1@g1":{0:0\n\t\t}\n'
           '\t}\n}')


@pytest.fixture()
def store(golden_store: Path) -> Path:
    (golden_store / "config" / "consumerOffset.json").write_text(OFFSETS)
    return golden_store


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _rows(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def _lag(group: str, topic: str, q: int, consumer: int, high: int, lag: int,
         iso: str | None = None, ms: int | None = None) -> dict:
    return {"consumer_group": group, "topic": topic, "queue_id": q, "consumer_offset": consumer,
            "max_offset": high, "lag": lag, "last_consumed_time": iso, "last_consumed_timestamp": ms}


def _hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


# --- lag ---------------------------------------------------------------------------------------
def test_lag_rows_as_consumer_progress(store: Path, capsys) -> None:
    code, out, _ = _run(capsys, "lag", "--store", str(store), *SETTINGS, "--json")
    assert code == 0
    assert _rows(out) == [
        # orders max offsets 31, 29, 29, 31; queue 0 consumed up to offset 2 (stored 1795345574078)
        _lag("g1", "orders", 0, 3, 31, 28, "2026-11-22T11:06:14.078Z", 1795345574078),
        _lag("g1", "orders", 1, 0, 29, 29),
        _lag("g1", "orders", 2, 0, 29, 29),  # queues 2 and 3 not committed: offset 0
        _lag("g1", "orders", 3, 0, 31, 31),
        # %RETRY%g1 beside g1's other rows, after them: no such queue in the store: max 0
        _lag("g1", "%RETRY%g1", 0, 0, 0, 0),
        # payments max offsets 30, 31, 29, 29; queue 1 consumed up to its last message (offset 30)
        _lag("g2", "payments", 0, 0, 30, 30),
        _lag("g2", "payments", 1, 31, 31, 0, "2026-11-22T11:06:22.061Z", 1795345582061),
        _lag("g2", "payments", 2, 0, 29, 29),
        _lag("g2", "payments", 3, 0, 29, 29),
        # audit-log max offsets 29, 29, 31, 30; queue 2 committed past its end: lag 0, no message at 39
        _lag("g3", "audit-log", 0, 0, 29, 29),
        _lag("g3", "audit-log", 1, 0, 29, 29),
        _lag("g3", "audit-log", 2, 40, 31, 0),
        _lag("g3", "audit-log", 3, 0, 30, 30),
    ]


def test_lag_filters_by_group_and_topic(store: Path, capsys) -> None:
    code, out, _ = _run(capsys, "lag", "--store", str(store), *SETTINGS, "--json",
                        "--group", "g1", "--topic", "orders")
    assert code == 0
    assert [(r["queue_id"], r["lag"]) for r in _rows(out)] == [(0, 28), (1, 29), (2, 29), (3, 31)]


def test_lag_of_an_unknown_group_is_a_usage_error(store: Path, capsys) -> None:
    code, out, err = _run(capsys, "lag", "--store", str(store), *SETTINGS, "--group", "nobody")
    assert code == 2 and out == ""
    assert f"{store / 'config' / 'consumerOffset.json'}: no committed offsets for group nobody" in err


def test_lag_piped_is_plain_columns(store: Path) -> None:
    """Not a terminal: aligned plain columns, numbers right-aligned, no box drawing or wrapping."""
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)]))}
    p = subprocess.run([sys.executable, "-m", "rocketlake.jobs.cli", "lag", "--store", str(store),
                        *SETTINGS, "--group", "g1", "--topic", "orders"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout == (
        "consumer_group  topic   queue_id  consumer_offset  max_offset  lag  last_consumed_time\n"
        "g1              orders         0                3          31   28  2026-11-22T11:06:14.078Z\n"
        "g1              orders         1                0          29   29  -\n"
        "g1              orders         2                0          29   29  -\n"
        "g1              orders         3                0          31   31  -\n"
        "total lag: 117\n")


# --- topic-status ------------------------------------------------------------------------------
def test_topic_status_as_mqadmin(store: Path, capsys) -> None:
    code, out, _ = _run(capsys, "topic-status", "--store", str(store), *SETTINGS, "--json",
                        "--topic", "orders")
    assert code == 0
    # last update: the store time of the message at max_offset - 1 (offsets 30, 28, 28, 30)
    assert _rows(out) == [
        {"topic": "orders", "queue_id": 0, "min_offset": 0, "max_offset": 31,
         "last_update_time": "2026-11-22T11:06:22.061Z", "last_update_timestamp": 1795345582061},
        {"topic": "orders", "queue_id": 1, "min_offset": 0, "max_offset": 29,
         "last_update_time": "2026-11-22T11:06:22.060Z", "last_update_timestamp": 1795345582060},
        {"topic": "orders", "queue_id": 2, "min_offset": 0, "max_offset": 29,
         "last_update_time": "2026-11-22T11:06:22.058Z", "last_update_timestamp": 1795345582058},
        {"topic": "orders", "queue_id": 3, "min_offset": 0, "max_offset": 31,
         "last_update_time": "2026-11-22T11:06:23.162Z", "last_update_timestamp": 1795345583162},
    ]


def test_topic_status_of_every_queue(store: Path, capsys) -> None:
    code, out, _ = _run(capsys, "topic-status", "--store", str(store), *SETTINGS, "--json")
    assert code == 0
    rows = _rows(out)
    # 3 topics x 4 queues + 16 SCHEDULE_TOPIC_XXXX queues (tests/golden/rocketmq-4.9.8/store)
    assert len(rows) == 28
    assert {r["topic"] for r in rows} == {"orders", "payments", "audit-log", "SCHEDULE_TOPIC_XXXX"}


def test_topic_status_of_an_unknown_topic_is_a_usage_error(store: Path, capsys) -> None:
    code, _, err = _run(capsys, "topic-status", "--store", str(store), *SETTINGS, "--topic", "nope")
    assert code == 2 and "no ConsumeQueue of topic 'nope'" in err


# --- offsets reset -----------------------------------------------------------------------------
def _reset(capsys, store: Path, group: str, topic: str, *target: str, mode: str = "--dry-run"
           ) -> tuple[int, list[dict] | str, str]:
    code, out, err = _run(capsys, "offsets", "reset", "--store", str(store), *SETTINGS, "--json",
                          "--group", group, "--topic", topic, *target, mode)
    return code, (_rows(out) if code == 0 else out), err


def _new(rows: list[dict] | str) -> list[tuple[int, int | None, int]]:
    assert isinstance(rows, list)
    return [(r["queue_id"], r["old_offset"], r["new_offset"]) for r in rows]


def test_reset_dry_run_prints_old_and_new_and_writes_nothing(store: Path, capsys) -> None:
    before = _hashes(store)
    code, rows, err = _reset(capsys, store, "g1", "orders", "--shift-by", "-2")
    assert code == 0 and "dry run: nothing written" in err
    assert rows == [
        {"consumer_group": "g1", "topic": "orders", "queue_id": 0, "min_offset": 0, "max_offset": 31,
         "old_offset": 3, "new_offset": 1},
        {"consumer_group": "g1", "topic": "orders", "queue_id": 1, "min_offset": 0, "max_offset": 29,
         "old_offset": 0, "new_offset": 0},  # clamped to min
        {"consumer_group": "g1", "topic": "orders", "queue_id": 2, "min_offset": 0, "max_offset": 29,
         "old_offset": None, "new_offset": 0},  # not committed: shifted from 0
        {"consumer_group": "g1", "topic": "orders", "queue_id": 3, "min_offset": 0, "max_offset": 31,
         "old_offset": None, "new_offset": 0},
    ]
    assert _hashes(store) == before


@pytest.mark.parametrize("target, expected", [
    (["--shift-by", "30"], [(0, 3, 31), (1, 0, 29), (2, None, 29), (3, None, 30)]),  # clamped to max
    (["--to-offset", "30"], [(0, 3, 30), (1, 0, 29), (2, None, 29), (3, None, 30)]),
    (["--to-offset", "-5"], [(0, 3, 0), (1, 0, 0), (2, None, 0), (3, None, 0)]),
    # before every message (the first was stored at 2026-11-22T11:06:14.065Z): each queue's first
    (["--to-datetime", "2026-11-22T00:00:00Z"], [(0, 3, 0), (1, 0, 0), (2, None, 0), (3, None, 0)]),
    # Kafka's targets
    (["--to-earliest"], [(0, 3, 0), (1, 0, 0), (2, None, 0), (3, None, 0)]),
    (["--to-latest"], [(0, 3, 31), (1, 0, 29), (2, None, 29), (3, None, 31)]),
    # the committed offset; where none is, the max offset (Kafka's log end)
    (["--to-current"], [(0, 3, 3), (1, 0, 0), (2, None, 29), (3, None, 31)]),
    # now - 100 years: before the first message: each queue's first offset
    (["--by-duration", "P36500D"], [(0, 3, 0), (1, 0, 0), (2, None, 0), (3, None, 0)]),
    # now - 1 hour: after the last message (stored 2026-11-22T11:06:15Z): each queue's last one
    (["--by-duration", "PT1H"], [(0, 3, 30), (1, 0, 28), (2, None, 28), (3, None, 30)]),
])
def test_reset_targets(store: Path, capsys, target: list[str], expected: list[tuple]) -> None:
    code, rows, _ = _reset(capsys, store, "g1", "orders", *target)
    assert code == 0 and _new(rows) == expected


def test_reset_to_datetime_takes_iso_or_epoch_ms(store: Path, capsys) -> None:
    """orders queue 0 offset 5 was stored at 1795345575232 = 2026-11-22T11:06:15.232Z."""
    _, iso, _ = _reset(capsys, store, "g1", "orders", "--to-datetime", "2026-11-22T11:06:15.232Z")
    _, ms, _ = _reset(capsys, store, "g1", "orders", "--to-datetime", "1795345575232")
    assert iso == ms and _new(iso)[0] == (0, 3, 5)


def test_reset_execute_writes_fastjson_and_keeps_bak(store: Path, capsys) -> None:
    before = _hashes(store)
    code, rows, err = _reset(capsys, store, "g1", "orders", "--to-offset", "30", mode="--execute")
    assert code == 0 and "wrote" in err
    config = store / "config"
    assert (config / "consumerOffset.json").read_text() == (
        '{\n\t"offsetTable":{\n'
        '\t\t"orders@g1":{0:30,1:29,2:29,3:30\n\t\t},\n'
        '\t\t"payments@g2":{1:31\n\t\t},\n'
        '\t\t"audit-log@g3":{2:40\n\t\t},\n'
        '\t\t"%RETRY%g1@g1":{0:0\n\t\t}\n'
        '\t}\n}')
    assert (config / "consumerOffset.json.bak").read_text() == OFFSETS
    after = _hashes(store)
    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    assert changed == {"config/consumerOffset.json", "config/consumerOffset.json.bak"}
    code, out, _ = _run(capsys, "lag", "--store", str(store), *SETTINGS, "--json", "--group", "g1",
                        "--topic", "orders")
    assert [r["consumer_offset"] for r in _rows(out)] == [30, 29, 29, 30]


def test_reset_creates_a_new_group_of_an_existing_topic(store: Path, capsys) -> None:
    code, rows, err = _reset(capsys, store, "g9", "payments", "--to-offset", "1", mode="--execute")
    assert code == 0 and "group 'g9' has no offsets for topic 'payments' yet: created" in err
    assert _new(rows) == [(0, None, 1), (1, None, 1), (2, None, 1), (3, None, 1)]
    assert (store / "config" / "consumerOffset.json").read_text().endswith(
        '\t\t"payments@g9":{0:1,1:1,2:1,3:1\n\t\t}\n\t}\n}')


def test_reset_of_an_unknown_group_and_topic_is_refused(store: Path, capsys) -> None:
    before = _hashes(store)
    code, out, err = _reset(capsys, store, "g9", "nosuch", "--to-offset", "0", mode="--execute")
    assert code == 2 and out == ""
    assert "group 'g9' has no offsets for topic 'nosuch', and the store has no queue of that topic" in err
    assert _hashes(store) == before


def _offsets(capsys, store: Path, *argv: str) -> tuple[int, str, str]:
    return _run(capsys, "offsets", *argv[:1], "--store", str(store), *SETTINGS, *argv[1:])


def test_reset_by_duration_must_be_iso_8601(store: Path, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        _reset(capsys, store, "g1", "orders", "--by-duration", "1h")
    assert e.value.code == 2
    assert "not a duration: '1h' (give ISO-8601 PnDTnHnMnS" in capsys.readouterr().err


def test_parse_duration_as_java_duration() -> None:
    from rocketlake.store.store_time import parse_duration
    assert parse_duration("P1DT2H3M") == 86_400_000 + 2 * 3_600_000 + 3 * 60_000
    assert parse_duration("pt1.5s") == 1500 and parse_duration("P2D") == 172_800_000
    for bad in ("P", "PT", "P1H", "P1DT", "-P1D", "1d"):
        with pytest.raises(ValueError, match="not a duration"):
            parse_duration(bad)


def test_reset_selects_queues_as_kafka_topic_colon_partitions(store: Path, capsys) -> None:
    code, out, _ = _offsets(capsys, store, "reset", "--group", "g1", "--json", "--to-latest",
                            "--topic", "orders:0,2", "--topic", "payments:1")
    assert code == 0
    assert [(r["topic"], r["queue_id"], r["old_offset"], r["new_offset"]) for r in _rows(out)] == [
        ("orders", 0, 3, 31), ("orders", 2, None, 29), ("payments", 1, None, 31)]
    code, out, err = _offsets(capsys, store, "reset", "--group", "g1", "--to-latest",
                              "--topic", "orders:0,7,9")
    assert code == 2 and out == ""
    assert f"{store}: topic 'orders' has no queue 7, 9: its queues are 0-3" in err


def test_reset_all_topics_is_every_topic_the_group_committed(store: Path, capsys) -> None:
    code, out, _ = _offsets(capsys, store, "reset", "--group", "g1", "--json", "--all-topics",
                            "--to-earliest")
    assert code == 0
    # %RETRY%g1 queue 0: committed, no ConsumeQueue (min = max = 0)
    assert [(r["topic"], r["queue_id"], r["max_offset"], r["new_offset"]) for r in _rows(out)] == [
        ("%RETRY%g1", 0, 0, 0), ("orders", 0, 31, 0), ("orders", 1, 29, 0), ("orders", 2, 29, 0),
        ("orders", 3, 31, 0)]
    code, _, err = _offsets(capsys, store, "reset", "--group", "g9", "--all-topics", "--to-earliest")
    assert code == 2 and "group 'g9' has no committed offsets" in err


def test_reset_needs_a_scope_and_a_target(store: Path, capsys) -> None:
    code, _, err = _offsets(capsys, store, "reset", "--group", "g1", "--to-earliest")
    assert code == 2 and "name the queues with --topic" in err
    code, _, err = _offsets(capsys, store, "reset", "--group", "g1", "--topic", "orders")
    assert code == 2 and "give one of --to-datetime, --by-duration" in err


def test_reset_export_round_trips_through_from_file(store: Path, capsys, tmp_path: Path) -> None:
    """--export prints Kafka's CSV (topic,partition,offset) and is a dry run by default;
    --from-file sets exactly its rows, as given."""
    before = _hashes(store)
    code, out, err = _offsets(capsys, store, "reset", "--group", "g1", "--topic", "orders",
                              "--shift-by", "-2", "--export")
    assert code == 0 and out == "orders,0,1\norders,1,0\norders,2,0\norders,3,0\n"
    assert "dry run: nothing written" in err and _hashes(store) == before
    plan = tmp_path / "plan.csv"
    plan.write_text(out)
    code, again, _ = _offsets(capsys, store, "reset", "--group", "g1", "--from-file", str(plan),
                              "--export")
    assert code == 0 and again == out
    plan.write_text("orders,3,7\n\norders, 0 ,5\n")
    code, _, _ = _offsets(capsys, store, "reset", "--group", "g1", "--from-file", str(plan),
                          "--execute")
    assert code == 0
    assert '"orders@g1":{0:5,1:0,3:7\n' in (store / "config" / "consumerOffset.json").read_text()


@pytest.mark.parametrize("text, error", [
    ("orders,0,1\norders,9,1\nnosuch,0,1\norders,8,2\n",
     "queues that do not exist: line 2: topic 'orders' has no queue 9 (its queues are 0-3); "
     "line 3: topic 'nosuch' has no queue 0 (no such topic); line 4: topic 'orders' has no "
     "queue 8 (its queues are 0-3)"),
    ("orders,0,1\norders,x,1\n", "line 2: 'orders,x,1' is not topic,queue,offset"),
    ("orders,0,1\norders,0,2\n", "line 2: orders:0 is on line 1 too"),
])
def test_reset_from_file_refuses_bad_rows_naming_them(store: Path, capsys, tmp_path: Path,
                                                      text: str, error: str) -> None:
    before = _hashes(store)
    plan = tmp_path / "plan.csv"
    plan.write_text(text)
    code, out, err = _offsets(capsys, store, "reset", "--group", "g1", "--from-file", str(plan),
                              "--execute")
    assert code == 2 and out == "" and f"{plan}: " in err and error in err, err
    assert _hashes(store) == before
    code, _, err = _offsets(capsys, store, "reset", "--group", "g1", "--from-file", str(plan),
                            "--topic", "orders")
    assert code == 2 and "--from-file resets the queues its rows name" in err


#: opens a real writer on the store and holds it until stdin closes
_WRITER = """
import sys
from rocketlake.store import MessageStore
with MessageStore(sys.argv[1], mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=600,
                  maxHashSlotNum=64, maxIndexNum=200):
    print("open", flush=True)
    sys.stdin.read()
"""


def test_reset_execute_is_refused_while_a_writer_holds_the_store(store: Path, capsys) -> None:
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)]))}
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(store)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "open"
        offsets = (store / "config" / "consumerOffset.json").read_bytes()
        code, out, err = _reset(capsys, store, "g1", "orders", "--to-offset", "0", mode="--execute")
        assert code == 3 and out == ""
        assert "held by another writer" in err and "offsets not reset" in err
        assert (store / "config" / "consumerOffset.json").read_bytes() == offsets
        assert not (store / "config" / "consumerOffset.json.bak").exists()
        code, _, err = _reset(capsys, store, "g1", "orders", "--to-offset", "0")
        assert code == 0 and "a writer holds the store now" in err  # a dry run still answers
    finally:
        writer.communicate("", timeout=60)
    assert writer.returncode == 0


# --- offsets delete ------------------------------------------------------------------------------
def test_delete_dry_run_lists_the_groups_offsets_and_writes_nothing(store: Path, capsys) -> None:
    before = _hashes(store)
    code, out, err = _offsets(capsys, store, "delete", "--group", "g1", "--json")
    assert code == 0 and "dry run: nothing written" in err
    assert _rows(out) == [  # every topic of g1, its %RETRY% topic too (RocketMQ's removeOffset)
        {"consumer_group": "g1", "topic": "%RETRY%g1", "queue_id": 0, "offset": 0},
        {"consumer_group": "g1", "topic": "orders", "queue_id": 0, "offset": 3},
        {"consumer_group": "g1", "topic": "orders", "queue_id": 1, "offset": 0}]
    assert _hashes(store) == before


def test_delete_execute_removes_only_the_groups_offsets(store: Path, capsys) -> None:
    code, _, err = _offsets(capsys, store, "delete", "--group", "g1", "--execute")
    assert code == 0 and "wrote" in err
    config = store / "config"
    assert (config / "consumerOffset.json").read_text() == (
        '{\n\t"offsetTable":{\n'
        '\t\t"payments@g2":{1:31\n\t\t},\n'
        '\t\t"audit-log@g3":{2:40\n\t\t}\n'
        '\t}\n}')
    assert (config / "consumerOffset.json.bak").read_text() == OFFSETS


def test_delete_a_topics_queues(store: Path, capsys) -> None:
    code, out, _ = _offsets(capsys, store, "delete", "--group", "g1", "--topic", "orders:1",
                            "--execute", "--json")
    assert code == 0 and _rows(out) == [
        {"consumer_group": "g1", "topic": "orders", "queue_id": 1, "offset": 0}]
    code, out, _ = _offsets(capsys, store, "delete", "--group", "g1", "--topic", "orders",
                            "--execute", "--json")
    assert code == 0 and [r["queue_id"] for r in _rows(out)] == [0]
    assert (store / "config" / "consumerOffset.json").read_text() == (
        '{\n\t"offsetTable":{\n'
        '\t\t"payments@g2":{1:31\n\t\t},\n'
        '\t\t"audit-log@g3":{2:40\n\t\t},\n'
        '\t\t"%RETRY%g1@g1":{0:0\n\t\t}\n'
        '\t}\n}')


@pytest.mark.parametrize("argv, error", [
    (["--group", "g9"], "consumerOffset.json: group 'g9' has no committed offsets"),
    (["--group", "g1", "--topic", "payments"],
     "group 'g1' has no offsets for topic 'payments': it has offsets for %RETRY%g1, orders"),
    (["--group", "g1", "--topic", "orders:1,2"],
     "group 'g1' has no offset for queue 2 of topic 'orders': it has queues 0-1"),
    (["--group", "g1", "--to-earliest"], "offsets delete takes no --to-earliest"),
])
def test_delete_of_what_the_group_has_not_is_refused(store: Path, capsys, argv: list[str],
                                                     error: str) -> None:
    before = _hashes(store)
    code, out, err = _offsets(capsys, store, "delete", *argv, "--execute")
    assert code == 2 and out == "" and error in err, err
    assert _hashes(store) == before


def test_delete_execute_is_refused_while_a_writer_holds_the_store(store: Path, capsys) -> None:
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)]))}
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(store)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "open"
        offsets = (store / "config" / "consumerOffset.json").read_bytes()
        code, out, err = _offsets(capsys, store, "delete", "--group", "g1", "--execute")
        assert code == 3 and out == ""
        assert "held by another writer" in err and "offsets not deleted" in err
        assert (store / "config" / "consumerOffset.json").read_bytes() == offsets
    finally:
        writer.communicate("", timeout=60)
    assert writer.returncode == 0


def test_lag_on_a_terminal_is_a_rich_table(store: Path) -> None:
    """On a terminal (a real pseudo-terminal here) the rows come as a rich table; no cell wraps."""
    text = on_terminal(["lag", "--store", str(store), *SETTINGS, "--group", "g1", "--topic", "orders"], 200)
    lines = [line for line in text.splitlines() if "orders" in line]
    assert len(lines) == 4 and all("│" in line or "|" in line for line in lines)
    assert "2026-11-22T11:06:14.078Z" in lines[0] and "total lag: 117" in text


#: names longer than an 80-column table leaves them
LONG_TOPIC = "inventory-adjustments-from-warehouse-management"
LONG_GROUP = "consumer_group_of_the_inventory_reconciliation_service"


def _one_row_cells(text: str) -> list[str]:
    """The cells of a rich table's only row, each cell's folded lines joined."""
    lines = text.splitlines()
    body = lines[next(i for i, x in enumerate(lines) if x.startswith("┡")) + 1:
                 next(i for i, x in enumerate(lines) if x.startswith("└"))]
    parts = [line.split("│")[1:-1] for line in body]
    return ["".join(p[i].strip() for p in parts) for i in range(len(parts[0]))]


@pytest.mark.parametrize("command", ["lag", "topic-status"])
def test_tables_on_80_columns_fold_and_cut_nothing(tmp_path: Path, command: str) -> None:
    """80 columns, a 47-character topic, a 54-character group and a 12-digit offset: every line
    fits, and every name, number and time is whole (folded over lines, never cut with ...)."""
    from rocketlake.store import Message, MessageStore
    from rocketlake.store.config_files import write_consumer_offsets
    root = tmp_path / "s"
    with MessageStore(root) as ms:
        put = ms.put_batch([Message(LONG_TOPIC, b"x", store_timestamp=1_700_000_000_000 + i)
                            for i in range(3)])
    assert put[-1].store_timestamp == 1_700_000_000_002
    write_consumer_offsets(root, {(LONG_TOPIC, LONG_GROUP): {0: 123_456_789_012}})
    text = on_terminal([command, "--store", str(root)], 80)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80, text
    # committed past the end (3): lag 0, nothing consumed at 123456789011
    want = ([LONG_GROUP, LONG_TOPIC, "0", "123456789012", "3", "0", "-"] if command == "lag" else
            [LONG_TOPIC, "0", "0", "3", "2023-11-14T22:13:20.002Z"])
    assert _one_row_cells(text) == want, text


def test_reset_execute_refuses_to_write_over_the_last_readable_copy(store: Path, capsys) -> None:
    """A damaged consumerOffset.json is read from its .bak; writing would copy the damaged file
    over that .bak (MixAll.string2File), losing the last readable copy: --execute refuses."""
    config = store / "config"
    (config / "consumerOffset.json.bak").write_text(OFFSETS)
    (config / "consumerOffset.json").write_text('{\n\t"offsetTable":{\n\t\t"orders@g1":{0:')
    before = _hashes(store)
    code, out, err = _reset(capsys, store, "g1", "orders", "--to-offset", "0", mode="--execute")
    assert code == 3 and out == ""
    assert "consumerOffset.json: unreadable" in err and "offsets not reset" in err
    assert _hashes(store) == before
    code, rows, err = _reset(capsys, store, "g1", "orders", "--to-offset", "0")
    assert code == 0 and _new(rows)[:2] == [(0, 3, 0), (1, 0, 0)]  # the dry run reads the .bak
    assert "rocketlake offsets: warning: " in err and "using consumerOffset.json.bak" in err, err


# --- stored strings cannot drive the terminal ------------------------------------------------------
#: a broker's transaction check commits its progress as CID_RMQ_SYS_TRANS (RocketMQ 5.3.3
#: TransactionalMessageBridge.updateConsumeOffset); fastjson's layout, by hand
TRANS_OFFSETS = ('{\n\t"offsetTable":{\n'
                 '\t\t"orders@g1":{0:2\n\t\t},\n'
                 '\t\t"RMQ_SYS_TRANS_HALF_TOPIC@CID_RMQ_SYS_TRANS":{0:1\n\t\t},\n'
                 '\t\t"RMQ_SYS_TRANS_OP_HALF_TOPIC@CID_RMQ_SYS_TRANS":{0:2\n\t\t}\n'
                 '\t}\n}')


def test_lag_leaves_the_brokers_transaction_group_out_unless_asked(tmp_path: Path, capsys) -> None:
    """As mqadmin consumerProgress: no CID_RMQ_SYS_* group without -g; --system adds them after
    the others, --group names one. Queues: orders 5 units, the half topic 3, the op topic 2."""
    from rocketlake.store import Message, MessageStore
    root = tmp_path / "s"
    with MessageStore(root) as ms:
        for topic, n in (("orders", 5), ("RMQ_SYS_TRANS_HALF_TOPIC", 3),
                         ("RMQ_SYS_TRANS_OP_HALF_TOPIC", 2)):
            ms.put_batch([Message(topic, b"m%d" % i, queue_id=0) for i in range(n)])
    (root / "config" / "consumerOffset.json").write_text(TRANS_OFFSETS)
    user = ("g1", "orders", 0, 2, 5, 3)
    half, op = (("CID_RMQ_SYS_TRANS", "RMQ_SYS_TRANS_HALF_TOPIC", 0, 1, 3, 2),
                ("CID_RMQ_SYS_TRANS", "RMQ_SYS_TRANS_OP_HALF_TOPIC", 0, 2, 2, 0))

    def rows(*argv: str) -> list[tuple]:
        code, out, _ = _run(capsys, "lag", "--store", str(root), "--json", *argv)
        assert code == 0
        return [(r["consumer_group"], r["topic"], r["queue_id"], r["consumer_offset"],
                 r["max_offset"], r["lag"]) for r in _rows(out)]

    assert rows() == [user]
    assert rows("--system") == [user, half, op]
    assert rows("--group", "CID_RMQ_SYS_TRANS") == [half, op]
    assert rows("--system", "--topic", "RMQ_SYS_TRANS_HALF_TOPIC") == [half]
    code, out, _ = _run(capsys, "lag", "--store", str(root))  # piped: plain columns
    assert code == 0 and [ln for ln in out.splitlines() if "CID_RMQ_SYS" in ln] == out.splitlines()[-1:]
    assert out.splitlines()[-2:] == [
        "total lag: 3", "not shown: the broker's own group CID_RMQ_SYS_TRANS (--system shows them)"]
    code, out, _ = _run(capsys, "lag", "--store", str(root), "--system")
    assert out.splitlines()[-1] == "total lag: 5"


EVIL_GROUP = "g\x1b]0;pwned\x07\x1b[2J\x9b31m\x7f\u202e[bold]x"
EVIL_SHOWN = "g\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\x7f\\u202e[bold]x"  # hand-escaped


def test_lag_escapes_control_characters_of_group_names(tmp_path: Path, capsys, monkeypatch) -> None:
    from rocketlake.store import Message, MessageStore
    from rocketlake.store.config_files import write_consumer_offsets
    root = tmp_path / "s"
    with MessageStore(root) as ms:
        ms.put(Message("T", b"x"))
    write_consumer_offsets(root, {("T", EVIL_GROUP): {0: 0}})
    code, out, _ = _run(capsys, "lag", "--store", str(root))  # piped: plain columns
    assert code == 0 and EVIL_SHOWN in out
    assert not any(c in out for c in "\x1b\x07\x9b\x7f\u202e"), repr(out)
    code, out, _ = _run(capsys, "lag", "--store", str(root), "--json")  # JSON: json's escapes
    assert _rows(out)[0]["consumer_group"] == EVIL_GROUP

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Terminal()
    monkeypatch.setattr(sys, "stdout", tty)
    monkeypatch.setenv("COLUMNS", "300")  # wide enough for the whole group name
    assert cli.main(["lag", "--store", str(root)]) == 0
    shown = tty.getvalue()  # rich draws its own styles; the group's bytes come out escaped
    assert "[bold]x" in shown and "\x1b]0" not in shown and "\x07" not in shown
    assert "\x9b" not in shown and "\u202e" not in shown


def test_a_set_size_the_files_contradict_is_refused_naming_both(store: Path, capsys) -> None:
    """Sizes come from the files (65536-byte CommitLog files here): a --set that disagrees is an
    error naming the setting and the files, as dump and verify (was silently overridden)."""
    for command in (["lag"], ["topic-status"]):
        code, _, err = _run(capsys, *command, "--store", str(store), "--set",
                            "mappedFileSizeCommitLog=1048576")
        assert code == 2, command
        assert (f"mappedFileSizeCommitLog=1048576 was given, but the CommitLog files under "
                f"{store / 'commitlog'} are 65536 bytes") in err
