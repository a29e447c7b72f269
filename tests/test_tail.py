"""`rocketlake tail`: the newest messages of a topic in CommitLog order, and ``--follow`` against a
real second process appending through the store library (``MessageStore.put``), the tail in a
third process whose stdout is read line by line."""
from __future__ import annotations

import base64
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rocketlake.jobs import cli
from rocketlake.store import Message, MessageStore
from rocketlake.store.codec import TRANSACTION_PREPARED

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ,
       "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)]))}
#: small CommitLog files, so following crosses from one file into the next
SIZES = {"mappedFileSizeCommitLog": 65536, "mappedFileSizeConsumeQueue": 600}
#: puts "<first> <count>" messages m<first>... of topic t (queue i % 2), each followed by one of
#: topic other, per stdin line; says "put" after each line, "open" first
_WRITER = """
import sys
from rocketlake.store import Message, MessageStore
with MessageStore(sys.argv[1], mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=600) as ms:
    print("open", flush=True)
    for line in sys.stdin:
        first, count = map(int, line.split())
        for i in range(first, first + count):
            ms.put(Message("t", f"m{i}".encode() + b"." * 900, queue_id=i % 2))
            ms.put(Message("other", b"x"))
        print("put", flush=True)
"""


def _store(root: Path, count: int) -> Path:
    with MessageStore(root, **SIZES) as ms:
        for i in range(count):
            ms.put(Message("t", f"m{i}".encode() + b"." * 900, queue_id=i % 2))
            ms.put(Message("other", b"x"))
    return root


def _bodies(out: str) -> list[str]:
    """The m<i> / a<i> names at the start of the JSON lines' bodies."""
    return [base64.b64decode(json.loads(line)["body_b64"])[:8].rstrip(b".").decode()
            for line in out.splitlines()]


def test_tail_prints_the_newest_in_commitlog_order(tmp_path: Path, capsys) -> None:
    root = tmp_path / "s"
    with MessageStore(root, **SIZES) as ms:
        for i, q in enumerate([0, 1, 1, 0, 1]):
            ms.put(Message("t", f"a{i}".encode(), queue_id=q))
        ms.put(Message("t", b"p", sys_flag=TRANSACTION_PREPARED))  # no ConsumeQueue unit: not served
    cases = {("-n", "3"): ["a2", "a3", "a4"], ("-n", "0"): [], ("-n", "9"): ["a0", "a1", "a2", "a3", "a4"],
             ("--queue", "1", "-n", "2"): ["a2", "a4"], (): ["a0", "a1", "a2", "a3", "a4"]}
    for argv, want in cases.items():
        assert cli.main(["tail", "--store", str(root), "--topic", "t", *argv]) == 0
        assert _bodies(capsys.readouterr().out) == want, argv
    assert cli.main(["tail", "--store", str(root), "--topic", "nosuch"]) == 2
    assert f"{root}: no topic 'nosuch': its topics are t" in capsys.readouterr().err


class _Lines:
    """A process's stdout, line by line, with a timeout (a thread reads it)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: queue.Queue[str | None] = queue.Queue()
        assert proc.stdout is not None
        stream = proc.stdout
        threading.Thread(target=lambda: [*map(self.lines.put, stream), self.lines.put(None)],
                         daemon=True).start()

    def take(self, n: int, timeout: float = 60) -> list[str]:
        got = [self.lines.get(timeout=timeout) for _ in range(n)]
        assert None not in got, got
        return [line for line in got if line is not None]


def _start(argv: list[str], **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.PIPE, text=True, env=ENV, **kw)  # type: ignore[call-overload]


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_follow_prints_what_another_process_appends(tmp_path: Path, stop: signal.Signals) -> None:
    root = _store(tmp_path / "s", 5)
    tail = _start(["-m", "rocketlake.jobs.cli", "tail", "--store", str(root), "--topic", "t",
                   "-n", "2", "--follow", "--interval", "0.05"])
    writer = _start(["-c", _WRITER, str(root)])
    try:
        shown = _Lines(tail)
        assert _bodies("".join(shown.take(2))) == ["m3", "m4"]
        assert writer.stdout is not None and writer.stdout.readline() == "open\n"
        writer.stdin.write("5 100\n")  # type: ignore[union-attr]
        writer.stdin.flush()  # type: ignore[union-attr]
        assert writer.stdout.readline() == "put\n"
        lines = shown.take(100)
        assert _bodies("".join(lines)) == [f"m{i}" for i in range(5, 105)]
        # 105 records of ~1 KB: the CommitLog rolled into its next 64 KiB file, and was followed
        assert json.loads(lines[0])["commitlog_offset"] < 65536 < json.loads(lines[-1])["commitlog_offset"]
        assert len(list((root / "commitlog").iterdir())) == 2
        tail.send_signal(stop)
        assert tail.wait(timeout=60) == 0
        err = tail.stderr.read()  # type: ignore[union-attr]
        assert "stopped; 102 messages shown" in err and "Traceback" not in err, err
    finally:
        tail.kill()
        writer.communicate("", timeout=60)
    assert writer.returncode == 0


def test_follow_into_a_closed_pipe_is_a_quiet_exit(tmp_path: Path) -> None:
    root = _store(tmp_path / "s", 3)
    tail = _start(["-m", "rocketlake.jobs.cli", "tail", "--store", str(root), "--topic", "t",
                   "-n", "1", "--follow", "--interval", "0.05"])
    writer = _start(["-c", _WRITER, str(root)])
    try:
        assert tail.stdout is not None and _bodies(tail.stdout.readline()) == ["m2"]
        tail.stdout.close()  # the reader goes away (`| head -1`)
        assert writer.stdout is not None and writer.stdout.readline() == "open\n"
        writer.stdin.write("3 50\n")  # type: ignore[union-attr]
        writer.stdin.flush()  # type: ignore[union-attr]
        assert tail.wait(timeout=60) == 0
        assert tail.stderr.read() == ""  # type: ignore[union-attr]
    finally:
        tail.kill()
        writer.communicate("", timeout=60)
    assert writer.returncode == 0
