"""Reading what a broker wrote: file sizes from the files, msgId and UNIQ_KEY lookups, index file
names in the broker's time zone. Against the store RocketMQ 4.9.8 wrote (tests/golden), read
without its settings."""
from __future__ import annotations

import json
import os
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from goldens import GOLDEN_498, read_jsonl

from rocketlake.jobs import cli
from rocketlake.jobs.exit_codes import ExitCode
from rocketlake.store import (
    Message,
    MessageNotFoundError,
    MessageStore,
    SettingError,
    StoreFormatError,
    codec,
)
from rocketlake.store.config import load_config
from rocketlake.store.file_sizes import config_from_files
from rocketlake.store.single_process_rebuild import rebuild
from rocketlake.store.store_files import StoreFiles
from rocketlake.store.verify import verify

RESULTS = read_jsonl(GOLDEN_498 / "results.jsonl")
ROLLBACK = 0x0C  # MessageSysFlag.TRANSACTION_ROLLBACK_TYPE: never indexed (IndexService.buildIndex)


def _lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


# --- file sizes from the files ------------------------------------------------------------------
def test_sizes_come_from_the_golden_files(golden_store: Path, golden_settings: dict) -> None:
    cfg = config_from_files(golden_store, load_config())
    assert (cfg.mappedFileSizeCommitLog, cfg.mappedFileSizeConsumeQueue, cfg.maxHashSlotNum,
            cfg.maxIndexNum) == (65536, 600, 64, 200) == tuple(
        golden_settings[n] for n in ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue",
                                     "maxHashSlotNum", "maxIndexNum"))


def test_dump_commitlog_without_set_prints_every_record(golden_store: Path, capsys) -> None:
    assert cli.main(["dump", "commitlog", "--store", str(golden_store)]) == ExitCode.OK
    rows = _lines(capsys.readouterr().out)
    assert [(r["commitlog_offset"], r["msg_id"]) for r in rows] == [
        (r["wrote_offset"], r["msg_id"]) for r in RESULTS]
    assert len(rows) == 400


def test_get_query_verify_without_set(golden_store: Path, capsys) -> None:
    assert cli.main(["verify", "--store", str(golden_store)]) == ExitCode.OK
    assert capsys.readouterr().out.startswith("OK: 400 records, 374 ConsumeQueue units")
    orders0 = [r for r in RESULTS if (r["topic"], r["queue_id"]) == ("orders", 0)
               and r["sys_flag"] & ROLLBACK in (0, 8)][:3]  # PREPARED and ROLLBACK are not queued
    assert cli.main(["get", "--store", str(golden_store), "--topic", "orders", "--queue", "0",
                     "--offset", "0", "--max", "3"]) == ExitCode.OK
    head, *got = _lines(capsys.readouterr().out)
    assert head["status"] == "FOUND"
    assert [m["msg_id"] for m in got] == [r["msg_id"] for r in orders0]
    want = [row["msg_id"] for row in read_jsonl(GOLDEN_498 / "query-orders-cust-3.jsonl") if "msg_id" in row]
    assert cli.main(["query", "--store", str(golden_store), "--topic", "orders",
                     "--key", "cust-3"]) == ExitCode.OK
    assert sorted(r["msg_id"] for r in _lines(capsys.readouterr().out)) == sorted(want)
    assert verify(golden_store).ok  # the library, no settings either


def test_mixed_commitlog_sizes_are_refused_naming_the_files(golden_store: Path, capsys) -> None:
    second = golden_store / "commitlog" / "00000000000000065536"
    os.truncate(second, 8192)
    before = second.read_bytes()
    for argv in (["dump", "commitlog"], ["verify"]):
        assert cli.main([*argv, "--store", str(golden_store)]) == ExitCode.UNUSABLE
        err = capsys.readouterr().err
        assert "00000000000000000000" in err and "00000000000000065536" in err and "differ in size" in err
    with pytest.raises(StoreFormatError, match="differ in size"):
        MessageStore(golden_store, read_only=True)
    assert second.read_bytes() == before


def test_mixed_consume_queue_sizes_are_refused(golden_store: Path) -> None:
    odd = golden_store / "consumequeue" / "payments" / "0" / "00000000000000000000"
    os.truncate(odd, 300)
    with pytest.raises(StoreFormatError, match=f"differ in size.*{odd}"):
        config_from_files(golden_store, load_config())


@pytest.mark.parametrize("place", ["commitlog/00000000000000065536",
                                   "consumequeue/orders/0/00000000000000000600",
                                   "index/20261122110614052", "checkpoint"])
def test_a_directory_where_a_store_file_belongs_is_named_as_one(golden_store: Path, capsys,
                                                                  place: str) -> None:
    """It was counted as a file of the directory's st_size ("1 of 4096 bytes"), and where it was
    the only file of its kind that size was taken as the file size; a checkpoint directory was an
    IsADirectoryError's traceback (exit 1). `verify` reports a bad checkpoint as one of its
    problems (exit 1), the others as a store it cannot read (exit 3)."""
    where = golden_store / place
    where.unlink()
    where.mkdir()
    refusal = f"{where}: is a directory where a store file belongs"
    assert cli.main(["dump", "commitlog", "--store", str(golden_store)]) == ExitCode.UNUSABLE
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"rocketlake dump: error: {refusal}"
    code = cli.main(["verify", "--store", str(golden_store)])
    cap = capsys.readouterr()
    if place == "checkpoint":
        assert code == ExitCode.PROBLEMS and f"error: checkpoint: {refusal}" in cap.out
    else:
        assert code == ExitCode.UNUSABLE
        assert cap.err.strip().splitlines()[-1] == f"rocketlake verify: error: {refusal}"
    assert where.is_dir() and not any(where.iterdir())


@pytest.mark.parametrize("kind", ["commitlog", "consumequeue", "index"])
def test_store_files_that_are_all_empty_are_named(golden_store: Path, capsys, kind: str) -> None:
    """Every CommitLog (or ConsumeQueue) file cut to 0 bytes: their one length, 0, was taken as
    the file size and refused as a bad setting ("mappedFileSizeCommitLog must be positive, got
    0", exit 2), naming no file; index files got advice to give --set."""
    files = sorted(p for p in (golden_store / kind).rglob("*") if p.is_file())
    for f in files:
        os.truncate(f, 0)
    assert cli.main(["get", "--store", str(golden_store), "--topic", "orders", "--queue", "0"]) \
        == ExitCode.UNUSABLE
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"rocketlake get: error: {golden_store / kind}") and str(files[0]) in err
    assert err.endswith("are 0 bytes: a broker creates each store file at its full size, so they "
                        "are damaged")


def test_a_rebuild_names_the_records_of_a_queue_offset_gap(golden_store: Path, golden_settings: dict,
                                                           tmp_path: Path) -> None:
    """A flipped bit in the QUEUEOFFSET of payments/1's first record (offset 208, queue offset 0
    -> 1; outside the body CRC): the rebuild's refusal named only the queue directory it was
    writing ("queue offset 1 leaves a gap after 1"), not the records of the CommitLog it read."""
    first = golden_store / "commitlog" / "00000000000000000000"
    raw = bytearray(first.read_bytes())
    raw[208 + 20 + 7] ^= 1  # QUEUEOFFSET's low byte (docs/FORMAT.md §2)
    first.write_bytes(bytes(raw))
    unit1 = (golden_store / "consumequeue" / "payments" / "1" / "00000000000000000000").read_bytes()[20:28]
    second = int.from_bytes(unit1, "big")  # payments/1's queue offset 1, as the broker indexed it
    with pytest.raises(StoreFormatError) as e:
        rebuild(golden_store, tmp_path / "out", **golden_settings)
    assert str(e.value) == (f"{tmp_path / 'out' / 'consumequeue' / 'payments' / '1'}: queue offset 1 "
                            f"leaves a gap after 1 (the records at CommitLog offsets 208 and {second})")


@pytest.mark.parametrize("place", ["checkpoint", "lock"])
def test_a_writer_refuses_a_directory_where_its_file_belongs(golden_store: Path, golden_settings: dict,
                                                             place: str) -> None:
    """The writer's open reads the checkpoint and locks `lock`: a directory at either was an
    IsADirectoryError (the checkpoint's naming descriptor 4, not the path)."""
    where = golden_store / place
    where.unlink()
    where.mkdir()
    with pytest.raises(StoreFormatError) as e:
        MessageStore(golden_store, **golden_settings)
    assert str(e.value) == f"{where}: is a directory where a store file belongs"
    assert where.is_dir() and not any(where.iterdir()) and not (golden_store / "abort").exists()


def test_an_explicit_setting_the_files_contradict_names_both(golden_store: Path, capsys) -> None:
    assert cli.main(["dump", "commitlog", "--store", str(golden_store),
                     "--set", "mappedFileSizeCommitLog=8192"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "mappedFileSizeCommitLog=8192" in err and "65536 bytes" in err
    with pytest.raises(SettingError, match="maxIndexNum=300.*4296 bytes"):
        MessageStore(golden_store, read_only=True, maxHashSlotNum=64, maxIndexNum=300)
    # one explicit index setting fixes the other from the file length
    with MessageStore(golden_store, read_only=True, maxIndexNum=200) as ms:
        assert ms.config.maxHashSlotNum == 64


def test_writers_still_check_sizes_against_the_settings(golden_store: Path) -> None:
    with pytest.raises(StoreFormatError):
        MessageStore(golden_store)  # the shipped 1 GiB CommitLog setting
    assert not (golden_store / "abort").exists()


def test_index_geometry_read_from_entries_of_a_store_we_wrote(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with MessageStore(store, mappedFileSizeCommitLog=8192, maxHashSlotNum=7, maxIndexNum=31) as ms:
        for i in range(80):  # 3 keys each (KEYS, UNIQ_KEY): several full files
            ms.put(codec_message(i))
    with StoreFiles(store, load_config(), sizes_from_files=True) as files:
        assert (files.index.slot_num, files.index.entry_num) == (7, 31)
        assert files.commitlog.files.file_size == 8192
    assert verify(store).ok
    with StoreFiles(store, load_config()) as files, pytest.raises(StoreFormatError):
        files.commitlog  # noqa: B018 -- callers that go on to write keep the configured sizes


def test_index_geometry_that_nothing_tells_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "s"
    (store / "index").mkdir(parents=True)
    (store / "index" / "20261122110614052").write_bytes(bytes(40 + 64 * 4 + 200 * 20))  # empty file
    with pytest.raises(SettingError, match="4296 bytes.*--set maxHashSlotNum=N --set maxIndexNum=M"):
        config_from_files(store, load_config())
    given = {"maxHashSlotNum": 64}
    assert config_from_files(store, load_config(given), explicit=given).maxIndexNum == 200


def codec_message(i: int) -> Message:
    return Message(topic="t", body=b"x" * 50, keys=f"k{i} c{i % 3}",
                   properties={"UNIQ_KEY": f"{i:032X}"}, store_timestamp=1_700_000_000_000 + i * 10)


# --- msgId and UNIQ_KEY lookups -----------------------------------------------------------------
def test_every_offset_msg_id_finds_its_record(golden_store: Path) -> None:
    with MessageStore(golden_store, read_only=True) as ms:
        for r in RESULTS:
            rec = ms.lookup(r["msg_id"])
            assert ((rec.commitlog_offset, rec.size, rec.topic)
                    == (r["wrote_offset"], r["wrote_bytes"], r["topic"]))


def test_offset_msg_id_of_another_host_or_inside_a_record_is_not_found(golden_store: Path) -> None:
    r = RESULTS[5]
    host, offset = codec.decode_msg_id(r["msg_id"])
    assert host == "10.0.0.7:10911"
    other_host = codec.create_msg_id(bytes([10, 0, 0, 8]), 10911, offset)
    inside = codec.create_msg_id(bytes([10, 0, 0, 7]), 10911, offset + 8)
    with MessageStore(golden_store, read_only=True) as ms:
        for mid in (other_host, inside, codec.create_msg_id(bytes([10, 0, 0, 7]), 10911, 1 << 40)):
            with pytest.raises(MessageNotFoundError, match=mid):
                ms.lookup(mid)


def test_unique_keys_are_found_through_the_index(golden_store: Path) -> None:
    with MessageStore(golden_store, read_only=True) as ms:
        for r in RESULTS:
            uniq = codec.string_to_properties(r["properties_string"])["UNIQ_KEY"]
            if r["sys_flag"] & ROLLBACK == ROLLBACK:
                with pytest.raises(MessageNotFoundError):
                    ms.lookup(uniq)
                continue
            assert ms.lookup(uniq).commitlog_offset == r["wrote_offset"]
            assert ms.lookup(uniq, r["topic"]).commitlog_offset == r["wrote_offset"]
        other = "payments" if RESULTS[0]["topic"] != "payments" else "orders"
        with pytest.raises(MessageNotFoundError, match=other):
            ms.lookup(codec.string_to_properties(RESULTS[0]["properties_string"])["UNIQ_KEY"], other)


def test_query_msg_id_cli_answers_by_offset_or_unique_key(golden_store: Path, capsys) -> None:
    r = RESULTS[7]
    uniq = codec.string_to_properties(r["properties_string"])["UNIQ_KEY"]
    for mid in (r["msg_id"], uniq):
        assert cli.main(["query", "--store", str(golden_store), "--msg-id", mid]) == ExitCode.OK
        assert [x["commitlog_offset"] for x in _lines(capsys.readouterr().out)] == [r["wrote_offset"]]
    missing = "0A00000700002A9F0000000000000001"
    assert cli.main(["query", "--store", str(golden_store), "--msg-id", missing]) == ExitCode.USAGE
    assert f"{missing}: no message" in capsys.readouterr().err



# --- index file names in the broker's time zone -------------------------------------------------
HOUR_MS = 3_600_000


def test_index_file_names_in_two_zones_differ_by_their_offset() -> None:
    ts = 1_795_345_574_046  # 2026-11-22 11:06:14.046 UTC
    utc, shanghai = ZoneInfo("UTC"), ZoneInfo("Asia/Shanghai")
    assert codec.index_file_name(ts, utc) == "20261122110614046"
    assert codec.index_file_name(ts, shanghai) == "20261122190614046"  # UTC+8, no DST
    for zone in (utc, shanghai, ZoneInfo("America/New_York")):
        assert codec.index_file_time(codec.index_file_name(ts, zone), zone) == ts
    assert codec.next_index_file_name(ts, "20261122190614046", shanghai) == "20261122190614047"


def test_a_rebuild_given_the_brokers_zone_names_files_as_the_broker_did(
        tmp_path: Path, golden_settings: dict) -> None:
    """RocketMQ named the golden index files by its wall clock when it created each (UTC, a few ms
    after the store time of the key that opened it); a rebuild names them by that store time."""
    broker = sorted(p.name for p in (GOLDEN_498 / "store" / "index").iterdir())
    names = {}
    for zone in ("UTC", "Asia/Shanghai"):
        rebuild(GOLDEN_498 / "store", tmp_path / zone, consume_queue=False,
                **{**golden_settings, "storeTimeZone": zone})
        names[zone] = sorted(p.name for p in (tmp_path / zone / "index").iterdir())
    utc = ZoneInfo("UTC")
    assert len(names["UTC"]) == len(broker) == 6
    for ours, theirs, east in zip(names["UTC"], broker, names["Asia/Shanghai"]):
        assert ours[:14] == theirs[:14]  # the same second
        assert 0 <= codec.index_file_time(theirs, utc) - codec.index_file_time(ours, utc) < 1000
        assert codec.index_file_time(east, utc) - codec.index_file_time(ours, utc) == 8 * HOUR_MS
        assert codec.index_file_time(east, ZoneInfo("Asia/Shanghai")) == codec.index_file_time(ours, utc)


def test_an_unknown_zone_is_a_setting_error() -> None:
    with pytest.raises(SettingError, match="storeTimeZone.*Mars/Base"):
        load_config({"storeTimeZone": "Mars/Base"})
    assert load_config().storeTimeZone == ""  # the shipped default: the local zone
