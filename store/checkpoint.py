"""The 4096-byte checkpoint file: physic, logics and index flush timestamps (docs/FORMAT.md §8),
and 5.x's confirmed CommitLog offset."""
from __future__ import annotations

import os
from pathlib import Path

from rocketlake.store.codec import CHECKPOINT, CHECKPOINT_FILE_SIZE, CHECKPOINT_V5
from rocketlake.store.errors import StoreFormatError
from rocketlake.store.safe_files import create_file, disk_error, open_file, read_file


class Checkpoint:
    """Timestamps (ms) of the newest message made durable in each structure, and ``confirm_offset``:
    a 5.x broker's confirmPhyOffset (records past it are not yet confirmed to consumers; 0 when
    unset, as on every 4.9 store). A ``writer``'s
    checkpoint refuses a link at ``path`` already here (LinkedFileError), before the store
    writes anything."""

    def __init__(self, path: Path, writer: bool = False) -> None:
        self.path = Path(path)
        self.physic = self.logics = self.index = self.confirm_offset = 0
        try:
            raw = read_file(self.path) if writer else self.path.read_bytes()
        except FileNotFoundError:
            return
        if len(raw) != CHECKPOINT_FILE_SIZE:
            raise StoreFormatError(f"{self.path}: checkpoint is {len(raw)} bytes, "
                                   f"expected {CHECKPOINT_FILE_SIZE}")
        self.physic, self.logics, self.index = CHECKPOINT.unpack_from(raw, 0)
        _, self.confirm_offset = CHECKPOINT_V5.unpack_from(raw, CHECKPOINT.size)

    @property
    def min_timestamp(self) -> int:
        """Where abnormal recovery starts: min(physic, logics) - 3 s, as RocketMQ computes it."""
        m = min(self.physic, self.logics)
        return max(0, m - 3000)

    def save(self) -> None:
        """Write all three timestamps and fsync (a 4096-byte file, rewritten in place, never through
        a link)."""
        buf = bytearray(CHECKPOINT_FILE_SIZE)
        CHECKPOINT.pack_into(buf, 0, self.physic, self.logics, self.index)
        try:
            fd = open_file(self.path, os.O_RDWR)
        except FileNotFoundError:  # whole or not at all, its block reserved (a full disk fails here)
            fd = create_file(self.path, CHECKPOINT_FILE_SIZE)
        except OSError as e:
            raise disk_error(e, self.path, "opening the checkpoint") from None
        try:
            os.pwrite(fd, buf, 0)
            os.fsync(fd)
        except OSError as e:
            raise disk_error(e, self.path, "writing the checkpoint") from None
        finally:
            os.close(fd)
