"""Key compaction as DataFrame functions: the latest message per (topic, queue, KEYS value)."""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from rocketlake.store import codec


def with_compaction_key(messages: DataFrame) -> DataFrame:
    """Adds ``compaction_key``: the whole KEYS value of each record as the codec reads it
    (``store.codec.string_to_properties``: the last non-empty KEYS), null without KEYS."""
    key = F.regexp_extract("properties", codec.property_value_pattern(codec.PROPERTY_KEYS, java=True), 1)
    return messages.withColumn("compaction_key", F.when(key != "", key))


def latest_per_key(messages: DataFrame) -> DataFrame:
    """Keep, per (topic, queue_id, compaction_key), the row with the highest ``origin_offset``.

    Rows without a key cannot be superseded and are all kept.
    """
    newest = Window.partitionBy("topic", "queue_id", "compaction_key").orderBy(F.col("origin_offset").desc())
    keyed = (messages.filter(F.col("compaction_key").isNotNull())
             .withColumn("_rank", F.row_number().over(newest))
             .filter(F.col("_rank") == 1).drop("_rank"))
    return keyed.unionByName(messages.filter(F.col("compaction_key").isNull()))
