"""The 4096-byte checkpoint file: physic, logics and index flush timestamps (docs/FORMAT.md §8)."""
from __future__ import annotations

import os
from pathlib import Path

from rocketlake.store.codec import CHECKPOINT, CHECKPOINT_FILE_SIZE
from rocketlake.store.errors import StoreFormatError
from rocketlake.store.mapped_file import create_file, disk_error


class Checkpoint:
    """Timestamps (ms) of the newest message made durable in each structure."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.physic = self.logics = self.index = 0
        if self.path.exists():
            raw = self.path.read_bytes()
            if len(raw) != CHECKPOINT_FILE_SIZE:
                raise StoreFormatError(f"{self.path}: checkpoint is {len(raw)} bytes, "
                                       f"expected {CHECKPOINT_FILE_SIZE}")
            self.physic, self.logics, self.index = CHECKPOINT.unpack_from(raw, 0)

    @property
    def min_timestamp(self) -> int:
        """Where abnormal recovery starts: min(physic, logics) - 3 s, as RocketMQ computes it."""
        m = min(self.physic, self.logics)
        return max(0, m - 3000)

    def save(self) -> None:
        """Write all three timestamps and fsync (a 4096-byte file, rewritten in place)."""
        buf = bytearray(CHECKPOINT_FILE_SIZE)
        CHECKPOINT.pack_into(buf, 0, self.physic, self.logics, self.index)
        if not self.path.exists():  # whole or not at all, its block reserved (a full disk fails here)
            os.close(create_file(self.path, CHECKPOINT_FILE_SIZE))
        try:
            fd = os.open(self.path, os.O_RDWR)
            try:
                os.pwrite(fd, buf, 0)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            raise disk_error(e, self.path, "writing the checkpoint") from None
