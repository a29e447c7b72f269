"""chispa tests of the pure transforms on tiny literal DataFrames."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from chispa import assert_df_equality
from pyspark.sql import functions as F

from rocketlake.store.index import IndexService
from rocketlake.transforms.consume_queue_units import consumequeue_units
from rocketlake.transforms.index_entries import index_chain, index_key_hash, index_keys

MSG_SCHEMA = ("commitlog_offset long, size int, topic string, queue_id int, queue_offset long, "
              "sys_flag int, store_timestamp long, tags_code long, keys array<string>, "
              "uniq_key string")


def test_consumequeue_units_skip_prepared_and_rollback(spark) -> None:
    msgs = spark.createDataFrame([
        (0, 100, "t", 0, 0, 0, 1000, 7, None, None),      # NOT
        (100, 90, "t", 0, 0, 4, 1000, 7, None, None),     # PREPARED: no unit
        (190, 80, "t", 0, 1, 8, 1000, 7, None, None),     # COMMIT
        (270, 70, "t", 0, 0, 12, 1000, 7, None, None),    # ROLLBACK: no unit
        (340, 60, "u", 3, 5, 0x30, 1000, -2, None, None),  # IPv6 hosts do not matter
    ], MSG_SCHEMA)
    expected = spark.createDataFrame([
        ("t", 0, 0, 0, 100, 7), ("t", 0, 1, 190, 80, 7), ("u", 3, 5, 340, 60, -2),
    ], "topic string, queue_id int, queue_offset long, commitlog_offset long, size int, "
       "tags_code long")
    assert_df_equality(consumequeue_units(msgs), expected, ignore_row_order=True,
                       ignore_nullable=True)


def test_index_keys_uniq_first_then_keys_none_for_rollback(spark) -> None:
    msgs = spark.createDataFrame([
        (0, 100, "t", 0, 0, 0, 1000, 0, ["a", "b"], "U1"),
        (100, 90, "t", 0, 0, 4, 2000, 0, ["p"], None),     # PREPARED is indexed
        (190, 80, "t", 0, 0, 12, 3000, 0, ["r"], "U2"),    # ROLLBACK is not
        (270, 70, "v", 0, 1, 8, 4000, 0, None, "U3"),
    ], MSG_SCHEMA)
    expected = spark.createDataFrame([
        (0, 0, 1000, "t", "t#U1"), (0, 1, 1000, "t", "t#a"), (0, 2, 1000, "t", "t#b"),
        (100, 0, 2000, "t", "t#p"), (270, 0, 4000, "v", "v#U3"),
    ], "commitlog_offset long, key_pos int, store_timestamp long, topic string, key string")
    assert_df_equality(index_keys(msgs), expected, ignore_row_order=True, ignore_nullable=True)


def test_index_key_hash_matches_spec(spark) -> None:
    df = spark.createDataFrame([("abc#Hello",)], "key string")
    assert df.select(index_key_hash("key")).first()[0] == 1492521647  # docs/FORMAT.md §7


def library_index(tmp: Path, keys: list[str], phy: list[int], ts: list[int], slots: int,
                  entries: int) -> list[tuple]:
    """(file, position, keyHash, phy, timeDiff, prev) as the library's IndexService writes them."""
    svc = IndexService(tmp, slots, entries)
    svc.add_many([(k,) for k in keys], phy, ts)
    svc.build()
    out = []
    for n, f in enumerate(svc.files):
        for pos, (h, p, d, prev) in enumerate(f.entries[1:f.index_count].tolist(), 1):
            out.append((n, pos, h, p, d, prev))
    svc.close()
    return out


def test_index_chain_equals_the_library_puts(spark, tmp_path: Path) -> None:
    # 4 slots and 4 entries (3 keys per file): collisions, several files, time differences.
    rng = np.random.default_rng(7)
    n = 23
    keys = [f"t#k{int(v)}" for v in rng.integers(0, 9, n)]
    phy = [i * 100 for i in range(n)]
    ts = [1_700_000_000_000 + i * 700 for i in range(n)]
    rows = [(p, 0, t, "t", k) for p, t, k in zip(phy, ts, keys)]
    df = spark.createDataFrame(rows, "commitlog_offset long, key_pos int, store_timestamp long, "
                                     "topic string, key string")
    chain = index_chain(df, slot_num=4, entry_num=4, bucket_bytes=500)
    expected = spark.createDataFrame(
        library_index(tmp_path, keys, phy, ts, 4, 4),
        "file_no long, position int, key_hash int, phy_offset long, time_diff int, prev_index int")
    assert_df_equality(chain.entries, expected, ignore_row_order=True, ignore_nullable=True)
    files = chain.files.orderBy("file_no").collect()
    assert [f["index_count"] for f in files] == [4] * 7 + [3]
    assert files[1]["first_ts"] == ts[3] and files[1]["last_phy"] == phy[5]
    chain.release()


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
