"""``mapped_file.data_end``: where a store file's data ends, for scans that stop there instead of
reading a pre-allocated file's zeros (the rebuilds' plans, recovery, the record-after check)."""
from __future__ import annotations

import mmap
import os
from pathlib import Path

from rocketlake.store.mapped_file import data_end
from rocketlake.store.safe_files import create_file

SIZE = 8 << 20


def _block(path: Path) -> int:
    return os.statvfs(path).f_bsize


def _round_up(n: int, block: int) -> int:
    return -(-n // block) * block


def test_a_preallocated_file_read_through_ends_at_its_written_blocks(tmp_path: Path) -> None:
    # fallocate reserves unwritten extents; reading them puts zero pages in the page cache, which
    # SEEK_DATA then counts as data: the whole file would be scanned
    path = tmp_path / "00000000000000000000"
    fd = create_file(path, SIZE)
    try:
        os.pwrite(fd, b"\x01" * 10_000, 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    assert path.read_bytes()[10_000:] == bytes(SIZE - 10_000)  # every page read once
    assert data_end(path) == _round_up(10_000, _block(path))


def test_bytes_written_through_a_mapping_and_not_yet_written_back_are_data(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000"
    fd = create_file(path, SIZE)
    try:
        with mmap.mmap(fd, SIZE) as mm:
            mm[5_000_000:5_000_004] = b"\x07\x07\x07\x07"  # a dirty page of an unwritten extent
            assert data_end(path) == _round_up(5_000_004, _block(path))
    finally:
        os.close(fd)


def test_data_after_a_hole_counts(tmp_path: Path) -> None:
    path = tmp_path / "sparse"
    with open(path, "wb") as f:
        f.truncate(SIZE)
        f.seek(3 << 20)
        f.write(b"\x02" * 100)
    assert data_end(path) == _round_up((3 << 20) + 100, _block(path))
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert data_end(empty) == 0
