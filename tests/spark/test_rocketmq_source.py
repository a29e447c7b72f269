"""``spark.read.format("rocketmq")`` against the library's decoder, on the store RocketMQ 4.9.8
wrote (64 KiB CommitLog files) and on stores the library wrote."""
from __future__ import annotations

import json
import logging
from datetime import datetime
from pathlib import Path

import pytest
from chispa import assert_df_equality
from goldens import GOLDEN_498
from pyspark.sql import functions as F
from pyspark.sql.datasource import CaseInsensitiveDict

from rocketlake.jobs.exit_codes import ExitCode, run
from rocketlake.store import Message, MessageStore, codec
from rocketlake.store.commitlog import CommitLog
from rocketlake.store.config import load_config
from rocketlake.store.dispatch import from_record
from rocketlake.store.errors import CorruptRecordError
from rocketlake.transforms import RocketMQDataSource
from rocketlake.transforms.rocketmq_source import MESSAGE_SCHEMA

from .helpers import SMALL, v2_record

GOLDEN_SETTINGS = json.loads((GOLDEN_498 / "settings.json").read_text())


def library_scan(root: Path, settings: dict) -> tuple[list[dict], int, str | None]:
    """(rows as the source gives them, end of valid data, why it ended) by the library's scan."""
    cfg = load_config(settings)
    log = CommitLog(root, cfg)
    log.files.load()
    try:
        scan = log.walk_records(check_crc=True)
        rows = [{"commitlog_offset": r.commitlog_offset, "size": r.size, "topic": r.topic,
                 "queue_id": r.queue_id, "queue_offset": r.queue_offset, "sys_flag": r.sys_flag,
                 "flag": r.flag, "born_timestamp": r.born_timestamp,
                 "store_timestamp": r.store_timestamp, "born_host": r.born_host,
                 "store_host": r.store_host,
                 "tags_code": from_record(r, cfg.delay_levels_ms).tags_code, "keys": r.keys,
                 "properties": r.properties, "body": r.body, "msg_id": r.msg_id,
                 "magic": r.magic & 0xFFFFFFFF, "body_crc": r.body_crc,
                 "reconsume_times": r.reconsume_times,
                 "prepared_transaction_offset": r.prepared_transaction_offset,
                 **derived_columns(r)} for r in scan]
        return rows, scan.end, scan.error
    finally:
        log.close()


#: sys_flag & 0xC -> RocketMQ's MessageSysFlag name (docs/FORMAT.md §5)
TRANSACTION_STATES = {0x0: "NOT_TYPE", 0x4: "PREPARED", 0x8: "COMMIT", 0xC: "ROLLBACK"}
#: topics whose records are copies served later under REAL_TOPIC / REAL_QID (4.x, 5.x)
DELAY_COPY_TOPICS = ("SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer")


def local_time(ms: int) -> datetime:
    """Epoch ms as ``collect()`` gives a TIMESTAMP: a naive datetime in this process's zone."""
    return datetime.fromtimestamp(ms // 1000).replace(microsecond=ms % 1000 * 1000)


def derived_columns(r: codec.Record) -> dict:
    """The columns the source derives from a decoded record's fields and properties."""
    props = r.properties
    copy = r.topic in DELAY_COPY_TOPICS
    return {"store_time": local_time(r.store_timestamp), "born_time": local_time(r.born_timestamp),
            "tags": props.get("TAGS"),
            "real_topic": props.get("REAL_TOPIC") if copy else None,
            "real_queue_id": int(props["REAL_QID"]) if copy and "REAL_QID" in props else None,
            "delay_level": (int(props["DELAY"]) if r.topic == "SCHEDULE_TOPIC_XXXX" and "DELAY" in props
                            else None),
            "transaction_state": TRANSACTION_STATES[r.sys_flag & 0xC],
            "compressed": bool(r.sys_flag & 0x1)}


def source_rows(df) -> list[dict]:
    out = [r.asDict() for r in df.orderBy("commitlog_offset").collect()]
    for r in out:
        if "body" in r and r["body"] is not None:
            r["body"] = bytes(r["body"])
    return out


def read(spark, root: Path, **options):
    return spark.read.format("rocketmq").options(**{k: str(v) for k, v in options.items()}).load(str(root))


@pytest.mark.parametrize("split", [997, 5000, 1 << 20])  # 997: most records straddle a range end
def test_any_split_gives_the_library_rows_on_the_golden_store(spark, split) -> None:
    want, _, error = library_scan(GOLDEN_498 / "store", GOLDEN_SETTINGS)
    assert len(want) == 400 and error is None  # README: 400 records in two 64 KiB files
    df = read(spark, GOLDEN_498 / "store", splitBytes=split)
    assert df.schema == MESSAGE_SCHEMA
    assert source_rows(df) == want


def test_library_store_ipv6_transactions_delays(spark, library_store: Path) -> None:
    want, _, _ = library_scan(library_store, SMALL)
    assert any(r["sys_flag"] & codec.FLAG_BORNHOST_V6 for r in want)
    assert any(r["sys_flag"] & codec.FLAG_STOREHOST_V6 for r in want)
    assert any(r["topic"] == codec.SCHEDULE_TOPIC for r in want)
    assert source_rows(read(spark, library_store, splitBytes=4096)) == want


def test_ipv6_host_strings_and_msg_id(spark, tmp_path: Path) -> None:
    root = tmp_path / "store"
    with MessageStore(root, **SMALL) as s:
        s.put_batch([Message(topic="t", body=b"x", born_host="[::1]:1", store_host="[2001:db8::5]:10911"),
                     Message(topic="t", body=b"x", born_host="10.0.0.7:65535")])
    rows = source_rows(read(spark, root, columns="commitlog_offset,born_host,store_host,msg_id"))
    assert [r["born_host"] for r in rows] == ["[0:0:0:0:0:0:0:1]:1", "10.0.0.7:65535"]
    assert rows[0]["store_host"] == "[2001:db8:0:0:0:0:0:5]:10911"
    assert rows[0]["msg_id"] == "20010DB8000000000000000000000005" + "00002A9F" + "0000000000000000"
    assert len(rows[1]["msg_id"]) == 32 and rows[1]["msg_id"].endswith(f"{rows[1]['commitlog_offset']:016X}")


def test_v2_magic_record(spark, tmp_path: Path) -> None:
    """A v1 record of RocketMQ's turned into v2 (magic, 2-byte topic length, TOTALSIZE + 1)."""
    v2 = v2_record()
    (tmp_path / "store" / "commitlog").mkdir(parents=True)
    (tmp_path / "store" / "commitlog" / "00000000000000000000").write_bytes(bytes(v2) + bytes(4096 - len(v2)))
    rec = codec.decode_record(bytes(v2) + bytes(8), 0)
    (row,) = source_rows(read(spark, tmp_path / "store"))
    assert (row["size"], row["topic"], row["properties"], row["keys"], row["body"]) == (
        len(v2), rec.topic, rec.properties, rec.keys, rec.body)


def test_columns_option_builds_only_those(spark) -> None:
    df = read(spark, GOLDEN_498 / "store", columns="topic, commitlog_offset,tags_code")
    assert df.columns == ["topic", "commitlog_offset", "tags_code"]
    want, _, _ = library_scan(GOLDEN_498 / "store", GOLDEN_SETTINGS)
    assert source_rows(df) == [{k: r[k] for k in df.columns} for r in want]
    with pytest.raises(Exception, match="columns"):
        read(spark, GOLDEN_498 / "store", columns="topic,nope").schema  # noqa: B018


def test_sql_over_the_source(spark) -> None:
    read(spark, GOLDEN_498 / "store").createOrReplaceTempView("golden_messages")
    got = spark.sql("select topic, count(*) as n, sum(length(body)) as body_bytes "
                    "from golden_messages group by topic")
    want, _, _ = library_scan(GOLDEN_498 / "store", GOLDEN_SETTINGS)
    counts: dict[str, list[int]] = {}
    for r in want:
        c = counts.setdefault(r["topic"], [0, 0])
        c[0] += 1
        c[1] += len(r["body"])
    expected = spark.createDataFrame([(t, n, b) for t, (n, b) in counts.items()], got.schema)
    assert_df_equality(got, expected, ignore_row_order=True)


def test_pushed_down_offset_filter_reads_fewer_ranges(spark) -> None:
    root = GOLDEN_498 / "store"
    want, _, _ = library_scan(root, GOLDEN_SETTINGS)
    cut = want[len(want) // 2]["commitlog_offset"]
    all_rows = read(spark, root, splitBytes=8192)
    tail = all_rows.filter(F.col("commitlog_offset") >= cut)
    assert all_rows.rdd.getNumPartitions() == 16  # two 64 KiB files in 8 KiB ranges
    assert tail.rdd.getNumPartitions() < 16
    assert source_rows(tail) == [r for r in want if r["commitlog_offset"] >= cut]
    one = all_rows.filter(F.col("commitlog_offset") == cut)
    assert one.rdd.getNumPartitions() == 1 and source_rows(one) == [want[len(want) // 2]]


def test_pushed_down_store_time_filter(spark, library_store: Path) -> None:
    want, _, _ = library_scan(library_store, SMALL)
    times = sorted({r["store_timestamp"] for r in want})
    lo, hi = times[1], times[-1]
    ts = F.col("store_timestamp")
    got = read(spark, library_store).filter((ts > lo) & (ts <= hi))
    expected = [r for r in want if lo < r["store_timestamp"] <= hi]
    assert expected and source_rows(got) == expected


def test_consumequeue_units_name_their_records(spark, golden_store: Path) -> None:
    root = golden_store
    units = read(spark, root, kind="consumequeue").collect()
    with MessageStore(root, load_config(GOLDEN_SETTINGS), read_only=True) as ms:
        ranges = ms.queue_ranges()
        assert len(units) == sum(hi - lo for lo, hi in ranges.values())
        for u in units:
            rec = ms.read(u["commitlog_offset"])
            assert (u["topic"], u["queue_id"], u["queue_offset"], u["size"]) == (
                rec.topic, rec.queue_id, rec.queue_offset, rec.size)



def test_consumequeue_rows_start_at_the_commitlog_minimum_after_retention(tmp_path: Path) -> None:
    """Retention deletes the first two 64 KiB CommitLog files and the ConsumeQueue files wholly
    below them; the queue's oldest file left still holds units of deleted records: not rows."""
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        puts = ms.put_batch([Message("t", bytes(1500), 0) for _ in range(100)])  # 1592-byte records
        expiry = ms.delete_expired_files(now=puts[-1].store_timestamp + 10 ** 12, force=True)
    assert expiry.commitlog_min_offset == 2 * 65536
    ds = RocketMQDataSource(CaseInsensitiveDict({"path": str(root), "kind": "consumequeue"}))
    reader = ds.reader(ds.schema())
    got = [(r["queue_offset"], r["commitlog_offset"]) for p in reader.partitions()
           for batch in reader.read(p) for r in batch.to_pylist()]
    # 41 records fill a 64 KiB file (41 x 1592 = 65272; the blank tail takes the rest): the
    # records left are the 83rd on, at 131072 + 1592 k
    assert got == [(q, 2 * 65536 + 1592 * (q - 82)) for q in range(82, 100)]

# --- torn and corrupt data ------------------------------------------------------------------------
def last_file_and_records(root: Path) -> tuple[Path, list[dict]]:
    rows, _, _ = library_scan(root, GOLDEN_SETTINGS)
    return sorted((root / "commitlog").iterdir())[-1], rows


def test_torn_tail_stops_at_the_end_of_valid_data(spark, golden_store: Path, caplog) -> None:
    path, rows = last_file_and_records(golden_store)
    last = rows[-1]
    pos = last["commitlog_offset"] - int(path.name)
    data = bytearray(path.read_bytes())
    data[pos + last["size"] // 2:pos + last["size"]] = bytes(last["size"] - last["size"] // 2)
    path.write_bytes(bytes(data))  # the second half of the last record never reached the disk
    want, end, error = library_scan(golden_store, GOLDEN_SETTINGS)
    assert want == rows[:-1] and end == last["commitlog_offset"] and error
    for split in (997, 1 << 20):
        assert source_rows(read(spark, golden_store, splitBytes=split)) == want
    # The task says where and why (here in-process: the same reader a Spark task runs).
    with caplog.at_level(logging.WARNING, logger="rocketlake.transforms.rocketmq_source"):
        assert sum(b.num_rows for b in read_in_process(golden_store)) == len(want)
    assert f"valid data ends at offset {end}: {error}" in caplog.text and path.name in caplog.text


def read_in_process(root: Path, **options: str):
    ds = RocketMQDataSource(CaseInsensitiveDict({"path": str(root), **options}))
    reader = ds.reader(ds.schema())
    for p in reader.partitions():
        yield from reader.read(p)


def test_bad_crc_mid_log_fails_naming_file_and_offset(spark, golden_store: Path) -> None:
    path, rows = last_file_and_records(golden_store)
    victim = rows[300]
    assert victim["commitlog_offset"] >= int(path.name)
    start = victim["commitlog_offset"] - int(path.name)
    data = bytearray(path.read_bytes())
    body_at = data.find(victim["body"], start)
    assert start < body_at < start + victim["size"]
    data[body_at] ^= 0xFF  # the body's first byte
    path.write_bytes(bytes(data))
    _, end, error = library_scan(golden_store, GOLDEN_SETTINGS)
    assert end == victim["commitlog_offset"] and "CRC" in error
    with pytest.raises(Exception) as info:
        read(spark, golden_store, splitBytes=4096).count()
    message = str(info.value)
    assert f"valid data ends at offset {end}" in message and path.name in message and "CRC" in message
    # checkCRC=false reads every record, the damaged body as it is now
    got = source_rows(read(spark, golden_store, checkCRC="false", columns="commitlog_offset,body"))
    assert [r["commitlog_offset"] for r in got] == [r["commitlog_offset"] for r in rows]
    assert got[300]["body"] != victim["body"] and got[301]["body"] == rows[301]["body"]


def test_empty_and_missing_stores(spark, tmp_path: Path) -> None:
    (tmp_path / "empty" / "commitlog").mkdir(parents=True)
    assert read(spark, tmp_path / "empty").count() == 0
    with pytest.raises(Exception, match="nothing-here: no such store directory"):
        read(spark, tmp_path / "nothing-here").count()


@pytest.mark.parametrize("victim", [100, "last of the first file"])
def test_zeroed_record_with_records_after_it_fails(golden_store: Path, victim) -> None:
    """Zeros where a record should be end valid data (the library says nothing: that is how data
    ends); records after them, later in the file or in the next file, make the read fail."""
    rows, _, _ = library_scan(golden_store, GOLDEN_SETTINGS)
    first = sorted((golden_store / "commitlog").iterdir())[0]
    i = victim if isinstance(victim, int) else max(
        k for k, r in enumerate(rows) if r["commitlog_offset"] < int(first.stat().st_size))
    r = rows[i]
    data = bytearray(first.read_bytes())
    data[r["commitlog_offset"]:r["commitlog_offset"] + r["size"]] = bytes(r["size"])
    first.write_bytes(bytes(data))
    _, end, error = library_scan(golden_store, GOLDEN_SETTINGS)
    assert (end, error) == (r["commitlog_offset"], None)
    resume = rows[i + 1]["commitlog_offset"]
    why = f"valid data ends at offset {end} \\(zeros\\) but records follow at offset {resume}"
    with pytest.raises(CorruptRecordError, match=why):
        list(read_in_process(golden_store, splitBytes="8192"))


def test_file_sizes_no_store_has_are_one_line_naming_the_file(spark, store_copy: Path,
                                                              tmp_path: Path, capsys) -> None:
    """The source takes the file sizes from the files (``store.file_sizes``): a 0-byte CommitLog
    file beside a full one, or a ConsumeQueue file of 7 bytes (not whole 20-byte units), is
    damage, named; a size of 0 given as an option is a bad setting."""
    first = store_copy / "commitlog" / "00000000000000000000"
    first.write_bytes(b"")
    second = store_copy / "commitlog" / f"{SMALL['mappedFileSizeCommitLog']:020d}"
    assert second.stat().st_size == SMALL["mappedFileSizeCommitLog"]
    one = tmp_path / "one"
    with MessageStore(one, **SMALL) as ms:
        ms.put(Message("t", b"m", 0))
    cq = one / "consumequeue" / "t" / "0" / "00000000000000000000"
    cq.write_bytes(bytes(7))

    codes = [run("rocketlake x", lambda: read(spark, store_copy).count()),
             run("rocketlake x", lambda: read(spark, one, mappedFileSizeCommitLog="0").count()),
             run("rocketlake x", lambda: read(spark, one, kind="consumequeue").count())]

    assert codes == [ExitCode.UNUSABLE, ExitCode.USAGE, ExitCode.UNUSABLE]
    assert capsys.readouterr().err.splitlines() == [
        f"rocketlake x: error: in a Spark task: {store_copy / 'commitlog'}: CommitLog files differ "
        f"in size: 1 of 0 bytes ({first}); 1 of {SMALL['mappedFileSizeCommitLog']} bytes "
        f"({second}); a store's files of one kind share one size",
        "rocketlake x: error: in a Spark task: rocketmq source: option mappedFileSizeCommitLog='0' "
        "is not accepted: expected a positive integer",
        f"rocketlake x: error: in a Spark task: {cq}: ConsumeQueue file is 7 bytes, not a multiple "
        f"of the 20-byte unit: mappedFileSizeConsumeQueue is a whole number of units, so the file "
        f"is damaged or not a ConsumeQueue file"]
