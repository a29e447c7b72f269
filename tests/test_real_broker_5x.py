"""rocketlake reads a store a real 5.3.3 broker wrote with RocksDB ConsumeQueues
(``storeType=defaultRocksDB``; `tests/rocketmq_broker.py` produce mode): every message sent,
field by field; `get` per queue as the broker's store bounds; `lag` as the broker's own consumer
progress (its offsets in the RocksDB database `config/consumerOffsets/`). One broker run for
the module; skipped only when the harness cannot be built and Maven Central is unreachable.
"""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import rocketmq_broker

from rocketlake.jobs.cli import main
from rocketlake.store import MessageStore
from rocketlake.store.topic_kinds import is_system_group

VERSION = "5.3.3"
SETTINGS = {"storeType": "defaultRocksDB", "mappedFileSizeCommitLog": str(1 << 20),
            "enabledAppendPropCRC": "true"}
STEPS = ["--topic", "rl_plain", "4", "-", "--topic", "rl_tx", "2", "-",
         "--send", "rl_plain", "12", "--consume", "rl_group", "rl_plain", "--send", "rl_plain", "6",
         "--batch", "rl_plain", "4", "--delay", "rl_plain", "1",
         "--transaction", "rl_tx", "commit", "--transaction", "rl_tx", "rollback"]


@pytest.fixture(scope="module")
def produced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, rocketmq_broker.Produced]:
    rocketmq_broker.built_or_skip(VERSION)
    base = tmp_path_factory.mktemp("rocks5")
    store = base / "store"
    return store, rocketmq_broker.produce(store, VERSION, SETTINGS, STEPS, base / "home")


def _read_all(store: Path) -> dict[str, dict[str, object]]:
    """Every message of the user topics as rocketlake reads them, by KEYS (unique per message
    sent; a 5.x batch member carries a second UNIQ_KEY, the batch's)."""
    out = {}
    with MessageStore(store, read_only=True) as ms:
        for topic, q in ms.queues:
            if topic not in ("rl_plain", "rl_tx"):
                continue
            got = ms.get(topic, q, 0, 1000)
            for m in got.messages:
                props = m.record.properties
                out[props["KEYS"]] = {"topic": topic, "queue_id": q, "queue_offset": m.queue_offset,
                                          "body": m.record.body, "tags": props.get("TAGS"),
                                          "keys": props.get("KEYS")}
    return out


def test_the_consumequeue_is_a_rocksdb_database(produced: tuple[Path, rocketmq_broker.Produced]) -> None:
    store, _ = produced
    assert (store / "consumequeue" / "CURRENT").is_file()
    assert not any(p.is_dir() for p in (store / "consumequeue").iterdir())


def test_every_message_sent_is_read_field_by_field(produced: tuple[Path, rocketmq_broker.Produced]) -> None:
    store, p = produced
    read = _read_all(store)
    # 12 + 6 singles, a batch of 4, one delay message delivered, one committed transaction
    delivered = [s for s in p.sent if s["transaction"] != "rollback"]
    assert len(p.sent) == 25 and len(delivered) == 24
    assert len(read) == 24
    for s in delivered:
        got = read[s["keys"]]
        assert got["topic"] == s["topic"] and got["queue_id"] == s["queue_id"], s
        if s["queue_offset"] is not None:
            assert got["queue_offset"] == s["queue_offset"], s
        assert got["body"] == base64.b64decode(s["body_b64"])
        assert (got["tags"], got["keys"]) == (s["tags"], s["keys"])
    rolled_back = next(s for s in p.sent if s["transaction"] == "rollback")
    assert rolled_back["keys"] not in read


def test_get_per_queue_matches_the_broker(produced: tuple[Path, rocketmq_broker.Produced],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    store, p = produced
    for q in p.queues:
        assert main(["get", "--store", str(store), "--topic", q["topic"], "--queue",
                     str(q["queue_id"])]) == 0
        head = json.loads(capsys.readouterr().out.splitlines()[0])
        assert (head["min_offset"], head["max_offset"]) == (q["min_offset"], q["max_offset"]), q
        assert head["count"] == q["max_offset"] - q["min_offset"]


def test_lag_matches_the_brokers_consumer_progress(produced: tuple[Path, rocketmq_broker.Produced],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    store, p = produced
    assert main(["lag", "--store", str(store), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    got = {(r["consumer_group"], r["topic"], r["queue_id"]): (r["consumer_offset"], r["max_offset"])
           for r in rows}
    # lag leaves the broker's own CID_RMQ_SYS_TRANS out (there once its transaction check has run)
    want = {(g["group"], g["topic"], g["queue_id"]): (g["committed"], g["max_offset"])
            for g in p.progress if not g["topic"].startswith("%RETRY%") and not is_system_group(g["group"])}
    assert want and {k: got.get(k) for k in want} == want
    # the consumer took the first 12 of rl_plain, 3 per queue; 10 came after it (lag)
    assert sum(m - c for c, m in want.values()) == 6 + 4 + 1


def test_writers_refuse_a_rocksdb_consumequeue_store(produced: tuple[Path, rocketmq_broker.Produced],
                                                     tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    store, _ = produced
    events = tmp_path / "e.jsonl"
    events.write_text('{"topic": "t", "body": "x"}\n')
    before = sorted(p.name for p in (store / "consumequeue").iterdir())
    assert main(["ingest", "--store", str(store), str(events)]) == 2
    assert "storeType=defaultRocksDB" in capsys.readouterr().err
    assert sorted(p.name for p in (store / "consumequeue").iterdir()) == before


def test_dump_store_status_and_file_readers_on_a_rocksdb_consumequeue(
        produced: tuple[Path, rocketmq_broker.Produced], capsys: pytest.CaptureFixture[str]) -> None:
    """dump consumequeue and store-status read the RocksDB queues through the readers' protocol
    (``queue_reader.QueueReader``); what reads ConsumeQueue files (verify) refuses the database
    loudly instead of taking its files for queues."""
    store, p = produced
    q = next(q for q in p.queues if q["topic"] == "rl_plain" and q["max_offset"] > q["min_offset"])
    assert main(["dump", "consumequeue", "--store", str(store), "--topic", "rl_plain", "--queue",
                 str(q["queue_id"])]) == 0
    units = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [u["queue_offset"] for u in units] == list(range(q["min_offset"], q["max_offset"]))
    with MessageStore(store, read_only=True) as ms:
        want = [r.commitlog_offset for r in (m.record for m in ms.get(
            "rl_plain", q["queue_id"], q["min_offset"], 1000).messages)]
        last = max(r.commitlog_offset + r.size for r in ms.commitlog.walk_records())
    assert [u["commitlog_offset"] for u in units] == want
    assert main(["store-status", "--store", str(store), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["consume_queue_end_offset"] == last  # every record dispatched
    assert main(["verify", "--store", str(store)]) == 2
    assert "a RocksDB ConsumeQueue (storeType=defaultRocksDB" in capsys.readouterr().err
