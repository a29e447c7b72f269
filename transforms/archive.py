"""CommitLog records -> rows of the Delta archive ``<lake>/messages_archive``.

Column names follow `rocketlake dump commitlog`, plus ``keys`` and ``tags``, the partition
columns ``topic`` and ``store_date``, and the ``store`` / ``commitlog_file`` each row came from.
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rocketlake.store import codec

ARCHIVE_TABLE = "messages_archive"
PARTITION_COLUMNS = ("topic", "store_date")
ARCHIVE_COLUMNS = (
    "store", "commitlog_file", "commitlog_offset", "size", "magic", "body_crc", "queue_id", "flag",
    "queue_offset", "sys_flag", "born_timestamp", "born_host", "store_timestamp", "store_host",
    "reconsume_times", "prepared_transaction_offset", "body", "topic", "properties", "msg_id",
    "keys", "tags", "store_date",
)


def archive_rows(records: DataFrame, store: str, file_size: int) -> DataFrame:
    """Full scan rows (``with_body``, ``full_head``) -> archive rows.

    ``properties`` becomes a map; ``msg_id`` is the offset msgId (store host + port + offset,
    uppercase hex); ``store_date`` is the UTC date of the store time.
    """
    sep = codec.NAME_VALUE_SEPARATOR
    entries = F.transform(F.split(F.col("properties"), codec.PROPERTY_SEPARATOR),
                          lambda p: F.struct(F.split(p, sep).getItem(0).alias("key"),
                                             F.split(p, sep).getItem(1).alias("value")))
    # as the codec reads properties: drop segments without a separator, name or value
    props = F.map_from_entries(F.filter(
        entries, lambda e: (e["key"] != "") & e["value"].isNotNull() & (e["value"] != "")))
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
    )
