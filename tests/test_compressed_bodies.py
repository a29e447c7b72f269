"""Compressed bodies (SYSFLAG bit 0x1): RocketMQ clients deflate a body over 4 KiB; 5.x's also name
the compressor in SYSFLAG bits 8-10 (1 lz4, 2 zstd, 3 zlib; 0 zlib). The store keeps the stored
bytes; `dump`, `get` and `query` show the body as the producer sent it unless --stored-body."""
from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

import lz4.frame
import pytest
import zstandard

from rocketlake.jobs.cli import main
from rocketlake.store import CorruptRecordError, Message, MessageStore, codec
from rocketlake.store.compression import inflate

SMALL = dict(mappedFileSizeCommitLog=64 * 1024, mappedFileSizeConsumeQueue=200)
#: a body over a client's 4 KiB compression threshold (``compressMsgBodyOverHowmuch``)
TEXT = "".join(f"order {i:05d} shipped; " for i in range(300))
#: SYSFLAG's offset in a record (SPEC.md's record layout)
SYSFLAG_AT = 36


def _sets() -> list[str]:
    return [arg for k, v in SMALL.items() for arg in ("--set", f"{k}={v}")]


def _zstd_stream(data: bytes) -> bytes:
    """As 5.x's ``ZstdOutputStream`` writes it: one frame without the content size."""
    return zstandard.ZstdCompressor(write_content_size=False).compress(data)


@pytest.mark.parametrize(("type_bits", "deflate"), [
    (0x000, zlib.compress),  # a 4.9 client: the compressed bit alone means zlib
    (0x300, zlib.compress),
    (0x100, lz4.frame.compress),
    (0x200, _zstd_stream),
])
def test_inflate_reads_each_compressor_rocketmq_names(type_bits: int, deflate) -> None:
    assert len(TEXT) > 4096
    assert inflate(deflate(TEXT.encode()), 0x1 | type_bits, 0) == TEXT.encode()


def test_a_body_without_the_compressed_bit_is_kept_as_stored() -> None:
    stored = zlib.compress(b"looks compressed")
    assert inflate(stored, 0x300 | 0x8, 0) == stored  # type bits and COMMIT, but no bit 0x1


def test_an_unknown_type_or_a_broken_body_names_the_offset() -> None:
    with pytest.raises(CorruptRecordError, match=r"commitlog offset 630: .*compression type 4"):
        inflate(zlib.compress(b"x"), 0x401, 630)
    with pytest.raises(CorruptRecordError, match=r"commitlog offset 7: the zlib-compressed body \(5 bytes\)"):
        inflate(zlib.compress(TEXT.encode())[:5], 0x1, 7)
    with pytest.raises(CorruptRecordError, match=r"commitlog offset 9: the zstd-compressed body"):
        inflate(_zstd_stream(TEXT.encode())[:-4], 0x201, 9)


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    """Record 0: TEXT zlib-compressed (sys_flag 0x1), key k0; record 1: "plain", key k1."""
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        ms.put_batch([Message("orders", zlib.compress(TEXT.encode()), keys="k0", sys_flag=0x1),
                      Message("orders", b"plain", keys="k1")])
    return root


def _run(capsys, *argv: str) -> tuple[int, list[str], str]:
    rc = main([*argv, *_sets()])
    out, err = capsys.readouterr()
    return rc, out.splitlines(), err


def test_dump_get_and_query_show_the_body_inflated(store: Path, capsys) -> None:
    rc, lines, _ = _run(capsys, "dump", "commitlog", "--store", str(store))
    rows = [json.loads(line) for line in lines]
    assert rc == 0
    assert [base64.b64decode(r["body_b64"]) for r in rows] == [TEXT.encode(), b"plain"]
    assert [r["compressed"] for r in rows] == [True, False]
    rc, lines, _ = _run(capsys, "get", "--store", str(store), "--topic", "orders", "--queue", "0",
                        "--format", "text", "--max-body", "10000")
    assert rc == 0 and lines[1].endswith(" body=" + TEXT) and lines[2].endswith(" body=plain")
    rc, lines, _ = _run(capsys, "query", "--store", str(store), "--topic", "orders", "--key", "k0")
    assert rc == 0 and base64.b64decode(json.loads(lines[0])["body_b64"]) == TEXT.encode()


def test_stored_body_prints_the_compressed_bytes(store: Path, capsys) -> None:
    rc, lines, _ = _run(capsys, "dump", "commitlog", "--store", str(store), "--stored-body")
    first = json.loads(lines[0])
    assert rc == 0 and first["compressed"] is True
    assert base64.b64decode(first["body_b64"]) == zlib.compress(TEXT.encode())


def test_a_5x_lz4_body_is_inflated(tmp_path: Path, capsys) -> None:
    """A 5.x client's LZ4 body: SYSFLAG 0x101 (compressed, type 1), patched into the record."""
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        ms.put(Message("orders", lz4.frame.compress(TEXT.encode()), sys_flag=0x1))
    path = root / "commitlog" / codec.format_file_name(0)
    with open(path, "r+b") as f:
        f.seek(SYSFLAG_AT)
        f.write((0x101).to_bytes(4, "big"))
    rc, lines, _ = _run(capsys, "dump", "commitlog", "--store", str(root))
    row = json.loads(lines[0])
    assert rc == 0 and row["sys_flag"] == 0x101
    assert base64.b64decode(row["body_b64"]) == TEXT.encode()


def test_a_body_that_does_not_inflate_exits_3_naming_its_offset(tmp_path: Path, capsys) -> None:
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        ms.put(Message("orders", b"not zlib at all", sys_flag=0x1))
    rc, _, err = _run(capsys, "dump", "commitlog", "--store", str(root))
    assert rc == 3 and "commitlog offset 0: the zlib-compressed body (15 bytes)" in err
    rc, lines, _ = _run(capsys, "dump", "commitlog", "--store", str(root), "--stored-body")
    assert rc == 0 and base64.b64decode(json.loads(lines[0])["body_b64"]) == b"not zlib at all"


def test_message_columns_inflate_compressed_rows_anywhere_in_a_batch(tmp_path: Path) -> None:
    """First, adjacent and last rows compressed: the rows between keep their stored bodies."""
    from rocketlake.transforms.commitlog_batch import message_columns, walk_range
    from rocketlake.transforms.commitlog_scan import open_on_executor

    root = tmp_path / "s"
    bodies = [TEXT.encode(), b"plain", b"second " + TEXT.encode(), b"third " + TEXT.encode()]
    with MessageStore(root, **SMALL) as ms:
        ms.put_batch([Message("t", zlib.compress(b), sys_flag=0x1) if i != 1 else Message("t", b)
                      for i, b in enumerate(bodies)])
    buf = open_on_executor(str(root / "commitlog" / codec.format_file_name(0)))
    (stretch,) = walk_range(buf, 0, 0, buf.size, True)
    cols = message_columns(buf, stretch.raw, ["body", "compressed"], {}, inflate_bodies=True)
    assert cols["body"].to_pylist() == bodies
    assert cols["compressed"].to_pylist() == [True, False, True, True]
    stored = message_columns(buf, stretch.raw, ["body"], {})["body"].to_pylist()
    assert stored == [zlib.compress(bodies[0]), b"plain", zlib.compress(bodies[2]),
                      zlib.compress(bodies[3])]
