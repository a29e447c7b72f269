"""Key compaction as DataFrame functions: the latest message per (topic, queue, KEYS value)."""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from rocketlake.store import codec


def with_compaction_key(messages: DataFrame) -> DataFrame:
    """Adds ``compaction_key``: the whole KEYS value of each record, null without KEYS.
    ``properties`` is the record's properties map (the ``rocketmq`` source's, built as
    ``store.codec.string_to_properties`` reads the string: the last non-empty KEYS)."""
    return messages.withColumn("compaction_key", F.col("properties")[codec.PROPERTY_KEYS])


def latest_per_key(messages: DataFrame) -> DataFrame:
    """Keep, per (topic, queue_id, compaction_key), the row with the highest ``origin_offset``.

    Rows without a key cannot be superseded and are all kept.
    """
    newest = Window.partitionBy("topic", "queue_id", "compaction_key").orderBy(F.col("origin_offset").desc())
    keyed = (messages.filter(F.col("compaction_key").isNotNull())
             .withColumn("_rank", F.row_number().over(newest))
             .filter(F.col("_rank") == 1).drop("_rank"))
    return keyed.unionByName(messages.filter(F.col("compaction_key").isNull()))
