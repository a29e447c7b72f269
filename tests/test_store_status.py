"""`rocketlake store-status` (mqadmin brokerStatus) on hand-built stores with known offsets and
store times: JSON field by field, the name: value lines, a store a writer holds, a crashed one,
a dispatch that is behind."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from store_helpers import kill_when_ready

from rocketlake.jobs import cli
from rocketlake.store import Message, MessageStore

REPO = Path(__file__).resolve().parents[1]
SMALL = {"mappedFileSizeCommitLog": 65536, "mappedFileSizeConsumeQueue": 600,
         "maxHashSlotNum": 16, "maxIndexNum": 40}
SETTINGS = [a for k, v in SMALL.items() for a in ("--set", f"{k}={v}")]
#: 2026-11-22T10:00:00.000Z and the store times of the five messages
T0 = 1795341600000
TIMES = [T0, T0 + 1000, T0 + 2000, T0 + 60_000, T0 + 3_600_000]


def _build(root: Path) -> list:
    """Five messages: three in orders (queues 0, 1, 0), two in payments, with keys."""
    with MessageStore(root, **SMALL) as ms:
        return ms.put_batch([
            Message("orders", b"a" * 10, queue_id=0, keys="k1", store_timestamp=TIMES[0]),
            Message("orders", b"b" * 20, queue_id=1, keys="k2", store_timestamp=TIMES[1]),
            Message("orders", b"c" * 30, queue_id=0, keys="k3", store_timestamp=TIMES[2]),
            Message("payments", b"d" * 40, keys="k4", store_timestamp=TIMES[3]),
            Message("payments", b"e" * 50, keys="k5", store_timestamp=TIMES[4])])


def _status(capsys: pytest.CaptureFixture[str], root: Path) -> dict:
    assert cli.main(["store-status", "--store", str(root), *SETTINGS, "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    return json.loads(out)


def test_json_of_a_cleanly_closed_store(tmp_path: Path, capsys) -> None:
    root = tmp_path / "s"
    put = _build(root)
    end = put[-1].commitlog_offset + put[-1].size
    assert put[0].commitlog_offset == 0 and end == sum(p.size for p in put)
    s = _status(capsys, root)
    assert s["store"] == str(root)
    assert (s["commitlog_min_offset"], s["commitlog_max_offset"], s["commitlog_bytes"]) == (0, end, end)
    assert s["commitlog_files"] == 1
    assert (s["first_store_timestamp"], s["first_store_time"]) == (T0, "2026-11-22T10:00:00.000Z")
    assert (s["last_store_timestamp"], s["last_store_time"]) == (T0 + 3_600_000, "2026-11-22T11:00:00.000Z")
    assert s["consume_queues"] == 3  # orders 0 and 1, payments 0
    assert (s["consume_queue_end_offset"], s["dispatch_behind_bytes"]) == (end, 0)
    assert (s["index_end_offset"], s["index_behind_bytes"]) == (end, 0)
    disk = {d["structure"]: d for d in s["disk"]}
    assert disk["commitlog"] == {"structure": "commitlog", "files": 1, "apparent_bytes": 65536,
                                 "allocated_bytes": (root / "commitlog" / ("0" * 20)).stat().st_blocks * 512}
    assert (disk["consumequeue"]["files"], disk["consumequeue"]["apparent_bytes"]) == (3, 3 * 600)
    assert disk["index"]["files"] == 1
    fs = shutil.disk_usage(root)
    assert s["disk_total_bytes"] == fs.total and abs(s["disk_free_bytes"] - fs.free) < 64 << 20
    assert (s["locked"], s["abort_present"], s["clean_shutdown"]) == (False, False, True)
    # the checkpoint holds the newest store time made durable in the CommitLog and the queues
    assert s["checkpoint_physic_timestamp"] == T0 + 3_600_000
    assert s["checkpoint_logics_time"] == "2026-11-22T11:00:00.000Z"
    assert s["confirm_offset"] is None


def test_lines_for_people(tmp_path: Path, capsys) -> None:
    root = tmp_path / "s"
    put = _build(root)
    end = put[-1].commitlog_offset + put[-1].size
    assert cli.main(["store-status", "--store", str(root), *SETTINGS]) == 0
    lines = dict(line.split("  ", 1) for line in capsys.readouterr().out.splitlines())
    shown = {k.strip(): v.strip() for k, v in lines.items()}
    assert shown["commitlog max offset"] == f"{end:,}"
    assert shown["commitlog data"] == f"{end:,} bytes in 1 file"
    assert shown["first store time"] == "2026-11-22T10:00:00.000Z"
    assert shown["last store time"] == "2026-11-22T11:00:00.000Z"
    assert shown["dispatch behind"] == f"0 bytes (ConsumeQueues end at {end:,})"
    assert shown["held by a writer"] == "no" and shown["last shutdown"] == "clean (no abort file)"
    assert shown["disk commitlog"].startswith("1 file, 65,536 bytes apparent")


def test_dispatch_behind_counts_the_records_no_queue_holds(tmp_path: Path, capsys) -> None:
    """payments' ConsumeQueue and the index gone (a dispatch that stopped after orders): behind
    by the two payments records."""
    root = tmp_path / "s"
    put = _build(root)
    shutil.rmtree(root / "consumequeue" / "payments")
    shutil.rmtree(root / "index")
    s = _status(capsys, root)
    assert s["consume_queue_end_offset"] == put[2].commitlog_offset + put[2].size
    assert s["dispatch_behind_bytes"] == put[3].size + put[4].size
    assert (s["index_end_offset"], s["index_behind_bytes"]) == (None, s["commitlog_max_offset"])


def test_a_crashed_writer_is_not_a_clean_shutdown(tmp_path: Path, capsys) -> None:
    root = tmp_path / "s"
    script = ("import time\nfrom rocketlake.store import Message, MessageStore\n"
              f"ms = MessageStore({str(root)!r}, **{SMALL!r})\n"
              f"ms.put(Message('orders', b'x', store_timestamp={T0}))\n"
              "print('put', flush=True)\ntime.sleep(60)\n")
    kill_when_ready([script], "put")
    s = _status(capsys, root)
    assert (s["locked"], s["abort_present"], s["clean_shutdown"]) == (False, True, False)
    assert s["last_store_timestamp"] == T0
    assert cli.main(["store-status", "--store", str(root), *SETTINGS]) == 0
    assert "NOT clean: abort file present" in capsys.readouterr().out


#: opens a writer on the store and holds it until stdin closes
_WRITER = """
import sys
from rocketlake.store import MessageStore
with MessageStore(sys.argv[1], mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=600,
                  maxHashSlotNum=16, maxIndexNum=40):
    print("open", flush=True)
    sys.stdin.read()
"""


def test_answers_while_a_writer_holds_the_store(tmp_path: Path, capsys) -> None:
    root = tmp_path / "s"
    put = _build(root)
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)]))}
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(root)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "open"
        s = _status(capsys, root)
        assert (s["locked"], s["abort_present"], s["clean_shutdown"]) == (True, True, None)
        assert s["commitlog_max_offset"] == put[-1].commitlog_offset + put[-1].size
    finally:
        writer.communicate("", timeout=60)
    assert writer.returncode == 0
