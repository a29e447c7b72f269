"""chispa tests for the key-compaction transforms on tiny literal DataFrames."""
from __future__ import annotations

from chispa import assert_df_equality

from rocketlake.transforms.compaction import latest_per_key, with_compaction_key

COLS = "topic string, queue_id int, origin_offset long, properties string"


def test_compaction_key_is_the_whole_keys_value(spark):
    df = spark.createDataFrame([
        ("t", 0, 0, "TAGS\x01A\x02KEYS\x01k1 k2"),
        ("t", 0, 1, "KEYS\x01solo\x02TAGS\x01A\x02"),      # 4.9.0 trailing separator
        ("t", 0, 2, "TAGS\x01A"),                            # no KEYS
        ("t", 0, 3, "XKEYS\x01not-a-key"),                   # a name that only ends in KEYS
    ], COLS)
    got = [r["compaction_key"] for r in with_compaction_key(df).orderBy("origin_offset").collect()]
    assert got == ["k1 k2", "solo", None, None]


def test_latest_per_key_per_queue_keeps_unkeyed(spark):
    df = spark.createDataFrame([
        ("t", 0, 0, "KEYS\x01a"), ("t", 0, 1, "KEYS\x01b"), ("t", 0, 2, "KEYS\x01a"),
        ("t", 1, 0, "KEYS\x01a"),                     # same key, other queue: kept separately
        ("t", 0, 3, "TAGS\x01x"), ("t", 0, 4, "TAGS\x01y"),  # no key: both kept
    ], COLS)
    expected = spark.createDataFrame([
        ("t", 0, 1, "KEYS\x01b", "b"), ("t", 0, 2, "KEYS\x01a", "a"), ("t", 1, 0, "KEYS\x01a", "a"),
        ("t", 0, 3, "TAGS\x01x", None), ("t", 0, 4, "TAGS\x01y", None),
    ], COLS + ", compaction_key string")
    assert_df_equality(latest_per_key(with_compaction_key(df)), expected, ignore_row_order=True)


def test_compaction_key_takes_the_last_keys_as_the_codec_does(spark):
    """A name given twice keeps its last value (RocketMQ's MessageDecoder.string2messageProperties
    fills a HashMap; ``store.codec.string_to_properties``); an empty KEYS value is no value."""
    from rocketlake.store.codec import string_to_properties
    props = ["KEYS\x01first\x02TAGS\x01A\x02KEYS\x01last", "KEYS\x01only\x02KEYS\x01",
             "KEYS\x01\x02KEYS\x01late"]
    df = spark.createDataFrame([("t", 0, i, p) for i, p in enumerate(props)], COLS)
    got = [r["compaction_key"] for r in with_compaction_key(df).orderBy("origin_offset").collect()]
    assert got == ["last", "only", "late"] == [string_to_properties(p)["KEYS"] for p in props]
