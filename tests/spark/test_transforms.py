"""chispa tests of the pure transforms on tiny literal DataFrames."""
from __future__ import annotations

from chispa import assert_df_equality

from rocketlake.transforms.consume_queue_units import gets_unit

MSG_SCHEMA = ("commitlog_offset long, size int, topic string, queue_id int, queue_offset long, "
              "sys_flag int, store_timestamp long, tags_code long, keys array<string>, "
              "uniq_key string")


def test_units_skip_prepared_and_rollback(spark) -> None:
    msgs = spark.createDataFrame([
        (0, 100, "t", 0, 0, 0, 1000, 7, None, None),      # NOT
        (100, 90, "t", 0, 0, 4, 1000, 7, None, None),     # PREPARED: no unit
        (190, 80, "t", 0, 1, 8, 1000, 7, None, None),     # COMMIT
        (270, 70, "t", 0, 0, 12, 1000, 7, None, None),    # ROLLBACK: no unit
        (340, 60, "u", 3, 5, 0x30, 1000, -2, None, None),  # IPv6 hosts do not matter
    ], MSG_SCHEMA)
    expected = spark.createDataFrame([(0,), (190,), (340,)], "commitlog_offset long")
    assert_df_equality(msgs.filter(gets_unit()).select("commitlog_offset"), expected,
                       ignore_row_order=True, ignore_nullable=True)


def test_archive_rows_add_file_and_date_and_rename_times(spark) -> None:
    """Source rows -> archive rows: the file name from the offset, the UTC store date, the
    source's TIMESTAMPs under the archive's names (2025-11-22T23:59:59.999Z is 1763855999999 ms:
    the date is still the 22nd in UTC)."""
    from datetime import UTC, date, datetime

    from rocketlake.transforms.archive import ARCHIVE_COLUMNS, SOURCE_COLUMNS, archive_rows
    schema = ("commitlog_offset long, size int, magic long, body_crc int, queue_id int, flag int, "
              "queue_offset long, sys_flag int, born_timestamp long, born_host string, "
              "store_timestamp long, store_host string, reconsume_times int, "
              "prepared_transaction_offset long, body binary, topic string, "
              "properties map<string,string>, msg_id string, keys array<string>, tags string, "
              "born_time timestamp, store_time timestamp")
    born, stored = (datetime(2025, 11, 22, 23, 59, 58, tzinfo=UTC),
                    datetime(2025, 11, 22, 23, 59, 59, 999000, tzinfo=UTC))
    msgs = spark.createDataFrame([
        (70000, 120, 0xDAA320A7, 5, 1, 0, 9, 0, 1763855998000, "10.0.0.1:7", 1763855999999,
         "10.0.0.2:8", 0, 0, b"b", "t", {"TAGS": "T1", "KEYS": "k"}, "ID", ["k"], "T1", born, stored),
    ], schema)
    assert tuple(msgs.columns) == SOURCE_COLUMNS
    (row,) = archive_rows(msgs, "s1", 65536).collect()
    assert tuple(row.asDict()) == ARCHIVE_COLUMNS
    assert (row["store"], row["commitlog_file"], row["tags"], row["store_date"]) == (
        "s1", "00000000000000065536", "T1", date(2025, 11, 22))
    assert (row["born_ts"], row["store_ts"]) == (born.astimezone().replace(tzinfo=None),
                                                 stored.astimezone().replace(tzinfo=None))
