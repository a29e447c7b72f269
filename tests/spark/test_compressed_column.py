"""The ``rocketmq`` source's ``compressed`` column and ``inflateBodies`` option: a body a client
stored compressed (SYSFLAG 0x1, zlib over 4 KiB) is given as stored by default, as sent with
``inflateBodies=true``."""
from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from rocketlake.store import CorruptRecordError, Message, MessageStore

from .helpers import SMALL

#: a body over a client's 4 KiB compression threshold
TEXT = "".join(f"order {i:05d} shipped; " for i in range(300)).encode()


def read(spark, root: Path, **options: str):
    return spark.read.format("rocketmq").options(**options).load(str(root))


def test_compressed_bodies_as_stored_or_inflated(spark, tmp_path: Path) -> None:
    root = tmp_path / "store"
    with MessageStore(root, **SMALL) as ms:
        ms.put_batch([Message("orders", b"plain"),
                      Message("orders", zlib.compress(TEXT), sys_flag=0x1),
                      Message("orders", b"after")])
    stored = read(spark, root, columns="commitlog_offset,body,compressed").orderBy("commitlog_offset")
    assert [(bytes(r.body), r.compressed) for r in stored.collect()] == [
        (b"plain", False), (zlib.compress(TEXT), True), (b"after", False)]
    sent = read(spark, root, columns="commitlog_offset,body,compressed", inflateBodies="true")
    assert [(bytes(r.body), r.compressed) for r in sent.orderBy("commitlog_offset").collect()] == [
        (b"plain", False), (TEXT, True), (b"after", False)]


def test_a_body_that_does_not_inflate_fails_naming_its_offset(spark, tmp_path: Path) -> None:
    root = tmp_path / "store"
    with MessageStore(root, **SMALL) as ms:
        second = ms.put(Message("orders", b"plain")).size  # the second record starts there
        ms.put(Message("orders", b"not zlib", sys_flag=0x1))
    with pytest.raises(Exception, match=rf"commitlog offset {second}: the zlib-compressed body") as e:
        read(spark, root, columns="body", inflateBodies="true").collect()
    assert CorruptRecordError.__name__ in str(e.value)
