"""rocketlake reads what a real 5.3.3 broker with file ConsumeQueues writes for the 5.x features
(`tests/rocketmq_broker.py` produce mode): the property CRC (``enabledAppendPropCRC``), a BatchCQ
topic, a compaction topic, pending timers, transactions, the checkpoint's confirmPhyOffset after a
restart, and (4.9.7 too) a CommitLog over two directories. Expected values come from the broker:
what the clients sent, its store's queue bounds and its consumer progress. Skipped only when the
harness cannot be built and Maven Central is unreachable.
"""
from __future__ import annotations

import base64
import json
import shutil
import struct
from pathlib import Path

import pytest
import rocketmq_broker

from rocketlake.jobs.cli import main
from rocketlake.store import Message, MessageStore, UnsupportedStoreError
from rocketlake.store.checkpoint import confirmed_end
from rocketlake.store.dispatch import served_as_such
from rocketlake.store.topic_kinds import is_system_group
from rocketlake.store.verify import verify

VERSION = "5.3.3"
SETTINGS = {"mappedFileSizeCommitLog": str(1 << 20), "enabledAppendPropCRC": "true",
            "mapperFileSizeBatchConsumeQueue": str(46 * 1000)}
STEPS = ["--topic", "rl_plain", "2", "-", "--topic", "rl_batch", "2", "+queue.type=BatchCQ",
         "--topic", "rl_compact", "1", "+cleanup.policy=COMPACTION", "--topic", "rl_tx", "2", "-",
         "--send", "rl_plain", "6", "--consume", "rl_group", "rl_plain", "--send", "rl_plain", "3",
         "--batch", "rl_batch", "4", "--send", "rl_batch", "3", "--consume", "rl_bgroup", "rl_batch",
         "--keyed", "rl_compact", "k1", "3", "--keyed", "rl_compact", "k2", "2",
         "--timer", "rl_plain", "600000", "--timer", "rl_plain", "900000", "--timer", "rl_batch", "700000",
         "--transaction", "rl_tx", "commit", "--transaction", "rl_tx", "rollback",
         "--consume", "rl_txgroup", "rl_tx"]
USER_TOPICS = ("rl_plain", "rl_batch", "rl_compact", "rl_tx")


@pytest.fixture(scope="module")
def produced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, rocketmq_broker.Produced]:
    rocketmq_broker.built_or_skip(VERSION)
    base = tmp_path_factory.mktemp("five")
    store = base / "store"
    return store, rocketmq_broker.produce(store, VERSION, SETTINGS, STEPS, base / "home")


def _rows(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict]:
    assert main(list(argv)) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]


def test_queue_bounds_and_lag_are_the_brokers(produced, capsys) -> None:
    store, p = produced
    assert (store / "batchconsumequeue" / "rl_batch").is_dir()  # BatchCQ: not under consumequeue/
    assert not (store / "consumequeue" / "rl_batch").exists()
    got = {(r["topic"], r["queue_id"]): (r["min_offset"], r["max_offset"])
           for r in _rows(capsys, "topic-status", "--store", str(store), "--json")}
    broker = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in p.queues}
    assert {k for k in got if k[0] in USER_TOPICS} <= set(broker)
    assert {k: got.get(k, (0, 0)) for k in broker} == broker  # a queue never written: no files
    progress = {(g["group"], g["topic"], g["queue_id"]): (g["committed"], g["max_offset"])
                for g in p.progress}
    lag = {(r["consumer_group"], r["topic"], r["queue_id"]): (r["consumer_offset"], r["max_offset"])
           for r in _rows(capsys, "lag", "--store", str(store), "--json")}
    assert lag == {k: v for k, v in progress.items() if not is_system_group(k[0])}
    # the transaction check commits CID_RMQ_SYS_TRANS only once it has run (every 30 s or so):
    # whatever the broker held when it printed, lag --system shows it, at least that far
    every = {(r["consumer_group"], r["topic"], r["queue_id"]): (r["consumer_offset"], r["max_offset"])
             for r in _rows(capsys, "lag", "--store", str(store), "--json", "--system")}
    assert {k: v for k, v in every.items() if not is_system_group(k[0])} == lag
    for k, (committed, top) in progress.items():
        if is_system_group(k[0]):
            assert committed <= every[k][0] <= every[k][1] == top, (k, every.get(k))


def test_a_batch_topic_reads_every_message_sent(produced, capsys) -> None:
    store, p = produced
    sent = sorted(s["keys"] for s in p.sent if s["topic"] == "rl_batch" and s["deliver_ms"] is None)
    keys = []
    with MessageStore(store, read_only=True) as ms:
        for q in (0, 1):
            got = ms.get("rl_batch", q, 0, 100)
            assert got.next_begin_offset == ms.max_offset("rl_batch", q)
            for m in got.messages:
                if m.record.sys_flag & 0x80:  # an inner batch: one record, its members inside
                    keys += [s["keys"] for s in p.sent if s["topic"] == "rl_batch"
                             and s["queue_id"] == q and s["queue_offset"] is not None
                             and m.queue_offset <= s["queue_offset"] < m.queue_offset
                             + int(m.record.properties["INNER_NUM"])]
                else:
                    keys.append(m.record.properties["KEYS"])
    assert sorted(keys) == sent
    units = _rows(capsys, "dump", "consumequeue", "--store", str(store), "--topic", "rl_batch",
                  "--queue", "0")
    assert [u["batch_size"] for u in units] == [4, 1, 1]  # the batch of 4 is one inner-batch unit


def test_the_property_crc_of_every_record_is_checked_and_holds(produced, tmp_path: Path) -> None:
    store, _ = produced
    with MessageStore(store, read_only=True) as ms:
        recs = list(ms.commitlog.walk_records())
    assert recs and all(r.properties_string.endswith("\x02") and "__CRC32#" in r.properties for r in recs)
    assert verify(store).problems == []
    # FLAG (record bytes 16-20) is covered by the property CRC only
    copy = tmp_path / "store"
    shutil.copytree(store, copy, ignore=shutil.ignore_patterns("lock"))
    victim = recs[1].commitlog_offset
    log = copy / "commitlog" / f"{0:020d}"
    raw = bytearray(log.read_bytes())
    raw[victim + 19] ^= 1
    log.write_bytes(bytes(raw))
    damage = [p for p in verify(copy).problems if p.kind == "commitlog-invalid-record"]
    assert [p.offset for p in damage] == [victim] and "property CRC" in damage[0].what


def test_a_compaction_topic_is_served_from_the_brokers_compaction_log(produced) -> None:
    store, p = produced
    with MessageStore(store, read_only=True) as ms:
        assert ms.queue("rl_compact", 0).log is not None  # compaction/compactionLog/rl_compact/0
        got = ms.get("rl_compact", 0, 0, 100)
    sent = [s for s in p.sent if s["topic"] == "rl_compact"]
    assert [(m.queue_offset, m.record.properties["KEYS"], base64.b64encode(m.record.body).decode())
            for m in got.messages] == [(s["queue_offset"], s["keys"], s["body_b64"]) for s in sent]


def test_pending_timers_are_the_timer_messages_not_yet_due(produced, capsys) -> None:
    store, p = produced
    want: dict[str, list[int]] = {}
    for s in p.sent:  # the broker stores the time rounded down to timerPrecisionMs (1000 ms;
        d = s["deliver_ms"]  # HookUtils.transformTimerMessage: one step earlier when exact)
        if d is not None:
            want.setdefault(s["topic"], []).append(d - 1000 if d % 1000 == 0 else d // 1000 * 1000)
    rows = _rows(capsys, "timers", "--store", str(store), "--json")
    assert [(r["topic"], r["pending"], r["earliest_delivery_timestamp"], r["latest_delivery_timestamp"])
            for r in rows] == [(t, len(d), min(d), max(d)) for t, d in sorted(want.items())]


def test_transactions_serve_the_committed_message_only(produced) -> None:
    store, p = produced
    with MessageStore(store, read_only=True) as ms:
        topics = {t for t, _ in ms.queue_ranges()}
        assert {"RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"} <= topics
        assert {t for t in topics if served_as_such(t)} == set(USER_TOPICS)
        served = [m.record for q in (0, 1) for m in ms.get("rl_tx", q, 0, 100).messages]
        half = ms.get("RMQ_SYS_TRANS_HALF_TOPIC", 0, 0, 100).messages
    committed = [s["keys"] for s in p.sent if s["transaction"] == "commit"]
    assert [r.properties["KEYS"] for r in served] == committed
    assert sorted(m.record.properties["KEYS"] for m in half) == sorted(
        s["keys"] for s in p.sent if s["transaction"] is not None)


def test_a_writer_refuses_the_store_of_a_batch_topic(produced) -> None:
    store, _ = produced
    with pytest.raises(UnsupportedStoreError, match="batchconsumequeue/rl_batch: a BatchConsumeQueue"):
        MessageStore(store, mappedFileSizeCommitLog=1 << 20)


def test_a_restarted_broker_leaves_a_stale_confirmed_offset(tmp_path: Path) -> None:
    """Outside controller mode a broker's restart sets confirmPhyOffset to the start of the last
    record it recovered; what it writes next lies past it and is served all the same."""
    rocketmq_broker.built_or_skip(VERSION)
    store = tmp_path / "store"
    steps = ["--topic", "rl_plain", "2", "-", "--send", "rl_plain", "3"]
    settings = {"mappedFileSizeCommitLog": str(1 << 20)}
    for _ in range(2):
        rocketmq_broker.produce(store, VERSION, settings, steps, tmp_path / "home")
    with MessageStore(store, read_only=True, mappedFileSizeCommitLog=1 << 20) as ms:
        starts = [r.commitlog_offset for r in ms.commitlog.walk_records()]
        end = ms.commitlog.max_offset
    master, confirm = struct.unpack_from(">qq", (store / "checkpoint").read_bytes(), 24)
    assert (master, confirm) == (0, starts[2]) and len(starts) == 6
    assert confirmed_end(store) is None  # no epochFileCheckpoint: readers go on to the end
    # a writer appending keeps masterFlushedOffset and moves the confirmed offset past its records
    with MessageStore(store, mappedFileSizeCommitLog=1 << 20) as ms:
        put = ms.put_batch([Message(topic="rl_plain", body=b"after the broker", queue_id=0)])
    assert struct.unpack_from(">qq", (store / "checkpoint").read_bytes(), 24) == (
        0, put[-1].commitlog_offset + put[-1].size)
    assert put[0].commitlog_offset == end


@pytest.mark.parametrize("version", ["4.9.7", VERSION])
def test_a_multi_path_commitlog_is_read_where_the_setting_names_it(version: str,
                                                                   tmp_path: Path) -> None:
    """storePathCommitLog with two directories: the broker spreads the CommitLog files over them
    (MultiPathMappedFileQueue); rocketlake reads every message sent given the same setting."""
    rocketmq_broker.built_or_skip(version)
    store = tmp_path / "store"
    paths = f"{store / 'commitlog'},{store / 'commitlog2'}"
    p = rocketmq_broker.produce(store, version,
                                {"mappedFileSizeCommitLog": "16384", "storePathCommitLog": paths},
                                ["--topic", "rl_plain", "2", "-", "--send", "rl_plain", "150"],
                                tmp_path / "home")
    placed = {f.name: d for d in ("commitlog", "commitlog2") for f in (store / d).iterdir()}
    assert len(placed) >= 3  # file i in the (i % 2)-th directory of the two, sorted
    assert placed == {n: ("commitlog", "commitlog2")[int(n) // 16384 % 2] for n in placed}
    with MessageStore(store, read_only=True, storePathCommitLog=paths) as ms:
        got = sorted(r.properties["KEYS"] for r in ms.commitlog.walk_records() if r.topic == "rl_plain")
        assert all(ms.max_offset("rl_plain", q["queue_id"]) == q["max_offset"] for q in p.queues)
    assert got == sorted(s["keys"] for s in p.sent)
    assert verify(store, storePathCommitLog=paths).problems == []
