"""Single-writer guard: exclusive locks on `<root>/lock`.

A writer holds two locks on the file, because Linux keeps two independent kinds:
- an exclusive ``flock``, which rocketlake writers and ``is_locked`` use among themselves;
- a POSIX record lock on byte 0 (``fcntl``), the lock a RocketMQ broker takes
  (``DefaultMessageStore.start``: ``FileChannel.tryLock(0, 1, false)``, which the JDK implements
  with ``fcntl(F_SETLK)`` on Linux). Holding it keeps a broker from starting on a store we write,
  and failing to get it means a broker is writing the store.
POSIX locks belong to the process and are dropped when the process closes *any* descriptor of the
file, so this module never opens the lock file of a store its own process holds.
"""
from __future__ import annotations

import fcntl
import os
import struct
import time
from pathlib import Path

from rocketlake.store.errors import StoreLockedError
from rocketlake.store.safe_files import disk_error, open_file

#: Lock files this process holds (see the module docstring: never open them again here).
_HELD: set[Path] = set()
#: ``struct flock`` on Linux x86_64 / aarch64: l_type, l_whence, l_start, l_len, l_pid.
_FLOCK = struct.Struct("hhqqi")


class StoreLock:
    """Holds `<root>/lock` for the writer's lifetime: an exclusive flock (other rocketlake
    writers) and a POSIX lock on byte 0 (a RocketMQ broker)."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / "lock"
        self._fd = -1

    def acquire(self, patience: float = 0.5) -> None:
        """Take the lock, or raise StoreLockedError. A conflict is retried for ``patience``
        seconds: ``is_locked`` in another process holds a shared lock for an instant, and a
        writer opening at that instant must not fail; a live writer holds it for longer. A link
        at `lock` is refused (LinkedFileError), never written through."""
        fd = open_file(self.path, os.O_RDWR | os.O_CREAT)
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
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        except OSError:  # EAGAIN / EACCES: another process holds a POSIX lock on byte 0
            os.close(fd)
            raise StoreLockedError(f"{self.path.parent}: the store is held by another process "
                                   f"(a POSIX lock on {self.path.name}, as a running RocketMQ "
                                   f"broker takes); stop it first") from None
        if os.fstat(fd).st_size != 4:
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, b"lock", 0)
            except OSError as e:
                os.close(fd)
                raise disk_error(e, self.path, "writing the lock file") from None
        self._fd = fd
        _HELD.add(self.path.resolve())

    def release(self) -> None:
        if self._fd >= 0:
            _HELD.discard(self.path.resolve())
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)  # also drops the POSIX lock
            self._fd = -1


def is_locked(root: Path) -> bool:
    """True when a live writer (this process, another rocketlake writer or a RocketMQ broker)
    holds the store at ``root``.

    flock has no query, so this probes with a shared flock held for an instant: it conflicts
    only with a writer's exclusive flock (never with another ``is_locked``), and a writer
    opening during the probe retries (``StoreLock.acquire``). A broker's POSIX lock is queried
    with ``F_GETLK``, which takes nothing."""
    path = Path(root) / "lock"
    if path.resolve() in _HELD:
        return True
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        query = fcntl.fcntl(fd, fcntl.F_GETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0))
        lock_type: int = _FLOCK.unpack(query)[0]
        return lock_type != fcntl.F_UNLCK
    finally:
        os.close(fd)
