"""Rows of the ``rocketmq`` source -> rows of the Delta archive ``<lake>/messages_archive``.

Column names follow `rocketlake dump commitlog`, plus ``keys`` and ``tags``, the partition
columns ``topic`` and ``store_date``, the ``store`` / ``commitlog_file`` each row came from, and
the born and store times as TIMESTAMPs (``born_ts``, ``store_ts``: the source's ``born_time`` /
``store_time``) beside their epoch ms. Every record field comes from the source (built by the
kernels, bodies as binary straight from Arrow); only cheap per-row expressions are added here.
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

PARTITION_COLUMNS = ("topic", "store_date")
ARCHIVE_COLUMNS = (
    "store", "commitlog_file", "commitlog_offset", "size", "magic", "body_crc", "queue_id", "flag",
    "queue_offset", "sys_flag", "born_timestamp", "born_host", "store_timestamp", "store_host",
    "reconsume_times", "prepared_transaction_offset", "body", "topic", "properties", "msg_id",
    "keys", "tags", "store_date", "born_ts", "store_ts",
)
#: archive columns that are a source column under another name
RENAMED = {"born_ts": "born_time", "store_ts": "store_time"}
#: the ``rocketmq`` source columns the archive reads
SOURCE_COLUMNS = tuple(RENAMED.get(c, c) for c in ARCHIVE_COLUMNS
                       if c not in ("store", "commitlog_file", "store_date"))


def archive_rows(messages: DataFrame, store: str, file_size: int) -> DataFrame:
    """``rocketmq`` source rows (at least :data:`SOURCE_COLUMNS`) -> archive rows, in
    :data:`ARCHIVE_COLUMNS` order: ``commitlog_file`` is the name of the record's CommitLog file,
    ``store_date`` the UTC date of the store time."""
    start = F.col("commitlog_offset") - F.col("commitlog_offset") % F.lit(file_size)
    extra = {
        "store": F.lit(store),
        "commitlog_file": F.lpad(start.cast("string"), 20, "0"),
        "store_date": F.to_date("store_time"),
    }
    return messages.select(*[extra[c].alias(c) if c in extra else F.col(RENAMED.get(c, c)).alias(c)
                             for c in ARCHIVE_COLUMNS])
