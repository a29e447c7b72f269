"""The writer lock excludes a RocketMQ broker both ways.

A broker locks byte 0 of `<store>/lock` with `FileChannel.tryLock(0, 1, false)`
(`DefaultMessageStore.start`); `tests/java/HoldStoreLock.java` makes that same JDK call in a real
JVM. While it holds the lock no rocketlake writer opens, and while a rocketlake writer is open the
JVM cannot take it.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from rocketlake.store import Message, MessageStore, StoreLockedError
from rocketlake.store.lockfile import is_locked

HOLDER = Path(__file__).parent / "java" / "HoldStoreLock.java"
SMALL = {"mappedFileSizeCommitLog": 64 * 1024, "mappedFileSizeConsumeQueue": 600,
         "maxHashSlotNum": 64, "maxIndexNum": 200}

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK (java)")


def hold(lock_file: Path) -> tuple[subprocess.Popen, str]:
    """Start a JVM taking the broker's lock; return it and what it printed (LOCKED / BUSY)."""
    jvm = subprocess.Popen(["java", str(HOLDER), str(lock_file)], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    return jvm, jvm.stdout.readline().strip()


def test_a_broker_holding_the_store_keeps_writers_out(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with MessageStore(root, **SMALL) as ms:
        ms.put(Message("orders", b"before"))
    jvm, state = hold(root / "lock")
    try:
        assert state == "LOCKED"
        assert is_locked(root)
        with pytest.raises(StoreLockedError, match="RocketMQ broker"):
            MessageStore(root, **SMALL)
    finally:
        jvm.communicate("")
    with MessageStore(root, **SMALL) as ms:  # the broker stopped: the store opens again
        assert ms.put(Message("orders", b"after")).queue_offset == 1


def test_a_writer_holding_the_store_keeps_a_broker_out(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with MessageStore(root, **SMALL):
        assert is_locked(root)  # asked from the writer's own process: the lock stays held
        jvm, state = hold(root / "lock")
        jvm.communicate("")
        assert state == "BUSY"
    assert not is_locked(root)
    jvm, state = hold(root / "lock")
    jvm.communicate("")
    assert state == "LOCKED"
