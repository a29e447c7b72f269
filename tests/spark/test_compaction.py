"""chispa tests for the key-compaction transforms on tiny literal DataFrames (``properties`` as
the ``rocketmq`` source gives it: a map, whose last-KEYS-wins rule the kernel tests check)."""
from __future__ import annotations

from chispa import assert_df_equality

from rocketlake.transforms.compaction import latest_per_key, with_compaction_key

COLS = "topic string, queue_id int, origin_offset long, properties map<string,string>"


def test_compaction_key_is_the_whole_keys_value(spark):
    df = spark.createDataFrame([
        ("t", 0, 0, {"TAGS": "A", "KEYS": "k1 k2"}),
        ("t", 0, 2, {"TAGS": "A"}),                 # no KEYS
        ("t", 0, 3, {"XKEYS": "not-a-key"}),        # a name that only ends in KEYS
        ("t", 0, 4, {}),
    ], COLS)
    got = [r["compaction_key"] for r in with_compaction_key(df).orderBy("origin_offset").collect()]
    assert got == ["k1 k2", None, None, None]


def test_latest_per_key_per_queue_keeps_unkeyed(spark):
    a, b, x, y = {"KEYS": "a"}, {"KEYS": "b"}, {"TAGS": "x"}, {"TAGS": "y"}
    df = spark.createDataFrame([
        ("t", 0, 0, a), ("t", 0, 1, b), ("t", 0, 2, a),
        ("t", 1, 0, a),                       # same key, other queue: kept separately
        ("t", 0, 3, x), ("t", 0, 4, y),       # no key: both kept
    ], COLS)
    expected = spark.createDataFrame([
        ("t", 0, 1, "b"), ("t", 0, 2, "a"), ("t", 1, 0, "a"), ("t", 0, 3, None), ("t", 0, 4, None),
    ], "topic string, queue_id int, origin_offset long, compaction_key string")
    kept = latest_per_key(with_compaction_key(df)).drop("properties")  # Spark cannot sort maps
    assert_df_equality(kept, expected, ignore_row_order=True)
