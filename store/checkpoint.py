"""The 4096-byte checkpoint file: physic, logics and index flush timestamps (docs/FORMAT.md §8),
and 5.x's master-flushed and confirmed CommitLog offsets (§9.6, RocketMQ's StoreCheckpoint)."""
from __future__ import annotations

import os
from pathlib import Path

from rocketlake.store.codec import CHECKPOINT, CHECKPOINT_FILE_SIZE, CHECKPOINT_V5
from rocketlake.store.errors import StoreFormatError
from rocketlake.store.safe_files import create_file, directory_in_place, disk_error, open_file, read_file

#: where a 5.x broker in controller mode keeps its epochs (``MessageStoreConfig.storePathEpochFile``):
#: only such a broker keeps confirmPhyOffset current
EPOCH_FILE = "epochFileCheckpoint"


def confirmed_end(root: Path) -> int | None:
    """Where readers of the store at ``root`` stop: a 5.x broker's confirmPhyOffset in controller
    mode (its `epochFileCheckpoint` exists, the offset is set); None otherwise. Outside controller
    mode a broker sets the offset once at startup, to the start of the last record it recovered,
    and serves everything it writes after it (docs/FORMAT.md §9.6)."""
    if not (Path(root) / EPOCH_FILE).is_file():
        return None
    return Checkpoint(Path(root) / "checkpoint").confirm_offset or None


class Checkpoint:
    """Timestamps (ms) of the newest message made durable in each structure; ``master_flushed``
    and ``confirm_offset``: a 5.x broker's masterFlushedOffset and confirmPhyOffset (records past
    the latter are not yet confirmed to consumers; both 0 when unset, as on every 4.9 store), kept
    as read and written back by ``save``. A ``writer``'s
    checkpoint refuses a link at ``path`` already here (LinkedFileError), before the store
    writes anything."""

    def __init__(self, path: Path, writer: bool = False) -> None:
        self.path = Path(path)
        self.physic = self.logics = self.index = self.master_flushed = self.confirm_offset = 0
        try:
            raw = read_file(self.path) if writer else self.path.read_bytes()
        except FileNotFoundError:
            return
        except IsADirectoryError:  # a read-only open's read_bytes
            raise directory_in_place(self.path) from None
        if len(raw) != CHECKPOINT_FILE_SIZE:
            raise StoreFormatError(f"{self.path}: checkpoint is {len(raw)} bytes, "
                                   f"expected {CHECKPOINT_FILE_SIZE}")
        self.physic, self.logics, self.index = CHECKPOINT.unpack_from(raw, 0)
        self.master_flushed, self.confirm_offset = CHECKPOINT_V5.unpack_from(raw, CHECKPOINT.size)

    @property
    def min_timestamp(self) -> int:
        """Where abnormal recovery starts: min(physic, logics) - 3 s, as RocketMQ computes it."""
        m = min(self.physic, self.logics)
        return max(0, m - 3000)

    def save(self) -> None:
        """Write the three timestamps and the two 5.x offsets and fsync (a 4096-byte file, rewritten
        in place, never through a link)."""
        buf = bytearray(CHECKPOINT.size + CHECKPOINT_V5.size)
        CHECKPOINT.pack_into(buf, 0, self.physic, self.logics, self.index)
        CHECKPOINT_V5.pack_into(buf, CHECKPOINT.size, self.master_flushed, self.confirm_offset)
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
