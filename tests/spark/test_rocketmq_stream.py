"""``spark.readStream.format("rocketmq")``: real streaming queries (memory sink, checkpoints on
disk) over stores the library wrote."""
from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.streaming.datasource import ReadAllAvailable
from store_helpers import record_bytes

from rocketlake.store import Message, MessageStore, codec
from rocketlake.transforms import RocketMQDataSource
from rocketlake.transforms.rocketmq_stream import RocketMQStreamReader

from .helpers import SMALL

COLUMNS = "commitlog_offset,size,topic,body"


def run_stream(spark, root: Path, checkpoint: Path, table: Path, **options) -> list[dict]:
    """One ``Trigger.AvailableNow`` run of the source into the Delta table ``table`` with the
    checkpoint ``checkpoint``: the progress of each batch (the run must end by itself)."""
    q = (spark.readStream.format("rocketmq").option("columns", COLUMNS)
         .options(**{k: str(v) for k, v in options.items()}).load(str(root))
         .writeStream.format("delta").option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start(str(table)))
    assert q.awaitTermination(180), "AvailableNow did not end"
    if q.exception() is not None:
        raise q.exception()
    return [p for p in q.recentProgress if p["numInputRows"] or p["sources"][0]["endOffset"]]


def table_rows(spark, table: Path) -> list[tuple[int, int, str, bytes]]:
    return sorted((r.commitlog_offset, r.size, r.topic, bytes(r.body))
                  for r in spark.read.format("delta").load(str(table)).collect())


def store_records(root: Path) -> list[tuple[int, int, str, bytes]]:
    """Every record of the store by the library's own walk."""
    with MessageStore(root, read_only=True, **SMALL) as ms:
        return [(r.commitlog_offset, r.size, r.topic, r.body)
                for r in ms.commitlog.walk_records(check_crc=True)]


def test_available_now_reads_every_record_once_in_limited_batches_and_ends(
        spark, store_copy: Path, tmp_path: Path) -> None:
    want = store_records(store_copy)
    assert len(want) == 420  # helpers.library_messages
    progress = run_stream(spark, store_copy, tmp_path / "ck", tmp_path / "s_all", startingOffsets="earliest",
                          maxRecordsPerTrigger=100)
    assert [p["numInputRows"] for p in progress] == [100, 100, 100, 100, 20]
    assert table_rows(spark, tmp_path / "s_all") == want
    end = json.loads(progress[-1]["sources"][0]["endOffset"])
    last = want[-1]
    assert end == {"store": str(store_copy.resolve()), "commitlogOffset": last[0] + last[1]}
    first = json.loads(progress[0]["sources"][0]["latestOffset"])  # before the first batch ran
    assert (first["recordsBehind"], first["bytesBehind"]) == (320, last[0] + last[1] - want[100][0])


def test_max_bytes_and_starting_offsets_json(spark, store_copy: Path, tmp_path: Path) -> None:
    want = store_records(store_copy)
    start = want[10][0]
    progress = run_stream(spark, store_copy, tmp_path / "ck", tmp_path / "s_bytes",
                          startingOffsets=json.dumps({"commitlogOffset": start}),
                          maxBytesPerTrigger=20000)
    assert table_rows(spark, tmp_path / "s_bytes") == want[10:]
    a = start  # the first batch's startOffset is null (the query's initial offset)
    for p in progress:
        b = json.loads(p["sources"][0]["endOffset"])["commitlogOffset"]
        assert b - a <= 20000 or p["numInputRows"] == 1
        a = b
    assert len(progress) >= (a - start) // 20000 + 1 > 3


def test_torn_tail_is_read_only_once_complete(spark, store_copy: Path, tmp_path: Path) -> None:
    """The last record's body half zeroed (a writer's torn tail): not read, and the end offset stops
    before it; once its bytes are whole, the next run of the same query reads it, once."""
    with MessageStore(store_copy, **SMALL) as s:
        s.put_batch([Message(topic="late", body=b"L" * 300)])
    want = store_records(store_copy)
    offset, size = want[-1][0], want[-1][1]
    with MessageStore(store_copy, read_only=True, **SMALL) as ms:
        whole = record_bytes(ms, offset)
    at = offset % SMALL["mappedFileSizeCommitLog"]
    path = store_copy / "commitlog" / codec.format_file_name(offset - at)
    data = bytearray(path.read_bytes())
    data[at + size // 2:at + size] = bytes(size - size // 2)
    path.write_bytes(bytes(data))
    progress = run_stream(spark, store_copy, tmp_path / "ck", tmp_path / "s_torn", startingOffsets="earliest")
    assert table_rows(spark, tmp_path / "s_torn") == want[:-1]
    assert json.loads(progress[-1]["sources"][0]["endOffset"])["commitlogOffset"] == offset
    data[at:at + size] = whole
    path.write_bytes(bytes(data))
    progress = run_stream(spark, store_copy, tmp_path / "ck", tmp_path / "s_torn")
    assert [p["numInputRows"] for p in progress] == [1]
    assert table_rows(spark, tmp_path / "s_torn") == want


def _retention(root: Path, files: int) -> int:
    """Delete the first ``files`` CommitLog files (as retention does); the new first offset."""
    names = sorted((root / "commitlog").iterdir())
    for p in names[:files]:
        p.unlink()
    return int(names[files].name)


def test_data_loss_fails_naming_the_range_or_is_skipped(spark, store_copy: Path, tmp_path: Path) -> None:
    want = store_records(store_copy)
    first = _retention(store_copy, 1)
    assert first == SMALL["mappedFileSizeCommitLog"]
    start = json.dumps({"commitlogOffset": want[3][0]})
    with pytest.raises(Exception, match=f"CommitLog offsets {want[3][0]} to {first} .*deleted"):
        run_stream(spark, store_copy, tmp_path / "ck1", tmp_path / "s_loss", startingOffsets=start)
    progress = run_stream(spark, store_copy, tmp_path / "ck2", tmp_path / "s_skip", startingOffsets=start,
                          failOnDataLoss="false")
    assert table_rows(spark, tmp_path / "s_skip") == [r for r in want if r[0] >= first]
    assert json.loads(progress[0]["sources"][0]["latestOffset"])["lostBytes"] == first - want[3][0]


def test_a_checkpoint_of_another_store_is_refused(spark, store_copy: Path, tmp_path: Path) -> None:
    run_stream(spark, store_copy, tmp_path / "ck", tmp_path / "s_a", startingOffsets="earliest")
    other = tmp_path / "other"
    shutil.copytree(store_copy, other)
    with MessageStore(other, **SMALL) as s:
        s.put_batch([Message(topic="more", body=b"m")])
    with pytest.raises(Exception, match=f"offset is of the store {store_copy.resolve()}, not of "
                                        f"{other.resolve()}"):
        run_stream(spark, other, tmp_path / "ck", tmp_path / "s_b")
    # another store moved to the first one's path: the offset is no record start of it
    shutil.rmtree(store_copy)
    with MessageStore(store_copy, **SMALL) as s:
        s.put_batch([Message(topic="x", body=b"y" * 1000) for _ in range(5)])
    with pytest.raises(Exception, match="is not where a record of the store"):
        run_stream(spark, store_copy, tmp_path / "ck", tmp_path / "s_c")


def reader(root: Path, **options) -> RocketMQStreamReader:
    """The stream reader Spark's planner would make (driver side: no query needed)."""
    opts = CaseInsensitiveDict({"path": str(root), **{k: str(v) for k, v in options.items()}})
    return RocketMQDataSource(opts).streamReader(RocketMQDataSource(opts).schema())


def test_a_5x_confirmed_offset_bounds_every_batch_in_controller_mode(store_copy: Path) -> None:
    """RocketMQ 5.x's checkpoint: confirmPhyOffset at byte 32 (0 = unset, as 4.9 leaves it), kept
    current only in controller mode (an `epochFileCheckpoint` in the store root); elsewhere a
    broker leaves the start of the last record it recovered there and serves past it."""
    want = store_records(store_copy)
    end = want[-1][0] + want[-1][1]
    cp = bytearray((store_copy / "checkpoint").read_bytes())
    struct.pack_into(">q", cp, 32, want[100][0])
    (store_copy / "checkpoint").write_bytes(bytes(cp))
    r = reader(store_copy, startingOffsets="earliest")
    start = r.initialOffset()
    assert r.latestOffset(start, ReadAllAvailable())["commitlogOffset"] == end
    (store_copy / "epochFileCheckpoint").write_bytes(b"")
    assert r.latestOffset(start, ReadAllAvailable())["commitlogOffset"] == want[100][0]
    struct.pack_into(">q", cp, 32, 0)
    (store_copy / "checkpoint").write_bytes(bytes(cp))
    assert r.latestOffset(start, ReadAllAvailable())["commitlogOffset"] == end
    assert reader(store_copy).initialOffset()["commitlogOffset"] == end  # latest, as Kafka


def test_starting_timestamp_and_batch_only_options(store_copy: Path) -> None:
    want = store_records(store_copy)
    with MessageStore(store_copy, read_only=True, **SMALL) as ms:
        times = [r.store_timestamp for r in ms.commitlog.walk_records()]
    ts = sorted(set(times))[2]
    first = next(w for w, t in zip(want, times) if t >= ts)
    assert reader(store_copy, startingTimestamp=ts).initialOffset()["commitlogOffset"] == first[0]
    for name, value in (("endingOffsets", "latest"), ("endingTimestamp", "1000")):
        with pytest.raises(ValueError, match=f"option {name} is for batch queries only"):
            reader(store_copy, **{name: value})
    with pytest.raises(ValueError, match="maxRecordsPerTrigger.*a positive integer"):
        reader(store_copy, maxRecordsPerTrigger="0")
