"""Planning parallel CommitLog scans: the store's files, byte ranges over them, and opening a
file where a task runs.

``plan_ranges`` splits the CommitLog files into ranges (several per file, none past a file's
data). A range owns the records that start in it. Its readers are the ``rocketmq`` source
(``transforms.rocketmq_source``) and the rebuild's scan tasks (``transforms.store_rebuild``),
which check the record chain across ranges to find where valid data ends, as one walk would.
"""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rocketlake.store import codec
from rocketlake.store.commitlog import commitlog_file_queue
from rocketlake.store.config import StoreConfig
from rocketlake.store.kernels import records as kr
from rocketlake.store.mapped_file import data_end
from rocketlake.transforms.commitlog_batch import find_record_start

#: Default range size: several ranges per 1 GiB CommitLog file.
DEFAULT_SPLIT_BYTES = 64 << 20


@dataclass(frozen=True)
class ScanRange:
    """Byte range ``[lo, hi)`` (file positions) of the CommitLog file at ``path``."""
    path: str
    file_start: int
    lo: int
    hi: int


@dataclass(frozen=True)
class ScanEnd:
    """Where valid data ends, and what the scan saw on the way."""
    end: int                 # CommitLog offset one past the last valid record
    reason: str | None       # why it ended there; None for the normal end (zeros / last file end)
    records: int             # valid records before ``end``


def commitlog_files(root: Path, cfg: StoreConfig) -> list[tuple[Path, int]]:
    """The CommitLog files of the store at ``root`` as (path, start offset) in offset order,
    from every directory ``cfg`` names (``storePathCommitLog``, ``readOnlyCommitLogStorePaths``:
    ``store.commitlog.commitlog_file_queue``), checked like the store loads them."""
    q = commitlog_file_queue(root, cfg)
    try:
        q.load()
        return [(mf.path, mf.start) for mf in q.files]
    finally:
        q.close()


def file_at(root: Path, cfg: StoreConfig, start: int) -> Path:
    """The CommitLog file of the store at ``root`` that starts at offset ``start``, in whichever
    directory ``cfg`` names holds it (:func:`commitlog_files`); where the first would hold it when
    none does, so that a missing file is named."""
    name = codec.format_file_name(start)
    dirs = cfg.commitlog_dirs(Path(root))
    return next((d / name for d in dirs if (d / name).exists()), dirs[0] / name)


def plan_ranges(root: Path, cfg: StoreConfig, split_bytes: int = DEFAULT_SPLIT_BYTES,
                start: int | None = None) -> list[ScanRange]:
    """Ranges covering the CommitLog (:func:`commitlog_files`) from ``start`` (default: its first
    byte) to its end; none past the end of a file's data (``mapped_file.data_end``: a
    pre-allocated file's unwritten tail holds no record, and reading it would only fault in
    zeros)."""
    if split_bytes <= 0:
        raise ValueError(f"split size must be positive, got {split_bytes}")
    out, file_size = [], cfg.mappedFileSizeCommitLog
    for path, fstart in commitlog_files(root, cfg):
        if start is not None and fstart + file_size <= start:
            continue
        lo = max(0, (start or 0) - fstart)
        for a in range(lo, min(file_size, data_end(path)), split_bytes):
            out.append(ScanRange(str(path), fstart, a, min(a + split_bytes, file_size)))
    return out


def open_on_executor(path: str) -> np.ndarray:
    """Map a CommitLog file on the executor running the scan task. The store is read where it lies:
    a file the driver listed but this host cannot see means the store is not at the same path on
    every executor, which FileNotFoundError says, naming the path and the host."""
    try:
        return np.memmap(path, dtype=np.uint8, mode="r")
    except FileNotFoundError as e:
        raise FileNotFoundError(
            f"{path}: no such CommitLog file on executor host {socket.gethostname()}; the store is "
            f"read where it lies, so it must be a path every executor sees (a shared mount, or "
            f"local[*] on the broker's host)") from e


def record_after(files: list[tuple[Path, int]], offset: int) -> int | None:
    """CommitLog offset of the first record start after ``offset``: later in the file holding it,
    or at the head of a later file (``files``: :func:`commitlog_files`). None when no record
    follows: ``offset`` is the end of the CommitLog's data. The search in the file holding
    ``offset`` stops at that file's data end (``mapped_file.data_end``): a mostly empty 1 GiB
    file is not read through its holes."""
    for path, fstart in files:
        size = os.path.getsize(path)
        if fstart > offset and size > 36:
            if kr.find_start(np.memmap(path, dtype=np.uint8, mode="r"), fstart, 0, 1) == 0:
                return fstart
        elif fstart <= offset < fstart + size:
            buf = open_on_executor(str(path))
            end = min(buf.size, data_end(path))
            follow = find_record_start(buf, fstart, offset - fstart + 1, end)
            if follow < end:
                return fstart + follow
    return None


def zeros_at(offset: int, files: list[tuple[Path, int]]) -> bool:
    """True when the 8 bytes at ``offset`` are zeros (or lie past the last file)."""
    for path, fstart in files:
        size = os.path.getsize(path)
        if fstart <= offset < fstart + size:
            with open(path, "rb") as f:
                f.seek(offset - fstart)
                return not any(f.read(8))
    return True
