"""CommitLog records -> rows of the Delta archive ``<lake>/messages_archive``.

Column names follow `rocketlake dump commitlog`, plus ``keys`` and ``tags``, the partition
columns ``topic`` and ``store_date``, the ``store`` / ``commitlog_file`` each row came from, and
the born and store times as TIMESTAMPs (``born_ts``, ``store_ts``) beside their epoch ms.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from rocketlake.store import codec

ARCHIVE_TABLE = "messages_archive"
PARTITION_COLUMNS = ("topic", "store_date")
ARCHIVE_COLUMNS = (
    "store", "commitlog_file", "commitlog_offset", "size", "magic", "body_crc", "queue_id", "flag",
    "queue_offset", "sys_flag", "born_timestamp", "born_host", "store_timestamp", "store_host",
    "reconsume_times", "prepared_transaction_offset", "body", "topic", "properties", "msg_id",
    "keys", "tags", "store_date", "born_ts", "store_ts",
)


def properties_map(properties: Column) -> Column:
    """A properties string as a map, read as ``store.codec.string_to_properties`` reads it: split
    at the first \\x01 of each segment, segments without one or with an empty name or value
    dropped, and a name given twice keeps its last value. Built so that no duplicate key reaches
    the map (whatever ``spark.sql.mapKeyDedupPolicy`` says)."""
    entries = F.transform(F.split(properties, codec.PROPERTY_SEPARATOR),
                          lambda p: F.split(p, codec.NAME_VALUE_SEPARATOR, 2))
    pairs = F.filter(entries, lambda e: (F.size(e) == 2) & (e[0] != "") & (e[1] != ""))
    empty = F.create_map().cast("map<string,string>")
    return F.aggregate(pairs, empty, lambda acc, e: F.map_concat(
        F.map_filter(acc, lambda k, _: k != e[0]), F.create_map(e[0], e[1])))


def archive_rows(records: DataFrame, store: str, file_size: int) -> DataFrame:
    """Full scan rows (``with_body``, ``full_head``) -> archive rows.

    ``properties`` becomes a map; ``msg_id`` is the offset msgId (store host + port + offset,
    uppercase hex); ``store_date`` is the UTC date of the store time.
    Columns in :data:`ARCHIVE_COLUMNS` order.
    """
    props = properties_map(F.col("properties"))
    msg_id = F.upper(F.concat(F.hex("store_addr"), F.lpad(F.hex("store_port"), 8, "0"),
                              F.lpad(F.hex("commitlog_offset"), 16, "0")))
    start = F.col("commitlog_offset") - F.col("commitlog_offset") % F.lit(file_size)
    return records.select(
        F.lit(store).alias("store"),
        F.lpad(start.cast("string"), 20, "0").alias("commitlog_file"),
        "commitlog_offset", "size", "magic", "body_crc", "queue_id", "flag", "queue_offset",
        "sys_flag", "born_timestamp", "born_host", "store_timestamp", "store_host",
        "reconsume_times", "prepared_transaction_offset", "body", "topic",
        props.alias("properties"), msg_id.alias("msg_id"), "keys",
        props[codec.PROPERTY_TAGS].alias("tags"),
        F.to_date(F.timestamp_millis("store_timestamp")).alias("store_date"),
        F.timestamp_millis("born_timestamp").alias("born_ts"),
        F.timestamp_millis("store_timestamp").alias("store_ts"),
    )
