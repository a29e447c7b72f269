"""Topic push-down through the ConsumeQueues (transforms.topic_reads): a rare topic read with
consumable=true takes ConsumeQueue partitions and gives the rows the walk gives; a common topic,
a read without consumable, or a system topic is walked. Expected offsets are the puts'."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict

from rocketlake.store import TRANSACTION_PREPARED, Message, MessageStore, codec
from rocketlake.store.errors import CorruptRecordError
from rocketlake.transforms import RocketMQDataSource
from rocketlake.transforms.commitlog_scan import ScanRange
from rocketlake.transforms.topic_reads import UnitSlice

from .helpers import SMALL


def write(root: Path, first: int, count: int) -> list:
    """Messages ``first`` .. ``first + count - 1``: every 30th of topic "rare" (~3% of the bytes),
    the rest "bulk"; 1.5 KiB bodies over several 64 KiB CommitLog files."""
    with MessageStore(root, **SMALL) as ms:
        return [ms.put(Message("rare" if i % 30 == 7 else "bulk", bytes([i % 256]) * 1500, i % 3,
                               tags=f"t{i % 4}", keys=f"k{i}"))
                for i in range(first, first + count)]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[Path, list]:
    root = tmp_path_factory.mktemp("topics") / "store"
    return root, write(root, 0, 150)


def plan(root: Path, pushed: list | None = None, **options: str) -> list:
    ds = RocketMQDataSource(CaseInsensitiveDict({"path": str(root), **options}))
    reader = ds.reader(ds.schema())
    if pushed:
        assert list(reader.pushFilters(pushed)) == []
    return [p.value for p in reader.partitions()]


def rows(spark, root: Path, where: str | None = None, **options: str) -> list[dict]:
    df = spark.read.format("rocketmq").options(**options).load(str(root))
    df = df.where(where) if where else df
    out = [r.asDict() for r in df.orderBy("commitlog_offset").collect()]
    for r in out:
        r["body"] = bytes(r["body"])
    return out


def test_rare_topic_reads_through_its_consumequeues_with_the_walks_rows(spark, store) -> None:
    from pyspark.sql.datasource import EqualTo, In

    root, puts = store
    rare = [p.commitlog_offset for p in puts if p.topic == "rare"]
    assert len(rare) == 5
    for pushed, options in (([], {"topics": "rare"}), ([EqualTo(("topic",), "rare")], {}),
                            ([In(("topic",), ("rare", "none"))], {})):
        parts = plan(root, pushed, consumable="true", **options)
        # every record was dispatched: nothing is walked
        assert parts and all(isinstance(p, tuple) and all(isinstance(s, UnitSlice) for s in p)
                             for p in parts)
    walked = rows(spark, root, topics="rare")
    assert [r["commitlog_offset"] for r in walked] == rare
    assert rows(spark, root, consumable="true", topics="rare") == walked
    assert rows(spark, root, "topic = 'rare'", consumable="true") == walked
    assert rows(spark, root, "topic in ('rare', 'x')", consumable="true", splitBytes="2000") == walked
    assert [r["commitlog_offset"] for r in rows(
        spark, root, consumable="true", topics="rare",
        startingOffsets=f'{{"commitlogOffset": {rare[1]}}}',
        endingOffsets=f'{{"commitlogOffset": {rare[4]}}}')] == rare[1:4]


def test_common_topic_no_consumable_or_system_topic_is_walked(store) -> None:
    root, _ = store
    for options in ({"consumable": "true", "topics": "bulk"}, {"topics": "rare"},
                    {"consumable": "true", "topics": f"rare,{codec.SCHEDULE_TOPIC}"}):
        assert all(isinstance(p, ScanRange) for p in plan(root, **options)), options


def test_a_5x_rocksdb_or_batch_consume_queue_is_walked_not_read_as_files(store, tmp_path: Path) -> None:
    rocks, batch = tmp_path / "rocks", tmp_path / "batch"
    shutil.copytree(store[0], rocks)
    shutil.rmtree(rocks / "consumequeue")
    (rocks / "consumequeue").mkdir()
    (rocks / "consumequeue" / "CURRENT").write_text("MANIFEST-000005\n")  # a RocksDB database
    shutil.copytree(store[0], batch)
    (batch / "batchconsumequeue" / "rare" / "0").mkdir(parents=True)  # "rare" as a BatchCQ topic
    for root, options in ((rocks, {"topics": "rare"}), (rocks, {"topicPattern": "ra.*"}),
                          (batch, {"topics": "rare"}), (batch, {"topicPattern": "ra.*"})):
        parts = plan(root, consumable="true", **options)
        assert parts and all(isinstance(p, ScanRange) for p in parts), (root, options)
    assert any(isinstance(p, tuple) for p in plan(store[0], consumable="true", topics="rare"))


def test_records_after_the_dispatch_watermark_are_walked(spark, tmp_path: Path) -> None:
    """ConsumeQueues behind the CommitLog (a live broker's tail not yet dispatched): the units'
    records come from the ConsumeQueues, the rest from a walk of the tail."""
    root = tmp_path / "store"
    first = write(root, 0, 150)
    shutil.copytree(root / "consumequeue", tmp_path / "cq-then")
    later = write(root, 150, 60)
    shutil.rmtree(root / "consumequeue")
    shutil.copytree(tmp_path / "cq-then", root / "consumequeue")
    parts = plan(root, consumable="true", topics="rare")
    assert {type(p) for p in parts} == {tuple, ScanRange}
    got = [r["commitlog_offset"] for r in rows(spark, root, consumable="true", topics="rare")]
    assert got == [p.commitlog_offset for p in first + later if p.topic == "rare"]


def test_a_unit_out_of_step_with_the_commitlog_is_named(store, tmp_path: Path) -> None:
    root = tmp_path / "store"
    shutil.copytree(store[0], root)
    cq = root / "consumequeue" / "rare" / "1" / "00000000000000000000"
    units = bytearray(cq.read_bytes())
    units[0:8] = (int.from_bytes(units[0:8], "big") + 1).to_bytes(8, "big")  # off by one byte
    cq.write_bytes(bytes(units))
    ds = RocketMQDataSource(CaseInsensitiveDict({"path": str(root), "consumable": "true",
                                                 "topics": "rare"}))
    reader = ds.reader(ds.schema())
    with pytest.raises(CorruptRecordError, match=rf"{cq}: unit 0 of rare/1 names the record of "
                                                 rf"\d+ bytes at CommitLog offset \d+ .* out of step"):
        for p in reader.partitions():
            list(reader.read(p))


def test_prepared_records_are_rows_without_consumable(spark, tmp_path: Path) -> None:
    root = tmp_path / "store"
    with MessageStore(root, **SMALL) as ms:
        puts = [ms.put(Message("rare" if i % 30 == 7 else "bulk", b"x" * 1500, 0,
                               sys_flag=TRANSACTION_PREPARED if i == 37 else 0)) for i in range(90)]
    want = [p.commitlog_offset for p in puts if p.topic == "rare"]
    assert len(want) == 3 and puts[37].topic == "rare"
    assert [r["commitlog_offset"] for r in rows(spark, root, topics="rare")] == want
