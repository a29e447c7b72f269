"""What a RocketMQ 5.x broker adds to a store, read (and kept) by rocketlake: the checkpoint's
masterFlushedOffset and confirmPhyOffset. Expected values are bytes built from RocketMQ 5.3.3's
layouts (docs/FORMAT.md section 9.6), independently of store/."""
from __future__ import annotations

import struct
from pathlib import Path

from rocketlake.store import Message, MessageStore

SMALL = dict(mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=200, maxHashSlotNum=16,
             maxIndexNum=20)


# --- checkpoint (StoreCheckpoint: longs @0 physic, @8 logics, @16 index, @24 masterFlushedOffset,
# @32 confirmPhyOffset; the rest of the 4096 bytes is never written) -------------------------------
def _put(root: Path, n: int, first: int = 0) -> list:
    with MessageStore(root, **SMALL) as ms:
        return [ms.put(Message(topic="t5", body=b"b%d" % i, queue_id=0)) for i in range(first, first + n)]


def _set_checkpoint_tail(root: Path, master_flushed: int, confirm: int, trailer: bytes) -> None:
    """What a 5.x broker leaves at @24 and @32, and bytes past @40 nobody writes."""
    raw = bytearray((root / "checkpoint").read_bytes())
    struct.pack_into(">qq", raw, 24, master_flushed, confirm)
    raw[40:40 + len(trailer)] = trailer
    (root / "checkpoint").write_bytes(raw)


def test_a_writer_keeps_what_a_5x_broker_wrote_after_the_timestamps(tmp_path: Path) -> None:
    root = tmp_path / "s"
    put = _put(root, 3)
    # a broker recovering normally confirms up to the start of the last valid record
    _set_checkpoint_tail(root, 777_000, put[-1].commitlog_offset, b"\x5a" * 8)
    with MessageStore(root, **SMALL) as ms:   # opened for writing, nothing written
        ms.flush()
    raw = (root / "checkpoint").read_bytes()
    assert len(raw) == 4096
    assert struct.unpack_from(">qq", raw, 24) == (777_000, put[-1].commitlog_offset)
    assert raw[40:48] == b"\x5a" * 8


def test_appending_advances_a_set_confirm_offset_past_what_was_written(tmp_path: Path) -> None:
    root = tmp_path / "s"
    put = _put(root, 3)
    _set_checkpoint_tail(root, 777_000, put[-1].commitlog_offset, b"")
    more = _put(root, 2, first=3)
    end = more[-1].commitlog_offset + more[-1].size
    assert end == sum(p.size for p in put + more)
    assert struct.unpack_from(">qq", (root / "checkpoint").read_bytes(), 24) == (777_000, end)


def test_a_store_without_5x_offsets_keeps_them_unset(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _put(root, 3)
    _put(root, 1, first=3)
    assert (root / "checkpoint").read_bytes()[24:4096] == bytes(4096 - 24)
