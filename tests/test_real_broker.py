"""A real RocketMQ broker serves a store rocketlake wrote (`tests/rocketmq_broker.py` runs one).

3,000 events over 3 topics x 4 queues, with tags, keys, properties, UNIQ_KEYs and IPv6 born
hosts, go in through `rocketlake ingest`; a 4.9.7 broker (and a 5.3.3 broker: the upgrade path)
started on the store serves every one of them to a real pull client, field for field. Also
after the writer was killed (SIGKILL) instead of closed: the broker's own recovery, then the
same answer. Without `config/topics.json` declaring the topics, a broker serves none of them.

The harness is built once per session and version (Maven; Maven Central on the first build);
the tests skip only when that build fails and Maven Central is unreachable.
"""
from __future__ import annotations

import base64
import ipaddress
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import rocketmq_broker
import rocketmq_peer
from store_helpers import kill_when_ready

from rocketlake.jobs.cli import main

N = 3000
TOPICS = ["rl_audit", "rl_orders", "rl_payments"]
QUEUES = 4
STORE_HOST = "192.168.0.7:10911"
#: small files, so every kind rolls: CommitLog ~7 files, ConsumeQueue 3 per queue, index ~20
SIZES = {"mappedFileSizeCommitLog": 64 * 1024, "mappedFileSizeConsumeQueue": 2000,
         "maxHashSlotNum": 64, "maxIndexNum": 400}
SETS = [a for k, v in SIZES.items() for a in ("--set", f"{k}={v}")]
HARNESS_SIZES = rocketmq_peer.size_args(*SIZES.values())


def _event(i: int) -> dict[str, Any]:
    """Event ``i``: topic i % 3, queue (i // 3) % 4, so each queue gets 250 in order."""
    ev: dict[str, Any] = {
        "topic": TOPICS[i % 3], "queue_id": (i // 3) % QUEUES,
        "body": f"event {i} " + "x" * (i % 97),
        "tags": f"tag{i % 5}", "keys": [f"order-{i}", f"cust-{i % 37}"],
        "properties": {"source": "rocketlake-test", "seq": str(i)},
        "born_timestamp": 1_750_000_000_000 + 10 * i, "store_timestamp": 1_750_000_000_003 + 10 * i,
        "born_host": (f"[2001:db8::{i % 9 + 1}]:40001" if i % 10 == 0
                      else f"10.0.{i % 4}.{i % 250 + 1}:{40000 + i % 1000}"),
        "store_host": STORE_HOST,
    }
    if i % 2 == 0:
        ev["properties"]["UNIQ_KEY"] = f"0A0000010000{i:020X}"
    return ev


EVENTS = [_event(i) for i in range(N)]


def _host(text: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    ip, _, port = text.rpartition(":")
    return ipaddress.ip_address(ip.strip("[]")), int(port)


def _expected() -> dict[tuple[str, int, int], dict[str, Any]]:
    """What the client must get, by (topic, queue, queue offset), from the events alone."""
    out, next_offset = {}, {}
    for ev in EVENTS:
        q = (ev["topic"], ev["queue_id"])
        offset = next_offset[q] = next_offset.get(q, -1) + 1
        keys = " ".join(ev["keys"])
        out[(*q, offset)] = {
            "body": ev["body"].encode(), "tags": ev["tags"], "keys": keys,
            "properties": {"TAGS": ev["tags"], "KEYS": keys, **ev["properties"]},
            "born_timestamp": ev["born_timestamp"], "store_timestamp": ev["store_timestamp"],
            "born_host": _host(ev["born_host"]), "store_host": _host(STORE_HOST),
            "sys_flag": 0x10 if ev["born_host"].startswith("[") else 0,  # born host IPv6
            "uniq_key": ev["properties"].get("UNIQ_KEY")}
    return out


def _served(messages: list[dict[str, Any]]) -> dict[tuple[str, int, int], dict[str, Any]]:
    """The client's messages in the shape of ``_expected``; checks each msgId on the way."""
    out = {}
    for m in messages:
        # offset msgId: store host 192.168.0.7 (C0A80007), port 10911 (2A9F), CommitLog offset
        assert m["offset_msg_id"] == f"C0A8000700002A9F{m['commitlog_offset']:016X}", m
        uniq = m["properties"].get("UNIQ_KEY")
        assert m["msg_id"] == (uniq or m["offset_msg_id"]), m
        key = (m["topic"], m["queue_id"], m["queue_offset"])
        assert key not in out, f"served twice: {key}"
        out[key] = {
            "body": base64.b64decode(m["body_b64"]), "tags": m["tags"], "keys": m["keys"],
            "properties": {k: v for k, v in m["properties"].items()
                           if k not in rocketmq_broker.CLIENT_PROPERTIES},
            "born_timestamp": m["born_timestamp"], "store_timestamp": m["store_timestamp"],
            "born_host": _host(m["born_host"]), "store_host": _host(m["store_host"]),
            "sys_flag": m["sys_flag"], "uniq_key": uniq}
    return out


@pytest.fixture(scope="module")
def events_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("events") / "events.jsonl"
    path.write_text("".join(json.dumps(ev) + "\n" for ev in EVENTS))
    return path


@pytest.fixture(scope="module")
def closed_store(tmp_path_factory: pytest.TempPathFactory, events_file: Path) -> Path:
    """The events through `rocketlake ingest`, closed cleanly."""
    root = tmp_path_factory.mktemp("closed") / "store"
    assert main(["ingest", "--store", str(root), "--create", *SETS, str(events_file)]) == 0
    return root


@pytest.fixture(scope="module")
def killed_store(tmp_path_factory: pytest.TempPathFactory, events_file: Path) -> Path:
    """The events put by a writer (``MessageStore.put_batch``, 500 at a time) that was then
    killed with SIGKILL: never closed, `abort` left behind."""
    root = tmp_path_factory.mktemp("killed") / "store"
    script = (
        "import json, sys, time\n"
        "from rocketlake.jobs.cli.events import event_to_message\n"
        "from rocketlake.store import MessageStore\n"
        f"ms = MessageStore({str(root)!r}, **{SIZES!r})\n"
        f"msgs = [event_to_message(json.loads(line)) for line in open({str(events_file)!r})]\n"
        "for i in range(0, len(msgs), 500):\n"
        "    ms.put_batch(msgs[i:i + 500])\n"
        "print('put', flush=True)\n"
        "time.sleep(120)\n")
    kill_when_ready([script], "put")
    assert (root / "abort").exists()
    return root


@pytest.mark.parametrize("version", rocketmq_broker.VERSIONS)
@pytest.mark.parametrize("which", ["closed_store", "killed_store"])
def test_a_broker_serves_every_message_of_a_store_rocketlake_wrote(
        which: str, version: str, request: pytest.FixtureRequest, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    rocketmq_broker.built_or_skip(version)
    store = tmp_path / "store"
    shutil.copytree(request.getfixturevalue(which), store)  # the broker changes what it opens
    messages, done = rocketmq_broker.serve(store, TOPICS, version, HARNESS_SIZES, tmp_path / "home")
    with capsys.disabled():
        print(f"\n  {version} on the {which.split('_')[0]} store: broker started in "
              f"{done['startup_seconds']:.1f} s, {done['messages']} messages pulled in "
              f"{done['pull_seconds']:.1f} s, shut down in {done['shutdown_seconds']:.1f} s")
    assert done["version"] == "V" + version.replace(".", "_")
    assert len(messages) == N
    served, expected = _served(messages), _expected()
    assert served.keys() == expected.keys()
    for key, want in expected.items():
        assert served[key] == want, key
