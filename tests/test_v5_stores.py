"""What a RocketMQ 5.x broker adds to a store, read (and kept) by rocketlake: the checkpoint's
masterFlushedOffset and confirmPhyOffset, the property CRC. Expected values are bytes built from
RocketMQ 5.3.3's layouts (docs/FORMAT.md section 9.6), independently of store/."""
from __future__ import annotations

import json
import struct
from pathlib import Path

from reference import V2, pack, with_prop_crc

from rocketlake.jobs import cli
from rocketlake.jobs.exit_codes import ExitCode
from rocketlake.store import Message, MessageStore
from rocketlake.store.verify import verify

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


# --- the property CRC (enabledAppendPropCRC: properties end with __CRC32# \x01 ten digits \x02) ---
def _crc_records(n: int) -> list[bytes]:
    """Records as a 5.3.3 broker with enabledAppendPropCRC stores them, packed at offsets 0, ..."""
    out: list[bytes] = []
    at = 0
    for i in range(n):
        out.append(with_prop_crc(pack(at, topic="t5", body=b"m%d" % i, queue_offset=i, magic=V2,
                                      props="TAGS\x01a\x02__CRC32#\x010000000000\x02")))
        at += len(out[-1])
    return out


def test_copied_records_carry_a_property_crc_of_their_new_place(tmp_path: Path) -> None:
    root = tmp_path / "s"
    first = _put(root, 1)[0]
    with MessageStore(root, **SMALL) as ms:
        placed = ms.put_records(_crc_records(2))
    log = (root / "commitlog" / f"{0:020d}").read_bytes()
    for p in placed:
        rec = log[p.commitlog_offset:p.commitlog_offset + p.size]
        assert struct.unpack_from(">q", rec, 28)[0] == p.commitlog_offset > first.commitlog_offset
        assert rec == with_prop_crc(rec)   # the digits are those of the bytes it holds here
    assert verify(root, **SMALL).problems == []


def test_a_property_crc_mismatch_is_damage_at_its_offset(tmp_path: Path, capsys) -> None:
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        placed = ms.put_records(_crc_records(3))
    bad = placed[1].commitlog_offset
    path = root / "commitlog" / f"{0:020d}"
    with open(path, "r+b") as f:   # FLAG: no part of the body, covered by the property CRC only
        f.seek(bad + 19)
        b = f.read(1)
        f.seek(bad + 19)
        f.write(bytes([b[0] ^ 1]))
    problems = verify(root, **SMALL).problems
    damage = [p for p in problems if p.kind == "commitlog-invalid-record"]
    assert [(p.file, p.offset) for p in damage] == [(f"commitlog/{0:020d}", bad)]
    assert "property CRC" in damage[0].what
    # reads skip the damaged record, warning once with its offset (as for a body CRC mismatch)
    sets = [a for k, v in SMALL.items() for a in ("--set", f"{k}={v}")]
    assert cli.main(["get", "--store", str(root), "--topic", "t5", "--queue", "0", *sets]) == ExitCode.OK
    out, err = capsys.readouterr()
    assert [json.loads(line)["queue_offset"] for line in out.splitlines()[1:]] == [0, 2]
    assert f"damaged at offset {bad} (property CRC " in err
