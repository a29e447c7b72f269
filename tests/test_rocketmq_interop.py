"""Interop with RocketMQ 4.9.8 itself, both ways (`tests/rocketmq_peer.py` drives its store).

- A store our ``MessageStore`` writes (one session through ``put_table``, one through
  ``put_batch``) is opened by RocketMQ's ``DefaultMessageStore`` (after a
  clean close, after a crash with a zeroed checkpoint, and with its ConsumeQueues and index
  deleted): every queue's min/max offsets and every message getMessage serves must be what we put,
  and queryMessage finds a key; its rebuild writes our ConsumeQueue and index bytes.
- A store RocketMQ writes is read back by the ``rocketlake`` CLI (`dump commitlog`, `verify`); our
  rebuild, and our recovery after a crash, write its ConsumeQueue and index bytes.

The peer is built with Maven once per session (the first build downloads from Maven Central).
"""
from __future__ import annotations

import base64
import ipaddress
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import rocketmq_peer

from rocketlake.store import (
    TRANSACTION_COMMIT,
    TRANSACTION_PREPARED,
    Message,
    MessageStore,
    PutResult,
)
from rocketlake.store.single_process_rebuild import rebuild

pytestmark = pytest.mark.skipif(not rocketmq_peer.available(), reason="needs a JDK (java) and Maven (mvn)")

# Small files, so that CommitLog, ConsumeQueue and index files all roll.
SIZES: dict[str, Any] = {"mappedFileSizeCommitLog": 64 * 1024, "mappedFileSizeConsumeQueue": 600,
                         "maxHashSlotNum": 64, "maxIndexNum": 200}
PEER_SIZES = rocketmq_peer.size_args(*SIZES.values())  # the same four, in size_args' order
V6_BORN = "[2408:4004:180:8100:3faa:1dde:2b3f:898a]:40001"
V6_STORE = "[fd00::7]:10911"
TOPICS = ("orders", "payments", "audit-log")
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
DELAY_LEVEL = 3


@pytest.fixture(scope="session")
def peer() -> Path:
    """The peer, built once per session (`mvn package` under tests/java/peer/target/)."""
    return rocketmq_peer.build()


def _write_with_rocketlake(root: Path, messages: list[Message], table: bool) -> list[PutResult]:
    """Open (or create) the store at ``root`` with the small file sizes, put ``messages`` in one
    batch, close cleanly. The write path under test: ``MessageStore.put_table`` of the messages
    as an Arrow table (``table``), else ``MessageStore.put_batch``."""
    with MessageStore(root, **SIZES) as store:
        if not table:
            return store.put_batch(messages)
        r = store.put_table(pa.table({
            "topic": [m.topic for m in messages],
            "body": pa.array([m.body for m in messages], pa.binary()),
            "queue_id": pa.array([m.queue_id for m in messages], pa.int32()),
            "tags": pa.array([m.tags for m in messages], pa.string()),
            "keys": pa.array([m.keys for m in messages], pa.list_(pa.string())),
            "properties": pa.array([list((m.properties or {}).items()) for m in messages],
                                   pa.map_(pa.string(), pa.string())),
            "delay_level": [m.delay_level for m in messages],
            "sys_flag": [m.sys_flag for m in messages],
            "born_timestamp": [m.born_timestamp for m in messages],
            "born_host": pa.array([m.born_host for m in messages], pa.string()),
            "store_host": pa.array([m.store_host for m in messages], pa.string()),
        }))
        return [PutResult(r.status, *row[:4], r.topics[row[4]], row[5], r.store_addrs[row[6]], row[7])
                for row in zip(r.commitlog_offset.tolist(), r.size.tolist(), r.queue_offset.tolist(),
                               r.store_timestamp.tolist(), r.topic.tolist(), r.queue_id.tolist(),
                               r.store_host.tolist(), r.store_port.tolist())]


def _messages(first: int, count: int) -> list[Message]:
    """A mix: three topics, four queues, tags or none, keys or none, user properties, IPv6 born
    hosts (and a few IPv6 store hosts)."""
    out = []
    for i in range(first, first + count):
        out.append(Message(
            topic=TOPICS[i % 3], body=f'{{"event":{i}}}'.encode().ljust(40 + i % 90, b" "),
            queue_id=i % 4, tags=(None if i % 5 == 4 else f"Tag{'ABC'[i % 3]}"),
            keys=(None if i % 6 == 5 else [f"order-{i}", f"cust-{i % 7}"]),
            properties={"source": "interop", "n": str(i)}, born_timestamp=1_732_000_000_000 + i,
            born_host=V6_BORN if i % 7 == 0 else f"10.1.2.{i % 250}:5000{i % 10}",
            store_host=V6_STORE if i % 50 == 13 else None))
    return out


@pytest.fixture(scope="module")
def our_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[Message, PutResult]]]:
    """A store our library wrote in two sessions: a mix of 600 messages, a delayed message, and a
    transaction's PREPARED half message then (reopened) its COMMIT. Returns the root and each
    message with where it was put."""
    root = tmp_path_factory.mktemp("ours") / "store"
    first = _messages(0, 300)
    first.append(Message(topic="orders", body=b"delayed order", queue_id=2, tags="TagD",
                         keys=["order-delayed", "cust-3"], delay_level=DELAY_LEVEL))
    first.append(Message(topic="orders", body=b"half order", queue_id=1, tags="TagT",
                         keys=["order-tx", "cust-3"], sys_flag=TRANSACTION_PREPARED))
    put = list(zip(first, _write_with_rocketlake(root, first, table=True)))
    half = put[-1][1]
    second = [Message(topic="orders", body=b"half order", queue_id=1, tags="TagT",
                      keys=["order-tx", "cust-3"], sys_flag=TRANSACTION_COMMIT,
                      prepared_transaction_offset=half.commitlog_offset), *_messages(300, 300)]
    put += zip(second, _write_with_rocketlake(root, second, table=False))
    assert len(list((root / "commitlog").iterdir())) >= 3  # the files rolled
    return root, put


def _host(text: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    addr, _, port = text.rpartition(":")
    return ipaddress.ip_address(addr.strip("[]")), int(port)


def _expected_queues(put: list[tuple[Message, PutResult]]) -> dict[tuple[str, int], list]:
    """(topic, queue) -> the messages it serves in queue order, from what was put: every message
    but a PREPARED half message; a delayed one under SCHEDULE_TOPIC_XXXX, queue delayLevel - 1."""
    queues: dict[tuple[str, int], list] = {}
    for m, r in put:
        if m.sys_flag == TRANSACTION_PREPARED:
            continue
        key = (SCHEDULE_TOPIC, m.delay_level - 1) if m.delay_level else (m.topic, m.queue_id)
        queues.setdefault(key, []).append((m, r))
    return queues


def _serve(root: Path, tmp_path: Path, *queries: tuple[str, str]) -> tuple[dict, list[dict]]:
    out = tmp_path / "served.jsonl"
    args = [a for q in queries for a in ("--query", *q)]
    result = rocketmq_peer.run("serve", root, "--out", out, *args, *PEER_SIZES, timeout=120)
    return result, rocketmq_peer.read_served(out)


def _check_served(served: list[dict], put: list[tuple[Message, PutResult]]) -> None:
    expected = _expected_queues(put)
    ranges = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"])
              for q in served if q["kind"] == "queue" and q["max_offset"] > 0}
    assert ranges == {k: (0, len(v)) for k, v in expected.items()}
    assert [q for q in served if q["kind"] == "gap"] == []
    got: dict[tuple[str, int], list[dict]] = {}
    for s in served:
        if s["kind"] == "message":
            got.setdefault((s["topic"], s["queue_id"]), []).append(s)
    assert set(got) == set(expected)
    for key, msgs in expected.items():
        assert [s["queue_offset"] for s in got[key]] == list(range(len(msgs))), key
        for (m, r), s in zip(msgs, got[key]):
            where = f"{key} offset {s['queue_offset']}"
            assert base64.b64decode(s["body_b64"]) == m.body, where
            assert (s["commitlog_offset"], s["served_offset"], s["size"]) == \
                (r.commitlog_offset, r.commitlog_offset, r.size), where
            assert s["msg_id"] == r.msg_id, where
            assert s["tags"] == m.tags, where
            keys = m.keys if isinstance(m.keys, list) else []
            assert (s["keys"] or "").split() == keys, where
            assert {k: v for k, v in s["properties"].items() if k in (m.properties or {})} == \
                (m.properties or {}), where
            assert s["sys_flag"] & 0xC == m.sys_flag & 0xC, where
            assert s["prepared_transaction_offset"] == m.prepared_transaction_offset, where
            assert _host(s["born_host"]) == _host(m.born_host or "127.0.0.1:0"), where
            assert _host(s["store_host"]) == _host(m.store_host or "127.0.0.1:10911"), where
            if m.delay_level:
                assert (s["properties"]["REAL_TOPIC"], s["properties"]["REAL_QID"],
                        s["properties"]["DELAY"]) == (m.topic, str(m.queue_id), str(m.delay_level))


def _check_query(served: list[dict], put: list[tuple[Message, PutResult]]) -> None:
    """queryMessage("orders", "cust-3"): its candidates (hash matches; the client filters by the
    real key) hold exactly the orders records with that key, the PREPARED half message too."""
    (answer,) = [q for q in served if q["kind"] == "query"]
    found = sorted(s["commitlog_offset"] for s in answer["messages"] if "cust-3" in s["keys"].split())
    expected = sorted(r.commitlog_offset for m, r in put
                      if m.topic == "orders" and not m.delay_level and "cust-3" in (m.keys or []))
    assert found == expected and len(expected) >= 10


def _files(top: Path) -> dict[str, bytes]:
    """Every file under ``top`` (relative path -> bytes), in name order."""
    return {str(p.relative_to(top)): p.read_bytes() for p in sorted(top.rglob("*")) if p.is_file()}


def _zero_checkpoint(root: Path) -> None:
    """The checkpoint's three timestamps (physic, logics, index; 8 bytes each) set to 0."""
    raw = bytearray((root / "checkpoint").read_bytes())
    raw[:24] = bytes(24)
    (root / "checkpoint").write_bytes(raw)


@pytest.mark.parametrize("how", ["clean", "abort", "rebuild"])
def test_rocketmq_serves_what_we_wrote(peer: Path, our_store, tmp_path: Path, how: str) -> None:
    """clean: as we closed it. abort: an `abort` file and a zeroed checkpoint, so RocketMQ
    recovers abnormally, checking every record from the first file. rebuild: consumequeue/,
    index/ and checkpoint deleted, so RocketMQ dispatches every record again, and must write the
    ConsumeQueue and index bytes we wrote."""
    src, put = our_store
    root = tmp_path / "store"
    shutil.copytree(src, root)
    if how == "abort":
        (root / "abort").touch()
        _zero_checkpoint(root)
    elif how == "rebuild":
        for name in ("consumequeue", "index"):
            shutil.rmtree(root / name)
        (root / "checkpoint").unlink()
    result, served = _serve(root, tmp_path, ("orders", "cust-3"))
    assert result["abort_file"] == (how == "abort")
    assert result["max_phy_offset"] == put[-1][1].commitlog_offset + put[-1][1].size
    _check_served(served, put)
    _check_query(served, put)
    if how == "rebuild":  # RocketMQ's dispatch of our CommitLog wrote the bytes we wrote
        assert _files(root / "consumequeue") == _files(src / "consumequeue")
        # index files are named at creation (wall clock): compare their contents in order
        assert list(_files(root / "index").values()) == list(_files(src / "index").values())


N_PEER, PEER_QUEUES, PEER_BODY = 2000, 4, 100


@pytest.fixture(scope="module")
def rocketmq_store(peer: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store RocketMQ wrote with the peer's write mode (closed cleanly; do not change it)."""
    root = tmp_path_factory.mktemp("theirs") / "store"
    result = rocketmq_peer.run("write", root, N_PEER, PEER_QUEUES, PEER_BODY, *PEER_SIZES, timeout=120)
    assert result["messages"] == N_PEER
    assert len(list((root / "commitlog").iterdir())) >= 3
    return root


def test_we_read_what_rocketmq_wrote(rocketmq_store: Path, tmp_path: Path) -> None:
    """The peer's write mode is deterministic: message i is BenchTopic queue i % 4, queue offset
    i // 4, tag TagA, key k<i>, body m<i> padded with '.' to 100 bytes. Our rebuild from its
    CommitLog writes the ConsumeQueue and index bytes it wrote."""
    n, root = N_PEER, rocketmq_store
    cli = [sys.executable, "-m", "rocketlake.jobs.cli"]
    dump = subprocess.run([*cli, "dump", "commitlog", "--store", str(root)],
                          capture_output=True, text=True, check=True)
    records = [json.loads(line) for line in dump.stdout.splitlines()]
    assert [(r["topic"], r["queue_id"], r["queue_offset"], base64.b64decode(r["body_b64"]),
             r["properties"].get("TAGS"), r["properties"].get("KEYS")) for r in records] == \
        [("BenchTopic", i % PEER_QUEUES, i // PEER_QUEUES, rocketmq_peer.write_body(i, PEER_BODY),
          "TagA", f"k{i}") for i in range(n)]
    assert Counter(r["store_host"] for r in records) == {"127.0.0.1:10911": n}
    verify = subprocess.run([*cli, "verify", "--store", str(root), "--json"],
                            capture_output=True, text=True)
    report = json.loads(verify.stdout)
    assert (verify.returncode, report["ok"], report["records"], report["units"], report["problems"]) == \
        (0, True, n, n, [])
    rebuilt = tmp_path / "rebuilt"
    rebuild(root, rebuilt, **SIZES)
    assert _files(rebuilt / "consumequeue") == _files(root / "consumequeue")
    assert list(_files(rebuilt / "index").values()) == list(_files(root / "index").values())


def test_we_recover_what_rocketmq_wrote_after_a_crash(rocketmq_store: Path, tmp_path: Path) -> None:
    """RocketMQ's store with an `abort` file and a zeroed checkpoint: our open recovers abnormally
    from the first record to RocketMQ's end, and leaves its ConsumeQueue and index bytes as they
    were (every record re-dispatched to the same place)."""
    root = tmp_path / "store"
    shutil.copytree(rocketmq_store, root)
    (root / "abort").touch()
    _zero_checkpoint(root)
    with MessageStore(root, **SIZES) as store:
        r = store.recovery
        assert (r.abnormal, r.scanned_from, r.stop_reason) == (True, 0, None)
        assert r.commitlog_end == store.commitlog.max_offset
        assert store.queue_ranges() == {("BenchTopic", q): (0, N_PEER // PEER_QUEUES)
                                        for q in range(PEER_QUEUES)}
    assert not (root / "abort").exists()
    assert _files(root / "consumequeue") == _files(rocketmq_store / "consumequeue")
    assert list(_files(root / "index").values()) == list(_files(rocketmq_store / "index").values())
