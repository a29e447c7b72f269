"""A full disk: a put that needs a new file fails with a clear error, never SIGBUS, never loses keys.

Each test mounts a 4 MiB tmpfs, opens a store on it, fills the rest of the file system with a
filler file, and puts messages in a writer process until a put fails because a new CommitLog,
ConsumeQueue or index file cannot be created. The writer must exit normally (not killed by SIGBUS),
the error must name the file and say the disk is full, the failed put must leave nothing behind,
every acknowledged message must read back (by queue, by offset and by key) after reopening on the
still-full disk, and once the filler is deleted the store must take puts again.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rocketlake.store import Message, MessageStore, StoreFullError

REPO = Path(__file__).resolve().parents[2]
TOPIC = "T"
# 1 MiB CommitLog files; a ConsumeQueue file holds 6000 units, an index file 4999 keys (its first
# entry is never used): which file fills first depends on the messages the writer puts.
SETTINGS = {"mappedFileSizeCommitLog": 1 << 20, "mappedFileSizeConsumeQueue": 20 * 6000,
            "maxHashSlotNum": 64, "maxIndexNum": 5000}

WRITER = r"""
import json, os, sys
from rocketlake.store import Message, MessageStore, StoreFullError
root, filler, body_size, with_keys, settings = (sys.argv[1], sys.argv[2], int(sys.argv[3]),
                                                sys.argv[4] == "1", json.loads(sys.argv[5]))
ms = MessageStore(root, **settings)

def msg(i):
    return Message("T", bytes([i % 251]) * body_size, keys=f"k{i}" if with_keys else None)

acks = []
def put(i):
    r = ms.put(msg(i))
    acks.append(f"ACK {i} {r.commitlog_offset} {r.size} {r.queue_offset}")

put(0)
ms.flush()  # the checkpoint exists before the disk is full
fd = os.open(filler, os.O_WRONLY | os.O_CREAT)  # fill the file system: write() says ENOSPC
try:
    while True:
        os.write(fd, bytes(4096))
except OSError:
    os.close(fd)
i = 1
while True:
    try:
        put(i)
    except StoreFullError as e:
        before = (ms.commitlog.max_offset, ms.max_offset("T", 0))
        try:
            put(i)  # the disk is still full: fails the same way
        except StoreFullError as again:
            assert again.errno == e.errno, (again, e)
        after = (ms.commitlog.max_offset, ms.max_offset("T", 0))
        print(f"ERR {e.errno} {e}")
        print(f"UNCHANGED {before == after} {before} {after}")
        break
    i += 1
ms.close()
print("\n".join(acks))
print("CLOSED")
"""


def run_writer(root: Path, filler: Path, body_size: int,
               with_keys: bool) -> tuple[str, list[tuple[int, int, int, int]]]:
    """Run the writer until a put fails; return its error line and its acknowledged puts
    (message number, commitlog offset, size, queue offset)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", WRITER, str(root), str(filler), str(body_size),
                           "1" if with_keys else "0", json.dumps(SETTINGS)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode != -signal.SIGBUS, f"writer died of SIGBUS\n{proc.stderr}"
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "CLOSED", proc.stdout[-2000:]
    err = next(line for line in lines if line.startswith("ERR "))
    unchanged = next(line for line in lines if line.startswith("UNCHANGED "))
    assert unchanged.startswith("UNCHANGED True"), unchanged  # the failed puts wrote nothing
    acks = [tuple(map(int, line.split()[1:])) for line in lines if line.startswith("ACK ")]
    return err, acks


def check_acked(ms: MessageStore, acks: list[tuple[int, int, int, int]], body_size: int,
                with_keys: bool) -> None:
    """Every acknowledged message reads back by queue offset, by CommitLog offset and by key."""
    assert ms.max_offset(TOPIC, 0) == len(acks)
    for i, offset, size, qoff in acks:
        assert qoff == i
        body = bytes([i % 251]) * body_size
        got = ms.get(TOPIC, 0, qoff, 1)
        assert [m.record.commitlog_offset for m in got.messages] == [offset]
        rec = ms.read(offset)
        assert (rec.body, rec.size, rec.queue_offset) == (body, size, qoff)
        if with_keys:
            assert [r.commitlog_offset for r in ms.query(TOPIC, f"k{i}")] == [offset]


@pytest.mark.parametrize("body_size, with_keys, full_dir, file_size", [
    # ~950 records of 1.1 KB fill a CommitLog file first
    (1000, True, "commitlog", SETTINGS["mappedFileSizeCommitLog"]),
    # 4999 keyed records of ~100 bytes fill the index file first (~0.5 MiB of CommitLog)
    (10, True, "index", 40 + 4 * SETTINGS["maxHashSlotNum"] + 20 * SETTINGS["maxIndexNum"]),
    # without keys, 6000 records of ~90 bytes fill the ConsumeQueue file first
    (10, False, "consumequeue/T/0", SETTINGS["mappedFileSizeConsumeQueue"]),
])
def test_full_disk_fails_the_put_and_loses_nothing(small_fs: Path, body_size: int, with_keys: bool,
                                                   full_dir: str, file_size: int) -> None:
    root, filler = small_fs / "store", small_fs / "filler"
    err, acks = run_writer(root, filler, body_size, with_keys)

    # The error names the file that could not be created, its size, and that the disk is full.
    assert err.startswith(f"ERR 28 [Errno 28] {root / full_dir}/"), err  # ENOSPC
    assert f": no space left on device creating a {file_size}-byte file (" in err, err
    assert len(acks) > 100

    # Reopen on the still-full disk: read-only, then for writing; everything acknowledged is there.
    with MessageStore(root, read_only=True, **SETTINGS) as ro:
        assert ro.max_offset(TOPIC, 0) == len(acks)
    n = len(acks)
    with MessageStore(root, **SETTINGS) as ms:
        check_acked(ms, acks, body_size, with_keys)
        end = ms.commitlog.max_offset
        with pytest.raises(StoreFullError):  # still full: refused, nothing written
            ms.put(Message(TOPIC, bytes([n % 251]) * body_size, keys=f"k{n}" if with_keys else None))
        assert (ms.commitlog.max_offset, ms.max_offset(TOPIC, 0)) == (end, n)

    # Space freed: the store takes puts again, and they read back after a reopen.
    filler.unlink()
    with MessageStore(root, **SETTINGS) as ms:
        for i in range(n, n + 20):
            r = ms.put(Message(TOPIC, bytes([i % 251]) * body_size, keys=f"k{i}" if with_keys else None))
            acks.append((i, r.commitlog_offset, r.size, r.queue_offset))
    with MessageStore(root, **SETTINGS) as ms:
        check_acked(ms, acks, body_size, with_keys)


def test_new_store_on_a_full_disk_is_a_clear_error_and_opens_once_space_is_freed(small_fs: Path) -> None:
    root, filler = small_fs / "store", small_fs / "filler"

    def fill(leave: int) -> None:
        """Fill the file system but ``leave`` bytes (write() says ENOSPC: it cannot SIGBUS)."""
        filler.unlink(missing_ok=True)
        st = os.statvfs(small_fs)
        filler.write_bytes(bytes(st.f_bavail * st.f_frsize - leave))

    fill(0)
    with pytest.raises(StoreFullError, match=re.escape(
            f"[Errno 28] {root / 'lock'}: no space left on device writing the lock file")):
        MessageStore(root, **SETTINGS)

    fill(4096)  # room for the lock file, not for the checkpoint nor any store file
    ms = MessageStore(root, **SETTINGS)
    # a new queue's topic is declared in config/topics.json before any of its files is made
    with pytest.raises(StoreFullError, match=re.escape(
            f"{root / 'config' / 'topics.json'}: no space left on device writing its replacement")):
        ms.put(Message(TOPIC, b"m0", keys="k0"))
    with pytest.raises(StoreFullError, match=re.escape(
            f"{root / 'checkpoint'}: no space left on device creating a 4096-byte file")):
        ms.close()  # the final checkpoint cannot be written: the lock is released all the same
    assert (root / "abort").exists() and not (root / "checkpoint").exists()

    filler.unlink()
    with MessageStore(root, **SETTINGS) as ms:  # abnormal recovery: nothing was stored
        assert ms.recovery.abnormal and ms.commitlog.max_offset == 0
        r = ms.put(Message(TOPIC, b"m0", keys="k0"))
    with MessageStore(root, **SETTINGS) as ms:
        assert [rec.body for rec in ms.query(TOPIC, "k0")] == [b"m0"]
        assert ms.read(r.commitlog_offset).body == b"m0"


def test_files_created_ahead_of_their_units_survive_a_crash(tmp_path: Path) -> None:
    """A put creates the next ConsumeQueue file before the units queued for the current one are
    written; a crash then leaves a partly written file followed by an empty one, and recovery
    must neither take the unwritten units for written ones (zeros) nor lose them."""
    root = tmp_path / "s"
    settings = {"mappedFileSizeConsumeQueue": 200, "maxHashSlotNum": 8, "maxIndexNum": 5}  # 10 units, 4 keys
    crash = ("import os, sys, json\nfrom store import Message, MessageStore\n"
             "ms = MessageStore(sys.argv[1], flushDiskType='SYNC_FLUSH', **json.loads(sys.argv[2]))\n"
             "for i in range(11):\n    ms.put(Message('T', b'm%d' % i, keys='k%d' % i))\n"
             "os._exit(0)  # no close: the queued units were never applied\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", crash, str(root), json.dumps(settings)], check=True, env=env)
    assert sorted(p.name for p in (root / "consumequeue" / "T" / "0").iterdir()) == [
        "00000000000000000000", "00000000000000000200"]
    with MessageStore(root, **settings) as ms:
        assert ms.recovery.abnormal and ms.max_offset("T", 0) == 11
        bodies = [m.record.body for q in (0, 10) for m in ms.get("T", 0, q, 32).messages]  # per file
        assert bodies == [b"m%d" % i for i in range(11)]
        assert [r.body for r in ms.query("T", "k10")] == [b"m10"]
