"""Single-writer guard: an exclusive file lock on `lock`, and the `abort` crash marker."""
from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from rocketlake.store.errors import StoreLockedError
from rocketlake.store.mapped_file import disk_error


class StoreLock:
    """Holds `<root>/lock` with an exclusive, non-blocking flock for the writer's lifetime."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / "lock"
        self._fd = -1

    def acquire(self, patience: float = 0.5) -> None:
        """Take the lock, or raise StoreLockedError. A conflict is retried for ``patience``
        seconds: ``is_locked`` in another process holds a shared lock for an instant, and a
        writer opening at that instant must not fail; a live writer holds it for longer."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + patience
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(0.005)
                    continue
                os.close(fd)
                raise StoreLockedError(f"{self.path.parent}: the store is held by another writer "
                                       f"(lock file {self.path.name} is locked)") from None
        if os.fstat(fd).st_size != 4:
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, b"lock", 0)
            except OSError as e:
                os.close(fd)
                raise disk_error(e, self.path, "writing the lock file") from None
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


def is_locked(root: Path) -> bool:
    """True when a live writer holds the store at ``root``.

    flock has no query, so this probes with a shared lock held for an instant: it conflicts
    only with the writer's exclusive lock (never with another ``is_locked``), and a writer
    opening during the probe retries (``StoreLock.acquire``)."""
    path = Path(root) / "lock"
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
