"""Real RocketMQ brokers on a store: one serves what rocketlake wrote, one writes what rocketlake reads.

`tests/java/broker/` is a small Maven project that starts a name server and a broker of
`org.apache.rocketmq` 4.9.7 or 5.3.3 (Maven Central) in one JVM on loopback, on a store
directory (`Loopback.java`), with real clients:

- `ServeStore` (:func:`serve`) pulls every message of every queue of the given topics
  (``DefaultMQPullConsumer``, from offset 0);
- `ProduceStore` (:func:`produce`) declares topics (5.x attributes too), sends singles, batches,
  delay-level, timer and transaction messages with ``DefaultMQProducer`` /
  ``TransactionMQProducer``, lets a push consumer consume and commit, and reports what it sent
  and the broker's own consumer progress, under chosen store settings (``storeType``, ...).

:func:`build` compiles it once per version (``-Drocketmq.version``, into ``target/<version>/``;
offline from the local Maven repository when it can). Build and run go through
`tests/rocketmq_peer.py`.
"""
from __future__ import annotations

import json
import os
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import rocketmq_peer
from rocketmq_peer import PeerError

PROJECT = Path(__file__).resolve().parent / "java" / "broker"
MAIN = "rocketlake.broker.ServeStore"
PRODUCE_MAIN = "rocketlake.broker.ProduceStore"
#: the broker versions the harness builds against (both resolve from Maven Central)
VERSIONS = ("4.9.7", "5.3.3")
MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2/"
#: properties the pull client adds to every message it returns (PullAPIWrapper), not stored
CLIENT_PROPERTIES = frozenset({"MIN_OFFSET", "MAX_OFFSET"})


def jar(version: str) -> Path:
    return PROJECT / "target" / version / "rocketmq-broker-harness-1.0.jar"


def build(version: str) -> Path:
    """Compile the harness against RocketMQ ``version`` (skipped when already built); the jar.
    PeerError when Maven fails."""
    return rocketmq_peer.build_project(PROJECT, jar(version), f"-Drocketmq.version={version}")


def maven_central_reachable(timeout: float = 10) -> bool:
    """True when Maven Central answers over HTTPS."""
    try:
        with urllib.request.urlopen(urllib.request.Request(MAVEN_CENTRAL, method="HEAD"),
                                    timeout=timeout):
            return True
    except OSError:
        return False


def built_or_skip(version: str) -> Path:
    """The harness jar of ``version`` (built when needed); the calling test is skipped, naming
    why, only when it is not built and Maven Central is unreachable."""
    try:
        return build(version)
    except PeerError:
        if not maven_central_reachable():
            pytest.skip(f"RocketMQ {version} broker harness not built and Maven Central unreachable")
        raise


def serve(store: str | os.PathLike[str], topics: list[str], version: str, sizes: list[str],
          home: Path, timeout: float = 300) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Start broker ``version`` on ``store`` (file sizes ``sizes``, as
    ``rocketmq_peer.size_args``) and pull every message of ``topics``: (the messages as the client
    returned them, in topic/queue/offset order; the closing ``"done"`` line with the times).
    The broker changes the store as a broker does (its recovery, config files). ``home`` is the
    JVM's user.home (RocketMQ's stray files). PeerError when the broker refuses (a topic it
    does not serve) or fails."""
    lines = _run(MAIN, version, home, timeout, store, *topics, *sizes)
    return lines[:-1], lines[-1]


@dataclass
class Produced:
    """What `ProduceStore` reports (see ProduceStore.java for each line's fields)."""

    #: one per message sent, in send order: topic, queue_id, queue_offset (None where the broker
    #: stores it elsewhere first: delay, timer, transaction), msg_id, keys, tags, body_b64, ...
    sent: list[dict[str, Any]]
    #: per queue of each declared topic: min_offset, max_offset in the store at the end
    queues: list[dict[str, Any]]
    #: the broker's ConsumerOffsetManager: group, topic, queue_id, committed, max_offset
    progress: list[dict[str, Any]]
    #: counts and times (startup_seconds, produce_seconds, shutdown_seconds)
    done: dict[str, Any]


def produce(store: str | os.PathLike[str], version: str, settings: dict[str, str], steps: list[str],
            home: Path, timeout: float = 300) -> Produced:
    """Start broker ``version`` on ``store`` (empty or existing) with the MessageStoreConfig
    ``settings`` (broker.conf names: ``storeType``, ``timerWheelEnable``, ``enabledAppendPropCRC``,
    ``storePathCommitLog`` with ``,`` between directories, ``readOnlyCommitLogStorePaths``, sizes),
    run ``steps`` (`ProduceStore` options: ``--topic NAME QUEUES ATTRS``, ``--send TOPIC N``,
    ``--batch``, ``--delay``, ``--timer``, ``--transaction``, ``--keyed``, ``--consume GROUP
    TOPIC``) and shut it down cleanly. PeerError when a setting is unknown to that version, a send
    fails or a message does not arrive."""
    sets = [a for k, v in settings.items() for a in ("--set", f"{k}={v}")]
    lines = _run(PRODUCE_MAIN, version, home, timeout, store, *sets, *steps)
    kinds: dict[str, list[dict[str, Any]]] = {"sent": [], "queue": [], "progress": []}
    for line in lines[:-1]:
        kinds[line["kind"]].append(line)
    return Produced(kinds["sent"], kinds["queue"], kinds["progress"], lines[-1])


def _run(main: str, version: str, home: Path, timeout: float, *args: object) -> list[dict[str, Any]]:
    """Run harness ``main`` of ``version``; its JSON lines, the last one ``"done"``. ``home`` is
    the JVM's user.home (RocketMQ's stray files)."""
    home.mkdir(parents=True, exist_ok=True)
    stdout = rocketmq_peer.java(build(version), main, *args, options=(f"-Duser.home={home}",),
                                timeout=timeout)
    lines = [json.loads(line) for line in stdout.splitlines() if line]
    if not lines or lines[-1].get("kind") != "done":
        raise PeerError(f"{main} {args[0]}: no closing line on stdout ({stdout[-200:]!r})")
    return lines
