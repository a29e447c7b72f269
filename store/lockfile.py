"""Single-writer guard: an exclusive file lock on `lock`, and the `abort` crash marker."""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

from store.mapped_file import disk_error


class StoreLockedError(RuntimeError):
    """Another process (or another MessageStore) holds the store's writer lock."""


class StoreLock:
    """Holds `<root>/lock` with an exclusive, non-blocking flock for the writer's lifetime."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / "lock"
        self._fd = -1

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
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
    """True when a live writer holds the store at ``root``."""
    path = Path(root) / "lock"
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
