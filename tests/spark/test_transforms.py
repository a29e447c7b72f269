"""chispa tests of the pure transforms on tiny literal DataFrames."""
from __future__ import annotations

from chispa import assert_df_equality
from pyspark.sql import functions as F

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


def test_archive_properties_map_reads_as_the_codec_whatever_the_session(spark) -> None:
    """The archive's properties map: last duplicate wins, a value keeps its \\x01 bytes, empty
    names / values and segments without \\x01 are dropped (``store.codec.string_to_properties``),
    under the session's default mapKeyDedupPolicy (EXCEPTION), set here on purpose."""
    from rocketlake.store.codec import string_to_properties
    from rocketlake.transforms.archive import properties_map
    props = ["KEYS\x01a\x02TAGS\x01T\x02KEYS\x01b", "X\x01v\x01w\x02\x01n\x02E\x01\x02junk",
             "TAGS\x01A\x02", ""]
    old = spark.conf.get("spark.sql.mapKeyDedupPolicy")
    spark.conf.set("spark.sql.mapKeyDedupPolicy", "EXCEPTION")
    try:
        df = spark.createDataFrame([(i, p) for i, p in enumerate(props)], "i int, properties string")
        got = [r["m"] for r in df.select("i", properties_map(F.col("properties")).alias("m"))
               .orderBy("i").collect()]
    finally:
        spark.conf.set("spark.sql.mapKeyDedupPolicy", old)
    assert got == [{"KEYS": "b", "TAGS": "T"}, {"X": "v\x01w"}, {"TAGS": "A"}, {}]
    assert got == [string_to_properties(p) for p in props]
