"""Real RocketMQ brokers serving a store: the proof that a broker serves what rocketlake wrote.

`tests/java/broker/` is a one-class Maven project (`rocketlake.broker.ServeStore`) that starts
a name server and a broker of `org.apache.rocketmq` 4.9.7 or 5.3.3 (Maven Central) in one JVM on
loopback, on a store directory, and pulls every message of every queue of the given topics with
a real client (``DefaultMQPullConsumer``, from offset 0). :func:`build` compiles it once per
version (``-Drocketmq.version``, into ``target/<version>/``; offline from the local Maven
repository when it can); :func:`serve` runs it. Build and run go through `tests/rocketmq_peer.py`.
"""
from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path
from typing import Any

import rocketmq_peer
from rocketmq_peer import PeerError

PROJECT = Path(__file__).resolve().parent / "java" / "broker"
MAIN = "rocketlake.broker.ServeStore"
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


def serve(store: str | os.PathLike[str], topics: list[str], version: str, sizes: list[str],
          home: Path, timeout: float = 300) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Start broker ``version`` on ``store`` (file sizes ``sizes``, as
    ``rocketmq_peer.size_args``) and pull every message of ``topics``: (the messages as the client
    returned them, in topic/queue/offset order; the closing ``"done"`` line with the times).
    The broker changes the store as a broker does (its recovery, config files). ``home`` is the
    JVM's user.home (RocketMQ's stray files). PeerError when the broker refuses (a topic it
    does not serve) or fails."""
    home.mkdir(parents=True, exist_ok=True)
    stdout = rocketmq_peer.java(build(version), MAIN, store, *topics, *sizes,
                                options=(f"-Duser.home={home}",), timeout=timeout)
    lines = [json.loads(line) for line in stdout.splitlines() if line]
    if not lines or lines[-1].get("kind") != "done":
        raise PeerError(f"{MAIN} {store}: no closing line on stdout ({stdout[-200:]!r})")
    return lines[:-1], lines[-1]
