"""RocketMQ 4.9.8's own store, driven in a JVM: the test oracle and the benchmark peer.

`tests/java/peer/` is a one-class Maven project (`rocketlake.peer.RocketMQPeer`) that runs
`org.apache.rocketmq:rocketmq-store:4.9.8`'s ``DefaultMessageStore`` in-process. :func:`build`
compiles it once (Maven Central on the first build); :func:`run` starts one JVM for one mode and
returns the one JSON line it prints. Modes (see RocketMQPeer.java):

- ``write STORE N QUEUES BODY_BYTES [TOPICS] [--halt]``: message i goes to queue i % QUEUES of
  topic BenchTopic (TOPICS 1, the default) or ``BenchTopic<(i // QUEUES) % TOPICS>``
  (:func:`write_topic`), tag TagA, key ``k<i>``, body ``m<i>`` padded with '.' to BODY_BYTES bytes
  (:func:`write_body`); ``--halt``: the JVM halts once every record is dispatched, without
  shutting the store down, which leaves the store as a crash does (``abort`` present, the
  checkpoint as last flushed);
- ``recover STORE [--phases]``: open (load + start), wait until every record is dispatched, shut
  down; the result also has the phases (``load_seconds``, of it ``create_seconds``,
  ``start_seconds``, ``await_seconds``) and ``ready_epoch_ms``, the wall clock when every record
  was dispatched; ``--phases`` runs load()'s own steps one by one instead of load() and gives
  each one's seconds in ``load_steps``;
- ``serve STORE --out FILE [--query TOPIC KEY]...``: open as recover, then write JSON Lines to
  FILE: per queue a ``"kind": "queue"`` line (min/max offsets) followed by a ``"message"`` line per
  message getMessage serves (a ``"gap"`` line for any other status), then a ``"query"`` line per
  ``--query`` with queryMessage's messages.

Every mode takes the file sizes ``--commitlog-size``, ``--cq-size``, ``--index-slots``,
``--index-entries`` (:func:`size_args`). Times are measured inside the JVM (JVM start excluded).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

PEER = Path(__file__).resolve().parent / "java" / "peer"
TARGET = PEER / "target"
JAR = TARGET / "rocketmq-peer-1.0.jar"
MAIN = "rocketlake.peer.RocketMQPeer"
#: RocketMQ unmaps files through JDK internals (UtilAll.cleanBuffer / MappedFile.clean)
ADD_OPENS = ["--add-opens", "java.base/java.nio=ALL-UNNAMED",
             "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
             "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED"]
#: DefaultMessageStore refuses puts on a disk fuller than these ratios (default 0.90 / 0.85)
DISK_RATIOS = ["-Drocketmq.broker.diskSpaceWarningLevelRatio=0.99",
               "-Drocketmq.broker.diskSpaceCleanForciblyRatio=0.99"]


class PeerError(RuntimeError):
    """The peer (Maven build or JVM run) failed; the message ends with its stderr tail."""


def available() -> bool:
    """True when a JDK and Maven are on PATH."""
    return shutil.which("java") is not None and shutil.which("mvn") is not None


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def build() -> Path:
    """Compile the peer (skipped when the jar is newer than the pom and the sources); the jar."""
    return build_project(PEER, JAR)


def build_project(project: Path, jar: Path, *options: str) -> Path:
    """``mvn package dependency:copy-dependencies`` of the Maven project ``project`` (with
    ``options``, e.g. ``-Dname=value``) unless ``jar`` is newer than its pom and sources and its
    dependencies are copied beside it; offline first (everything already in the local Maven
    repository), then online. The jar; PeerError when both fail."""
    sources = [project / "pom.xml", *(p for p in project.joinpath("src").rglob("*") if p.is_file())]
    deps = jar.parent / "dependency"
    if (jar.exists() and deps.is_dir()
            and jar.stat().st_mtime > max(p.stat().st_mtime for p in sources)):
        return jar
    for offline in (["-o"], []):
        proc = subprocess.run(["mvn", "-q", *offline, "-f", str(project / "pom.xml"), *options,
                               "package", "dependency:copy-dependencies"],
                              capture_output=True, text=True, timeout=1800)
        if proc.returncode == 0 and jar.exists():
            return jar
    raise PeerError(f"mvn package of {project} failed (exit {proc.returncode}):\n"
                    f"{_tail(proc.stdout + proc.stderr)}")


def size_args(commitlog: int, cq: int, index_slots: int, index_entries: int) -> list[str]:
    """The peer's file size options (mappedFileSizeCommitLog, mappedFileSizeConsumeQueue,
    maxHashSlotNum, maxIndexNum)."""
    return ["--commitlog-size", str(commitlog), "--cq-size", str(cq),
            "--index-slots", str(index_slots), "--index-entries", str(index_entries)]


def run(mode: str, store: str | os.PathLike[str], *args: object, timeout: float = 600) -> dict[str, Any]:
    """Run one peer mode on ``store`` and return its JSON result; PeerError on failure."""
    stdout = java(build(), MAIN, mode, store, *args, timeout=timeout)
    lines = stdout.splitlines()
    if len(lines) != 1:
        raise PeerError(f"peer {mode} {store}: expected one line on stdout, got {stdout[:200]!r}")
    result: dict[str, Any] = json.loads(lines[0])
    return result


def java(jar: Path, main: str, *args: object, options: tuple[str, ...] = (),
         timeout: float = 600) -> str:
    """Run ``main`` of ``jar`` (its dependencies copied beside it) with ``args`` in a JVM set up
    for RocketMQ (ADD_OPENS, DISK_RATIOS, then ``options``); its stdout. PeerError, with the
    stderr tail, on a non-zero exit or no answer in ``timeout`` seconds."""
    classpath = os.pathsep.join([str(jar), str(jar.parent / "dependency" / "*")])
    cmd = ["java", *ADD_OPENS, *DISK_RATIOS, *options, "-cp", classpath, main, *(str(a) for a in args)]
    what = f"{main} {' '.join(str(a) for a in args[:2])}"
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr or ""
        raise PeerError(f"{what}: no answer in {timeout} s:\n{_tail(err)}") from None
    if proc.returncode != 0:
        raise PeerError(f"{what} failed (exit {proc.returncode}, stdout {proc.stdout[:200]!r}):\n"
                        f"{_tail(proc.stderr)}")
    return proc.stdout


def write_topic(i: int, queues: int, topics: int) -> str:
    """The topic the peer's write mode gives message ``i``."""
    return "BenchTopic" if topics == 1 else f"BenchTopic{(i // queues) % topics}"


def write_body(i: int, body_bytes: int) -> bytes:
    """The body the peer's write mode gives message ``i``: ``m<i>`` padded with '.'."""
    return f"m{i}".encode().ljust(body_bytes, b".")[:body_bytes]


def read_served(path: Path) -> list[dict[str, Any]]:
    """The JSON Lines ``serve --out`` wrote."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
