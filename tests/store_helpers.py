"""What several test modules need to look at a store from outside, through its files and its
public API only (``from store_helpers import ...``; tests/ is on sys.path, see goldens.py)."""
from __future__ import annotations

import filecmp
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from rocketlake.store import MessageStore, codec


def record_bytes(ms: MessageStore, offset: int) -> bytes:
    """The bytes of the record at CommitLog ``offset`` as its file holds them (a CommitLog file
    is named by its start offset, a multiple of ``mappedFileSizeCommitLog``)."""
    size = ms.read(offset).size
    start = offset - offset % ms.config.mappedFileSizeCommitLog
    with open(ms.root / "commitlog" / codec.format_file_name(start), "rb") as f:
        f.seek(offset - start)
        return f.read(size)


def same_tree(a: Path, b: Path, sub: str) -> list[str]:
    """The files under ``sub`` whose bytes differ between stores ``a`` and ``b`` (both must hold
    the same file names)."""
    names_a = sorted(p.relative_to(a) for p in (a / sub).rglob("*") if p.is_file())
    names_b = sorted(p.relative_to(b) for p in (b / sub).rglob("*") if p.is_file())
    assert names_a == names_b
    return [str(n) for n in names_a if not filecmp.cmp(a / n, b / n, shallow=False)]


def index_contents(root: Path) -> list[bytes]:
    """The bytes of the store's index files, in name order."""
    return [p.read_bytes() for p in sorted((root / "index").iterdir())]


def retopic(root: Path, old: str, new: str) -> int:
    """Overwrite the topic ``old`` with ``new`` (same length in UTF-8) in every CommitLog record of
    ``root``: TOTALSIZE stays right and the body CRC does not cover the topic, so each record stays
    well formed. Returns how many records were changed."""
    was, now = (bytes([len(t.encode())]) + t.encode() for t in (old, new))  # TOPICLEN, then UTF-8
    assert len(was) == len(now)
    n = 0
    for f in (root / "commitlog").iterdir():
        data = f.read_bytes()
        n += data.count(was)
        f.write_bytes(data.replace(was, now))
    return n


def outside(tmp_path: Path, store: Path) -> dict[str, bytes | str]:
    """Every path under ``tmp_path`` but outside ``store``, with its bytes (files) or link target."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(tmp_path):
        here = Path(dirpath)
        if here == store:
            dirnames.clear()
            continue
        for name in dirnames + filenames:
            p = here / name
            if p == store:
                continue
            out[str(p.relative_to(tmp_path))] = (os.readlink(p) if p.is_symlink() else
                                                  p.read_bytes() if p.is_file() else "dir")
    return out


def kill_when_ready(args: list[str], ready: str, env: Mapping[str, str] | None = None) -> None:
    """Run ``python -c <args...>``, wait until it prints the line ``ready``, then kill it with
    SIGKILL: a writer killed at a point the test chose. AssertionError when it ends or prints
    something else first."""
    proc = subprocess.Popen([sys.executable, "-c", *args], stdout=subprocess.PIPE, text=True,
                            env=None if env is None else dict(env))
    try:
        assert proc.stdout is not None and proc.stdout.readline() == f"{ready}\n"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
