"""RocketMQ 4.9.8's own store, driven in a JVM: the test oracle and the benchmark peer.

`tests/java/peer/` is a one-class Maven project (`rocketlake.peer.RocketMQPeer`) that runs
`org.apache.rocketmq:rocketmq-store:4.9.8`'s ``DefaultMessageStore`` in-process. :func:`build`
compiles it once (Maven Central on the first build); :func:`run` starts one JVM for one mode and
returns the one JSON line it prints. Modes (see RocketMQPeer.java):

- ``write STORE N QUEUES BODY_BYTES``: message i goes to topic BenchTopic, queue i % QUEUES, tag
  TagA, key ``k<i>``, body ``m<i>`` padded with '.' to BODY_BYTES bytes (:func:`write_body`);
- ``recover STORE``: open (load + start), wait until every record is dispatched, shut down;
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
    sources = [PEER / "pom.xml", *PEER.joinpath("src").rglob("*.java")]
    deps = TARGET / "dependency"
    if (JAR.exists() and deps.is_dir()
            and JAR.stat().st_mtime > max(p.stat().st_mtime for p in sources)):
        return JAR
    proc = subprocess.run(["mvn", "-q", "-f", str(PEER / "pom.xml"), "package",
                           "dependency:copy-dependencies"],
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0 or not JAR.exists():
        raise PeerError(f"mvn package of {PEER} failed (exit {proc.returncode}):\n"
                        f"{_tail(proc.stdout + proc.stderr)}")
    return JAR


def size_args(commitlog: int, cq: int, index_slots: int, index_entries: int) -> list[str]:
    """The peer's file size options (mappedFileSizeCommitLog, mappedFileSizeConsumeQueue,
    maxHashSlotNum, maxIndexNum)."""
    return ["--commitlog-size", str(commitlog), "--cq-size", str(cq),
            "--index-slots", str(index_slots), "--index-entries", str(index_entries)]


def run(mode: str, store: str | os.PathLike[str], *args: object, timeout: float = 600) -> dict[str, Any]:
    """Run one peer mode on ``store`` and return its JSON result; PeerError on failure."""
    build()
    classpath = os.pathsep.join([str(JAR), str(TARGET / "dependency" / "*")])
    cmd = ["java", *ADD_OPENS, *DISK_RATIOS, "-cp", classpath, MAIN, mode, str(store),
           *(str(a) for a in args)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr or ""
        raise PeerError(f"peer {mode} {store}: no answer in {timeout} s:\n{_tail(err)}") from None
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or len(lines) != 1:
        raise PeerError(f"peer {mode} {store} failed (exit {proc.returncode}, stdout "
                        f"{proc.stdout[:200]!r}):\n{_tail(proc.stderr)}")
    result: dict[str, Any] = json.loads(lines[0])
    return result


def write_body(i: int, body_bytes: int) -> bytes:
    """The body the peer's write mode gives message ``i``: ``m<i>`` padded with '.'."""
    return f"m{i}".encode().ljust(body_bytes, b".")[:body_bytes]


def read_served(path: Path) -> list[dict[str, Any]]:
    """The JSON Lines ``serve --out`` wrote."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
